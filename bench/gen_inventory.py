#!/usr/bin/env python3
"""Generate large, realistic inventory snapshots (docs/palette.md format) for benchmarks.

    python bench/gen_inventory.py --hosts 10000 --seed 1 --out /tmp/inventory.json

The mix: control-plane CPU hosts, GPU hosts of several families (H100, A100, L40S, L4) with 1, 2, 4 or 8
GPUs (some reported by the agent, some only through the ``gpus``/``gpu-family``/``gpu-memory`` tags),
CPU hosts tagged ``palette.ai/worker``, resource groups (``palette.ai.rg/...``), a few ARM hosts, a few
unhealthy or unpaired hosts and a few without the ``palette.ai`` tag. The same seed gives the same file.
Printed figures (to stderr): host counts by kind and the time taken.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

# family -> (agent model string, memory per GPU)
GPU_MODELS: dict[str, tuple[str, str]] = {
    "H100": ("GH100 [H100 SXM5 80GB]", "80 GB"),
    "A100": ("GA100 [A100 SXM4 80GB]", "80 GB"),
    "L40S": ("AD102GL [L40S]", "48 GB"),
    "L4": ("AD104GL [L4]", "24 GB"),
}
GPU_COUNTS = (1, 2, 4, 8)
KINDS = ("control-plane", "gpu", "worker-cpu")
KIND_WEIGHTS = (0.2, 0.65, 0.15)


def _uid(rng: random.Random) -> str:
    return "edge-" + "".join(rng.choice("0123456789abcdef") for _ in range(32))


def make_host(rng: random.Random, index: int, projects: list[dict[str, str]]) -> dict[str, Any]:
    """One edge host as ``POST /v1/dashboard/edgehosts/search`` returns it."""
    kind = rng.choices(KINDS, KIND_WEIGHTS)[0]
    arch = "arm64" if rng.random() < 0.05 else "amd64"
    labels: dict[str, str] = {"palette.ai": "true"}
    if rng.random() < 0.01:
        del labels["palette.ai"]  # not offered to PaletteAI
    device: dict[str, Any] = {"archType": arch, "memory": {"sizeInMB": 262144}}
    if kind == "control-plane":
        device["cpu"] = {"cores": rng.choice((4, 8, 16))}
        if rng.random() < 0.5:
            labels["palette.ai/control-plane"] = "true"
        name = f"edge-cp-{index:05d}"
    elif kind == "worker-cpu":
        device["cpu"] = {"cores": rng.choice((16, 32, 64))}
        labels["palette.ai/worker"] = "true"
        name = f"edge-worker-{index:05d}"
    else:
        family = rng.choice(tuple(GPU_MODELS))
        count = rng.choice(GPU_COUNTS)
        model, memory = GPU_MODELS[family]
        device["cpu"] = {"cores": rng.choice((32, 64, 96))}
        if rng.random() < 0.85:
            device["gpus"] = [{"vendor": "NVIDIA", "model": model, "gpuCount": count, "memory": memory}]
        else:  # an agent that reports no GPUs: the tags say what is there
            labels.update(
                {"gpus": str(count), "gpu-family": f"NVIDIA-{family}", "gpu-memory": memory.replace(" ", "")}
            )
        name = f"edge-{family.lower()}-x{count}-{index:05d}"
    if rng.random() < 0.3:
        labels["palette.ai.rg/network-pool"] = str(rng.randint(1, 4))
    if rng.random() < 0.15:
        labels["palette.ai.rg/storage-tier"] = rng.choice(("high-performance", "standard"))
    state = "unpaired" if rng.random() < 0.01 else "ready"
    health = "unhealthy" if rng.random() < 0.02 else "healthy"
    uid = _uid(rng)
    project = projects[index % len(projects)]
    address = {"hostAddress": f"10.{(index >> 16) & 255}.{(index >> 8) & 255}.{index & 255}"}
    return edge_host_item(uid, name, labels, device, address, dict(project), state, health)


def edge_host_item(
    uid: str,
    name: str,
    labels: dict[str, str],
    device: dict[str, Any],
    host: dict[str, str],
    project: dict[str, str],
    state: str = "ready",
    health: str = "healthy",
    in_use: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """One item exactly as ``POST /v1/dashboard/edgehosts/search`` returns it (v1EdgeHostsMetadata)."""
    return {
        "metadata": {
            "uid": uid,
            "name": name,
            "labels": labels,
            "creationTimestamp": "2026-01-10T10:00:00.000Z",
            "lastModifiedTimestamp": "2026-01-10T10:05:00.000Z",
        },
        "spec": {"type": "edge-native", "device": device, "host": host, "projectMeta": project},
        "status": {
            "state": state,
            "health": {"state": health, "agentVersion": "4.8.1", "message": ""},
            "inUseClustersRef": in_use or [],
        },
    }


def generate(hosts: int, seed: int = 0, projects: int = 1) -> dict[str, Any]:
    """A snapshot document with ``hosts`` edge hosts spread over ``projects`` projects; no clusters."""
    rng = random.Random(seed)
    metas = [
        {"name": f"project-{i + 1}", "uid": f"{0x6514216503B1D1CD4F1BDC44 + i:024x}"} for i in range(projects)
    ]
    return {"edgeHosts": [make_host(rng, i, metas) for i in range(hosts)], "clusters": []}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--projects", type=int, default=1)
    parser.add_argument("--out", type=Path, help="file to write (.json or .yaml); default: JSON on stdout")
    args = parser.parse_args(argv)
    if args.hosts < 0 or args.projects < 1:
        parser.error("--hosts must be >= 0 and --projects >= 1")
    started = time.perf_counter()
    snapshot = generate(args.hosts, args.seed, args.projects)
    if args.out is None:
        json.dump(snapshot, sys.stdout)
        sys.stdout.write("\n")
    elif args.out.suffix.lower() in (".yaml", ".yml"):
        import yaml

        dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
        args.out.write_text(yaml.dump(snapshot, Dumper=dumper, sort_keys=False), encoding="utf-8")
    else:
        args.out.write_text(json.dumps(snapshot) + "\n", encoding="utf-8")
    elapsed = time.perf_counter() - started
    kinds = Counter(h["metadata"]["name"].split("-")[1] for h in snapshot["edgeHosts"])
    unhealthy = sum(h["status"]["health"]["state"] != "healthy" for h in snapshot["edgeHosts"])
    print(
        f"generated {args.hosts} hosts (seed {args.seed}) in {elapsed:.2f}s: "
        + ", ".join(f"{k}={v}" for k, v in sorted(kinds.items()))
        + f"; unhealthy={unhealthy}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
