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

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import replace
from itertools import groupby

from reconciler.model.conditions import Reason
from reconciler.model.pools import WorkloadKey, WorkloadRequest
from reconciler.placement.admission_bind import Binder, _Bound
from reconciler.placement.admission_rules import Held, held, plural, static_rejection, where
from reconciler.placement.admission_trial import Trial, search_budget, shape
from reconciler.placement.admission_types import (
    FamilyCapacity,
    PoolAdmission,
    PoolState,
    PreviousAdmission,
    WorkloadAction,
    WorkloadAdmission,
    family_capacity,
)
from reconciler.placement.binding import FreeGpus
from reconciler.placement.order import choose
from reconciler.placement.seam import MigPlanner, MigRefusal
from reconciler.placement.shortfall import Shortfall
from reconciler.placement.units import GpuUnit, MigInstance

__all__ = ["admit_pool"]

# --- the pass --------------------------------------------------------------------------------------------


def _order(request: WorkloadRequest) -> tuple[int, str, str]:
    return (-request.priority, request.key[0], request.key[1])


def _label(key: WorkloadKey) -> str:
    return f"{key[0]}/{key[1]}"


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
        self.pending: list[tuple[WorkloadRequest, Held | None, Reason]] = []
        self.mig_refusals: dict[WorkloadKey, MigRefusal] = {}
        self.binder = Binder(self.free, planner)
        self.rejections: dict[Hashable, tuple[Reason, str] | None] = {}

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
        position: int | None = None,
    ) -> None:
        ordered = sorted(bound, key=lambda b: b[1].order) if bound else ()
        self.decisions[request_key] = WorkloadAdmission(
            key=request_key,
            pool=self.pool.key,
            action=action,
            reason=reason,
            message=message,
            gpus=tuple(u for _, u in ordered),
            mig=tuple(sorted(mig)) if mig else (),
            gpu_replicas=tuple(r for r, _ in ordered) if any(r for r, _ in ordered) else (),
            replicas=replicas,
            position=position,
        )

    def _kept(self, state: Held) -> list[tuple[int, GpuUnit]]:
        return [(state.replica_of.get(u.ref, 0), u) for u in state.units]

    def _held(self, request: WorkloadRequest, prev: PreviousAdmission) -> Held:
        return held(request, prev, self.free.units, self.planner is not None)

    def _static_rejection(self, request: WorkloadRequest) -> tuple[Reason, str] | None:
        """``admission_rules.static_rejection``, once per request shape (it names no workload)."""
        shape = request.asked()
        if shape not in self.rejections:
            self.rejections[shape] = static_rejection(self.pool, request, self.planner is not None)
        return self.rejections[shape]

    def _bind(self, request: WorkloadRequest, own: Sequence[GpuUnit]) -> _Bound | MigRefusal | None:
        """Bind every replica at once, or nothing (``admission_bind.Binder.bind``)."""
        return self.binder.bind(request, own)

    # -- the pass --

    def run(self) -> PoolAdmission:
        held, candidates = self._start()
        # Sticky admissions.
        rest: list[WorkloadRequest] = []
        for request in candidates:
            kept = held.get(request.key)
            if kept is not None and kept.intact and kept.same:
                msg = f"admitted to pool {self.pool.label}" + where(kept.units, kept.previous.mig)
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

    def _capacity(self) -> dict[str, FamilyCapacity]:
        # GPUs in MIG mode as the pass leaves them: the planner's layouts that nobody uses return to whole.
        mig = self.planner.mig_mode() if self.planner is not None else frozenset(self.free.mig_mode)
        return family_capacity(self.pool.gpus, self.free.holder, mig)

    def _start(self) -> tuple[dict[WorkloadKey, Held], list[WorkloadRequest]]:
        """Removals and suspensions; previously admitted workloads take back their GPUs until their turn."""
        pool = self.pool
        active = {r.key: r for r in self.requests if not r.removed}
        for key, gone in self.previous.items():
            if key not in active:
                count = len(gone.gpus)
                mig = f" and {plural(len(gone.mig), 'MIG instance')}" if gone.mig else ""
                replicas = len(set(gone.replica_of().values()) | {i.replica for i in gone.mig}) or 1
                self._decide(
                    key,
                    WorkloadAction.REMOVE,
                    None,
                    f"left pool {pool.label}: its {plural(count, 'GPU')}{mig} are released",
                    replicas=replicas,
                )
                if self.planner is not None and gone.mig:
                    self.planner.release(key)
        held: dict[WorkloadKey, Held] = {}
        candidates: list[WorkloadRequest] = []
        for request in self.requests:
            if request.removed:
                continue
            prev = self.previous.get(request.key)
            if request.suspended:
                released = f"; its {plural(len(prev.gpus), 'GPU')} are released" if prev else ""
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
        self, eligible: list[WorkloadRequest], held: Mapping[WorkloadKey, Held]
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
        state: Held | None,
        action: WorkloadAction,
        reason: Reason,
        message: str,
    ) -> None:
        """A previously admitted workload that changed keeps what it holds while all of it is still there;
        one whose GPUs are partly gone lets the rest go."""
        if state is not None and state.intact:
            keeps = where(state.units, state.previous.mig)
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

    def _admit_one(self, request: WorkloadRequest, state: Held | None) -> None:
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
        state: Held | None,
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
            f"admitted{again} to pool {pool.label}" + where(units, instances),
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

    def _restore(self, request: WorkloadRequest, state: Held | None) -> None:
        if state is not None and state.intact and self.planner is not None and state.previous.mig:
            self.planner.hold(request.key, state.previous.mig)

    def _pending(self, request: WorkloadRequest, state: Held | None, reason: Reason) -> None:
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
                    f"; keeps its previous admission{where(state.units, state.previous.mig)} until then"
                )
            self._decide(
                request.key,
                WorkloadAction.PENDING,
                reason,
                message,
                self._kept(state) if keeps and state is not None else (),
                state.previous.mig if keeps and state is not None else (),
                request.replicas,
                position,
            )
