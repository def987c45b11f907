"""Admission into the pools of one target, and the workloads no pool decided (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from reconciler.inventory import Machine
from reconciler.manifests.carry import carry_held
from reconciler.model.base import ClusterProfileRef
from reconciler.model.conditions import Reason
from reconciler.model.desired import DesiredState
from reconciler.model.diagnostics import Diagnostic
from reconciler.model.gpu import GpuFamily
from reconciler.model.observed import ClusterState, ManagedCluster
from reconciler.model.pools import (
    PLATFORM_KIND,
    POOL_KIND,
    POOL_MODE_LABEL,
    PROVISIONED_LABEL,
    MigRequest,
    PoolKey,
    WorkloadKey,
    WorkloadRequest,
    canonical_limits,
    cluster_kind,
    pool_ref_of,
    tenants_by_pool,
)
from reconciler.model.resources import AIWorkload, ComputePool, MLPlatform
from reconciler.placement.admission import admit_pool
from reconciler.placement.admission_types import (
    PoolAdmission,
    PoolState,
    PreviousAdmission,
    PreviousAdmissions,
    WorkloadAction,
    WorkloadAdmission,
)
from reconciler.placement.mig_layouts import GpuLayout
from reconciler.placement.mig_outcome import relayout_summary
from reconciler.placement.mig_pool import admit_mig_pool
from reconciler.placement.units import GpuRef, GpuUnit, gpu_units
from reconciler.plan.decisions import _Entries, _is_reference_problem, _tenants
from reconciler.plan.entries import (
    Action,
    PlatformPlan,
    PoolPlan,
    PreviousLayouts,
    WorkloadPlan,
    _Invalid,
    _scaling,
)
from reconciler.plan.environments import route_environments, unrouted, with_environment
from reconciler.plan.prune import _Guarded
from reconciler.profiles import platform_cluster_profiles, workload_cluster_profiles
from reconciler.resolve import compute_profile


def _workload_profiles(
    desired: DesiredState, resource: AIWorkload | MLPlatform, pool: ComputePool | None
) -> tuple[ClusterProfileRef, ...]:
    return workload_cluster_profiles(desired, resource, pool)


def _invalid_workloads(desired: DesiredState, previous: PreviousAdmissions) -> dict[WorkloadKey, _Invalid]:
    """Invalid AIWorkloads, and invalid MLPlatforms that a previous admission shows were tenants."""
    tenants_before = {a.key for admissions in previous.values() for a in admissions}
    out: dict[WorkloadKey, _Invalid] = {}
    for (kind, ns, name), problems in sorted(desired.invalid.items()):
        if kind == "AIWorkload" or (kind == PLATFORM_KIND and (ns, name) in tenants_before):
            reason = Reason.REFERENCE_NOT_FOUND if _is_reference_problem(problems) else Reason.INVALID_SPEC
            first = sorted(problems, key=Diagnostic.sort_key)[0].message if problems else "invalid manifest"
            out[(ns, name)] = _Invalid(kind, reason, first)
    return out


def _kept_request(
    key: WorkloadKey, kind: str, held: PreviousAdmission, units: Sequence[GpuUnit]
) -> WorkloadRequest:
    """An invalid workload asks for exactly what it holds, whole GPUs and MIG instances, so that
    admission keeps it on them (never more): as many replicas as it holds, each the shape of its
    replica 0."""
    by_ref = {u.ref: u for u in units}
    replica_of = held.replica_of()
    whole: dict[GpuFamily, int] = {}
    for ref in held.gpus:
        unit = by_ref.get(ref)
        if unit is not None and replica_of.get(ref, 0) == 0:
            whole[unit.family] = whole.get(unit.family, 0) + 1
    mig: dict[tuple[GpuFamily, str], int] = {}
    for instance in held.mig:
        gpu = by_ref.get(GpuRef(instance.host_uid, instance.gpu))
        if gpu is not None and instance.replica == 0:
            mig[(gpu.family, instance.profile)] = mig.get((gpu.family, instance.profile), 0) + 1
    replicas = len(set(replica_of.values()) | {i.replica for i in held.mig}) or 1
    return WorkloadRequest(
        key=key,
        kind=kind,
        whole=dict(sorted(whole.items())),
        mig=tuple(MigRequest(f, p, n) for (f, p), n in sorted(mig.items())),
        replicas=replicas,
    )


def _mig_strategy(
    pool: ComputePool | None, layouts: Sequence[GpuLayout], held: Sequence[PreviousAdmission]
) -> str:
    """The pool's ``mig.strategy``; for a pool the plan cannot read (invalid, or hidden by an incomplete
    revision), the one its records show: ``mixed`` while it has MIG layouts or instances held, so that
    nothing it holds is lost (invalid is not absent)."""
    if pool is not None:
        return pool.spec.mig.strategy if pool.spec.mig is not None else "none"
    return "mixed" if layouts or any(a.mig for a in held) else "none"


def _not_ready(
    key: PoolKey, pool: ComputePool | None, entry: PlatformPlan, desired: DesiredState
) -> str | None:
    """Why the pool takes no new workload this pass, or None."""
    name = key[1]
    if pool is None:
        if (POOL_KIND, *key) in desired.invalid:
            return f"pool {name} is invalid (see its errors)"
        return f"pool {name} is removed from the repository"
    if entry.action is Action.REJECTED:
        return f"pool {name} is rejected ({entry.reason}): {entry.message}"
    if entry.action is Action.SUSPENDED:
        return f"pool {name} is suspended"
    if entry.reason is Reason.DELETING:
        return f"pool {name}: {entry.message}"
    return None


def _pool_running(entry: PlatformPlan) -> bool:
    cluster = entry.existing
    return (
        cluster is not None
        and cluster.known_state is ClusterState.RUNNING
        and entry.action
        in (Action.UNCHANGED, Action.SCALE, Action.UPDATE, Action.SUSPENDED, Action.REJECTED, Action.INVALID)
        and entry.reason is not Reason.DELETING
    )


def _workload_entry(
    decision: WorkloadAdmission,
    kind: str,
    running: bool,
    invalid: _Invalid | None,
    profiles: tuple[ClusterProfileRef, ...],
) -> WorkloadPlan:
    action, reason, message = decision.action, decision.reason, decision.message
    if invalid is not None and action is not WorkloadAction.REMOVE:
        held = f"; keeps its {len(decision.gpus)} GPU(s) in pool {decision.pool[1]}" if decision.gpus else ""
        action, reason, message = WorkloadAction.INVALID, invalid.reason, invalid.message + held
    elif action is WorkloadAction.ADMIT and not running:
        message += f"; its profiles are attached once the cluster of pool {decision.pool[1]} is Running"
    return WorkloadPlan(
        decision.key[0],
        decision.key[1],
        kind,
        decision.pool[1],
        action,
        reason,
        message,
        gpus=decision.gpus,
        mig=decision.mig,
        pool_running=running,
        cluster_profiles=profiles if action in (WorkloadAction.ADMIT, WorkloadAction.ADMITTED) else (),
        replicas=decision.replicas,
        gpu_replicas=decision.gpu_replicas,
        position=decision.position if action is WorkloadAction.PENDING else None,
    )


@dataclass(frozen=True, slots=True)
class _PoolInput:
    """One pool's admission inputs: its state, the requests of the workloads that name it (and of the
    invalid and held-back ones, which ask for what they hold), its records."""

    state: PoolState
    requests: tuple[WorkloadRequest, ...]
    held: tuple[PreviousAdmission, ...]
    layouts: tuple[GpuLayout, ...]

    def admit(self, requests: Sequence[WorkloadRequest]) -> tuple[PoolAdmission, Any]:
        """Admission with these tenants (a fresh MIG planner each time: a trial leaves nothing behind)."""
        if self.state.mig_strategy == "mixed":
            return admit_mig_pool(self.state, requests, self.held, self.layouts)
        return admit_pool(self.state, requests, self.held, None), None


def _pool_input(
    found: _Entries,
    key: PoolKey,
    entry: PlatformPlan,
    named: Sequence[WorkloadRequest],
    previous: PreviousAdmissions,
    invalid: Mapping[WorkloadKey, _Invalid],
    layouts: PreviousLayouts,
    held_back: frozenset[WorkloadKey],
) -> _PoolInput:
    desired = found.desired
    pool = desired.get(ComputePool, *key)
    profile = compute_profile(desired, pool) if pool is not None else None
    units = gpu_units(found.machines[u] for u in sorted(entry.workers) if u in found.machines)
    held = tuple(previous.get(key, ()))
    requests = list(named)
    requests += [_kept_request(a.key, invalid[a.key].kind, a, units) for a in held if a.key in invalid]
    requests += [_kept_request(a.key, a.kind, a, units) for a in held if a.key in held_back]
    mode: str | None = pool.spec.mode if pool is not None else None
    if mode is None and entry.existing is not None:
        mode = entry.existing.labels.get(POOL_MODE_LABEL)
    state = PoolState(
        key,
        mode=mode or "shared",
        gpus=units,
        gpu_limits=canonical_limits(profile.spec.gpu_limits) if profile is not None else {},
        profile=profile.metadata.name if profile is not None else None,
        mig_strategy=_mig_strategy(pool, layouts.get(key, ()), held),
        not_ready=_not_ready(key, pool, entry, desired),
    )
    return _PoolInput(state, tuple(requests), held, tuple(layouts.get(key, ())))


def _admit(
    found: _Entries,
    pool_entries: Mapping[PoolKey, PlatformPlan],
    previous: PreviousAdmissions,
    invalid: Mapping[WorkloadKey, _Invalid],
    layouts: PreviousLayouts,
    guarded: _Guarded | None = None,
) -> tuple[list[PoolPlan], list[WorkloadPlan]]:
    """Admission into every pool of one target, on the hosts as planned (after the prune guard).
    ``invalid``: the invalid workloads of the whole desired state (not only of this target);
    ``layouts``: the MIG layouts each pool's status recorded (``parse_mig_layouts``); ``guarded``: the
    deletion guard's verdict (a held-back workload asks for exactly what it holds and keeps it).
    Workloads placed through an Environment are routed first (:mod:`reconciler.plan.environments`)."""
    held_back = guarded.held_back if guarded is not None else frozenset()
    desired = found.desired
    tenants = found.tenants
    by_pool = tenants_by_pool(tenants.values(), desired.request_of)
    inputs = {
        key: _pool_input(found, key, entry, by_pool.get(key, []), previous, invalid, layouts, held_back)
        for key, entry in sorted(pool_entries.items())
    }

    def trial(key: PoolKey, requests: Sequence[WorkloadRequest]) -> PoolAdmission | None:
        return inputs[key].admit(requests)[0] if key in inputs else None

    routed = route_environments(desired, {k: i.requests for k, i in inputs.items()}, previous, trial)
    pools: list[PoolPlan] = []
    workloads: list[WorkloadPlan] = list(routed.unplaced)
    for key, entry in sorted(pool_entries.items()):
        pool = desired.get(ComputePool, *key)
        inp = inputs[key]
        requests = [*inp.requests, *routed.extra.get(key, ())]
        result, outcome = inp.admit(requests)
        running = _pool_running(entry)
        kinds = {a.key: a.kind for a in inp.held} | {r.key: r.kind for r in requests}
        for wkey, decision in result.workloads.items():
            tenant = tenants.get(wkey)
            bad = invalid.get(wkey)
            kind = kinds.get(wkey, "AIWorkload")
            # Only an admitted workload's entry shows its profiles (an invalid one's action is INVALID).
            shown = bad is None and decision.action in (WorkloadAction.ADMIT, WorkloadAction.ADMITTED)
            profiles = _workload_profiles(desired, tenant, pool) if tenant is not None and shown else ()
            entry_plan = with_environment(_workload_entry(decision, kind, running, bad, profiles), routed)
            if wkey in held_back and guarded is not None and decision.action is WorkloadAction.ADMITTED:
                entry_plan = replace(entry_plan, reason=Reason.PRUNE_BLOCKED, message=guarded.blocked)
            workloads.append(entry_plan)
        admitted = tuple(
            k
            for k, d in result.workloads.items()
            if (d.gpus or d.mig) and d.action is not WorkloadAction.REMOVE
        )
        mig_fields: dict[str, Any] = {}
        if outcome is not None:
            mig_fields = {
                "mig": outcome.mig,
                "mig_config": outcome.mig_config,
                "machine_pools": outcome.machine_pools,
                "mig_usage": outcome.usage,
                "mig_notes": outcome.notes,
            }
            if outcome.relayout:  # which GPUs of a host are re-laid out: in the message, for the report
                entry = replace(entry, message=f"{entry.message}; {relayout_summary(outcome.relayout)}")
        pools.append(
            PoolPlan(
                entry,
                mode_of(pool, entry),
                result.capacity,
                scaling=_scaling(pool),
                admitted=admitted,
                own_profiles=_own_profiles(desired, pool, entry, found.pool_profiles.get(key)),
                provisioned_for=provisioned_for(pool, entry),
                **mig_fields,
            )
        )
    return pools, workloads


def _own_profiles(
    desired: DesiredState, pool: ComputePool | None, entry: PlatformPlan, recorded: tuple[str, ...] | None
) -> tuple[str, ...] | None:
    """A bundle-built pool's own profile uids once the pass is carried out (recorded in its status): its
    bundle's when its cluster is created or updated (or, with nothing recorded, for a cluster that runs);
    otherwise what was recorded, which is what its cluster has: while it is held (an infrastructure
    change, an invalid bundle), replaced (the old cluster, until it is gone) or scaled (its add-ons are
    changed by the next pass). None for a pool not built from a bundle."""
    if pool is None or pool.spec.profile_bundle_ref is None:
        return recorded
    bundle = tuple(r.uid for r in platform_cluster_profiles(desired, pool))
    if entry.action in (Action.CREATE, Action.UPDATE):
        return bundle
    if entry.action in (Action.UNCHANGED, Action.SCALE) and entry.existing is not None:
        same = recorded is not None and set(recorded) == set(bundle)
        return bundle if recorded is None or same else recorded
    return recorded


def provisioned_for(pool: ComputePool | None, entry: PlatformPlan) -> str | None:
    """The workload a pool is provisioned for (its own name), as the pool or, for one the plan cannot
    read, its cluster's label says; None for other pools."""
    labels = pool.metadata.labels if pool is not None else entry.existing.labels if entry.existing else {}
    return entry.name if labels.get(PROVISIONED_LABEL) else None


def mode_of(pool: ComputePool | None, entry: PlatformPlan) -> str | None:
    """The pool's mode; for a pool the plan cannot read, the one its cluster's label records."""
    if pool is not None:
        return pool.spec.mode
    return entry.existing.labels.get(POOL_MODE_LABEL) if entry.existing is not None else None


def _strays(
    desired: DesiredState,
    planned: set[WorkloadKey],
    invalid: Mapping[WorkloadKey, _Invalid],
    unplanned_pools: Mapping[PoolKey, str],
    previous: PreviousAdmissions,
    machines: Mapping[str, Machine],
) -> list[WorkloadPlan]:
    """Workloads no pool of the pass decided: invalid ones, and tenants of a pool that is not planned (it
    has no Palette target). One that holds GPUs in a pool not planned keeps them, named with its pool
    (invalid is not absent; nothing is detached from a pool this pass does not touch)."""
    held = {a.key: (key, a) for key, admissions in sorted(previous.items()) for a in admissions}

    def entry(
        wkey: WorkloadKey, kind: str, pool: str | None, action: WorkloadAction, reason: Reason, msg: str
    ) -> WorkloadPlan:
        where = held.get(wkey)
        if where is None or (pool is not None and where[0] != (wkey[0], pool)):
            return WorkloadPlan(*wkey, kind, pool, action, reason, msg)
        (_, name), admission = where
        units = _held_units(admission, machines)
        msg += f"; keeps its {len(units)} GPU(s) and {len(admission.mig)} MIG instance(s) in pool {name}"
        return WorkloadPlan(*wkey, kind, name, action, reason, msg, gpus=units, mig=admission.mig)

    out: list[WorkloadPlan] = []
    for wkey, bad in invalid.items():
        if wkey not in planned:
            out.append(entry(wkey, bad.kind, None, WorkloadAction.INVALID, bad.reason, bad.message))
    for wkey, tenant in _tenants(desired):
        if wkey in planned:
            continue
        pool = pool_ref_of(tenant)
        if pool is None:
            continue
        why = unplanned_pools.get((wkey[0], pool), "it is not planned in this pass")
        msg = f"pool {pool} cannot be planned: {why}"
        out.append(entry(wkey, tenant.kind, pool, WorkloadAction.PENDING, Reason.POOL_NOT_READY, msg))
    return out + unrouted(desired, planned | {w.key for w in out})


def _held_units(admission: PreviousAdmission, machines: Mapping[str, Machine]) -> tuple[GpuUnit, ...]:
    """The GPUs a previous admission names, as units of the machines that still have them."""
    refs = set(admission.gpus)
    hosts = sorted({r.host_uid for r in refs})
    units = gpu_units(machines[h] for h in hosts if h in machines)
    return tuple(sorted((u for u in units if u.ref in refs), key=lambda u: u.order))


def _carried(
    desired: DesiredState, clusters: Sequence[ManagedCluster], previous: PreviousAdmissions
) -> DesiredState:
    """The desired state with what holds something but is hidden by this revision carried as invalid
    (:func:`reconciler.manifests.carry.carry_held`): clusters of platforms and pools, admitted workloads."""
    held = [(cluster_kind(c.labels), c.namespace, c.platform) for c in clusters]
    admitted = [(a.kind, a.key[0], a.key[1]) for admissions in previous.values() for a in admissions]
    return carry_held(desired, held, admitted)
