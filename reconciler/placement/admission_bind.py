"""Binding one workload in a pool's admission pass (docs/pools.md, binding): every replica at once or
nothing, its whole GPUs on one host (``placement.binding``) and its MIG instances through the MIG
planner; a failure undoes what the try took. Pure; used by ``admission``."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import replace

from reconciler.model.conditions import Reason
from reconciler.model.pools import WorkloadRequest
from reconciler.placement.binding import FreeGpus
from reconciler.placement.seam import MigPlanner, MigRefusal
from reconciler.placement.units import GpuRef, GpuUnit, MigInstance

# A binding: the whole GPUs with their replica, the MIG instances (with their replica), and the GPUs it
# switched to MIG mode.
_Bound = tuple[list[tuple[int, GpuUnit]], tuple[MigInstance, ...], list[GpuRef]]


class Binder:
    """Binds workloads on the pass's free GPUs (shared with the pass, changed in place) and MIG planner.

    A request of whole GPUs only, bound without GPUs of its own, fits exactly when the free GPUs hold
    its replicas, each on one host: fewer free GPUs never hold more. So once such a shape failed, it is
    refused again without a try until a GPU may have been freed (``FreeGpus.freed`` moved on): a pool's
    thousands of pending workloads of a few shapes cost a few tries, not one each."""

    def __init__(self, free: FreeGpus, planner: MigPlanner | None) -> None:
        self.free = free
        self.planner = planner
        self.failed: dict[Hashable, int] = {}

    def bind(self, request: WorkloadRequest, own: Sequence[GpuUnit]) -> _Bound | MigRefusal | None:
        """Bind every replica at once, or nothing (None: no host holds a replica's whole GPUs). ``own``
        (its previous GPUs, still held by it) are offered first: their hosts, then those GPUs."""
        key = request.key
        whole_only = None if own or request.mig else request.asked()
        if whole_only is not None and self.failed.get(whole_only) == self.free.freed:
            return None  # failed before, and nothing was freed since
        own_refs = {u.ref for u in own}
        prefer = {u.host_uid for u in own}
        self.free.give_back(own)
        token = self.planner.checkpoint() if self.planner is not None and request.mig else None
        bound: list[tuple[int, GpuUnit]] = []
        instances: list[MigInstance] = []
        switched: list[GpuRef] = []
        failure: MigRefusal | None = None
        for replica in range(request.replicas):
            got = self.bind_replica(request, own_refs, prefer)
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
        if whole_only is not None and failure is None:
            self.failed[whole_only] = self.free.freed
        return failure

    def bind_replica(
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
            return self.place_mig(request, [], self.free.family_hosts(family))
        refusal: MigRefusal | None = None
        free = self.free.free_units()  # sorted once; each try leaves out the whole GPUs it takes
        for block in list(self.free.hosts_holding(family, need, prefer)):
            units = self.free.pick(block, family, need, own)
            self.free.take(units, request.key)  # so that the MIG planner sees them taken
            taken = {u.ref for u in units}
            whole_free = [u for u in free if u.ref not in taken]
            got = self.place_mig(request, units, [block.host_uid], whole_free)
            if not isinstance(got, MigRefusal):
                return got
            self.free.give_back(units)
            if refusal is None or refusal.reason is Reason.MIG_UNSUPPORTED:
                refusal = got
        return refusal

    def place_mig(
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
