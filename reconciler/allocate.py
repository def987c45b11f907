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

import heapq
import itertools
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
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
    counts = sorted(c for c, a in available.items() if c > 0 and a > 0)
    if request <= 0:
        return [{}]
    if not counts:
        return []
    bound = request + counts[-1] - 1
    shape = tuple((c, min(available[c], bound // c)) for c in counts)
    return [dict(v) for v in _optimal_vectors(shape, request)]


@lru_cache(maxsize=4096)
def _optimal_vectors(shape: tuple[tuple[int, int], ...], request: int) -> tuple[dict[int, int], ...]:
    """:func:`optimal_count_vectors` of capped availability ``shape`` ((count, hosts), counts sorted)."""
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
    hosts: list[tuple[str, str]]  # (name, uid), sorted
    head: int = 0

    @property
    def rank(self) -> int:
        return 1 if self.groups else 0


class _Trial:
    """A tentative selection over the pools: nothing is taken until ``commit``."""

    def __init__(self) -> None:
        self.used: dict[int, int] = {}

    def avail(self, pool: _Pool) -> int:
        return len(pool.hosts) - pool.head - self.used.get(pool.idx, 0)

    def peek(self, pools: Iterable[_Pool], n: int) -> list[_Free]:
        """The first ``n`` free hosts over ``pools`` by GPU count, then host key.

        A merge of the pools' sorted host lists that looks at each pool's next host only: a pool's
        hosts share its count and rank, and no host is in two pools, so the keys never tie.
        """
        used = self.used
        heads: list[tuple[int, int, str, str, int, _Pool]] = []
        for p in pools:
            start = p.head + used.get(p.idx, 0)
            if start < len(p.hosts):
                name, uid = p.hosts[start]
                heads.append((p.count, p.rank, name, uid, start, p))
        out: list[_Free] = []
        heapq.heapify(heads)
        while heads and len(out) < n:
            count, rank, name, uid, i, p = heads[0]
            out.append(_Free(count, rank, name, uid, p.idx))
            if i + 1 < len(p.hosts):
                name, uid = p.hosts[i + 1]
                heapq.heapreplace(heads, (count, rank, name, uid, i + 1, p))
            else:
                heapq.heappop(heads)
        return out

    def take(self, pools: Iterable[_Pool], n: int) -> list[_Free]:
        chosen = self.peek(pools, n)
        for free in chosen:
            self.used[free.pool] = self.used.get(free.pool, 0) + 1
        return chosen


class _FreeHosts:
    def __init__(self, machines: Iterable[Machine]) -> None:
        keyed: dict[tuple[object, ...], list[Machine]] = {}
        for m in machines:
            groups = tuple(sorted(m.resource_groups.items()))
            key = (m.arch, str(m.role), m.worker_tagged, m.gpu_family or "", m.gpu_count, groups)
            keyed.setdefault(key, []).append(m)
        self.pools: list[_Pool] = []
        for pool_key in sorted(keyed, key=repr):
            ms = keyed[pool_key]
            first = ms[0]
            self.pools.append(
                _Pool(
                    idx=len(self.pools),
                    arch=first.arch,
                    role=first.role,
                    tagged=first.worker_tagged,
                    family=first.gpu_family if first.gpu_count > 0 else None,
                    count=first.gpu_count,
                    groups=dict(first.resource_groups),
                    hosts=sorted((m.name, m.uid) for m in ms),
                )
            )
        self._matching: dict[tuple[str, tuple[tuple[str, str], ...]], list[_Pool]] = {}
        self._in_groups: dict[tuple[tuple[str, str], ...], dict[str, list[_Pool]]] = {}
        # Sub-lists of ``matching`` (membership never changes, only heads move): looked up once each.
        self._workers: dict[tuple[str, tuple[tuple[str, str], ...], GpuFamily], list[_Pool]] = {}
        self._control_planes: dict[tuple[str, tuple[tuple[str, str], ...]], list[_Pool]] = {}
        self._stages: dict[tuple[object, ...], list[list[_Pool]]] = {}

    def matching(self, arch: str, groups: Mapping[str, str]) -> list[_Pool]:
        key = (arch, tuple(sorted(groups.items())))
        found = self._matching.get(key)
        if found is None:
            found = [
                p
                for p in self.pools
                if p.arch == arch and all(p.groups.get(k) == v for k, v in groups.items())
            ]
            self._matching[key] = found
        return found

    def workers_of(self, arch: str, groups: Mapping[str, str], family: GpuFamily) -> list[_Pool]:
        """The GPU worker pools of one family among :meth:`matching`."""
        key = (arch, tuple(sorted(groups.items())), family)
        found = self._workers.get(key)
        if found is None:
            pools = self.matching(arch, groups)
            found = self._workers[key] = [p for p in pools if p.role is Role.WORKER and p.family == family]
        return found

    def control_planes(self, arch: str, groups: Mapping[str, str]) -> list[_Pool]:
        """The control-plane pools among :meth:`matching`."""
        key = (arch, tuple(sorted(groups.items())))
        found = self._control_planes.get(key)
        if found is None:
            pools = self.matching(arch, groups)
            found = self._control_planes[key] = [p for p in pools if p.role is Role.CONTROL_PLANE]
        return found

    def fill_stages(
        self, arch: str, groups: Mapping[str, str], families: Collection[GpuFamily]
    ) -> list[list[_Pool]]:
        """:func:`_fill_stages` of :meth:`matching` for a request of ``families``."""
        key = (arch, tuple(sorted(groups.items())), tuple(sorted(families)))
        found = self._stages.get(key)
        if found is None:
            found = self._stages[key] = _fill_stages(self.matching(arch, groups), frozenset(families))
        return found

    def arches(self, groups: Mapping[str, str]) -> list[str]:
        """Architectures with at least one free host in ``groups``, in name order."""
        key = tuple(sorted(groups.items()))
        by_arch = self._in_groups.get(key)
        if by_arch is None:
            by_arch = {}
            for p in self.pools:
                if all(p.groups.get(k) == v for k, v in groups.items()):
                    by_arch.setdefault(p.arch, []).append(p)
            self._in_groups[key] = by_arch
        return sorted(a for a, pools in by_arch.items() if any(p.head < len(p.hosts) for p in pools))

    def commit(self, trial: _Trial) -> None:
        for idx, m in trial.used.items():
            self.pools[idx].head += m

    def heads(self) -> tuple[int, ...]:
        """What is taken so far (for a search to come back to with :meth:`restore`)."""
        return tuple(p.head for p in self.pools)

    def restore(self, heads: Sequence[int]) -> None:
        for pool, head in zip(self.pools, heads, strict=True):
            pool.head = head


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


def _gpu_workers(
    trial: _Trial, pools: Sequence[_Pool], request: int, current: Sequence[Machine]
) -> tuple[list[str], int] | None:
    """The GPU workers of one family: the optimal set over the current workers and the free hosts.

    Fewest surplus GPUs, then fewest hosts, over everything on offer; among equally good sets the one
    that keeps the most current workers (sticky), then by host key. So a spec change is met in one step,
    adding and removing hosts together, and never holds more GPUs than that set. Returns (uids, GPUs).
    ``pools`` are the worker pools of the family (:meth:`_FreeHosts.workers_of`), ``current`` its
    current workers.
    """
    free_by_count: dict[int, list[_Pool]] = {}
    available: dict[int, int] = {}
    used = trial.used
    for p in pools:
        free = len(p.hosts) - p.head - used.get(p.idx, 0)
        if free > 0:
            free_by_count.setdefault(p.count, []).append(p)
            available[p.count] = available.get(p.count, 0) + free
    mine: dict[int, list[Machine]] = {}
    for host in sorted(current, key=_host_key):
        if host.gpu_count > 0:
            mine.setdefault(host.gpu_count, []).append(host)
    for c, ms in mine.items():
        available[c] = available.get(c, 0) + len(ms)
    vectors = optimal_count_vectors(available, request)
    if not vectors:
        return None

    def kept(vector: Mapping[int, int]) -> int:
        return sum(min(m, len(mine.get(c, ()))) for c, m in vector.items())

    def free_part(count: int, m: int) -> list[_Free]:
        k = m - min(m, len(mine.get(count, ())))
        return trial.peek(free_by_count[count], k) if k > 0 else []

    def order(vector: Mapping[int, int]) -> tuple[int, list[HostKey]]:
        hosts = [_host_key(x) for c, m in vector.items() for x in mine.get(c, [])[:m]]
        hosts += [(f.rank, f.name, f.uid) for c, m in vector.items() for f in free_part(c, m)]
        return (-kept(vector), sorted(hosts))

    best = vectors[0] if len(vectors) == 1 else min(vectors, key=order)
    uids: list[str] = []
    for count, n in sorted(best.items()):
        keep = mine.get(count, [])[:n]
        uids += [x.uid for x in keep]
        if n > len(keep):
            uids += [f.uid for f in trial.take(free_by_count[count], n - len(keep))]
    return uids, sum(c * m for c, m in best.items())


def _free_gpus(trial: _Trial, pools: Sequence[_Pool], family: GpuFamily) -> int:
    return sum(trial.avail(p) * p.count for p in pools if p.role is Role.WORKER and p.family == family)


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
    where = _where(req.groups, arch if show_arch else None)

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
        family_pools = free.workers_of(arch, req.groups, family)
        got_gpus = _gpu_workers(trial, family_pools, request, mine)
        if got_gpus is None:
            short = sum(m.gpu_count for m in mine) + _free_gpus(trial, family_pools, family)
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
        for stage in free.fill_stages(arch, req.groups, req.gpus):
            got = trial.take(stage, missing)
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
    results = [(a, _fresh(req, free, a, show)) for a in arches]
    placed = [(a, o) for a, o in results if isinstance(o, _Outcome)]
    if placed:
        return min(placed, key=lambda ao: _outcome_key(*ao))
    return Rejection(
        Reason.INSUFFICIENT_COMPUTE, "; ".join(o.message for _, o in results if isinstance(o, Rejection))
    )


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


def _holds(req: Requirements, arch: str, existing: _Existing, known: Mapping[str, Machine]) -> bool:
    """Whether a cluster's own hosts are exactly what the rules choose when offered nothing else.

    Nothing running moves without a change of its own: a cluster whose hosts still meet its needs is not
    re-optimised against hosts that freed up since (another platform removed, a better host added). Its
    hosts were the best choice among a larger offer when they were chosen, so they stay the choice among
    themselves until its needs change or one of them stops serving (architecture, resource groups).
    """
    alone = _place(req, _FreeHosts(()), arch, False, existing, known)
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
    if _holds(req, arch, existing, known):
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
) -> Placement:
    """Decide every valid, non-suspended dedicated platform and pool: an allocation, or a rejection.

    Suspended and invalid ones are not decided; their clusters keep their hosts. ``pool_modes`` is the
    mode the status branch last reported per pool, used when a pool's cluster lacks the mode label.
    """
    known = {m.uid: m for m in sorted(inventory.machines, key=lambda m: (m.name, m.uid))}
    occupied = {u for c in clusters for u in c.hosts}
    free = _FreeHosts(m for m in known.values() if m.available and m.uid not in occupied)
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
