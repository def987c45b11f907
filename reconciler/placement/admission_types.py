"""What admission of one pool takes and gives (docs/pools.md): the pool's state and the previous
admissions in, a decision per workload and the pool's capacity per family out. Pure; ``admission``
decides with them."""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from reconciler.model.conditions import Reason
from reconciler.model.gpu import GpuFamily
from reconciler.model.pools import PoolKey, WorkloadKey
from reconciler.placement.units import GpuRef, GpuUnit, MigInstance

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


def family_capacity(
    gpus: Sequence[GpuUnit], holder: Container[GpuRef], mig: Container[GpuRef]
) -> dict[str, FamilyCapacity]:
    """GPUs per family: total, admitted (held by a workload, or in MIG mode) and free."""
    out: dict[str, FamilyCapacity] = {}
    totals: dict[GpuFamily, int] = {}
    admitted: dict[GpuFamily, int] = {}
    for unit in gpus:
        totals[unit.family] = totals.get(unit.family, 0) + 1
        if unit.ref in holder or unit.ref in mig:
            admitted[unit.family] = admitted.get(unit.family, 0) + 1
    for family, total in sorted(totals.items()):
        used = admitted.get(family, 0)
        out[family] = FamilyCapacity(total=total, admitted=used, free=total - used)
    return out
