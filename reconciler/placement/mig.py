"""MIG layouts: per-GPU layouts, the exact planner for one admission, return to whole, realisation.

See docs/mig.md. Pure: no I/O, no clock. Vocabulary:

- a *placement* is ``(profile name, start)`` on a GPU's memory-slice axis; a *layout* is a set of them that
  do not overlap, start where the profile may start, stay within the GPU's slices, use at most the GPU's
  compute slices and hold at most one media-extension (``+me``) instance;
- a GPU of a pool is whole (MIG off: free, or bound whole to a workload) or in MIG mode with instances,
  each bound to a workload or free;
- *stranded* slices are the memory slices of a GPU in MIG mode that no instance covers.

The planner places one workload's MIG request ({profile: count}) without moving any bound instance,
minimising lexicographically (1) GPUs newly switched to MIG mode, (2) stranded slices over the pool, (3)
the GPUs used in (host name, GPU index) order: as many instances as possible on the first GPU, then the
next... Within a GPU it prefers the placement that leaves room for the largest profiles (small
instances go where they block no 4g), and fills what the request leaves with free instances chosen to
strand as little as possible (then most compute, fewest, lowest starts), so a GPU frozen next pass
still has free instances to offer. Method: dynamic programming over the GPUs in that order with the remaining
request as state and per-GPU option tables built from the enumerated layouts (exact; see docs/mig.md).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, replace
from enum import StrEnum
from functools import lru_cache
from typing import Any

from reconciler.model.mig import MigGpuType, MigProfile

Placement = tuple[str, int]  # (profile name, start memory slice)
Layout = frozenset[Placement]

MIG_CONFIG_LABEL = "nvidia.com/mig.config"
ALL_DISABLED = "all-disabled"  # the GPU Operator labels MIG-capable nodes without a config with this


# --- pool state -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, order=True)
class MigInstance:
    """One GPU instance of a GPU in MIG mode; ``workload`` is ``namespace/name`` or None when free."""

    start: int
    profile: str
    workload: str | None = None


@dataclass(frozen=True, slots=True)
class PoolGpu:
    """One physical GPU of a pool, as the planner sees it.

    ``instances`` is None for a whole GPU (MIG off) and a tuple (possibly empty) in MIG mode. ``bound`` is
    the workload holding a whole GPU. ``gpu_type`` is None for a GPU that is not MIG-capable. ``host`` is
    the host's identity (its uid in plans); ``host_name``, when given, is what ties break on. ``frozen``:
    the layout stays this pass (a workload admitted in an earlier pass holds an instance of it): only
    its free instances can be bound, and it does not return to whole.
    """

    host: str
    index: int
    gpu_type: MigGpuType | None
    bound: str | None = None
    instances: tuple[MigInstance, ...] | None = None
    host_name: str = ""
    frozen: bool = False

    @property
    def mig(self) -> bool:
        return self.instances is not None

    @property
    def order(self) -> tuple[str, int]:
        return (self.host_name or self.host, self.index)


@dataclass(frozen=True, slots=True)
class MigBinding:
    """Where one instance of a workload's request went."""

    host: str
    gpu: int
    profile: str
    start: int


@dataclass(frozen=True, slots=True)
class MigPlan:
    """An admission's MIG placement and the pool's GPUs after it (same order as given)."""

    bindings: tuple[MigBinding, ...]
    gpus: tuple[PoolGpu, ...]
    switched: int  # GPUs this admission switches from whole to MIG mode
    stranded: int  # stranded memory slices over the pool's GPUs in MIG mode, after it
    changed: tuple[int, ...] = ()  # positions in ``gpus`` of the GPUs this admission changed


class MigShortfall(StrEnum):
    """Why a MIG request cannot be placed (the condition reasons of pool admission)."""

    MIG_UNSUPPORTED = "MIGUnsupported"
    NO_FITTING_LAYOUT = "NoFittingLayout"
    POOL_CAPACITY_EXCEEDED = "PoolCapacityExceeded"


@dataclass(frozen=True, slots=True)
class MigRefusal:
    reason: MigShortfall
    message: str
    needed_slices: int  # memory slices the request needs (0 for MIGUnsupported)
    free_slices: int  # memory slices it could use: free whole GPUs, free space, free instances
    # New whole GPUs of the ``growth_type`` asked for with which it fits (None: not asked, or never).
    growth: int | None = None
    # Per requested profile, up to the count asked: instances of it alone the pool could still take.
    room: tuple[tuple[str, int], ...] = ()


# --- per-GPU layouts --------------------------------------------------------------------------------


def _profile(gpu_type: MigGpuType, name: str) -> MigProfile:
    profile = gpu_type.profile(name)
    if profile is None:
        raise ValueError(f"{gpu_type.key} has no MIG profile {name!r}")
    return profile


def placement_mask(gpu_type: MigGpuType, placement: Placement) -> int:
    """The memory slices a placement covers, as a bit mask."""
    profile = _profile(gpu_type, placement[0])
    return ((1 << profile.size) - 1) << placement[1]


def all_placements(gpu_type: MigGpuType) -> tuple[Placement, ...]:
    """Every (profile, start) the GPU type allows, ordered by start then profile."""
    return tuple(sorted((p.name, s) for p in gpu_type.profiles.values() for s in p.starts))


@lru_cache(maxsize=64)
def valid_layouts(gpu_type: MigGpuType) -> tuple[Layout, ...]:
    """Every valid layout of a GPU of this type, the empty one included."""
    placements = all_placements(gpu_type)
    masks = [placement_mask(gpu_type, p) for p in placements]
    profiles = [_profile(gpu_type, name) for name, _ in placements]
    found: list[Layout] = []

    def grow(first: int, chosen: list[Placement], mask: int, compute: int, media: int) -> None:
        found.append(frozenset(chosen))
        for i in range(first, len(placements)):
            profile = profiles[i]
            if mask & masks[i] or compute + profile.compute > gpu_type.compute_slices:
                continue
            if profile.media and media >= gpu_type.max_media:
                continue
            chosen.append(placements[i])
            grow(i + 1, chosen, mask | masks[i], compute + profile.compute, media + profile.media)
            chosen.pop()

    grow(0, [], 0, 0, 0)
    return tuple(found)


@lru_cache(maxsize=64)
def _layout_set(gpu_type: MigGpuType) -> frozenset[Layout]:
    return frozenset(valid_layouts(gpu_type))


def is_valid_layout(gpu_type: MigGpuType, placements: Sequence[Placement]) -> bool:
    """True when the placements (each once) form a valid layout of the GPU type."""
    layout = frozenset(placements)
    return len(layout) == len(placements) and layout in _layout_set(gpu_type)


def layout_mask(gpu_type: MigGpuType, layout: Iterable[Placement]) -> int:
    mask = 0
    for placement in layout:
        mask |= placement_mask(gpu_type, placement)
    return mask


def layout_compute(gpu_type: MigGpuType, layout: Iterable[Placement]) -> int:
    return sum(_profile(gpu_type, name).compute for name, _ in layout)


def uncovered(gpu_type: MigGpuType, mask: int) -> int:
    return gpu_type.memory_slices - mask.bit_count()


@dataclass(frozen=True, slots=True)
class _Extension:
    stranded: int  # the fewest uncovered slices any completion leaves
    padding: tuple[Placement, ...]  # the completion that does (free instances to add)
    room: tuple[int, ...]  # instances of each profile, largest first, that still fit (more is better)


@lru_cache(maxsize=64)
def _plain_layouts(gpu_type: MigGpuType) -> tuple[tuple[int, int, int, tuple[Placement, ...]], ...]:
    """(mask, compute, instances, placements by start) of every layout without ``+me`` instances."""
    return tuple(
        (
            layout_mask(gpu_type, layout),
            layout_compute(gpu_type, layout),
            len(layout),
            tuple(sorted(layout, key=_by_start)),
        )
        for layout in valid_layouts(gpu_type)
        if not any(_profile(gpu_type, name).media for name, _ in layout)
    )


@lru_cache(maxsize=8192)
def _extension(gpu_type: MigGpuType, mask: int, compute: int) -> _Extension:
    """How well the free space around ``mask`` can be used: the best padding and the room left.

    Padding is plain instances (``+me`` ones are made only on request): fewest uncovered memory slices,
    then the most compute slices in use, then the fewest instances, then the lowest starts.
    """
    best: tuple[int, int, int, tuple[Placement, ...]] | None = None
    budget = gpu_type.compute_slices - compute
    for extra, more, count, placements in _plain_layouts(gpu_type):
        if extra & mask or more > budget:
            continue
        key = (uncovered(gpu_type, mask | extra), -more, count, placements)
        if best is None or key < best:
            best = key
    assert best is not None  # the empty layout always qualifies
    return _Extension(stranded=best[0], padding=best[3], room=_room(gpu_type, mask, compute))


def _room(gpu_type: MigGpuType, mask: int, compute: int) -> tuple[int, ...]:
    """How many instances of each plain profile still fit, largest profiles first.

    Instances of one size placed at the earliest free allowed start is optimal for equal intervals.
    """
    plain = sorted(
        (p for p in gpu_type.profiles.values() if not p.media), key=lambda p: (-p.size, -p.compute, p.name)
    )
    room: list[int] = []
    for profile in plain:
        taken, count = mask, 0
        for start in profile.starts:
            span = ((1 << profile.size) - 1) << start
            if not span & taken:
                taken |= span
                count += 1
        room.append(min(count, (gpu_type.compute_slices - compute) // profile.compute))
    return tuple(room)


def _by_start(placement: Placement) -> tuple[int, str]:
    return (placement[1], placement[0])


def state_of(gpu: PoolGpu) -> Hashable:
    """What the planner sees of a GPU: GPUs in the same state are planned alike (whoever holds them)."""
    return _shape(gpu, gpu.frozen)


def usable_slices(gpu: PoolGpu) -> int:
    """Memory slices of this GPU a new request could use (0 when bound whole or held entirely)."""
    return _shape_free(_shape(gpu, gpu.frozen))


def stranded_slices(gpu: PoolGpu) -> int:
    """Memory slices of a GPU in MIG mode that no instance covers (0 for a whole GPU)."""
    if gpu.instances is None or gpu.gpu_type is None:
        return 0
    return uncovered(gpu.gpu_type, layout_mask(gpu.gpu_type, ((i.profile, i.start) for i in gpu.instances)))


# --- the planner ------------------------------------------------------------------------------------

# What a GPU's options depend on: its type, whether it is bound whole, whether its layout is frozen, and
# its layout as (profile, start, bound?) triples (None: whole). Not who holds the instances, so GPUs in
# the same state share one option table, across admissions too.
# The type is named by its key (hashing a catalogue entry is slow; shapes are hashed per GPU per admission).
_Shape = tuple[str | None, bool, bool, tuple[tuple[str, int, bool], ...] | None]
_TYPES: dict[str, MigGpuType] = {}


def _shape(gpu: PoolGpu, frozen: bool) -> _Shape:
    gpu_type = gpu.gpu_type
    key = None
    if gpu_type is not None:
        key = gpu_type.key
        if key not in _TYPES:
            _TYPES[key] = gpu_type
    if gpu.instances is None:
        return (key, gpu.bound is not None, frozen, None)
    layout = tuple((i.profile, i.start, i.workload is not None) for i in gpu.instances)
    return (key, gpu.bound is not None, frozen, layout)


def _type_of(shape: _Shape) -> MigGpuType | None:
    return None if shape[0] is None else _TYPES[shape[0]]


@dataclass(frozen=True, slots=True)
class _Option:
    """One way to use one GPU for the request (who asks does not matter: see ``_apply``)."""

    counts: tuple[int, ...]  # instances per requested profile placed here
    switched: int
    stranded: int
    tie: tuple[Any, ...]
    bound: tuple[Placement, ...]  # the placements bound to the workload
    # Re-laid out: the free instances around the kept and bound ones. None: the layout stays (a frozen
    # GPU's free instances are bound, or nothing changes).
    padding: tuple[Placement, ...] | None


@lru_cache(maxsize=16384)
def _gpu_options(shape: _Shape, profiles: tuple[str, ...], request: tuple[int, ...]) -> tuple[_Option, ...]:
    """The useful options of a GPU in this state, the unchanged one first: for each count vector it can
    hold, the best way to hold it."""
    gpu_type, (_, whole_bound, frozen, layout) = _type_of(shape), shape
    unchanged = _Option((0,) * len(profiles), 0, _shape_stranded(shape), (0, (), (), ()), (), None)
    if gpu_type is None or whole_bound or (frozen and layout is None):
        return (unchanged,)
    if frozen:
        assert layout is not None
        return (unchanged, *_bind_free_instances(gpu_type, layout, profiles, request, unchanged.stranded))
    fixed = [(name, start) for name, start, bound in layout or () if bound]
    fixed_mask = layout_mask(gpu_type, fixed)
    fixed_compute = layout_compute(gpu_type, fixed)
    fixed_media = sum(_profile(gpu_type, name).media for name, _ in fixed)
    best: dict[tuple[int, ...], _Option] = {}
    for new in _request_layouts(gpu_type, profiles):
        if any(c > r for c, r in zip(new.counts, request, strict=True)) or new.mask & fixed_mask:
            continue
        compute = fixed_compute + new.compute
        if compute > gpu_type.compute_slices or fixed_media + new.media > gpu_type.max_media:
            continue
        ext = _extension(gpu_type, fixed_mask | new.mask, compute)
        tie = (-len(new.placements), tuple(-n for n in ext.room), new.placements, ext.padding)
        current = best.get(new.counts)
        if current is not None and (current.stranded, current.tie) <= (ext.stranded, tie):
            continue
        switched = 0 if layout is not None else 1
        best[new.counts] = _Option(new.counts, switched, ext.stranded, tie, new.placements, ext.padding)
    return (unchanged, *best.values())


@lru_cache(maxsize=16384)
def _shape_stranded(shape: _Shape) -> int:
    gpu_type, layout = _type_of(shape), shape[3]
    if gpu_type is None or layout is None:
        return 0
    return uncovered(gpu_type, layout_mask(gpu_type, ((name, start) for name, start, _ in layout)))


@lru_cache(maxsize=16384)
def _shape_free(shape: _Shape) -> int:
    """Memory slices a new request could use on a GPU in this state."""
    gpu_type, (_, whole_bound, frozen, layout) = _type_of(shape), shape
    if gpu_type is None or whole_bound:
        return 0
    if layout is None:
        return 0 if frozen else gpu_type.memory_slices
    if frozen:
        return sum(_profile(gpu_type, name).size for name, _, bound in layout if not bound)
    return uncovered(gpu_type, layout_mask(gpu_type, ((n, s) for n, s, bound in layout if bound)))


def _apply(gpu: PoolGpu, option: _Option, workload: str) -> tuple[MigInstance, ...]:
    """The GPU's instances once the option is taken by ``workload``."""
    if option.padding is None:
        assert gpu.instances is not None
        taken = set(option.bound)
        return tuple(
            replace(i, workload=workload) if i.workload is None and (i.profile, i.start) in taken else i
            for i in gpu.instances
        )
    kept = [i for i in gpu.instances or () if i.workload is not None]
    return tuple(
        sorted(
            (
                *kept,
                *(MigInstance(start, name, workload) for name, start in option.bound),
                *(MigInstance(start, name, None) for name, start in option.padding),
            )
        )
    )


@dataclass(frozen=True, slots=True)
class _Candidate:
    """A non-empty valid layout made of requested profiles only, with what checking it against a GPU needs."""

    placements: tuple[Placement, ...]  # by start
    counts: tuple[int, ...]  # per requested profile
    mask: int
    compute: int
    media: int


@lru_cache(maxsize=256)
def _request_layouts(gpu_type: MigGpuType, profiles: tuple[str, ...]) -> tuple[_Candidate, ...]:
    position = {name: k for k, name in enumerate(profiles)}
    found: list[_Candidate] = []
    for layout in valid_layouts(gpu_type):
        if not layout or any(name not in position for name, _ in layout):
            continue
        counts = [0] * len(profiles)
        for name, _ in layout:
            counts[position[name]] += 1
        found.append(
            _Candidate(
                placements=tuple(sorted(layout, key=_by_start)),
                counts=tuple(counts),
                mask=layout_mask(gpu_type, layout),
                compute=layout_compute(gpu_type, layout),
                media=sum(_profile(gpu_type, name).media for name, _ in layout),
            )
        )
    return tuple(found)


def _bind_free_instances(
    gpu_type: MigGpuType,
    layout: tuple[tuple[str, int, bool], ...],
    profiles: tuple[str, ...],
    request: tuple[int, ...],
    stranded: int,
) -> list[_Option]:
    """A frozen GPU offers only its free instances, lowest start first."""
    free = {name: sorted(start for n, start, bound in layout if n == name and not bound) for name in profiles}
    limits = [min(len(free[name]), r) for name, r in zip(profiles, request, strict=True)]
    options: list[_Option] = []
    for vector in _vectors(limits):
        if not any(vector):
            continue
        placed = tuple(
            sorted(
                ((name, start) for name, n in zip(profiles, vector, strict=True) for start in free[name][:n]),
                key=_by_start,
            )
        )
        options.append(_Option(vector, 0, stranded, (-len(placed), (), placed, ()), placed, None))
    return options


def _vectors(limits: Sequence[int]) -> Iterable[tuple[int, ...]]:
    if not limits:
        yield ()
        return
    for head in range(limits[0] + 1):
        for tail in _vectors(limits[1:]):
            yield (head, *tail)


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
    shapes: list[_Shape]
    count: Counter[_Shape]
    stranded: int
    free: int


def _census(gpus: Sequence[PoolGpu], frozen_hosts: Set[str]) -> _Census:
    keys = [g.order for g in gpus]
    order = sorted(range(len(gpus)), key=keys.__getitem__)  # linear when already in order
    shapes = [_shape(gpus[i], gpus[i].frozen or gpus[i].host in frozen_hosts) for i in order]
    count = Counter(shapes)
    stranded = sum(_shape_stranded(s) * n for s, n in count.items())
    free = sum(_shape_free(s) * n for s, n in count.items())
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
        gpu_type, (_, whole_bound, frozen, layout) = _type_of(shape), shape
        if gpu_type is not None and not whole_bound and not frozen and layout is None:
            fresh[gpu_type] += n
    switches = _switch_bound(fresh, wanted)
    seen: Counter[_Shape] = Counter()
    searched: list[int] = []
    tables: list[tuple[_Option, ...]] = []
    for i, shape in zip(census.order, census.shapes, strict=True):
        table = _gpu_options(shape, profiles, target)
        if len(table) == 1:
            continue
        seen[shape] += 1
        if seen[shape] <= (instances if shape[3] is not None else min(instances, switches)):
            searched.append(i)
            tables.append(table)
    chosen = _search(tables, target)
    if chosen is None:
        leftovers = _leftovers(tables, target) if growth_type is not None else ()
        return _refusal(wanted, census, types, growth_type, leftovers)
    result = list(gpus)
    bindings: list[MigBinding] = []
    switched = 0
    stranded = census.stranded
    for i, table, option in zip(searched, tables, chosen, strict=True):
        if not option.bound:
            continue
        gpu = gpus[i]
        result[i] = replace(gpu, instances=_apply(gpu, option, workload))
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
        table = _gpu_options(shape, profiles, target)
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


@dataclass(frozen=True, slots=True)
class _Packing:
    """Count vectors packed into one integer: a field per profile with a guard bit that a subtraction
    below zero clears."""

    width: int
    fields: int

    @staticmethod
    def of(target: Sequence[int]) -> _Packing:
        return _Packing(max(target).bit_length() + 1, len(target))

    @property
    def guard(self) -> int:
        return sum(1 << (k * self.width + self.width - 1) for k in range(self.fields))

    def pack(self, counts: Sequence[int]) -> int:
        return sum(c << (k * self.width) for k, c in enumerate(counts))

    def unpack(self, code: int) -> tuple[int, ...]:
        mask = (1 << self.width) - 1
        return tuple((code >> (k * self.width)) & mask for k in range(self.fields))


def _forward(
    codes: Sequence[Sequence[int]], start: int, packing: _Packing, room: Sequence[int] | None
) -> list[set[int]]:
    """The remaining requests reachable before each position (and after the last), from ``start``;
    ``room`` (most the GPUs from a position on can take) cuts states that cannot finish."""
    guard = packing.guard

    def fits(small: int, big: int) -> bool:
        return ((big | guard) - small) & guard == guard

    reachable: list[set[int]] = [{start} if room is None or fits(start, room[0]) else set()]
    for pos, row in enumerate(codes):
        following: set[int] = set()
        for remaining in reachable[pos]:
            for code in row:
                left = (remaining | guard) - code
                if left & guard == guard and (room is None or fits(left & ~guard, room[pos + 1])):
                    following.add(left & ~guard)
        reachable.append(following)
    return reachable


def _leftovers(tables: Sequence[Sequence[_Option]], target: tuple[int, ...]) -> set[tuple[int, ...]]:
    """What may remain of the request once the searched GPUs took what they can (every way)."""
    packing = _Packing.of(target)
    codes = [[packing.pack(option.counts) for option in table] for table in tables]
    return {packing.unpack(code) for code in _forward(codes, packing.pack(target), packing, None)[-1]}


def fresh_gpus_needed(
    gpu_type: MigGpuType, profiles: tuple[str, ...], leftovers: Iterable[tuple[int, ...]]
) -> int | None:
    """The fewest new whole GPUs of ``gpu_type`` that hold one of ``leftovers`` (instances per profile);
    None when the type lacks a profile."""
    if any(gpu_type.profile(name) is None for name in profiles):
        return None
    vectors = {c.counts for c in _request_layouts(gpu_type, profiles)}
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


def _search(tables: Sequence[Sequence[_Option]], target: tuple[int, ...]) -> list[_Option] | None:
    """Exact lexicographic minimum over one option per GPU whose counts add up to ``target``.

    Key of a choice: (GPUs switched, stranded slices, instances per GPU in order (more on earlier GPUs),
    then per GPU in order its layout's tie). The key of the GPUs from ``pos`` on depends only on ``pos``
    and the remaining request, so dynamic programming over (pos, remaining) is exact: a forward pass
    finds the reachable states (suffix capacities cut those that cannot finish), a backward pass the best
    option of each. The two sequence parts of a key are replaced by their rank among the states of the
    next position, so keys stay flat however many GPUs there are.
    """
    n = len(tables)
    packing = _Packing.of(target)
    guard = packing.guard
    codes = [[packing.pack(option.counts) for option in table] for table in tables]
    # Most instances the GPUs from pos on can still take, per profile (capped): an upper bound.
    room = [0] * (n + 1)
    totals = [0] * len(target)
    for pos in range(n - 1, -1, -1):
        for k in range(len(target)):
            totals[k] = min(totals[k] + max(option.counts[k] for option in tables[pos]), target[k])
        room[pos] = packing.pack(totals)
    reachable = _forward(codes, packing.pack(target), packing, room)
    if 0 not in reachable[n]:
        return None

    # best[pos][remaining] = (switched, stranded, spread rank, tie rank, option index)
    Entry = tuple[int, int, int, int, int]
    best: list[dict[int, Entry]] = [{} for _ in range(n + 1)]
    best[n][0] = (0, 0, 0, 0, 0)
    for pos in range(n - 1, -1, -1):
        table, after = tables[pos], best[pos + 1]
        found: dict[int, tuple[int, int, tuple[int, int], tuple[Any, int], int]] = {}
        for remaining in reachable[pos]:
            choice: tuple[int, int, tuple[int, int], tuple[Any, int], int] | None = None
            for index, code in enumerate(codes[pos]):
                left = (remaining | guard) - code
                if left & guard != guard:
                    continue
                tail = after.get(left & ~guard)
                if tail is None:
                    continue
                option = table[index]
                key = (
                    tail[0] + option.switched,
                    tail[1] + option.stranded,
                    (-sum(option.counts), tail[2]),
                    (option.tie, tail[3]),
                    index,
                )
                if choice is None or key[:4] < choice[:4]:
                    choice = key
            if choice is not None:
                found[remaining] = choice
        spread_rank = {v: r for r, v in enumerate(sorted({entry[2] for entry in found.values()}))}
        tie_rank = {v: r for r, v in enumerate(sorted({entry[3] for entry in found.values()}))}
        best[pos] = {
            remaining: (e[0], e[1], spread_rank[e[2]], tie_rank[e[3]], e[4]) for remaining, e in found.items()
        }

    remaining = packing.pack(target)
    if remaining not in best[0]:
        return None
    chosen: list[_Option] = []
    for pos in range(n):
        index = best[pos][remaining][4]
        chosen.append(tables[pos][index])
        remaining = ((remaining | guard) - codes[pos][index]) & ~guard
    return chosen


def frozen_gpus(gpus: Iterable[PoolGpu], earlier: Set[str]) -> frozenset[tuple[str, int]]:
    """The GPUs whose layout is frozen this pass, as (host, index): a workload of ``earlier`` (admitted in
    an earlier pass and still there) holds one of its instances. mig-parted re-creates every instance of
    a GPU it reconfigures, so such a GPU keeps its layout; the other GPUs of its host may change (a GPU
    whose configuration already matches is skipped). A GPU bound whole is never re-laid out either."""
    return frozenset(
        (g.host, g.index) for g in gpus if any(i.workload in earlier for i in g.instances or () if i.workload)
    )


# --- after admission --------------------------------------------------------------------------------


def release_idle_gpus(gpus: Sequence[PoolGpu], frozen_hosts: Set[str] = frozenset()) -> tuple[PoolGpu, ...]:
    """GPUs in MIG mode whose instances are all free return to whole, except frozen ones (``frozen``, or
    on a host of ``frozen_hosts``).

    Call it once a pass has admitted what it can: a layout nobody holds is then needed by no one, and a
    whole GPU serves whole-GPU requests and any future layout. A frozen GPU keeps its layout (changing it
    would re-create the instances an earlier workload runs on).
    """
    return tuple(
        replace(g, instances=None)
        if g.instances is not None
        and not g.frozen
        and g.host not in frozen_hosts
        and all(i.workload is None for i in g.instances)
        else g
        for g in gpus
    )


def repad(
    gpus: Sequence[PoolGpu], demand: Mapping[str, int], only: Set[tuple[str, int]]
) -> tuple[PoolGpu, ...]:
    """The GPUs of ``only`` (host, index) with their free instances chosen again for ``demand``
    ({profile: instances asked for in the pool}); bound instances stay, frozen GPUs are left alone.

    Once a GPU holds a running workload its layout is frozen, and then only its free instances can be
    bound, so among the paddings that strand as few slices as the planner's, the one made of the
    profiles the pool asks for is kept (a 3g.40gb beside a 3g rather than a 4g.40gb no one asks for):
    fewest uncovered slices, then most memory slices in asked-for profiles, then most of them by how
    often each is asked for, then the planner's order (most compute, fewest instances, lowest starts).
    """
    out = list(gpus)
    for k, gpu in enumerate(gpus):
        gpu_type = gpu.gpu_type
        if gpu.instances is None or gpu_type is None or gpu.frozen or (gpu.host, gpu.index) not in only:
            continue
        bound = [i for i in gpu.instances if i.workload is not None]
        placements = [(i.profile, i.start) for i in bound]
        if any(_profile(gpu_type, name).media for name, _ in placements):
            continue  # a +me instance: the planner's padding already holds none beside it
        weights = tuple(sorted((name, n) for name, n in demand.items() if n > 0 and gpu_type.profile(name)))
        padding = _demand_padding(
            gpu_type, layout_mask(gpu_type, placements), layout_compute(gpu_type, placements), weights
        )
        out[k] = replace(gpu, instances=tuple(sorted((*bound, *(MigInstance(s, n) for n, s in padding)))))
    return tuple(out)


@lru_cache(maxsize=8192)
def _demand_padding(
    gpu_type: MigGpuType, mask: int, compute: int, weights: tuple[tuple[str, int], ...]
) -> tuple[Placement, ...]:
    asked = dict(weights)
    best: tuple[Any, ...] | None = None
    budget = gpu_type.compute_slices - compute
    for extra, more, count, placements in _plain_layouts(gpu_type):
        if extra & mask or more > budget:
            continue
        useful = [(name, start) for name, start in placements if name in asked]
        key = (
            uncovered(gpu_type, mask | extra),
            -sum(_profile(gpu_type, name).size for name, _ in useful),
            -sum(asked[name] for name, _ in useful),
            -more,
            count,
            placements,
        )
        if best is None or key < best:
            best = key
    assert best is not None  # the empty layout always qualifies
    return tuple(best[-1])


@dataclass(frozen=True, slots=True)
class MigUsage:
    """Memory slices of a pool's GPUs in MIG mode: bound, free in instances, stranded."""

    used: int
    free: int
    stranded: int


def mig_usage(gpus: Iterable[PoolGpu]) -> MigUsage:
    used = free = stranded = 0
    for gpu in gpus:
        if gpu.instances is None or gpu.gpu_type is None:
            continue
        for instance in gpu.instances:
            size = _profile(gpu.gpu_type, instance.profile).size
            if instance.workload is None:
                free += size
            else:
                used += size
        stranded += stranded_slices(gpu)
    return MigUsage(used, free, stranded)


# --- realisation ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MigRealisation:
    """How the layouts are applied: one machine pool per distinct host layout, and mig-parted's config."""

    host_configs: Mapping[str, str]  # host -> config name, for hosts with a GPU in MIG mode
    machine_pools: Mapping[str, tuple[str, ...]]  # config name -> its hosts, sorted
    mig_config: dict[str, Any] | None  # mig-parted v1 config; None when no GPU is in MIG mode


def _device_entries(host_gpus: Sequence[PoolGpu]) -> list[dict[str, Any]]:
    """mig-parted entries for one host: GPUs with the same configuration share one entry."""
    groups: dict[tuple[bool, tuple[tuple[str, int], ...]], list[int]] = {}
    for gpu in sorted(host_gpus, key=lambda g: g.index):
        counts = tuple(sorted(Counter(i.profile for i in gpu.instances or ()).items()))
        groups.setdefault((gpu.instances is not None, counts), []).append(gpu.index)
    entries: list[dict[str, Any]] = []
    for (enabled, counts), devices in sorted(groups.items(), key=lambda item: item[1][0]):
        entry: dict[str, Any] = {"devices": devices, "mig-enabled": enabled}
        if enabled:
            entry["mig-devices"] = dict(counts)
        entries.append(entry)
    return entries


def config_name(entries: list[dict[str, Any]]) -> str:
    """A stable name for a host layout: the same layout always gets the same node label value."""
    digest = hashlib.sha256(json.dumps(entries, sort_keys=True).encode()).hexdigest()
    return f"mig-{digest[:10]}"


def realise(gpus: Iterable[PoolGpu]) -> MigRealisation:
    """Group hosts by identical layout (all their GPUs) and render the mig-parted config for them.

    Hosts whose GPUs are all whole carry no config (they stay in ``worker-pool``; the GPU Operator labels
    them ``all-disabled``, which the rendered config therefore defines too).
    """
    by_host: dict[str, list[PoolGpu]] = {}
    for gpu in gpus:
        by_host.setdefault(gpu.host, []).append(gpu)
    configs: dict[str, list[dict[str, Any]]] = {}
    host_configs: dict[str, str] = {}
    for host in sorted(by_host):
        if not any(g.mig for g in by_host[host]):
            continue
        entries = _device_entries(by_host[host])
        name = config_name(entries)
        configs[name] = entries
        host_configs[host] = name
    if not configs:
        return MigRealisation({}, {}, None)
    pools: dict[str, list[str]] = {}
    for host, name in host_configs.items():
        pools.setdefault(name, []).append(host)
    mig_configs: dict[str, Any] = {ALL_DISABLED: [{"devices": "all", "mig-enabled": False}]}
    mig_configs.update(sorted(configs.items()))
    return MigRealisation(
        host_configs=host_configs,
        machine_pools={name: tuple(sorted(hosts)) for name, hosts in sorted(pools.items())},
        mig_config={"version": "v1", "mig-configs": mig_configs},
    )


def layout_json(gpus: Iterable[PoolGpu]) -> dict[str, list[dict[str, Any]]]:
    """``pools[].mig`` of ``plan --format json``: per host, its GPUs in MIG mode and their instances."""
    out: dict[str, list[dict[str, Any]]] = {}
    for gpu in sorted(gpus, key=lambda g: (g.host, g.index)):
        if gpu.instances is None:
            continue
        out.setdefault(gpu.host, []).append(
            {
                "gpu": gpu.index,
                "instances": [
                    {"profile": i.profile, "start": i.start, "workload": i.workload} for i in gpu.instances
                ],
            }
        )
    return out
