"""What one GPU can offer one request: its state (shape) and its table of options, each the best way to
hold one count vector of the request (pure).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from reconciler.model.mig import MigGpuType
from reconciler.placement.mig.layouts import (
    by_start,
    extension,
    layout_compute,
    layout_mask,
    profile_of,
    uncovered,
    valid_layouts,
)
from reconciler.placement.mig.state import MigInstance, Placement, PoolGpu


def state_of(gpu: PoolGpu) -> Hashable:
    """What the planner sees of a GPU: GPUs in the same state are planned alike (whoever holds them)."""
    return shape_of(gpu, gpu.frozen)


def usable_slices(gpu: PoolGpu) -> int:
    """Memory slices of this GPU a new request could use (0 when bound whole or held entirely)."""
    return shape_free(shape_of(gpu, gpu.frozen))


def stranded_slices(gpu: PoolGpu) -> int:
    """Memory slices of a GPU in MIG mode that no instance covers (0 for a whole GPU)."""
    if gpu.instances is None or gpu.gpu_type is None:
        return 0
    return uncovered(gpu.gpu_type, layout_mask(gpu.gpu_type, ((i.profile, i.start) for i in gpu.instances)))


# What a GPU's options depend on: its type, whether it is bound whole, whether its layout is frozen, and
# its layout as (profile, start, bound?) triples (None: whole). Not who holds the instances, so GPUs in
# the same state share one option table, across admissions too.
# The type is named by its key (hashing a catalogue entry is slow; shapes are hashed per GPU per admission).
Shape = tuple[str | None, bool, bool, tuple[tuple[str, int, bool], ...] | None]
_TYPES: dict[str, MigGpuType] = {}


def shape_of(gpu: PoolGpu, frozen: bool) -> Shape:
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


def type_of(shape: Shape) -> MigGpuType | None:
    return None if shape[0] is None else _TYPES[shape[0]]


@dataclass(frozen=True, slots=True)
class Option:
    """One way to use one GPU for the request (who asks does not matter: see ``apply_option``)."""

    counts: tuple[int, ...]  # instances per requested profile placed here
    switched: int
    stranded: int
    tie: tuple[Any, ...]
    bound: tuple[Placement, ...]  # the placements bound to the workload
    # Re-laid out: the free instances around the kept and bound ones. None: the layout stays (a frozen
    # GPU's free instances are bound, or nothing changes).
    padding: tuple[Placement, ...] | None


@lru_cache(maxsize=16384)
def gpu_options(shape: Shape, profiles: tuple[str, ...], request: tuple[int, ...]) -> tuple[Option, ...]:
    """The useful options of a GPU in this state, the unchanged one first: for each count vector it can
    hold, the best way to hold it."""
    gpu_type, (_, whole_bound, frozen, layout) = type_of(shape), shape
    unchanged = Option((0,) * len(profiles), 0, shape_stranded(shape), (0, (), (), ()), (), None)
    if gpu_type is None or whole_bound or (frozen and layout is None):
        return (unchanged,)
    if frozen:
        assert layout is not None
        return (unchanged, *_bind_free_instances(gpu_type, layout, profiles, request, unchanged.stranded))
    fixed = [(name, start) for name, start, bound in layout or () if bound]
    fixed_mask = layout_mask(gpu_type, fixed)
    fixed_compute = layout_compute(gpu_type, fixed)
    fixed_media = sum(profile_of(gpu_type, name).media for name, _ in fixed)
    best: dict[tuple[int, ...], Option] = {}
    for new in request_layouts(gpu_type, profiles):
        if any(c > r for c, r in zip(new.counts, request, strict=True)) or new.mask & fixed_mask:
            continue
        compute = fixed_compute + new.compute
        if compute > gpu_type.compute_slices or fixed_media + new.media > gpu_type.max_media:
            continue
        ext = extension(gpu_type, fixed_mask | new.mask, compute)
        tie = (-len(new.placements), tuple(-n for n in ext.room), new.placements, ext.padding)
        current = best.get(new.counts)
        if current is not None and (current.stranded, current.tie) <= (ext.stranded, tie):
            continue
        switched = 0 if layout is not None else 1
        best[new.counts] = Option(new.counts, switched, ext.stranded, tie, new.placements, ext.padding)
    return (unchanged, *best.values())


@lru_cache(maxsize=16384)
def shape_stranded(shape: Shape) -> int:
    gpu_type, layout = type_of(shape), shape[3]
    if gpu_type is None or layout is None:
        return 0
    return uncovered(gpu_type, layout_mask(gpu_type, ((name, start) for name, start, _ in layout)))


@lru_cache(maxsize=16384)
def shape_free(shape: Shape) -> int:
    """Memory slices a new request could use on a GPU in this state."""
    gpu_type, (_, whole_bound, frozen, layout) = type_of(shape), shape
    if gpu_type is None or whole_bound:
        return 0
    if layout is None:
        return 0 if frozen else gpu_type.memory_slices
    if frozen:
        return sum(profile_of(gpu_type, name).size for name, _, bound in layout if not bound)
    return uncovered(gpu_type, layout_mask(gpu_type, ((n, s) for n, s, bound in layout if bound)))


def apply_option(gpu: PoolGpu, option: Option, workload: str) -> tuple[MigInstance, ...]:
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
def request_layouts(gpu_type: MigGpuType, profiles: tuple[str, ...]) -> tuple[_Candidate, ...]:
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
                placements=tuple(sorted(layout, key=by_start)),
                counts=tuple(counts),
                mask=layout_mask(gpu_type, layout),
                compute=layout_compute(gpu_type, layout),
                media=sum(profile_of(gpu_type, name).media for name, _ in layout),
            )
        )
    return tuple(found)


def _bind_free_instances(
    gpu_type: MigGpuType,
    layout: tuple[tuple[str, int, bool], ...],
    profiles: tuple[str, ...],
    request: tuple[int, ...],
    stranded: int,
) -> list[Option]:
    """A frozen GPU offers only its free instances, lowest start first."""
    free = {name: sorted(start for n, start, bound in layout if n == name and not bound) for name in profiles}
    limits = [min(len(free[name]), r) for name, r in zip(profiles, request, strict=True)]
    options: list[Option] = []
    for vector in _vectors(limits):
        if not any(vector):
            continue
        placed = tuple(
            sorted(
                ((name, start) for name, n in zip(profiles, vector, strict=True) for start in free[name][:n]),
                key=by_start,
            )
        )
        options.append(Option(vector, 0, stranded, (-len(placed), (), placed, ()), placed, None))
    return options


def _vectors(limits: Sequence[int]) -> Iterable[tuple[int, ...]]:
    if not limits:
        yield ()
        return
    for head in range(limits[0] + 1):
        for tail in _vectors(limits[1:]):
            yield (head, *tail)
