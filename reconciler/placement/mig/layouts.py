"""Per-GPU MIG layouts: every valid layout of a GPU type, masks, and the best padding around a layout
(pure; docs/mig.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from reconciler.model.mig import MigGpuType, MigProfile
from reconciler.placement.mig.state import Layout, Placement


def profile_of(gpu_type: MigGpuType, name: str) -> MigProfile:
    profile = gpu_type.profile(name)
    if profile is None:
        raise ValueError(f"{gpu_type.key} has no MIG profile {name!r}")
    return profile


def placement_mask(gpu_type: MigGpuType, placement: Placement) -> int:
    """The memory slices a placement covers, as a bit mask."""
    profile = profile_of(gpu_type, placement[0])
    return ((1 << profile.size) - 1) << placement[1]


def all_placements(gpu_type: MigGpuType) -> tuple[Placement, ...]:
    """Every (profile, start) the GPU type allows, ordered by start then profile."""
    return tuple(sorted((p.name, s) for p in gpu_type.profiles.values() for s in p.starts))


@lru_cache(maxsize=64)
def valid_layouts(gpu_type: MigGpuType) -> tuple[Layout, ...]:
    """Every valid layout of a GPU of this type, the empty one included."""
    placements = all_placements(gpu_type)
    masks = [placement_mask(gpu_type, p) for p in placements]
    profiles = [profile_of(gpu_type, name) for name, _ in placements]
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
    return sum(profile_of(gpu_type, name).compute for name, _ in layout)


def uncovered(gpu_type: MigGpuType, mask: int) -> int:
    return gpu_type.memory_slices - mask.bit_count()


@dataclass(frozen=True, slots=True)
class _Extension:
    stranded: int  # the fewest uncovered slices any completion leaves
    padding: tuple[Placement, ...]  # the completion that does (free instances to add)
    room: tuple[int, ...]  # instances of each profile, largest first, that still fit (more is better)


@lru_cache(maxsize=64)
def plain_layouts(gpu_type: MigGpuType) -> tuple[tuple[int, int, int, tuple[Placement, ...]], ...]:
    """(mask, compute, instances, placements by start) of every layout without ``+me`` instances."""
    return tuple(
        (
            layout_mask(gpu_type, layout),
            layout_compute(gpu_type, layout),
            len(layout),
            tuple(sorted(layout, key=by_start)),
        )
        for layout in valid_layouts(gpu_type)
        if not any(profile_of(gpu_type, name).media for name, _ in layout)
    )


@lru_cache(maxsize=8192)
def extension(gpu_type: MigGpuType, mask: int, compute: int) -> _Extension:
    """How well the free space around ``mask`` can be used: the best padding and the room left.

    Padding is plain instances (``+me`` ones are made only on request): fewest uncovered memory slices,
    then the most compute slices in use, then the fewest instances, then the lowest starts.
    """
    best: tuple[int, int, int, tuple[Placement, ...]] | None = None
    budget = gpu_type.compute_slices - compute
    for extra, more, count, placements in plain_layouts(gpu_type):
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


def by_start(placement: Placement) -> tuple[int, str]:
    return (placement[1], placement[0])
