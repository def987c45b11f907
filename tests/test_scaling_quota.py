"""A ScalingPolicy stops at its project's GPU quota (docs/environments.md): decision hold, QuotaReached."""

from __future__ import annotations

from dataclasses import replace

from reconciler.model.gpu import GpuFamily
from reconciler.scaling import Direction, Metric, PoolView, Samples, ScalingReason, decide
from reconciler.scaling.record import plan_decision
from tests._scaling_support import NOW, gpu_host, series, spec

HOT = series(Metric.GPU, 91.0)
A100 = GpuFamily("NVIDIA-A100")


def view(room: int | None) -> PoolView:
    base = PoolView(
        "shared-a100", "project-a-shared-a100", (gpu_host("w1", 8), gpu_host("w2", 8)), (gpu_host("f8", 8),)
    )
    return base if room is None else replace(base, quota_room={A100: room})


def test_a_scale_up_past_the_quota_is_held_quota_reached() -> None:
    d = decide(spec(), Samples(gpu=HOT), view(room=4), None, [], NOW)
    assert (d.direction, d.reason) == (Direction.NONE, ScalingReason.QUOTA_REACHED)
    assert plan_decision(d) == "hold" and str(d.reason) == "QuotaReached"
    assert "quota leaves 4" in d.message


def test_a_scale_up_within_the_quota_goes_ahead() -> None:
    assert decide(spec(), Samples(gpu=HOT), view(room=8), None, [], NOW).direction is Direction.UP
    assert decide(spec(), Samples(gpu=HOT), view(room=None), None, [], NOW).direction is Direction.UP
