"""Which pool of its Environment a workload is admitted into (docs/environments.md), pure.

A workload that names an Environment (``spec.environmentRef``) instead of a ComputePool is admitted into
the first of the Environment's candidate pools that can hold it now, under every rule of pool admission
(:func:`reconciler.placement.admission.admit_pool`: replicas on one host, MIG layouts, limits, dedicated
pools, priorities). The rules, in the order they apply:

1. Candidates (:func:`candidates`): ``spec.pools`` in their order, or the namespace's ComputePools whose
   ``metadata.labels`` carry every ``poolSelector.matchLabels`` entry, by name. ``order: mostFree``
   sorts them, at the workload's turn, by the free GPUs of the workload's families (most first), then by
   name. A listed pool that does not exist stays a candidate that holds nothing (``ReferenceNotFound``).
2. Sticky: a workload that holds GPUs or MIG instances in a pool (the status branch's record) is that
   pool's tenant, whatever its Environment says now or which earlier candidate has room now; the caller
   hands it to that pool as a fixed tenant and it is not routed here.
3. The others are routed one by one in admission order (priority, high first, then namespace, then name).
   For each candidate in order, the pool's admission is run with the pool's tenants so far plus this
   workload (``Trial``): the first pool whose admission admits it takes it, exactly as if the workload had
   named that pool. Its later candidates are not tried.
4. A workload no candidate admits is not in any pool: it is ``pending`` with the reason of the nearest
   candidate (the pending one with the most free GPUs of its families, then the first in order) and a
   message naming every candidate and why ("shared-a100-1: needs 8 NVIDIA-A100 GPUs, 0 free;
   shared-a100-2: needs 8, 4 free"), or ``rejected`` with the first candidate's reason when every
   candidate rejects it (limits, MIG, dedicated pools: waiting cannot help). No candidate at all:
   ``pending``, ``ReferenceNotFound``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from reconciler.model.conditions import Reason
from reconciler.model.environment import Environment
from reconciler.model.gpu import GpuFamily
from reconciler.model.pools import PoolKey, WorkloadKey, WorkloadRequest
from reconciler.model.resources import ComputePool
from reconciler.placement.admission_types import PoolAdmission, WorkloadAction

# The admission of one pool with the given tenants; None when the pool is not planned in this pass.
Trial = Callable[[PoolKey, Sequence[WorkloadRequest]], PoolAdmission | None]

_TAKEN = frozenset({WorkloadAction.ADMIT, WorkloadAction.ADMITTED})
_WAITING = frozenset({Reason.POOL_CAPACITY_EXCEEDED, Reason.NO_FITTING_LAYOUT, Reason.POOL_NOT_READY})


def candidates(environment: Environment, pools: Sequence[ComputePool]) -> tuple[str, ...]:
    """The Environment's candidate pool names in their listed order (rule 1, before ``mostFree``).
    ``pools``: the valid ComputePools of the Environment's namespace."""
    if environment.spec.pools is not None:
        return tuple(ref.name for ref in environment.spec.pools)
    wanted = environment.spec.pool_selector.match_labels if environment.spec.pool_selector else {}
    ns = environment.metadata.namespace
    return tuple(
        sorted(
            p.metadata.name
            for p in pools
            if p.metadata.namespace == ns and all(p.metadata.labels.get(k) == v for k, v in wanted.items())
        )
    )


@dataclass(frozen=True, slots=True)
class EnvRequest:
    """A workload placed through an Environment: its request and its Environment's resolved candidates."""

    request: WorkloadRequest
    environment: str
    candidates: tuple[str, ...]
    order: str = "listed"  # listed | mostFree


@dataclass(frozen=True, slots=True)
class Candidate:
    """What one candidate pool said about a workload (``reason`` None: not tried, an earlier one took it)."""

    pool: str
    reason: Reason | None
    message: str

    def to_json(self) -> dict[str, object]:
        return {
            "pool": self.pool,
            "reason": str(self.reason) if self.reason else None,
            "message": self.message,
        }


@dataclass(frozen=True, slots=True)
class Choice:
    """The Environment's choice for one routed workload: ``pool`` None when no candidate admits it (then
    ``action``, ``reason``, ``message`` and ``position`` are its plan entry's)."""

    key: WorkloadKey
    environment: str
    pool: PoolKey | None
    candidates: tuple[Candidate, ...]
    action: WorkloadAction = WorkloadAction.ADMIT
    reason: Reason | None = None
    message: str = ""
    position: int | None = None


@dataclass(frozen=True, slots=True)
class Routing:
    """Who goes where: the routed workloads each pool takes (in addition to its own tenants), and the
    choice for every routed workload."""

    assigned: Mapping[PoolKey, tuple[WorkloadRequest, ...]]
    choices: Mapping[WorkloadKey, Choice]


def _order(env: EnvRequest) -> tuple[int, str, str]:
    return (-env.request.priority, *env.request.key)


def _free(admission: PoolAdmission | None, families: set[GpuFamily]) -> int:
    if admission is None:
        return -1
    return sum(c.free for f, c in admission.capacity.items() if f in families)


def _families(request: WorkloadRequest) -> set[GpuFamily]:
    return {f for f, n in request.whole.items() if n > 0} | {m.family for m in request.mig}


def route(
    workloads: Sequence[EnvRequest], fixed: Mapping[PoolKey, Sequence[WorkloadRequest]], trial: Trial
) -> Routing:
    """Route every workload of ``workloads`` (rules 3-4); ``fixed``: each pool's own tenants (those that
    name it, and sticky routed ones), ``trial``: the pool's admission with a list of tenants."""
    tenants: dict[PoolKey, list[WorkloadRequest]] = {k: list(v) for k, v in fixed.items()}
    current: dict[PoolKey, PoolAdmission | None] = {}
    assigned: dict[PoolKey, list[WorkloadRequest]] = {}
    choices: dict[WorkloadKey, Choice] = {}

    def admission(key: PoolKey) -> PoolAdmission | None:
        if key not in current:
            current[key] = trial(key, tenants.get(key, []))
        return current[key]

    for env in sorted(workloads, key=_order):
        ns = env.request.key[0]
        names = list(env.candidates)
        if env.order == "mostFree":
            families = _families(env.request)
            names.sort(key=lambda n: (-_free(admission((ns, n)), families), n))
        tried: list[tuple[Candidate, PoolAdmission | None]] = []
        chosen: PoolKey | None = None
        for name in names:
            key = (ns, name)
            if admission(key) is None:
                message = f"ComputePool '{name}' not found in namespace {ns}"
                tried.append((Candidate(name, Reason.REFERENCE_NOT_FOUND, message), None))
                continue
            outcome = trial(key, [*tenants.get(key, []), env.request])
            decision = outcome.workloads.get(env.request.key) if outcome is not None else None
            if outcome is not None and decision is not None and decision.action in _TAKEN:
                tenants.setdefault(key, []).append(env.request)
                assigned.setdefault(key, []).append(env.request)
                current[key] = outcome
                chosen = key
                tried.append((Candidate(name, Reason.ADMITTED, decision.message), outcome))
                break
            reason = decision.reason if decision is not None else Reason.POOL_NOT_READY
            text = decision.message if decision is not None else f"pool {name} cannot be planned"
            tried.append((Candidate(name, reason, text), outcome))
        rest = tuple(
            Candidate(n, None, "not tried: an earlier candidate admits it") for n in names[len(tried) :]
        )
        found = tuple(c for c, _ in tried) + rest
        if chosen is not None:
            choices[env.request.key] = Choice(env.request.key, env.environment, chosen, found)
        else:
            choices[env.request.key] = _unplaced(env, tried)
    return Routing({k: tuple(v) for k, v in sorted(assigned.items())}, dict(sorted(choices.items())))


def _unplaced(env: EnvRequest, tried: Sequence[tuple[Candidate, PoolAdmission | None]]) -> Choice:
    key = env.request.key
    found = tuple(c for c, _ in tried)
    if not tried or all(c.reason is Reason.REFERENCE_NOT_FOUND for c in found):
        what = "lists no ComputePool" if not tried else "names no ComputePool that exists"
        message = f"Environment {env.environment} {what} in namespace {key[0]}: no candidate pool"
        if tried:
            message += " (" + "; ".join(f"{c.pool}: {c.message}" for c in found) + ")"
        return Choice(
            key, env.environment, None, found, WorkloadAction.PENDING, Reason.REFERENCE_NOT_FOUND, message
        )
    families = _families(env.request)
    waiting = [(c, a) for c, a in tried if c.reason in _WAITING]
    summary = summary_message(env.request, tried)
    if not waiting:
        first = next(c for c in found if c.reason is not Reason.REFERENCE_NOT_FOUND)
        return Choice(key, env.environment, None, found, WorkloadAction.REJECTED, first.reason, summary)
    nearest, admission = min(waiting, key=lambda ca: -_free(ca[1], families))
    decision = admission.workloads.get(key) if admission is not None else None
    position = decision.position if decision is not None else None
    return Choice(
        key, env.environment, None, found, WorkloadAction.PENDING, nearest.reason, summary, position
    )


def summary_message(request: WorkloadRequest, tried: Sequence[tuple[Candidate, PoolAdmission | None]]) -> str:
    """Every candidate and why it could not take the workload. A shortfall of whole GPUs of one family is
    said briefly, naming the family once: "a: needs 8 NVIDIA-A100 GPUs, 0 free; b: needs 8, 4 free"."""
    parts: list[str] = []
    named: set[GpuFamily] = set()
    whole = {f: n * request.replicas for f, n in request.whole.items() if n > 0}
    for candidate, admission in tried:
        brief = None
        if (
            candidate.reason is Reason.POOL_CAPACITY_EXCEEDED
            and admission is not None
            and len(whole) == 1
            and not request.mig
        ):
            family, need = next(iter(whole.items()))
            capacity = admission.capacity.get(family)
            free = capacity.free if capacity is not None else 0
            what = f"{need}" if family in named else f"{need} {family} GPUs"
            brief = f"needs {what}, {free} free"
            named.add(family)
        parts.append(f"{candidate.pool}: {brief or candidate.message}")
    return "; ".join(parts)
