"""From a pass's plan to the scaling decision's inputs, and back to the plan (pure).

The controller calls, in this order (docs/scaling.md, "How the controller runs it"):

1. :func:`pool_sizes` before planning: the current size of every pool with a policy, from ``spec.gpus``
   and its recorded ``status.scaling`` (``plan_targets(..., sizes=...)``).
2. :func:`scaling_subjects` after planning: per pool with a policy, what the decision needs (its hosts,
   the free hosts that may join, pending demand, admission's answer to "would they still fit without
   this host", the recorded state, where Prometheus is).
3. ``ScalingStage.run(subjects, now)`` (``reconciler.prometheus.stage``): queries and decisions.
4. :func:`scaling_entry` per outcome into ``plan_targets(..., scaling=...)`` / ``Plan.with_scaling``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from reconciler.inventory import Machine, Role
from reconciler.model.conditions import Reason
from reconciler.model.desired import DesiredState
from reconciler.model.duration import format_duration
from reconciler.model.gpu import GpuFamily
from reconciler.model.observed import ClusterState, cluster_name
from reconciler.model.pools import POOL_KIND, PoolKey, WorkloadKey, pool_ref_of, workload_request
from reconciler.model.resources import AIWorkload, ComputePool, MLPlatform, PrometheusSettings, Settings
from reconciler.model.scaling import ScalingPolicy, ScalingPolicySpec
from reconciler.placement.admission_types import WorkloadAction
from reconciler.placement.units import gpu_units
from reconciler.plan import Action, Plan, PoolPlan, ScalingDecision, ScalingPlan
from reconciler.resolve import compute_profile, is_tenant, platform_settings_name, pool_min_workers
from reconciler.resolve import workload_profile as workload_profile_of
from reconciler.scaling.decision_types import Decision, Direction, PendingDemand, PoolView
from reconciler.scaling.hosts import ScalingHost
from reconciler.scaling.record import current_size, plan_decision, settle, spec_size
from reconciler.scaling.record_types import ScalingStatus


@dataclass(frozen=True, slots=True)
class ScalingSubject:
    """One pool with a scaling policy, as one pass's scaling stage needs it.

    Host names (not uids) identify hosts here and in the record, as in the decision's messages;
    ``uids`` maps them back. ``prometheus``: the pool's Settings' ``spec.prometheus`` (``--prometheus``
    overrides its URL in the stage). ``fits_without(host name)``: admission's answer (see
    :func:`fits_without`)."""

    key: PoolKey
    cluster: str
    policy_name: str
    policy: ScalingPolicySpec
    spec_gpus: Mapping[GpuFamily, int]
    view: PoolView
    pending: tuple[PendingDemand, ...] = ()
    previous: ScalingStatus | None = None
    fits_without: Callable[[str], bool] | None = None
    prometheus: PrometheusSettings | None = None
    uids: Mapping[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.key[0]}/{self.key[1]}"

    def size(self) -> dict[GpuFamily, int]:
        return current_size(self.spec_gpus, self.policy, self.previous)


def policy_of(desired: DesiredState, pool: ComputePool) -> ScalingPolicy | None:
    ref = pool.spec.scaling_policy_ref
    if ref is None:
        return None
    loaded = desired.resources.get(("ScalingPolicy", pool.metadata.namespace, ref.name))
    found = loaded.resource if loaded is not None else None
    return found if isinstance(found, ScalingPolicy) else None


def pool_sizes(
    desired: DesiredState, recorded: Mapping[PoolKey, ScalingStatus | None]
) -> dict[PoolKey, dict[GpuFamily, int]]:
    """The current size of every valid pool with a (valid) scaling policy: ``spec.gpus`` adjusted by
    its recorded actions, clamped to the policy's bounds. ``recorded``: each pool's ``status.scaling``
    as read from its status file (``reconciler.scaling.record.parse``); a pool without one starts at
    ``spec.gpus`` (clamped)."""
    out: dict[PoolKey, dict[GpuFamily, int]] = {}
    for pool in desired.of_kind(ComputePool):
        policy = policy_of(desired, pool)
        if policy is None:
            continue
        key = (pool.metadata.namespace, pool.metadata.name)
        out[key] = current_size(spec_size(pool.spec.gpus), policy.spec, recorded.get(key))
    return out


def scaling_subjects(
    desired: DesiredState,
    plan: Plan,
    recorded: Mapping[PoolKey, ScalingStatus | None],
    now: float,
    pending_since: Mapping[WorkloadKey, float] | None = None,
) -> list[ScalingSubject]:
    """Every pool of ``plan`` (one target's, or the merged plan) with a policy whose cluster is Running
    and kept, ready for the stage. A pool that is being created, replaced, deleted, suspended or rejected
    does not scale this pass.

    ``pending_since``: when each workload started pending (from its status file); a workload missing
    there counts from ``now`` (so demand triggers only after it has been pending ``scaleUpDuration``).
    """
    since = pending_since or {}
    out: list[ScalingSubject] = []
    scalable = [
        (entry, pool, policy)
        for entry in plan.pools
        if (pool := desired.get(ComputePool, *entry.key)) is not None
        and (policy := policy_of(desired, pool)) is not None
        and _may_scale(pool, entry)
    ]
    routed = environment_demand(plan, {entry.key for entry, _, _ in scalable})
    for entry, pool, policy in scalable:
        cluster = entry.cluster.existing
        if cluster is None:  # not Running: _may_scale left it out
            continue
        machines = plan.machines
        workers = [machines[u] for u in sorted(entry.cluster.workers) if u in machines]
        bound = bound_units(plan, entry)
        view = PoolView(
            name=entry.name,
            cluster=cluster.name or cluster_name(*entry.key),
            workers=tuple(_host(m, bound.get(m.uid, 0)) for m in workers),
            free=tuple(_host(m) for m in free_hosts(desired, plan, entry, pool)),
            admitted={GpuFamily(f): c.admitted for f, c in sorted(entry.capacity.items())},
            min_workers=_min_workers(desired, pool),
            quota_room={
                GpuFamily(q.family): q.quota - q.used for q in plan.quotas if q.namespace == entry.namespace
            },
        )
        previous = settle(recorded.get(entry.key), (m.name for m in workers), True, now)
        out.append(
            ScalingSubject(
                key=entry.key,
                cluster=view.cluster,
                policy_name=policy.metadata.name,
                policy=policy.spec,
                spec_gpus=spec_size(pool.spec.gpus),
                view=view,
                pending=pending_demand(desired, plan, entry, since, now, routed),
                previous=previous,
                fits_without=fits_without(plan, entry),
                prometheus=_prometheus_settings(desired, pool),
                uids={m.name: m.uid for m in [*workers, *machines.values()]},
            )
        )
    return out


def _may_scale(pool: ComputePool, entry: PoolPlan) -> bool:
    """A pool scales this pass when it is not suspended, its cluster is Running, and the plan keeps it
    (not created, replaced, deleted or rejected)."""
    cluster = entry.cluster.existing
    return (
        not pool.spec.suspend
        and cluster is not None
        and cluster.known_state is ClusterState.RUNNING
        and entry.action in (Action.UNCHANGED, Action.SCALE)
        and entry.reason is not Reason.DELETING
    )


def environment_demand(plan: Plan, scalable: Collection[PoolKey]) -> dict[WorkloadKey, PoolKey]:
    """Workloads placed through an Environment that no candidate holds, and the one pool whose policy
    grows for each: the first candidate, in the order the Environment tried them, that may scale this
    pass and answered with a demand reason (``PoolCapacityExceeded``, ``NoFittingLayout``). One pool per
    workload, so a workload never makes several pools grow; once that pool has grown, the Environment
    places it there (or in an earlier candidate that freed room)."""
    out: dict[WorkloadKey, PoolKey] = {}
    for w in plan.workloads:
        if w.pool is not None or w.environment is None or w.action is not WorkloadAction.PENDING:
            continue
        for candidate in w.candidates:
            key = (w.namespace, candidate.pool)
            if candidate.reason in _DEMAND and key in scalable:
                out[w.key] = key
                break
    return out


def _host(m: Machine, bound: int = 0) -> ScalingHost:
    mig = any(u.mig_capable for u in gpu_units([m]))
    return ScalingHost(m.name, m.gpu_family, m.gpu_count, m.cpus, m.worker_tagged, bound, mig)


def bound_units(plan: Plan, pool: PoolPlan) -> dict[str, int]:
    """Per host uid: GPUs and MIG instances bound to the pool's workloads after this plan (a workload
    leaving the pool releases its own)."""
    out: dict[str, int] = {}
    for w in plan.workloads:
        if w.pool != pool.name or w.namespace != pool.namespace or w.action is WorkloadAction.REMOVE:
            continue
        for unit in w.gpus:
            out[unit.host_uid] = out.get(unit.host_uid, 0) + 1
        for inst in w.mig:
            out[inst.host_uid] = out.get(inst.host_uid, 0) + 1
    return out


def fits_without(plan: Plan, pool: PoolPlan) -> Callable[[str], bool]:
    """Admission's answer to "do the admitted workloads still fit without this host?" (by host name).

    Admission binds every admitted workload's GPUs and MIG instances and never moves what is bound
    (docs/pools.md): the admitted workloads keep fitting exactly when the host holds none
    of their units. So the answer is read from the plan's bindings, the same binding as admission's."""
    holding = set(bound_units(plan, pool))
    names = {uid: m.name for uid, m in plan.machines.items()}
    held_names = {names.get(uid, uid) for uid in holding}
    return lambda host: host not in held_names


def free_hosts(desired: DesiredState, plan: Plan, entry: PoolPlan, pool: ComputePool) -> list[Machine]:
    """Hosts that may join the pool: available, in no cluster and no entry of the plan, of the pool's
    architecture, carrying its resource groups, and not control-plane only."""
    used: set[str] = set()
    for p in [*plan.platforms, *(q.cluster for q in plan.pools)]:
        used.update(p.control_plane, p.workers)
        if p.existing is not None:
            used.update(p.existing.hosts)
    arch = entry.cluster.arch
    groups = pool.spec.resource_groups
    return [
        m
        for m in sorted(plan.machines.values(), key=lambda m: (m.name, m.uid))
        if m.available
        and m.uid not in used
        and m.cluster_uid is None
        and (arch is None or m.arch == arch)
        and m.in_groups(groups)
        and m.role is Role.WORKER
    ]


def pending_demand(
    desired: DesiredState,
    plan: Plan,
    entry: PoolPlan,
    since: Mapping[WorkloadKey, float],
    now: float,
    routed: Mapping[WorkloadKey, PoolKey] | None = None,
) -> tuple[PendingDemand, ...]:
    """Workloads of the pool pending with PoolCapacityExceeded or NoFittingLayout, one per short family,
    whole GPUs and MIG instances alike, with the GPUs one new host must bring for it to be admitted.

    Whole GPUs: the replicas the pool's free GPUs do not hold (each on one host) times a replica's GPUs
    (one new host holds them all). MIG instances count as GPUs (compute slices rounded up, as
    ``gpuLimits`` count them): one replica's worth. ``per_host``: one replica's GPUs. A workload rejected
    by a limit is not pending: it never scales a pool. ``routed``: Environment workloads pending in no
    pool, with the candidate that grows for them (:func:`environment_demand`); they count as this pool's
    when it is theirs."""
    free = _free_per_host(plan, entry)
    out: list[PendingDemand] = []
    for w in plan.workloads:
        if w.action is not WorkloadAction.PENDING:
            continue
        theirs = (routed or {}).get(w.key) == entry.key  # its candidate answered with a demand reason
        if not theirs and ((w.namespace, w.pool) != entry.key or w.reason not in _DEMAND):
            continue
        resource = _tenant(desired, w.key)
        if resource is None:
            continue
        request = workload_request(resource)
        one = replace(request, replicas=1).limit_counts()  # one replica on one host, MIG as GPUs
        mig = {m.family for m in request.mig}
        for family, per_host in sorted(one.items()):
            if per_host <= 0:
                continue
            whole = request.whole.get(family, 0)
            if family in mig or whole <= 0:
                short = per_host
            else:
                room = sum(n // whole for (f, _), n in free.items() if f == family)
                short = max(request.replicas - room, 1) * per_host
            label = f"{w.namespace}/{w.name}"
            out.append(PendingDemand(label, family, short, since.get(w.key, now), per_host, family in mig))
    return tuple(out)


def _free_per_host(plan: Plan, entry: PoolPlan) -> dict[tuple[GpuFamily, str], int]:
    """Free whole GPUs of each worker of the pool after the plan: neither bound nor in MIG mode."""
    taken: dict[str, int] = {}
    for w in plan.workloads:
        if (w.namespace, w.pool) == entry.key and w.action is not WorkloadAction.REMOVE:
            for unit in w.gpus:
                taken[unit.host_uid] = taken.get(unit.host_uid, 0) + 1
    out: dict[tuple[GpuFamily, str], int] = {}
    for uid in entry.cluster.workers:
        m = plan.machines.get(uid)
        if m is not None and m.gpu_family is not None:
            out[(m.gpu_family, uid)] = max(m.gpu_count - taken.get(uid, 0) - len(entry.mig.get(uid, ())), 0)
    return out


_DEMAND = (Reason.POOL_CAPACITY_EXCEEDED, Reason.NO_FITTING_LAYOUT)


def _tenant(desired: DesiredState, key: WorkloadKey) -> AIWorkload | MLPlatform | None:
    found = desired.get(AIWorkload, *key)
    if found is not None:
        return found
    platform = desired.get(MLPlatform, *key)
    return platform if platform is not None and is_tenant(platform) and pool_ref_of(platform) else None


def _min_workers(desired: DesiredState, pool: ComputePool) -> int:
    profile = compute_profile(desired, pool)
    if profile is None:
        return 0
    found = pool_min_workers(pool, profile, workload_profile_of(desired, pool))
    return found if isinstance(found, int) else 0


def _prometheus_settings(desired: DesiredState, pool: ComputePool) -> PrometheusSettings | None:
    ns = pool.metadata.namespace
    name = platform_settings_name(compute_profile(desired, pool), desired.project(ns))
    settings = desired.get(Settings, ns, name) if name else None
    return settings.spec.prometheus if settings is not None else None


def scaling_entry(policy: str | None, decision: Decision | None, message: str | None = None) -> ScalingPlan:
    """The plan's ``scaling`` block of a pool (docs/planning.md): ``up``/``down`` when the decision
    acts, ``hold`` when it does not, ``none`` without a policy or decision. ``waiting``: what the pending
    workloads' messages add about a demand scale-up for them (:func:`demand_notes`)."""
    if policy is None:
        return ScalingPlan(None)
    if decision is None:
        why = message or f"ScalingPolicy {policy} was not evaluated in this pass"
        return ScalingPlan(policy, reason="NotEvaluated", message=why)
    return ScalingPlan(
        policy,
        ScalingDecision(plan_decision(decision)),
        str(decision.reason),
        message if message is not None else decision.message,
        waiting=demand_notes(decision, policy),
    )


def kept_entries(
    desired: DesiredState, recorded: Mapping[PoolKey, ScalingStatus | None]
) -> dict[PoolKey, ScalingPlan]:
    """The scaling entry of each invalid pool that has a scaling record: not decided this pass, it keeps
    its recorded size and record (invalid is not absent), and the plan says so instead of "no policy"."""
    out: dict[PoolKey, ScalingPlan] = {}
    for key, status in recorded.items():
        if status is None or (POOL_KIND, *key) not in desired.invalid:
            continue
        size = ", ".join(f"{n} {family}" for family, n in sorted(status.size.items())) or "its GPUs"
        why = (
            f"pool {key[1]} is invalid (see its errors): ScalingPolicy {status.policy} is not evaluated; "
            f"the pool keeps its recorded size ({size}) and scaling record until it is fixed"
        )
        out[key] = ScalingPlan(status.policy, reason="NotEvaluated", message=why)
    return out


def demand_notes(decision: Decision, policy: str) -> dict[str, str]:
    """Per pending workload (``namespace/name``) for which a demand scale-up is on its way: what its
    message adds. The host the policy adds, and when its ``scaleUpDuration`` window ends; once it has
    ended, that the pool grows for it now, or why not yet (the decision's message: cooldown, an action
    in progress)."""
    inputs = decision.inputs
    if inputs is None:
        return {}
    now, pool = inputs.now, inputs.pool.name
    acted_for = decision.evidence.workload if isinstance(decision.evidence, PendingDemand) else None
    out: dict[str, str] = {}
    for up in decision.upcoming:
        if decision.direction is Direction.UP and up.workload == acted_for and decision.host is not None:
            out[up.workload] = (
                f"pool {pool} grows by host {decision.host.name} for it (ScalingPolicy {policy})"
            )
        elif up.at > now:
            out[up.workload] = (
                f"a scale-up of pool {pool} is on its way: ScalingPolicy {policy} adds host {up.host} if it "
                f"is still pending when its {format_duration(up.window)} window ends at {_iso(up.at)}"
            )
        else:
            out[up.workload] = (
                f"a scale-up of pool {pool} for it is due since {_iso(up.at)} (ScalingPolicy {policy}): "
                f"{decision.message}"
            )
    return out


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def carried_out(
    decision: Decision, before: Plan, plan: Plan, key: PoolKey
) -> tuple[tuple[str, ...], str | None]:
    """How ``plan``, made with the action's size (``ScalingOutcome.target``), carries the action out: the
    names of the hosts it adds (up) or removes (down), or why it does not carry it out safely.
    ``before``: the plan the decision was made on (its bindings say which hosts hold admitted work).

    Section 4's sticky placement chooses the hosts for a size; it may pick another host than the
    decision's (an equal one). That is accepted when the plan only adds hosts (up), or only removes hosts
    that hold none of the admitted workloads' GPUs or MIG instances (down): autoscaling never removes
    capacity that admitted workloads hold (docs/reconciling.md)."""
    entry = plan.get_pool(*key)
    if entry is None:
        return (), "the pool is not in the plan"
    names = {uid: m.name for uid, m in plan.machines.items()}
    cluster = entry.cluster
    added = tuple(names.get(u, u) for u in cluster.add_workers)
    removed = tuple(names.get(u, u) for u in cluster.remove_workers)
    if cluster.add_control_plane or cluster.remove_control_plane or cluster.action is not Action.SCALE:
        return (), f"the plan for the new size is {cluster.action} ({cluster.message}), not a worker change"
    if decision.direction is Direction.UP:
        if removed or not added:
            return (), f"the plan for the new size adds {list(added)} and removes {list(removed)}"
        return added, None
    earlier = before.get_pool(*key)
    if earlier is None:
        return (), "the pool is not in the plan the decision was made on"
    fits = fits_without(before, earlier)
    held = [h for h in removed if not fits(h)]
    if added or not removed or held:
        why = f"holds admitted workloads' GPUs: {', '.join(held)}" if held else f"adds {list(added)}"
        return (), f"the plan for the new size removes {list(removed)} and {why}"
    return removed, None
