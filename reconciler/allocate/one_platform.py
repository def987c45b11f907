"""One platform on one architecture: its GPU workers, control plane and minimum of workers (pure).

A new cluster is placed from free hosts only; an existing one is scaled around the hosts it has
(:mod:`reconciler.allocate.existing`). The best architecture wins by surplus, hosts, then name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from reconciler.allocate.free_hosts import FILL_STAGES, FreeHost, FreeHosts, Stream, Trial
from reconciler.allocate.knapsack import HostKey, host_key, optimal
from reconciler.allocate.needs import Rejection, Requirements
from reconciler.inventory import Machine
from reconciler.model.conditions import Reason

# --- one platform --------------------------------------------------------------------------------


@dataclass(slots=True)
class Outcome:
    control_plane: list[str]
    workers: list[str]
    gpus: dict[str, int]
    surplus: int
    trial: Trial


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


def _gpu_workers(
    trial: Trial, stream: Stream, request: int, current: Sequence[Machine]
) -> tuple[list[str], int] | None:
    """The GPU workers of one family: the optimal set over the current workers and the free hosts.

    Fewest surplus GPUs, then fewest hosts, over everything on offer; among equally good sets the one
    that keeps the most current workers (sticky), then by host key. So a spec change is met in one step,
    adding and removing hosts together, and never holds more GPUs than that set. Returns (uids, GPUs).
    ``stream`` holds the worker pools of the family (:meth:`FreeHosts.workers_of`), ``current`` its
    current workers.
    """
    available = stream.available(trial.used)
    mine: dict[int, list[Machine]] = {}
    if current:
        for host in sorted(current, key=host_key):
            if host.gpu_count > 0:
                mine.setdefault(host.gpu_count, []).append(host)
        for c, ms in mine.items():
            available[c] = available.get(c, 0) + len(ms)
    vectors = optimal(available, request)
    if not vectors:
        return None

    def kept(vector: Mapping[int, int]) -> int:
        return sum(min(m, len(mine.get(c, ()))) for c, m in vector.items())

    def free_part(count: int, m: int) -> list[FreeHost]:
        k = m - min(m, len(mine.get(count, ())))
        return trial.peek(stream, k, count) if k > 0 else []

    def order(vector: Mapping[int, int]) -> tuple[int, list[HostKey]]:
        hosts = [host_key(x) for c, m in vector.items() for x in mine.get(c, [])[:m]]
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


def _free_gpus(trial: Trial, stream: Stream) -> int:
    return sum(c * n for c, n in stream.available(trial.used).items())


def _fresh(req: Requirements, free: FreeHosts, arch: str, show_arch: bool) -> Outcome | Rejection:
    """Allocate a new cluster on one architecture from free hosts only."""
    return place_one(req, free, arch, show_arch, existing=None, known={})


@dataclass(frozen=True, slots=True)
class Existing:
    control_plane: tuple[str, ...]
    workers: tuple[str, ...]


@dataclass(slots=True)  # not frozen: made for every placement attempt, and never changed
class _Scope:
    """One placement attempt: the platform's needs on one architecture, and the trial it takes with."""

    req: Requirements
    free: FreeHosts
    arch: str
    where: _Where
    known: Mapping[str, Machine]
    trial: Trial

    def serves(self, uid: str) -> bool:
        m = self.known.get(uid)
        return m is None or (m.arch == self.arch and m.in_groups(self.req.groups))


def place_one(
    req: Requirements,
    free: FreeHosts,
    arch: str,
    show_arch: bool,
    existing: Existing | None,
    known: Mapping[str, Machine],
) -> Outcome | Rejection:
    """Place one platform on one architecture; with ``existing`` hosts, scale in place around them.

    GPU workers first, then the control plane, then the minimum of workers; each step takes its hosts
    in the same trial, so a later step only sees what the earlier ones left.
    """
    scope = _Scope(req, free, arch, _Where(req.groups, arch if show_arch else None), known, Trial())
    existing_workers = [u for u in existing.workers if scope.serves(u)] if existing is not None else []
    by_gpus = _place_gpu_workers(scope, existing_workers)
    if isinstance(by_gpus, Rejection):
        return by_gpus
    gpu_workers, gpus = by_gpus
    control_plane = _place_control_plane(scope, existing)
    if isinstance(control_plane, Rejection):
        return control_plane
    unknown_workers = [u for u in existing_workers if u not in known]
    workers = _place_min_workers(scope, gpu_workers + unknown_workers, existing_workers, gpus)
    if isinstance(workers, Rejection):
        return workers
    surplus = sum(gpus.values()) - req.requested_gpus
    return Outcome(sorted(control_plane), sorted(workers), dict(sorted(gpus.items())), surplus, scope.trial)


def _place_gpu_workers(
    scope: _Scope, existing_workers: Sequence[str]
) -> tuple[list[str], dict[str, int]] | Rejection:
    """GPU workers per family: exact choice; around an existing cluster, keep what still serves."""
    req, known = scope.req, scope.known
    gpu_workers: list[str] = []
    gpus: dict[str, int] = {}
    for family, request in req.gpus.items():
        mine = [known[u] for u in existing_workers if u in known and known[u].gpu_family == family]
        family_hosts = scope.free.workers_of(scope.arch, req.groups, family)
        got_gpus = _gpu_workers(scope.trial, family_hosts, request, mine)
        if got_gpus is None:
            short = sum(m.gpu_count for m in mine) + _free_gpus(scope.trial, family_hosts)
            return Rejection(
                Reason.INSUFFICIENT_COMPUTE, f"needs {request} {family} GPUs{scope.where}, {short} available"
            )
        gpu_workers += got_gpus[0]
        gpus[family] = got_gpus[1]
    return gpu_workers, gpus


def _place_control_plane(scope: _Scope, existing: Existing | None) -> list[str] | Rejection:
    """Control plane: keep the existing ones that serve, then take free candidates fewest GPUs first."""
    req, known = scope.req, scope.known
    control_plane: list[str] = []
    if existing is not None:
        kept = [u for u in existing.control_plane if scope.serves(u)]
        kept.sort(key=lambda u: _machine_order(known.get(u), u))
        control_plane = kept[: req.control_plane]
    missing_cp = req.control_plane - len(control_plane)
    if missing_cp > 0:
        got = scope.trial.take(scope.free.control_planes(scope.arch, req.groups), missing_cp)
        if len(got) < missing_cp:
            have = len(control_plane) + len(got)
            return Rejection(
                Reason.INSUFFICIENT_COMPUTE,
                f"needs {_hosts(req.control_plane, 'control-plane')}{scope.where}, {have} available",
            )
        control_plane += [f.uid for f in got]
    return control_plane


def _place_min_workers(
    scope: _Scope, workers: list[str], existing_workers: Sequence[str], gpus: dict[str, int]
) -> list[str] | Rejection:
    """Minimum workers: the current workers left over are offered first (sticky: a running cluster is
    not churned because a better host appeared), then free hosts in the seed's fill order. The GPUs of
    fill workers are added to ``gpus``."""
    req, known, free = scope.req, scope.known, scope.free
    missing = req.min_workers - len(workers)
    chosen = set(workers)
    leftovers = [known[u] for u in existing_workers if u in known and u not in chosen]
    leftovers = [m for m in leftovers if _fill_stage(m, req) is not None]
    leftovers.sort(key=lambda m: (_fill_stage(m, req), m.gpu_count, *host_key(m)))
    fill: list[tuple[int, str]] = []  # (gpus, family) of every fill host
    for m in leftovers[: max(missing, 0)]:
        workers.append(m.uid)
        fill.append((m.gpu_count, m.gpu_family or ""))
    missing = req.min_workers - len(workers)
    if missing > 0:
        for stage in range(FILL_STAGES):
            got = scope.trial.take(free.fill_stage(scope.arch, req.groups, req.gpus, stage), missing)
            for f in got:
                workers.append(f.uid)
                fill.append((f.gpus, free.pools[f.pool].family or ""))
            missing -= len(got)
            if missing == 0:
                break
        if missing > 0:
            have = req.min_workers - missing
            return Rejection(
                Reason.INSUFFICIENT_COMPUTE,
                f"needs {_hosts(req.min_workers, 'worker')}{scope.where}, {have} available",
            )
    for count, fill_family in fill:
        if count > 0 and fill_family:
            gpus[fill_family] = gpus.get(fill_family, 0) + count
    return workers


def _machine_order(m: Machine | None, uid: str) -> tuple[int, str, str]:
    return (0, "", uid) if m is None else (m.gpu_count, m.name, m.uid)


def _fill_stage(m: Machine, req: Requirements) -> int | None:
    if m.worker_tagged:
        return 0
    if m.gpu_family is not None and m.gpu_count > 0:
        return 1 if m.gpu_family in req.gpus else 2
    return None


def _outcome_key(arch: str, outcome: Outcome) -> tuple[int, int, str]:
    return (outcome.surplus, len(outcome.control_plane) + len(outcome.workers), arch)


def best_fresh(
    req: Requirements, free: FreeHosts, skip: str | None = None
) -> tuple[str, Outcome] | Rejection:
    arches = [a for a in free.arches(req.groups) if a != skip]
    if not arches:
        where = _where(req.groups, None)
        what = next(iter(f"{c} {f} GPUs" for f, c in req.gpus.items()), None)
        what = what or _hosts(req.control_plane, "control-plane")
        return Rejection(Reason.INSUFFICIENT_COMPUTE, f"needs {what}{where}, 0 available")
    show = len(arches) > 1
    best: tuple[str, Outcome] | None = None
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


def _cannot_beat(req: Requirements, free: FreeHosts, arch: str, best: tuple[int, int, str]) -> bool:
    """Whether a new cluster on ``arch`` surely comes after ``best`` (:func:`_outcome_key`), told from
    the GPU counts on offer alone: its GPU workers have at least the knapsack's surplus and hosts, fill
    workers only add GPUs, and a placed cluster has exactly its control plane and at least its minimum
    of workers. A platform tries every architecture; most lose on this bound without being placed."""
    surplus, gpu_hosts = 0, 0
    for family, request in req.gpus.items():
        vectors = optimal(free.workers_of(arch, req.groups, family).available({}), request)
        if not vectors:
            return True  # its GPUs cannot be met there
        surplus += sum(c * m for c, m in vectors[0].items()) - request
        gpu_hosts += sum(vectors[0].values())
    return (surplus, req.control_plane + max(req.min_workers, gpu_hosts), arch) > best
