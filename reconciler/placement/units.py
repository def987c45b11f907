"""A pool's GPUs as units of binding, and the MIG instances bound to workloads (pure).

Whole-GPU binding (``placement.binding``, ``placement.admission``) and MIG placement
(``placement.mig_admission``) share these units.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from reconciler.host_tags import family_from_model
from reconciler.inventory import Machine
from reconciler.model.gpu import GpuFamily
from reconciler.model.mig import catalogue_entry, memory_bytes_of


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
    # The unit's GpuRef, made once: binding, holders and sticky admissions look it up per GPU and pass.
    ref: GpuRef = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "ref", GpuRef(self.host_uid, self.index))

    @property
    def order(self) -> tuple[str, str, int]:
        return (self.host_name, self.host_uid, self.index)


@dataclass(frozen=True, slots=True, order=True)
class MigInstance:
    """A MIG instance bound to a workload: host, GPU index, profile and start slice, and which of the
    workload's replicas it belongs to (0 for a status file written before replicas existed)."""

    host_uid: str
    gpu: int
    profile: str
    start: int
    replica: int = 0


def gpu_units(machines: Iterable[Machine]) -> tuple[GpuUnit, ...]:
    """The GPUs of a pool's hosts, one unit per device index (0 .. gpu_count-1), in binding order.

    Whole-GPU binding and MIG share these units. Device indices follow the agent's GPU entries in the
    order reported; a GPU is MIG-capable when the agent says ``migCapable: true`` and its family and
    memory are in the MIG catalogue (docs/mig.md). A host whose agent reports GPUs of another
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
