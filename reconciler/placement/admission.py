"""Admission of workloads into one compute pool, on concrete GPUs (docs/pools.md), pure.

``admit_pool(pool, workloads, previous)`` decides, for every tenant of the pool, one of ``admit`` (admitted
by this pass), ``admitted`` (kept), ``pending``, ``remove``, ``rejected`` or ``suspended``, and names the
GPUs bound to each of its replicas; and counts the pool's capacity per family. The rules, in the order
they apply:

1. A workload that left the pool (``removed``, or a previous admission whose workload is gone) is
   ``remove``; a suspended one is ``suspended``. Both free their GPUs for the others in the same pass.
2. Sticky: a workload admitted before whose request is unchanged, whose every replica is bound on one
   host, and whose GPUs the pool still has is ``admitted`` on the same GPUs, whatever arrives (never
   pre-empted).
3. A MIG request to a pool with ``mig.strategy: none`` (or without a MIG planner) is ``rejected``
   ``MIGUnsupported``; a request above the ComputeProfile's ``gpuLimits`` is ``GPULimitExceeded``.
4. A dedicated pool belongs to its admitted workload, else to the first eligible one in order; every other
   tenant is ``rejected`` ``PoolDedicated``.
5. Admitted workloads whose request changed or whose pool lost some of their GPUs are re-bound first
   (they are running), offered their own hosts and GPUs before any other. A changed one that no longer
   fits keeps its previous GPUs (``pending``, nothing running is taken away); one whose GPUs are gone is
   released.
6. New workloads priority by priority (high first), each all or nothing: every replica's whole GPUs and
   MIG instances bound on ONE host (a pod cannot span machines; replicas may share a host), whole GPUs
   only to GPUs not in MIG mode, or ``pending``. Within one priority (namespace, name) order is the
   tie-break: they are bound in that order unless another choice of the same priority admits strictly
   more of them (``placement.order``: a search bounded by a count of binding attempts); a higher
   priority's admissions are fixed before a lower one is looked at. A later workload that fits is
   admitted past a pending one (no head-of-line blocking).

Binding (``placement.binding``): a replica goes to the host with the fewest free GPUs of its family that
still holds it (best fit, so large free blocks stay whole for later multi-GPU replicas); ties by host
name, then GPU index. A replica with MIG instances goes to the first such host where the MIG planner
also places its instances; a replica of MIG instances only goes where the planner places them best.
Pending is ``PoolCapacityExceeded`` when the pool has too few free GPUs in total, ``NoFittingLayout``
when it has enough but no host holds a replica (the message names the largest free block and its host).
Each pending workload gets its 1-based ``position`` among the pool's pending workloads: admitted ones that
changed first, then priority, namespace, name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from itertools import groupby

from reconciler.model.conditions import Reason
from reconciler.model.gpu import GpuFamily
from reconciler.model.pools import PoolKey, WorkloadKey, WorkloadRequest
from reconciler.placement.admission_trial import Trial, search_budget, shape
from reconciler.placement.binding import FreeGpus
from reconciler.placement.order import choose
from reconciler.placement.seam import MigPlacement, MigPlanner, MigRefusal, MigRoom
from reconciler.placement.shortfall import Shortfall
from reconciler.placement.units import GpuRef, GpuUnit, MigInstance, gpu_units

__all__ = [
    "FamilyCapacity",
    "GpuRef",
    "GpuUnit",
    "MigInstance",
    "MigPlacement",
    "MigPlanner",
    "MigRefusal",
    "MigRoom",
    "PoolAdmission",
    "PoolState",
    "PreviousAdmission",
    "PreviousAdmissions",
    "ReplicaBinding",
    "WorkloadAction",
    "WorkloadAdmission",
    "admit_pool",
    "gpu_units",
]

# --- inputs ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PreviousAdmission:
    """What the status branch says a workload held after the last pass that admitted it. ``kind``
    (AIWorkload or MLPlatform) names the workload's kind when the plan cannot read it (it is gone).
    ``gpu_replicas``: the replica of each of ``gpus`` (same order); empty means replica 0 for all (a
    status file written before replicas existed)."""

    key: WorkloadKey
    gpus: tuple[GpuRef, ...] = ()
    mig: tuple[MigInstance, ...] = ()
    kind: str = "AIWorkload"
    gpu_replicas: tuple[int, ...] = ()

    def replica_of(self) -> dict[GpuRef, int]:
        replicas = self.gpu_replicas if len(self.gpu_replicas) == len(self.gpus) else (0,) * len(self.gpus)
        return dict(zip(self.gpus, replicas, strict=True))


# What the caller read from the status branch: per pool, the admissions its workloads held after the last
# pass (a workload's status file names its pool, GPUs and MIG instances). A workload that moved to another
# pool is listed under the pool it held GPUs in: that pool's pass releases them (``remove``).
PreviousAdmissions = Mapping[PoolKey, Sequence[PreviousAdmission]]


@dataclass(frozen=True, slots=True)
class PoolState:
    """One pool as admission sees it: its GPUs as planned (concrete units), its mode and limits.

    ``not_ready`` says why the pool cannot take new workloads this pass (it is invalid, rejected or
    suspended): kept workloads stay, new ones wait with ``PoolNotReady``.
    """

    key: PoolKey
    mode: str = "shared"
    gpus: tuple[GpuUnit, ...] = ()
    gpu_limits: Mapping[GpuFamily, int] = field(default_factory=dict)
    profile: str | None = None  # the ComputeProfile's name, for messages
    mig_strategy: str = "none"
    not_ready: str | None = None

    @property
    def label(self) -> str:
        return self.key[1]


# --- outputs ---------------------------------------------------------------------------------------------


class WorkloadAction(StrEnum):
    ADMIT = "admit"
    ADMITTED = "admitted"
    PENDING = "pending"
    REMOVE = "remove"
    REJECTED = "rejected"
    SUSPENDED = "suspended"
    INVALID = "invalid"  # set by the plan for a workload whose document is invalid, never by admission


@dataclass(frozen=True, slots=True)
class ReplicaBinding:
    """Where one replica's whole GPUs are: one host and the GPU indices on it."""

    replica: int
    host_uid: str
    host_name: str
    gpus: tuple[int, ...]

    def to_json(self) -> dict[str, object]:
        return {"replica": self.replica, "host": self.host_uid, "gpus": list(self.gpus)}


def replica_bindings(gpus: Sequence[GpuUnit], replicas: Sequence[int]) -> list[ReplicaBinding]:
    """The whole GPUs of a workload grouped by replica and host (``replicas``: the replica of each GPU,
    empty for all replica 0), by replica then host name."""
    of = replicas if len(replicas) == len(gpus) else (0,) * len(gpus)
    groups: dict[tuple[int, str, str], list[int]] = {}
    for unit, replica in zip(gpus, of, strict=True):
        groups.setdefault((replica, unit.host_name, unit.host_uid), []).append(unit.index)
    return [ReplicaBinding(r, uid, name, tuple(sorted(ix))) for (r, name, uid), ix in sorted(groups.items())]


@dataclass(frozen=True, slots=True)
class WorkloadAdmission:
    """The decision for one workload. ``gpus`` are the whole GPUs bound to it after this pass (a pending or
    rejected workload that changed keeps its previous ones), ``gpu_replicas`` the replica of each (same
    order); ``mig`` its MIG instances. ``replicas``: how many it asks for; ``position``: its 1-based
    place among the pool's pending workloads (None when it is not pending)."""

    key: WorkloadKey
    pool: PoolKey
    action: WorkloadAction
    reason: Reason | None
    message: str
    gpus: tuple[GpuUnit, ...] = ()
    mig: tuple[MigInstance, ...] = ()
    gpu_replicas: tuple[int, ...] = ()
    replicas: int = 1
    position: int | None = None

    def bound(self) -> list[ReplicaBinding]:
        return replica_bindings(self.gpus, self.gpu_replicas)

    def previous(self, kind: str = "AIWorkload") -> PreviousAdmission:
        """What the status branch records of this decision, as the next pass reads it back."""
        return PreviousAdmission(self.key, tuple(u.ref for u in self.gpus), self.mig, kind, self.gpu_replicas)

    def gpu_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for unit in self.gpus:
            counts[unit.family] = counts.get(unit.family, 0) + 1
        return dict(sorted(counts.items()))


@dataclass(frozen=True, slots=True)
class FamilyCapacity:
    total: int
    admitted: int
    free: int


@dataclass(frozen=True, slots=True)
class PoolAdmission:
    pool: PoolKey
    workloads: dict[WorkloadKey, WorkloadAdmission]
    capacity: dict[str, FamilyCapacity]


# --- the pass --------------------------------------------------------------------------------------------


def _order(request: WorkloadRequest) -> tuple[int, str, str]:
    return (-request.priority, request.key[0], request.key[1])


def _label(key: WorkloadKey) -> str:
    return f"{key[0]}/{key[1]}"


def _plural(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


@dataclass
class _Held:
    """A previously admitted workload's standing at the start of the pass."""

    previous: PreviousAdmission
    units: list[GpuUnit]  # its previous GPUs the pool still has
    intact: bool  # every previous GPU (and MIG instance) is still there
    same: bool  # its request is what its GPUs and instances cover, each replica on one host
    replica_of: dict[GpuRef, int] = field(default_factory=dict)


# A binding: the whole GPUs with their replica, the MIG instances (with their replica), and the GPUs it
# switched to MIG mode.
_Bound = tuple[list[tuple[int, GpuUnit]], tuple[MigInstance, ...], list[GpuRef]]


def admit_pool(
    pool: PoolState,
    workloads: Sequence[WorkloadRequest],
    previous: Sequence[PreviousAdmission] = (),
    mig_planner: MigPlanner | None = None,
) -> PoolAdmission:
    """Admission of one pass into one pool (see the module docstring for the rules)."""
    return _Pass(pool, workloads, previous, mig_planner).run()


class _Pass:
    def __init__(
        self,
        pool: PoolState,
        workloads: Sequence[WorkloadRequest],
        previous: Sequence[PreviousAdmission],
        planner: MigPlanner | None,
    ) -> None:
        self.pool = pool
        self.planner = planner
        self.free = FreeGpus(pool.gpus)
        self.requests = sorted(workloads, key=_order)
        self.previous = {p.key: p for p in sorted(previous, key=lambda p: p.key)}
        self.decisions: dict[WorkloadKey, WorkloadAdmission] = {}
        self.pending: list[tuple[WorkloadRequest, _Held | None, Reason]] = []
        self.mig_refusals: dict[WorkloadKey, MigRefusal] = {}

    # -- helpers --

    def _decide(
        self,
        request_key: WorkloadKey,
        action: WorkloadAction,
        reason: Reason | None,
        message: str,
        bound: Iterable[tuple[int, GpuUnit]] = (),
        mig: tuple[MigInstance, ...] = (),
        replicas: int = 1,
    ) -> None:
        ordered = sorted(bound, key=lambda b: b[1].order)
        self.decisions[request_key] = WorkloadAdmission(
            key=request_key,
            pool=self.pool.key,
            action=action,
            reason=reason,
            message=message,
            gpus=tuple(u for _, u in ordered),
            mig=tuple(sorted(mig)),
            gpu_replicas=tuple(r for r, _ in ordered) if any(r for r, _ in ordered) else (),
            replicas=replicas,
        )

    def _kept(self, state: _Held) -> list[tuple[int, GpuUnit]]:
        return [(state.replica_of.get(u.ref, 0), u) for u in state.units]

    def _held(self, request: WorkloadRequest, prev: PreviousAdmission) -> _Held:
        replica_of = prev.replica_of()
        units = [self.free.units[r] for r in sorted(set(prev.gpus)) if r in self.free.units]
        intact = len(units) == len(set(prev.gpus))
        # Per replica: its host(s) and what it holds per (family, profile); "" is a whole GPU.
        hosts: dict[int, set[str]] = {}
        holds: dict[int, dict[tuple[GpuFamily, str], int]] = {}
        for unit in units:
            replica = replica_of.get(unit.ref, 0)
            hosts.setdefault(replica, set()).add(unit.host_uid)
            per = holds.setdefault(replica, {})
            per[(unit.family, "")] = per.get((unit.family, ""), 0) + 1
        for inst in prev.mig:
            gpu = self.free.units.get(GpuRef(inst.host_uid, inst.gpu))
            if gpu is None:
                intact = False
                continue
            hosts.setdefault(inst.replica, set()).add(inst.host_uid)
            per = holds.setdefault(inst.replica, {})
            per[(gpu.family, inst.profile)] = per.get((gpu.family, inst.profile), 0) + 1
        if prev.mig and self.planner is None:
            intact = False
        asked = {(f, ""): n for f, n in request.whole.items() if n > 0}
        asked |= {(m.family, m.profile): m.count for m in request.mig if m.count > 0}
        same = (
            set(holds) == set(range(request.replicas))
            and all(per == asked for per in holds.values())
            and all(len(h) == 1 for h in hosts.values())
        )
        return _Held(prev, units, intact, same, replica_of)

    def _static_rejection(self, request: WorkloadRequest) -> tuple[Reason, str] | None:
        pool = self.pool
        if request.mig:
            profiles = ", ".join(sorted({f"{m.profile} ({m.family})" for m in request.mig}))
            if pool.mig_strategy != "mixed":
                return Reason.MIG_UNSUPPORTED, (
                    f"asks for MIG instances {profiles}; pool {pool.label} has mig.strategy "
                    f"{pool.mig_strategy}: set mig.strategy: mixed on the pool or ask for whole GPUs"
                )
        for family, count in sorted(request.limit_counts().items()):
            limit = pool.gpu_limits.get(family)
            if limit is not None and count > limit:
                profile = f"ComputeProfile {pool.profile}" if pool.profile else "the pool's ComputeProfile"
                mig_note = " (MIG instances rounded up to GPUs)" if request.mig else ""
                replicas = f" over {request.replicas} replicas" if request.replicas > 1 else ""
                return Reason.GPU_LIMIT_EXCEEDED, (
                    f"requests {count} {family} GPUs{replicas}{mig_note}; {profile} of pool {pool.label} "
                    f"allows at most {limit} per workload: lower the request or raise gpuLimits"
                )
        if request.mig and self.planner is None:
            profiles = ", ".join(sorted({f"{m.profile} ({m.family})" for m in request.mig}))
            return Reason.MIG_UNSUPPORTED, (
                f"asks for MIG instances {profiles}; MIG placement is not available in this version of "
                "the reconciler: ask for whole GPUs"
            )
        return None

    # -- binding --

    def _bind(self, request: WorkloadRequest, own: Sequence[GpuUnit]) -> _Bound | MigRefusal | None:
        """Bind every replica at once, or nothing (None: no host holds a replica's whole GPUs). ``own``
        (its previous GPUs, still held by it) are offered first: their hosts, then those GPUs."""
        key = request.key
        own_refs = {u.ref for u in own}
        prefer = {u.host_uid for u in own}
        self.free.give_back(own)
        token = self.planner.checkpoint() if self.planner is not None and request.mig else None
        bound: list[tuple[int, GpuUnit]] = []
        instances: list[MigInstance] = []
        switched: list[GpuRef] = []
        failure: MigRefusal | None = None
        for replica in range(request.replicas):
            got = self._bind_replica(request, own_refs, prefer)
            if got is None or isinstance(got, MigRefusal):
                failure = got
                break
            units, placed, changed = got
            bound += [(replica, u) for u in units]
            instances += [replace(i, replica=replica) for i in placed]
            switched += changed
        else:
            return bound, tuple(sorted(instances)), switched
        self.free.give_back(u for _, u in bound)
        self.free.undo_mig(switched)
        if token is not None and self.planner is not None:
            self.planner.rollback(token)
        self.free.take(own, key)
        return failure

    def _bind_replica(
        self, request: WorkloadRequest, own: set[GpuRef], prefer: set[str]
    ) -> tuple[list[GpuUnit], tuple[MigInstance, ...], list[GpuRef]] | MigRefusal | None:
        families = {f for f, n in request.whole.items() if n > 0} | {m.family for m in request.mig}
        if not families:
            return [], (), []  # a replica without GPUs needs none
        if len(families) > 1:
            return None  # a host has GPUs of one family: a replica of two families fits on none
        family = next(iter(families))
        need = request.whole.get(family, 0)
        if not request.mig:
            block = next(self.free.hosts_holding(family, need, prefer), None)
            if block is None:
                return None
            units = self.free.pick(block, family, need, own)
            self.free.take(units, request.key)
            return units, (), []
        if need == 0:
            return self._place_mig(request, [], self.free.family_hosts(family))
        refusal: MigRefusal | None = None
        free = self.free.free_units()  # sorted once; each try leaves out the whole GPUs it takes
        for block in list(self.free.hosts_holding(family, need, prefer)):
            units = self.free.pick(block, family, need, own)
            self.free.take(units, request.key)  # so that the MIG planner sees them taken
            taken = {u.ref for u in units}
            whole_free = [u for u in free if u.ref not in taken]
            got = self._place_mig(request, units, [block.host_uid], whole_free)
            if not isinstance(got, MigRefusal):
                return got
            self.free.give_back(units)
            if refusal is None or refusal.reason is Reason.MIG_UNSUPPORTED:
                refusal = got
        return refusal

    def _place_mig(
        self,
        request: WorkloadRequest,
        units: list[GpuUnit],
        hosts: Sequence[str],
        whole_free: Sequence[GpuUnit] | None = None,
    ) -> tuple[list[GpuUnit], tuple[MigInstance, ...], list[GpuRef]] | MigRefusal:
        assert self.planner is not None  # a MIG request without a planner is rejected before
        free = self.free.free_units() if whole_free is None else whole_free
        outcome = self.planner.place(request.key, request.mig, free, hosts)
        if isinstance(outcome, MigRefusal):
            return outcome
        return units, outcome.instances, self.free.to_mig(outcome.switched)

    # -- the pass --

    def run(self) -> PoolAdmission:
        held, candidates = self._start()
        # Sticky admissions.
        rest: list[WorkloadRequest] = []
        for request in candidates:
            kept = held.get(request.key)
            if kept is not None and kept.intact and kept.same:
                msg = f"admitted to pool {self.pool.label}" + self._where(kept.units, kept.previous.mig)
                self._decide(
                    request.key,
                    WorkloadAction.ADMITTED,
                    Reason.ADMITTED,
                    msg,
                    self._kept(kept),
                    kept.previous.mig,
                    request.replicas,
                )
            else:
                rest.append(request)

        eligible: list[WorkloadRequest] = []
        for request in rest:
            rejection = self._static_rejection(request)
            if rejection is None:
                eligible.append(request)
                continue
            self._refuse(request, held.get(request.key), WorkloadAction.REJECTED, *rejection)

        if self.pool.mode == "dedicated":
            eligible = self._dedicated(eligible, held)

        # Admitted workloads that changed or lost GPUs first, in order; then new ones, priority by priority.
        for request in eligible:
            if request.key in held:
                self._admit_one(request, held[request.key])
        new = [r for r in eligible if r.key not in held]
        for _, group in groupby(new, key=lambda r: r.priority):
            self._admit_new(list(group))
        self._retry_pending()
        self._explain_pending()
        return PoolAdmission(self.pool.key, dict(sorted(self.decisions.items())), self._capacity())

    def _start(self) -> tuple[dict[WorkloadKey, _Held], list[WorkloadRequest]]:
        """Removals and suspensions; previously admitted workloads take back their GPUs until their turn."""
        pool = self.pool
        active = {r.key: r for r in self.requests if not r.removed}
        for key, gone in self.previous.items():
            if key not in active:
                count = len(gone.gpus)
                mig = f" and {_plural(len(gone.mig), 'MIG instance')}" if gone.mig else ""
                replicas = len(set(gone.replica_of().values()) | {i.replica for i in gone.mig}) or 1
                self._decide(
                    key,
                    WorkloadAction.REMOVE,
                    None,
                    f"left pool {pool.label}: its {_plural(count, 'GPU')}{mig} are released",
                    replicas=replicas,
                )
                if self.planner is not None and gone.mig:
                    self.planner.release(key)
        held: dict[WorkloadKey, _Held] = {}
        candidates: list[WorkloadRequest] = []
        for request in self.requests:
            if request.removed:
                continue
            prev = self.previous.get(request.key)
            if request.suspended:
                released = f"; its {_plural(len(prev.gpus), 'GPU')} are released" if prev else ""
                self._decide(
                    request.key,
                    WorkloadAction.SUSPENDED,
                    Reason.SUSPENDED,
                    f"suspended{released}",
                    replicas=request.replicas,
                )
                if self.planner is not None and prev is not None and prev.mig:
                    self.planner.release(request.key)
                continue
            if prev is not None:
                state = self._held(request, prev)
                if state.intact and self.planner is not None and prev.mig:
                    state.intact = self.planner.hold(request.key, prev.mig)
                held[request.key] = state
                # Until its turn, nobody else may take a previously admitted workload's GPUs.
                self.free.take(state.units, request.key)
            candidates.append(request)
        if self.planner is not None:
            self.free.to_mig(self.planner.mig_mode())
        return held, candidates

    def _dedicated(
        self, eligible: list[WorkloadRequest], held: Mapping[WorkloadKey, _Held]
    ) -> list[WorkloadRequest]:
        # The owner: a workload that holds the pool already (kept, or refused a change but keeping its
        # previous admission), else an admitted one that changed, else the first eligible one.
        rank = {r.key: i for i, r in enumerate(self.requests)}
        holding = sorted(
            (
                d.key
                for d in self.decisions.values()
                if d.action is WorkloadAction.ADMITTED
                or (d.action is WorkloadAction.REJECTED and bool(d.gpus or d.mig))
            ),
            key=lambda k: rank[k],
        )
        changed = [r.key for r in eligible if r.key in held]
        candidates = holding + changed + [r.key for r in eligible]
        if not candidates:
            return eligible
        owner = candidates[0]
        why = "admitted to it" if owner in held else "first in order: priority, then namespace, name"
        out: list[WorkloadRequest] = []
        for request in eligible:
            if request.key == owner:
                out.append(request)
                continue
            self._refuse(
                request,
                held.get(request.key),
                WorkloadAction.REJECTED,
                Reason.POOL_DEDICATED,
                f"pool {self.pool.label} is dedicated to {_label(owner)} ({why}); this workload can be "
                f"admitted when {_label(owner)} is removed or suspended, or on a shared pool",
            )
        return out

    def _refuse(
        self,
        request: WorkloadRequest,
        state: _Held | None,
        action: WorkloadAction,
        reason: Reason,
        message: str,
    ) -> None:
        """A previously admitted workload that changed keeps what it holds while all of it is still there;
        one whose GPUs are partly gone lets the rest go."""
        if state is not None and state.intact:
            keeps = self._where(state.units, state.previous.mig)
            self._decide(
                request.key,
                action,
                reason,
                f"{message}; keeps its previous admission{keeps} until then",
                self._kept(state),
                state.previous.mig,
                request.replicas,
            )
            return
        if state is not None:
            self.free.give_back(state.units)
            if self.planner is not None and state.previous.mig:
                self.planner.release(request.key)
        self._decide(request.key, action, reason, message, replicas=request.replicas)

    def _where(self, units: Sequence[GpuUnit], mig: Sequence[MigInstance]) -> str:
        parts = []
        if units:
            hosts = sorted({u.host_name for u in units})
            parts.append(f"{_plural(len(units), 'GPU')} on {', '.join(hosts)}")
        if mig:
            parts.append(_plural(len(mig), "MIG instance"))
        return f" ({' and '.join(parts)})" if parts else ""

    def _admit_one(self, request: WorkloadRequest, state: _Held | None) -> None:
        pool = self.pool
        own: list[GpuUnit] = []
        if state is not None:
            own = list(state.units)  # still held by it since the start of the pass: offered to it first
            if self.planner is not None and state.previous.mig:
                self.planner.release(request.key)
        if pool.not_ready is not None:
            self._pending(request, state, Reason.POOL_NOT_READY)
            return
        self._settle(request, state, own, self._bind(request, own))

    def _admit_new(self, group: list[WorkloadRequest]) -> None:
        """New workloads of one priority (in namespace, name order): those ``order.choose`` picks are
        admitted, the others are pending, each with the outcome of its last try."""
        if self.pool.not_ready is not None:
            for request in group:
                self._pending(request, None, Reason.POOL_NOT_READY)
            return
        trial = Trial(self)
        choice = choose(group, trial.need, shape, trial, search_budget(len(group)))
        chosen = {r.key for r in choice.admitted}
        for request in group:
            if choice.name_order or request.key in chosen:
                outcome = trial.tried[request.key]
            else:
                outcome = self._bind(request, [])  # its refusal as the chosen admissions leave the pool
            self._settle(request, None, [], outcome)

    def _settle(
        self,
        request: WorkloadRequest,
        state: _Held | None,
        own: Sequence[GpuUnit],
        outcome: _Bound | MigRefusal | None,
    ) -> None:
        """Record a binding's outcome: admitted, pending or (a MIG profile the pool lacks) rejected."""
        pool = self.pool
        if outcome is None or isinstance(outcome, MigRefusal):
            if isinstance(outcome, MigRefusal) and outcome.reason is Reason.MIG_UNSUPPORTED:
                self._restore(request, state)
                self._refuse(request, state, WorkloadAction.REJECTED, outcome.reason, outcome.message)
                return
            if isinstance(outcome, MigRefusal):
                self.mig_refusals[request.key] = outcome
                self._pending(request, state, outcome.reason)
            else:
                self.mig_refusals.pop(request.key, None)
                self._pending(request, state, Reason.POOL_CAPACITY_EXCEEDED)  # refined once the pass is over
            return
        bound, instances, _ = outcome
        units = [u for _, u in bound]
        self.free.give_back(u for u in own if u not in units)
        again = " again" if state is not None else ""
        self._decide(
            request.key,
            WorkloadAction.ADMIT,
            Reason.ADMITTED,
            f"admitted{again} to pool {pool.label}" + self._where(units, instances),
            bound,
            instances,
            request.replicas,
        )

    def _retry_pending(self) -> None:
        """Workloads are bound in order, so one that grows may go pending before a later one shrinks (or
        leaves a half-gone host) and frees its GPUs. Pending workloads are tried again, in the same order,
        until a round admits nothing more: every round either admits one or ends the loop, and each try
        starts from the state the failed try left (all or nothing), so the result stays deterministic."""
        while True:
            waiting = [(r, s, why) for r, s, why in self.pending if why is not Reason.POOL_NOT_READY]
            if not waiting:
                return
            self.pending = [p for p in self.pending if p[2] is Reason.POOL_NOT_READY]
            before = len(self.decisions)
            for request, state, _ in waiting:
                # A broken earlier admission gave its GPUs back when it went pending: it owns none now.
                retry = state if state is None or state.intact else replace(state, units=[])
                self._admit_one(request, retry)
            if len(self.decisions) == before:
                return

    def _restore(self, request: WorkloadRequest, state: _Held | None) -> None:
        if state is not None and state.intact and self.planner is not None and state.previous.mig:
            self.planner.hold(request.key, state.previous.mig)

    def _pending(self, request: WorkloadRequest, state: _Held | None, reason: Reason) -> None:
        if state is not None and state.intact:
            self._restore(request, state)  # it keeps what it has: its GPUs stay taken
        elif state is not None:
            self.free.give_back(state.units)
        self.pending.append((request, state, reason))

    def _explain_pending(self) -> None:
        """Pending reasons and messages are written once the pass is over: the free counts they cite are
        final. Positions follow the order in which the workloads were considered."""
        shortfall = Shortfall(self.pool.label, self.pool.gpus, self.free)
        for position, (request, state, reason) in enumerate(self.pending, start=1):
            refusal = self.mig_refusals.get(request.key)
            if reason is Reason.POOL_NOT_READY:
                message = f"pool {self.pool.label} is not ready: {self.pool.not_ready}; waits for it"
            elif refusal is not None:
                reason, message = refusal.reason, refusal.message
            else:
                reason, message = shortfall.explain(request)
            keeps = state is not None and state.intact
            if keeps:
                assert state is not None
                message += (
                    f"; keeps its previous admission{self._where(state.units, state.previous.mig)} until then"
                )
            self._decide(
                request.key,
                WorkloadAction.PENDING,
                reason,
                message,
                self._kept(state) if keeps and state is not None else (),
                state.previous.mig if keeps and state is not None else (),
                request.replicas,
            )
            self.decisions[request.key] = replace(self.decisions[request.key], position=position)

    def _capacity(self) -> dict[str, FamilyCapacity]:
        # GPUs in MIG mode as the pass leaves them: the planner's layouts that nobody uses return to whole.
        mig = self.planner.mig_mode() if self.planner is not None else frozenset(self.free.mig_mode)
        out: dict[str, FamilyCapacity] = {}
        totals: dict[GpuFamily, int] = {}
        admitted: dict[GpuFamily, int] = {}
        for unit in self.pool.gpus:
            totals[unit.family] = totals.get(unit.family, 0) + 1
            if unit.ref in self.free.holder or unit.ref in mig:
                admitted[unit.family] = admitted.get(unit.family, 0) + 1
        for family, total in sorted(totals.items()):
            used = admitted.get(family, 0)
            out[family] = FamilyCapacity(total=total, admitted=used, free=total - used)
        return out
