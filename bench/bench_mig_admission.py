"""Benchmark of MIG admission: ``admit_pool`` with ``PoolMigPlanner`` on one pool (docs/mig.md).

A pool of ``--hosts`` A100 80GB x8 hosts and ``--workloads`` workloads from a fixed seed: a third whole
(1-8 GPUs), the rest MIG (1-2 profiles, 1-4 instances each), some asking for both. Three passes as the
loop runs them: cold (all new), warm (the same, everything sticky, layouts read back from JSON), churn
(10 % removed, 10 % new). Prints each pass's time, the actions, GPUs in MIG mode, slices used/stranded.

    python bench/bench_mig_admission.py [--hosts 8] [--workloads 60] [--seed 7]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import Counter

from reconciler.model.gpu import GpuFamily
from reconciler.model.pools import MigRequest, WorkloadRequest
from reconciler.placement.admission import admit_pool
from reconciler.placement.admission_types import PoolAdmission, PoolState, PreviousAdmission
from reconciler.placement.mig_admission import PoolMigPlanner
from reconciler.placement.mig_layouts import parse_mig_layouts
from reconciler.placement.mig_outcome import PoolMigOutcome
from reconciler.placement.units import GpuUnit

A100 = GpuFamily("NVIDIA-A100")
PROFILES = ("1g.10gb", "1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")


def workload(rng: random.Random, name: str) -> WorkloadRequest:
    kind = rng.random()
    whole = rng.randint(1, 8) if kind < 0.4 else 0
    mig: tuple[MigRequest, ...] = ()
    if kind > 0.33:
        profiles = sorted(set(rng.sample(PROFILES, rng.randint(1, 2))))
        mig = tuple(MigRequest(A100, p, rng.randint(1, 4)) for p in profiles)
    return WorkloadRequest(
        ("bench", name), priority=rng.randint(0, 2), whole={A100: whole} if whole else {}, mig=mig
    )


def one_pass(
    pool: PoolState, workloads: list[WorkloadRequest], previous: list[PreviousAdmission], recorded: object
) -> tuple[PoolAdmission, PoolMigOutcome, float]:
    start = time.perf_counter()
    planner = PoolMigPlanner(pool, parse_mig_layouts(recorded), previous, workloads)
    result = admit_pool(pool, workloads, previous, planner)
    outcome = planner.finish(result)
    return result, outcome, time.perf_counter() - start


def previous_of(result: PoolAdmission) -> list[PreviousAdmission]:
    return [
        PreviousAdmission(d.key, tuple(u.ref for u in d.gpus), d.mig)
        for d in result.workloads.values()
        if d.gpus or d.mig
    ]


def report(name: str, result: PoolAdmission, outcome: PoolMigOutcome, seconds: float) -> None:
    actions = Counter(str(d.action) for d in result.workloads.values())
    mig_gpus = sum(len(v) for v in outcome.mig.values())
    cap = result.capacity[A100]
    print(
        f"{name:5} {seconds * 1000:8.1f} ms  {dict(sorted(actions.items()))}  "
        f"admitted {cap.admitted}/{cap.total} GPUs, {mig_gpus} in MIG mode, "
        f"slices used {outcome.usage.used} stranded {outcome.usage.stranded}, "
        f"frozen hosts {len(outcome.frozen_hosts)}, configs {len(outcome.machine_pools)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--workloads", type=int, default=60)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    units = tuple(
        GpuUnit(f"uid-{h:04}", f"gpu-{h:04}", i, A100, mig_capable=True, memory_bytes=80 * 10**9)
        for h in range(args.hosts)
        for i in range(8)
    )
    pool = PoolState(("bench", "pool"), gpus=units, mig_strategy="mixed")
    workloads = [workload(rng, f"w{n:04}") for n in range(args.workloads)]
    cold, cold_out, t = one_pass(pool, workloads, [], None)
    report("cold", cold, cold_out, t)
    warm, warm_out, t = one_pass(pool, workloads, previous_of(cold), json.loads(json.dumps(cold_out.mig)))
    report("warm", warm, warm_out, t)
    gone = set(rng.sample(range(len(workloads)), len(workloads) // 10))
    churned = [w for n, w in enumerate(workloads) if n not in gone]
    churned += [workload(rng, f"new{n:04}") for n in range(len(workloads) // 10)]
    churn, churn_out, t = one_pass(pool, churned, previous_of(warm), json.loads(json.dumps(warm_out.mig)))
    report("churn", churn, churn_out, t)


if __name__ == "__main__":
    main()
