"""`--lease kubernetes` against a faithful fake of the Lease API (tests/_kube_fake.py): no kube-apiserver
runs on this machine. The official `kubernetes` client makes every request."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest
from kubernetes import client as k8s

from reconciler.fencing import Fenced
from reconciler.runtime.kubernetes_lease import KubernetesLease
from tests._kube_fake import FakeKubeServer


@pytest.fixture
def kube() -> Iterator[FakeKubeServer]:
    with FakeKubeServer() as server:
        yield server


def _lease(
    server: FakeKubeServer,
    identity: str,
    duration: float = 60.0,
    margin: float = 10.0,
    monotonic: Callable[[], float] = time.monotonic,
) -> KubernetesLease:
    configuration = k8s.Configuration(host=server.url)
    return KubernetesLease(
        k8s.ApiClient(configuration),
        namespace="paletteai",
        identity=identity,
        duration=duration,
        margin=margin,
        timeout=60.0,  # a hang bound: a request on a busy machine may be slow
        monotonic=monotonic,
    )


def _died(server: FakeKubeServer, seconds_ago: float) -> None:
    """The stored Lease as its holder left it, dead ``seconds_ago``: its renewTime moved back."""
    renewed = datetime.now(UTC) - timedelta(seconds=seconds_ago)
    spec = server.api.leases[("paletteai", "paletteai-reconciler")]["spec"]
    spec["renewTime"] = renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_first_instance_takes_the_lease_and_the_second_stands_by(kube: FakeKubeServer) -> None:
    first, second = _lease(kube, "pod-a"), _lease(kube, "pod-b")
    assert first.acquire() and first.holds()
    assert not second.acquire() and not second.holds()
    assert second.holder() == "pod-a"
    assert first.acquire(), "the holder renews"
    stored = kube.api.leases[("paletteai", "paletteai-reconciler")]
    assert stored["spec"]["holderIdentity"] == "pod-a"
    assert stored["spec"]["leaseDurationSeconds"] == 60


def test_every_renewal_is_a_compare_and_swap_on_the_resource_version(kube: FakeKubeServer) -> None:
    lease = _lease(kube, "pod-a")
    assert lease.acquire() and lease.acquire() and lease.acquire()
    puts = [body for method, _, body in kube.api.requests if method == "PUT"]
    assert len(puts) == 2
    assert all(body and body["metadata"].get("resourceVersion") for body in puts)


def test_release_hands_over_at_once(kube: FakeKubeServer) -> None:
    first, second = _lease(kube, "pod-a"), _lease(kube, "pod-b")
    assert first.acquire()
    first.release()
    assert not first.holds()
    assert second.acquire() and second.holds()
    assert kube.api.leases[("paletteai", "paletteai-reconciler")]["spec"]["leaseTransitions"] == 1


def test_standby_takes_over_only_after_the_lease_expires(kube: FakeKubeServer) -> None:
    first, second = _lease(kube, "pod-a"), _lease(kube, "pod-b")
    assert first.acquire()
    assert not second.acquire()
    _died(kube, 59.0)  # not expired yet: renewTime + 60 s is still ahead
    assert not second.acquire()
    _died(kube, 61.0)  # pod-a stopped renewing (it died): its renewTime + 60 s is now in the past
    assert second.acquire()
    assert second.holder() == "pod-b"
    assert not first.acquire(), "the old holder finds it taken and stands by"
    assert not first.holds()


def test_a_holder_that_cannot_renew_stops_writing_before_the_lease_can_expire(kube: FakeKubeServer) -> None:
    now = [100.0]  # a pinned monotonic clock: time moves only when the test says so
    lease = _lease(kube, "pod-a", duration=3, margin=1.5, monotonic=lambda: now[0])
    assert lease.acquire()
    kube.stop()  # the API server is gone: renewals fail
    now[0] += 1.0
    assert not lease.acquire()
    assert lease.holds(), "within the write deadline of its last successful renewal"
    now[0] += 0.5  # duration - margin since that renewal started: 1.5 s before the Lease could expire
    assert not lease.holds()
    assert not lease.acquire()


def test_two_standbys_racing_for_an_expired_lease_never_both_win(kube: FakeKubeServer) -> None:
    for round_ in range(15):
        contenders = [_lease(kube, f"pod-{round_}-{i}") for i in range(3)]  # 60 s: a slow loser still loses
        kube.api.leases.clear()
        if round_ % 2:  # an expired Lease of a dead holder: every contender replaces the same version
            kube.api.leases[("paletteai", "paletteai-reconciler")] = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {
                    "name": "paletteai-reconciler",
                    "namespace": "paletteai",
                    "resourceVersion": "dead-1",
                    "uid": "u",
                    "creationTimestamp": "2026-01-01T00:00:00Z",
                },
                "spec": {
                    "holderIdentity": "dead",
                    "leaseDurationSeconds": 1,
                    "renewTime": "2026-01-01T00:00:00.000000Z",
                    "leaseTransitions": 3,
                },
            }
        barrier = threading.Barrier(len(contenders))
        won: list[str] = []

        def contend(lease: KubernetesLease, barrier: threading.Barrier, won: list[str]) -> None:
            barrier.wait()
            if lease.acquire():
                won.append(lease.identity)

        threads = [threading.Thread(target=contend, args=(c, barrier, won)) for c in contenders]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(won) == 1, won


def test_the_fence_refuses_writes_from_the_write_deadline_on_a_pinned_monotonic_clock(
    kube: FakeKubeServer,
) -> None:
    """The write deadline is the last successful write's start + duration - margin (docs/leases.md,
    "Fencing"): a renewal extends it; missed renewals stop writes before the Lease could expire."""
    now = [100.0]
    configuration = k8s.Configuration(host=kube.url)
    lease = KubernetesLease(
        k8s.ApiClient(configuration), namespace="paletteai", identity="pod-a", monotonic=lambda: now[0]
    )
    with pytest.raises(Fenced, match="does not hold"):
        lease.fence()
    assert lease.acquire()
    now[0] += 49.0  # 60 s lease, 10 s margin: writes until +50
    lease.fence()
    assert lease.acquire()  # renewed at +49: writes until +99
    now[0] += 50.0
    with pytest.raises(Fenced, match="past its write deadline"):
        lease.fence()
    assert not lease.holds()
