"""Recorded pool sizes checked against Palette's machine pools (pure, ``status/palette_check.py``): a
settled record that implies another size than the pool's Running cluster holds is repaired to what the
cluster has; a record with an action under way, a pool whose inputs changed since its last status, or
one whose last status was not Running is planned from its record as before."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.edgehost import GpuDevice
from reconciler.inventory import HostState, Machine
from reconciler.model.conditions import Phase
from reconciler.model.gpu import canonical_family
from reconciler.model.mig import catalogue_entry
from reconciler.placement.admission_types import PreviousAdmission
from reconciler.placement.mig import MigInstance as Slot
from reconciler.placement.mig import is_valid_layout, valid_layouts
from reconciler.placement.mig_layouts import GpuLayout
from reconciler.placement.units import MigInstance
from reconciler.plan import Observed
from reconciler.resolve import route
from reconciler.scaling import Direction
from reconciler.scaling.record_types import RecordedAction, ScalingStatus
from reconciler.status.palette_check import check_layouts, check_sizes
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
    failed = ScalingStatus("gpu-autoscale", last_action=replace(UP, completed_at=None, failed_at=NOW))
    assert check_sizes(STATE, observed(["a", "b"]), {KEY: failed}, docs())[1] == []  # its host is released
    record = ScalingStatus("gpu-autoscale", last_action=UP)  # implies 16, the cluster holds 8
    assert check_sizes(STATE, observed(["a"]), {KEY: record}, docs(inputs="another spec"))[1] == []
    assert check_sizes(STATE, observed(["a"]), {KEY: record}, docs(Phase.PROVISIONING))[1] == []
    assert len(check_sizes(STATE, observed(["a"]), {KEY: record}, docs())[1]) == 1


# --- MIG layouts against the instances the workloads hold -----------------------------------------

A100 = canonical_family("NVIDIA-A100")
POOL = (NS, "mig")
OWNER = (NS, "small")


def mig_host() -> dict[str, Machine]:
    device = GpuDevice("NVIDIA", "A100-SXM4-80GB", 2, memory="80 GB", mig_capable=True)
    host = replace(machine("h", 2, "NVIDIA-A100", state=HostState.IN_USE), gpu_devices=(device,))
    return {"h": host}


def small(*instances: tuple[str, int]) -> dict[Any, list[PreviousAdmission]]:
    held = tuple(MigInstance("h", 0, profile, start) for profile, start in instances)
    return {POOL: [PreviousAdmission(OWNER, (), held, "AIWorkload")]}


def layout(*slots: tuple[str, int, str | None]) -> dict[Any, tuple[GpuLayout, ...]]:
    return {POOL: (GpuLayout("h", 0, tuple(sorted(Slot(s, p, w) for p, s, w in slots))),)}


def test_a_layout_that_agrees_with_the_instances_is_kept() -> None:
    recorded = layout(("1g.10gb", 0, f"{NS}/small"), ("3g.40gb", 4, None))
    assert check_layouts(recorded, small(("1g.10gb", 0)), mig_host().get) == (recorded, [])


def test_an_instance_the_layout_left_out_is_put_back_and_what_covers_it_dropped() -> None:
    left_out = layout(("1g.10gb", 1, None), ("3g.40gb", 4, None))
    fixed, (repair,) = check_layouts(left_out, small(("1g.10gb", 0)), mig_host().get)
    assert fixed == layout(("1g.10gb", 0, f"{NS}/small"), ("1g.10gb", 1, None), ("3g.40gb", 4, None))
    assert "left out 1g.10gb@0, which ns/small holds; the layout keeps it" in repair.note.replace(NS, "ns")
    covered = layout(("2g.20gb", 0, None), ("3g.40gb", 4, None))  # another instance recorded over it
    fixed, (repair,) = check_layouts(covered, small(("1g.10gb", 0)), mig_host().get)
    assert fixed == layout(("1g.10gb", 0, f"{NS}/small"), ("3g.40gb", 4, None))
    assert repair.dropped == (Slot(0, "2g.20gb", None),) and "(2g.20gb@0 over it dropped)" in repair.note


def test_what_cannot_be_judged_is_left_to_the_planner() -> None:
    recorded = layout(("2g.20gb", 0, None))
    other = small(("1g.10gb", 0))
    other[POOL].append(
        PreviousAdmission((NS, "other"), (), (MigInstance("h", 0, "2g.20gb", 0),), "AIWorkload")
    )
    assert check_layouts(recorded, other, mig_host().get)[1] == []  # two admissions overlap
    assert check_layouts(recorded, small(("1g.10gb", 0)), {}.get)[1] == []  # the GPU's type is unknown
    assert check_layouts({}, small(("1g.10gb", 0)), mig_host().get) == ({}, [])  # no layout: planned afresh


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_a_layout_edited_at_random_keeps_every_instance_a_workload_holds(data: st.DataObject) -> None:
    gpu_type = catalogue_entry("NVIDIA-A100", 80 * 10**9, mig_capable=True)
    assert gpu_type is not None
    full = sorted(data.draw(st.sampled_from([sorted(v) for v in valid_layouts(gpu_type) if len(v) > 1])))
    owned = data.draw(st.lists(st.sampled_from(full), min_size=1, unique=True))
    held = tuple(MigInstance("h", 0, p, s) for p, s in sorted(owned))
    admissions = {POOL: [PreviousAdmission(OWNER, (), held, "AIWorkload")]}
    slots = [Slot(s, p, f"{NS}/small" if (p, s) in owned else None) for p, s in full]
    edited = data.draw(st.lists(st.sampled_from(slots), unique=True))  # some instances left out
    recorded = {POOL: (GpuLayout("h", 0, tuple(sorted(edited))),)}
    fixed, repairs = check_layouts(recorded, admissions, mig_host().get)
    (kept,) = fixed[POOL]
    placements = [(s.profile, s.start) for s in kept.instances]
    assert is_valid_layout(gpu_type, placements)
    assert set(owned) <= set(placements)  # every held instance is in the layout again
    assert len(repairs) == len(set(owned) - {(s.profile, s.start) for s in edited})
