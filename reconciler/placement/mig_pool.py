"""One MIG pool's admission for one pass, joint planning kept only where it is no worse (docs/mig.md,
"Joint planning of a pass"), pure::

    result, outcome = admit_mig_pool(pool, workloads, previous, layouts)

Admission runs one at a time first (``PoolMigPlanner(joint=False)``). When the pass has no new MIG
demand a joint plan covers (``PoolMigPlanner.may_plan_jointly``), or no plan could hold the
instances it bound on fewer GPUs (``PoolMigPlanner.at_fewest_gpus``: a cheap bound, slices over the
largest GPU), that pass stands. Otherwise the joint plan of the pass's new MIG demand is made from that
pass (``PoolMigPlanner.joint_plan``: both passes run alike up to the placement where it is made); when it
places no replica, the one-at-a-time pass stands (a second pass would be the same). Otherwise admission
runs again with that plan, and that pass is kept only when a replica took what the joint plan gave it
(else it is the same pass) and it admits every workload the one-at-a-time pass admits (a superset) on
no more GPUs (GPUs bound whole or holding an instance); otherwise the one-at-a-time pass stands. So a
pool's pass never admits fewer workloads, nor a different set of a higher priority, nor uses more GPUs
with joint planning than without: a whole-GPU workload that takes GPUs the joint plan had laid out
cannot cost an admission. Deterministic: both passes are.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from reconciler.model.pools import WorkloadKey, WorkloadRequest
from reconciler.placement.admission import admit_pool
from reconciler.placement.admission_types import PoolAdmission, PoolState, PreviousAdmission, WorkloadAction
from reconciler.placement.mig_admission import PoolMigPlanner
from reconciler.placement.mig_admission_joint import JointPlan
from reconciler.placement.mig_layouts import GpuLayout
from reconciler.placement.mig_outcome import PoolMigOutcome

__all__ = ["admit_mig_pool", "admitted", "gpus_held"]

_ADMITTED = (WorkloadAction.ADMIT, WorkloadAction.ADMITTED)


def admitted(result: PoolAdmission) -> frozenset[WorkloadKey]:
    """The workloads the pass admits (new or kept)."""
    return frozenset(k for k, d in result.workloads.items() if d.action in _ADMITTED)


def gpus_held(result: PoolAdmission) -> int:
    """GPUs the admitted workloads hold: bound whole or holding one of their instances."""
    held = {(u.host_uid, u.index) for d in result.workloads.values() if d.action in _ADMITTED for u in d.gpus}
    held |= {
        (i.host_uid, i.gpu) for d in result.workloads.values() if d.action in _ADMITTED for i in d.mig
    }
    return len(held)


def _run(
    pool: PoolState,
    workloads: Sequence[WorkloadRequest],
    previous: Sequence[PreviousAdmission],
    layouts: Sequence[GpuLayout],
    plan: JointPlan | None,
) -> tuple[PoolAdmission, PoolMigOutcome, PoolMigPlanner]:
    planner = PoolMigPlanner(pool, layouts, previous, workloads, joint=plan is not None, plan=plan)
    result = admit_pool(pool, workloads, previous, planner)
    return result, planner.finish(result), planner


def admit_mig_pool(
    pool: PoolState,
    workloads: Sequence[WorkloadRequest],
    previous: Sequence[PreviousAdmission] = (),
    layouts: Iterable[GpuLayout] = (),
    *,
    joint: bool = True,
) -> tuple[PoolAdmission, PoolMigOutcome]:
    """The pool's admission and MIG outcome (see the module docstring); ``joint=False``: one at a time."""
    recorded = tuple(layouts)
    alone, alone_outcome, planner = _run(pool, workloads, previous, recorded, None)
    if not joint or not planner.may_plan_jointly() or planner.at_fewest_gpus():
        return alone, alone_outcome
    plan = planner.joint_plan()
    if plan is None or not plan.replicas:
        return alone, alone_outcome  # the joint pass would take nothing planned: the same pass
    result, outcome, planner = _run(pool, workloads, previous, recorded, plan)
    if not planner.joint_followed:
        return alone, alone_outcome  # the same pass
    if admitted(result) >= admitted(alone) and gpus_held(result) <= gpus_held(alone):
        return result, outcome
    return alone, alone_outcome
