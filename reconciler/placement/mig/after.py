"""After admission: idle layouts return to whole, free instances re-chosen for the pool's demand, usage
(pure).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from reconciler.model.mig import MigGpuType
from reconciler.placement.mig.layouts import layout_compute, layout_mask, plain_layouts, profile_of, uncovered
from reconciler.placement.mig.options import stranded_slices
from reconciler.placement.mig.state import MigInstance, Placement, PoolGpu


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
        if any(profile_of(gpu_type, name).media for name, _ in placements):
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
    for extra, more, count, placements in plain_layouts(gpu_type):
        if extra & mask or more > budget:
            continue
        useful = [(name, start) for name, start in placements if name in asked]
        key = (
            uncovered(gpu_type, mask | extra),
            -sum(profile_of(gpu_type, name).size for name, _ in useful),
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
            size = profile_of(gpu.gpu_type, instance.profile).size
            if instance.workload is None:
                free += size
            else:
                used += size
        stranded += stranded_slices(gpu)
    return MigUsage(used, free, stranded)
