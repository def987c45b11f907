"""Why a workload's whole GPUs do not fit in its pool, and what would unblock it (pure).

``PoolCapacityExceeded``: fewer free GPUs of a family in the pool than all its replicas need, with who
would free enough or how much the pool must grow. ``NoFittingLayout``: enough free in total, but no host
holds a replica (a pod's GPUs are on one host); the message names the largest free block and its host.
When no host of the pool has as many GPUs as a replica needs, the message says so whatever is free: the
pool needs a bigger host, not more GPUs.
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable, Sequence

from reconciler.model.conditions import Reason
from reconciler.model.gpu import GpuFamily
from reconciler.model.pools import WorkloadKey, WorkloadRequest
from reconciler.placement.binding import FreeGpus
from reconciler.placement.units import GpuUnit


def _label(key: WorkloadKey) -> str:
    return f"{key[0]}/{key[1]}"


def _plural(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


class Shortfall:
    """The pending messages of one pool at the end of a pass (``free``: as the pass leaves it).

    A message names no workload but those that would free GPUs, and leaves the asking one out of them: so
    the requests of one shape from workloads that hold nothing in the pool get one message, worked out
    once (a pool's thousands of pending workloads are a few shapes)."""

    def __init__(self, pool: str, units: Sequence[GpuUnit], free: FreeGpus) -> None:
        self.pool = pool
        self.free = free
        self.totals: dict[GpuFamily, int] = {}
        per_host: dict[tuple[GpuFamily, str, str], int] = {}
        for unit in units:
            self.totals[unit.family] = self.totals.get(unit.family, 0) + 1
            host = (unit.family, unit.host_name, unit.host_uid)
            per_host[host] = per_host.get(host, 0) + 1
        # The biggest host of each family (most GPUs, then name): what one replica can ever get.
        self.biggest: dict[GpuFamily, tuple[int, str]] = {}
        for (family, name, _), n in sorted(per_host.items()):
            if n > self.biggest.get(family, (0, ""))[0]:
                self.biggest[family] = (n, name)
        self._holds: dict[GpuFamily, list[tuple[int, WorkloadKey]]] | None = None
        self._held: dict[GpuFamily, int] = {}
        self._by_key: dict[GpuFamily, dict[WorkloadKey, int]] = {}
        # Per family: each holder's whole GPUs per host, the free GPUs per host, and the replicas of a
        # size the free GPUs hold (counted once: every removal changes only the hosts it frees).
        self._on_hosts: dict[GpuFamily, dict[WorkloadKey, dict[str, int]]] = {}
        self._free_hosts: dict[GpuFamily, dict[str, int]] = {}
        self._room: dict[tuple[GpuFamily, int], int] = {}
        self._holders: set[WorkloadKey] = set(free.holder.values())
        self._explained: dict[Hashable, tuple[Reason, str]] = {}

    def explain(self, request: WorkloadRequest) -> tuple[Reason, str]:
        """The reason and message of a workload whose whole GPUs could not be bound."""
        if request.key in self._holders:
            return self._explain(request)
        shape = request.asked()
        known = self._explained.get(shape)
        if known is None:
            known = self._explained[shape] = self._explain(request)
        return known

    def _explain(self, request: WorkloadRequest) -> tuple[Reason, str]:
        families = sorted({f for f, n in request.whole.items() if n > 0} | {m.family for m in request.mig})
        if len(families) > 1:
            return Reason.NO_FITTING_LAYOUT, (
                f"asks for GPUs of {' and '.join(families)} in one replica; a host of pool {self.pool} has "
                "GPUs of one family: split the request into workloads of one family each"
            )
        capacity = [self._capacity(request, f, n) for f, n in sorted(request.whole.items()) if n > 0]
        short = [m for m in capacity if m is not None]
        if short:
            return Reason.POOL_CAPACITY_EXCEEDED, "; ".join(short)
        for family, n in sorted(request.whole.items()):
            if n > 0:
                return Reason.NO_FITTING_LAYOUT, self._no_host(request, family, n)
        return Reason.POOL_CAPACITY_EXCEEDED, f"does not fit in pool {self.pool}"

    def _too_small(self, family: GpuFamily, per: int) -> str:
        """A note when no host of the pool has ``per`` GPUs of the family at all."""
        size, name = self.biggest.get(family, (0, ""))
        if size >= per or size == 0:
            return ""
        return (
            f"; no host of pool {self.pool} has {per} {family} GPUs (the largest has {size}: {name}): "
            f"frees when the pool grows by a host with {per}"
        )

    def _capacity(self, request: WorkloadRequest, family: GpuFamily, per: int) -> str | None:
        pool = self.pool
        need = per * request.replicas
        free = self.free.count(family)
        if free >= need:
            return None
        total = self.totals.get(family, 0)
        shape = f" ({request.replicas} replicas of {per})" if request.replicas > 1 else ""
        if total == 0:
            return (
                f"needs {_plural(need, f'{family} GPU')}{shape}, pool {pool} has none; frees when the "
                f"pool grows by {need} (add {family} to its spec.gpus)"
            )
        head = (
            f"needs {_plural(need, f'{family} GPU')}{shape}, {free} free in pool {pool} "
            f"({total} total, {total - free} admitted)"
        )
        too_small = self._too_small(family, per)
        if too_small:
            return head + too_small
        short = need - free
        unblock = self._who_frees(request, family, short)
        grow = f"the pool grows by {short}"
        return head + (f"; frees when {unblock}, or {grow}" if unblock else f"; frees when {grow}")

    def _no_host(self, request: WorkloadRequest, family: GpuFamily, per: int) -> str:
        free = self.free.count(family)
        block = self.free.largest_block(family)
        most = f"at most {block.free} on one host ({block.host_name})" if block else "none on one host"
        replicas = f" ({request.replicas} replicas)" if request.replicas > 1 else ""
        room = self.free.room(family, per)
        fits = f", room for {room} of {request.replicas} replicas" if request.replicas > 1 and room else ""
        head = (
            f"needs {_plural(per, f'{family} GPU')} on one host per replica{replicas}; {free} free in pool "
            f"{self.pool}, {most}{fits}"
        )
        return head + self._too_small(family, per)

    def _who_frees(self, request: WorkloadRequest, family: GpuFamily, short: int) -> str | None:
        """The fewest holders whose removal would let every replica be bound: the smallest single
        holder that is enough, else the largest first. Freed GPUs count on their own hosts (a replica's
        GPUs are on one host), so a holder whose GPUs are spread over hosts that stay too small for a
        replica is never named; None when no removal would do."""
        if self._holds is None:  # who holds what, counted once per pass and only when needed
            counts: dict[GpuFamily, dict[WorkloadKey, int]] = {}
            for ref, key in self.free.holder.items():
                if ref not in self.free.mig_mode:
                    unit = self.free.units[ref]
                    per = counts.setdefault(unit.family, {})
                    per[key] = per.get(key, 0) + 1
                    hosts = self._on_hosts.setdefault(unit.family, {}).setdefault(key, {})
                    hosts[unit.host_uid] = hosts.get(unit.host_uid, 0) + 1
            self._holds = {f: sorted((n, k) for k, n in per.items()) for f, per in counts.items()}
            self._held = {f: sum(per.values()) for f, per in counts.items()}
            self._by_key = counts
        me = request.key
        holds = self._holds.get(family, [])
        mine = self._by_key.get(family, {}).get(me, 0)
        if self._held.get(family, 0) - mine < short:
            return None
        at = bisect.bisect_left(holds, (short, ("", "")))
        for _, key in holds[at:]:
            if key != me and self._fits_without(request, family, {key}):
                return f"{_label(key)} is removed"
        chosen: list[WorkloadKey] = []
        got = 0
        for n, key in sorted(holds, key=lambda t: (-t[0], t[1])):
            if key == me:
                continue
            chosen.append(key)
            got += n
            if got >= short and self._fits_without(request, family, set(chosen)):
                for extra in list(chosen):  # drop any holder the others do without
                    if len(chosen) > 1 and self._fits_without(request, family, set(chosen) - {extra}):
                        chosen.remove(extra)
                names = [_label(k) for k in chosen]
                return (
                    names[0] + " is removed"
                    if len(names) == 1
                    else (f"{', '.join(names[:-1])} and {names[-1]} are removed")
                )
        return None

    def _fits_without(self, request: WorkloadRequest, family: GpuFamily, removed: set[WorkloadKey]) -> bool:
        """Whether every replica's GPUs of ``family`` find one host once ``removed`` free theirs."""
        per = request.whole.get(family, 0)
        if per <= 0:
            return True
        free = self._free_hosts.get(family)
        if free is None:
            free = {host: len(units) for host, units in self.free.by_family.get(family, {}).items()}
            self._free_hosts[family] = free
        room = self._room.get((family, per))
        if room is None:
            room = self._room[family, per] = sum(n // per for n in free.values())
        freed: dict[str, int] = {}
        on_hosts = self._on_hosts.get(family, {})
        for key in removed:
            for host, n in on_hosts.get(key, {}).items():
                freed[host] = freed.get(host, 0) + n
        for host, n in freed.items():
            before = free.get(host, 0)
            room += (before + n) // per - before // per
        return room >= request.replicas
