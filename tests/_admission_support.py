"""Builders for admission tests: pools of concrete GPUs, workload requests, and chaining passes."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from reconciler.model.gpu import GpuFamily
from reconciler.model.pools import MigRequest, WorkloadRequest
from reconciler.placement.admission_types import PoolAdmission, PoolState, PreviousAdmission, WorkloadAction
from reconciler.placement.units import GpuUnit

A100 = GpuFamily("NVIDIA-A100")
H100 = GpuFamily("NVIDIA-H100")
HOLDING = (WorkloadAction.ADMIT, WorkloadAction.ADMITTED)


def hosts(*counts: int, family: GpuFamily = A100, prefix: str = "host") -> tuple[GpuUnit, ...]:
    """GPUs of hosts ``<prefix>-0``, ``<prefix>-1``, ... with the given GPU counts."""
    return tuple(
        GpuUnit(f"uid-{prefix}-{h}", f"{prefix}-{h}", i, family)
        for h, n in enumerate(counts)
        for i in range(n)
    )


def shared(*units: Iterable[GpuUnit], **kw: object) -> PoolState:
    flat = tuple(u for group in units for u in group)
    return PoolState(("project-a", "shared-a100"), gpus=flat, **kw)  # type: ignore[arg-type]


def want(
    name: str,
    n: int = 0,
    family: GpuFamily = A100,
    priority: int = 0,
    ns: str = "project-a",
    mig: Sequence[MigRequest] = (),
    **kw: object,
) -> WorkloadRequest:
    whole = {family: n} if n else {}
    return WorkloadRequest((ns, name), priority=priority, whole=whole, mig=tuple(mig), **kw)  # type: ignore[arg-type]


def previous_of(result: PoolAdmission) -> list[PreviousAdmission]:
    """What the status branch would record after ``result``: every workload holding GPUs (admitted, or
    pending/rejected while keeping an earlier admission)."""
    return [d.previous() for d in result.workloads.values() if d.gpus or d.mig or d.action in HOLDING]


def actions(result: PoolAdmission) -> dict[str, str]:
    return {key[1]: str(d.action) for key, d in result.workloads.items()}


def bound(result: PoolAdmission, name: str) -> list[tuple[str, int]]:
    decision = next(d for k, d in result.workloads.items() if k[1] == name)
    return [(u.host_name, u.index) for u in decision.gpus]
