"""The scaling stage (reconciler/prometheus/stage.py) against an in-process HTTP server that answers
Prometheus's range API: which Prometheus each pool reads, how many queries a pass sends, the bearer token,
and what is recorded when Prometheus cannot be read. The end-to-end test with a real Prometheus scraping
the emulator is tests/test_scaling_stage_e2e.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from reconciler.model.resources import PrometheusSettings, SecretRef
from reconciler.model.scaling import ScalingPolicySpec
from reconciler.prometheus.stage import NO_PROMETHEUS, ScalingStage
from reconciler.scaling import Direction, PendingDemand, PoolView, ScalingReason, render
from reconciler.scaling.pools import ScalingSubject
from tests._git_support import free_port
from tests._prometheus_support import FakePrometheus
from tests._scaling_support import A100, NOW, gpu_host, spec

KEY = ("project-a", "shared-a100")
CLUSTER = "project-a-shared-a100"


@pytest.fixture
def prometheus() -> Iterator[FakePrometheus]:
    with FakePrometheus() as server:
        yield server


def policy() -> ScalingPolicySpec:
    return spec(
        cpu={"scaleUpThreshold": 80, "scaleDownThreshold": 20},
        cpuResourceBounds={"minCPUCount": 0, "maxCPUCount": 1024},
    )


def subject(
    settings: PrometheusSettings | None,
    pending: tuple[PendingDemand, ...] = (),
    workers: tuple[Any, ...] = (gpu_host("a1", 8), gpu_host("a2", 8), gpu_host("a3", 8)),
) -> ScalingSubject:
    view = PoolView("shared-a100", CLUSTER, workers, (gpu_host("free-1", 8),), {A100: 4})
    return ScalingSubject(
        KEY, CLUSTER, "gpu-autoscale", policy(), {A100: 24}, view, pending, prometheus=settings
    )


def test_one_range_query_per_pool_and_metric_at_the_settings_prometheus(prometheus: FakePrometheus) -> None:
    prometheus.answers.values = {"DCGM_FI_PROF_GR_ENGINE_ACTIVE": 91.0, "node_cpu_seconds_total": 50.0}
    with ScalingStage() as stage:
        outcomes = stage.run([subject(PrometheusSettings(url=prometheus.url))], NOW)
        assert stage.queries == 2
    assert [r["path"] for r in prometheus.answers.requests] == ["/api/v1/query_range"] * 2
    assert all(f'cluster="{CLUSTER}"' in r["query"] for r in prometheus.answers.requests)
    # the longest window of each metric: gpu 15m (scale-down), cpu 10m, ending now
    assert {float(r["end"]) - float(r["start"]) for r in prometheus.answers.requests} == {900.0, 600.0}
    outcome = outcomes[KEY]
    assert outcome.decision.direction is Direction.UP and outcome.prometheus_url == prometheus.url
    assert outcome.size == {A100: 24} and outcome.target == {A100: 32}
    last = outcome.status.last_action
    assert last is not None and last.inputs is not None and last.hosts == ("free-1",)
    assert last.inputs.values == (91.0,) * 21 and last.inputs.samples == last.inputs.expected == 21
    assert outcome.commit is not None and outcome.commit.startswith(
        "scaled up shared-a100 by 1 NVIDIA-A100 host (8 GPUs): "
        "GPU utilisation 91% > 80% over 5m0s, 21 samples"
    )
    assert "policy: project-a/gpu-autoscale" in outcome.commit and "values: 91, 91" in outcome.commit
    assert outcome.entry.to_json() == {
        "policy": "gpu-autoscale",
        "decision": "up",
        "reason": "ScaledUp",
        "message": outcome.decision.message,
    }


def test_prometheus_flag_replaces_the_settings_url(prometheus: FakePrometheus) -> None:
    prometheus.answers.values = {"DCGM": 50.0, "node_cpu": 50.0}
    elsewhere = PrometheusSettings(url=f"http://127.0.0.1:{free_port()}")
    with ScalingStage(prometheus.url) as stage:
        outcome = stage.decide(subject(elsewhere), NOW)
    assert outcome.prometheus_url == prometheus.url and len(prometheus.answers.requests) == 2
    assert outcome.decision.prometheus_available and outcome.decision.reason is ScalingReason.STEADY


def test_bearer_token_is_sent_by_reference_and_recorded_nowhere(prometheus: FakePrometheus) -> None:
    prometheus.answers.values = {"DCGM": 91.0, "node_cpu": 50.0}
    settings = PrometheusSettings(url=prometheus.url, bearer_token_secret_ref=SecretRef(env="PROM_TOKEN"))
    with ScalingStage(environ={"PROM_TOKEN": "s3cr3t-token"}) as stage:
        outcome = stage.decide(subject(settings), NOW)
    assert {r["auth"] for r in prometheus.answers.requests} == {"Bearer s3cr3t-token"}
    assert "s3cr3t-token" not in json.dumps(render(outcome.status)) + (outcome.commit or "")
    with ScalingStage(environ={}) as stage:
        missing = stage.decide(subject(settings), NOW)
    assert not missing.decision.prometheus_available
    assert "environment variable PROM_TOKEN is not set" in missing.status.prometheus_message


def test_no_prometheus_configured_means_unavailable_without_a_query_and_demand_still_scales() -> None:
    waiting = (PendingDemand("project-a/batch-7", A100, 8, since=NOW - 600),)
    with ScalingStage() as stage:
        quiet = stage.decide(subject(None), NOW)
        grow = stage.decide(subject(None, waiting), NOW)
        assert stage.queries == 0
    assert quiet.decision.direction is Direction.NONE and not quiet.status.prometheus_available
    assert quiet.status.prometheus_reason == "PrometheusUnavailable"
    assert NO_PROMETHEUS in quiet.status.prometheus_message and quiet.status.decision == "hold"
    assert grow.decision.direction is Direction.UP and grow.status.last_action is not None
    assert grow.status.last_action.trigger == "PendingDemand"


def test_prometheus_error_means_no_scale_down(prometheus: FakePrometheus) -> None:
    prometheus.answers.status = 503
    idle = (gpu_host("a1", 8), gpu_host("a2", 8), gpu_host("a3", 8))
    with ScalingStage(prometheus.url) as stage:
        outcome = stage.decide(subject(None, workers=idle), NOW)
    assert outcome.decision.direction is Direction.NONE and not outcome.decision.prometheus_available
    assert "HTTP 503" in outcome.status.prometheus_message
    assert outcome.status.message.startswith("no scale-down:") and outcome.commit is None
    prometheus.answers.status = 200
    prometheus.answers.values = {"DCGM": 5.0, "node_cpu": 5.0}
    with ScalingStage(prometheus.url) as stage:
        down = stage.decide(subject(None, workers=idle), NOW)
    assert down.decision.direction is Direction.DOWN and down.target == {A100: 16}


def test_written_and_unwritten_actions(prometheus: FakePrometheus) -> None:
    prometheus.answers.values = {"DCGM": 91.0, "node_cpu": 50.0}
    with ScalingStage(prometheus.url) as stage:
        outcome = stage.decide(subject(None), NOW)
    written = outcome.written(NOW + 7)
    assert written.last_action is not None and written.last_action.at == NOW + 7
    assert outcome.unwritten().last_action is None and outcome.unwritten().reason == "ScalingNotWritten"
