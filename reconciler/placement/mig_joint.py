"""Joint MIG planning of one pass: the pass's new MIG demand laid out together over the free GPUs (pure).

Admission places MIG requests one at a time, each the best for itself; that can fill a GPU with two 3g
where the pass as a whole wants a 3g and two 2g on it. ``plan_pass`` runs that greedy first (each
replica on the host where it fits best, as admission does), then re-plans what it placed as one
integer program (``mig_joint_solve``): per site (a host when each replica's instances must be on one
host, else the pool), how many *free* GPUs (MIG-capable, not frozen, not bound whole, no bound
instance) take each layout and which replicas go there, the free instances of the site's other GPUs
in MIG mode counted as they are; fewest GPUs laid out, then fewest stranded slices. The result
replaces the greedy's only when it uses fewer of the free GPUs (or as many, stranding fewer slices), so:

A request may also ask for whole GPUs on its replica's host (``WHOLE_GPUS`` in its mapping, with one
host per replica): each takes a GPU fully (no instance on it), any GPU of the host free whole (a free
GPU, or one without MIG). The greedy takes the host's lowest-index ones, on the first host where the
instances fit too, as admission takes a replica's whole GPUs; the joint plan keeps those lowest-index
GPUs of a site for them and lays its instances out from the highest index down.

- a bound instance, a frozen GPU and a GPU bound whole are never changed (a GPU in MIG mode holding a
  bound instance keeps its layout: only its free instances are used);
- the pass never uses more GPUs than the greedy on the same input, and admits the same requests;
- the same input gives the same plan: the solver runs on one thread with a fixed seed, a branch and
  bound *node* limit and a cap on the model's size, never a wall-clock budget, so a plan and the run
  that applies it decide the same. Without ``highspy`` (or with ``node_limit=0``) the greedy stands.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction

from reconciler.model.mig import MigGpuType
from reconciler.placement.mig import MigInstance, MigPlan, PoolGpu, plan_mig_admission, stranded_slices
from reconciler.placement.mig import MigRefusal as PlanRefusal
from reconciler.placement.mig_joint_solve import (
    NODE_LIMIT,
    Answer,
    Site,
    Vector,
    available,
    solve,
)
from reconciler.placement.mig_request import plan_on_one_host

Request = tuple[str, Mapping[str, int]]  # one replica: (workload label, {profile: count})
WHOLE_GPUS = "(whole GPUs)"  # a request's key for the whole GPUs it takes on its replica's host
Placed = tuple[str, tuple[tuple[int, str, int], ...]]  # (host, ((GPU index, profile, start), ...))


@dataclass(frozen=True, slots=True)
class PassPlan:
    """The GPUs after the pass (same order as given), the labels of the requests admitted and refused
    (in request order; a workload's label once per replica), where each admitted request's instances
    went (same order as ``admitted``), and which answer won (``joint`` or ``greedy``)."""

    gpus: tuple[PoolGpu, ...]
    admitted: tuple[str, ...]
    pending: tuple[str, ...]
    method: str
    placed: tuple[Placed, ...] = ()


def is_free(gpu: PoolGpu) -> bool:
    """A GPU the joint plan may lay out anew: MIG-capable, not frozen, not bound whole, no bound instance."""
    return (
        gpu.gpu_type is not None
        and not gpu.frozen
        and gpu.bound is None
        and all(i.workload is None for i in gpu.instances or ())
    )


def used_gpus(gpus: Sequence[PoolGpu]) -> int:
    """GPUs holding at least one bound instance."""
    return sum(1 for g in gpus if _used(g))


def _used(gpu: PoolGpu) -> bool:
    return any(i.workload is not None for i in gpu.instances or ())


def _whole_free(gpu: PoolGpu) -> bool:
    """A GPU a request's whole GPUs may take: not bound, not frozen, no bound instance."""
    return gpu.bound is None and not gpu.frozen and not _used(gpu)


def _split(request: Mapping[str, int]) -> tuple[dict[str, int], int]:
    """A request's instances per profile, and the whole GPUs it takes."""
    return {p: c for p, c in request.items() if p != WHOLE_GPUS}, request.get(WHOLE_GPUS, 0)


def _settled(gpus: Sequence[PoolGpu]) -> tuple[PoolGpu, ...]:
    """A GPU in MIG mode that holds a bound instance keeps its layout in a joint pass (frozen)."""
    return tuple(replace(g, frozen=True) if _used(g) and not g.frozen else g for g in gpus)


def greedy_pass(gpus: Sequence[PoolGpu], requests: Sequence[Request], *, one_host: bool = True) -> PassPlan:
    """Admission's way: each request in turn, the best for itself, on the host where it fits best when
    ``one_host`` (``plan_on_one_host``), else anywhere in the pool (``plan_mig_admission``)."""
    return _greedy(gpus, requests, one_host)[0]


def _greedy(
    gpus: Sequence[PoolGpu], requests: Sequence[Request], one_host: bool
) -> tuple[PassPlan, list[int]]:
    """The greedy pass and the positions of the requests it admitted."""
    state = list(_settled(gpus))
    where = {(g.host, g.index): k for k, g in enumerate(state)}
    refs = sorted(where, key=lambda ref: state[where[ref]].order)
    hosts = list(dict.fromkeys(ref[0] for ref in refs))
    taken: list[int] = []
    pending: list[str] = []
    placed: list[Placed] = []
    for n, (label, request) in enumerate(requests):
        mig, whole = _split(request)
        outcome: MigPlan | PlanRefusal | None
        if whole and one_host:
            outcome = _with_whole_gpus(state, where, refs, hosts, mig, whole, label)
        elif one_host:
            outcome = plan_on_one_host(refs, hosts, mig, label, lambda ref: state[where[ref]], lambda _: None)
        else:
            outcome = plan_mig_admission(state, mig, label)
        if outcome is None or isinstance(outcome, PlanRefusal):
            pending.append(label)
            continue
        for k in outcome.changed:
            gpu = outcome.gpus[k]
            state[where[(gpu.host, gpu.index)]] = gpu
        taken.append(n)
        host = outcome.bindings[0].host if outcome.bindings else ""
        placed.append((host, tuple(sorted((b.gpu, b.profile, b.start) for b in outcome.bindings))))
    admitted = tuple(requests[n][0] for n in taken)
    return PassPlan(tuple(state), admitted, tuple(pending), "greedy", tuple(placed)), taken


def _with_whole_gpus(
    state: list[PoolGpu],
    where: Mapping[tuple[str, int], int],
    refs: Sequence[tuple[str, int]],
    hosts: Sequence[str],
    mig: Mapping[str, int],
    whole: int,
    label: str,
) -> MigPlan | None:
    """A replica with whole GPUs, the greedy's way: on the first host (in GPU order) with that many GPUs
    free whole and room for the instances beside them, its lowest-index ones taken whole (bound to
    ``label`` in ``state``). None when no host holds it."""
    for host in hosts:
        mine = (where[ref] for ref in refs if ref[0] == host)
        spots = sorted((state[k].index, k) for k in mine if _whole_free(state[k]))
        if len(spots) < whole:
            continue
        saved = [(k, state[k]) for _, k in spots[:whole]]
        for k, gpu in saved:
            state[k] = replace(gpu, bound=label, instances=None)
        outcome = plan_on_one_host(refs, [host], mig, label, lambda ref: state[where[ref]], lambda _: None)
        if isinstance(outcome, MigPlan):
            return outcome
        for k, gpu in saved:
            state[k] = gpu
    return None


def plan_pass(
    gpus: Sequence[PoolGpu],
    requests: Sequence[Request],
    *,
    one_host: bool = True,
    node_limit: int = NODE_LIMIT,
) -> PassPlan:
    """The pass's requests planned jointly over the free GPUs, or the greedy's answer when that is no
    better (see the module docstring)."""
    greedy, taken = _greedy(gpus, requests, one_host)
    if node_limit <= 0 or not taken or not available():
        return greedy
    start = _settled(gpus)
    admitted = [requests[n] for n in taken]
    asked: Counter[str] = Counter()
    for _, request in admitted:
        asked.update({p: c for p, c in _split(request)[0].items() if c > 0})
    whole = sum(_split(request)[1] for _, request in admitted)
    if _cost(start, greedy.gpus) <= fewest(start, asked, whole):
        return greedy  # no plan uses fewer GPUs or strands fewer slices: no program to solve
    site_of: dict[str, int] = {}
    members: list[list[int]] = []  # per site, its GPUs' positions in GPU order
    for k in sorted(range(len(start)), key=lambda k: start[k].order):
        name = start[k].host if one_host else ""
        if name not in site_of:
            site_of[name] = len(members)
            members.append([])
        members[site_of[name]].append(k)
    profiles = tuple(sorted({p for _, r in admitted for p, c in _split(r)[0].items() if c}))
    shape_ids: dict[tuple[Vector, int], int] = {}
    shape_of: list[int] = []
    for _, request in admitted:
        mig, n = _split(request)
        key = (tuple(mig.get(p, 0) for p in profiles), n)
        shape_of.append(shape_ids.setdefault(key, len(shape_ids)))
    counts = Counter(shape_of)
    shapes = [(vector, counts[s], n) for (vector, n), s in shape_ids.items()]
    sites = [_site(start, ks, profiles) for ks in members]
    greedy_sites = [site_of[host if one_host else ""] for host, _ in greedy.placed]
    weights = tuple(_smallest(start, p) for p in profiles)
    answer = solve(sites, shapes, profiles, weights, node_limit, _cost(start, greedy.gpus))
    if answer is None:
        return greedy
    out = _lay_out(start, members, answer, [n for _, _, n in shapes])
    if out is None:
        return greedy
    laid, kept = out
    joint = _bind(start, laid, kept, members, answer, admitted, shape_of, greedy_sites, greedy.pending)
    if joint is None or _cost(start, joint.gpus) >= _cost(start, greedy.gpus):
        return greedy
    return joint


def fewest(start: Sequence[PoolGpu], asked: Mapping[str, int], whole: int = 0) -> tuple[int, int]:
    """A lower bound on what any plan of ``asked`` (instances per profile, of one family, and ``whole``
    GPUs taken whole, each a GPU of its own that strands nothing) costs on the
    free GPUs (``is_free``), as (GPUs it starts using, slices they strand): GPUs for what the free
    instances of the other GPUs cannot hold, in memory and in compute slices, over the largest free GPU;
    slices on that many GPUs, when they are all of one type and no other GPU has a free instance: the
    memory the asked instances leave minus what the compute they leave can cover (an instance covers at
    most its type's best memory per compute slice). Cheap: a pass the greedy lays out at that cost
    needs no program."""
    spare: Counter[str] = Counter()
    types = {g.gpu_type.key: g.gpu_type for g in start if g.gpu_type is not None and is_free(g)}
    for g in start:
        if g.gpu_type is not None and g.bound is None and not is_free(g):
            spare.update(i.profile for i in g.instances or () if i.workload is None)
    if not types:
        return whole, 0
    memory = compute = 0
    for profile, count in asked.items():
        left = max(0, count - spare[profile])
        sizes = [(p.size, p.compute) for t in types.values() if (p := t.profile(profile)) is not None]
        if left and sizes:
            memory += left * min(s for s, _ in sizes)
            compute += left * min(c for _, c in sizes)
    most_memory = max(t.memory_slices for t in types.values())
    most_compute = max(t.compute_slices for t in types.values())
    gpus = max(-(-memory // most_memory), -(-compute // most_compute))
    if len(types) > 1 or +spare:
        return gpus + whole, 0
    (only,) = types.values()
    per_compute = max(Fraction(p.size, p.compute) for p in only.profiles.values())
    left_memory = gpus * only.memory_slices - memory
    left_compute = gpus * only.compute_slices - compute
    return gpus + whole, max(0, math.ceil(left_memory - per_compute * left_compute))


def _site(start: Sequence[PoolGpu], ks: Sequence[int], profiles: tuple[str, ...]) -> Site:
    """What one site offers: its free GPUs per type, the free instances of its other GPUs in MIG mode,
    and its GPUs without MIG free whole."""
    types: Counter[str] = Counter()
    by_key: dict[str, MigGpuType] = {}
    spare: Counter[str] = Counter()
    plain = 0
    for k in ks:
        gpu = start[k]
        if gpu.gpu_type is None and _whole_free(gpu):
            plain += 1
        if gpu.gpu_type is None or gpu.bound is not None:
            continue
        if is_free(gpu):
            types[gpu.gpu_type.key] += 1
            by_key[gpu.gpu_type.key] = gpu.gpu_type
        elif gpu.instances is not None:
            spare.update(i.profile for i in gpu.instances if i.workload is None)
    free = tuple((by_key[key], n) for key, n in sorted(types.items()))
    return Site(free, tuple(spare.get(p, 0) for p in profiles), plain)


def _smallest(gpus: Sequence[PoolGpu], profile: str) -> int:
    """Memory slices an instance of the profile takes at least on these GPUs."""
    sizes = {p.size for g in gpus if g.gpu_type is not None if (p := g.gpu_type.profile(profile)) is not None}
    return min(sizes, default=1)


def _lay_out(
    start: Sequence[PoolGpu], members: Sequence[Sequence[int]], answer: Answer, wholes: Sequence[int]
) -> tuple[dict[int, PoolGpu], list[list[int]]] | None:
    """The free GPUs of each site laid out as the answer says (in GPU order, layouts in a fixed order),
    and per site the GPUs kept for whole GPUs (``wholes``: per shape, of each replica): its lowest-index
    GPUs free whole, the layouts then on its highest-index free GPUs. None when they would meet."""
    laid: dict[int, PoolGpu] = {}
    kept: list[list[int]] = []
    for ks, layouts, per in zip(members, answer.layouts, answer.replicas, strict=True):
        need = sum(wholes[shape] * n for shape, n in per)
        order = sorted(ks, key=lambda k: start[k].index, reverse=True) if need else ks
        for gpu_type, layout, n in sorted(layouts, key=lambda e: (e[0].key, sorted(e[1]))):
            spots = [
                k for k in order if k not in laid and is_free(start[k]) and start[k].gpu_type == gpu_type
            ]
            if len(spots) < n:
                return None
            instances = tuple(MigInstance(s, name) for name, s in sorted(layout, key=lambda p: (p[1], p[0])))
            for k in spots[:n]:
                laid[k] = replace(start[k], instances=instances)
        lowest = sorted((k for k in ks if _whole_free(start[k])), key=lambda k: start[k].index)[:need]
        if len(lowest) < need or any(k in laid for k in lowest):
            return None
        kept.append(lowest)
    return laid, kept


def _bind(
    start: Sequence[PoolGpu],
    laid: Mapping[int, PoolGpu],
    kept: Sequence[Sequence[int]],
    members: Sequence[Sequence[int]],
    answer: Answer,
    admitted: Sequence[Request],
    shape_of: Sequence[int],
    greedy_sites: Sequence[int],
    pending: tuple[str, ...],
) -> PassPlan | None:
    """Each admitted request on a site the answer gives its shape (its greedy site when that one still
    has room, else the first), its whole GPUs the next of those ``kept`` there, its instances on the
    site's free instances: GPUs already in MIG mode first, then in GPU order, lowest start first. None
    when something does not fit (never expected)."""
    room = [Counter(dict(per)) for per in answer.replicas]
    state = [laid.get(k, g) for k, g in enumerate(start)]
    whole_left = [list(ks) for ks in kept]
    placed: list[Placed] = []
    for (label, request), shape, preferred in zip(admitted, shape_of, greedy_sites, strict=True):
        site = (
            preferred if room[preferred][shape] else next((s for s, r in enumerate(room) if r[shape]), None)
        )
        if site is None:
            return None
        room[site][shape] -= 1
        order = sorted(
            (k for k in members[site] if k in laid or not is_free(start[k])),
            key=lambda k: (k in laid, start[k].order),
        )
        mig, whole = _split(request)
        for k in whole_left[site][:whole]:
            state[k] = replace(start[k], bound=label, instances=None)
        del whole_left[site][:whole]
        got: list[tuple[int, str, int]] = []
        for profile, count in sorted(mig.items()):
            for _ in range(count):
                spot = next(
                    (
                        (k, j)
                        for k in order
                        if state[k].gpu_type is not None and state[k].bound is None
                        for j, i in enumerate(state[k].instances or ())
                        if i.profile == profile and i.workload is None
                    ),
                    None,
                )
                if spot is None:
                    return None
                k, j = spot
                slots = list(state[k].instances or ())
                slots[j] = replace(slots[j], workload=label)
                state[k] = replace(state[k], instances=tuple(slots))
                got.append((state[k].index, profile, slots[j].start))
        host = start[members[site][0]].host
        placed.append((host, tuple(sorted(got))))
    for k in laid:
        if not _used(state[k]):
            state[k] = start[k]  # a GPU the answer laid out but nothing uses stays as it came in
    labels = tuple(label for label, _ in admitted)
    return PassPlan(tuple(state), labels, pending, "joint", tuple(placed))


def _cost(start: Sequence[PoolGpu], after: Sequence[PoolGpu]) -> tuple[int, int]:
    """GPUs the pass starts using (holding a bound instance now, none before, or bound whole now and not
    before), then the slices they strand."""
    used = [g for g0, g in zip(start, after, strict=True) if _used(g) and not _used(g0)]
    whole = sum(1 for g0, g in zip(start, after, strict=True) if g.bound is not None and g0.bound is None)
    return len(used) + whole, sum(stranded_slices(g) for g in used)
