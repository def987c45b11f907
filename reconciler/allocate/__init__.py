"""The allocation engine: which machines each dedicated MLPlatform and each ComputePool gets, or exactly
why it cannot be placed (pure).

Every rule of docs/allocation.md lives in this package. A ComputePool is placed by the same rules, as a
dedicated platform requesting the pool's ``gpus`` (docs/pools.md): no ``gpuLimits`` on the pool
itself, and its own minimum-worker precedence (:func:`reconciler.resolve.pool_min_workers`). The engine
is a pure function of the desired state, the machine inventory and the clusters that already exist; it
never does I/O or reads a clock.

Decisions that the design leaves open, written down here once:

- Platforms and pools share one inventory. Those that already have a cluster are handled first (sticky),
  in (namespace, name) order; then new ones by ``spec.priority`` (high first; a pool has priority 0).
  Within one priority the order (namespace, then name, then kind, MLPlatform before ComputePool) is a
  tie-break, not a reason to leave capacity unused: when first-come leaves some out, a bounded search
  (:mod:`reconciler.placement.platform_order`) looks for an order placing strictly more; an equal count
  keeps first-come exactly (:func:`reconciler.allocate.engine._place_new`).
  Deterministic: the budget counts attempts, not time. Hosts that a scale-down will release are *not*
  free for other platforms in the same pass: they still belong to their cluster until the change is
  applied.
- Architecture: every architecture that has a free matching host is tried; the winner leaves the fewest
  surplus GPUs, then uses the fewest hosts, then comes first by name (``amd64`` before ``arm64``).
- GPU workers per family are chosen exactly (bounded knapsack over the GPU counts on offer): fewest
  surplus GPUs, then fewest hosts, then the lexicographically smallest sorted list of (host name, uid).
- Control-plane hosts are taken fewest GPUs first (a control-plane-tagged GPU host is the last resort),
  then by name. GPUs on control-plane hosts are not counted in an allocation's ``gpus``; GPUs on workers,
  including workers added only to reach the minimum, are.
- ``controlPlaneDefaults.workerNodeEligible`` does not count control-plane hosts as workers for the
  minimum: the seed counts worker nodes only.
- A pool whose ``mode`` differs from the mode its cluster was created with (the cluster's
  ``palette.ai/pool-mode`` label, else the mode the caller reports from the status branch) is rejected
  ``InvalidSpec`` and its cluster kept: a pool's mode is fixed once its cluster exists.
- Nothing running moves without a change of its own: a cluster whose own hosts, offered alone, are all
  kept by the rules keeps exactly them (:func:`reconciler.allocate.existing._holds`); free hosts are only
  looked at when its needs are no longer met exactly by what it has.
- A platform whose cluster is being deleted (Palette state ``Deleting``, e.g. the first half of a
  replace) keeps that cluster's hosts as they are until it is gone; then it is placed like a new one.
- An existing cluster's host that the inventory no longer lists is kept and counts towards node counts
  (with no GPUs): the engine cannot judge it, and removing it would be a guess.

The package, by job (this module re-exports the public names, so ``reconciler.allocate`` is the one
import path):

- :mod:`~reconciler.allocate.needs`: what a platform or pool needs; the decision types;
- :mod:`~reconciler.allocate.knapsack`: the exact GPU worker choice;
- :mod:`~reconciler.allocate.free_hosts`: the free hosts as pools, streams and trials;
- :mod:`~reconciler.allocate.one_platform`: one platform on one architecture, the best architecture;
- :mod:`~reconciler.allocate.existing`: a platform with a cluster (keep, scale in place, replace);
- :mod:`~reconciler.allocate.engine`: the pass over every platform and pool (:func:`place`).
"""

from reconciler.allocate.engine import Ident, Placement, allocate, place, split_clusters
from reconciler.allocate.existing import gpus_on
from reconciler.allocate.free_hosts import FILL_STAGES, GroupsKey
from reconciler.allocate.knapsack import HostKey, choose_gpu_hosts, optimal_count_vectors
from reconciler.allocate.needs import (
    ALLOW_REPLACE_ANNOTATION,
    DELETING_STATE,
    Allocation,
    Decision,
    Rejection,
    Requirements,
    allow_replace,
    pool_requirements,
    previous_pool_mode,
    requirements,
)

__all__ = [
    "ALLOW_REPLACE_ANNOTATION",
    "DELETING_STATE",
    "FILL_STAGES",
    "Allocation",
    "Decision",
    "GroupsKey",
    "HostKey",
    "Ident",
    "Placement",
    "Rejection",
    "Requirements",
    "allocate",
    "allow_replace",
    "choose_gpu_hosts",
    "gpus_on",
    "optimal_count_vectors",
    "place",
    "pool_requirements",
    "previous_pool_mode",
    "requirements",
    "split_clusters",
]
