"""The emulator's own reading of edge host JSON (what it needs to seed clusters and export utilisation).

Deliberately independent of the reconciler's reader (``reconciler.edgehost``): the emulator stands in for
Palette, and sharing the client's code would let one bug hide on both sides of the wire.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def get(obj: Any, *keys: str) -> Any:
    """``obj[k1][k2]...``, or None where a level is missing or not a mapping."""
    for key in keys:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def _tag(host: Mapping[str, Any], name: str) -> str:
    value = (get(host, "metadata", "labels") or {}).get(name)
    return str(value).strip().lower() if value is not None else ""


def host_gpu_count(host: Mapping[str, Any]) -> int:
    """GPUs reported by the agent (an entry without ``gpuCount`` is one), else the ``gpus`` tag, else 0."""
    gpus = get(host, "spec", "device", "gpus")
    if isinstance(gpus, list) and gpus:
        total = 0
        for gpu in gpus:
            if isinstance(gpu, Mapping):
                count = gpu.get("gpuCount", 1)
                total += count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 0
        if total:
            return total
    try:
        return max(int(_tag(host, "gpus") or "0"), 0)
    except ValueError:
        return 0


def host_cores(host: Mapping[str, Any]) -> int:
    """Cores from the agent, else the ``cpus`` tag, else 1 (a host always has a core to count)."""
    cores = get(host, "spec", "device", "cpu", "cores")
    if isinstance(cores, int) and not isinstance(cores, bool) and cores > 0:
        return cores
    try:
        return max(int(_tag(host, "cpus") or "1"), 1)
    except ValueError:
        return 1


def is_worker_host(host: Mapping[str, Any]) -> bool:
    """Palette's PaletteAI role tags as the design states them: ``palette.ai/worker: true`` is a worker;
    else ``palette.ai/control-plane: true`` is a control plane; else a host with GPUs is a worker."""
    if _tag(host, "palette.ai/worker") == "true":
        return True
    if _tag(host, "palette.ai/control-plane") == "true":
        return False
    return host_gpu_count(host) > 0
