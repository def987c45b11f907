"""Time ``discover`` and ``compute_status`` over a large generated inventory; prints figures.

Usage: python bench/inventory_discover.py [HOSTS]   (default 10,000)
"""

from __future__ import annotations

import random
import sys
import time
from typing import Any

from reconciler.compute_status import compute_status
from reconciler.inventory import discover

_MODELS = [
    ("NVIDIA", "GH100 [H100 SXM5 80GB]", "80 GB"),
    ("NVIDIA", "GA100 [A100 SXM4 80GB]", "81920 MiB"),
    ("NVIDIA", "AD102GL [L40S]", "48 GB"),
    ("NVIDIA", "TU104GL [Tesla T4]", "16 GB"),
    ("AMD", "Aqua Vanjaram [Instinct MI300X]", "192 GB"),
]


def make_hosts(count: int, seed: int = 1) -> list[dict[str, Any]]:
    """Edge hosts shaped like search items: mostly GPU workers, some CPU hosts, some tag-only hosts."""
    rng = random.Random(seed)
    hosts: list[dict[str, Any]] = []
    for i in range(count):
        labels: dict[str, str] = {"palette.ai": "true", "site": f"dc{i % 4}"}
        gpus: list[dict[str, Any]] = []
        kind = rng.random()
        if kind < 0.6:
            vendor, model, memory = rng.choice(_MODELS)
            gpus = [
                {"vendor": vendor, "model": model, "gpuCount": rng.choice([1, 2, 4, 8]), "memory": memory}
            ]
        elif kind < 0.7:
            labels.update({"gpus": "4", "gpu-family": "nvidia-a100", "gpu-memory": "40GiB"})
        elif kind < 0.75:
            labels["palette.ai/worker"] = "true"
        if rng.random() < 0.3:
            labels["palette.ai.rg/network-pool"] = str(rng.randint(1, 4))
        hosts.append(
            {
                "metadata": {"uid": f"edge-{i:032x}", "name": f"host-{i:05d}", "labels": labels},
                "spec": {
                    "device": {"archType": rng.choice(["amd64", "arm64"]), "cpu": {"cores": 32}, "gpus": gpus}
                },
                "status": {"state": "ready", "health": {"state": "healthy"}, "inUseClustersRef": []},
            }
        )
    return hosts


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    hosts = make_hosts(count)
    best_discover = best_status = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        inventory = discover(hosts)
        middle = time.perf_counter()
        compute_status(inventory)
        end = time.perf_counter()
        best_discover = min(best_discover, middle - start)
        best_status = min(best_status, end - middle)
    print(f"hosts: {count}, machines: {len(inventory.machines)}, excluded: {len(inventory.excluded)}")
    print(f"discover: {best_discover * 1000:.1f} ms (best of 5)")
    print(f"compute_status: {best_status * 1000:.1f} ms (best of 5)")


if __name__ == "__main__":
    main()
