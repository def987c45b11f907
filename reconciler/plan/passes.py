"""One pass: one target (:func:`make_plan`) or every observed target (:func:`plan_targets`), and their
merge into the one plan ``plan`` prints (pure)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from reconciler.bundles import bundle_rejections, reject_bad_bundles, target_catalogues
from reconciler.deletions import DeletionGuard
from reconciler.inventory import Inventory, Machine
from reconciler.model.desired import DesiredState, Identity, PlatformKey
from reconciler.model.diagnostics import UNKNOWN_GPU_FAMILY, Diagnostic
from reconciler.model.gpu import GpuFamily, canonical_family
from reconciler.model.observed import ManagedCluster
from reconciler.model.pools import POOL_KIND, PoolKey, WorkloadKey
from reconciler.model.resources import MLPlatform
from reconciler.placement.admission_types import PreviousAdmissions, WorkloadAction
from reconciler.plan.admission import _admit, _carried, _invalid_workloads, _strays
from reconciler.plan.decisions import _entries, with_pool_sizes
from reconciler.plan.entries import (
    Action,
    Plan,
    PlatformPlan,
    PoolPlan,
    PreviousLayouts,
    ScalingPlan,
    WorkloadPlan,
)
from reconciler.plan.environments import resolved
from reconciler.plan.prune import _blocked, _leaving, _prune_guard
from reconciler.plan.shards import Observation, _target_entries, select_namespaces
from reconciler.process_exit import without_collector
from reconciler.resolve import EVERY_NAMESPACE, NamespaceSelector, Routing, Target


@without_collector()  # a pass: many objects, few cycles (process_exit.collector_paused)
def make_plan(
    desired: DesiredState,
    inventory: Inventory,
    clusters: Sequence[ManagedCluster],
    *,
    max_deletions: int = 1,
    previous: PreviousAdmissions | None = None,
    pool_modes: Mapping[PoolKey, str] | None = None,
    sizes: Mapping[PoolKey, Mapping[GpuFamily, int]] | None = None,
    scaling: Mapping[PoolKey, ScalingPlan] | None = None,
    previous_layouts: PreviousLayouts | None = None,
    approved_deletions: int | None = None,
    pool_profiles: Mapping[PoolKey, tuple[str, ...]] | None = None,
) -> Plan:
    """Plan one pass against one inventory: every platform, pool and workload and every managed cluster
    gets an entry. ``previous``: the admissions the status branch recorded, per pool; ``pool_modes``: the
    mode the status branch last reported per pool (used when a pool's cluster lacks its mode label);
    ``sizes``: pools' current sizes (GPUs per family) instead of their ``spec.gpus``; ``scaling``: pools'
    scaling entries (the scaling stage's decisions) instead of ``NotEvaluated``; ``approved_deletions``:
    the revision's ``Reconciler-Allow-Deletions`` trailer (:mod:`reconciler.deletions`)."""
    rejected = bundle_rejections(desired, lambda _: (inventory.catalogue,))
    desired = with_pool_sizes(reject_bad_bundles(desired, rejected), sizes)
    desired = _carried(desired, clusters, previous or {})
    invalid = _invalid_workloads(desired, previous or {})
    found = _entries(desired, inventory, clusters, pool_modes, invalid, pool_profiles)
    guard = DeletionGuard(max_deletions, approved_deletions, desired.revision)
    guarded = _prune_guard(found.all(), _leaving(found, previous or {}, invalid), desired.complete, guard)
    blocked = guarded.blocked
    pool_entries = {k: _blocked(e, blocked) for k, e in found.pools.items()}
    pools, workloads = _admit(found, pool_entries, previous or {}, invalid, previous_layouts or {}, guarded)
    workloads += _strays(desired, {w.key for w in workloads}, invalid, {}, previous or {}, found.machines)
    plan = Plan(
        revision=desired.revision,
        platforms=[_blocked(found.platforms[k], blocked) for k in sorted(found.platforms)],
        diagnostics=plan_diagnostics(desired, inventory.machines),
        machines=found.machines,
        pools=pools,
        workloads=sorted(workloads, key=lambda w: w.sort_key),
        deletions_note=guarded.note,
        quotas=found.quotas,
    )
    plan = _as_rejected(plan, rejected)
    return plan.with_scaling(scaling) if scaling else plan


@without_collector()  # a pass: many objects, few cycles (process_exit.collector_paused)
def plan_targets(
    desired: DesiredState,
    routing: Routing,
    observed: Mapping[Target, Observation],
    *,
    max_deletions: int = 1,
    previous: PreviousAdmissions | None = None,
    pool_modes: Mapping[PoolKey, str] | None = None,
    namespaces: NamespaceSelector = EVERY_NAMESPACE,
    sizes: Mapping[PoolKey, Mapping[GpuFamily, int]] | None = None,
    scaling: Mapping[PoolKey, ScalingPlan] | None = None,
    previous_layouts: PreviousLayouts | None = None,
    approved_deletions: int | None = None,
    pool_profiles: Mapping[PoolKey, tuple[str, ...]] | None = None,
) -> dict[Target, Plan]:
    """Plan a pass over every observed Palette target, as ``run`` does and ``plan`` shows.

    Each target plans the platforms and pools routed to it against its own inventory; a cluster of a
    platform or pool routed elsewhere is left alone, one whose platform or pool is gone from the desired
    state everywhere is an orphan of the target that holds it. The prune guard counts the deletions of the
    whole pass. Workloads are planned in the target of their pool; the workloads no pool decided (invalid
    ones holding nothing, tenants of an unroutable pool) go to the first target (by url, project).
    Only ``namespaces`` are planned: resources, clusters and admissions of other namespaces belong to
    another shard and appear in no entry (nor in the prune guard's count). ``sizes`` and ``scaling`` are
    as for :func:`make_plan` (a pool with a scaling policy requests its current size; its scaling entry is
    the stage's decision). The deletion guard (:mod:`reconciler.deletions`) counts the removals of the
    whole pass against ``max_deletions``, raised to ``approved_deletions`` (the revision's trailer).
    """
    desired = with_pool_sizes(select_namespaces(desired, namespaces), sizes)
    catalogues = {target: seen.inventory.catalogue for target, seen in observed.items()}
    rejected = bundle_rejections(
        desired, target_catalogues(routing, catalogues, lambda w: resolved(desired, w)[1])
    )
    desired = reject_bad_bundles(desired, rejected)
    previous = {k: v for k, v in (previous or {}).items() if namespaces.owns(k[0])}
    seen_clusters = [c for seen in observed.values() for c in seen.clusters if namespaces.owns(c.namespace)]
    carried = _carried(desired, seen_clusters, previous)
    # What is carried (a platform or pool hidden by this revision) stays with the cluster it has.
    hidden = {(kind, (ns, name)) for kind, ns, name in set(carried.invalid) - set(desired.invalid)}
    desired = carried
    invalid = _invalid_workloads(desired, previous)
    order = sorted(observed, key=lambda t: (t.url, t.project_uid or ""))
    found = {
        target: _target_entries(
            desired, routing, target, observed, namespaces, hidden, pool_modes, invalid, pool_profiles
        )
        for target in order
    }
    every = [p for f in found.values() for p in f.all()]
    leaving = {k for f in found.values() for k in _leaving(f, previous, invalid)}
    guard = DeletionGuard(max_deletions, approved_deletions, desired.revision)
    guarded = _prune_guard(every, leaving, desired.complete, guard)
    blocked = guarded.blocked
    hosts = (m for seen in observed.values() for m in seen.inventory.machines)
    diagnostics = plan_diagnostics(desired, hosts)
    plans: dict[Target, Plan] = {}
    planned: set[WorkloadKey] = set()
    for target in order:
        f = found[target]
        pool_entries = {k: _blocked(e, blocked) for k, e in f.pools.items()}
        pools, workloads = _admit(f, pool_entries, previous or {}, invalid, previous_layouts or {}, guarded)
        planned |= {w.key for w in workloads}
        plans[target] = Plan(
            desired.revision,
            [_blocked(f.platforms[k], blocked) for k in sorted(f.platforms)],
            diagnostics,
            machines=f.machines,
            pools=pools,
            workloads=workloads,
            deletions_note=guarded.note,
            quotas=f.quotas,
        ).with_scaling(scaling or {})
    if order:
        every_machine = found[order[0]].machines  # the same map when there is one target
        if len(order) > 1:
            every_machine = {u: m for t in observed for u, m in found[t].machines.items()}
        strays = _strays(desired, planned, invalid, routing.pool_unavailable, previous, every_machine)
        first = plans[order[0]]
        plans[order[0]] = replace(
            first, workloads=sorted([*first.workloads, *strays], key=lambda w: w.sort_key)
        )
    return {t: _as_rejected(p, rejected) for t, p in plans.items()}


def _as_rejected(plan: Plan, rejected: Mapping[Identity, str]) -> Plan:
    """The entries of what a bundle check rejected say ``rejected`` (they are carried as invalid, so
    that what runs keeps running): a pool always, a workload when it holds nothing."""
    if not rejected:
        return plan
    pools = [
        replace(p, cluster=replace(p.cluster, action=Action.REJECTED))
        if (POOL_KIND, *p.key) in rejected and p.cluster.action is Action.INVALID
        else p
        for p in plan.pools
    ]
    workloads = [
        replace(w, action=WorkloadAction.REJECTED)
        if (w.kind, w.namespace, w.name) in rejected
        and w.action is WorkloadAction.INVALID
        and not (w.gpus or w.mig)
        else w
        for w in plan.workloads
    ]
    return replace(plan, pools=pools, workloads=workloads)


def plan_diagnostics(desired: DesiredState, machines: Iterable[Machine]) -> list[Diagnostic]:
    """The revision's diagnostics, less the unknown-family warnings about a family some host of
    ``machines`` has: validation cannot see hosts, the plan can (a family no host and no known model has
    is a typo). The hosts are read only when there is such a warning."""
    host_families: set[GpuFamily] | None = None

    def moot(d: Diagnostic) -> bool:
        nonlocal host_families
        if d.reason != UNKNOWN_GPU_FAMILY or d.namespace is None or d.name is None or d.field is None:
            return False
        platform = desired.get(MLPlatform, d.namespace, d.name)
        index = d.field.removeprefix("spec.gpus[").split("]", 1)[0]
        if platform is None or not index.isdigit() or int(index) >= len(platform.spec.gpus):
            return False
        if host_families is None:
            host_families = {m.gpu_family for m in machines if m.gpu_family}
        try:
            return canonical_family(platform.spec.gpus[int(index)].family) in host_families
        except ValueError:
            return False

    return sorted((d for d in desired.diagnostics if not moot(d)), key=Diagnostic.sort_key)


def merge(revision: str | None, plans: Mapping[Target, Plan], diagnostics: Sequence[Diagnostic]) -> Plan:
    """One plan of a whole pass (what ``plan`` prints): every target's entries, by (namespace, name)."""
    entries: dict[PlatformKey, PlatformPlan] = {}
    pools: dict[PoolKey, PoolPlan] = {}
    workloads: dict[tuple[str, str, int, str], WorkloadPlan] = {}
    for target in sorted(plans, key=lambda t: (t.url, t.project_uid or "")):
        for p in plans[target].platforms:
            entries.setdefault(p.key, p)
        for pool in plans[target].pools:
            pools.setdefault(pool.key, pool)
        for w in plans[target].workloads:
            workloads.setdefault(w.sort_key, w)
    return Plan(
        revision,
        [entries[k] for k in sorted(entries)],
        sorted(diagnostics, key=Diagnostic.sort_key),
        pools=[pools[k] for k in sorted(pools)],
        workloads=[workloads[k] for k in sorted(workloads)],
        deletions_note=next((p.deletions_note for p in plans.values() if p.deletions_note), ""),
        quotas=tuple(
            sorted({q for p in plans.values() for q in p.quotas}, key=lambda q: (q.namespace, q.family))
        ),
    )
