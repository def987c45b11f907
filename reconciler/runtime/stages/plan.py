"""The plan stage: desired state, observation and the status branch's records -> the pass's plans.

``run`` and every mode of ``reconciler plan`` call :func:`plan_pass` with the same inputs (the records
of the status branch, or none when nothing deployed is known), so a pull request's plan is what the
merge's pass does (docs/reconciling.md). Scaling is this stage's inner loop (docs/scaling.md, "How the
controller runs it"): pools with a policy request their current size (``spec.gpus`` and the recorded
actions); the decisions are made on that plan with the utilisation the :class:`SampleSource` gives; an
action is planned with its target size and confirmed against that plan; the pass's plan (made with the
final sizes) carries each pool's decision. Pools without a policy: one plan, no query.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from reconciler.bundles import catalogue_of
from reconciler.inventory import Inventory, discover
from reconciler.model.desired import DesiredState
from reconciler.model.gpu import GpuFamily
from reconciler.model.pools import POOL_KIND, PoolKey, cluster_kind
from reconciler.plan import Observation, Observed, Plan, gpus_of, plan_targets
from reconciler.resolve import EVERY_NAMESPACE, NamespaceSelector, Routing, Target
from reconciler.runtime.facts import Planned
from reconciler.scaling.pools import kept_entries, pool_sizes
from reconciler.scaling.stage import SampleSource, confirm, evaluate
from reconciler.snapshots import ReadSnapshot, Snapshot, managed_clusters
from reconciler.status.records import Records, checked

Sizes = Mapping[PoolKey, Mapping[GpuFamily, int]]


def plan_pass(
    desired: DesiredState,
    routing: Routing,
    observed: Mapping[Target, Observation],
    records: Records,
    *,
    samples: SampleSource,
    now: float,
    max_deletions: int = 1,
    namespaces: NamespaceSelector = EVERY_NAMESPACE,
    approved_deletions: int | None = None,
) -> Planned:
    """The plans of one pass over every observed target (the prune guard counts the whole pass;
    ``approved_deletions``: the revision's ``Reconciler-Allow-Deletions`` trailer). The records are
    first checked against the observation (:func:`reconciler.status.records.checked`); the plans are
    made with the checked ones, which :attr:`Planned.records` holds for the report."""
    records = checked(records, desired, observed)

    def plan(sizes: Sizes | None) -> dict[Target, Plan]:
        return plan_targets(
            desired,
            routing,
            observed,
            max_deletions=max_deletions,
            namespaces=namespaces,
            previous=records.pools.previous,
            pool_modes=records.pools.modes,
            previous_layouts=records.pools.layouts,
            sizes=sizes,
            approved_deletions=approved_deletions,
            pool_profiles=records.pools.profiles,
        )

    kept = kept_entries(desired, records.scaling)  # invalid pools: their records stand, undecided
    sizes = _current_sizes(desired, observed, records)
    if not sizes:
        return Planned({t: p.with_scaling(kept) for t, p in plan(None).items()}, records=records)
    first = plan(sizes)
    outcomes = evaluate(
        samples, desired, first.values(), now, records.scaling, records.pending_since, skip=records.unreadable
    )
    if not outcomes:
        return Planned({t: p.with_scaling(kept) for t, p in first.items()}, records=records)
    plans = first
    if any(o.acts for o in outcomes.values()):  # plan again with the actions' sizes
        acting = {k: dict(o.target) for k, o in outcomes.items() if o.acts}
        plans = plan({**sizes, **acting})
        outcomes = confirm(outcomes, first, plans)
        if any(o.withdrawn for o in outcomes.values()):  # back to its size: plan once more
            plans = plan({**sizes, **{k: dict(o.target) for k, o in outcomes.items()}})
    entries = {**kept, **{k: o.entry for k, o in outcomes.items()}}
    return Planned({t: p.with_scaling(entries) for t, p in plans.items()}, outcomes, records)


def _current_sizes(
    desired: DesiredState, observed: Mapping[Target, Observation], records: Records
) -> dict[PoolKey, Mapping[GpuFamily, int]]:
    """Each pool with a policy at the size its record implies; a pool whose record could not be read
    keeps the GPUs its cluster has (it is not decided this pass)."""
    sizes: dict[PoolKey, Mapping[GpuFamily, int]] = dict(pool_sizes(desired, records.scaling))
    kept = set(records.unreadable & set(sizes))
    if not kept:
        return sizes
    machines = {uid: m for o in observed.values() for uid, m in o.inventory.by_uid().items()}
    for o in observed.values():
        for cluster in o.clusters:
            if cluster_kind(cluster.labels) == POOL_KIND and cluster.key in kept:
                kept.discard(cluster.key)  # the first target that holds it, as observed
                sizes[cluster.key] = {GpuFamily(f): n for f, n in gpus_of(cluster.workers, machines).items()}
    return sizes


def with_catalogue(inventory: Inventory, snapshot: Snapshot | ReadSnapshot) -> Inventory:
    """The inventory with the snapshot's cluster profile catalogue (docs/bundles.md), when it has one (a
    recorded snapshot's is what Palette answered for the uids it was asked about)."""
    found = catalogue_of(snapshot.cluster_profiles, snapshot.profiles_asked)
    return inventory if found is None else replace(inventory, catalogue=found)


def snapshot_observation(snapshot: ReadSnapshot) -> Observed:
    """A target as an inventory snapshot shows it (machines and managed clusters)."""
    hosts = snapshot.hosts  # read once: discovery and membership take the same facts
    inventory = with_catalogue(discover(hosts), snapshot)
    if not snapshot.clusters:  # nothing to find the members of (a first plan): no host read again
        return Observed(inventory, [])
    return Observed(inventory, managed_clusters(snapshot.clusters, hosts, inventory.by_uid()))
