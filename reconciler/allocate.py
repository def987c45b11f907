"""The allocation engine: which machines each dedicated MLPlatform and each ComputePool gets, or exactly
why it cannot be placed (pure).

Every rule of docs/allocation.md lives in this file. A ComputePool is placed by the same rules, as a
dedicated platform requesting the pool's ``gpus`` (docs/pools.md): no ``gpuLimits`` on the pool
itself, and its own minimum-worker precedence (:func:`reconciler.resolve.pool_min_workers`). The engine
is a pure function of the desired state, the machine inventory and the clusters that already exist; it
never does I/O or reads a clock.

Decisions that the design leaves open, written down here once:

- Platforms and pools share one inventory. Those that already have a cluster are handled first (sticky),
  in (namespace, name) order; then new ones by ``spec.priority`` (high first; a pool has priority 0).
  Within one priority the order (namespace, then name, then kind, MLPlatform before ComputePool) is a
  tie-break, not a reason to leave capacity unused: when first-come leaves some out, a bounded search
  (:mod:`reconciler.placement.platform_order`) looks for an order placing strictly more; an equal count
  keeps first-come exactly (:func:`_place_new`).
  Deterministic: the budget counts attempts, not time. Hosts that a scale-down will release are *not*
  free for other platforms in the same pass: they still belong to their cluster until the change is
  applied.
- Architecture: every architecture that has a free matching host is tried; the winner leaves the fewest
  surplus GPUs, then uses the fewest hosts, then comes first by name (``amd64`` before ``arm64``).
- GPU workers per family are chosen exactly (bounded knapsack over the GPU counts on offer): fewest
  surplus GPUs, then fewest hosts, then the lexicographically smallest sorted list of (host name, uid).
- Control-plane hosts are taken fewest GPUs first (a control-plane-tagged GPU host is the last resort),
  then by name. GPUs on control-plane hosts are not counted in an allocation's ``gpus``; GPUs on workers,
  including workers added only to reach the minimum, are.
- ``controlPlaneDefaults.workerNodeEligible`` does not count control-plane hosts as workers for the
  minimum: the seed counts worker nodes only.
- A pool whose ``mode`` differs from the mode its cluster was created with (the cluster's
  ``palette.ai/pool-mode`` label, else the mode the caller reports from the status branch) is rejected
  ``InvalidSpec`` and its cluster kept: a pool's mode is fixed once its cluster exists.
- Nothing running moves without a change of its own: a cluster whose own hosts, offered alone, are all
  kept by the rules keeps exactly them (:func:`_holds`); free hosts are only looked at when its needs
  are no longer met exactly by what it has.
- A platform whose cluster is being deleted (Palette state ``Deleting``, e.g. the first half of a
  replace) keeps that cluster's hosts as they are until it is gone; then it is placed like a new one.
- An existing cluster's host that the inventory no longer lists is kept and counts towards node counts
  (with no GPUs): the engine cannot judge it, and removing it would be a guess.
"""

from __future__ import annotations

import itertools
from array import array
from bisect import bisect_left
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from operator import attrgetter
from typing import NamedTuple

from reconciler import resolve
from reconciler.inventory import Inventory, Machine, Role
from reconciler.manifests.pool_rules import pool_mode_change
from reconciler.model.conditions import Reason
from reconciler.model.desired import DesiredState, PlatformKey
from reconciler.model.gpu import GpuFamily
from reconciler.model.observed import ClusterState, ManagedCluster
from reconciler.model.pools import POOL_KIND, POOL_MODE_LABEL, PoolKey, cluster_kind
from reconciler.model.resources import ComputePool, MLPlatform
from reconciler.placement import platform_order

ALLOW_REPLACE_ANNOTATION = "palette.ai/allow-replace"
DELETING_STATE = ClusterState.DELETING  # Palette's status.state of a cluster on its way out

_INF = 1 << 60


@dataclass(frozen=True, slots=True)
class Allocation:
    """The hosts of one platform's cluster. Host lists are sorted uids; ``gpus`` counts worker GPUs.

    ``replaces`` is True when the allocation is a new cluster that replaces the existing one
    (a different architecture, allowed by the ``palette.ai/allow-replace`` annotation).
    """

    control_plane: tuple[str, ...]
    workers: tuple[str, ...]
    gpus: dict[str, int]
    arch: str
    replaces: bool = False

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(sorted(self.control_plane + self.workers))


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why a platform cannot be placed, in the condition vocabulary and in words a person can act on."""

    reason: Reason
    message: str


Decision = Allocation | Rejection


@dataclass(frozen=True, slots=True)
class Requirements:
    """What one platform needs, resolved from its spec, its profiles and their precedence rules."""

    control_plane: int
    gpus: dict[GpuFamily, int]  # positive requests only, canonical family -> count
    min_workers: int
    groups: Mapping[str, str] = field(default_factory=dict)

    @property
    def requested_gpus(self) -> int:
        return sum(self.gpus.values())


def allow_replace(resource: resolve.Clustered) -> bool:
    return resource.metadata.annotations.get(ALLOW_REPLACE_ANNOTATION, "").strip().lower() == "true"


def requirements(desired: DesiredState, platform: MLPlatform) -> Requirements | Rejection:
    """Resolve a dedicated platform's needs (the rules themselves are in :mod:`reconciler.resolve`)."""
    ns = platform.metadata.namespace
    profile = resolve.compute_profile(desired, platform)
    if profile is None:
        name = resolve.compute_profile_name(platform, desired.project(ns)) or "(from the Project)"
        return Rejection(Reason.REFERENCE_NOT_FOUND, f"ComputeProfile {name} not found in namespace {ns}")
    gpus = resolve.requested_gpus(platform)
    if isinstance(gpus, resolve.Invalid):
        return Rejection(Reason.INVALID_SPEC, gpus.message)
    breaches = resolve.limit_breaches(platform, profile)
    if breaches:
        return Rejection(Reason.GPU_LIMIT_EXCEEDED, breaches[0].message(profile))
    min_workers = resolve.min_workers(platform, profile, resolve.workload_profile(desired, platform))
    if isinstance(min_workers, resolve.Invalid):
        return Rejection(Reason.INVALID_SPEC, min_workers.message)
    return Requirements(
        control_plane=profile.spec.control_plane_defaults.node_count,
        gpus=gpus,
        min_workers=min_workers,
        groups=dict(sorted(platform.spec.resource_groups.items())),
    )


def pool_requirements(desired: DesiredState, pool: ComputePool) -> Requirements | Rejection:
    """A pool's needs: a dedicated platform requesting the pool's ``gpus``, without limits (they apply to
    the pool's workloads), with the pool's minimum-worker precedence."""
    ns = pool.metadata.namespace
    profile = resolve.compute_profile(desired, pool)
    if profile is None:
        name = resolve.compute_profile_name(pool, desired.project(ns)) or "(from the Project)"
        return Rejection(Reason.REFERENCE_NOT_FOUND, f"ComputeProfile {name} not found in namespace {ns}")
    gpus = resolve.requested_gpus(pool)
    if isinstance(gpus, resolve.Invalid):
        return Rejection(Reason.INVALID_SPEC, gpus.message)
    min_workers = resolve.pool_min_workers(pool, profile, resolve.workload_profile(desired, pool))
    if isinstance(min_workers, resolve.Invalid):
        return Rejection(Reason.INVALID_SPEC, min_workers.message)
    return Requirements(
        control_plane=profile.spec.control_plane_defaults.node_count,
        gpus=gpus,
        min_workers=min_workers,
        groups=dict(sorted(pool.spec.resource_groups.items())),
    )


def previous_pool_mode(cluster: ManagedCluster, reported: Mapping[PoolKey, str]) -> str | None:
    """The mode a pool's cluster was made for: its ``palette.ai/pool-mode`` label, else what the caller
    reports (the status branch), else unknown (None)."""
    return cluster.labels.get(POOL_MODE_LABEL) or reported.get(cluster.key)


# --- exact GPU worker choice ---------------------------------------------------------------------


def optimal_count_vectors(available: Mapping[int, int], request: int) -> list[dict[int, int]]:
    """Every multiset of GPU counts (count -> hosts) with the fewest surplus GPUs, then fewest hosts.

    ``available`` maps a per-host GPU count to how many such hosts are free. Returns [] when the
    request cannot be met. A bounded knapsack over counts: any optimal set sums to less than
    ``request + max count`` (else a host could be dropped), so the tables stay small. No sum below
    that bound takes more than ``bound // count`` hosts of a count, so availability is capped there
    and the answer is remembered for the capped shape (a large fleet asks the same few questions).
    """
    return [dict(v) for v in _optimal(available, request)]


def _optimal(available: Mapping[int, int], request: int) -> tuple[dict[int, int], ...]:
    """:func:`optimal_count_vectors`, shared with its cache (read-only)."""
    if request <= 0:
        return ({},)
    counts = [c for c, a in available.items() if c > 0 and a > 0]
    if not counts:
        return ()
    counts.sort()
    bound = request + counts[-1] - 1
    return _optimal_vectors(tuple((c, min(available[c], bound // c)) for c in counts), request)


@lru_cache(maxsize=4096)
def _optimal_vectors(shape: tuple[tuple[int, int], ...], request: int) -> tuple[dict[int, int], ...]:
    """:func:`optimal_count_vectors` of capped availability ``shape`` ((count, hosts), counts sorted);
    each vector lists its counts in ascending order."""
    available = dict(shape)
    counts = [c for c, _ in shape]
    total = sum(c * available[c] for c in counts)
    if total < request:
        return ()
    top = min(request + counts[-1] - 1, total)
    n = len(counts)
    # suffix[i][s]: fewest hosts from count groups i.. summing to exactly s
    suffix: list[list[int]] = [[_INF] * (top + 1) for _ in range(n + 1)]
    suffix[n][0] = 0
    for i in range(n - 1, -1, -1):
        c = counts[i]
        row = suffix[i + 1][:]
        remaining, chunk = min(available[c], top // c), 1
        while remaining > 0:  # binary splitting of the multiplicity
            take = min(chunk, remaining)
            remaining -= take
            chunk *= 2
            size = take * c
            for s in range(top, size - 1, -1):
                v = row[s - size] + take
                if v < row[s]:
                    row[s] = v
        suffix[i] = row
    best_sum = next((s for s in range(request, top + 1) if suffix[0][s] < _INF), None)
    if best_sum is None:
        return ()
    best_hosts = suffix[0][best_sum]
    vectors: list[dict[int, int]] = []

    def walk(i: int, s: int, hosts: int, chosen: dict[int, int]) -> None:
        if i == n:
            if s == 0 and hosts == 0:
                vectors.append(dict(chosen))
            return
        c = counts[i]
        for m in range(min(available[c], s // c, hosts), -1, -1):
            # Any exact fill of the rest uses its minimum host count, else best_hosts was not minimal.
            if m + suffix[i + 1][s - m * c] == hosts:
                if m:
                    chosen[c] = m
                walk(i + 1, s - m * c, hosts - m, chosen)
                chosen.pop(c, None)

    walk(0, best_sum, best_hosts, {})
    return tuple(vectors)


# The order of equally good hosts: hosts that carry no resource group first (they are the ones a platform
# without groups should take, leaving grouped hosts to the platforms that need them), then by name, uid.
HostKey = tuple[int, str, str]  # (1 if the host carries resource groups else 0, name, uid)


class _Free(NamedTuple):
    """A free host as the pools offer it; tuples of these sort fewest GPUs, then by host key."""

    gpus: int
    rank: int
    name: str
    uid: str
    pool: int


def _host_key(m: Machine) -> HostKey:
    return (1 if m.resource_groups else 0, m.name, m.uid)


def choose_gpu_hosts(
    available: Mapping[int, int], request: int, first: Callable[[int, int], list[HostKey]]
) -> dict[int, int] | None:
    """Pick the optimal count vector whose hosts, sorted, come first by host key.

    ``first(count, m)`` returns the m first free hosts with ``count`` GPUs by host key (hosts with one
    count are interchangeable but for their keys, so an optimal set always takes a prefix of each group).
    """
    vectors = optimal_count_vectors(available, request)
    if not vectors:
        return None
    if len(vectors) == 1:
        return vectors[0]
    return min(vectors, key=lambda v: sorted(h for c, m in v.items() for h in first(c, m)))


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
    order: list[int]  # each host's place among all free hosts by name (:class:`_FreeHosts`)
    head: int = 0
    streams: list[_Stream] = field(default_factory=list)  # the streams this pool is part of


class _Stream:
    """The hosts of a fixed list of pools in the order they are taken: fewest GPUs, then host key.

    Built once per list (a merge of the pools' sorted host lists, one segment per GPU count). A pool is
    only consumed from its head, so a host once taken stays taken until :meth:`_FreeHosts.restore`:
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

    def __init__(self, pools: Sequence[_Pool], free: _FreeHosts) -> None:
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

    def first(self, n: int, used: Mapping[int, int], count: int | None = None) -> list[_Free]:
        """The first ``n`` hosts not taken nor ``used`` by a trial (of one GPU ``count``, if given)."""
        out: list[_Free] = []
        if n <= 0:
            return out
        self.reset()
        if count is None:
            segments: Iterable[int] = range(len(self.counts))
        else:
            seg = self.segment_of_count(count)
            segments = () if seg is None else (seg,)
        pool_at, pos_at, index = self.pool_at, self.pos_at, self.index
        for seg in segments:
            k, end = self._advance(seg), self.ends[seg]
            while k < end:
                p, i = index[pool_at[k]], pos_at[k]
                k += 1
                if i >= p.head + used.get(p.idx, 0):
                    m = p.hosts[i]
                    out.append(_Free(p.count, p.rank, m.name, m.uid, p.idx))
                    if len(out) == n:
                        return out
        return out

    def segment_of_count(self, count: int) -> int | None:
        seg = bisect_left(self.counts, count)
        return seg if seg < len(self.counts) and self.counts[seg] == count else None


class _Trial:
    """A tentative selection over the pools: nothing is taken until ``commit``."""

    def __init__(self) -> None:
        self.used: dict[int, int] = {}

    def avail(self, pool: _Pool) -> int:
        return len(pool.hosts) - pool.head - self.used.get(pool.idx, 0)

    def peek(self, stream: _Stream, n: int, count: int | None = None) -> list[_Free]:
        """The first ``n`` free hosts of ``stream`` by GPU count, then host key (of one ``count``)."""
        return stream.first(n, self.used, count)

    def take(self, stream: _Stream, n: int, count: int | None = None) -> list[_Free]:
        chosen = stream.first(n, self.used, count)
        for free in chosen:
            self.used[free.pool] = self.used.get(free.pool, 0) + 1
        return chosen


GroupsKey = tuple[tuple[str, str], ...]


def _groups_key(groups: Mapping[str, str]) -> GroupsKey:
    return tuple(sorted(groups.items())) if groups else ()


_NAME_UID = attrgetter("name", "uid")


def _pool_order(key: tuple[object, ...]) -> str:
    """The order of the pools (any fixed order would do; this one is the engine's since its start)."""
    arch, worker, *rest = key
    return repr((arch, str(Role.WORKER if worker else Role.CONTROL_PLANE), *rest))


class _FreeHosts:
    def __init__(self, machines: Iterable[Machine]) -> None:
        ordered = sorted(machines, key=_NAME_UID)
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
                tuple(sorted(groups.items())) if groups else (),
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
        self._streams: dict[tuple[object, ...], _Stream] = {}
        # No host at all, for a cluster's own hosts offered alone (:func:`_holds`); made once.
        self._nothing: _FreeHosts | None = None

    @property
    def nothing(self) -> _FreeHosts:
        if self._nothing is None:
            self._nothing = _FreeHosts(())
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

    def _stream(self, key: tuple[object, ...], pools: Callable[[], list[_Pool]]) -> _Stream:
        found = self._streams.get(key)
        if found is None:
            found = self._streams[key] = _Stream(pools(), self)
        return found

    def workers_of(self, arch: str, groups: Mapping[str, str], family: GpuFamily) -> _Stream:
        """The GPU worker pools of one family among :meth:`matching`."""
        return self._stream(
            ("workers", arch, _groups_key(groups), family),
            lambda: [p for p in self.matching(arch, groups) if p.role is Role.WORKER and p.family == family],
        )

    def control_planes(self, arch: str, groups: Mapping[str, str]) -> _Stream:
        """The control-plane pools among :meth:`matching`."""
        return self._stream(
            ("control planes", arch, _groups_key(groups)),
            lambda: [p for p in self.matching(arch, groups) if p.role is Role.CONTROL_PLANE],
        )

    def fill_stage(
        self, arch: str, groups: Mapping[str, str], families: Collection[GpuFamily], stage: int
    ) -> _Stream:
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

    def commit(self, trial: _Trial) -> None:
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


# --- one platform --------------------------------------------------------------------------------


@dataclass(slots=True)
class _Outcome:
    control_plane: list[str]
    workers: list[str]
    gpus: dict[str, int]
    surplus: int
    trial: _Trial


def _where(groups: Mapping[str, str], arch: str | None) -> str:
    text = f" on {arch}" if arch else ""
    if groups:
        text += " in " + ",".join(f"{k}={v}" for k, v in sorted(groups.items()))
    return text


class _Where(NamedTuple):
    """:func:`_where`, written only when a rejection says it."""

    groups: Mapping[str, str]
    arch: str | None

    def __str__(self) -> str:
        return _where(self.groups, self.arch)


def _hosts(n: int, kind: str) -> str:
    return f"{n} {kind} host" + ("" if n == 1 else "s")


def _fill_stages(pools: Sequence[_Pool], families: Collection[GpuFamily]) -> list[list[_Pool]]:
    """The seed's fill order for the minimum: worker-tagged, then requested families, then any GPUs."""
    workers = [p for p in pools if p.role is Role.WORKER]
    return [
        [p for p in workers if p.tagged],
        [p for p in workers if not p.tagged and p.family is not None and p.family in families],
        [p for p in workers if not p.tagged and p.family is not None and p.family not in families],
    ]


FILL_STAGES = 3  # the stages of :func:`_fill_stages`


def _gpu_workers(
    trial: _Trial, stream: _Stream, request: int, current: Sequence[Machine]
) -> tuple[list[str], int] | None:
    """The GPU workers of one family: the optimal set over the current workers and the free hosts.

    Fewest surplus GPUs, then fewest hosts, over everything on offer; among equally good sets the one
    that keeps the most current workers (sticky), then by host key. So a spec change is met in one step,
    adding and removing hosts together, and never holds more GPUs than that set. Returns (uids, GPUs).
    ``stream`` holds the worker pools of the family (:meth:`_FreeHosts.workers_of`), ``current`` its
    current workers.
    """
    available = stream.available(trial.used)
    mine: dict[int, list[Machine]] = {}
    if current:
        for host in sorted(current, key=_host_key):
            if host.gpu_count > 0:
                mine.setdefault(host.gpu_count, []).append(host)
        for c, ms in mine.items():
            available[c] = available.get(c, 0) + len(ms)
    vectors = _optimal(available, request)
    if not vectors:
        return None

    def kept(vector: Mapping[int, int]) -> int:
        return sum(min(m, len(mine.get(c, ()))) for c, m in vector.items())

    def free_part(count: int, m: int) -> list[_Free]:
        k = m - min(m, len(mine.get(count, ())))
        return trial.peek(stream, k, count) if k > 0 else []

    def order(vector: Mapping[int, int]) -> tuple[int, list[HostKey]]:
        hosts = [_host_key(x) for c, m in vector.items() for x in mine.get(c, [])[:m]]
        hosts += [(f.rank, f.name, f.uid) for c, m in vector.items() for f in free_part(c, m)]
        return (-kept(vector), sorted(hosts))

    best = vectors[0] if len(vectors) == 1 else min(vectors, key=order)
    uids: list[str] = []
    for count, n in best.items():  # counts in ascending order (:func:`_optimal_vectors`)
        keep = mine.get(count, [])[:n]
        uids += [x.uid for x in keep]
        if n > len(keep):
            uids += [f.uid for f in trial.take(stream, n - len(keep), count)]
    return uids, sum(c * m for c, m in best.items())


def _free_gpus(trial: _Trial, stream: _Stream) -> int:
    return sum(c * n for c, n in stream.available(trial.used).items())


def _fresh(req: Requirements, free: _FreeHosts, arch: str, show_arch: bool) -> _Outcome | Rejection:
    """Allocate a new cluster on one architecture from free hosts only."""
    return _place(req, free, arch, show_arch, existing=None, known={})


@dataclass(frozen=True, slots=True)
class _Existing:
    control_plane: tuple[str, ...]
    workers: tuple[str, ...]


def _place(
    req: Requirements,
    free: _FreeHosts,
    arch: str,
    show_arch: bool,
    existing: _Existing | None,
    known: Mapping[str, Machine],
) -> _Outcome | Rejection:
    """Place one platform on one architecture; with ``existing`` hosts, scale in place around them."""
    trial = _Trial()
    where = _Where(req.groups, arch if show_arch else None)

    def serves(uid: str) -> bool:
        m = known.get(uid)
        return m is None or (m.arch == arch and m.in_groups(req.groups))

    # GPU workers per family: exact choice; around an existing cluster, keep what still serves.
    existing_workers = [u for u in existing.workers if serves(u)] if existing is not None else []
    unknown_workers = [u for u in existing_workers if u not in known]
    gpu_workers: list[str] = []
    gpus: dict[str, int] = {}
    for family, request in req.gpus.items():
        mine = [known[u] for u in existing_workers if u in known and known[u].gpu_family == family]
        family_hosts = free.workers_of(arch, req.groups, family)
        got_gpus = _gpu_workers(trial, family_hosts, request, mine)
        if got_gpus is None:
            short = sum(m.gpu_count for m in mine) + _free_gpus(trial, family_hosts)
            return Rejection(
                Reason.INSUFFICIENT_COMPUTE, f"needs {request} {family} GPUs{where}, {short} available"
            )
        gpu_workers += got_gpus[0]
        gpus[family] = got_gpus[1]

    # Control plane: keep the existing ones that serve, then take free candidates fewest GPUs first.
    control_plane: list[str] = []
    if existing is not None:
        kept = [u for u in existing.control_plane if serves(u)]
        kept.sort(key=lambda u: _machine_order(known.get(u), u))
        control_plane = kept[: req.control_plane]
    missing_cp = req.control_plane - len(control_plane)
    if missing_cp > 0:
        got = trial.take(free.control_planes(arch, req.groups), missing_cp)
        if len(got) < missing_cp:
            have = len(control_plane) + len(got)
            return Rejection(
                Reason.INSUFFICIENT_COMPUTE,
                f"needs {_hosts(req.control_plane, 'control-plane')}{where}, {have} available",
            )
        control_plane += [f.uid for f in got]

    # Minimum workers: the current workers left over are offered first (sticky: a running cluster is
    # not churned because a better host appeared), then free hosts in the seed's fill order.
    workers = gpu_workers + unknown_workers
    missing = req.min_workers - len(workers)
    chosen = set(workers)
    leftovers = [known[u] for u in existing_workers if u in known and u not in chosen]
    leftovers = [m for m in leftovers if _fill_stage(m, req) is not None]
    leftovers.sort(key=lambda m: (_fill_stage(m, req), m.gpu_count, *_host_key(m)))
    fill: list[tuple[int, str]] = []  # (gpus, family) of every fill host
    for m in leftovers[: max(missing, 0)]:
        workers.append(m.uid)
        fill.append((m.gpu_count, m.gpu_family or ""))
    missing = req.min_workers - len(workers)
    if missing > 0:
        for stage in range(FILL_STAGES):
            got = trial.take(free.fill_stage(arch, req.groups, req.gpus, stage), missing)
            for f in got:
                workers.append(f.uid)
                fill.append((f.gpus, free.pools[f.pool].family or ""))
            missing -= len(got)
            if missing == 0:
                break
        if missing > 0:
            return Rejection(
                Reason.INSUFFICIENT_COMPUTE,
                f"needs {_hosts(req.min_workers, 'worker')}{where}, {req.min_workers - missing} available",
            )
    for count, fill_family in fill:
        if count > 0 and fill_family:
            gpus[fill_family] = gpus.get(fill_family, 0) + count
    surplus = sum(gpus.values()) - req.requested_gpus
    return _Outcome(sorted(control_plane), sorted(workers), dict(sorted(gpus.items())), surplus, trial)


def _machine_order(m: Machine | None, uid: str) -> tuple[int, str, str]:
    return (0, "", uid) if m is None else (m.gpu_count, m.name, m.uid)


def _fill_stage(m: Machine, req: Requirements) -> int | None:
    if m.worker_tagged:
        return 0
    if m.gpu_family is not None and m.gpu_count > 0:
        return 1 if m.gpu_family in req.gpus else 2
    return None


def _outcome_key(arch: str, outcome: _Outcome) -> tuple[int, int, str]:
    return (outcome.surplus, len(outcome.control_plane) + len(outcome.workers), arch)


def _best_fresh(
    req: Requirements, free: _FreeHosts, skip: str | None = None
) -> tuple[str, _Outcome] | Rejection:
    arches = [a for a in free.arches(req.groups) if a != skip]
    if not arches:
        where = _where(req.groups, None)
        what = next(iter(f"{c} {f} GPUs" for f, c in req.gpus.items()), None)
        what = what or _hosts(req.control_plane, "control-plane")
        return Rejection(Reason.INSUFFICIENT_COMPUTE, f"needs {what}{where}, 0 available")
    show = len(arches) > 1
    best: tuple[str, _Outcome] | None = None
    failures: list[str] = []
    for arch in arches:
        if best is not None and _cannot_beat(req, free, arch, _outcome_key(*best)):
            continue  # (its message is only shown when no architecture fits, and one does)
        outcome = _fresh(req, free, arch, show)
        if isinstance(outcome, Rejection):
            failures.append(outcome.message)
        elif best is None or _outcome_key(arch, outcome) < _outcome_key(*best):
            best = (arch, outcome)
    if best is not None:
        return best
    return Rejection(Reason.INSUFFICIENT_COMPUTE, "; ".join(failures))


def _cannot_beat(req: Requirements, free: _FreeHosts, arch: str, best: tuple[int, int, str]) -> bool:
    """Whether a new cluster on ``arch`` surely comes after ``best`` (:func:`_outcome_key`), told from
    the GPU counts on offer alone: its GPU workers have at least the knapsack's surplus and hosts, fill
    workers only add GPUs, and a placed cluster has exactly its control plane and at least its minimum
    of workers. A platform tries every architecture; most lose on this bound without being placed."""
    surplus, gpu_hosts = 0, 0
    for family, request in req.gpus.items():
        vectors = _optimal(free.workers_of(arch, req.groups, family).available({}), request)
        if not vectors:
            return True  # its GPUs cannot be met there
        surplus += sum(c * m for c, m in vectors[0].items()) - request
        gpu_hosts += sum(vectors[0].values())
    return (surplus, req.control_plane + max(req.min_workers, gpu_hosts), arch) > best


def _cluster_arch(cluster: ManagedCluster, known: Mapping[str, Machine]) -> str | None:
    if cluster.arch:
        return cluster.arch
    arches = sorted({known[u].arch for u in cluster.hosts if u in known})
    return arches[0] if arches else None


def _to_allocation(arch: str, outcome: _Outcome, replaces: bool = False) -> Allocation:
    return Allocation(
        control_plane=tuple(outcome.control_plane),
        workers=tuple(outcome.workers),
        gpus=outcome.gpus,
        arch=arch,
        replaces=replaces,
    )


def gpus_on(workers: Iterable[str], known: Mapping[str, Machine]) -> dict[str, int]:
    """GPUs per family on ``workers`` (hosts the inventory does not list count none)."""
    gpus: dict[str, int] = {}
    for uid in workers:
        m = known.get(uid)
        if m is not None and m.gpu_family is not None and m.gpu_count > 0:
            gpus[m.gpu_family] = gpus.get(m.gpu_family, 0) + m.gpu_count
    return dict(sorted(gpus.items()))


def _holds(
    req: Requirements, arch: str, existing: _Existing, known: Mapping[str, Machine], nothing: _FreeHosts
) -> bool:
    """Whether a cluster's own hosts are exactly what the rules choose when offered nothing else.

    Nothing running moves without a change of its own: a cluster whose hosts still meet its needs is not
    re-optimised against hosts that freed up since (another platform removed, a better host added). Its
    hosts were the best choice among a larger offer when they were chosen, so they stay the choice among
    themselves until its needs change or one of them stops serving (architecture, resource groups).
    """
    alone = _place(req, nothing, arch, False, existing, known)
    return (
        isinstance(alone, _Outcome)
        and tuple(alone.control_plane) == tuple(sorted(existing.control_plane))
        and tuple(alone.workers) == tuple(sorted(existing.workers))
    )


def _allocate_existing(
    platform: resolve.Clustered,
    req: Requirements,
    cluster: ManagedCluster,
    free: _FreeHosts,
    known: Mapping[str, Machine],
) -> Decision:
    """Scale a platform's cluster in place; a different architecture needs a (permitted) replace."""
    existing = _Existing(cluster.control_plane, cluster.workers)
    arch = _cluster_arch(cluster, known)
    if cluster.known_state is DELETING_STATE:
        # Its hosts are held until Palette lets go of them; the platform is placed anew after that.
        return Allocation(cluster.control_plane, cluster.workers, gpus_on(cluster.workers, known), arch or "")
    if arch is None:  # nothing known about its hosts: scale in place on the first architecture that fits
        failures: list[str] = []
        for a in free.arches(req.groups):
            attempt = _place(req, free, a, True, existing, known)
            if isinstance(attempt, _Outcome):
                free.commit(attempt.trial)
                return _to_allocation(a, attempt)
            failures.append(attempt.message)
        return Rejection(Reason.INSUFFICIENT_COMPUTE, "; ".join(failures) or "no host to scale onto")
    if _holds(req, arch, existing, known, free.nothing):
        return Allocation(cluster.control_plane, cluster.workers, gpus_on(cluster.workers, known), arch)
    in_place = _place(req, free, arch, False, existing, known)
    if isinstance(in_place, _Outcome):
        swapped = sorted(set(cluster.control_plane) - set(in_place.control_plane))
        if not swapped or len(in_place.control_plane) < len(cluster.control_plane):
            free.commit(in_place.trial)
            return _to_allocation(arch, in_place)
        # Control-plane hosts would be exchanged (e.g. new resource groups), not just added or removed:
        # that moves the cluster's quorum, so it is a replace, never a silent in-place scale.
        if not allow_replace(platform):
            return Rejection(
                Reason.REPLACE_BLOCKED,
                f"the spec needs other control-plane hosts than {', '.join(swapped)}; that needs a new "
                f'cluster: set annotation {ALLOW_REPLACE_ANNOTATION}: "true" to replace it',
            )
        fresh = _best_fresh(req, free)
        if isinstance(fresh, Rejection):
            return fresh
        new_arch, outcome = fresh
        free.commit(outcome.trial)
        return _to_allocation(new_arch, outcome, replaces=True)
    other = _best_fresh(req, free, skip=arch)
    if isinstance(other, Rejection):
        return in_place
    new_arch, outcome = other
    if not allow_replace(platform):
        return Rejection(
            Reason.REPLACE_BLOCKED,
            f"cannot scale the {arch} cluster in place ({in_place.message}); the spec needs a new "
            f'{new_arch} cluster: set annotation {ALLOW_REPLACE_ANNOTATION}: "true" to replace it',
        )
    free.commit(outcome.trial)
    return _to_allocation(new_arch, outcome, replaces=True)


@dataclass(frozen=True, slots=True)
class Placement:
    """The decisions of one pass over one inventory: dedicated platforms and pools, by (namespace, name)."""

    platforms: dict[PlatformKey, Decision]
    pools: dict[PoolKey, Decision]


def _priority(resource: resolve.Clustered) -> int:
    """``MLPlatform.spec.priority``; a pool places with priority 0."""
    return resource.spec.priority if isinstance(resource, MLPlatform) else 0


Ident = tuple[str, str, str]  # (namespace, name, kind)


def _place_new(
    idents: list[Ident], needs: Mapping[Ident, Requirements], free: _FreeHosts
) -> dict[Ident, Decision]:
    """New platforms (and pools) of one priority, in their (namespace, name) order.

    The order is a tie-break, not a reason to leave capacity unused: when it leaves some out, a bounded,
    deterministic search (:func:`reconciler.placement.platform_order.better_order`) looks for an order
    that places strictly more, and that order's placement is taken; otherwise the name order stands as
    it was. When all fit, nothing is searched.
    """
    start = free.heads()
    greedy = _place_in_order(idents, needs, free)
    if all(isinstance(d, Allocation) for d in greedy.values()):
        return greedy
    done = free.heads()
    placed = [i for i in idents if isinstance(greedy[i], Allocation)]
    free.restore(start)
    usage = {i: _usage(needs[i]) for i in idents}
    placer = _Placer(needs, free)
    better = platform_order.better_order(idents, placed, usage, _supply(free), placer)
    if better is None:
        free.restore(done)
        return greedy
    if better.in_place:
        out: dict[Ident, Decision] = {i: _to_allocation(a, o) for i, (a, o) in placer.placed.items()}
    else:
        out = _place_in_order(better.order, needs, free)
    out |= _place_in_order([i for i in idents if i not in out], needs, free)
    return out


def _place_in_order(
    idents: Sequence[Ident], needs: Mapping[Ident, Requirements], free: _FreeHosts
) -> dict[Ident, Decision]:
    out: dict[Ident, Decision] = {}
    for ident in idents:
        result = _best_fresh(needs[ident], free)
        if isinstance(result, Rejection):
            out[ident] = result
        else:
            arch, outcome = result
            free.commit(outcome.trial)
            out[ident] = _to_allocation(arch, outcome)
    return out


class _Placer:
    """The engine's placement of one new platform, as the order search drives it. ``placed``: what was
    placed since the last restore (the search's last pass, when it says the placer holds it)."""

    def __init__(self, needs: Mapping[Ident, Requirements], free: _FreeHosts) -> None:
        self.needs, self.free = needs, free
        self.placed: dict[Ident, tuple[str, _Outcome]] = {}

    def place(self, ident: Ident) -> dict[str, float] | None:
        result = _best_fresh(self.needs[ident], self.free)
        if isinstance(result, Rejection):
            return None
        outcome = result[1]
        self.free.commit(outcome.trial)
        self.placed[ident] = result
        return _taking(len(outcome.control_plane), len(outcome.workers), outcome.gpus.items())

    def mark(self) -> tuple[int, ...]:
        return self.free.heads()

    def restore(self, mark: object) -> None:
        assert isinstance(mark, tuple)
        self.free.restore(mark)
        self.placed.clear()


def _usage(req: Requirements) -> dict[str, float]:
    """What a platform asks of the resources the order search prices: never more than it takes."""
    return _taking(req.control_plane, req.min_workers, req.gpus.items())


def _taking(control_plane: int, workers: int, gpus: Iterable[tuple[str, int]]) -> dict[str, float]:
    """Hosts and GPUs as the order search prices them: all architectures and resource groups together
    (the prices only order the candidates; the engine decides what fits)."""
    took = {f"gpus:{f}": float(n) for f, n in gpus}
    took["control-plane"] = float(control_plane)
    took["workers"] = float(workers)
    return took


def _supply(free: _FreeHosts) -> dict[str, float]:
    """The free amount of each resource of :func:`_usage`."""
    supply: dict[str, float] = {"control-plane": 0.0, "workers": 0.0}
    for pool in free.pools:
        n = len(pool.hosts) - pool.head
        if pool.role is Role.CONTROL_PLANE:
            supply["control-plane"] += n
        else:
            supply["workers"] += n
            if pool.family is not None:
                key = f"gpus:{pool.family}"
                supply[key] = supply.get(key, 0.0) + n * pool.count
    return supply


def split_clusters(
    clusters: Sequence[ManagedCluster],
) -> tuple[dict[PlatformKey, ManagedCluster], dict[PoolKey, ManagedCluster]]:
    """The managed clusters of platforms and of pools, by key (the first by name and uid when several
    carry one key). A cluster without the ``palette.ai/kind`` label is a platform's."""
    platforms: dict[PlatformKey, ManagedCluster] = {}
    pools: dict[PoolKey, ManagedCluster] = {}
    for c in sorted(clusters, key=lambda c: (c.namespace, c.platform, c.name, c.uid)):
        (pools if cluster_kind(c.labels) == POOL_KIND else platforms).setdefault(c.key, c)
    return platforms, pools


def place(
    desired: DesiredState,
    inventory: Inventory,
    clusters: Sequence[ManagedCluster],
    pool_modes: Mapping[PoolKey, str] | None = None,
    *,
    machines: Mapping[str, Machine] | None = None,
) -> Placement:
    """Decide every valid, non-suspended dedicated platform and pool: an allocation, or a rejection.

    Suspended and invalid ones are not decided; their clusters keep their hosts. ``pool_modes`` is the
    mode the status branch last reported per pool, used when a pool's cluster lacks the mode label.
    ``machines``: the inventory's machines by uid, when the caller has that map already.
    """
    known = machines if machines is not None else {m.uid: m for m in inventory.machines}
    if len(known) < len(inventory.machines):  # a uid listed twice: the last by name wins
        known = {m.uid: m for m in sorted(inventory.machines, key=_NAME_UID)}
    occupied = {u for c in clusters for u in c.hosts}
    free = _FreeHosts([m for m in known.values() if m.available and m.uid not in occupied])
    platform_clusters, pool_clusters = split_clusters(clusters)
    reported = pool_modes or {}

    # (namespace, name, kind) -> the resource, its cluster, its needs
    subjects: dict[tuple[str, str, str], tuple[resolve.Clustered, ManagedCluster | None]] = {}
    for p in desired.platforms():
        if not p.spec.suspend and not resolve.is_tenant(p):
            key = (p.metadata.namespace, p.metadata.name)
            subjects[(*key, "MLPlatform")] = (p, platform_clusters.get(key))
    for pool in desired.of_kind(ComputePool):
        if not pool.spec.suspend:
            key = (pool.metadata.namespace, pool.metadata.name)
            subjects[(*key, POOL_KIND)] = (pool, pool_clusters.get(key))

    decisions: dict[tuple[str, str, str], Decision] = {}
    needs: dict[tuple[str, str, str], Requirements] = {}
    for ident, (resource, cluster) in subjects.items():
        req: Requirements | Rejection
        if isinstance(resource, ComputePool):
            changed = None
            if cluster is not None:
                changed = pool_mode_change(resource, previous_pool_mode(cluster, reported), True)
            req = Rejection(Reason.INVALID_SPEC, changed) if changed else pool_requirements(desired, resource)
        else:
            req = requirements(desired, resource)
        if isinstance(req, Rejection):
            decisions[ident] = req
        else:
            needs[ident] = req
    # Sticky first: those that already have a cluster, in (namespace, name) order; then new ones by
    # priority (high first), each priority placed to fit as many as it can (order breaks ties).
    for ident in sorted(i for i in needs if subjects[i][1] is not None):
        resource, cluster = subjects[ident]
        assert cluster is not None
        decisions[ident] = _allocate_existing(resource, needs[ident], cluster, free, known)
    fresh = sorted(
        (i for i in needs if subjects[i][1] is None), key=lambda i: (-_priority(subjects[i][0]), i)
    )
    for _, group in itertools.groupby(fresh, key=lambda i: _priority(subjects[i][0])):
        decisions.update(_place_new(list(group), needs, free))
    return Placement(
        platforms={(ns, n): d for (ns, n, kind), d in sorted(decisions.items()) if kind == "MLPlatform"},
        pools={(ns, n): d for (ns, n, kind), d in sorted(decisions.items()) if kind == POOL_KIND},
    )


def allocate(
    desired: DesiredState, inventory: Inventory, clusters: Sequence[ManagedCluster]
) -> dict[PlatformKey, Decision]:
    """Decide every valid, non-suspended dedicated platform (pools take their hosts too: :func:`place`).

    Suspended and invalid platforms are not decided; their clusters keep their hosts.
    """
    return place(desired, inventory, clusters).platforms
