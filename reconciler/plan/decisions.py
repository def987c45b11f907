"""Cluster entries of one target: each platform's and pool's decision against its cluster, before the
prune guard (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from reconciler.allocate import (
    ALLOW_REPLACE_ANNOTATION,
    DELETING_STATE,
    Allocation,
    Decision,
    Rejection,
    allow_replace,
    place,
    split_clusters,
)
from reconciler.inventory import Inventory, Machine, Role
from reconciler.model.conditions import Reason
from reconciler.model.desired import DesiredState, PlatformKey
from reconciler.model.diagnostics import Diagnostic
from reconciler.model.gpu import GpuFamily
from reconciler.model.observed import ClusterState, ManagedCluster
from reconciler.model.pools import PLATFORM_KIND, POOL_KIND, PoolKey, WorkloadKey
from reconciler.model.resources import AIWorkload, ComputePool, GpuRequest, MLPlatform
from reconciler.placement.quota import QuotaUse, place_within_quota
from reconciler.plan.entries import Action, Plan, PlatformPlan, _Invalid, gpus_of
from reconciler.plan.phases import cluster_reason
from reconciler.profiles import platform_cluster_profiles, reject_unbuildable
from reconciler.resolve import is_tenant


def _is_reference_problem(diagnostics: Sequence[Diagnostic]) -> bool:
    return any(d.reason == Reason.REFERENCE_NOT_FOUND for d in diagnostics)


def _machines_of(hosts: Sequence[str], machines: Mapping[str, Machine]) -> dict[str, Machine]:
    return {uid: machines[uid] for uid in sorted(hosts) if uid in machines}


def _kept(
    key: PlatformKey,
    action: Action,
    reason: Reason,
    message: str,
    cluster: ManagedCluster | None,
    machines: Mapping[str, Machine],
) -> PlatformPlan:
    """A platform whose cluster (if any) is left exactly as it is."""
    if cluster is None:
        return PlatformPlan(key[0], key[1], action, reason, message)
    return PlatformPlan(
        key[0],
        key[1],
        action,
        reason,
        message,
        control_plane=cluster.control_plane,
        workers=cluster.workers,
        gpus=gpus_of(cluster.workers, machines),
        existing=cluster,
        arch=cluster.arch,
        machines=_machines_of(cluster.hosts, machines),
    )


def _decided(
    key: PlatformKey, decision: Decision, cluster: ManagedCluster | None, machines: Mapping[str, Machine]
) -> PlatformPlan:
    if cluster is not None and cluster.held is not None:  # its membership is in doubt: leave it as it is
        return _kept(key, Action.UNCHANGED, cluster_reason(cluster), cluster.held, cluster, machines)
    if isinstance(decision, Rejection):
        return _kept(key, Action.REJECTED, decision.reason, decision.message, cluster, machines)
    alloc: Allocation = decision
    common: dict[str, Any] = {
        "control_plane": alloc.control_plane,
        "workers": alloc.workers,
        "gpus": alloc.gpus,
        "existing": cluster,
        "arch": alloc.arch,
        "machines": _machines_of(alloc.control_plane + alloc.workers, machines),
    }
    hosts = len(alloc.control_plane) + len(alloc.workers)
    if cluster is None:
        msg = f"create cluster on {hosts} {alloc.arch} hosts"
        return PlatformPlan(
            *key,
            Action.CREATE,
            Reason.PROVISIONING,
            msg,
            add_workers=alloc.workers,
            add_control_plane=alloc.control_plane,
            **common,
        )
    if alloc.replaces:
        msg = f"replace the {cluster.arch or 'existing'} cluster {cluster.name} by a new {alloc.arch} cluster"
        return PlatformPlan(
            *key,
            Action.REPLACE,
            Reason.PROVISIONING,
            msg,
            add_workers=alloc.workers,
            add_control_plane=alloc.control_plane,
            remove_workers=cluster.workers,
            remove_control_plane=cluster.control_plane,
            **common,
        )
    add_w, rem_w = _moved(alloc.workers, cluster.workers)
    add_cp, rem_cp = _moved(alloc.control_plane, cluster.control_plane)
    if cluster.known_state is DELETING_STATE:
        msg = f"cluster {cluster.name} is being deleted; it is placed again once it is gone"
        return PlatformPlan(*key, Action.UNCHANGED, Reason.DELETING, msg, **common)
    if not (add_w or rem_w or add_cp or rem_cp):
        return PlatformPlan(
            *key,
            Action.UNCHANGED,
            cluster_reason(cluster),
            f"cluster {cluster.name} is {cluster.state}",
            **common,
        )
    parts = []
    if add_w or rem_w:
        parts.append(f"workers +{len(add_w)} -{len(rem_w)}")
    if add_cp or rem_cp:
        parts.append(f"control plane +{len(add_cp)} -{len(rem_cp)}")
    return PlatformPlan(
        *key,
        Action.SCALE,
        Reason.SCALING,
        f"scale {cluster.name} in place: " + ", ".join(parts),
        add_workers=add_w,
        remove_workers=rem_w,
        add_control_plane=add_cp,
        remove_control_plane=rem_cp,
        **common,
    )


def _moved(after: tuple[str, ...], before: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The hosts added and removed, each sorted (none when the hosts stay: most clusters, most passes)."""
    if after == before:
        return (), ()
    return tuple(sorted(set(after) - set(before))), tuple(sorted(set(before) - set(after)))


@dataclass(frozen=True, slots=True)
class Capacity:
    """Free hosts of one kind after a plan: GPU workers per family, CPU workers, control-plane candidates."""

    kind: str  # a canonical GPU family, "cpu-worker" or "control-plane"
    hosts: int
    gpus: int


def free_capacity(plan: Plan, inventory: Inventory) -> list[Capacity]:
    """What stays free once the plan is carried out (hosts of kept, rejected and deleted clusters count
    as used: deletions free their hosts only once Palette has released them). Pools' hosts count too."""
    used: set[str] = set()
    for p in [*plan.platforms, *(pool.cluster for pool in plan.pools)]:
        used.update(p.control_plane, p.workers)
        if p.existing is not None:
            used.update(p.existing.hosts)
    totals: dict[str, list[int]] = {}
    for m in inventory.machines:
        if not m.available or m.uid in used:
            continue
        if m.role is Role.CONTROL_PLANE:
            kind = "control-plane"
        elif m.gpu_family is not None and m.gpu_count > 0:
            kind = m.gpu_family
        else:
            kind = "cpu-worker"
        entry = totals.setdefault(kind, [0, 0])
        entry[0] += 1
        entry[1] += m.gpu_count if kind != "control-plane" else 0
    order = {"control-plane": 1, "cpu-worker": 0}
    return [
        Capacity(kind, hosts, gpus)
        for kind, (hosts, gpus) in sorted(totals.items(), key=lambda kv: (order.get(kv[0], -1), kv[0]))
    ]


@dataclass(frozen=True, slots=True)
class _Entries:
    """The cluster entries of one target before the prune guard: platforms and pools, by key."""

    desired: DesiredState  # with unbuildable platforms and pools moved to invalid
    platforms: dict[PlatformKey, PlatformPlan]
    pools: dict[PoolKey, PlatformPlan]
    machines: Mapping[str, Machine]
    quotas: tuple[QuotaUse, ...] = ()  # each namespace's GPU quota as these entries leave it
    # The own profile uids each bundle-built pool's status recorded (what its cluster has).
    pool_profiles: Mapping[PoolKey, tuple[str, ...]] = field(default_factory=dict)
    # The tenants of ``desired`` (:func:`_tenants`) by key, in order.
    tenants: Mapping[WorkloadKey, AIWorkload | MLPlatform] = field(default_factory=dict)

    def all(self) -> list[PlatformPlan]:
        return [*self.platforms.values(), *self.pools.values()]


def infrastructure_change(before: Sequence[str], after: Sequence[str]) -> tuple[str, str] | None:
    """(old, new) when a bundle-built pool's infrastructure profile changes: the first of its bundle's
    profiles (the plan's catalogue check keeps the infrastructure profile first); None when it stays."""
    if before and after and before[0] != after[0]:
        return before[0], after[0]
    return None


def _bundle_update(
    entry: PlatformPlan,
    pool: ComputePool,
    desired: DesiredState,
    recorded: Sequence[str] | None,
    machines: Mapping[str, Machine],
) -> PlatformPlan:
    """A running bundle-built pool whose bundle changed: its add-ons attached and detached in place
    (``update``, no host moved). A change of its infrastructure profile needs a new cluster: held
    (``ReplaceBlocked``, the cluster as it is), or with ``palette.ai/allow-replace: "true"`` a ``replace``
    (the cluster deleted, then created from the bundle once it is gone). A pool being scaled meanwhile
    has its add-ons changed by the next pass (its status keeps what its cluster has)."""
    cluster = entry.existing
    if (
        pool.spec.profile_bundle_ref is None
        or recorded is None
        or cluster is None
        or cluster.known_state is not ClusterState.RUNNING
        or entry.action not in (Action.UNCHANGED, Action.SCALE)
        or entry.reason not in (Reason.PROVISIONED, Reason.SCALING)
    ):
        return entry
    wanted = platform_cluster_profiles(desired, pool)
    uids = [r.uid for r in wanted]
    if list(recorded) == uids:
        return entry
    changed = infrastructure_change(recorded, uids)
    if changed is not None:
        return _infrastructure_replaced(entry, pool, cluster, changed, machines)
    attach = tuple(r for r in wanted if r.uid not in recorded)
    detach = tuple(u for u in recorded if u not in uids)
    if (not attach and not detach) or entry.action is Action.SCALE:
        return entry  # the same profiles in another order (Palette's cluster is the same), or a scale first
    parts = [f"attach {', '.join(r.uid for r in attach)}"] if attach else []
    parts += [f"detach {', '.join(detach)}"] if detach else []
    message = f"update the profiles of {cluster.name} in place: {'; '.join(parts)}; no host moved"
    return replace(
        entry,
        action=Action.UPDATE,
        reason=Reason.PROVISIONED,
        message=message,
        attach_profiles=attach,
        detach_profiles=detach,
    )


def _infrastructure_replaced(
    entry: PlatformPlan,
    pool: ComputePool,
    cluster: ManagedCluster,
    changed: tuple[str, str],
    machines: Mapping[str, Machine],
) -> PlatformPlan:
    """A running pool whose infrastructure profile changes: ``replace`` when the pool carries
    ``palette.ai/allow-replace: "true"`` (the same hosts, taken again by the new cluster once the old
    one is gone), else held with ``ReplaceBlocked`` and its cluster kept as it is."""
    key = (entry.namespace, entry.name)
    if not allow_replace(pool):
        message = (
            f"infrastructure profile of running pool changes from {changed[0]} to {changed[1]}: needs a new "
            f"cluster ({ALLOW_REPLACE_ANNOTATION})"
        )
        return _kept(key, Action.REJECTED, Reason.REPLACE_BLOCKED, message, cluster, machines)
    message = (
        f"replace cluster {cluster.name}: its infrastructure profile changes from {changed[0]} to "
        f"{changed[1]} ({ALLOW_REPLACE_ANNOTATION}); deleted now, created from the bundle once it is gone"
    )
    return replace(
        _kept(key, Action.REPLACE, Reason.PROVISIONING, message, cluster, machines),
        add_workers=cluster.workers,
        add_control_plane=cluster.control_plane,
        remove_workers=cluster.workers,
        remove_control_plane=cluster.control_plane,
    )


def _invalid_entry(
    key: PlatformKey,
    problems: Sequence[Diagnostic],
    cluster: ManagedCluster | None,
    machines: Mapping[str, Machine],
) -> PlatformPlan:
    reason = Reason.REFERENCE_NOT_FOUND if _is_reference_problem(problems) else Reason.INVALID_SPEC
    first = sorted(problems, key=Diagnostic.sort_key)[0].message if problems else "invalid manifest"
    suffix = f"; cluster {cluster.name} kept" if cluster else ""
    return _kept(key, Action.INVALID, reason, first + suffix, cluster, machines)


def _orphan_entry(
    key: PlatformKey, what: str, cluster: ManagedCluster, machines: Mapping[str, Machine]
) -> PlatformPlan:
    if cluster.known_state is DELETING_STATE:
        # Already on its way out (an earlier pass deleted it): not a new deletion for the guard.
        msg = f"{what} removed from the repository; cluster {cluster.name} is being deleted"
        return _kept(key, Action.UNCHANGED, Reason.DELETING, msg, cluster, machines)
    msg = f"{what} removed from the repository; delete cluster {cluster.name}"
    return _kept(key, Action.DELETE, Reason.DELETING, msg, cluster, machines)


def with_pool_sizes(
    desired: DesiredState, sizes: Mapping[PoolKey, Mapping[GpuFamily, int]] | None
) -> DesiredState:
    """The desired state with each sized pool requesting its current size (GPUs per family) instead of
    its ``spec.gpus``: a pool with a scaling policy (docs/pools.md, the size computed by
    :func:`reconciler.scaling.current_size`). Pools not in ``sizes`` keep their ``spec.gpus``."""
    if not sizes:
        return desired
    resources = dict(desired.resources)
    for key, size in sizes.items():
        identity = (POOL_KIND, *key)
        loaded = resources.get(identity)
        pool = loaded.resource if loaded is not None else None
        if loaded is None or not isinstance(pool, ComputePool):
            continue
        gpus = [GpuRequest(family=f, count=n) for f, n in sorted(size.items()) if n > 0]
        resized = pool.model_copy(update={"spec": pool.spec.model_copy(update={"gpus": gpus})})
        resources[identity] = replace(loaded, resource=resized)
    return replace(desired, resources=resources)


def _entries(
    desired: DesiredState,
    inventory: Inventory,
    clusters: Sequence[ManagedCluster],
    pool_modes: Mapping[PoolKey, str] | None = None,
    tenants: Mapping[WorkloadKey, _Invalid] | None = None,
    pool_profiles: Mapping[PoolKey, tuple[str, ...]] | None = None,
) -> _Entries:
    """Every dedicated platform and pool of the desired state and every managed cluster gets one entry;
    a cluster whose platform or pool is gone is a ``delete`` here (the prune guard, over the whole pass,
    comes after). ``tenants``: invalid workloads, among them invalid MLPlatforms known to be tenants,
    which are workload entries, not platform entries (unless they have a platform cluster)."""
    desired = reject_unbuildable(desired)  # no cluster profile: invalid, InvalidSpec (docs/validation.md)
    machines = inventory.by_uid()
    platform_clusters, pool_clusters = split_clusters(clusters)
    within = place_within_quota(
        desired, clusters, machines, lambda d: place(d, inventory, clusters, pool_modes, machines=machines)
    )
    decisions = within.placement

    platforms: dict[PlatformKey, PlatformPlan] = {}
    for p in desired.platforms():
        if is_tenant(p):
            continue  # a tenant of a pool: a workload entry, never a cluster
        key = (p.metadata.namespace, p.metadata.name)
        cluster = platform_clusters.get(key)
        if p.spec.suspend:
            msg = f"suspended; cluster {cluster.name} left as it is" if cluster else "suspended; no cluster"
            platforms[key] = _kept(key, Action.SUSPENDED, Reason.SUSPENDED, msg, cluster, machines)
        else:
            entry = _decided(key, decisions.platforms[key], cluster, machines)
            platforms[key] = _quota_held(entry, within.held.get((PLATFORM_KIND, *key)))

    pools: dict[PoolKey, PlatformPlan] = {}
    for pool in desired.of_kind(ComputePool):
        key = (pool.metadata.namespace, pool.metadata.name)
        cluster = pool_clusters.get(key)
        if pool.spec.suspend:
            msg = f"suspended; cluster {cluster.name} left as it is" if cluster else "suspended; no cluster"
            pools[key] = _kept(key, Action.SUSPENDED, Reason.SUSPENDED, msg, cluster, machines)
        else:
            entry = _decided(key, decisions.pools[key], cluster, machines)
            entry = _bundle_update(entry, pool, desired, (pool_profiles or {}).get(key), machines)
            pools[key] = _quota_held(entry, within.held.get((POOL_KIND, *key)))

    for (kind, ns, name), problems in sorted(desired.invalid.items()):
        key = (ns, name)
        if kind == PLATFORM_KIND and key not in platforms:
            if key in (tenants or {}) and key not in platform_clusters:
                continue  # a tenant that held GPUs in a pool: listed under workloads
            platforms[key] = _invalid_entry(key, problems, platform_clusters.get(key), machines)
        elif kind == POOL_KIND and key not in pools:
            pools[key] = _invalid_entry(key, problems, pool_clusters.get(key), machines)

    for key in sorted(k for k in platform_clusters if k not in platforms):
        platforms[key] = _orphan_entry(key, "platform", platform_clusters[key], machines)
    for key in sorted(k for k in pool_clusters if k not in pools):
        pools[key] = _orphan_entry(key, "pool", pool_clusters[key], machines)
    return _Entries(
        desired,
        dict(sorted(platforms.items())),
        {k: replace(e, kind=POOL_KIND) for k, e in sorted(pools.items())},
        machines,
        within.uses,
        dict(pool_profiles or {}),
        dict(_tenants(desired)),
    )


def _quota_held(entry: PlatformPlan, message: str | None) -> PlatformPlan:
    """A grow the namespace's GPU quota holds: its cluster keeps its size (held is not unchanged)."""
    if message is None:
        return entry
    kept = f": cluster {entry.existing.name} keeps its size" if entry.existing is not None else ""
    return replace(entry, reason=Reason.QUOTA_EXCEEDED, message=f"{message}; scale held{kept}")


def _tenants(desired: DesiredState) -> list[tuple[WorkloadKey, AIWorkload | MLPlatform]]:
    """Valid AIWorkloads and shared-mode MLPlatforms, each with its key."""
    platforms = ((k, p) for k, p in desired.by_key(MLPlatform).items() if is_tenant(p))
    return [*desired.by_key(AIWorkload).items(), *platforms]
