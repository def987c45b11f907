"""The engine's pass: every valid, non-suspended platform and pool decided, in the documented order (pure).

Sticky first (those with a cluster), then new ones by priority; within one priority the name order
is a tie-break searched for an order that places strictly more (:func:`_place_new`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from reconciler import resolve
from reconciler.allocate.existing import allocate_existing, to_allocation
from reconciler.allocate.free_hosts import FreeHosts
from reconciler.allocate.needs import (
    Allocation,
    Decision,
    Rejection,
    Requirements,
    pool_requirements,
    previous_pool_mode,
    requirements,
)
from reconciler.allocate.one_platform import Outcome, best_fresh
from reconciler.inventory import NAME_UID, HostState, Inventory, Machine, Role
from reconciler.manifests.pool_rules import pool_mode_change
from reconciler.model.conditions import Reason
from reconciler.model.desired import DesiredState, PlatformKey
from reconciler.model.observed import ManagedCluster
from reconciler.model.pools import POOL_KIND, PoolKey, cluster_kind
from reconciler.model.resources import ComputePool, MLPlatform
from reconciler.placement import platform_order


@dataclass(frozen=True, slots=True)
class Placement:
    """The decisions of one pass over one inventory: dedicated platforms and pools, by (namespace, name)."""

    platforms: dict[PlatformKey, Decision]
    pools: dict[PoolKey, Decision]


def _priority(resource: resolve.Clustered) -> int:
    """``MLPlatform.spec.priority``; a pool places with priority 0."""
    return resource.spec.priority if isinstance(resource, MLPlatform) else 0


Ident = tuple[str, str, str]  # (namespace, name, kind)


def _place_new(
    idents: list[Ident], needs: Mapping[Ident, Requirements], free: FreeHosts
) -> dict[Ident, Decision]:
    """New platforms (and pools) of one priority, in their (namespace, name) order.

    The order is a tie-break, not a reason to leave capacity unused: when it leaves some out, a bounded,
    deterministic search (:func:`reconciler.placement.platform_order.better_order`) looks for an order
    that places strictly more, and that order's placement is taken; otherwise the name order stands as
    it was. When all fit, nothing is searched.
    """
    start = free.heads()
    greedy = _place_in_order(idents, needs, free)
    if all(isinstance(d, Allocation) for d in greedy.values()):
        return greedy
    done = free.heads()
    placed = [i for i in idents if isinstance(greedy[i], Allocation)]
    free.restore(start)
    usage = {i: _usage(needs[i]) for i in idents}
    placer = _Placer(needs, free)
    better = platform_order.better_order(idents, placed, usage, _supply(free), placer)
    if better is None:
        free.restore(done)
        return greedy
    if better.in_place:  # the placer's last pass: each of the order placed or refused in turn
        out: dict[Ident, Decision] = {
            i: r if isinstance(r, Rejection) else to_allocation(*r) for i, r in placer.placed.items()
        }
    else:
        out = _place_in_order(better.order, needs, free)
    out |= _place_in_order([i for i in idents if i not in out], needs, free)
    return out


def _place_in_order(
    idents: Sequence[Ident], needs: Mapping[Ident, Requirements], free: FreeHosts
) -> dict[Ident, Decision]:
    out: dict[Ident, Decision] = {}
    for ident in idents:
        result = best_fresh(needs[ident], free)
        if isinstance(result, Rejection):
            out[ident] = result
        else:
            arch, outcome = result
            free.commit(outcome.trial)
            out[ident] = to_allocation(arch, outcome)
    return out


class _Placer:
    """The engine's placement of one new platform, as the order search drives it. ``placed``: what was
    placed, or refused, since the last restore, in turn (the search's last pass, when it says the placer
    holds it)."""

    def __init__(self, needs: Mapping[Ident, Requirements], free: FreeHosts) -> None:
        self.needs, self.free = needs, free
        self.placed: dict[Ident, tuple[str, Outcome] | Rejection] = {}

    def place(self, ident: Ident) -> dict[str, float] | None:
        result = best_fresh(self.needs[ident], self.free)
        if isinstance(result, Rejection):
            self.placed[ident] = result
            return None
        outcome = result[1]
        self.free.commit(outcome.trial)
        self.placed[ident] = result
        return _taking(len(outcome.control_plane), len(outcome.workers), outcome.gpus.items())

    def mark(self) -> tuple[int, ...]:
        return self.free.heads()

    def restore(self, mark: object) -> None:
        assert isinstance(mark, tuple)
        self.free.restore(mark)
        self.placed.clear()


def _usage(req: Requirements) -> dict[str, float]:
    """What a platform asks of the resources the order search prices: never more than it takes."""
    return _taking(req.control_plane, req.min_workers, req.gpus.items())


def _taking(control_plane: int, workers: int, gpus: Iterable[tuple[str, int]]) -> dict[str, float]:
    """Hosts and GPUs as the order search prices them: all architectures and resource groups together
    (the prices only order the candidates; the engine decides what fits)."""
    took = {f"gpus:{f}": float(n) for f, n in gpus}
    took["control-plane"] = float(control_plane)
    took["workers"] = float(workers)
    return took


def _supply(free: FreeHosts) -> dict[str, float]:
    """The free amount of each resource of :func:`_usage`."""
    supply: dict[str, float] = {"control-plane": 0.0, "workers": 0.0}
    for pool in free.pools:
        n = len(pool.hosts) - pool.head
        if pool.role is Role.CONTROL_PLANE:
            supply["control-plane"] += n
        else:
            supply["workers"] += n
            if pool.family is not None:
                key = f"gpus:{pool.family}"
                supply[key] = supply.get(key, 0.0) + n * pool.count
    return supply


def split_clusters(
    clusters: Sequence[ManagedCluster],
) -> tuple[dict[PlatformKey, ManagedCluster], dict[PoolKey, ManagedCluster]]:
    """The managed clusters of platforms and of pools, by key (the first by name and uid when several
    carry one key). A cluster without the ``palette.ai/kind`` label is a platform's."""
    platforms: dict[PlatformKey, ManagedCluster] = {}
    pools: dict[PoolKey, ManagedCluster] = {}
    for c in sorted(clusters, key=lambda c: (c.namespace, c.platform, c.name, c.uid)):
        (pools if cluster_kind(c.labels) == POOL_KIND else platforms).setdefault(c.key, c)
    return platforms, pools


def place(
    desired: DesiredState,
    inventory: Inventory,
    clusters: Sequence[ManagedCluster],
    pool_modes: Mapping[PoolKey, str] | None = None,
    *,
    machines: Mapping[str, Machine] | None = None,
) -> Placement:
    """Decide every valid, non-suspended dedicated platform and pool: an allocation, or a rejection.

    Suspended and invalid ones are not decided; their clusters keep their hosts. ``pool_modes`` is the
    mode the status branch last reported per pool, used when a pool's cluster lacks the mode label.
    ``machines``: the inventory's machines by uid, when the caller has that map already.
    """
    known = machines if machines is not None else {m.uid: m for m in inventory.machines}
    if len(known) < len(inventory.machines):  # a uid listed twice: the last by name wins
        known = {m.uid: m for m in sorted(inventory.machines, key=NAME_UID)}
    occupied = {u for c in clusters for u in c.hosts}
    available = HostState.AVAILABLE
    free = FreeHosts([m for m in known.values() if m.state is available and m.uid not in occupied])
    platform_clusters, pool_clusters = split_clusters(clusters)
    reported = pool_modes or {}

    # (namespace, name, kind) -> the resource, its cluster, its needs
    subjects: dict[tuple[str, str, str], tuple[resolve.Clustered, ManagedCluster | None]] = {}
    for p in desired.platforms():
        if not p.spec.suspend and not resolve.is_tenant(p):
            key = (p.metadata.namespace, p.metadata.name)
            subjects[(*key, "MLPlatform")] = (p, platform_clusters.get(key))
    for pool in desired.of_kind(ComputePool):
        if not pool.spec.suspend:
            key = (pool.metadata.namespace, pool.metadata.name)
            subjects[(*key, POOL_KIND)] = (pool, pool_clusters.get(key))

    decisions: dict[tuple[str, str, str], Decision] = {}
    needs: dict[tuple[str, str, str], Requirements] = {}
    for ident, (resource, cluster) in subjects.items():
        req: Requirements | Rejection
        if isinstance(resource, ComputePool):
            changed = None
            if cluster is not None:
                changed = pool_mode_change(resource, previous_pool_mode(cluster, reported), True)
            req = Rejection(Reason.INVALID_SPEC, changed) if changed else pool_requirements(desired, resource)
        else:
            req = requirements(desired, resource)
        if isinstance(req, Rejection):
            decisions[ident] = req
        else:
            needs[ident] = req
    # Sticky first: those that already have a cluster, in (namespace, name) order; then new ones by
    # priority (high first), each priority placed to fit as many as it can (order breaks ties).
    for ident in sorted(i for i in needs if subjects[i][1] is not None):
        resource, cluster = subjects[ident]
        assert cluster is not None
        decisions[ident] = allocate_existing(resource, needs[ident], cluster, free, known)
    priority = {i: _priority(subjects[i][0]) for i in needs if subjects[i][1] is None}
    fresh = sorted(priority, key=lambda i: (-priority[i], i))
    for _, group in itertools.groupby(fresh, key=priority.__getitem__):
        decisions.update(_place_new(list(group), needs, free))
    return Placement(
        platforms={(ns, n): d for (ns, n, kind), d in sorted(decisions.items()) if kind == "MLPlatform"},
        pools={(ns, n): d for (ns, n, kind), d in sorted(decisions.items()) if kind == POOL_KIND},
    )


def allocate(
    desired: DesiredState, inventory: Inventory, clusters: Sequence[ManagedCluster]
) -> dict[PlatformKey, Decision]:
    """Decide every valid, non-suspended dedicated platform (pools take their hosts too: :func:`place`).

    Suspended and invalid platforms are not decided; their clusters keep their hosts.
    """
    return place(desired, inventory, clusters).platforms
