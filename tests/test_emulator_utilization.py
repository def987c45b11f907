"""The emulator's utilisation export: PATCH a cluster's ratios, scrape /metrics/clusters without a key."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from reconciler.emulator import EmulatorServer, EmulatorState
from tests._scaling_support import two_cluster_snapshot


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def server(clock: FakeClock) -> Iterator[EmulatorServer]:
    state = EmulatorState(two_cluster_snapshot(), provision_seconds=0.0, clock=clock)
    with EmulatorServer(state, "the-key") as running:
        yield running


def samples(server: EmulatorServer) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = httpx.get(server.url + "/metrics/clusters")  # no key
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    out = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def uid_of(server: EmulatorServer, name: str) -> str:
    return next(c.uid for c in server.state.clusters.values() if c.name == name)


def test_gpu_ratio_is_exported_per_host_and_gpu_of_running_clusters(server: EmulatorServer) -> None:
    response = httpx.patch(
        f"{server.url}/__emulator/clusters/{uid_of(server, 'pool-hot')}/utilization", json={"gpu": 0.9}
    )
    assert response.status_code == 200, response.text
    found = samples(server)
    hot = {
        k: v
        for k, v in found.items()
        if k[0] == "DCGM_FI_PROF_GR_ENGINE_ACTIVE" and ("cluster", "pool-hot") in k[1]
    }
    assert len(hot) == 16  # 2 hosts x 8 GPUs
    assert set(hot.values()) == {0.9}
    cold = [
        v
        for k, v in found.items()
        if k[0] == "DCGM_FI_PROF_GR_ENGINE_ACTIVE" and ("cluster", "pool-cold") in k[1]
    ]
    assert cold == [0.0] * 4  # unset utilisation is 0
    assert not any(("Hostname", "free-1") in k[1] for k in found)  # a host outside clusters is not exported


def test_cpu_counters_advance_with_the_set_ratio_and_never_go_back(
    server: EmulatorServer, clock: FakeClock
) -> None:
    uid = uid_of(server, "pool-cold")
    httpx.patch(f"{server.url}/__emulator/clusters/{uid}/utilization", json={"cpu": 0.25})
    cold_1 = (("cluster", "pool-cold"), ("cpu", "31"), ("instance", "cold-1"))
    key_user = ("node_cpu_seconds_total", (*cold_1, ("mode", "user")))
    key_idle = ("node_cpu_seconds_total", (*cold_1, ("mode", "idle")))
    first = samples(server)
    clock.now += 100.0
    second = samples(server)
    # each of the 32 cores, over 100 s: a quarter user, three quarters idle
    assert second[key_user] - first[key_user] == pytest.approx(100 * 0.25)
    assert second[key_idle] - first[key_idle] == pytest.approx(100 * 0.75)
    per_core = [k for k in second if k[0] == "node_cpu_seconds_total" and ("instance", "cold-1") in k[1]]
    assert len(per_core) == 32 * 2
    httpx.patch(f"{server.url}/__emulator/clusters/{uid}/utilization", json={"cpu": 1.0})
    clock.now += 10.0
    third = samples(server)
    assert third[key_user] - second[key_user] == pytest.approx(10)
    assert third[key_idle] == pytest.approx(second[key_idle])


def test_clusters_that_are_not_running_are_not_exported(clock: FakeClock) -> None:
    state = EmulatorState(two_cluster_snapshot(), provision_seconds=0.0, clock=clock)
    uid = next(c.uid for c in state.clusters.values() if c.name == "pool-hot")
    state.delete_cluster(uid, None)
    with EmulatorServer(state, "the-key") as server:
        names = {dict(k[1]).get("cluster") for k in samples(server)}
    assert names == {"pool-cold"}


@pytest.mark.parametrize(
    ("body", "status"),
    [({"gpu": 1.5}, 400), ({"cpu": -0.1}, 400), ({"gpu": True}, 400), ({"memory": 0.5}, 400), ({}, 400)],
)
def test_bad_utilisation_is_refused_with_400(server: EmulatorServer, body: object, status: int) -> None:
    response = httpx.patch(
        f"{server.url}/__emulator/clusters/{uid_of(server, 'pool-hot')}/utilization", json=body
    )
    assert response.status_code == status
    assert "ratio" in response.text or "body" in response.text


def test_unknown_cluster_is_404(server: EmulatorServer) -> None:
    response = httpx.patch(f"{server.url}/__emulator/clusters/nope/utilization", json={"gpu": 0.5})
    assert response.status_code == 404


def test_scrapes_are_not_counted_as_palette_requests(server: EmulatorServer) -> None:
    samples(server)
    assert server.stats.count() == 0
