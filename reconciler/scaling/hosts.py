"""Which host a scaling action adds or removes (docs/allocation.md), over plain host descriptions.

The caller offers only hosts that may join the pool (available, the pool's architecture and resource
groups) and describes the pool's current workers with the GPUs admission has bound on each. Ties always
break by host name, so the same inputs choose the same host.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from reconciler.model.gpu import GpuFamily


@dataclass(frozen=True, slots=True)
class ScalingHost:
    """A worker host as scaling sees it. ``bound_gpus``: GPUs bound to admitted workloads (members only)."""

    name: str
    family: GpuFamily | None
    gpus: int
    cpus: int
    worker_tagged: bool = False
    bound_gpus: int = 0
    mig_capable: bool = False  # its GPUs can run MIG (agent and catalogue)


def gpus_of(hosts: Iterable[ScalingHost], family: GpuFamily) -> int:
    return sum(h.gpus for h in hosts if h.family == family)


def cores_of(hosts: Iterable[ScalingHost]) -> int:
    return sum(h.cpus for h in hosts)


def gpu_host_to_add(
    family: GpuFamily,
    free: Iterable[ScalingHost],
    room: int,
    shortfall: int | None = None,
    exclude: frozenset[str] = frozenset(),
    per_host: int = 0,
    mig: bool = False,
) -> ScalingHost | None:
    """One free host of ``family`` with at most ``room`` GPUs (the bound's headroom).

    Section 4's least surplus: the fewest GPUs. For a pending workload (``shortfall``: the GPUs the new
    host must bring for it to be admitted, each of its replicas on one host), only a host that lets it be
    admitted: at least ``shortfall`` and ``per_host`` GPUs, MIG-capable for ``mig``; None when no one host
    would (a host that cannot hold one of its replicas is never added for it).
    """
    least = max(1, per_host, shortfall or 0)
    fitting = [
        h
        for h in free
        if h.family == family
        and least <= h.gpus <= room
        and h.name not in exclude
        and (h.mig_capable or not mig)
    ]
    if not fitting:
        return None
    return min(fitting, key=lambda h: (h.gpus, h.name))


def cpu_host_to_add(
    free: Iterable[ScalingHost],
    room: int,
    gpu_room: Mapping[GpuFamily, int],
    exclude: frozenset[str] = frozenset(),
) -> ScalingHost | None:
    """One free worker adding at most ``room`` cores: GPU-less and tagged ``palette.ai/worker`` first, else
    the one with the fewest GPUs (section 4's order for extra workers), never one whose GPUs would break a
    family's bound (``gpu_room``: headroom of each bounded family). An untagged host without GPUs is a
    control-plane candidate (section 4's roles) and is not taken."""

    def allowed(h: ScalingHost) -> bool:
        if h.name in exclude or not 0 < h.cpus <= room:
            return False
        if h.gpus == 0:
            return h.worker_tagged
        return h.family is None or h.gpus <= gpu_room.get(h.family, h.gpus)

    fitting = [h for h in free if allowed(h)]
    if not fitting:
        return None
    return min(fitting, key=lambda h: (0 if h.gpus == 0 else 1, h.gpus, h.name))


def gpu_host_to_remove(
    family: GpuFamily,
    workers: Iterable[ScalingHost],
    room: int,
    admitted: int,
    fits_without: Callable[[str], bool],
    cpu_room: int | None = None,
    exclude: frozenset[str] = frozenset(),
) -> ScalingHost | None:
    """One worker of ``family`` holding no bound GPU, with at most ``room`` GPUs (current - minimum), whose
    removal leaves the admitted workloads bound (``fits_without``) and the least surplus: the largest such
    host. ``cpu_room``: cores that may go (current - minCPUCount) when the policy bounds cores too."""
    members = list(workers)
    total = gpus_of(members, family)
    candidates = [
        h
        for h in members
        if h.family == family
        and h.bound_gpus == 0
        and 0 < h.gpus <= room
        and total - h.gpus >= admitted
        and (cpu_room is None or h.cpus <= cpu_room)
        and h.name not in exclude
    ]
    for host in sorted(candidates, key=lambda h: (total - h.gpus - admitted, h.name)):
        if fits_without(host.name):
            return host
    return None


def cpu_host_to_remove(
    workers: Iterable[ScalingHost],
    room: int,
    gpu_room: Mapping[GpuFamily, int],
    governed: frozenset[GpuFamily],
    fits_without: Callable[[str], bool],
    exclude: frozenset[str] = frozenset(),
) -> ScalingHost | None:
    """One worker with at most ``room`` cores (current - minCPUCount), holding no bound GPU, whose removal
    leaves the admitted workloads bound. GPU-less hosts first; a GPU host only of a family no ``gpu`` rule
    governs (those follow GPU utilisation) and within its bound. Among those, the least surplus of cores:
    the most cores, then the name."""

    def allowed(h: ScalingHost) -> bool:
        if h.name in exclude or h.bound_gpus or not 0 < h.cpus <= room:
            return False
        if h.gpus == 0 or h.family is None:
            return True
        return h.family not in governed and h.gpus <= gpu_room.get(h.family, h.gpus)

    for host in sorted((h for h in workers if allowed(h)), key=lambda h: (h.gpus, -h.cpus, h.name)):
        if fits_without(host.name):
            return host
    return None
