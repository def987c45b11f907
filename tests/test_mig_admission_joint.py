"""Joint MIG planning inside admission (``PoolMigPlanner`` with ``mig_admission_joint``): the pass's new
MIG demand laid out together, bound instances untouched, never more GPUs than one at a time."""

from __future__ import annotations

import json
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.model.pools import WorkloadRequest
from reconciler.placement.admission import admit_pool
from reconciler.placement.admission_types import PoolAdmission, PoolState, PreviousAdmission
from reconciler.placement.mig_admission import PoolMigPlanner
from reconciler.placement.mig_layouts import parse_mig_layouts
from reconciler.placement.mig_outcome import PoolMigOutcome
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
    # New workloads of MIG instances only: the demand a joint plan covers (a new workload asking for
    # whole GPUs too makes the family go one at a time: nothing to compare).
    second = kept + [workload(f"new{n}", (0,)) for n in range(draw(st.integers(1, 6)))]
    return pool, first, second


@settings(max_examples=100, deadline=None)
@given(two_passes())
def test_joint_planning_keeps_bound_instances_and_uses_no_more_gpus_than_one_at_a_time(
    case: tuple[PoolState, list[WorkloadRequest], list[WorkloadRequest]],
) -> None:
    pool, first, second = case
    before = run(pool, first, joint=False)
    joint = run(pool, second, before)
    assert run(pool, second, before) == joint  # same input, same plan
    greedy = run(pool, second, before, joint=False)
    for key, d in joint[0].workloads.items():
        if d.action == "admitted":  # sticky: exactly the instances it had
            assert d.mig == before[0].workloads[key].mig
    if admitted(joint[0]) == admitted(greedy[0]):
        assert gpus_used(joint[0]) <= gpus_used(greedy[0])


def test_a_new_workload_of_whole_gpus_and_mig_instances_makes_the_family_go_one_at_a_time() -> None:
    pool = mixed_pool(1)
    workloads = [
        want("a", p3g_40gb=1),
        want("b", p3g_40gb=1),
        want("c", p2g_20gb=3),
        want("d", 1, p2g_20gb=1),
    ]
    assert run(pool, workloads) == run(pool, workloads, joint=False)
