"""Benchmark of admission into compute pools at scale (docs/pools.md).

10,000 hosts in 100 pools (a pool's hosts are 2-, 4- and 8-GPU machines of one or two families) and
10,000 workloads (1-16 GPUs, priorities -1..3, a few suspended, a few with a second family), generated
from a fixed seed as ``GpuUnit``s and ``WorkloadRequest``s. Three passes, as the loop would run them:

1. cold: every workload new;
2. warm: the same workloads with the previous admissions (everything sticky);
3. churn: 10 % of the admitted workloads removed, 10 % new ones, and one host of every pool gone.

Prints each pass's time (untraced) and tracemalloc peak (of a second, traced run that must give the same
result), the actions, and the GPUs left idle while a workload
that would fit them is pending (target 0). Targets: each pass under 2 s, peak under 300 MiB.

    python bench/bench_admission.py [--hosts 10000] [--pools 100] [--workloads 10000] [--seed 7]
"""

from __future__ import annotations

import argparse
import random
import time
import tracemalloc
from collections import Counter
from collections.abc import Sequence

from reconciler.model.conditions import Reason
from reconciler.model.gpu import GpuFamily
from reconciler.model.pools import WorkloadRequest
from reconciler.placement.admission import admit_pool
from reconciler.placement.admission_types import PoolAdmission, PoolState, PreviousAdmission, WorkloadAction
from reconciler.placement.units import GpuUnit

FAMILIES = (GpuFamily("NVIDIA-A100"), GpuFamily("NVIDIA-H100"), GpuFamily("NVIDIA-L40S"))
REQUESTS = (1, 1, 2, 2, 3, 4, 4, 6, 8, 8, 12, 16)
HOLDING = (WorkloadAction.ADMIT, WorkloadAction.ADMITTED)


def make_pools(hosts: int, pools: int, rnd: random.Random) -> list[PoolState]:
    out = []
    per_pool = hosts // pools
    for p in range(pools):
        families = rnd.sample(FAMILIES, rnd.choice((1, 1, 2)))
        units = []
        for h in range(per_pool):
            family = rnd.choice(families)
            count = rnd.choice((2, 4, 8, 8))
            name = f"edge-{p:03d}-{h:03d}-{rnd.randrange(16**4):04x}"
            units.extend(GpuUnit(f"uid-{name}", name, i, family) for i in range(count))
        limits = {families[0]: 16}
        mode = "dedicated" if p % 25 == 0 else "shared"
        out.append(PoolState((f"ns-{p % 20:02d}", f"pool-{p:03d}"), mode, tuple(units), limits, "profile"))
    return out


def make_workloads(
    n: int, pools: Sequence[PoolState], rnd: random.Random, tag: str
) -> dict[int, list[WorkloadRequest]]:
    out: dict[int, list[WorkloadRequest]] = {i: [] for i in range(len(pools))}
    for w in range(n):
        p = rnd.randrange(len(pools))
        families = sorted({u.family for u in pools[p].gpus})
        whole = {rnd.choice(families): rnd.choice(REQUESTS)}
        if len(families) > 1 and rnd.random() < 0.1:
            whole[families[-1]] = whole.get(families[-1], 0) + rnd.choice((1, 2))
        out[p].append(
            WorkloadRequest(
                (pools[p].key[0], f"{tag}-{w:05d}"),
                priority=rnd.randint(-1, 3),
                whole=whole,
                suspended=rnd.random() < 0.02,
            )
        )
    return out


def previous_of(result: PoolAdmission) -> list[PreviousAdmission]:
    return [
        PreviousAdmission(d.key, tuple(u.ref for u in d.gpus), d.mig)
        for d in result.workloads.values()
        if d.gpus or d.action in HOLDING
    ]


def idle_while_pending(results: Sequence[PoolAdmission], workloads: dict[int, list[WorkloadRequest]]) -> int:
    """GPUs free at the end of a pass in a pool where a pending workload would fit them."""
    idle = 0
    for i, result in enumerate(results):
        by_key = {w.key: w for w in workloads[i]}
        for decision in result.workloads.values():
            if (
                decision.action is not WorkloadAction.PENDING
                or decision.reason is not Reason.POOL_CAPACITY_EXCEEDED
            ):
                continue
            request = by_key[decision.key]
            free = {f: c.free for f, c in result.capacity.items()}
            if all(free.get(f, 0) >= n for f, n in request.whole.items()):
                idle += sum(request.whole.values())
    return idle


def run_pass(
    label: str,
    pools: Sequence[PoolState],
    workloads: dict[int, list[WorkloadRequest]],
    previous: dict[int, list[PreviousAdmission]],
) -> list[PoolAdmission]:
    start = time.perf_counter()
    results = [admit_pool(pool, workloads[i], previous.get(i, ())) for i, pool in enumerate(pools)]
    elapsed = time.perf_counter() - start
    tracemalloc.start()  # a second run for memory: tracing slows the first one down several times
    again = [admit_pool(pool, workloads[i], previous.get(i, ())) for i, pool in enumerate(pools)]
    _current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert again == results, "admission is not deterministic"
    counts = Counter(str(d.action) for r in results for d in r.workloads.values())
    total = sum(c.total for r in results for c in r.capacity.values())
    admitted = sum(c.admitted for r in results for c in r.capacity.values())
    print(
        f"{label:6s} {elapsed:6.3f} s  peak {peak / 2**20:6.1f} MiB  GPUs {admitted}/{total} admitted  "
        f"idle-while-pending {idle_while_pending(results, workloads)}  "
        + " ".join(f"{k}={v}" for k, v in sorted(counts.items()))
    )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--pools", type=int, default=100)
    parser.add_argument("--workloads", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rnd = random.Random(args.seed)
    pools = make_pools(args.hosts, args.pools, rnd)
    workloads = make_workloads(args.workloads, pools, rnd, "w")
    gpus = sum(len(p.gpus) for p in pools)
    print(f"{args.hosts} hosts, {gpus} GPUs in {args.pools} pools, {args.workloads} workloads")

    cold = run_pass("cold", pools, workloads, {})
    previous = {i: previous_of(r) for i, r in enumerate(cold)}
    warm = run_pass("warm", pools, workloads, previous)
    assert all(
        d.action is WorkloadAction.ADMITTED
        for r in warm
        for d in r.workloads.values()
        if d.key in {p.key for ps in previous.values() for p in ps}
    ), "a sticky admission moved"

    # Churn: remove 10 % of the admitted workloads, add 10 % new ones, one host of every pool leaves.
    previous = {i: previous_of(r) for i, r in enumerate(warm)}
    extra = make_workloads(args.workloads // 10, pools, rnd, "n")
    churned: dict[int, list[WorkloadRequest]] = {}
    shrunk: list[PoolState] = []
    for i, pool in enumerate(pools):
        admitted = {p.key for p in previous[i]}
        kept = [w for w in workloads[i] if w.key not in admitted or rnd.random() >= 0.1]
        churned[i] = kept + extra[i]
        gone = pool.gpus[0].host_uid
        shrunk.append(
            PoolState(pool.key, pool.mode, tuple(u for u in pool.gpus if u.host_uid != gone), pool.gpu_limits)
        )
    run_pass("churn", shrunk, churned, previous)


if __name__ == "__main__":
    main()
