"""The seam between admission and a pool's MIG layout planner (``reconciler.placement.mig``): what
admission asks of the planner, and what the planner answers. Kept apart so that the order search's
adapter (``placement.admission_trial``) and the planner depend on it, not on the admission pass."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from reconciler.model.conditions import Reason
from reconciler.model.gpu import GpuFamily
from reconciler.model.pools import MigRequest, WorkloadKey
from reconciler.placement.units import GpuRef, GpuUnit, MigInstance

__all__ = ["MigPlacement", "MigPlanner", "MigRefusal", "MigRoom"]


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
        self,
        key: WorkloadKey,
        requests: Sequence[MigRequest],
        whole_free: Sequence[GpuUnit],
        hosts: Sequence[str] | None = None,
    ) -> MigPlacement | MigRefusal:
        """Bind every requested instance at once, switching GPUs of ``whole_free`` to MIG mode if needed.
        ``hosts`` (uids, in order of preference): all the instances on ONE of them (one replica)."""
        ...

    def checkpoint(self) -> object:
        """The planner's state, to :meth:`rollback` to when a later replica of the workload fails."""
        ...

    def rollback(self, state: object) -> None:
        """Back to a :meth:`checkpoint` (every placement since is undone)."""
        ...

    def mig_mode(self) -> frozenset[GpuRef]:
        """The GPUs that stay in MIG mode were the pass to end now: not available as whole GPUs. Asked
        before binding (a layout nobody holds any more may be offered whole) and at the end (capacity)."""
        ...


@runtime_checkable
class MigRoom(Protocol):
    """A MIG planner that can say how much room its GPUs in MIG mode have left: memory slices a new
    request could still use, per family and host uid. It bounds the search for which new workloads to
    admit (``placement.order``); without it MIG requests are bounded by their number only."""

    def free_slices(self) -> Mapping[tuple[GpuFamily, str], int]: ...
