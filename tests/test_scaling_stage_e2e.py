"""The scaling stage end to end: the emulator's utilisation, scraped by a real Prometheus, read by the
stage, decided and recorded; Prometheus stopped; a restart that keeps the cooldown from the status file.

One emulator with two Running pool clusters (``pool-hot`` busy, ``pool-cold`` idle) and one Prometheus
scraping ``/metrics/clusters`` every second; windows are 5 s at a 1 s step.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from reconciler.emulator import EmulatorServer
from reconciler.emulator.utilization import METRICS_PATH
from reconciler.model.resources import PrometheusSettings
from reconciler.prometheus.stage import ScalingStage
from reconciler.scaling import Direction, PoolView, ScalingReason, Trigger, parse, render, replay
from reconciler.scaling.pools import ScalingSubject
from reconciler.scaling.record import settle
from reconciler.scaling.stage import ScalingOutcome
from tests._prometheus_support import PrometheusServer, needs_prometheus
from tests._prometheus_support import hot_and_cold_emulator as emulator  # noqa: F401 (fixture)
from tests._prometheus_support import prometheus_of_emulator as prometheus  # noqa: F401 (fixture)
from tests._scaling_support import A100, COLD, HOT, HOT_COLD_WINDOW, gpu_host, hot_cold_policy

pytestmark = [needs_prometheus, pytest.mark.e2e]


def subject(view: PoolView, url: str, previous_yaml: str | None = None) -> ScalingSubject:
    """As ``scaling_subjects`` builds it: the recorded action settled against the cluster's workers."""
    previous = parse(yaml.safe_load(previous_yaml)["scaling"]) if previous_yaml else None
    previous = settle(previous, (h.name for h in view.workers), True, time.time())
    gpus = sum(h.gpus for h in view.workers)
    return ScalingSubject(
        ("project-a", view.name),
        view.cluster,
        "gpu-autoscale",
        hot_cold_policy(cooldownDuration="1h"),
        {A100: gpus},
        view,
        previous=previous,
        prometheus=PrometheusSettings(url=url),
    )


def settled(stage: ScalingStage, view: PoolView, url: str, timeout: float = 120.0) -> ScalingOutcome:
    """The stage's outcome once both windows are full (the first scrapes need a few seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        outcome = stage.decide(subject(view, url), round(time.time(), 3))
        if outcome.decision.prometheus_available and (outcome.acts or time.monotonic() > deadline):
            return outcome
        if time.monotonic() > deadline:
            return outcome
        time.sleep(1.0)


def test_busy_pool_scales_up_with_the_values_recorded(prometheus: PrometheusServer) -> None:
    with ScalingStage() as stage:
        outcome = settled(stage, HOT, prometheus.url)
    d = outcome.decision
    assert (d.direction, d.trigger, d.host and d.host.name) == (
        Direction.UP,
        Trigger.UTILISATION_HIGH,
        "free-1",
    )
    assert outcome.target == {A100: 24} and outcome.prometheus_url == prometheus.url
    last = outcome.status.last_action
    assert last is not None and last.inputs is not None
    assert last.inputs.query is not None and 'cluster="pool-hot"' in last.inputs.query
    assert last.inputs.samples == last.inputs.expected == HOT_COLD_WINDOW + 1
    assert all(v == pytest.approx(91.0) for v in last.inputs.values)
    block = render(outcome.status)
    assert block["lastAction"]["inputs"]["samples"] == HOT_COLD_WINDOW + 1
    assert block["decision"]["decision"] == "up" and block["prometheusAvailable"]["status"] == "True"
    assert outcome.commit is not None
    assert outcome.commit.startswith("scaled up pool-hot by 1 NVIDIA-A100 host (8 GPUs): GPU utilisation 91%")
    assert d.inputs is not None and replay(hot_cold_policy(cooldownDuration="1h"), d.inputs) == d


def test_restart_keeps_the_cooldown_from_the_recorded_status(prometheus: PrometheusServer) -> None:
    with ScalingStage() as stage:
        first = settled(stage, HOT, prometheus.url)
    assert first.acts
    written_at = time.time()
    status_file = yaml.safe_dump({"scaling": render(first.written(written_at))})
    # A new process: a new stage, the pool's status file read back; the host has joined, utilisation is
    # still high, and the policy's cooldown (1h) runs from the recorded write.
    joined = PoolView(HOT.name, HOT.cluster, (*HOT.workers, gpu_host("free-1", 8)), (gpu_host("free-2", 8),))
    with ScalingStage() as stage:
        waiting = stage.decide(subject(HOT, prometheus.url, status_file), round(time.time(), 3))
        again = stage.decide(subject(joined, prometheus.url, status_file), round(time.time(), 3))
        fresh = stage.decide(subject(joined, prometheus.url), round(time.time(), 3))
    assert waiting.decision.reason is ScalingReason.IN_PROGRESS and not waiting.acts
    assert again.decision.reason is ScalingReason.COOLDOWN and not again.acts
    last = again.status.last_action
    assert last is not None and last.at == pytest.approx(written_at, abs=1e-3) and last.completed_at
    assert again.status.message.startswith("cooldown until ")
    assert fresh.acts and fresh.decision.host is not None  # without the record it would scale again
    assert fresh.decision.host.name == "free-2"


def test_stopped_prometheus_means_unavailable_and_no_scale_down(
    emulator: EmulatorServer, tmp_path: Path
) -> None:
    target = emulator.url.removeprefix("http://")
    with PrometheusServer(tmp_path / "p", target, METRICS_PATH) as server, ScalingStage() as stage:
        idle = settled(stage, COLD, server.url)
        assert idle.decision.direction is Direction.DOWN  # it would scale down while Prometheus answers
        server.stop()
        outcome = stage.decide(subject(COLD, server.url), round(time.time(), 3))
    assert outcome.decision.direction is Direction.NONE and outcome.commit is None
    assert not outcome.status.prometheus_available
    assert outcome.status.prometheus_reason == "PrometheusUnavailable"
    assert outcome.status.message.startswith("no scale-down: gpu query failed")
