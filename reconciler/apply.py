"""Carry out a plan through the Palette client: create, scale, replace and delete, idempotently.

Idempotency rests on observation, not on memory: the pass that produced the plan listed the managed
clusters by their labels (docs/palette.md), so ``create`` is only planned for a platform that has no
cluster. A reconciler killed after a create finds that cluster by its labels on restart and adopts it.
``replace`` deletes the old cluster; a later pass creates the new one once the hosts are free again
(Palette refuses a host that is still part of a cluster).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from reconciler import resolve
from reconciler.inventory import Machine
from reconciler.logging import get_logger, with_log_context
from reconciler.membership import config_hosts
from reconciler.model.conditions import Reason
from reconciler.model.desired import DesiredState, PlatformKey
from reconciler.model.observed import ManagedCluster, cluster_name, managed_labels
from reconciler.model.outcomes import Outcome, WorkloadOutcome
from reconciler.model.pools import PoolKey, WorkloadKey
from reconciler.model.resources import ClusterProfileRef, ComputePool, ComputeProfile, MLPlatform
from reconciler.palette.entities import (
    CONTROL_PLANE_POOL,
    WORKER_POOL,
    cluster_create_entity,
    cluster_profile_entities,
    machine_pool_entity,
    pool_hosts,
    static_ip,
    static_ip_wanted,
)
from reconciler.palette.errors import PaletteError, UnauthorizedError
from reconciler.palette.observe import cluster_config_uid
from reconciler.placement.admission import WorkloadAction
from reconciler.plan import Action, Plan, PlatformPlan, PoolPlan, WorkloadPlan
from reconciler.profiles import NO_CLUSTER_PROFILE, platform_cluster_profiles

log = get_logger(component="apply")


class ClusterAPI(Protocol):
    """The part of ``PaletteClient`` the applier uses."""

    def get_cluster(self, uid: str) -> dict[str, Any] | None: ...
    def create_edge_native_cluster(self, entity: Mapping[str, Any]) -> str: ...
    def delete_cluster(self, uid: str) -> None: ...
    def get_cloud_config(self, config_uid: str) -> dict[str, Any]: ...
    def update_machine_pool(self, config_uid: str, pool_name: str, entity: Mapping[str, Any]) -> None: ...
    def create_machine_pool(self, config_uid: str, entity: Mapping[str, Any]) -> None: ...
    def list_pool_machines(self, config_uid: str, pool_name: str) -> list[dict[str, Any]]: ...
    def delete_pool_machine(self, config_uid: str, pool_name: str, machine_uid: str) -> None: ...
    def get_cluster_profiles(self, uid: str) -> list[dict[str, Any]]: ...
    def attach_profiles(self, uid: str, profiles: Sequence[Mapping[str, Any]]) -> None: ...
    def detach_profiles(self, uid: str, profile_uids: Iterable[str]) -> None: ...


class ApplyError(Exception):
    """A plan entry that cannot be carried out because the desired state lacks what it needs."""


def _platform(desired: DesiredState, p: PlatformPlan) -> tuple[MLPlatform, ComputeProfile]:
    platform = desired.get(MLPlatform, p.namespace, p.name)
    if platform is None:
        raise ApplyError(f"platform {p.namespace}/{p.name} is not in the desired state")
    profile = desired.compute_profile_for(platform)
    if profile is None:
        raise ApplyError(f"platform {p.namespace}/{p.name} has no compute profile")
    return platform, profile


def _vip(platform: MLPlatform | ComputePool, profile: ComputeProfile) -> str | None:
    found = resolve.vip(platform, profile)
    return found.address if found is not None else None


def _create(
    client: ClusterAPI, desired: DesiredState, p: PlatformPlan, machines: Mapping[str, Machine]
) -> Outcome:
    platform, profile = _platform(desired, p)
    refs = platform_cluster_profiles(desired, platform)
    if not refs:  # the plan rejects these; never send an empty profiles list
        raise ApplyError(f"platform {p.namespace}/{p.name}: {NO_CLUSTER_PROFILE}")
    control_plane = pool_hosts(p.control_plane, machines)
    workers = pool_hosts(p.workers, machines)
    if static_ip_wanted(profile) and not static_ip(profile, [*control_plane, *workers]):
        log.warning(
            "static IP asked for, but not every host reports its address: Palette's DHCP is used",
            namespace=p.namespace,
            name=p.name,
        )
    entity = cluster_create_entity(
        name=cluster_name(p.namespace, p.name),
        labels=managed_labels(p.namespace, p.name),
        profile=profile,
        cluster_profiles=refs,
        vip=_vip(platform, profile),
        arch=p.arch or "amd64",
        control_plane=control_plane,
        workers=workers,
    )
    uid = client.create_edge_native_cluster(entity)
    log.info("cluster created", namespace=p.namespace, name=p.name, cluster_uid=uid)
    return Outcome(ok=True, cluster_uid=uid)


def _config_uid(client: ClusterAPI, cluster: ManagedCluster) -> str:
    """The cluster's cloud config uid: from the search summary, else from the full cluster object."""
    config_uid = cluster.cloud_config_uid or cluster_config_uid(client.get_cluster(cluster.uid) or {})
    if not config_uid:
        raise ApplyError(f"cluster {cluster.name} has no cloud config")
    return config_uid


def _delete_machines_of(
    client: ClusterAPI,
    config_uid: str,
    pool: str,
    removed: Sequence[str],
    names: Mapping[str, str],
    machines: Mapping[str, Machine],
) -> None:
    """Scale-down as the Terraform provider does it (``resourceClusterEdgeNativeUpdate``): before the
    pool is PUT without them, the machines of the removed hosts are deleted, found in the pool's machine
    list by ``metadata.name`` (the host's name; also ``spec.edgeHostUid``), so Palette drains and
    removes each node rather than finding it gone from the pool's spec."""
    if not removed:
        return
    gone = set(removed)
    named = {names.get(uid) or (machines[uid].name if uid in machines else uid) for uid in removed}
    for machine in client.list_pool_machines(config_uid, pool):
        meta, spec = machine.get("metadata") or {}, machine.get("spec") or {}
        if (meta.get("name") in named or spec.get("edgeHostUid") in gone) and meta.get("uid"):
            client.delete_pool_machine(config_uid, pool, str(meta["uid"]))


def _scale(
    client: ClusterAPI, desired: DesiredState, p: PlatformPlan, machines: Mapping[str, Machine]
) -> Outcome:
    _platform_obj, profile = _platform(desired, p)
    cluster = p.existing
    if cluster is None:
        raise ApplyError(f"scale of {p.namespace}/{p.name} without a cluster")
    config_uid = _config_uid(client, cluster)
    pools, names = config_hosts(client.get_cloud_config(config_uid))
    arch = p.arch or cluster.arch or "amd64"
    for pool, is_cp, target in (
        (CONTROL_PLANE_POOL, True, p.control_plane),
        (WORKER_POOL, False, p.workers),
    ):
        if sorted(pools.get(pool, [])) == sorted(target):
            continue
        entity = machine_pool_entity(pool, is_cp, pool_hosts(target, machines, names), profile, arch)
        if pool in pools:
            removed = [h for h in pools[pool] if h not in target]
            _delete_machines_of(client, config_uid, pool, removed, names, machines)
            client.update_machine_pool(config_uid, pool, entity)
        else:
            client.create_machine_pool(config_uid, entity)
    log.info(
        "cluster scaled",
        namespace=p.namespace,
        name=p.name,
        cluster_uid=cluster.uid,
        added=list(p.add_workers + p.add_control_plane),
        removed=list(p.remove_workers + p.remove_control_plane),
    )
    return Outcome(ok=True, cluster_uid=cluster.uid)


def _delete(client: ClusterAPI, p: PlatformPlan) -> Outcome:
    if p.existing is None:
        return Outcome(ok=True)
    if p.existing.state not in ("Deleting", "Deleted"):
        client.delete_cluster(p.existing.uid)
        log.info("cluster deleted", namespace=p.namespace, name=p.name, cluster_uid=p.existing.uid)
    return Outcome(ok=True, cluster_uid=p.existing.uid)


def apply_one(
    client: ClusterAPI,
    desired: DesiredState,
    p: PlatformPlan,
    machines: Mapping[str, Machine] | None = None,
) -> Outcome:
    """Carry out one mutating entry; a Palette failure becomes a failed Outcome, never an exception.

    ``machines`` (the plan's) give each host its name and address in the requests."""
    known = machines or {}
    try:
        match p.action:
            case Action.CREATE:
                return _create(client, desired, p, known)
            case Action.SCALE:
                return _scale(client, desired, p, known)
            case Action.REPLACE | Action.DELETE:
                return _delete(client, p)
            case _:
                return Outcome(ok=True)
    except (PaletteError, ApplyError) as exc:
        log.warning("apply failed", namespace=p.namespace, name=p.name, action=str(p.action), error=str(exc))
        return Outcome(ok=False, error=str(exc), unauthorized=isinstance(exc, UnauthorizedError))


def apply_plan(
    client: ClusterAPI,
    desired: DesiredState,
    plan: Plan,
    *,
    concurrency: int = 4,
    stop: Callable[[], bool] | None = None,
) -> dict[PlatformKey, Outcome]:
    """Apply every mutating entry of ``plan`` with at most ``concurrency`` requests in flight.

    ``stop`` is asked before each entry is started: once it answers True (a graceful stop), no further
    entry is started and those entries get no outcome; entries in flight finish.
    """
    todo = [p for p in plan.platforms if p.mutating]
    if not todo:
        return {}

    def one(p: PlatformPlan) -> Outcome | None:
        if stop is not None and stop():
            return None
        return apply_one(client, desired, p, plan.machines)

    with ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="apply") as pool:
        results = list(pool.map(with_log_context(one), todo))
    return {p.key: r for p, r in zip(todo, results, strict=True) if r is not None}


# --- compute pools (docs/pools.md) -----------------------------------------------------


def _pool(desired: DesiredState, p: PlatformPlan) -> tuple[ComputePool, ComputeProfile]:
    pool = desired.get(ComputePool, p.namespace, p.name)
    if pool is None:
        raise ApplyError(f"pool {p.namespace}/{p.name} is not in the desired state")
    profile = resolve.compute_profile(desired, pool)
    if profile is None:
        raise ApplyError(f"pool {p.namespace}/{p.name} has no compute profile")
    return pool, profile


def _pool_layout(pool: PoolPlan) -> dict[str, tuple[bool, list[str], dict[str, str]]]:
    """The machine pools a pool's cluster should have: name -> (control plane, hosts, extra labels).
    Hosts with a MIG layout go to one worker pool per layout, labelled ``nvidia.com/mig.config``;
    the other workers stay in ``worker-pool``."""
    p = pool.cluster
    on_mig = {h for mp in pool.machine_pools for h in mp.hosts}
    out: dict[str, tuple[bool, list[str], dict[str, str]]] = {
        CONTROL_PLANE_POOL: (True, sorted(p.control_plane), {}),
        WORKER_POOL: (False, sorted(h for h in p.workers if h not in on_mig), {}),
    }
    for mp in pool.machine_pools:
        out[mp.config] = (False, sorted(h for h in mp.hosts if h in p.workers), mp.labels)
    return out


def _pool_entity(
    name: str,
    is_cp: bool,
    hosts: Sequence[str],
    extra: Mapping[str, str],
    profile: ComputeProfile,
    arch: str,
    machines: Mapping[str, Machine],
    names: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    entity = machine_pool_entity(name, is_cp, pool_hosts(hosts, machines, names or {}), profile, arch)
    entity["poolConfig"]["additionalLabels"].update(extra)
    return entity


def _create_pool(
    client: ClusterAPI, desired: DesiredState, pool: PoolPlan, machines: Mapping[str, Machine]
) -> Outcome:
    p = pool.cluster
    resource, profile = _pool(desired, p)
    refs = platform_cluster_profiles(desired, resource)
    if not refs:
        raise ApplyError(f"pool {p.namespace}/{p.name}: {NO_CLUSTER_PROFILE}")
    arch = p.arch or "amd64"
    layout = _pool_layout(pool)
    entity = cluster_create_entity(
        name=cluster_name(p.namespace, p.name),
        labels=pool.labels,
        profile=profile,
        cluster_profiles=refs,
        vip=_vip(resource, profile),
        arch=arch,
        control_plane=pool_hosts(p.control_plane, machines),
        workers=pool_hosts(layout[WORKER_POOL][1], machines),
    )
    for name, (is_cp, hosts, extra) in layout.items():
        if name not in (CONTROL_PLANE_POOL, WORKER_POOL) and hosts:
            entity["spec"]["machinepoolconfig"].append(
                _pool_entity(name, is_cp, hosts, extra, profile, arch, machines)
            )
    uid = client.create_edge_native_cluster(entity)
    log.info("pool cluster created", namespace=p.namespace, name=p.name, cluster_uid=uid)
    return Outcome(ok=True, cluster_uid=uid)


def _sync_pool_machine_pools(
    client: ClusterAPI, desired: DesiredState, pool: PoolPlan, machines: Mapping[str, Machine]
) -> Outcome:
    """Scale a pool's cluster and move hosts between ``worker-pool`` and its MIG machine pools. Hosts
    leave the pools they no longer belong to first, so that a host moving between two pools is free
    when it is added (Palette refuses a host that is part of a cluster)."""
    p = pool.cluster
    _resource, profile = _pool(desired, p)
    cluster = p.existing
    if cluster is None:
        raise ApplyError(f"scale of pool {p.namespace}/{p.name} without a cluster")
    config_uid = _config_uid(client, cluster)
    current, names = config_hosts(client.get_cloud_config(config_uid))
    wanted = _pool_layout(pool)
    arch = p.arch or cluster.arch or "amd64"
    changed = False
    for name, hosts in sorted(current.items()):
        is_cp, target, extra = wanted.get(name, (False, [], {}))
        keep = [h for h in hosts if h in target]
        if len(keep) != len(hosts):
            removed = [h for h in hosts if h not in target]
            _delete_machines_of(client, config_uid, name, removed, names, machines)
            entity = _pool_entity(name, is_cp, keep, extra, profile, arch, machines, names)
            client.update_machine_pool(config_uid, name, entity)
            current[name], changed = keep, True
    for name, (is_cp, target, extra) in wanted.items():
        if sorted(current.get(name, [])) == target or (name not in current and not target):
            continue
        entity = _pool_entity(name, is_cp, target, extra, profile, arch, machines, names)
        if name in current:
            client.update_machine_pool(config_uid, name, entity)
        else:
            client.create_machine_pool(config_uid, entity)
        changed = True
    if changed:
        log.info(
            "pool cluster scaled",
            namespace=p.namespace,
            name=p.name,
            cluster_uid=cluster.uid,
            machine_pools=sorted(n for n, (_, h, _) in wanted.items() if h),
        )
    return Outcome(ok=True, cluster_uid=cluster.uid)


def _needs_pool_sync(pool: PoolPlan) -> bool:
    """A pool whose hosts stay may still move hosts between machine pools (its MIG layouts changed)."""
    existing = pool.cluster.existing
    return (
        pool.action is Action.UNCHANGED
        and pool.mig_usage is not None
        and existing is not None
        and existing.state not in ("Deleting", "Deleted")
        and pool.reason is not Reason.PRUNE_BLOCKED
    )


def apply_pools(
    client: ClusterAPI,
    desired: DesiredState,
    plan: Plan,
    *,
    stop: Callable[[], bool] | None = None,
) -> dict[PoolKey, Outcome]:
    """Create, scale (and move hosts between MIG machine pools) and delete the pools' clusters, as for
    platforms; a Palette failure becomes a failed Outcome."""
    out: dict[PoolKey, Outcome] = {}
    for pool in plan.pools:
        p = pool.cluster
        if not (p.mutating or _needs_pool_sync(pool)):
            continue
        if stop is not None and stop():
            break
        try:
            match p.action:
                case Action.CREATE:
                    out[p.key] = _create_pool(client, desired, pool, plan.machines)
                case Action.REPLACE | Action.DELETE:
                    out[p.key] = _delete(client, p)
                case Action.UPDATE:
                    out[p.key] = _update_pool_profiles(client, p)
                case _:
                    outcome = _sync_pool_machine_pools(client, desired, pool, plan.machines)
                    if p.mutating:
                        out[p.key] = outcome
        except (PaletteError, ApplyError) as exc:
            log.warning(
                "apply failed", namespace=p.namespace, name=p.name, action=str(p.action), error=str(exc)
            )
            out[p.key] = Outcome(ok=False, error=str(exc), unauthorized=isinstance(exc, UnauthorizedError))
    return out


def _update_pool_profiles(client: ClusterAPI, p: PlatformPlan) -> Outcome:
    """Attach and detach a bundle-built pool's own add-on profiles in place (no host moves)."""
    if p.existing is None:
        raise ApplyError(f"update of pool {p.namespace}/{p.name} without a cluster")
    _change_cluster_profiles(
        client, p.existing.uid, p.attach_profiles, set(p.detach_profiles), p.namespace, p.name
    )
    return Outcome(ok=True, cluster_uid=p.existing.uid)


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
            _change_cluster_profiles(client, existing.uid, [refs[u] for u in sorted(attach)], drop, ns, name)
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


def _change_cluster_profiles(
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
