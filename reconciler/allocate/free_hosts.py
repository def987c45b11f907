"""The free hosts of one pass, grouped into pools of interchangeable hosts and taken in order (pure).

A pool holds hosts alike but for their names; a stream orders the hosts of a list of pools the way
the engine takes them (fewest GPUs, then host key); a trial takes hosts tentatively until committed.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from reconciler.inventory import NAME_UID, Machine, Role, names_ascending
from reconciler.model.gpu import GpuFamily


class FreeHost(NamedTuple):
    """A free host as the pools offer it; tuples of these sort fewest GPUs, then by host key."""

    gpus: int
    rank: int
    name: str
    uid: str
    pool: int


_free_host = tuple.__new__  # a FreeHost from its fields without NamedTuple's Python-level __new__

# --- free host pools -----------------------------------------------------------------------------


@dataclass(slots=True)
class _Pool:
    """Free hosts that are interchangeable but for their names; always consumed name-first."""

    idx: int
    arch: str
    role: Role
    tagged: bool
    family: GpuFamily | None
    count: int
    groups: Mapping[str, str]
    hosts: list[Machine]  # by name, uid
    rank: int  # 1 when the pool's hosts carry resource groups (they come after those that carry none)
    order: list[int]  # each host's place among all free hosts by name (:class:`FreeHosts`)
    head: int = 0
    streams: list[Stream] = field(default_factory=list)  # the streams this pool is part of


class Stream:
    """The hosts of a fixed list of pools in the order they are taken: fewest GPUs, then host key.

    Built once per list (a merge of the pools' sorted host lists, one segment per GPU count). A pool is
    only consumed from its head, so a host once taken stays taken until :meth:`FreeHosts.restore`:
    each segment keeps where its first host not taken is, and the first n free hosts cost about n
    steps instead of a merge over every pool (a fleet has hundreds of pools per architecture).
    """

    __slots__ = (
        "counts",
        "ends",
        "free",
        "index",
        "pool_at",
        "pools",
        "pos_at",
        "positions",
        "segment_of",
        "stale",
        "starts",
    )

    def __init__(self, pools: Sequence[_Pool], free: FreeHosts) -> None:
        self.pools = list(pools)
        self.index = free.pools  # every pool by its idx
        by_count: dict[int, list[_Pool]] = {}
        for p in self.pools:
            by_count.setdefault(p.count, []).append(p)
        self.counts = sorted(by_count)
        self.segment_of = {p.idx: n for n, c in enumerate(self.counts) for p in by_count[c]}
        self.pool_at, self.pos_at = array("i"), array("i")  # (pool idx, position in its pool), in order
        self.ends: list[int] = []
        for c in self.counts:
            for rank in (0, 1):  # hosts without resource groups first, each part by name (``free.order``)
                order = sorted(g for p in by_count[c] if p.rank == rank for g in p.order)
                self.pool_at.extend(free.pool_of[g] for g in order)
                self.pos_at.extend(free.position_of[g] for g in order)
            self.ends.append(len(self.pool_at))
        # Where each pool's hosts are in the order, so that a restore finds the starts again directly.
        self.positions = {p.idx: array("i", bytes(4 * len(p.hosts))) for p in self.pools}
        for k, (idx, i) in enumerate(zip(self.pool_at, self.pos_at, strict=True)):
            self.positions[idx][i] = k
        self.starts: list[int] = []
        self.free: list[int] = []  # hosts not taken, per segment
        self.stale = True
        self.reset()
        for p in self.pools:
            p.streams.append(self)

    def reset(self) -> None:
        """Every segment's start and free count from the pools' heads, when they may have moved back."""
        if not self.stale:
            return
        self.starts, self.free = self.ends[:], [0] * len(self.counts)
        for p in self.pools:
            seg = self.segment_of[p.idx]
            self.free[seg] += len(p.hosts) - p.head
            if p.head < len(p.hosts):
                self.starts[seg] = min(self.starts[seg], self.positions[p.idx][p.head])
        self.stale = False

    def _advance(self, seg: int) -> int:
        """The segment's first host not taken (moves its start there)."""
        k, end = self.starts[seg], self.ends[seg]
        pool_at, pos_at, index = self.pool_at, self.pos_at, self.index
        while k < end and pos_at[k] < index[pool_at[k]].head:
            k += 1
        self.starts[seg] = k
        return k

    def available(self, used: Mapping[int, int]) -> dict[int, int]:
        """Hosts free per GPU count, less those a trial has ``used`` (pool idx -> hosts)."""
        self.reset()
        free = self.free[:]
        for idx, m in used.items():
            seg = self.segment_of.get(idx)
            if seg is not None:
                free[seg] -= m
        return {c: n for c, n in zip(self.counts, free, strict=True) if n > 0}

    def first(self, n: int, used: Mapping[int, int], count: int | None = None) -> list[FreeHost]:
        """The first ``n`` hosts not taken nor ``used`` by a trial (of one GPU ``count``, if given)."""
        out: list[FreeHost] = []
        if n <= 0:
            return out
        self.reset()
        if count is None:
            segments: Iterable[int] = range(len(self.counts))
        else:
            seg = self.segment_of_count(count)
            segments = () if seg is None else (seg,)
        pool_at, pos_at, index, taken = self.pool_at, self.pos_at, self.index, used.get
        for seg in segments:
            k, end = self._advance(seg), self.ends[seg]
            while k < end:
                p, i = index[pool_at[k]], pos_at[k]
                k += 1
                if i >= p.head + taken(p.idx, 0):
                    m = p.hosts[i]
                    out.append(_free_host(FreeHost, (p.count, p.rank, m.name, m.uid, p.idx)))
                    if len(out) == n:
                        return out
        return out

    def segment_of_count(self, count: int) -> int | None:
        seg = bisect_left(self.counts, count)
        return seg if seg < len(self.counts) and self.counts[seg] == count else None


class Trial:
    """A tentative selection over the pools: nothing is taken until ``commit``."""

    def __init__(self) -> None:
        self.used: dict[int, int] = {}

    def avail(self, pool: _Pool) -> int:
        return len(pool.hosts) - pool.head - self.used.get(pool.idx, 0)

    def peek(self, stream: Stream, n: int, count: int | None = None) -> list[FreeHost]:
        """The first ``n`` free hosts of ``stream`` by GPU count, then host key (of one ``count``)."""
        return stream.first(n, self.used, count)

    def take(self, stream: Stream, n: int, count: int | None = None) -> list[FreeHost]:
        chosen = stream.first(n, self.used, count)
        for free in chosen:
            self.used[free.pool] = self.used.get(free.pool, 0) + 1
        return chosen


GroupsKey = tuple[tuple[str, str], ...]


def _groups_key(groups: Mapping[str, str]) -> GroupsKey:
    return tuple(sorted(groups.items())) if groups else ()


def _pool_order(key: tuple[object, ...]) -> str:
    """The order of the pools (any fixed order would do; this one is the engine's since its start)."""
    arch, worker, *rest = key
    return repr((arch, str(Role.WORKER if worker else Role.CONTROL_PLANE), *rest))


class FreeHosts:
    def __init__(self, machines: Iterable[Machine]) -> None:
        """``machines``: the free hosts, best in name order (as discovery lists them: not sorted again)."""
        ordered = machines if isinstance(machines, list) else list(machines)
        if not names_ascending(ordered):
            ordered = sorted(ordered, key=NAME_UID)
        keyed: dict[tuple[object, ...], list[int]] = {}  # pool key -> the hosts' places in ``ordered``
        worker = Role.WORKER
        for n, m in enumerate(ordered):
            groups = m.resource_groups
            key = (
                m.arch,
                m.role is worker,
                m.worker_tagged,
                m.gpu_family or "",
                m.gpu_count,
                (tuple(groups.items()) if len(groups) == 1 else _groups_key(groups)) if groups else (),
            )
            found = keyed.get(key)
            if found is None:
                keyed[key] = [n]
            else:
                found.append(n)
        # Each host's pool and position in it, by its place in name order (the streams' order).
        self.pool_of = array("i", bytes(4 * len(ordered)))
        self.position_of = array("i", bytes(4 * len(ordered)))
        self.pools: list[_Pool] = []
        for pool_key in sorted(keyed, key=_pool_order):
            places = keyed[pool_key]
            first = ordered[places[0]]
            idx = len(self.pools)
            for i, n in enumerate(places):
                self.pool_of[n], self.position_of[n] = idx, i
            self.pools.append(
                _Pool(
                    idx=idx,
                    arch=first.arch,
                    role=first.role,
                    tagged=first.worker_tagged,
                    family=first.gpu_family if first.gpu_count > 0 else None,
                    count=first.gpu_count,
                    groups=dict(first.resource_groups),
                    hosts=[ordered[n] for n in places],
                    rank=1 if first.resource_groups else 0,
                    order=places,
                )
            )
        self._matching: dict[tuple[str, GroupsKey], list[_Pool]] = {}
        self._in_groups: dict[GroupsKey, dict[str, list[_Pool]]] = {}
        # Streams over sub-lists of ``matching`` (membership never changes, only heads move), made once.
        self._streams: dict[tuple[object, ...], Stream] = {}
        # No host at all, for a cluster's own hosts offered alone (:func:`_holds`); made once.
        self._nothing: FreeHosts | None = None

    @property
    def nothing(self) -> FreeHosts:
        if self._nothing is None:
            self._nothing = FreeHosts(())
        return self._nothing

    def matching(self, arch: str, groups: Mapping[str, str]) -> list[_Pool]:
        key = (arch, _groups_key(groups))
        found = self._matching.get(key)
        if found is None:
            found = [
                p
                for p in self.pools
                if p.arch == arch and all(p.groups.get(k) == v for k, v in groups.items())
            ]
            self._matching[key] = found
        return found

    def _stream(self, key: tuple[object, ...], pools: Callable[[], list[_Pool]]) -> Stream:
        found = self._streams.get(key)
        if found is None:
            found = self._streams[key] = Stream(pools(), self)
        return found

    def workers_of(self, arch: str, groups: Mapping[str, str], family: GpuFamily) -> Stream:
        """The GPU worker pools of one family among :meth:`matching`."""
        return self._stream(
            ("workers", arch, _groups_key(groups), family),
            lambda: [p for p in self.matching(arch, groups) if p.role is Role.WORKER and p.family == family],
        )

    def control_planes(self, arch: str, groups: Mapping[str, str]) -> Stream:
        """The control-plane pools among :meth:`matching`."""
        return self._stream(
            ("control planes", arch, _groups_key(groups)),
            lambda: [p for p in self.matching(arch, groups) if p.role is Role.CONTROL_PLANE],
        )

    def fill_stage(
        self, arch: str, groups: Mapping[str, str], families: Collection[GpuFamily], stage: int
    ) -> Stream:
        """Stage ``stage`` of :func:`_fill_stages` of :meth:`matching` for a request of ``families``."""
        return self._stream(
            ("fill", arch, _groups_key(groups), tuple(sorted(families)), stage),
            lambda: _fill_stages(self.matching(arch, groups), frozenset(families))[stage],
        )

    def arches(self, groups: Mapping[str, str]) -> list[str]:
        """Architectures with at least one free host in ``groups``, in name order."""
        key = _groups_key(groups)
        by_arch = self._in_groups.get(key)
        if by_arch is None:
            found: dict[str, list[_Pool]] = {}
            for p in self.pools:
                if all(p.groups.get(k) == v for k, v in groups.items()):
                    found.setdefault(p.arch, []).append(p)
            by_arch = self._in_groups[key] = dict(sorted(found.items()))
        out: list[str] = []
        for arch, pools in by_arch.items():
            for p in pools:
                if p.head < len(p.hosts):
                    out.append(arch)
                    break
        return out

    def commit(self, trial: Trial) -> None:
        for idx, m in trial.used.items():
            pool = self.pools[idx]
            pool.head += m
            for stream in pool.streams:
                stream.free[stream.segment_of[idx]] -= m

    def heads(self) -> tuple[int, ...]:
        """What is taken so far (for a search to come back to with :meth:`restore`)."""
        return tuple(p.head for p in self.pools)

    def restore(self, heads: Sequence[int]) -> None:
        moved = False
        for pool, head in zip(self.pools, heads, strict=True):
            moved = moved or head != pool.head
            pool.head = head
        if moved:  # each stream finds its starts again when next used
            for stream in self._streams.values():
                stream.stale = True


def _fill_stages(pools: Sequence[_Pool], families: Collection[GpuFamily]) -> list[list[_Pool]]:
    """The seed's fill order for the minimum: worker-tagged, then requested families, then any GPUs."""
    workers = [p for p in pools if p.role is Role.WORKER]
    return [
        [p for p in workers if p.tagged],
        [p for p in workers if not p.tagged and p.family is not None and p.family in families],
        [p for p in workers if not p.tagged and p.family is not None and p.family not in families],
    ]


FILL_STAGES = 3  # the stages of :func:`_fill_stages`
