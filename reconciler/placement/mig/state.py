"""A pool's GPUs as the MIG planner sees them, and what it answers: a plan or a refusal (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from reconciler.model.mig import MigGpuType

Placement = tuple[str, int]  # (profile name, start memory slice)
Layout = frozenset[Placement]

MIG_CONFIG_LABEL = "nvidia.com/mig.config"
ALL_DISABLED = "all-disabled"  # the GPU Operator labels MIG-capable nodes without a config with this


# --- pool state -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, order=True)
class MigInstance:
    """One GPU instance of a GPU in MIG mode; ``workload`` is ``namespace/name`` or None when free."""

    start: int
    profile: str
    workload: str | None = None


@dataclass(frozen=True, slots=True)
class PoolGpu:
    """One physical GPU of a pool, as the planner sees it.

    ``instances`` is None for a whole GPU (MIG off) and a tuple (possibly empty) in MIG mode. ``bound`` is
    the workload holding a whole GPU. ``gpu_type`` is None for a GPU that is not MIG-capable. ``host`` is
    the host's identity (its uid in plans); ``host_name``, when given, is what ties break on. ``frozen``:
    the layout stays this pass (a workload admitted in an earlier pass holds an instance of it): only
    its free instances can be bound, and it does not return to whole.
    """

    host: str
    index: int
    gpu_type: MigGpuType | None
    bound: str | None = None
    instances: tuple[MigInstance, ...] | None = None
    host_name: str = ""
    frozen: bool = False

    @property
    def mig(self) -> bool:
        return self.instances is not None

    @property
    def order(self) -> tuple[str, int]:
        return (self.host_name or self.host, self.index)


@dataclass(frozen=True, slots=True)
class MigBinding:
    """Where one instance of a workload's request went."""

    host: str
    gpu: int
    profile: str
    start: int


@dataclass(frozen=True, slots=True)
class MigPlan:
    """An admission's MIG placement and the pool's GPUs after it (same order as given)."""

    bindings: tuple[MigBinding, ...]
    gpus: tuple[PoolGpu, ...]
    switched: int  # GPUs this admission switches from whole to MIG mode
    stranded: int  # stranded memory slices over the pool's GPUs in MIG mode, after it
    changed: tuple[int, ...] = ()  # positions in ``gpus`` of the GPUs this admission changed


class MigShortfall(StrEnum):
    """Why a MIG request cannot be placed (the condition reasons of pool admission)."""

    MIG_UNSUPPORTED = "MIGUnsupported"
    NO_FITTING_LAYOUT = "NoFittingLayout"
    POOL_CAPACITY_EXCEEDED = "PoolCapacityExceeded"


@dataclass(frozen=True, slots=True)
class MigRefusal:
    reason: MigShortfall
    message: str
    needed_slices: int  # memory slices the request needs (0 for MIGUnsupported)
    free_slices: int  # memory slices it could use: free whole GPUs, free space, free instances
    # New whole GPUs of the ``growth_type`` asked for with which it fits (None: not asked, or never).
    growth: int | None = None
    # Per requested profile, up to the count asked: instances of it alone the pool could still take.
    room: tuple[tuple[str, int], ...] = ()
