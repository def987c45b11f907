"""Workload cluster profiles on a pool's Running cluster: attach each admitted workload's profiles and
detach those of workloads that left, never the pool's own nor another workload's (read first, so
idempotent across restarts). :mod:`reconciler.apply` changes a pool's own profiles through
:func:`change_cluster_profiles`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from reconciler.logging import get_logger
from reconciler.model.base import ClusterProfileRef
from reconciler.model.conditions import Reason
from reconciler.model.desired import DesiredState
from reconciler.model.outcomes import WorkloadOutcome
from reconciler.model.pools import WorkloadKey
from reconciler.model.resources import ComputePool
from reconciler.palette.cluster_api import ClusterAPI
from reconciler.palette.entities import cluster_profile_entities
from reconciler.palette.errors import PaletteError
from reconciler.placement.admission_types import WorkloadAction
from reconciler.plan import Action, Plan, PoolPlan, WorkloadPlan
from reconciler.profiles import platform_cluster_profiles

log = get_logger(component="apply")


def _holds(w: WorkloadPlan) -> bool:
    return w.action is not WorkloadAction.REMOVE and (
        w.action in (WorkloadAction.ADMIT, WorkloadAction.ADMITTED) or bool(w.gpus or w.mig)
    )


def _attached_uids(listing: Sequence[Mapping[str, Any]]) -> set[str]:
    out: set[str] = set()
    for item in listing:
        meta = item.get("metadata") if isinstance(item.get("metadata"), Mapping) else None
        uid = (meta or {}).get("uid") or item.get("uid")
        if isinstance(uid, str):
            out.add(uid)
    return out


def apply_workload_profiles(
    client: ClusterAPI,
    desired: DesiredState,
    plan: Plan,
    recorded: Mapping[WorkloadKey, tuple[str, tuple[str, ...]]],
    *,
    stop: Callable[[], bool] | None = None,
) -> dict[WorkloadKey, WorkloadOutcome]:
    """Attach each admitted workload's cluster profiles to its pool's Running cluster and detach those
    of workloads that left, never the pool's own profiles nor another workload's.

    ``recorded``: per workload, the pool and the profile uids the status branch says are attached for
    it. The cluster's attached profiles are read before any change (idempotent across restarts: a
    profile attached by a pass that died before recording it is not attached twice). The result has an
    entry for every workload of a pool this plan decided, and for every recorded one of those pools.

    ``stop`` is asked before each pool's changes are sent (a graceful stop, a lost lease): once it
    answers True, the workloads of the pools not reached keep what the status branch recorded.
    """
    out: dict[WorkloadKey, WorkloadOutcome] = {}
    for pool in plan.pools:
        out.update(_apply_pool_profiles(client, desired, plan, pool, recorded, stop))
    return out


def _apply_pool_profiles(
    client: ClusterAPI,
    desired: DesiredState,
    plan: Plan,
    pool: PoolPlan,
    recorded: Mapping[WorkloadKey, tuple[str, tuple[str, ...]]],
    stop: Callable[[], bool] | None,
) -> dict[WorkloadKey, WorkloadOutcome]:
    """The workload profiles of one pool's cluster (:func:`apply_workload_profiles`)."""
    ns, name = pool.key
    mine = [w for w in plan.workloads if w.namespace == ns and w.pool == name]
    holding = {w.key: w for w in mine if _holds(w)}
    leaving = [
        k for k, (pool_name, _) in recorded.items() if k[0] == ns and pool_name == name and k not in holding
    ]

    def before(key: WorkloadKey) -> tuple[str, ...]:
        return recorded.get(key, (name, ()))[1]

    existing = pool.cluster.existing
    cluster_gone = (
        existing is None
        or existing.state in ("Deleting", "Deleted")
        or pool.action in (Action.DELETE, Action.REPLACE)
    )
    running = any(w.pool_running for w in mine) or (
        existing is not None and existing.state == "Running" and not cluster_gone
    )
    if cluster_gone or not running or existing is None:
        return {key: WorkloadOutcome(() if cluster_gone else before(key)) for key in [*holding, *leaving]}
    wanted = {key: _wanted_profiles(w, before(key)) for key, w in holding.items()}
    resource = desired.get(ComputePool, ns, name)
    own = {r.uid for r in platform_cluster_profiles(desired, resource)} if resource is not None else set()
    refs: dict[str, ClusterProfileRef] = {}
    for value in wanted.values():
        for item in value:
            if isinstance(item, ClusterProfileRef):
                refs.setdefault(item.uid, item)
    keep = own | {u for value in wanted.values() for u in _uids(value)}
    drop = {u for key, uids in recorded.items() if key[0] == ns and uids[0] == name for u in uids[1]} - keep
    attach = {u for key, value in wanted.items() for u in _uids(value) if u not in before(key) and u in refs}
    if (attach or drop) and stop is not None and stop():
        return {key: WorkloadOutcome(before(key)) for key in [*holding, *leaving]}
    if attach or drop:
        try:
            change_cluster_profiles(client, existing.uid, [refs[u] for u in sorted(attach)], drop, ns, name)
        except PaletteError as exc:
            log.warning("workload profiles not applied", namespace=ns, pool=name, error=str(exc))
            error = str(exc)
            return {key: WorkloadOutcome(before(key), ok=False, error=error) for key in [*holding, *leaving]}
    placed = {key: WorkloadOutcome(_uids(wanted[key])) for key in holding}
    return placed | {key: WorkloadOutcome(()) for key in leaving}


def _wanted_profiles(
    w: WorkloadPlan, before: tuple[str, ...]
) -> tuple[ClusterProfileRef, ...] | tuple[str, ...]:
    """What a workload that holds GPUs should have attached: its profiles once admitted on a Running
    pool; else what it had (waiting for the pool, keeping an earlier admission, or held back by the
    deletion guard)."""
    blocked = w.reason is Reason.PRUNE_BLOCKED
    if w.action in (WorkloadAction.ADMIT, WorkloadAction.ADMITTED) and w.pool_running and not blocked:
        return w.cluster_profiles
    return before


def change_cluster_profiles(
    client: ClusterAPI,
    cluster_uid: str,
    attach: Sequence[ClusterProfileRef],
    drop: set[str],
    ns: str,
    pool: str,
) -> None:
    """Attach ``attach`` and detach ``drop`` where the cluster's profiles, read first, say it is due."""
    attached = _attached_uids(client.get_cluster_profiles(cluster_uid))
    missing = [r for r in attach if r.uid not in attached]
    if missing:
        client.attach_profiles(cluster_uid, cluster_profile_entities(missing))
        profiles = [r.uid for r in missing]
        log.info(
            "workload profiles attached", namespace=ns, pool=pool, cluster_uid=cluster_uid, profiles=profiles
        )
    gone = sorted(drop & attached)
    if gone:
        client.detach_profiles(cluster_uid, gone)
        log.info(
            "workload profiles detached", namespace=ns, pool=pool, cluster_uid=cluster_uid, profiles=gone
        )


def _uids(value: Sequence[ClusterProfileRef] | Sequence[str]) -> tuple[str, ...]:
    return tuple(sorted({v.uid if isinstance(v, ClusterProfileRef) else v for v in value}))
