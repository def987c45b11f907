"""The free whole GPUs of one pool during an admission pass, per family and host (pure).

A replica's whole GPUs are bound on one host (a pod cannot span machines). Among the hosts that hold a
replica, best fit: the host with the fewest free GPUs of the family that still holds it, so that large
free blocks stay whole for later multi-GPU replicas; ties by host name, then uid. A workload re-bound
after a change is offered the hosts where it already holds GPUs first, and its own GPUs on them first.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from reconciler.model.gpu import GpuFamily
from reconciler.model.pools import WorkloadKey
from reconciler.placement.units import GpuRef, GpuUnit


@dataclass(frozen=True, slots=True)
class HostBlock:
    """The free whole GPUs of one family on one host."""

    host_uid: str
    host_name: str
    free: int


class FreeGpus:
    """Free whole GPUs of the pool per family and host, who holds the others, and which are in MIG mode."""

    def __init__(self, units: Sequence[GpuUnit]) -> None:
        self.units = {u.ref: u for u in units}
        self.by_family: dict[GpuFamily, dict[str, list[GpuUnit]]] = {}
        self.host_names: dict[str, str] = {}
        for unit in sorted(units, key=lambda u: u.order):
            self.by_family.setdefault(unit.family, {}).setdefault(unit.host_uid, []).append(unit)
            self.host_names[unit.host_uid] = unit.host_name
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
            self._add_free(unit)

    def _add_free(self, unit: GpuUnit) -> None:
        free = self.by_family.setdefault(unit.family, {}).setdefault(unit.host_uid, [])
        free.append(unit)
        free.sort(key=lambda u: u.index)
        self.free_n[unit.family] = self.free_n.get(unit.family, 0) + 1

    def to_mig(self, refs: Iterable[GpuRef]) -> list[GpuRef]:
        """Put GPUs in MIG mode (not free as whole GPUs); returns those that were not already."""
        changed: list[GpuRef] = []
        for ref in refs:
            unit = self.units.get(ref)
            if unit is None or ref in self.mig_mode:
                continue
            self.mig_mode.add(ref)
            changed.append(ref)
            if ref not in self.holder:
                self.by_family[unit.family][unit.host_uid].remove(unit)
                self.free_n[unit.family] -= 1
        return changed

    def undo_mig(self, refs: Iterable[GpuRef]) -> None:
        """Undo :meth:`to_mig` for these GPUs (an all-or-nothing binding that failed)."""
        for ref in refs:
            if ref in self.mig_mode:
                self.mig_mode.discard(ref)
                if ref not in self.holder:
                    self._add_free(self.units[ref])

    def hosts_holding(self, family: GpuFamily, n: int, prefer: Collection[str] = ()) -> list[HostBlock]:
        """The hosts with at least ``n`` free GPUs of ``family``, best fit first (``prefer``: hosts
        offered before the others, e.g. where a re-bound workload holds GPUs)."""
        hosts = self.by_family.get(family, {})
        blocks = [HostBlock(h, self.host_names[h], len(v)) for h, v in hosts.items() if len(v) >= n]
        return sorted(blocks, key=lambda b: (b.host_uid not in prefer, b.free, b.host_name, b.host_uid))

    def pick(
        self, block: HostBlock, family: GpuFamily, n: int, own: Collection[GpuRef] = ()
    ) -> list[GpuUnit]:
        """``n`` free GPUs of the host: the workload's own first, then by device index."""
        free = self.by_family[family][block.host_uid]
        return sorted(free, key=lambda u: (u.ref not in own, u.index))[:n]

    def largest_block(self, family: GpuFamily) -> HostBlock | None:
        """The host with the most free GPUs of ``family`` (ties by host name), or None without any."""
        blocks = self.hosts_holding(family, 1)
        return min(blocks, key=lambda b: (-b.free, b.host_name, b.host_uid)) if blocks else None

    def family_hosts(self, family: GpuFamily) -> list[str]:
        """Every host of the family by name (for MIG-only replicas: free instances need no whole GPU)."""
        return sorted(self.by_family.get(family, {}), key=lambda h: (self.host_names[h], h))

    def free_units(self) -> list[GpuUnit]:
        return sorted(
            (u for hosts in self.by_family.values() for v in hosts.values() for u in v), key=lambda u: u.order
        )
