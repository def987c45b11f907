"""What a target or a shard plans: the observation of one target, the desired state restricted to
its platforms and pools, or to a shard's namespaces (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from reconciler.inventory import Inventory
from reconciler.model.desired import DesiredState, PlatformKey
from reconciler.model.observed import ManagedCluster
from reconciler.model.pools import PLATFORM_KIND, POOL_KIND, PoolKey, WorkloadKey, cluster_kind
from reconciler.model.resources import MLPlatform
from reconciler.plan.decisions import _Entries, _entries
from reconciler.plan.entries import _Invalid
from reconciler.resolve import NamespaceSelector, Routing, Target, is_tenant


class Observation(Protocol):
    """What one Palette target shows: its machines and the managed clusters in it."""

    @property
    def inventory(self) -> Inventory: ...

    @property
    def clusters(self) -> Sequence[ManagedCluster]: ...


@dataclass(frozen=True, slots=True)
class Observed:
    inventory: Inventory
    clusters: Sequence[ManagedCluster]


def restrict(
    desired: DesiredState, platforms: set[PlatformKey], pools: set[PoolKey] | None = None
) -> DesiredState:
    """The desired state with only ``platforms`` among the dedicated MLPlatforms (valid or invalid) and,
    when given, only ``pools`` among the ComputePools; tenants (shared MLPlatforms, AIWorkloads), every
    other resource, the diagnostics and completeness are kept whole."""

    def keep(identity: tuple[str, str, str]) -> bool:
        kind, ns, name = identity
        if kind == PLATFORM_KIND:
            loaded = desired.resources.get(identity)
            tenant = (
                loaded is not None and isinstance(loaded.resource, MLPlatform) and is_tenant(loaded.resource)
            )
            return tenant or (ns, name) in platforms
        if kind == POOL_KIND and pools is not None:
            return (ns, name) in pools
        return True

    return DesiredState(
        revision=desired.revision,
        resources={k: v for k, v in desired.resources.items() if keep(k)},
        invalid={k: v for k, v in desired.invalid.items() if keep(k)},
        diagnostics=list(desired.diagnostics),
        complete=desired.complete,
    )


def select_namespaces(desired: DesiredState, namespaces: NamespaceSelector) -> DesiredState:
    """The desired state of the namespaces a shard owns: their resources (valid or invalid) and
    diagnostics, plus the diagnostics that name no namespace. Completeness is kept: a document no
    shard could identify might be any shard's, so none prunes."""
    if namespaces.everything:
        return desired
    return DesiredState(
        revision=desired.revision,
        resources={k: v for k, v in desired.resources.items() if namespaces.owns(k[1])},
        invalid={k: v for k, v in desired.invalid.items() if namespaces.owns(k[1])},
        diagnostics=[d for d in desired.diagnostics if d.namespace is None or namespaces.owns(d.namespace)],
        complete=desired.complete,
    )


def _target_entries(
    desired: DesiredState,
    routing: Routing,
    target: Target,
    observed: Mapping[Target, Observation],
    namespaces: NamespaceSelector,
    hidden: set[tuple[str, PlatformKey]],
    pool_modes: Mapping[PoolKey, str] | None,
    invalid: Mapping[WorkloadKey, _Invalid],
    pool_profiles: Mapping[PoolKey, tuple[str, ...]] | None = None,
) -> _Entries:
    """The cluster entries of one target: what is routed to it, what is carried (``hidden``: platforms
    and pools hidden by this revision) where its cluster is, and the orphans it holds."""
    # A platform or pool that is in the desired state but has no target this pass (its namespace lost its
    # Settings, say) is not gone: its cluster, wherever it is, is never an orphan.
    everyone = {k for k in routing.all_platforms() | set(routing.unavailable) if namespaces.owns(k[0])}
    everyone |= {k for kind, k in hidden if kind == PLATFORM_KIND}
    every_pool = {k for k in routing.all_pools() | set(routing.pool_unavailable) if namespaces.owns(k[0])}
    every_pool |= {k for kind, k in hidden if kind == POOL_KIND}
    seen = observed[target]
    mine = {k for k in routing.platforms.get(target, set()) if namespaces.owns(k[0])}
    mine_pools = {k for k in routing.pools.get(target, set()) if namespaces.owns(k[0])}
    for c in seen.clusters:
        if (cluster_kind(c.labels), c.key) in hidden:
            (mine_pools if cluster_kind(c.labels) == POOL_KIND else mine).add(c.key)
    clusters = [
        c
        for c in seen.clusters
        if namespaces.owns(c.namespace)
        and (
            (c.key in mine_pools or c.key not in every_pool)
            if cluster_kind(c.labels) == POOL_KIND
            else (c.key in mine or c.key not in everyone)
        )
    ]
    restricted = restrict(desired, mine, mine_pools)
    return _entries(restricted, seen.inventory, clusters, pool_modes, invalid, pool_profiles)
