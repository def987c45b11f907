"""The free whole GPUs of one pool during an admission pass, per family and host (pure).

A replica's whole GPUs are bound on one host (a pod cannot span machines). Among the hosts that hold a
replica, best fit: the host with the fewest free GPUs of the family that still holds it, so that large
free blocks stay whole for later multi-GPU replicas; ties by host name, then uid. A workload re-bound
after a change is offered the hosts where it already holds GPUs first, and its own GPUs on them first.
"""

from __future__ import annotations

import bisect
from bisect import insort
from collections.abc import Collection, Iterable, Iterator, Sequence
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
    """Free whole GPUs of the pool per family and host, who holds the others, and which are in MIG mode.

    Hosts are also kept in buckets by their number of free GPUs of the family (each bucket sorted by host
    name, then uid), so that the best-fit host is found without looking at every host. ``freed`` counts
    the changes that may have freed a GPU (one given back, taken out of MIG mode, a restore): while it
    stays the same, the free GPUs only shrink."""

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
        self.freed = 0
        self.buckets: dict[GpuFamily, dict[int, list[tuple[str, str]]]] = {}
        for family, hosts in self.by_family.items():
            self.free_n[family] = sum(len(v) for v in hosts.values())
            per = self.buckets.setdefault(family, {})
            for host, free in hosts.items():
                per.setdefault(len(free), []).append((self.host_names[host], host))
            for bucket in per.values():
                bucket.sort()

    def snapshot(self) -> object:
        """The free and held GPUs now, to :meth:`restore` (a search that tried other choices)."""
        by_family = {f: {h: list(v) for h, v in hosts.items()} for f, hosts in self.by_family.items()}
        buckets = {f: {n: list(v) for n, v in per.items()} for f, per in self.buckets.items()}
        return by_family, buckets, dict(self.holder), set(self.mig_mode), dict(self.free_n)

    def restore(self, snapshot: object) -> None:
        assert isinstance(snapshot, tuple)
        by_family, buckets, holder, mig_mode, free_n = snapshot
        self.by_family = {f: {h: list(v) for h, v in hosts.items()} for f, hosts in by_family.items()}
        self.buckets = {f: {n: list(v) for n, v in per.items()} for f, per in buckets.items()}
        self.holder, self.mig_mode, self.free_n = dict(holder), set(mig_mode), dict(free_n)
        self.freed += 1

    def count(self, family: GpuFamily) -> int:
        return self.free_n.get(family, 0)

    def _moved(self, family: GpuFamily, host: str, before: int, after: int) -> None:
        entry = (self.host_names[host], host)
        per = self.buckets.setdefault(family, {})
        old = per[before]
        del old[bisect.bisect_left(old, entry)]
        if not old:
            del per[before]
        insort(per.setdefault(after, []), entry)

    def take(self, units: Iterable[GpuUnit], key: WorkloadKey) -> None:
        for unit in units:
            free = self.by_family[unit.family][unit.host_uid]
            free.remove(unit)
            self._moved(unit.family, unit.host_uid, len(free) + 1, len(free))
            self.free_n[unit.family] -= 1
            self.holder[unit.ref] = key

    def give_back(self, units: Iterable[GpuUnit]) -> None:
        for unit in units:
            if self.holder.pop(unit.ref, None) is None:
                continue
            self._add_free(unit)

    def _add_free(self, unit: GpuUnit) -> None:
        self.freed += 1
        free = self.by_family[unit.family][unit.host_uid]
        insort(free, unit, key=lambda u: u.index)
        self._moved(unit.family, unit.host_uid, len(free) - 1, len(free))
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
                free = self.by_family[unit.family][unit.host_uid]
                free.remove(unit)
                self._moved(unit.family, unit.host_uid, len(free) + 1, len(free))
                self.free_n[unit.family] -= 1
        return changed

    def undo_mig(self, refs: Iterable[GpuRef]) -> None:
        """Undo :meth:`to_mig` for these GPUs (an all-or-nothing binding that failed)."""
        for ref in refs:
            if ref in self.mig_mode:
                self.mig_mode.discard(ref)
                if ref not in self.holder:
                    self._add_free(self.units[ref])

    def hosts_holding(self, family: GpuFamily, n: int, prefer: Collection[str] = ()) -> Iterator[HostBlock]:
        """The hosts with at least ``n`` free GPUs of ``family``, best fit first (``prefer``: hosts
        offered before the others, e.g. where a re-bound workload holds GPUs), lazily."""
        hosts = self.by_family.get(family, {})
        preferred = sorted(
            (HostBlock(h, self.host_names[h], len(hosts[h])) for h in prefer if h in hosts),
            key=lambda b: (b.free, b.host_name, b.host_uid),
        )
        yield from (b for b in preferred if b.free >= n)
        per = self.buckets.get(family, {})
        for size in sorted(c for c in per if c >= max(n, 0)):
            for name, uid in list(per[size]):
                if uid not in prefer:
                    yield HostBlock(uid, name, size)

    def pick(
        self, block: HostBlock, family: GpuFamily, n: int, own: Collection[GpuRef] = ()
    ) -> list[GpuUnit]:
        """``n`` free GPUs of the host: the workload's own first, then by device index."""
        free = self.by_family[family][block.host_uid]
        return sorted(free, key=lambda u: (u.ref not in own, u.index))[:n]

    def largest_block(self, family: GpuFamily) -> HostBlock | None:
        """The host with the most free GPUs of ``family`` (ties by host name), or None without any."""
        per = self.buckets.get(family, {})
        most = max((c for c in per if c > 0), default=None)
        if most is None:
            return None
        name, uid = per[most][0]
        return HostBlock(uid, name, most)

    def room(self, family: GpuFamily, n: int) -> int:
        """How many replicas of ``n`` GPUs of ``family`` the free GPUs hold, each on one host."""
        return sum(len(hosts) * (c // n) for c, hosts in self.buckets.get(family, {}).items()) if n > 0 else 0

    def family_hosts(self, family: GpuFamily) -> list[str]:
        """Every host of the family by name (for MIG-only replicas: free instances need no whole GPU)."""
        return sorted(self.by_family.get(family, {}), key=lambda h: (self.host_names[h], h))

    def free_units(self) -> list[GpuUnit]:
        return sorted(
            (u for hosts in self.by_family.values() for v in hosts.values() for u in v), key=lambda u: u.order
        )
