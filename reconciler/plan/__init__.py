"""Desired allocations vs existing clusters -> the actions of one pass (pure; docs/planning.md).

Modules: :mod:`.entries` (the plan's types and JSON), :mod:`.decisions` (cluster entries),
:mod:`.prune` (the prune guard), :mod:`.admission` (admission into pools), :mod:`.shards` (what a
target or a shard plans), :mod:`.passes` (one pass over one or every target, and the merge),
:mod:`.phases` (the status phase and Ready reason of every entry: the one place they are decided).

Decisions the design leaves open, written down here:

- Action reasons: ``create`` and ``replace`` carry ``Provisioning``, ``scale`` carries ``Scaling``,
  ``delete`` carries ``Deleting``, ``unchanged`` carries ``Provisioned`` when its cluster is Running and
  ``Provisioning`` otherwise, and ``Deleting`` while its cluster is being deleted (after a replace, or
  removed by hand): the platform is created again once that cluster is gone.
- Prune guard: when the desired state is incomplete, or more platforms' clusters would be deleted than
  ``max_deletions`` allows, none is deleted; each such platform is reported with action ``unchanged``,
  reason ``PruneBlocked`` and a message saying how many would be deleted and the limit. A cluster already
  ``Deleting`` (deleted by an earlier pass) is reported ``unchanged`` with reason ``Deleting``: nothing
  is left to do, and it does not count towards the limit. The applier only
  acts on create, scale, replace and delete, so a blocked prune is a no-op by construction.
- A rejected or suspended platform that has a cluster is reported with that cluster's hosts: they stay.
- An invalid platform is reported with reason ``ReferenceNotFound`` when one of its diagnostics has that
  reason (a referenced resource was not found), else ``InvalidSpec``.
- A pass spans several Palette targets (:func:`plan_targets`); the prune guard counts the deletions of
  the whole pass, and its message gives that one count. Pools' clusters count like platforms'.
- A shard (``run --namespaces``) plans only its namespaces (:func:`select_namespaces`, and the
  ``namespaces`` argument of :func:`plan_targets`): a managed cluster of a namespace it does not own is
  not planned, never an orphan, and not counted by its prune guard.

Pools and workloads (docs/pools.md):

- A ComputePool gets a cluster entry exactly as a dedicated platform does (:attr:`PoolPlan.cluster`,
  ``kind`` ComputePool), placed by :func:`reconciler.allocate.place` in one (namespace, name) order with
  the platforms. Then, per pool, admission (:func:`reconciler.placement.admission.admit_pool`) runs on
  the GPUs of the hosts *as planned* with the previous admissions the caller read from the status branch,
  so a pool being created already admits its workloads in the same plan.
- A workload admitted to a pool whose cluster is not Running yet is ``admit`` here (its message says the
  profiles are attached once the pool cluster is Running); its status phase is Pending, reason
  PoolNotReady, decided by status from :attr:`WorkloadPlan.pool_running`.
- A pool that is invalid, rejected, suspended or removed admits nobody new (``pending``, PoolNotReady);
  workloads it admitted before keep their GPUs while its hosts stay.
- Invalid is not absent: what holds something and is hidden by the revision is carried as invalid
  (:func:`reconciler.manifests.carry.carry_held`, the carried platforms and pools stay in the target of
  their cluster); a pool the plan cannot read keeps the MIG strategy its records show; an invalid
  workload asks for exactly the GPUs and MIG instances it holds, so it keeps them.
- An invalid workload that held GPUs keeps them (reported ``invalid``, its GPUs listed); an invalid
  workload never admitted is ``invalid`` with no pool when the plan cannot read it (``pool`` null).
  An invalid MLPlatform is listed under ``platforms`` unless a previous admission shows it was a tenant.
- A workload that moved to another pool has two entries: ``remove`` in the pool it leaves, and its
  decision in the new one.
- A valid workload whose pool is not planned in this pass (its pool has no Palette target) is ``pending``
  PoolNotReady with the routing's reason; it, or an invalid one, that holds GPUs there keeps them (named
  with that pool), so nothing it holds is forgotten.
"""

from __future__ import annotations

from reconciler.plan.decisions import Capacity, free_capacity, with_pool_sizes
from reconciler.plan.entries import (
    DONE,
    MUTATING,
    Action,
    Plan,
    PlatformPlan,
    PoolPlan,
    PreviousLayouts,
    ScalingDecision,
    ScalingPlan,
    WorkloadPlan,
    gpus_of,
)
from reconciler.plan.passes import make_plan, merge, plan_diagnostics, plan_targets
from reconciler.plan.shards import Observation, Observed, restrict, select_namespaces

__all__ = [
    "DONE",
    "MUTATING",
    "Action",
    "Capacity",
    "Observation",
    "Observed",
    "Plan",
    "PlatformPlan",
    "PoolPlan",
    "PreviousLayouts",
    "ScalingDecision",
    "ScalingPlan",
    "WorkloadPlan",
    "free_capacity",
    "gpus_of",
    "make_plan",
    "merge",
    "plan_diagnostics",
    "plan_targets",
    "restrict",
    "select_namespaces",
    "with_pool_sizes",
]
