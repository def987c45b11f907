"""Scaling end to end: the emulator's utilisation, scraped by a real Prometheus, read by the client, decided.

One emulator with two Running pool clusters (``pool-hot`` set busy, ``pool-cold`` set idle) and one
Prometheus scraping ``/metrics/clusters`` every second. Windows are seconds long (step 1s) so the test
takes about ten seconds.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from reconciler.emulator import EmulatorServer
from reconciler.emulator.utilization import METRICS_PATH
from reconciler.prometheus import PrometheusClient, PrometheusQueryError, observe_pool
from reconciler.scaling import (
    Availability,
    Direction,
    PendingDemand,
    PoolView,
    Samples,
    Trigger,
    decide,
    replay,
)
from tests._prometheus_support import PrometheusServer, needs_prometheus
from tests._prometheus_support import hot_and_cold_emulator as emulator  # noqa: F401 (fixture)
from tests._prometheus_support import prometheus_of_emulator as prometheus  # noqa: F401 (fixture)
from tests._scaling_support import A100, COLD, HOT, HOT_COLD_WINDOW, hot_cold_policy

pytestmark = [needs_prometheus, pytest.mark.e2e]


def settled(client: PrometheusClient, pool: PoolView, timeout: float = 120.0) -> tuple[Samples, float]:
    """Samples once both windows are full (the first scrapes need a few seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        now = round(time.time(), 3)
        samples = observe_pool(client, hot_cold_policy(), pool.cluster, now)
        full = all(
            s is not None
            and len(s.points) >= HOT_COLD_WINDOW + 1
            and s.availability(now)[0] is Availability.AVAILABLE
            for s in (samples.gpu, samples.cpu)
        )
        if full or time.monotonic() > deadline:
            return samples, now
        time.sleep(1.0)


def test_busy_pool_reads_above_threshold_and_scales_up(prometheus: PrometheusServer) -> None:
    with PrometheusClient(prometheus.url) as client:
        samples, now = settled(client, HOT)
        assert client.queries >= 2
        before = client.queries
        samples = observe_pool(client, hot_cold_policy(), HOT.cluster, now)
        assert client.queries - before == 2  # one range query per metric
    assert samples.gpu is not None and samples.cpu is not None
    assert all(v == pytest.approx(91.0) for _t, v in samples.gpu.points)
    # rate() over 5s settles on the set ratio once the series is 5s old; above 80 throughout
    assert all(v > 80 for _t, v in samples.cpu.points)
    assert samples.cpu.points[-1][1] == pytest.approx(90.0, abs=2.0)
    d = decide(hot_cold_policy(), samples, HOT, None, [], now)
    assert (d.direction, d.trigger, d.resource) == (Direction.UP, Trigger.UTILISATION_HIGH, A100)
    assert d.host is not None and d.host.name == "free-1"
    assert d.message.startswith(
        "scaled up pool-hot by 1 NVIDIA-A100 host (8 GPUs): GPU utilisation 91% > 80% over 5s"
    )
    assert 'cluster="pool-hot"' in d.windows[0].query
    assert d.inputs is not None and replay(hot_cold_policy(), d.inputs) == d


def test_idle_pool_reads_below_threshold_and_scales_down(prometheus: PrometheusServer) -> None:
    with PrometheusClient(prometheus.url) as client:
        samples, now = settled(client, COLD)
    assert samples.gpu is not None and all(v == pytest.approx(10.0) for _t, v in samples.gpu.points)
    d = decide(hot_cold_policy(), samples, COLD, None, [], now)
    assert (d.direction, d.trigger) == (Direction.DOWN, Trigger.UTILISATION_LOW)
    assert d.host is not None and d.host.name == "cold-1"
    assert d.prometheus_available


def test_prometheus_refuses_a_bad_query_with_a_query_error(prometheus: PrometheusServer) -> None:
    with PrometheusClient(prometheus.url) as client, pytest.raises(PrometheusQueryError, match="bad_data"):
        client.query_range("avg(", time.time() - 10, time.time(), 1)


def test_stopped_prometheus_means_unavailable_and_no_scale_down_but_demand_still_scales(
    emulator: EmulatorServer, tmp_path: Path
) -> None:
    target = emulator.url.removeprefix("http://")
    with (
        PrometheusServer(tmp_path / "p", target, METRICS_PATH) as server,
        PrometheusClient(server.url) as client,
    ):
        settled(client, COLD)
        server.stop()
        now = round(time.time(), 3)
        samples = observe_pool(client, hot_cold_policy(), COLD.cluster, now)
    assert samples.gpu is not None and samples.gpu.error is not None
    d = decide(hot_cold_policy(), samples, COLD, None, [], now)
    assert d.direction is Direction.NONE
    assert (d.prometheus_available, d.metrics) == (False, Availability.UNREACHABLE)
    assert d.message.startswith("no scale-down: gpu query failed")
    waiting = [PendingDemand("project-a/batch-7", A100, 8, since=now - 60)]
    grow = decide(hot_cold_policy(), samples, HOT, None, waiting, now)
    assert (grow.direction, grow.trigger) == (Direction.UP, Trigger.PENDING_DEMAND)
