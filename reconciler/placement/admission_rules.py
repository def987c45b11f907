"""The rules of admission that look at one workload alone (docs/pools.md): a previously admitted
workload's standing at the start of the pass (``held``) and the refusals that do not depend on what is
free (``static_rejection``). Pure; used by ``admission``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from reconciler.model.conditions import Reason
from reconciler.model.gpu import GpuFamily
from reconciler.model.pools import WorkloadRequest
from reconciler.placement.admission_types import PoolState, PreviousAdmission
from reconciler.placement.units import GpuRef, GpuUnit, MigInstance


def plural(n: int, what: str) -> str:
    """``1 GPU``, ``2 GPUs``."""
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


@dataclass
class Held:
    """A previously admitted workload's standing at the start of the pass."""

    previous: PreviousAdmission
    units: list[GpuUnit]  # its previous GPUs the pool still has
    intact: bool  # every previous GPU (and MIG instance) is still there
    same: bool  # its request is what its GPUs and instances cover, each replica on one host
    replica_of: dict[GpuRef, int] = field(default_factory=dict)


def held(
    request: WorkloadRequest, prev: PreviousAdmission, units_of: Mapping[GpuRef, GpuUnit], has_planner: bool
) -> Held:
    """A previously admitted workload's standing: ``units_of`` the pool's GPUs by ref; ``has_planner``:
    a MIG planner places instances (without one, previous instances cannot be held)."""
    replica_of = prev.replica_of()
    units = [units_of[r] for r in sorted(set(prev.gpus)) if r in units_of]
    intact = len(units) == len(set(prev.gpus))
    # Per replica: its host(s) and what it holds per (family, profile); "" is a whole GPU.
    hosts: dict[int, set[str]] = {}
    holds: dict[int, dict[tuple[GpuFamily, str], int]] = {}
    for unit in units:
        replica = replica_of.get(unit.ref, 0)
        hosts.setdefault(replica, set()).add(unit.host_uid)
        per = holds.setdefault(replica, {})
        per[(unit.family, "")] = per.get((unit.family, ""), 0) + 1
    for inst in prev.mig:
        gpu = units_of.get(GpuRef(inst.host_uid, inst.gpu))
        if gpu is None:
            intact = False
            continue
        hosts.setdefault(inst.replica, set()).add(inst.host_uid)
        per = holds.setdefault(inst.replica, {})
        per[(gpu.family, inst.profile)] = per.get((gpu.family, inst.profile), 0) + 1
    if prev.mig and not has_planner:
        intact = False
    asked = {(f, ""): n for f, n in request.whole.items() if n > 0}
    asked |= {(m.family, m.profile): m.count for m in request.mig if m.count > 0}
    same = (
        set(holds) == set(range(request.replicas))
        and all(per == asked for per in holds.values())
        and all(len(h) == 1 for h in hosts.values())
    )
    return Held(prev, units, intact, same, replica_of)


def static_rejection(
    pool: PoolState, request: WorkloadRequest, has_planner: bool
) -> tuple[Reason, str] | None:
    """A request the pool refuses whatever is free: MIG where the pool has none (or no planner), more
    GPUs than the ComputeProfile's ``gpuLimits``."""
    if request.mig:
        profiles = ", ".join(sorted({f"{m.profile} ({m.family})" for m in request.mig}))
        if pool.mig_strategy != "mixed":
            return Reason.MIG_UNSUPPORTED, (
                f"asks for MIG instances {profiles}; pool {pool.label} has mig.strategy "
                f"{pool.mig_strategy}: set mig.strategy: mixed on the pool or ask for whole GPUs"
            )
    for family, count in sorted(request.limit_counts().items()):
        limit = pool.gpu_limits.get(family)
        if limit is not None and count > limit:
            profile = f"ComputeProfile {pool.profile}" if pool.profile else "the pool's ComputeProfile"
            mig_note = " (MIG instances rounded up to GPUs)" if request.mig else ""
            replicas = f" over {request.replicas} replicas" if request.replicas > 1 else ""
            return Reason.GPU_LIMIT_EXCEEDED, (
                f"requests {count} {family} GPUs{replicas}{mig_note}; {profile} of pool {pool.label} "
                f"allows at most {limit} per workload: lower the request or raise gpuLimits"
            )
    if request.mig and not has_planner:
        profiles = ", ".join(sorted({f"{m.profile} ({m.family})" for m in request.mig}))
        return Reason.MIG_UNSUPPORTED, (
            f"asks for MIG instances {profiles}; MIG placement is not available in this version of "
            "the reconciler: ask for whole GPUs"
        )
    return None


def where(units: Sequence[GpuUnit], mig: Sequence[MigInstance]) -> str:
    """`` (2 GPUs on gpu-01 and 1 MIG instance)``: what a workload holds, for its messages."""
    parts = []
    if units:
        hosts = sorted({u.host_name for u in units})
        parts.append(f"{plural(len(units), 'GPU')} on {', '.join(hosts)}")
    if mig:
        parts.append(plural(len(mig), "MIG instance"))
    return f" ({' and '.join(parts)})" if parts else ""
