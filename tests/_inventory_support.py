"""Builders of edge-host search items (``v1EdgeHostsMetadata``) for the inventory tests."""

from __future__ import annotations

from typing import Any


def gpu(
    model: str, count: int | None = 8, vendor: str = "NVIDIA", memory: str | None = "80 GB"
) -> dict[str, Any]:
    """One ``spec.device.gpus`` entry as the agent reports it."""
    entry: dict[str, Any] = {"vendor": vendor, "model": model}
    if count is not None:
        entry["gpuCount"] = count
    if memory is not None:
        entry["memory"] = memory
    return entry


def edge_host(
    uid: str,
    *,
    name: str | None = None,
    labels: dict[str, Any] | None = None,
    palette_ai: bool = True,
    cores: int | None = 16,
    gpus: list[dict[str, Any]] | None = None,
    arch: str | None = "amd64",
    state: str = "ready",
    health: str = "healthy",
    clusters: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """A search item; by default a healthy, ready, ``palette.ai: "true"`` host with 16 cores and no GPUs."""
    all_labels: dict[str, Any] = {"palette.ai": "true"} if palette_ai else {}
    all_labels.update(labels or {})
    device: dict[str, Any] = {"gpus": gpus or []}
    if arch is not None:
        device["archType"] = arch
    if cores is not None:
        device["cpu"] = {"cores": cores}
    return {
        "metadata": {"uid": uid, "name": name or uid, "labels": all_labels},
        "spec": {"type": "edge-native", "device": device},
        "status": {"state": state, "health": {"state": health}, "inUseClustersRef": clusters or []},
    }
