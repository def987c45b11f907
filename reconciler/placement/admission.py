"""Admission of workloads into one compute pool, on concrete GPUs (DESIGN.md section 9), pure.

``admit_pool(pool, workloads, previous)`` decides, for every tenant of the pool, one of ``admit`` (admitted
by this pass), ``admitted`` (kept), ``pending``, ``remove``, ``rejected`` or ``suspended``, and names the
GPUs bound to it; and counts the pool's capacity per family. The rules, in the order they apply:

1. A workload that left the pool (``removed``, or a previous admission whose workload is gone) is
   ``remove``; a suspended one is ``suspended``. Both free their GPUs for the others in the same pass.
2. Sticky: a workload admitted before whose request is unchanged and whose GPUs the pool still has is
   ``admitted`` on the same GPUs, whatever arrives (never pre-empted).
3. A MIG request to a pool with ``mig.strategy: none`` (or without a MIG planner) is ``rejected``
   ``MIGUnsupported``; a request above the ComputeProfile's ``gpuLimits`` is ``GPULimitExceeded``.
4. A dedicated pool belongs to its admitted workload, else to the first eligible one in order; every other
   tenant is ``rejected`` ``PoolDedicated``.
5. Admitted workloads whose request changed or whose pool lost some of their GPUs are re-bound first
   (they are running), offered their own GPUs before any other. A changed one that no longer fits keeps
   its previous GPUs (``pending``, nothing running is taken away); one whose GPUs are gone is released.
6. New workloads one by one in order (priority high first, then namespace, then name), each all or
   nothing: every GPU it asks for bound to a concrete GPU, or ``pending``. A later workload that fits is
   admitted past a pending one (no head-of-line blocking).

Binding (a decision the design leaves open): a workload's GPUs of one family go to the single host with
the fewest free GPUs that still holds them all (best fit, so large holes stay for large requests); when
no host does, hosts with the most free GPUs are filled first (the fewest hosts), then the remainder is
best-fitted. Ties break by host name, then GPU index. Because GPUs are only ever taken during a pass,
a pending workload never fits into what is free at its end: no GPU idles while a workload that fits it
waits.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Protocol

from reconciler.inventory import Machine, family_from_model
from reconciler.model.conditions import Reason
from reconciler.model.gpu import GpuFamily
from reconciler.model.mig import catalogue_entry, memory_bytes_of
from reconciler.model.pools import MigRequest, PoolKey, WorkloadKey, WorkloadRequest

# --- inputs ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, order=True)
class GpuRef:
    """One physical GPU: the host's uid and the GPU's device index on it."""

    host_uid: str
    index: int


@dataclass(frozen=True, slots=True)
class GpuUnit:
    """A GPU of the pool as a unit of binding (the MIG planner also reads its model and memory)."""

    host_uid: str
    host_name: str
    index: int
    family: GpuFamily
    mig_capable: bool = False
    model: str | None = None
    memory_bytes: int | None = None

    @property
    def ref(self) -> GpuRef:
        return GpuRef(self.host_uid, self.index)

    @property
    def order(self) -> tuple[str, str, int]:
        return (self.host_name, self.host_uid, self.index)


@dataclass(frozen=True, slots=True, order=True)
class MigInstance:
    """A MIG instance bound to a workload: host, GPU index, profile and start slice."""

    host_uid: str
    gpu: int
    profile: str
    start: int


@dataclass(frozen=True, slots=True)
class PreviousAdmission:
    """What the status branch says a workload held after the last pass that admitted it. ``kind``
    (AIWorkload or MLPlatform) names the workload's kind when the plan cannot read it (it is gone)."""

    key: WorkloadKey
    gpus: tuple[GpuRef, ...] = ()
    mig: tuple[MigInstance, ...] = ()
    kind: str = "AIWorkload"


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


def gpu_units(machines: Iterable[Machine]) -> tuple[GpuUnit, ...]:
    """The GPUs of a pool's hosts, one unit per device index (0 .. gpu_count-1), in binding order.

    Whole-GPU binding and MIG share these units. Device indices follow the agent's GPU entries in the
    order reported; a GPU is MIG-capable when the agent says ``migCapable: true`` and its family and
    memory are in the MIG catalogue (DESIGN.md section 10). A host whose agent reports GPUs of another
    family, GPUs without a model or fewer GPUs than are placed gets no MIG: which device index is which
    GPU is then unknown, and a mig-parted config addresses GPUs by index.
    """
    return tuple(sorted((u for m in machines for u in _host_units(m)), key=lambda u: u.order))


def _host_units(machine: Machine) -> list[GpuUnit]:
    family = machine.gpu_family
    if family is None:
        return []
    devices = [d for d in machine.gpu_devices if d.count > 0]
    known = all(family_from_model(d.vendor, d.model) == family for d in devices)
    per_index = [d for d in devices for _ in range(d.count)] if known else []
    if len(per_index) != machine.gpu_count:
        per_index = []
    units: list[GpuUnit] = []
    for i in range(machine.gpu_count):
        device = per_index[i] if per_index else None
        memory = machine.gpu_memory_bytes
        capable = False
        if device is not None:
            memory = _device_memory(device.memory) or memory
            capable = catalogue_entry(family, memory, mig_capable=device.mig_capable) is not None
        units.append(
            GpuUnit(
                machine.uid,
                machine.name,
                i,
                family,
                mig_capable=capable,
                model=device.model if device is not None else None,
                memory_bytes=memory,
            )
        )
    return units


def _device_memory(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        size = memory_bytes_of(text)
    except (ValueError, OverflowError):
        return None
    return size if size > 0 else None


# --- the MIG seam ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MigPlacement:
    instances: tuple[MigInstance, ...]
    switched: tuple[GpuRef, ...] = ()  # whole GPUs this placement puts into MIG mode


@dataclass(frozen=True, slots=True)
class MigRefusal:
    reason: Reason  # PoolCapacityExceeded, NoFittingLayout or MIGUnsupported
    message: str


class MigPlanner(Protocol):
    """The MIG layout planner of one pool for one pass (``reconciler.placement.mig``), built by the caller
    from the pool's previous layout. Admission drives it; every call is all or nothing."""

    def hold(self, key: WorkloadKey, instances: Sequence[MigInstance]) -> bool:
        """Keep a previous admission's instances; False when the layout no longer has them."""
        ...

    def release(self, key: WorkloadKey) -> None:
        """Free whatever the workload holds (it is removed, suspended, or re-placed)."""
        ...

    def place(
        self, key: WorkloadKey, requests: Sequence[MigRequest], whole_free: Sequence[GpuUnit]
    ) -> MigPlacement | MigRefusal:
        """Bind every requested instance at once, switching GPUs of ``whole_free`` to MIG mode if needed."""
        ...

    def mig_mode(self) -> frozenset[GpuRef]:
        """The GPUs that stay in MIG mode were the pass to end now: not available as whole GPUs. Asked
        before binding (a layout nobody holds any more may be offered whole) and at the end (capacity)."""
        ...


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
class WorkloadAdmission:
    """The decision for one workload. ``gpus`` are the whole GPUs bound to it after this pass (a pending or
    rejected workload that changed keeps its previous ones); ``mig`` its MIG instances."""

    key: WorkloadKey
    pool: PoolKey
    action: WorkloadAction
    reason: Reason | None
    message: str
    gpus: tuple[GpuUnit, ...] = ()
    mig: tuple[MigInstance, ...] = ()

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


class _Free:
    """Free whole GPUs of the pool per family and host, and who holds the others."""

    def __init__(self, units: Sequence[GpuUnit]) -> None:
        self.units = {u.ref: u for u in units}
        self.by_family: dict[GpuFamily, dict[str, list[GpuUnit]]] = {}
        for unit in sorted(units, key=lambda u: u.order):
            self.by_family.setdefault(unit.family, {}).setdefault(unit.host_uid, []).append(unit)
        self.holder: dict[GpuRef, WorkloadKey] = {}
        self.mig_mode: set[GpuRef] = set()
        self.free_n: dict[GpuFamily, int] = {}
        for unit in units:
            self.free_n[unit.family] = self.free_n.get(unit.family, 0) + 1

    def count(self, family: GpuFamily) -> int:
        return self.free_n.get(family, 0)

    def take(self, units: Iterable[GpuUnit], key: WorkloadKey) -> None:
        for unit in units:
            self.by_family[unit.family][unit.host_uid].remove(unit)
            self.free_n[unit.family] -= 1
            self.holder[unit.ref] = key

    def give_back(self, units: Iterable[GpuUnit]) -> None:
        for unit in units:
            if self.holder.pop(unit.ref, None) is None:
                continue
            hosts = self.by_family.setdefault(unit.family, {})
            free = hosts.setdefault(unit.host_uid, [])
            free.append(unit)
            free.sort(key=lambda u: u.index)
            self.free_n[unit.family] = self.free_n.get(unit.family, 0) + 1

    def to_mig(self, refs: Iterable[GpuRef]) -> None:
        for ref in refs:
            unit = self.units.get(ref)
            if unit is None or ref in self.mig_mode:
                continue
            self.mig_mode.add(ref)
            if ref not in self.holder:
                self.by_family[unit.family][unit.host_uid].remove(unit)
                self.free_n[unit.family] -= 1

    def choose(self, family: GpuFamily, n: int) -> list[GpuUnit] | None:
        """``n`` free GPUs of ``family``: best-fit host, else fewest hosts (see the module docstring)."""
        if self.count(family) < n:
            return None
        hosts = self.by_family[family]
        sizes = [(len(v), v[0].host_name, h) for h, v in hosts.items() if v]
        chosen: list[GpuUnit] = []
        remaining = n
        while remaining > 0:
            fits = [t for t in sizes if t[0] >= remaining]
            if fits:
                chosen.extend(hosts[min(fits)[2]][:remaining])
                break
            most = min(sizes, key=lambda t: (-t[0], t[1], t[2]))
            sizes.remove(most)
            chosen.extend(hosts[most[2]])
            remaining = n - len(chosen)
        return chosen

    def free_units(self) -> list[GpuUnit]:
        return sorted(
            (u for hosts in self.by_family.values() for v in hosts.values() for u in v), key=lambda u: u.order
        )


@dataclass
class _Held:
    """A previously admitted workload's standing at the start of the pass."""

    previous: PreviousAdmission
    units: list[GpuUnit]  # its previous GPUs the pool still has
    intact: bool  # every previous GPU (and MIG instance) is still there
    same: bool  # its request is what its GPUs and instances cover


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
        self.free = _Free(pool.gpus)
        self.requests = sorted(workloads, key=_order)
        self.previous = {p.key: p for p in sorted(previous, key=lambda p: p.key)}
        self.decisions: dict[WorkloadKey, WorkloadAdmission] = {}
        self.pending: list[tuple[WorkloadRequest, _Held | None, Reason]] = []
        self.mig_refusals: dict[WorkloadKey, str] = {}

    # -- helpers --

    def _decide(
        self,
        request_key: WorkloadKey,
        action: WorkloadAction,
        reason: Reason | None,
        message: str,
        units: Iterable[GpuUnit] = (),
        mig: tuple[MigInstance, ...] = (),
    ) -> None:
        self.decisions[request_key] = WorkloadAdmission(
            key=request_key,
            pool=self.pool.key,
            action=action,
            reason=reason,
            message=message,
            gpus=tuple(sorted(units, key=lambda u: u.order)),
            mig=tuple(sorted(mig)),
        )

    def _held(self, request: WorkloadRequest, prev: PreviousAdmission) -> _Held:
        units = [self.free.units[r] for r in sorted(set(prev.gpus)) if r in self.free.units]
        intact = len(units) == len(set(prev.gpus))
        counts: dict[GpuFamily, int] = {}
        for unit in units:
            counts[unit.family] = counts.get(unit.family, 0) + 1
        mig_now: dict[tuple[GpuFamily, str], int] = {}
        for inst in prev.mig:
            gpu = self.free.units.get(GpuRef(inst.host_uid, inst.gpu))
            if gpu is None:
                intact = False
                continue
            mig_now[(gpu.family, inst.profile)] = mig_now.get((gpu.family, inst.profile), 0) + 1
        if prev.mig and self.planner is None:
            intact = False
        mig_asked = {(m.family, m.profile): m.count for m in request.mig}
        asked = {f: n for f, n in request.whole.items() if n > 0}
        same = counts == asked and mig_now == {k: n for k, n in mig_asked.items() if n > 0}
        return _Held(prev, units, intact, same)

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
                return Reason.GPU_LIMIT_EXCEEDED, (
                    f"requests {count} {family} GPUs{mig_note}; {profile} of pool {pool.label} allows at "
                    f"most {limit} per workload: lower the request or raise gpuLimits"
                )
        if request.mig and self.planner is None:
            profiles = ", ".join(sorted({f"{m.profile} ({m.family})" for m in request.mig}))
            return Reason.MIG_UNSUPPORTED, (
                f"asks for MIG instances {profiles}; MIG placement is not available in this version of "
                "the reconciler: ask for whole GPUs"
            )
        return None

    def _bind(
        self, request: WorkloadRequest, own: Sequence[GpuUnit]
    ) -> tuple[list[GpuUnit], MigPlacement | None] | MigRefusal | None:
        """Bind the whole request at once, or nothing. ``own`` (its previous GPUs, still held by it) are
        used first; the rest comes from the free GPUs."""
        chosen: list[GpuUnit] = []
        taken: list[GpuUnit] = []
        for family, n in sorted(request.whole.items()):
            mine = [u for u in own if u.family == family][:n]
            extra = self.free.choose(family, n - len(mine)) if n > len(mine) else []
            if extra is None:
                self.free.give_back(taken)
                return None
            self.free.take(extra, request.key)  # so that the MIG planner sees them taken
            taken.extend(extra)
            chosen.extend(mine + extra)
        placement: MigPlacement | None = None
        if request.mig:
            assert self.planner is not None  # a MIG request without a planner is rejected before
            outcome = self.planner.place(request.key, request.mig, self.free.free_units())
            if isinstance(outcome, MigRefusal):
                self.free.give_back(taken)
                return outcome
            placement = outcome
            self.free.to_mig(outcome.switched)
        return chosen, placement

    # -- the pass --

    def run(self) -> PoolAdmission:
        pool = self.pool
        active = {r.key: r for r in self.requests if not r.removed}
        for key, gone in self.previous.items():
            if key not in active:
                count = len(gone.gpus)
                mig = f" and {_plural(len(gone.mig), 'MIG instance')}" if gone.mig else ""
                self._decide(
                    key,
                    WorkloadAction.REMOVE,
                    None,
                    f"left pool {pool.label}: its {_plural(count, 'GPU')}{mig} are released",
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
                self._decide(request.key, WorkloadAction.SUSPENDED, Reason.SUSPENDED, f"suspended{released}")
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

        # Sticky admissions.
        rest: list[WorkloadRequest] = []
        for request in candidates:
            kept = held.get(request.key)
            if kept is not None and kept.intact and kept.same:
                msg = f"admitted to pool {pool.label}" + self._where(kept.units, kept.previous.mig)
                self._decide(
                    request.key,
                    WorkloadAction.ADMITTED,
                    Reason.ADMITTED,
                    msg,
                    kept.units,
                    kept.previous.mig,
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

        if pool.mode == "dedicated":
            eligible = self._dedicated(eligible, held)

        # Admitted workloads that changed or lost GPUs first, then new ones; each in order.
        again = [r for r in eligible if r.key in held]
        new = [r for r in eligible if r.key not in held]
        for request in again + new:
            self._admit_one(request, held.get(request.key))
        self._retry_pending()
        self._explain_pending()
        return PoolAdmission(pool.key, dict(sorted(self.decisions.items())), self._capacity())

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
                state.units,
                state.previous.mig,
            )
            return
        if state is not None:
            self.free.give_back(state.units)
            if self.planner is not None and state.previous.mig:
                self.planner.release(request.key)
        self._decide(request.key, action, reason, message)

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
        outcome = self._bind(request, own)
        if outcome is None or isinstance(outcome, MigRefusal):
            if isinstance(outcome, MigRefusal) and outcome.reason is Reason.MIG_UNSUPPORTED:
                self._restore(request, state)
                self._refuse(request, state, WorkloadAction.REJECTED, outcome.reason, outcome.message)
                return
            reason = outcome.reason if isinstance(outcome, MigRefusal) else Reason.POOL_CAPACITY_EXCEEDED
            if isinstance(outcome, MigRefusal):
                self.mig_refusals[request.key] = outcome.message
            self._pending(request, state, reason)
            return
        units, placement = outcome
        surplus = [u for u in own if u not in units]
        self.free.give_back(surplus)
        instances = placement.instances if placement is not None else ()
        again = " again" if state is not None else ""
        self._decide(
            request.key,
            WorkloadAction.ADMIT,
            Reason.ADMITTED,
            f"admitted{again} to pool {pool.label}" + self._where(units, instances),
            units,
            instances,
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
        """Pending messages are written once the pass is over: the free counts they cite are final."""
        self.totals: dict[GpuFamily, int] = {}
        for unit in self.pool.gpus:
            self.totals[unit.family] = self.totals.get(unit.family, 0) + 1
        self._holds: dict[GpuFamily, dict[WorkloadKey, int]] | None = None
        for request, state, reason in self.pending:
            if reason is Reason.POOL_NOT_READY:
                message = f"pool {self.pool.label} is not ready: {self.pool.not_ready}; waits for it"
            elif request.key in self.mig_refusals:
                message = self.mig_refusals[request.key]
            else:
                message = self._shortfall(request)
            if state is not None and state.intact:
                keeps = self._where(state.units, state.previous.mig)
                self._decide(
                    request.key,
                    WorkloadAction.PENDING,
                    reason,
                    f"{message}; keeps its previous admission{keeps} until then",
                    state.units,
                    state.previous.mig,
                )
            else:
                self._decide(request.key, WorkloadAction.PENDING, reason, message)

    def _shortfall(self, request: WorkloadRequest) -> str:
        pool = self.pool
        totals = self.totals
        parts: list[str] = []
        for family, need in sorted(request.whole.items()):
            free = self.free.count(family)
            if free >= need:
                continue
            total = totals.get(family, 0)
            short = need - free
            if total == 0:
                parts.append(
                    f"needs {_plural(need, f'{family} GPU')}, pool {pool.label} has none; frees when the "
                    f"pool grows by {need} (add {family} to its spec.gpus)"
                )
                continue
            head = (
                f"needs {_plural(need, f'{family} GPU')}, {free} free in pool {pool.label} "
                f"({total} total, {total - free} admitted)"
            )
            unblock = self._who_frees(family, short, request.key)
            grow = f"the pool grows by {short}"
            parts.append(
                f"{head}; frees when {unblock}, or {grow}" if unblock else f"{head}; frees when {grow}"
            )
        if not parts:  # the shortfall is of something other than whole GPUs (cannot happen without MIG)
            return f"does not fit in pool {pool.label}"
        return "; ".join(parts)

    def _who_frees(self, family: GpuFamily, short: int, me: WorkloadKey) -> str | None:
        """The fewest holders whose removal would free ``short`` GPUs of ``family`` (the smallest one that
        is enough, else the largest first)."""
        if self._holds is None:  # who holds what, counted once per pass and only when needed
            self._holds = {}
            for ref, key in self.free.holder.items():
                if ref not in self.free.mig_mode:
                    per = self._holds.setdefault(self.free.units[ref].family, {})
                    per[key] = per.get(key, 0) + 1
        holds = {k: n for k, n in self._holds.get(family, {}).items() if k != me}
        if sum(holds.values()) < short:
            return None
        enough = sorted((n, k) for k, n in holds.items() if n >= short)
        if enough:
            return f"{_label(enough[0][1])} is removed"
        chosen: list[WorkloadKey] = []
        got = 0
        for n, key in sorted(((-n, k) for k, n in holds.items())):
            chosen.append(key)
            got -= n
            if got >= short:
                break
        names = [_label(k) for k in chosen]
        return f"{', '.join(names[:-1])} and {names[-1]} are removed"

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
