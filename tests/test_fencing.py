"""Fencing: every write asks the lease at the moment it is sent (docs/leases.md, "Fencing").

Pure tests of the write deadline on a fake monotonic clock, then each place that asks it: the Palette
client (before every attempt of a mutating request, retries included), the status store (before every
push) and a pass (a lease that runs out mid-pass ends it; nothing more reaches Palette or git).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from reconciler.emulator import EmulatorServer
from reconciler.fencing import Fenced, WriteDeadline, never
from reconciler.metrics import PassOutcome
from reconciler.palette.client import PaletteClient
from reconciler.runtime.lease import LeaseFence, NoLease
from reconciler.source.lease import GitLease
from reconciler.source.status_store import StatusStore
from tests._e2e_support import clusters_by_name, controller, status_tip
from tests._git_support import RemoteRepo, git
from tests._palette_support import fast_retry


class FakeMonotonic:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# --- the write deadline (pure) -----------------------------------------------------------------------


def test_nothing_is_written_before_the_first_renewal() -> None:
    deadline = WriteDeadline(40.0, FakeMonotonic())
    assert not deadline.holds() and deadline.deadline() is None
    with pytest.raises(Fenced, match="does not hold"):
        deadline.check("pod-a")


def test_a_renewal_extends_the_deadline_from_when_it_started() -> None:
    clock = FakeMonotonic()
    deadline = WriteDeadline(40.0, clock)  # a 60 s lease with a 20 s margin
    deadline.renewed(clock.now)
    assert deadline.deadline() == 1040.0
    clock.now = 1039.9
    deadline.check()  # still before the deadline
    deadline.renewed(1020.0)  # the renewal that started at 1020 succeeded
    clock.now = 1059.9
    deadline.check()
    assert deadline.deadline() == 1060.0


def test_a_missed_renewal_stops_writes_before_the_lease_could_expire() -> None:
    clock = FakeMonotonic()
    deadline = WriteDeadline(60.0 - 20.0, clock)
    deadline.renewed(clock.now)
    clock.now += 40.0  # renewals at +20 and +40 failed; a standby sees the lease expired at +60 only
    assert not deadline.holds()
    with pytest.raises(Fenced, match="past its write deadline"):
        deadline.check("pod-a")
    clock.now += 19.9  # still before expiry: nothing may be sent
    with pytest.raises(Fenced):
        deadline.check()


def test_a_lost_lease_fences_at_once() -> None:
    clock = FakeMonotonic()
    deadline = WriteDeadline(40.0, clock)
    deadline.renewed(clock.now)
    deadline.lost()
    with pytest.raises(Fenced):
        deadline.check()


def test_no_lease_and_a_dry_run_never_fence() -> None:
    never()
    NoLease().fence()
    fenced = ExpiredLease()
    LeaseFence(fenced, dry_run=True)()
    with pytest.raises(Fenced):
        LeaseFence(fenced)()


class ExpiredLease(NoLease):
    """A lease held at the start of a pass whose write deadline passes after ``writes`` fence checks."""

    def __init__(self, writes: int = 0) -> None:
        super().__init__("pod-a")
        self.left = writes
        self.asked = 0

    def fence(self) -> None:
        self.asked += 1
        if self.left <= 0:
            raise Fenced("the writer lease of pod-a ran out")
        self.left -= 1


def test_the_git_lease_fences_from_its_last_renewal_on_the_monotonic_clock(tmp_path: Path) -> None:
    """A real git lease (60 s, margin 20 s) on a pinned monotonic clock: a renewal extends the deadline;
    with renewals missed it refuses writes 40 s after the last one, 20 s before a standby may take over;
    released and taken over by another holder, it is fenced at once and cannot renew."""
    remote = RemoteRepo(tmp_path)
    remote.commit({"README.md": "config\n"}, "config")
    clock = FakeMonotonic()
    lease = GitLease(str(remote.bare), "pod-a", cache_dir=tmp_path / "a", monotonic=clock)
    with lease:
        with pytest.raises(Fenced):
            lease.fence()  # not taken yet
        assert lease.acquire()
        clock.now += 39.0
        lease.fence()
        assert lease.acquire()  # renewed at +39: writes until +79
        clock.now += 39.0
        lease.fence()
        clock.now += 1.0  # the renewals at +59 and +79 missed: 40 s since the last one
        with pytest.raises(Fenced, match="past its write deadline"):
            lease.fence()
        assert not lease.holds()
        assert lease.acquire()  # nobody took it meanwhile: renewed, writes again
        lease.fence()
        other = GitLease(str(remote.bare), "pod-b", cache_dir=tmp_path / "b")
        lease.release()
        assert other.acquire()  # taken over after the release
        with pytest.raises(Fenced, match="does not hold"):
            lease.fence()
        assert not lease.acquire()
        other.close()


# --- the Palette client -------------------------------------------------------------------------------


def test_every_attempt_of_a_mutating_request_asks_the_fence_and_reads_do_not() -> None:
    sent: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request.method)
        if request.method == "GET":
            return httpx.Response(200, json={"metadata": {"uid": "c1"}, "spec": {}, "status": {}})
        return httpx.Response(503, json={"message": "busy"})

    lease = ExpiredLease(writes=1)  # the first attempt goes out; the retry finds the deadline passed
    client = PaletteClient(
        "http://palette.test",
        "key-0123456789",
        transport=httpx.MockTransport(handler),
        retry=fast_retry(max_attempts=5),
        fence=lease.fence,
    )
    with client:
        client.get_cluster("c1")
        with pytest.raises(Fenced):
            client.update_machine_pool("cfg", "worker-pool", {"poolConfig": {}})
    assert sent == ["GET", "PUT"]  # the retry was never sent
    assert lease.asked == 2


@pytest.mark.parametrize(
    ("call", "method"),
    [
        (lambda c: c.create_edge_native_cluster({"metadata": {"name": "x"}}), "POST"),
        (lambda c: c.delete_cluster("c1"), "DELETE"),
        (lambda c: c.create_machine_pool("cfg", {"poolConfig": {}}), "POST"),
        (lambda c: c.attach_profiles("c1", [{"uid": "p1"}]), "PATCH"),
        (lambda c: c.detach_profiles("c1", ["p1"]), "DELETE"),
    ],
)
def test_no_write_leaves_a_fenced_client(call: Any, method: str) -> None:
    sent: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request.method)
        return httpx.Response(200, json={"uid": "c1"})

    transport = httpx.MockTransport(handler)
    fence = ExpiredLease().fence
    client = PaletteClient("http://palette.test", "key-0123456789", transport=transport, fence=fence)
    with client, pytest.raises(Fenced):
        call(client)
    assert sent == [], method


# --- the status store ---------------------------------------------------------------------------------


def test_a_fenced_status_store_pushes_nothing(tmp_path: Path) -> None:
    remote = RemoteRepo(tmp_path)
    remote.commit({"README.md": "config\n"}, "config")
    store = StatusStore(str(remote.bare), workdir=tmp_path / "status")
    first = store.write({"a.yaml": b"phase: Running\n"}, "first", {})
    store.fence = ExpiredLease().fence
    with pytest.raises(Fenced):
        store.write({"a.yaml": b"phase: Provisioning\n"}, "second", {})
    store.close()
    assert git("rev-parse", "refs/heads/reconciler/status", cwd=remote.bare).strip() == first


# --- a pass -------------------------------------------------------------------------------------------


def test_a_lease_that_runs_out_mid_pass_ends_it_and_nothing_more_is_written(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path
) -> None:
    """The lease is held when the pass starts; its deadline passes once the create intents are on the
    status branch and the first create is sent: the pass stands by with what it did; neither Palette
    nor the status branch hears from it again until it renews, and then nothing is created twice."""
    # Four writes: the gate before the creates, the intent push, the apply stage's check, one create.
    lease = ExpiredLease(writes=4)
    ctl = controller(remote, emulator, tmp_path)
    ctl.lease = lease
    try:
        result = ctl.reconcile_once()
        assert result.outcome is PassOutcome.STANDBY
        writes = emulator.stats.count("POST", "/v1/spectroclusters/edge-native")
        assert 1 <= writes <= 2
        intent_tip = status_tip(remote)  # the intents, written ahead while the lease held; no status
        assert git("ls-tree", "--name-only", intent_tip, cwd=remote.bare).split() == ["reconciler.yaml"]
        again = ctl.reconcile_once()  # still held by holds(), still past its deadline
        assert again.outcome is PassOutcome.STANDBY
        assert emulator.stats.count("POST", "/v1/spectroclusters/edge-native") == writes
        assert status_tip(remote) == intent_tip
        lease.left = 1_000  # renewed
        done = ctl.reconcile_once()
        assert done.outcome is PassOutcome.SUCCESS, done.error
        assert status_tip(remote) != intent_tip
        assert all(len(uids) == 1 for uids in clusters_by_name(emulator).values())
    finally:
        ctl.close()
