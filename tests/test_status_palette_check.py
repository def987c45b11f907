"""Recorded pool sizes checked against Palette's machine pools (pure, ``status/palette_check.py``): a
settled record that implies another size than the pool's Running cluster holds is repaired to what the
cluster has; a record with an action under way, a pool whose inputs changed since its last status, or
one whose last status was not Running is planned from its record as before."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from reconciler.inventory import HostState
from reconciler.model.conditions import Phase
from reconciler.model.gpu import canonical_family
from reconciler.plan import Observed
from reconciler.resolve import route
from reconciler.scaling import Direction
from reconciler.scaling.record_types import RecordedAction, ScalingStatus
from reconciler.status.palette_check import check_sizes
from reconciler.status.render import INPUTS_HASH, resource_inputs, status_path
from tests._allocate_support import NS, cps, desired, inventory, machine, pool, pool_cluster
from tests._scaling_support import NOW
from tests.test_plan_scaling import policy

H100 = canonical_family("NVIDIA-H100")
KEY = (NS, "shared")
PATH = status_path("ComputePool", *KEY)
STATE = desired(pool("shared", {H100: 8}, scaling_policy="gpu-autoscale"), policy())
UP = RecordedAction(Direction.UP, H100, ("b",), 8, at=NOW - 600, completed_at=NOW - 300)


def observed(workers: list[str]) -> dict[Any, Observed]:
    used = HostState.IN_USE
    machines = [
        *cps(1, state=used),
        machine("a", 8, state=used),
        machine("b", 8, state=used),
        machine("c", 8),
    ]
    clusters = [pool_cluster("shared", ["cp-0"], workers)]
    return {t: Observed(inventory(machines), clusters) for t in route(STATE, "http://palette").targets}


def docs(phase: Phase = Phase.RUNNING, inputs: str | None = None) -> dict[str, Any]:
    hashed = inputs if inputs is not None else resource_inputs(STATE, "ComputePool", *KEY)
    return {PATH: {"status": {"phase": str(phase), INPUTS_HASH: hashed}}}


def test_a_record_that_palette_agrees_with_is_kept() -> None:
    record = ScalingStatus("gpu-autoscale", size={str(H100): 16}, last_action=UP)
    scaling, repairs = check_sizes(STATE, observed(["a", "b"]), {KEY: record}, docs())
    assert scaling == {KEY: record} and repairs == []


def test_a_record_implying_more_or_fewer_gpus_than_the_cluster_holds_is_repaired_to_it() -> None:
    for earlier, workers, implied in ((8, ["a", "b"], 24), (-8, ["a", "b", "c"], 8)):
        record = ScalingStatus(
            "gpu-autoscale", size={str(H100): 16}, earlier={str(H100): earlier}, last_action=UP
        )
        scaling, (repair,) = check_sizes(STATE, observed(workers), {KEY: record}, docs())
        held = 8 * len(workers)
        fixed = scaling[KEY]
        assert fixed is not None and fixed.size == {str(H100): held}
        assert fixed.adjustment() == {H100: held - 8}  # spec.gpus 8 + the actions = what the cluster has
        assert repair.palette == {str(H100): held} and repair.recorded == {str(H100): implied}
        assert f"Palette's machine pools hold {held} NVIDIA-H100" in repair.note


def test_an_action_under_way_or_a_change_of_the_pool_is_not_a_contradiction() -> None:
    growing = ScalingStatus("gpu-autoscale", last_action=replace(UP, completed_at=None))
    assert check_sizes(STATE, observed(["a"]), {KEY: growing}, docs())[1] == []
    record = ScalingStatus("gpu-autoscale", last_action=UP)  # implies 16, the cluster holds 8
    assert check_sizes(STATE, observed(["a"]), {KEY: record}, docs(inputs="another spec"))[1] == []
    assert check_sizes(STATE, observed(["a"]), {KEY: record}, docs(Phase.PROVISIONING))[1] == []
    assert len(check_sizes(STATE, observed(["a"]), {KEY: record}, docs())[1]) == 1
