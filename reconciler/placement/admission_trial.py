"""Admission's side of the order search (``placement.order.choose``) for new workloads of one priority:
binding and unbinding trial admissions on the pass's free GPUs and MIG planner, and the room a workload
needs at least (docs/pools.md, "Order among workloads of one priority")."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from functools import cache
from typing import TYPE_CHECKING

from reconciler.model.gpu import GpuFamily
from reconciler.model.mig import CATALOGUE
from reconciler.model.pools import WorkloadKey, WorkloadRequest
from reconciler.placement.order import Need
from reconciler.placement.seam import MigRefusal, MigRoom

if TYPE_CHECKING:
    from reconciler.placement.admission import _Pass
    from reconciler.placement.admission_bind import _Bound

__all__ = ["Trial", "search_budget", "shape"]

# Binding attempts the search may spend on one priority of one pool past name order: per workload of
# that priority, and at most in all (a MIG placement on thousands of GPUs takes milliseconds). A count,
# so the outcome never depends on the machine's speed.
_SEARCH_BUDGET = 2
_SEARCH_CAP = 256
_NOTHING = GpuFamily("")  # the dimension of a workload without GPUs: it needs none
_COUNTED = GpuFamily("(MIG instances)")  # MIG requests without a planner's room: counted, not measured


def search_budget(group: int) -> int:
    """Binding attempts the search may spend past name order on a priority group of this many workloads."""
    return min(_SEARCH_BUDGET * group, _SEARCH_CAP)


def shape(request: WorkloadRequest) -> Hashable:
    """What binding a workload depends on: two workloads of the same shape bind alike."""
    whole = tuple(sorted((f, n) for f, n in request.whole.items() if n > 0))
    mig = tuple(sorted((m.family, m.profile, m.count) for m in request.mig if m.count > 0))
    return request.replicas, whole, mig


@cache
def _gpu_slices(family: GpuFamily) -> int:
    """Memory slices a whole GPU of the family stands for when MIG instances share the room with it."""
    return max((t.memory_slices for t in CATALOGUE if t.family == family), default=8)


@cache
def _instance_slices(family: GpuFamily, profile: str) -> int:
    """The fewest memory slices the profile takes on any GPU of the family (at least 1)."""
    sizes = [p.size for t in CATALOGUE if t.family == family if (p := t.profile(profile)) is not None]
    return min(sizes, default=1)


class Trial:
    """The pass as ``placement.order.choose`` drives it: new workloads bound (all or nothing) and unbound,
    what is free per family, and what each workload needs at least. Without a MIG planner the unit is a
    whole GPU; with one, a memory slice (a whole GPU counts its family's slices)."""

    def __init__(self, run: _Pass) -> None:
        self.run = run
        self.tried: dict[WorkloadKey, _Bound | MigRefusal | None] = {}
        self.bound: list[_Bound] = []  # the bindings made, in order (undone last first)
        planner = run.planner
        self.unit = 1 if planner is None else None
        self.mig_room = planner if planner is not None and isinstance(planner, MigRoom) else None
        self._rooms: tuple[dict[Hashable, int], dict[GpuFamily, list[int]]] | None = None
        self._need: dict[Hashable, Need] = {}  # per request shape, until the next change

    def _changed(self) -> None:
        self._rooms = None
        if self._need:
            self._need = {}

    def bind(self, request: WorkloadRequest) -> bool:
        self._changed()
        outcome = self.run._bind(request, [])
        self.tried[request.key] = outcome
        if outcome is None or isinstance(outcome, MigRefusal):
            return False
        self.bound.append(outcome)
        return True

    def mark(self) -> object:
        return len(self.bound), self.run.planner.checkpoint() if self.run.planner is not None else None

    def back(self, mark: object) -> None:
        assert isinstance(mark, tuple)
        count, planner_state = mark
        while len(self.bound) > count:
            self._unbind()
        if self.run.planner is not None:
            self.run.planner.rollback(planner_state)

    def _unbind(self) -> None:
        self._changed()
        bound, _, switched = self.bound.pop()
        self.run.free.give_back(u for _, u in bound)
        self.run.free.undo_mig(switched)

    def attempt(self, request: WorkloadRequest) -> object | None:
        token = self.mark()
        return token if self.bind(request) else None

    def undo(self, token: object) -> None:
        self.back(token)

    def save(self) -> object:
        planner = self.run.planner.checkpoint() if self.run.planner is not None else None
        return self.run.free.snapshot(), planner, dict(self.tried), list(self.bound)

    def restore(self, saved: object) -> None:
        assert isinstance(saved, tuple)
        free, planner, tried, bound = saved
        self._changed()
        self.run.free.restore(free)
        if self.run.planner is not None:
            self.run.planner.rollback(planner)
        self.tried, self.bound = dict(tried), list(bound)

    def _room(self) -> tuple[dict[Hashable, int], dict[GpuFamily, list[int]]]:
        """Free capacity per family, in total and (with MIG) per host, largest first; kept until the next
        change. Without MIG a whole-GPU request's fit is FreeGpus' own count of the hosts that hold it."""
        if self._rooms is not None:
            return self._rooms
        free = self.run.free
        if self.mig_room is None:
            total: dict[Hashable, int] = {f: free.count(f) for f in free.by_family}
            if self.run.planner is not None:
                total = {f: n * _gpu_slices(GpuFamily(str(f))) for f, n in total.items()}
                total[_COUNTED] = len(self.run.requests)  # MIG requests: bounded by their number only
            self._rooms = total, {}
            return self._rooms
        hosts: dict[GpuFamily, dict[str, int]] = {}
        for family, per_host in free.by_family.items():
            hosts[family] = {host: len(units) * _gpu_slices(family) for host, units in per_host.items()}
        for (family, host), slices in self.mig_room.free_slices().items():
            per = hosts.setdefault(family, {})
            per[host] = per.get(host, 0) + slices
        total = {f: sum(per.values()) for f, per in hosts.items()}
        self._rooms = total, {f: sorted(per.values(), reverse=True) for f, per in hosts.items()}
        return self._rooms

    def room(self) -> Mapping[Hashable, int]:
        return self._room()[0]

    def _needs(self, request: WorkloadRequest) -> tuple[GpuFamily, int] | None:
        """The family a workload draws on and what one replica needs (None: two families, never fits)."""
        families = {f for f, n in request.whole.items() if n > 0} | {m.family for m in request.mig if m.count}
        if len(families) > 1:
            return None  # a host has GPUs of one family
        if not families:
            return _NOTHING, 0
        family = next(iter(families))
        if request.mig and self.mig_room is None:
            return _COUNTED, 1
        slices = sum(_instance_slices(family, m.profile) * m.count for m in request.mig)
        return family, request.whole.get(family, 0) * (self.unit or _gpu_slices(family)) + slices

    def fits(self, request: WorkloadRequest) -> bool:
        per = self._needs(request)
        if per is None:
            return False
        family, amount = per
        whole = request.whole.get(family, 0)
        if whole and self.run.free.room(family, whole) < request.replicas:
            return False
        if not request.mig or self.mig_room is None or amount == 0:
            return True
        held = 0  # replicas the hosts' room holds, each on one host
        for room in self._room()[1].get(family, ()):
            if room < amount:
                break
            held += room // amount
            if held >= request.replicas:
                return True
        return False

    def need(self, request: WorkloadRequest) -> Need:
        """What the workload needs at least, in room units; None when it does not fit now (the same for
        every request of one shape: worked out once per shape while nothing is bound or unbound)."""
        shape = request.asked()
        if shape in self._need:
            return self._need[shape]
        per = self._needs(request)
        need = None if per is None or not self.fits(request) else (per[0], per[1] * request.replicas, per[1])
        self._need[shape] = need
        return need
