"""Carry out a plan through the Palette client: create, scale, replace and delete, idempotently.

Idempotency rests on observation, not on memory: the pass that produced the plan listed the managed
clusters by their labels (DESIGN.md section 5), so ``create`` is only planned for a platform that has no
cluster. A reconciler killed after a create finds that cluster by its labels on restart and adopts it.
``replace`` deletes the old cluster; a later pass creates the new one once the hosts are free again
(Palette refuses a host that is still part of a cluster).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from reconciler import resolve
from reconciler.inventory import Machine
from reconciler.logging import get_logger, with_log_context
from reconciler.model.desired import DesiredState, PlatformKey
from reconciler.model.observed import cluster_name, managed_labels
from reconciler.model.resources import ComputeProfile, MLPlatform
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
from reconciler.plan import Action, Plan, PlatformPlan
from reconciler.profiles import NO_CLUSTER_PROFILE, platform_cluster_profiles
from reconciler.status.render import Outcome

log = get_logger(component="apply")


class ClusterAPI(Protocol):
    """The part of ``PaletteClient`` the applier uses."""

    def get_cluster(self, uid: str) -> dict[str, Any] | None: ...
    def create_edge_native_cluster(self, entity: Mapping[str, Any]) -> str: ...
    def delete_cluster(self, uid: str) -> None: ...
    def get_cloud_config(self, config_uid: str) -> dict[str, Any]: ...
    def update_machine_pool(self, config_uid: str, pool_name: str, entity: Mapping[str, Any]) -> None: ...
    def create_machine_pool(self, config_uid: str, entity: Mapping[str, Any]) -> None: ...


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


def _vip(platform: MLPlatform, profile: ComputeProfile) -> str | None:
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


def _pool_hosts(config: Mapping[str, Any]) -> tuple[dict[str, list[str]], dict[str, str]]:
    """Host uids per pool of a cloud config, and the host names Palette reports for them."""
    pools = (config.get("spec") or {}).get("machinePoolConfig") or []
    out: dict[str, list[str]] = {}
    names: dict[str, str] = {}
    for pool in pools:
        if isinstance(pool, Mapping) and pool.get("name"):
            hosts = [h for h in pool.get("hosts") or [] if isinstance(h, Mapping) and h.get("hostUid")]
            out[str(pool["name"])] = [str(h["hostUid"]) for h in hosts]
            names.update({str(h["hostUid"]): str(h["hostName"]) for h in hosts if h.get("hostName")})
    return out, names


def _scale(
    client: ClusterAPI, desired: DesiredState, p: PlatformPlan, machines: Mapping[str, Machine]
) -> Outcome:
    _platform_obj, profile = _platform(desired, p)
    cluster = p.existing
    if cluster is None:
        raise ApplyError(f"scale of {p.namespace}/{p.name} without a cluster")
    config_uid = cluster.cloud_config_uid
    if config_uid is None:
        full = client.get_cluster(cluster.uid) or {}
        config_uid = ((full.get("spec") or {}).get("cloudConfigRef") or {}).get("uid")
    if not config_uid:
        raise ApplyError(f"cluster {cluster.name} has no cloud config")
    pools, names = _pool_hosts(client.get_cloud_config(config_uid))
    arch = p.arch or cluster.arch or "amd64"
    for pool, is_cp, target in (
        (CONTROL_PLANE_POOL, True, p.control_plane),
        (WORKER_POOL, False, p.workers),
    ):
        if sorted(pools.get(pool, [])) == sorted(target):
            continue
        entity = machine_pool_entity(pool, is_cp, pool_hosts(target, machines, names), profile, arch)
        if pool in pools:
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
