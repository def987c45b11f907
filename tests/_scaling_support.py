"""Shared builders of the scaling tests: policies, synthetic series, hosts, emulator clusters."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from reconciler.model.gpu import GpuFamily, canonical_family
from reconciler.model.scaling import ScalingPolicySpec
from reconciler.palette.observe import Snapshot
from reconciler.scaling import Metric, ScalingHost, Series

NOW = 1_800_000_000.0
A100 = canonical_family("NVIDIA-A100")
H100 = canonical_family("NVIDIA-H100")


def spec(**fields: Any) -> ScalingPolicySpec:
    """A policy spec from camelCase fields; a gpu rule for NVIDIA-A100 (8..64) unless fields say otherwise."""
    base: dict[str, Any] = {
        "gpu": [
            {
                "family": "NVIDIA-A100",
                "scaleUpThreshold": 80,
                "scaleDownThreshold": 30,
                "scaleUpDuration": "5m",
                "scaleDownDuration": "15m",
            }
        ],
        "gpuResourceBounds": [{"family": "NVIDIA-A100", "minGPUCount": 8, "maxGPUCount": 64}],
    }
    base.update(fields)
    return ScalingPolicySpec.model_validate(base, by_alias=True, by_name=False)


def series(
    metric: Metric,
    value: float | Callable[[float], float],
    *,
    now: float = NOW,
    duration: float = 3600.0,
    step: float = 15.0,
    gaps: Iterable[float] = (),
    query: str = "q",
) -> Series:
    """Values at every step of ``[now - duration, now]``; ``gaps``: timestamps with no value."""
    missing = {round(t * 1000) for t in gaps}
    count = math.floor(duration / step + 1e-9)
    points = []
    for k in range(count, -1, -1):
        t = now - k * step
        if round(t * 1000) in missing:
            continue
        points.append((t, value(t) if callable(value) else float(value)))
    return Series(metric, query, now - count * step, now, step, tuple(points))


def gpu_host(name: str, gpus: int, family: GpuFamily = A100, cpus: int = 64, bound: int = 0) -> ScalingHost:
    return ScalingHost(name, family, gpus, cpus, worker_tagged=False, bound_gpus=bound)


def cpu_host(name: str, cpus: int, tagged: bool = True) -> ScalingHost:
    return ScalingHost(name, None, 0, cpus, worker_tagged=tagged)


def edge_host(uid: str, name: str, cores: int, gpus: int, cluster: str | None) -> dict[str, Any]:
    device: dict[str, Any] = {"archType": "amd64", "cpu": {"cores": cores}, "gpus": []}
    if gpus:
        device["gpus"] = [{"vendor": "NVIDIA", "model": "A100", "gpuCount": gpus, "memory": 81920}]
    return {
        "metadata": {"uid": uid, "name": name, "labels": {"palette.ai": "true"}},
        "spec": {"device": device},
        "status": {
            "state": "in-use" if cluster else "ready",
            "health": {"state": "healthy"},
            "inUseClustersRef": [{"uid": cluster}] if cluster else [],
        },
    }


def two_cluster_snapshot() -> Snapshot:
    """Two Running clusters: ``pool-hot`` (2 hosts x 8 A100, 64 cores) and ``pool-cold`` (1 x 4, 32)."""
    hot, cold = "c1" + "0" * 21 + "a", "c1" + "0" * 21 + "b"
    return Snapshot(
        edge_hosts=[
            edge_host("h-hot-1", "hot-1", 64, 8, hot),
            edge_host("h-hot-2", "hot-2", 64, 8, hot),
            edge_host("h-cold-1", "cold-1", 32, 4, cold),
            edge_host("h-free-1", "free-1", 64, 8, None),
        ],
        clusters=[
            {"metadata": {"uid": hot, "name": "pool-hot"}, "status": {"state": "Running"}},
            {"metadata": {"uid": cold, "name": "pool-cold"}, "status": {"state": "Running"}},
        ],
    )
