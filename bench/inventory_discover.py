"""Time ``discover`` and ``compute_status`` over a large generated inventory; prints figures.

Usage: python bench/inventory_discover.py [HOSTS]   (default 10,000)

Discovery four ways, CPU time, best of 5: from search items (read, then classified: ``plan`` and the
first pass), the reading alone, from facts already read (a pass after every host changed), and from
facts with the memo the loop keeps when 1% of the hosts changed (an ordinary pass).
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from reconciler.compute_status import compute_status
from reconciler.edgehost import read_hosts
from reconciler.inventory import DiscoveryMemo, discover

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


def _best(run: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(5):
        start = time.process_time()
        run()
        best = min(best, time.process_time() - start)
    return best * 1000


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    hosts = make_hosts(count)
    facts = read_hosts(hosts)
    memo: DiscoveryMemo = {}
    discover(facts, memo)
    changed = facts[:]
    for n in range(0, count, 100):  # 1% of the hosts: new facts objects (a changed answer)
        changed[n] = replace(changed[n])

    def with_memo() -> None:  # each round the same 1% changed since the memo's pass
        discover(facts, memo)
        discover(changed, memo)

    inventory = discover(hosts)
    print(f"hosts: {count}, machines: {len(inventory.machines)}, excluded: {len(inventory.excluded)}")
    print(f"discover (search items): {_best(lambda: discover(hosts)):.1f} ms (best of 5, CPU)")
    print(f"  read_hosts alone: {_best(lambda: read_hosts(hosts)):.1f} ms")
    print(f"discover (facts already read): {_best(lambda: discover(facts)):.1f} ms")
    both = _best(with_memo)
    print(f"discover (facts, memo, 1% changed): about {both / 2:.1f} ms (two passes {both:.1f} ms)")
    print(f"compute_status: {_best(lambda: compute_status(inventory)):.1f} ms")


if __name__ == "__main__":
    main()
