"""Joint MIG planning inside admission (``PoolMigPlanner`` with ``mig_admission_joint``, kept by
``mig_pool.admit_mig_pool``): the pass's new MIG demand laid out together, bound instances untouched,
never fewer workloads admitted nor more GPUs used than one at a time."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from reconciler.model.pools import WorkloadRequest
from reconciler.placement import mig_pool
from reconciler.placement.admission import admit_pool
from reconciler.placement.admission_types import PoolAdmission, PoolState, PreviousAdmission
from reconciler.placement.mig_admission import PoolMigPlanner
from reconciler.placement.mig_layouts import parse_mig_layouts
from reconciler.placement.mig_outcome import PoolMigOutcome
from reconciler.placement.mig_pool import admit_mig_pool, gpus_held
from tests._admission_support import previous_of
from tests.test_mig_admission import NS, check, mixed_pool, want

PROFILES = ("p1g_10gb", "p1g_20gb", "p2g_20gb", "p3g_40gb", "p4g_40gb", "p7g_80gb")


def run(
    pool: PoolState,
    workloads: Sequence[WorkloadRequest],
    before: tuple[PoolAdmission, PoolMigOutcome] | None = None,
    *,
    joint: bool = True,
) -> tuple[PoolAdmission, PoolMigOutcome]:
    recorded = json.loads(json.dumps(before[1].mig)) if before is not None else None
    previous: list[PreviousAdmission] = previous_of(before[0]) if before is not None else []
    planner = PoolMigPlanner(
        pool, parse_mig_layouts(recorded, "status: mig"), previous, workloads, joint=joint
    )
    result = admit_pool(pool, workloads, previous, planner)
    outcome = planner.finish(result)
    check(pool, result, outcome)
    return result, outcome


def guarded(
    pool: PoolState,
    workloads: Sequence[WorkloadRequest],
    before: tuple[PoolAdmission, PoolMigOutcome] | None = None,
    *,
    joint: bool = True,
) -> tuple[PoolAdmission, PoolMigOutcome]:
    """The product's pass (``admit_mig_pool``) after ``before``."""
    recorded = json.loads(json.dumps(before[1].mig)) if before is not None else None
    previous: list[PreviousAdmission] = previous_of(before[0]) if before is not None else []
    layouts = parse_mig_layouts(recorded, "status: mig")
    result, outcome = admit_mig_pool(pool, workloads, previous, layouts, joint=joint)
    check(pool, result, outcome)
    return result, outcome


def gpus_used(result: PoolAdmission) -> int:
    return len({(i.host_uid, i.gpu) for d in result.workloads.values() for i in d.mig})


def admitted(result: PoolAdmission) -> set[str]:
    return {k[1] for k, d in result.workloads.items() if d.action in ("admit", "admitted")}


def test_two_3g_and_four_2g_take_two_gpus_where_one_at_a_time_takes_three() -> None:
    """One at a time: the two 3g share a GPU, three 2g fill another, the fourth 2g switches a third.
    Jointly: a 3g and two 2g on each of two GPUs."""
    pool = mixed_pool(1)
    workloads = [want("a", p3g_40gb=1), want("b", p3g_40gb=1), want("c", p2g_20gb=3), want("d", p2g_20gb=1)]
    greedy, _ = run(pool, workloads, joint=False)
    joint, outcome = run(pool, workloads)
    assert admitted(joint) == admitted(greedy) == {"a", "b", "c", "d"}
    assert (gpus_used(greedy), gpus_used(joint)) == (3, 2)
    assert outcome.usage.stranded == 0


def test_one_host_per_replica_holds_in_the_joint_plan() -> None:
    pool = mixed_pool(2)
    w = want("spread", p3g_40gb=6)
    workloads = [WorkloadRequest(w.key, mig=w.mig, replicas=2), want("small", p2g_20gb=2, p1g_10gb=1)]
    result, _ = run(pool, workloads)
    spread = result.workloads[(NS, "spread")]
    assert spread.action == "admit"
    for replica in (0, 1):
        assert len({i.host_uid for i in spread.mig if i.replica == replica}) == 1


@st.composite
def two_passes(draw: st.DrawFn) -> tuple[PoolState, list[WorkloadRequest], list[WorkloadRequest]]:
    def workload(name: str, whole: tuple[int, ...] = (0, 0, 0, 1)) -> WorkloadRequest:
        names = draw(st.lists(st.sampled_from(PROFILES), min_size=1, max_size=2, unique=True))
        w = want(name, draw(st.sampled_from(whole)), **{p: draw(st.integers(1, 3)) for p in names})
        return WorkloadRequest(w.key, whole=w.whole, mig=w.mig, replicas=draw(st.sampled_from((1, 1, 2))))

    pool = mixed_pool(draw(st.integers(1, 2)))
    first = [workload(f"old{n}") for n in range(draw(st.integers(0, 5)))]
    kept = [w for w in first if draw(st.booleans())]
    # New workloads of MIG instances, some with whole GPUs beside them: the demand a joint plan covers.
    second = kept + [workload(f"new{n}", (0, 0, 1, 2)) for n in range(draw(st.integers(1, 6)))]
    return pool, first, second


@settings(max_examples=100, deadline=None)
@given(two_passes())
def test_joint_planning_keeps_bound_instances_and_the_pass_uses_no_more_gpus_than_one_at_a_time(
    case: tuple[PoolState, list[WorkloadRequest], list[WorkloadRequest]],
) -> None:
    pool, first, second = case
    before = run(pool, first, joint=False)
    joint = run(pool, second, before)
    assert run(pool, second, before) == joint  # same input, same plan
    for key, d in joint[0].workloads.items():
        if d.action == "admitted":  # sticky: exactly the instances it had
            assert d.mig == before[0].workloads[key].mig
    # The planner alone may admit another set or use more GPUs (a node limit, a sticky workload placed
    # again): the pool's pass keeps the joint one only when it is no worse.
    kept = guarded(pool, second, before)
    greedy = run(pool, second, before, joint=False)
    assert admitted(kept[0]) >= admitted(greedy[0])
    assert gpus_held(kept[0]) <= gpus_held(greedy[0])


def test_a_new_workload_of_whole_gpus_and_mig_instances_is_planned_jointly() -> None:
    """One at a time: the two 3g share GPU 0, c's three 2g fill GPU 1, d takes GPU 2 whole and its 2g
    switches GPU 3. Jointly: d's whole GPU is the host's lowest-index one (as admission takes it), and a
    3g with two 2g on each of two GPUs: 3 GPUs held instead of 4."""
    pool = mixed_pool(1)
    workloads = [
        want("a", p3g_40gb=1),
        want("b", p3g_40gb=1),
        want("c", p2g_20gb=3),
        want("d", 1, p2g_20gb=1),
    ]
    alone, _ = run(pool, workloads, joint=False)
    joint, _ = run(pool, workloads)
    assert admitted(joint) == admitted(alone) == {"a", "b", "c", "d"}
    assert (gpus_held(alone), gpus_held(joint)) == (4, 3)
    d = joint.workloads[(NS, "d")]
    assert [u.index for u in d.gpus] == [0] and {i.gpu for i in d.mig} <= {6, 7}
    assert guarded(pool, workloads)[0] == joint


def test_a_replica_with_whole_gpus_declines_a_host_it_is_not_planned_on() -> None:
    """The joint plan puts w3 (2 whole GPUs and 3 x 1g) on the second host beside w2; admission offers
    the first host first (best fit: as many free GPUs, then the name), which the planner declines
    while the second still holds w3 as planned. 12 GPUs held instead of 13 one at a time."""
    pool = mixed_pool(2)
    workloads = [
        want("w0", 2, p1g_10gb=3),
        want("w1", 1, p4g_40gb=2),
        want("w2", 2, p4g_40gb=3),
        want("w3", 2, p1g_10gb=3),
    ]
    alone, _ = guarded(pool, workloads, joint=False)
    joint, _ = guarded(pool, workloads)
    assert admitted(joint) == admitted(alone) == {"w0", "w1", "w2", "w3"}
    assert (gpus_held(alone), gpus_held(joint)) == (13, 12)
    w2, w3 = joint.workloads[(NS, "w2")], joint.workloads[(NS, "w3")]
    assert {u.host_uid for u in w3.gpus} == {i.host_uid for i in w3.mig} == {w2.gpus[0].host_uid}
    assert [u.index for u in w3.gpus] == [2, 3]


CHURN_BEFORE = [
    want("w0", 6, 0, p1g_10gb=4, p3g_40gb=4),
    want("w1", 2, 1),
    want("w2", 1, 1),
    want("w3", 0, 2, p1g_20gb=3, p2g_20gb=3),
    want("w4", 0, 0, p4g_40gb=3),
    want("w5", 0, 0, p1g_10gb=2),
    want("w6", 0, 2, p4g_40gb=1, p7g_80gb=4),
    want("w7", 1, 2),
]
CHURN_AFTER = [w for w in CHURN_BEFORE if w.key[1] not in ("w0", "w6")] + [
    want("new0", 0, 2, p4g_40gb=1),
    want("new1", 0, 2, p1g_10gb=3, p3g_40gb=1),
]
# A cold pass where the joint plan of the MIG workloads leaves w4 (3 x 2g and 3 x 3g) out.
COLD = [
    want("w0", 0, 0, p4g_40gb=4),
    want("w1", 0, 1, p2g_20gb=3, p7g_80gb=1),
    want("w2", 0, 2, p1g_10gb=3),
    want("w3", 3, 0),
    want("w4", 0, 0, p2g_20gb=3, p3g_40gb=3),
    want("w5", 2, 1),
    want("w6", 0, 1, p1g_20gb=2, p3g_40gb=2),
]


def test_a_whole_gpu_workload_is_not_left_out_by_the_joint_plan_of_a_churn_pass() -> None:
    """The churn pass of ``bench_mig_admission`` in small: the joint plan of new0 and new1 lays out GPUs
    that w2 (one whole GPU, later in admission's order) needs; one at a time admits w2. The pool's pass
    keeps the one-at-a-time admission there."""
    pool = mixed_pool(1)
    before = run(pool, CHURN_BEFORE, joint=False)
    greedy = run(pool, CHURN_AFTER, before, joint=False)
    unguarded = run(pool, CHURN_AFTER, before)
    assert "w2" in admitted(greedy[0]) and "w2" not in admitted(unguarded[0])
    product = guarded(pool, CHURN_AFTER, before)
    assert admitted(product[0]) >= admitted(greedy[0])
    assert gpus_held(product[0]) <= gpus_held(greedy[0])


@st.composite
def mixed_passes(draw: st.DrawFn) -> tuple[PoolState, list[WorkloadRequest], list[WorkloadRequest]]:
    """Two passes of whole and MIG workloads of three priorities (the joint plan covers the new ones with
    MIG instances, whole GPUs beside them or not; whole-GPU-only ones compete for the GPUs it lays out)."""

    def workload(name: str) -> WorkloadRequest:
        whole = draw(st.sampled_from((0, 0, 0, 1, 2, 6)))
        names = draw(st.lists(st.sampled_from(PROFILES), min_size=0 if whole else 1, max_size=2, unique=True))
        w = want(name, whole, draw(st.integers(0, 2)), **{p: draw(st.integers(1, 4)) for p in names})
        return WorkloadRequest(w.key, priority=w.priority, whole=w.whole, mig=w.mig)

    pool = mixed_pool(draw(st.integers(1, 2)))
    first = [workload(f"old{n}") for n in range(draw(st.integers(0, 8)))]
    kept = [w for w in first if draw(st.booleans())]
    second = kept + [workload(f"new{n}") for n in range(draw(st.integers(1, 8)))]
    return pool, first, second


@settings(max_examples=60, deadline=None)
@given(mixed_passes())
@example((mixed_pool(1), CHURN_BEFORE, CHURN_AFTER))
@example((mixed_pool(1), [], COLD))
def test_a_pools_pass_with_joint_planning_admits_a_superset_on_no_more_gpus(
    case: tuple[PoolState, list[WorkloadRequest], list[WorkloadRequest]],
) -> None:
    pool, first, second = case
    before = guarded(pool, first)
    joint = guarded(pool, second, before)
    alone = guarded(pool, second, before, joint=False)
    assert admitted(joint[0]) >= admitted(alone[0])
    assert gpus_held(joint[0]) <= gpus_held(alone[0])
    assert guarded(pool, second, before) == joint  # same input, same pass


def reference(
    pool: PoolState, workloads: Sequence[WorkloadRequest], before: tuple[PoolAdmission, PoolMigOutcome]
) -> tuple[PoolAdmission, PoolMigOutcome]:
    """``admit_mig_pool``'s rule with no shortcut: the joint pass run whenever the bound allows, its
    planner making the joint plan itself."""
    alone = run(pool, workloads, before, joint=False)
    recorded = json.loads(json.dumps(before[1].mig))
    previous = previous_of(before[0])
    probe = PoolMigPlanner(pool, parse_mig_layouts(recorded, "status: mig"), previous, workloads, joint=False)
    admit_pool(pool, workloads, previous, probe)
    if not probe.may_plan_jointly() or probe.at_fewest_gpus():
        return alone
    planner = PoolMigPlanner(pool, parse_mig_layouts(recorded, "status: mig"), previous, workloads)
    result = admit_pool(pool, workloads, previous, planner)
    joint = result, planner.finish(result)
    if not planner.joint_followed:
        return alone
    if admitted(joint[0]) >= admitted(alone[0]) and gpus_held(joint[0]) <= gpus_held(alone[0]):
        return joint
    return alone


@settings(max_examples=60, deadline=None)
@given(mixed_passes())
@example((mixed_pool(1), CHURN_BEFORE, CHURN_AFTER))
@example((mixed_pool(1), [], COLD))
@example((mixed_pool(1), [], [want("w0", 2, 0, p4g_40gb=3, p7g_80gb=3)]))
def test_the_joint_plan_made_from_the_pass_one_at_a_time_decides_as_the_joint_pass_planning_itself(
    case: tuple[PoolState, list[WorkloadRequest], list[WorkloadRequest]],
) -> None:
    pool, first, second = case
    before = guarded(pool, first)
    assert guarded(pool, second, before) == reference(pool, second, before)


def test_a_pass_whose_joint_plan_takes_nothing_runs_admission_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """2 whole GPUs, 3 x 4g and 3 x 7g fill the host's 8 GPUs one at a time; the bound does not see it
    (4g strands slices), and the joint plan is no better: no second admission pass."""
    runs: list[int] = []

    def counted(*args: Any) -> PoolAdmission:
        runs.append(1)
        return admit_pool(*args)

    monkeypatch.setattr(mig_pool, "admit_pool", counted)
    pool = mixed_pool(1)
    workloads = [want("w0", 2, 0, p4g_40gb=3, p7g_80gb=3)]
    result, _ = admit_mig_pool(pool, workloads)
    assert admitted(result) == {"w0"}
    assert len(runs) == 1
