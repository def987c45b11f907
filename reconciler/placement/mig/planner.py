"""The exact planner for one admission: a workload's MIG request placed without moving a bound instance,
or the refusal that says why (pure; the order of preference is in :mod:`reconciler.placement.mig`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, replace
from functools import lru_cache

from reconciler.model.mig import MigGpuType
from reconciler.placement.mig.layouts import valid_layouts
from reconciler.placement.mig.options import (
    Option,
    Shape,
    apply_option,
    gpu_options,
    request_layouts,
    shape_free,
    shape_of,
    shape_stranded,
    type_of,
)
from reconciler.placement.mig.search import best_options, leftover_requests
from reconciler.placement.mig.state import MigBinding, MigPlan, MigRefusal, MigShortfall, PoolGpu


def _switch_bound(fresh: Mapping[MigGpuType, int], request: Mapping[str, int]) -> int:
    """GPUs some feasible plan switches to MIG: each profile alone on whole free GPUs of one type
    (``fresh``: whole, free, unfrozen GPUs per type). An optimum switches no more, so no more whole GPUs
    need searching. Without such a plan: no bound."""
    bound = sum(request.values())
    for gpu_type, available in fresh.items():
        if any(gpu_type.profile(name) is None for name in request):
            continue
        needed = sum(-(-count // _most_per_gpu(gpu_type, name)) for name, count in request.items())
        if needed <= available:
            bound = min(bound, needed)
    return bound


@lru_cache(maxsize=256)
def _most_per_gpu(gpu_type: MigGpuType, name: str) -> int:
    return max(sum(1 for p, _ in layout if p == name) for layout in valid_layouts(gpu_type))


def _smallest_size(types: Iterable[MigGpuType], name: str) -> int:
    return min(profile.size for t in types if (profile := t.profile(name)) is not None)


def _shown_request(request: Mapping[str, int]) -> str:
    return ", ".join(f"{name} x{count}" for name, count in sorted(request.items()))


@dataclass(slots=True)
class _Census:
    """One sweep over the pool's GPUs in (host name, GPU index) order: their states, and what is searched."""

    order: list[int]
    shapes: list[Shape]
    count: Counter[Shape]
    stranded: int
    free: int


def _census(gpus: Sequence[PoolGpu], frozen_hosts: Set[str]) -> _Census:
    keys = [g.order for g in gpus]
    order = sorted(range(len(gpus)), key=keys.__getitem__)  # linear when already in order
    shapes = [shape_of(gpus[i], gpus[i].frozen or gpus[i].host in frozen_hosts) for i in order]
    count = Counter(shapes)
    stranded = sum(shape_stranded(s) * n for s, n in count.items())
    free = sum(shape_free(s) * n for s, n in count.items())
    return _Census(order, shapes, count, stranded, free)


def plan_mig_admission(
    gpus: Sequence[PoolGpu],
    request: Mapping[str, int],
    workload: str,
    frozen_hosts: Set[str] = frozenset(),
    *,
    growth_type: MigGpuType | None = None,
) -> MigPlan | MigRefusal:
    """Place one workload's MIG instances ({profile: count}) on the pool's GPUs, or say why not.

    A GPU is frozen when ``PoolGpu.frozen`` says so or its host is in ``frozen_hosts``: there only free
    instances of the existing layout can be bound, and a whole GPU stays whole. Bound instances never
    move. ``growth_type``: on a refusal, count how many new whole GPUs of that type would let it fit
    (``MigRefusal.growth``), from what the failed search already found.
    """
    wanted = {name: count for name, count in request.items() if count}
    if any(count < 0 for count in wanted.values()):
        raise ValueError(f"negative MIG instance count in request {dict(request)!r}")
    census = _census(gpus, frozen_hosts)
    if not wanted:
        return MigPlan((), tuple(gpus), 0, census.stranded)
    types = {g.gpu_type.key: g.gpu_type for g in gpus if g.gpu_type is not None}
    missing = sorted(name for name in wanted if not any(t.profile(name) for t in types.values()))
    if missing:
        offered = "; ".join(f"{key}: {', '.join(t.profiles)}" for key, t in sorted(types.items()))
        return MigRefusal(
            MigShortfall.MIG_UNSUPPORTED,
            f"MIG profile {', '.join(missing)} is not offered by the pool's GPUs"
            + (f" ({offered})" if offered else " (none is MIG-capable)"),
            0,
            0,
        )
    profiles = tuple(sorted(wanted))
    target = tuple(wanted[name] for name in profiles)
    # GPUs in the same state offer the same options, and an optimum uses the first of them before later
    # ones (the tie prefers earlier GPUs, all else equal), so at most one per requested instance of each
    # state can be touched, and no more whole GPUs than some feasible plan switches: the rest are left
    # out of the search.
    instances = sum(target)
    fresh: Counter[MigGpuType] = Counter()
    for shape, n in census.count.items():
        gpu_type, (_, whole_bound, frozen, layout) = type_of(shape), shape
        if gpu_type is not None and not whole_bound and not frozen and layout is None:
            fresh[gpu_type] += n
    switches = _switch_bound(fresh, wanted)
    seen: Counter[Shape] = Counter()
    searched: list[int] = []
    tables: list[tuple[Option, ...]] = []
    for i, shape in zip(census.order, census.shapes, strict=True):
        table = gpu_options(shape, profiles, target)
        if len(table) == 1:
            continue
        seen[shape] += 1
        if seen[shape] <= (instances if shape[3] is not None else min(instances, switches)):
            searched.append(i)
            tables.append(table)
    chosen = best_options(tables, target)
    if chosen is None:
        leftovers = leftover_requests(tables, target) if growth_type is not None else ()
        return _refusal(wanted, census, types, growth_type, leftovers)
    result = list(gpus)
    bindings: list[MigBinding] = []
    switched = 0
    stranded = census.stranded
    for i, table, option in zip(searched, tables, chosen, strict=True):
        if not option.bound:
            continue
        gpu = gpus[i]
        result[i] = replace(gpu, instances=apply_option(gpu, option, workload))
        switched += option.switched
        stranded += option.stranded - table[0].stranded
        bindings.extend(MigBinding(gpu.host, gpu.index, name, start) for name, start in option.bound)
    changed = tuple(sorted(i for i, option in zip(searched, chosen, strict=True) if option.bound))
    return MigPlan(tuple(bindings), tuple(result), switched, stranded, changed)


def _refusal(
    wanted: Mapping[str, int],
    census: _Census,
    types: Mapping[str, MigGpuType],
    growth_type: MigGpuType | None,
    leftovers: Iterable[tuple[int, ...]],
) -> MigRefusal:
    profiles = tuple(sorted(wanted))
    target = tuple(wanted[name] for name in profiles)
    needed = sum(count * _smallest_size(types.values(), name) for name, count in wanted.items())
    free = census.free
    reason = MigShortfall.POOL_CAPACITY_EXCEEDED if needed > free else MigShortfall.NO_FITTING_LAYOUT
    detail = (
        "not enough free MIG capacity"
        if reason is MigShortfall.POOL_CAPACITY_EXCEEDED
        else "enough slices in total, but no valid layout holds it without moving bound instances"
    )
    room: Counter[str] = Counter()
    for shape, n in census.count.items():
        table = gpu_options(shape, profiles, target)
        for k, name in enumerate(profiles):
            room[name] += n * max(option.counts[k] for option in table)
    growth = None if growth_type is None else fresh_gpus_needed(growth_type, profiles, leftovers)
    return MigRefusal(
        reason,
        f"needs {_shown_request(wanted)} ({needed} memory slices), {free} free in the pool: {detail}",
        needed,
        free,
        growth=growth,
        room=tuple((name, min(room[name], wanted[name])) for name in profiles),
    )


def describe_shortfall(
    gpus: Sequence[PoolGpu], request: Mapping[str, int], *, growth_type: MigGpuType | None = None
) -> MigRefusal:
    """The refusal of a request the caller found no place for (e.g. on no single host): memory slices
    needed and usable, room per profile, and the new whole GPUs of ``growth_type`` that would hold all
    of it (a new host). Profiles the GPUs do not offer are for ``plan_mig_admission`` to refuse."""
    wanted = {name: count for name, count in request.items() if count}
    types = {g.gpu_type.key: g.gpu_type for g in gpus if g.gpu_type is not None}
    profiles = tuple(sorted(wanted))
    return _refusal(
        wanted, _census(gpus, frozenset()), types, growth_type, [tuple(wanted[n] for n in profiles)]
    )


def fresh_gpus_needed(
    gpu_type: MigGpuType, profiles: tuple[str, ...], leftovers: Iterable[tuple[int, ...]]
) -> int | None:
    """The fewest new whole GPUs of ``gpu_type`` that hold one of ``leftovers`` (instances per profile);
    None when the type lacks a profile."""
    if any(gpu_type.profile(name) is None for name in profiles):
        return None
    vectors = {c.counts for c in request_layouts(gpu_type, profiles)}
    level = set(leftovers)
    gpus = 0
    while level:
        if any(not any(v) for v in level):
            return gpus
        following: set[tuple[int, ...]] = set()
        for remaining in level:
            for vector in vectors:
                if all(c <= r for c, r in zip(vector, remaining, strict=True)):
                    following.add(tuple(r - c for r, c in zip(remaining, vector, strict=True)))
        level = following
        gpus += 1
    return None


def frozen_gpus(gpus: Iterable[PoolGpu], earlier: Set[str]) -> frozenset[tuple[str, int]]:
    """The GPUs whose layout is frozen this pass, as (host, index): a workload of ``earlier`` (admitted in
    an earlier pass and still there) holds one of its instances. mig-parted re-creates every instance of
    a GPU it reconfigures, so such a GPU keeps its layout; the other GPUs of its host may change (a GPU
    whose configuration already matches is skipped). A GPU bound whole is never re-laid out either."""
    return frozenset(
        (g.host, g.index) for g in gpus if any(i.workload in earlier for i in g.instances or () if i.workload)
    )
