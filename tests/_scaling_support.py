"""Shared builders of the scaling tests: policies, synthetic series, hosts, emulator clusters."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import yaml

from reconciler.model.gpu import GpuFamily, canonical_family
from reconciler.model.scaling import DEFAULT_CPU_QUERY, ScalingPolicySpec
from reconciler.scaling import Metric, PoolView, ScalingHost, Series
from reconciler.snapshots import Snapshot

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


HOT_COLD_WINDOW = 5  # seconds: every scale window of hot_cold_policy


def hot_cold_policy(**fields: Any) -> ScalingPolicySpec:
    """The policy of the end-to-end tests on :func:`two_cluster_snapshot` (GPU and CPU rules over
    windows of seconds, at a 1 s step), with ``fields`` on top."""
    rule = {"scaleUpDuration": f"{HOT_COLD_WINDOW}s", "scaleDownDuration": f"{HOT_COLD_WINDOW}s"}
    return spec(
        gpu=[{"family": "NVIDIA-A100", "scaleUpThreshold": 80, "scaleDownThreshold": 30, **rule}],
        gpuResourceBounds=[{"family": "NVIDIA-A100", "minGPUCount": 0, "maxGPUCount": 64}],
        cpu={"scaleUpThreshold": 80, "scaleDownThreshold": 20, **rule},
        cpuResourceBounds={"minCPUCount": 0, "maxCPUCount": 1024},
        # The default CPU query's rate(...[2m]) reads low until a series is two minutes old (rate
        # divides by the range); the same query over 5s settles within the test's seconds.
        metrics={"step": "1s", "cpuQuery": DEFAULT_CPU_QUERY.replace("[2m]", "[5s]")},
        **fields,
    )


# The pools of two_cluster_snapshot as the scaling stage sees them.
HOT = PoolView(
    "pool-hot", "pool-hot", (gpu_host("hot-1", 8), gpu_host("hot-2", 8)), (gpu_host("free-1", 8),), {A100: 4}
)
COLD = PoolView("pool-cold", "pool-cold", (gpu_host("cold-1", 4, cpus=32),), (), {})


def policy_document(*, window: str, cooldown: str, abort: str, step: str | None = None) -> dict[str, Any]:
    """The ScalingPolicy ``gpu-autoscale`` of project-b: NVIDIA-A100 up above 80 % and down below 30 % over
    ``window``, 8..24 GPUs; Prometheus read at ``step`` when given."""
    rule = {
        "scaleUpThreshold": 80,
        "scaleDownThreshold": 30,
        "scaleUpDuration": window,
        "scaleDownDuration": window,
    }
    spec_: dict[str, Any] = {
        "gpu": [{"family": "NVIDIA-A100", **rule}],
        "gpuResourceBounds": [{"family": "NVIDIA-A100", "minGPUCount": 8, "maxGPUCount": 24}],
        "cooldownDuration": cooldown,
        "abortDuration": abort,
    }
    if step is not None:
        spec_["metrics"] = {"step": step}
    return {
        "apiVersion": "spectrocloud.com/v1alpha1",
        "kind": "ScalingPolicy",
        "metadata": {"name": "gpu-autoscale", "namespace": "project-b"},
        "spec": spec_,
    }


def pool_workload(name: str, gpus: int, mig: str | None = None) -> str:
    """An AIWorkload of project-b on the sample's shared-a100 pool (``gpus`` A100s or MIG slices), as YAML."""
    request: dict[str, Any] = {"family": "NVIDIA-A100", "count": gpus}
    if mig is not None:
        request["mig"] = mig
    return yaml.safe_dump(
        {
            "apiVersion": "spectrocloud.com/v1alpha1",
            "kind": "AIWorkload",
            "metadata": {"name": name, "namespace": "project-b"},
            "spec": {"computePoolRef": {"name": "shared-a100"}, "gpus": [request]},
        }
    )
