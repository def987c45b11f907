"""Workloads placed through an Environment, in one target's pass (pure; docs/environments.md).

The choice itself is :func:`reconciler.placement.environment.route`; this module gathers its inputs from
the desired state and the status branch's records, and turns its outcome into plan entries:

- A workload that holds GPUs or MIG instances in a pool of this target that is still in the repository
  (valid or invalid) stays that pool's tenant (sticky), whatever its Environment says now.
- The others whose Environment has a candidate pool in this target are routed here. A workload whose
  Environment has no candidate in any planned pool is left to the strays (:func:`unrouted`).
- A routed workload no candidate admits has an entry of its own with no pool (``pool`` null).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from reconciler.model.conditions import Reason
from reconciler.model.desired import DesiredState
from reconciler.model.environment import Environment
from reconciler.model.pools import POOL_KIND, PoolKey, WorkloadKey, WorkloadRequest, workload_request
from reconciler.model.resources import AIWorkload, ComputePool
from reconciler.placement.admission_types import PoolAdmission, PreviousAdmissions, WorkloadAction
from reconciler.placement.environment import Candidate, Choice, EnvRequest, candidates, route
from reconciler.plan.entries import WorkloadPlan


@dataclass(frozen=True, slots=True)
class EnvironmentOutcome:
    """``extra``: the workloads each pool takes besides those naming it (sticky and routed ones);
    ``placed``: the Environment and candidates of each of them, for its entry in the pool;
    ``unplaced``: the entries of routed workloads no candidate admits."""

    extra: Mapping[PoolKey, tuple[WorkloadRequest, ...]]
    placed: Mapping[WorkloadKey, tuple[str, tuple[Candidate, ...]]]
    unplaced: tuple[WorkloadPlan, ...]


NOTHING = EnvironmentOutcome({}, {}, ())


def placed_through_environment(desired: DesiredState) -> list[AIWorkload]:
    """The valid workloads that name an Environment; none when ``desired`` has no Environment at all
    (its callers pass over a workload whose Environment is missing: validation reports it)."""
    if next(desired.of_kind(Environment), None) is None:
        return []
    return [w for w in desired.of_kind(AIWorkload) if w.spec.environment_ref is not None]


def resolved(desired: DesiredState, workload: AIWorkload) -> tuple[Environment | None, tuple[str, ...]]:
    """The workload's Environment and its candidate pools (listed order), or None and () when it has none."""
    ref = workload.spec.environment_ref
    ns = workload.metadata.namespace
    environment = desired.get(Environment, ns, ref.name) if ref is not None else None
    if environment is None:
        return None, ()
    pools = [p for p in desired.of_kind(ComputePool) if p.metadata.namespace == ns]
    return environment, candidates(environment, pools)


def _sticky_pool(
    key: WorkloadKey, previous: PreviousAdmissions, pools: Mapping[PoolKey, object], desired: DesiredState
) -> PoolKey | None:
    for pool, admissions in sorted(previous.items()):
        if pool not in pools:
            continue
        kept = desired.get(ComputePool, *pool) is not None or (POOL_KIND, *pool) in desired.invalid
        if kept and any(a.key == key and (a.gpus or a.mig) for a in admissions):
            return pool
    return None


def route_environments(
    desired: DesiredState,
    pools: Mapping[PoolKey, Sequence[WorkloadRequest]],
    previous: PreviousAdmissions,
    trial: Callable[[PoolKey, Sequence[WorkloadRequest]], PoolAdmission | None],
) -> EnvironmentOutcome:
    """Sticky and routed workloads of this target (module docstring). ``pools``: every pool of the target
    with the requests of the workloads that name it; ``trial``: a pool's admission with given tenants."""
    workloads = placed_through_environment(desired)
    if not workloads:
        return NOTHING
    extra: dict[PoolKey, list[WorkloadRequest]] = {}
    placed: dict[WorkloadKey, tuple[str, tuple[Candidate, ...]]] = {}
    routed: list[EnvRequest] = []
    for workload in workloads:
        key = (workload.metadata.namespace, workload.metadata.name)
        environment, names = resolved(desired, workload)
        if environment is None:
            continue  # invalid: validation says so, and the invalid workload keeps what it holds
        request = workload_request(workload)
        sticky = _sticky_pool(key, previous, pools, desired)
        if sticky is not None:
            extra.setdefault(sticky, []).append(request)
            why = f"it runs in pool {sticky[1]} (admitted earlier: it stays there)"
            found = tuple(
                Candidate(n, Reason.ADMITTED, why)
                if n == sticky[1]
                else Candidate(n, None, f"not tried: {why}")
                for n in names
            )
            if sticky[1] not in names:
                found = (Candidate(sticky[1], Reason.ADMITTED, why), *found)
            placed[key] = (environment.metadata.name, found)
        elif any((key[0], n) in pools for n in names):
            routed.append(EnvRequest(request, environment.metadata.name, names, environment.spec.order))
    fixed = {k: [*v, *extra.get(k, [])] for k, v in pools.items()}
    routing = route(routed, fixed, trial)
    for pool, chosen in routing.assigned.items():
        extra.setdefault(pool, []).extend(chosen)
    unplaced: list[WorkloadPlan] = []
    for key, choice in routing.choices.items():
        if choice.pool is not None:
            placed[key] = (choice.environment, choice.candidates)
        else:
            unplaced.append(_unplaced_entry(choice, next(r.request for r in routed if r.request.key == key)))
    return EnvironmentOutcome(
        {k: tuple(v) for k, v in sorted(extra.items())}, dict(sorted(placed.items())), tuple(unplaced)
    )


def _unplaced_entry(choice: Choice, request: WorkloadRequest) -> WorkloadPlan:
    return WorkloadPlan(
        choice.key[0],
        choice.key[1],
        "AIWorkload",
        None,
        choice.action,
        choice.reason,
        choice.message,
        replicas=request.replicas,
        position=choice.position if choice.action is WorkloadAction.PENDING else None,
        environment=choice.environment,
        candidates=choice.candidates,
    )


def with_environment(entry: WorkloadPlan, outcome: EnvironmentOutcome) -> WorkloadPlan:
    """A pool's entry of a workload placed through an Environment names it and its candidates."""
    found = outcome.placed.get(entry.key)
    if found is None or entry.action is WorkloadAction.REMOVE:
        return entry
    return replace(entry, environment=found[0], candidates=found[1])


def unrouted(desired: DesiredState, planned: set[WorkloadKey]) -> list[WorkloadPlan]:
    """Valid workloads of an Environment that no pool of the pass took or routed: none of its candidate
    pools is planned (none exists, or the selector matches none). Pending, ``ReferenceNotFound``."""
    out: list[WorkloadPlan] = []
    for workload in placed_through_environment(desired):
        key = (workload.metadata.namespace, workload.metadata.name)
        environment, names = resolved(desired, workload)
        if key in planned or environment is None:
            continue
        shown = ", ".join(names) if names else "none"
        message = (
            f"Environment {environment.metadata.name} has no candidate pool in namespace {key[0]} "
            f"(candidates: {shown}); waits for one of its ComputePools to exist"
        )
        found = tuple(Candidate(n, Reason.REFERENCE_NOT_FOUND, f"ComputePool '{n}' not found") for n in names)
        out.append(
            WorkloadPlan(
                *key,
                "AIWorkload",
                None,
                WorkloadAction.PENDING,
                Reason.REFERENCE_NOT_FOUND,
                message,
                replicas=workload.spec.replicas,
                environment=environment.metadata.name,
                candidates=found,
            )
        )
    return out
