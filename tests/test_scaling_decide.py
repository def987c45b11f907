"""The scaling decision on synthetic series: every rule of docs/scaling.md and every default."""

from __future__ import annotations

import pytest

from reconciler.model.scaling import DEFAULT_GPU_QUERY
from reconciler.scaling import (
    Availability,
    Direction,
    LastAction,
    Metric,
    PendingDemand,
    PoolView,
    Samples,
    ScalingReason,
    Series,
    Trigger,
    commit_message,
    cpu_host_to_add,
    decide,
    gpu_host_to_add,
    replay,
)
from tests._scaling_support import A100, H100, NOW, cpu_host, gpu_host, series, spec

HOT = series(Metric.GPU, 91.0)
COLD = series(Metric.GPU, 10.0)
MILD = series(Metric.GPU, 50.0)


def pool(
    workers: tuple = (), free: tuple = (), admitted: dict | None = None, min_workers: int = 0
) -> PoolView:
    workers = workers or (gpu_host("w1", 8), gpu_host("w2", 8))
    return PoolView("shared-a100", "project-a-shared-a100", workers, free, admitted or {}, min_workers)


# --- scale up on utilisation ---------------------------------------------------------------------


def test_gpu_utilisation_above_threshold_for_the_whole_window_adds_the_smallest_host_of_the_family() -> None:
    free = (gpu_host("f8", 8), gpu_host("f4", 4), gpu_host("h8", 8, family=H100))
    d = decide(spec(), Samples(gpu=HOT), pool(free=free), None, [], NOW)
    assert (d.direction, d.reason, d.trigger, d.resource, d.host) == (
        Direction.UP,
        ScalingReason.SCALED_UP,
        Trigger.UTILISATION_HIGH,
        A100,
        free[1],
    )
    assert d.prometheus_condition() == {
        "type": "PrometheusAvailable",
        "status": "True",
        "reason": "MetricsAvailable",
        "message": "metrics available",
    }
    assert d.message == (
        "scaled up shared-a100 by 1 NVIDIA-A100 host (4 GPUs): "
        "GPU utilisation 91% > 80% over 5m0s, 21 samples"
    )


def test_one_missing_step_in_the_window_means_not_held() -> None:
    gappy = series(Metric.GPU, 95.0, gaps=[NOW - 60])
    d = decide(spec(), Samples(gpu=gappy), pool(free=(gpu_host("f", 8),)), None, [], NOW)
    assert d.direction is Direction.NONE
    assert d.windows[0].expected == 21 and len(d.windows[0].values) == 20 and not d.windows[0].held


def test_a_missing_step_outside_the_window_does_not_matter() -> None:
    gappy = series(Metric.GPU, 95.0, gaps=[NOW - 301])
    d = decide(spec(), Samples(gpu=gappy), pool(free=(gpu_host("f", 8),)), None, [], NOW)
    assert d.direction is Direction.UP


def test_a_value_equal_to_the_threshold_is_not_beyond_it() -> None:
    at = series(Metric.GPU, lambda t: 80.0 if t == NOW - 150 else 99.0)
    d = decide(spec(), Samples(gpu=at), pool(free=(gpu_host("f", 8),)), None, [], NOW)
    assert d.direction is Direction.NONE and d.reason is ScalingReason.STEADY


def test_high_only_in_the_older_part_of_the_window_does_not_scale_up() -> None:
    fading = series(Metric.GPU, lambda t: 95.0 if t < NOW - 60 else 70.0)
    assert (
        decide(spec(), Samples(gpu=fading), pool(free=(gpu_host("f", 8),)), None, [], NOW).direction
        is Direction.NONE
    )


def test_scale_up_stops_at_max_gpu_count_with_scaling_limited() -> None:
    at_max = spec(gpuResourceBounds=[{"family": "NVIDIA-A100", "minGPUCount": 8, "maxGPUCount": 16}])
    d = decide(at_max, Samples(gpu=HOT), pool(free=(gpu_host("f", 4),)), None, [], NOW)
    assert (d.direction, d.reason) == (Direction.NONE, ScalingReason.LIMITED)
    assert "maximum" in d.message


def test_scale_up_takes_a_smaller_host_when_the_larger_would_pass_the_maximum() -> None:
    tight = spec(gpuResourceBounds=[{"family": "NVIDIA-A100", "minGPUCount": 8, "maxGPUCount": 20}])
    free = (gpu_host("big", 8), gpu_host("small", 2))
    assert decide(tight, Samples(gpu=HOT), pool(free=free), None, [], NOW).host == free[1]
    only_big = decide(tight, Samples(gpu=HOT), pool(free=free[:1]), None, [], NOW)
    assert only_big.reason is ScalingReason.LIMITED


def test_no_free_host_of_the_family_is_reported() -> None:
    d = decide(spec(), Samples(gpu=HOT), pool(free=(gpu_host("h", 8, family=H100),)), None, [], NOW)
    assert d.reason is ScalingReason.NO_CANDIDATE


# --- scale up on demand --------------------------------------------------------------------------


def test_pending_capacity_exceeded_for_scale_up_duration_adds_the_smallest_host_covering_the_shortfall() -> (
    None
):
    free = (gpu_host("f2", 2), gpu_host("f4", 4), gpu_host("f8", 8))
    waiting = [PendingDemand("project-a/batch-7", A100, 3, since=NOW - 300)]
    d = decide(spec(), Samples(gpu=MILD), pool(free=free), None, waiting, NOW)
    assert (d.direction, d.trigger, d.host) == (Direction.UP, Trigger.PENDING_DEMAND, free[1])
    assert d.message == (
        "scaled up shared-a100 by 1 NVIDIA-A100 host (4 GPUs): project-a/batch-7 pending for 5m0s "
        "(needs 3 more NVIDIA-A100 GPUs)"
    )


def test_demand_younger_than_scale_up_duration_waits() -> None:
    waiting = [PendingDemand("project-a/batch-7", A100, 3, since=NOW - 299)]
    d = decide(spec(), Samples(gpu=MILD), pool(free=(gpu_host("f", 8),)), None, waiting, NOW)
    assert d.direction is Direction.NONE


def test_demand_no_single_host_would_admit_adds_nothing_but_the_next_waiting_workload_may_grow() -> None:
    free = (gpu_host("f2", 2), gpu_host("f4", 4))
    waiting = [PendingDemand("project-a/big", A100, 12, since=NOW - 900)]
    d = decide(spec(), Samples(gpu=MILD), pool(free=free), None, waiting, NOW)
    assert (d.direction, d.host, d.reason) == (Direction.NONE, None, ScalingReason.NO_CANDIDATE)
    assert d.message == (
        "no free NVIDIA-A100 host with at least 12 GPUs to add to shared-a100: one more host would not let "
        "project-a/big be admitted"
    )
    later = [*waiting, PendingDemand("project-a/small", A100, 3, since=NOW - 600, per_host=3)]
    grown = decide(spec(), Samples(gpu=MILD), pool(free=free), None, later, NOW)
    assert (grown.direction, grown.host) == (Direction.UP, free[1])


def test_demand_scales_up_even_when_prometheus_is_unreachable() -> None:
    down = Series(Metric.GPU, "q", NOW - 900, NOW, 15.0, error="connection refused")
    waiting = [PendingDemand("project-a/batch-7", A100, 8, since=NOW - 600)]
    d = decide(spec(), Samples(gpu=down), pool(free=(gpu_host("f", 8),)), None, waiting, NOW)
    assert d.direction is Direction.UP and d.trigger is Trigger.PENDING_DEMAND
    assert not d.prometheus_available and d.metrics is Availability.UNREACHABLE


def test_demand_for_a_family_without_a_gpu_rule_is_not_acted_on() -> None:
    waiting = [PendingDemand("project-a/h", H100, 8, since=NOW - 3600)]
    d = decide(spec(), Samples(gpu=MILD), pool(free=(gpu_host("h", 8, family=H100),)), None, waiting, NOW)
    assert d.direction is Direction.NONE


# --- spacing: cooldown, in progress, abort ---------------------------------------------------------


def test_cooldown_runs_from_the_last_write_and_defaults_to_15m() -> None:
    assert spec().cooldown_duration == "15m"
    free = (gpu_host("f", 8),)
    done = LastAction(Direction.UP, A100, "x", written_at=NOW - 899, completed_at=NOW - 600)
    d = decide(spec(), Samples(gpu=HOT), pool(free=free), done, [], NOW)
    assert (d.direction, d.reason) == (Direction.NONE, ScalingReason.COOLDOWN)
    assert d.message == "cooldown: 1s left"
    later = LastAction(Direction.UP, A100, "x", written_at=NOW - 900, completed_at=NOW - 600)
    assert decide(spec(), Samples(gpu=HOT), pool(free=free), later, [], NOW).direction is Direction.UP


def test_cooldown_also_holds_back_demand() -> None:
    done = LastAction(Direction.UP, A100, "x", written_at=NOW - 60, completed_at=NOW - 30)
    waiting = [PendingDemand("project-a/batch-7", A100, 8, since=NOW - 3600)]
    d = decide(spec(), Samples(gpu=HOT), pool(free=(gpu_host("f", 8),)), done, waiting, NOW)
    assert d.reason is ScalingReason.COOLDOWN


def test_an_incomplete_action_blocks_the_next_and_is_failed_after_abort_duration() -> None:
    assert spec().abort_duration == "30m"
    open_action = LastAction(Direction.UP, A100, "f1", written_at=NOW - 1799)
    d = decide(spec(), Samples(gpu=HOT), pool(free=(gpu_host("f", 8),)), open_action, [], NOW)
    assert (d.direction, d.reason) == (Direction.NONE, ScalingReason.IN_PROGRESS)
    stuck = LastAction(Direction.UP, A100, "f1", written_at=NOW - 1800)
    d = decide(spec(), Samples(gpu=HOT), pool(free=(gpu_host("f", 8),)), stuck, [], NOW)
    assert (d.direction, d.reason, d.abort) == (Direction.NONE, ScalingReason.FAILED, stuck)
    assert "not complete 30m0s after its write: Failed" in d.message


def test_a_failed_host_is_not_tried_again_in_the_same_direction() -> None:
    failed = LastAction(Direction.UP, A100, "f4", written_at=NOW - 3600, failed_at=NOW - 1800)
    free = (gpu_host("f4", 4), gpu_host("f8", 8))
    d = decide(spec(), Samples(gpu=HOT), pool(free=free), failed, [], NOW)
    assert d.host == free[1]
    only = decide(spec(), Samples(gpu=HOT), pool(free=free[:1]), failed, [], NOW)
    assert only.direction is Direction.NONE and only.reason is ScalingReason.NO_CANDIDATE


def test_cooldown_after_a_failure_runs_from_the_failure() -> None:
    failed = LastAction(Direction.UP, A100, "f4", written_at=NOW - 3600, failed_at=NOW - 60)
    d = decide(spec(), Samples(gpu=HOT), pool(free=(gpu_host("f8", 8),)), failed, [], NOW)
    assert d.reason is ScalingReason.COOLDOWN


# --- scale down ----------------------------------------------------------------------------------


def test_low_utilisation_for_scale_down_duration_removes_the_host_leaving_least_surplus() -> None:
    workers = (gpu_host("w1", 8, bound=2), gpu_host("w2", 8), gpu_host("w3", 4), gpu_host("w4", 8))
    d = decide(spec(), Samples(gpu=COLD), pool(workers, admitted={A100: 2}), None, [], NOW)
    assert (d.direction, d.reason, d.trigger) == (
        Direction.DOWN,
        ScalingReason.SCALED_DOWN,
        Trigger.UTILISATION_LOW,
    )
    assert d.host == workers[1]
    assert d.message == (
        "scaled down shared-a100 by 1 NVIDIA-A100 host (8 GPUs): "
        "GPU utilisation 10% < 30% over 15m0s, 61 samples"
    )


def test_scale_down_needs_the_longer_scale_down_window() -> None:
    recent = series(Metric.GPU, lambda t: 10.0 if t > NOW - 600 else 50.0)
    workers = (gpu_host("w1", 8), gpu_host("w2", 8), gpu_host("w3", 8))
    assert decide(spec(), Samples(gpu=recent), pool(workers), None, [], NOW).direction is Direction.NONE


def test_scale_down_never_removes_a_host_that_holds_bound_gpus() -> None:
    workers = (gpu_host("w1", 8, bound=1), gpu_host("w2", 8, bound=1), gpu_host("w3", 8, bound=8))
    d = decide(spec(), Samples(gpu=COLD), pool(workers, admitted={A100: 10}), None, [], NOW)
    assert (d.direction, d.reason) == (Direction.NONE, ScalingReason.WOULD_UNBIND)


def test_scale_down_never_removes_a_host_whose_loss_would_unbind_an_admitted_workload() -> None:
    workers = (gpu_host("w1", 8), gpu_host("w2", 8), gpu_host("w3", 8))
    asked: list[str] = []

    def fits_without(host: str) -> bool:
        asked.append(host)
        return host == "w3"  # admission can rebind everything only without w3

    d = decide(spec(), Samples(gpu=COLD), pool(workers), None, [], NOW, fits_without)
    assert d.host == workers[2] and asked == ["w1", "w2", "w3"]
    nothing = decide(spec(), Samples(gpu=COLD), pool(workers), None, [], NOW, lambda _h: False)
    assert nothing.direction is Direction.NONE and nothing.reason is ScalingReason.WOULD_UNBIND


def test_scale_down_stops_at_min_gpu_count() -> None:
    d = decide(spec(), Samples(gpu=COLD), pool((gpu_host("w1", 8),)), None, [], NOW)
    assert (d.direction, d.reason) == (Direction.NONE, ScalingReason.LIMITED)
    mixed = (gpu_host("w1", 8), gpu_host("w2", 4))  # 12: only the 4 may go
    assert decide(spec(), Samples(gpu=COLD), pool(mixed), None, [], NOW).host == mixed[1]


def test_scale_down_keeps_the_pool_minimum_workers() -> None:
    workers = (gpu_host("w1", 8), gpu_host("w2", 8))
    d = decide(spec(), Samples(gpu=COLD), pool(workers, min_workers=2), None, [], NOW)
    assert d.direction is Direction.NONE and d.reason is ScalingReason.LIMITED


@pytest.mark.parametrize(
    ("gpu", "reason"),
    [
        (Series(Metric.GPU, "q", NOW - 900, NOW, 15.0, error="timed out"), Availability.UNREACHABLE),
        (Series(Metric.GPU, "q", NOW - 900, NOW, 15.0), Availability.NO_DATA),
        (series(Metric.GPU, 5.0, now=NOW - 120), Availability.STALE),
        (None, Availability.NO_DATA),
    ],
)
def test_no_scale_down_on_missing_or_stale_metrics(gpu: Series | None, reason: Availability) -> None:
    workers = (gpu_host("w1", 8), gpu_host("w2", 8), gpu_host("w3", 8))
    d = decide(spec(), Samples(gpu=gpu), pool(workers), None, [], NOW)
    assert d.direction is Direction.NONE
    assert (d.prometheus_available, d.metrics) == (False, reason)
    condition = d.prometheus_condition()
    assert (condition["status"], condition["reason"]) == ("False", "PrometheusUnavailable")
    assert d.message.startswith("no scale-down:")


def test_stale_is_reported_with_the_age_of_the_latest_sample() -> None:
    d = decide(spec(), Samples(gpu=series(Metric.GPU, 5.0, now=NOW - 120)), pool(), None, [], NOW)
    assert "the latest sample is 2m0s old" in d.prometheus_message


def test_no_scale_down_while_a_workload_is_pending() -> None:
    workers = (gpu_host("w1", 8), gpu_host("w2", 8), gpu_host("w3", 8))
    waiting = [PendingDemand("project-a/batch-7", A100, 30, since=NOW - 10)]
    d = decide(spec(), Samples(gpu=COLD), pool(workers), None, waiting, NOW)
    assert d.direction is Direction.NONE and "pending" in d.message


def test_a_wish_to_grow_rules_out_shrinking() -> None:
    both = spec(
        cpu={"scaleUpThreshold": 80, "scaleDownThreshold": 20},
        cpuResourceBounds={"minCPUCount": 16, "maxCPUCount": 128},
    )
    workers = (gpu_host("w1", 8), gpu_host("w2", 8), gpu_host("w3", 8))
    cpu_hot = series(Metric.CPU, 95.0)
    d = decide(both, Samples(gpu=COLD, cpu=cpu_hot), pool(workers), None, [], NOW)  # 192 cores: at max
    assert (d.direction, d.reason) == (Direction.NONE, ScalingReason.LIMITED)


def test_the_mig_pool_is_not_scaled_down_with_the_default_query() -> None:
    """DCGM_FI_DEV_GPU_UTIL reads 0 on MIG instances; the default query reads the engine activity."""
    exported = {"DCGM_FI_DEV_GPU_UTIL": 0.0, "DCGM_FI_PROF_GR_ENGINE_ACTIVE": 0.85}  # a busy MIG pool

    def answer(query: str) -> Series:
        metric = next(name for name in exported if name in query)
        return series(Metric.GPU, 100 * exported[metric], query=query)

    workers = (gpu_host("w1", 8, bound=0), gpu_host("w2", 8), gpu_host("w3", 8))
    default = spec()
    assert default.metrics.gpu_query == DEFAULT_GPU_QUERY
    d = decide(default, Samples(gpu=answer(default.metrics.gpu_query)), pool(workers), None, [], NOW)
    assert d.direction is not Direction.DOWN and d.windows[0].values[0] == pytest.approx(85.0)
    naive = spec(metrics={"gpuQuery": '100 * avg(DCGM_FI_DEV_GPU_UTIL{cluster="$cluster"})'})
    wrong = decide(naive, Samples(gpu=answer(naive.metrics.gpu_query)), pool(workers), None, [], NOW)
    assert wrong.direction is Direction.DOWN  # what the default avoids


# --- cpu -----------------------------------------------------------------------------------------

CPU_SPEC = {
    "gpu": [],
    "gpuResourceBounds": [],
    "cpu": {"scaleUpThreshold": 80, "scaleDownThreshold": 20},
    "cpuResourceBounds": {"minCPUCount": 16, "maxCPUCount": 256},
}


def test_cpu_scale_up_prefers_a_gpu_less_worker_tagged_host() -> None:
    free = (gpu_host("g1", 1, cpus=32), cpu_host("c-untagged", 64, tagged=False), cpu_host("c-tagged", 64))
    d = decide(spec(**CPU_SPEC), Samples(cpu=series(Metric.CPU, 90.0)), pool(), None, [], NOW)
    assert d.direction is Direction.NONE  # no free hosts offered
    d = decide(spec(**CPU_SPEC), Samples(cpu=series(Metric.CPU, 90.0)), pool(free=free), None, [], NOW)
    assert d.host == free[2] and d.resource == "cpu"
    assert (
        d.message
        == "scaled up shared-a100 by 1 host (64 cores): CPU utilisation 90% > 80% over 5m0s, 21 samples"
    )


def test_cpu_scale_up_else_takes_the_host_with_fewest_gpus_never_an_untagged_gpu_less_one() -> None:
    free = (gpu_host("g8", 8, cpus=32), gpu_host("g2", 2, cpus=32), cpu_host("cp", 64, tagged=False))
    assert cpu_host_to_add(free, room=1000, gpu_room={}) == free[1]


def test_cpu_bounds_count_cores_and_gpu_bounds_still_hold_for_a_cpu_action() -> None:
    free = (cpu_host("c1", 128),)
    assert cpu_host_to_add(free, room=127, gpu_room={}) is None
    gpu_only = (gpu_host("g8", 8, cpus=16),)
    assert cpu_host_to_add(gpu_only, room=1000, gpu_room={A100: 4}) is None
    assert cpu_host_to_add(gpu_only, room=1000, gpu_room={A100: 8}) == gpu_only[0]


def test_cpu_scale_down_removes_a_gpu_less_host_first_and_keeps_min_cpu_count() -> None:
    workers = (gpu_host("g", 8, cpus=64), cpu_host("c1", 32), cpu_host("c2", 16))
    cold = Samples(cpu=series(Metric.CPU, 5.0))
    policy = spec(**{**CPU_SPEC, "cpuResourceBounds": {"minCPUCount": 96, "maxCPUCount": 256}})
    d = decide(policy, cold, pool(workers), None, [], NOW)  # 112 cores, min 96: only the 16 may go
    assert d.direction is Direction.DOWN and d.host == workers[2]


def test_cpu_scale_down_leaves_gpu_hosts_governed_by_a_gpu_rule_alone() -> None:
    both = spec(
        cpu={"scaleUpThreshold": 80, "scaleDownThreshold": 20},
        cpuResourceBounds={"minCPUCount": 16, "maxCPUCount": 512},
    )
    workers = (gpu_host("g1", 8), gpu_host("g2", 8), gpu_host("g3", 8))
    d = decide(both, Samples(gpu=MILD, cpu=series(Metric.CPU, 5.0)), pool(workers), None, [], NOW)
    assert d.direction is Direction.NONE and d.reason is ScalingReason.WOULD_UNBIND


# --- host choice helpers -------------------------------------------------------------------------


def test_gpu_host_ties_break_by_name() -> None:
    free = (gpu_host("b", 8), gpu_host("a", 8))
    assert gpu_host_to_add(A100, free, room=64) == free[1]


# --- the record ----------------------------------------------------------------------------------


def test_the_decision_records_query_window_samples_and_values_and_replays() -> None:
    hot = series(Metric.GPU, lambda t: 85.0 + (t % 7), query='100 * avg(X{cluster="c"})')
    d = decide(spec(), Samples(gpu=hot), pool(free=(gpu_host("f", 8),)), None, [], NOW)
    window = d.windows[0]
    assert (window.query, window.start, window.end, window.step) == (hot.query, NOW - 300, NOW, 15.0)
    assert window.values == tuple(v for t, v in hot.points if t >= NOW - 300)
    assert d.inputs is not None and replay(spec(), d.inputs) == d
    body = commit_message(d, "project-a/gpu-autoscale")
    assert "policy: project-a/gpu-autoscale" in body and "samples: 21 of 21" in body and hot.query in body


def test_the_default_step_is_15s_and_the_defaults_are_the_documented_queries() -> None:
    s = spec(gpu=[{"family": "NVIDIA-A100", "scaleUpThreshold": 80, "scaleDownThreshold": 30}])
    assert s.metrics.step == "15s"
    assert "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in s.metrics.gpu_query
    assert 'mode="idle"' in s.metrics.cpu_query
    assert (s.gpu[0].scale_up_duration, s.gpu[0].scale_down_duration) == ("5m", "10m")
