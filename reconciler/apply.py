"""Carry out a plan through the Palette client: create, scale, replace and delete, idempotently.

Idempotency rests on observation, not on memory: the pass that produced the plan listed the managed
clusters by their labels (docs/palette.md), so ``create`` is only planned for a platform that has no
cluster. A reconciler killed after a create finds that cluster by its labels on restart and adopts it.
``replace`` deletes the old cluster; a later pass creates the new one once the hosts are free again
(Palette refuses a host that is still part of a cluster).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from reconciler import resolve
from reconciler.apply_profiles import change_cluster_profiles
from reconciler.inventory import Machine
from reconciler.logging import get_logger, with_log_context
from reconciler.membership import config_hosts
from reconciler.model.conditions import Reason
from reconciler.model.desired import DesiredState, PlatformKey
from reconciler.model.observed import ManagedCluster, cluster_name, managed_labels
from reconciler.model.outcomes import Outcome
from reconciler.model.pools import PoolKey
from reconciler.model.resources import ComputePool, ComputeProfile, MLPlatform
from reconciler.palette.cluster_api import ClusterAPI
from reconciler.palette.entities import (
    CONTROL_PLANE_POOL,
    WORKER_POOL,
    cluster_create_entity,
    machine_pool_entity,
    pool_hosts,
    static_ip,
    static_ip_wanted,
)
from reconciler.palette.errors import PaletteError, UnauthorizedError
from reconciler.plan import Action, Plan, PlatformPlan, PoolPlan
from reconciler.profiles import NO_CLUSTER_PROFILE, platform_cluster_profiles
from reconciler.snapshots import cluster_config_uid

log = get_logger(component="apply")


class ApplyError(Exception):
    """A plan entry that cannot be carried out because the desired state lacks what it needs."""


def _platform(desired: DesiredState, p: PlatformPlan) -> tuple[MLPlatform, ComputeProfile]:
    platform = desired.get(MLPlatform, p.namespace, p.name)
    if platform is None:
        raise ApplyError(f"platform {p.namespace}/{p.name} is not in the desired state")
    profile = resolve.compute_profile(desired, platform)
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
    change_cluster_profiles(
        client, p.existing.uid, p.attach_profiles, set(p.detach_profiles), p.namespace, p.name
    )
    return Outcome(ok=True, cluster_uid=p.existing.uid)
