"""Benchmark of MIG admission: ``admit_mig_pool`` (``admit_pool`` with ``PoolMigPlanner``) on one pool.

A pool of ``--hosts`` A100 80GB x8 hosts and ``--workloads`` workloads from a fixed seed: a third whole
(1-8 GPUs), the rest MIG (1-2 profiles, 1-4 instances each), some asking for both. Three passes as the
loop runs them: cold (all new), warm (the same, everything sticky, layouts read back from JSON), churn
(10 % removed, 10 % new). Prints each pass's CPU time, the actions, GPUs in MIG mode, slices
used/stranded, for this tree and, alternately in the same run, for a previous version (``--base``, in a
child process with that tree on ``PYTHONPATH``), with the ratio of the median CPU times (docs/mig.md).

    python bench/bench_mig_admission.py [--hosts 8] [--workloads 60] [--seed 7] [--base REV] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections import Counter

from _support import base_tree

from reconciler.model.gpu import GpuFamily
from reconciler.model.pools import MigRequest, WorkloadRequest
from reconciler.placement.admission import admit_pool
from reconciler.placement.admission_types import PoolAdmission, PoolState, PreviousAdmission
from reconciler.placement.mig_admission import PoolMigPlanner
from reconciler.placement.mig_layouts import parse_mig_layouts
from reconciler.placement.mig_outcome import PoolMigOutcome
from reconciler.placement.units import GpuUnit

try:  # the product's pass; a base older than it runs admit_pool + PoolMigPlanner
    from reconciler.placement.mig_pool import admit_mig_pool
except ImportError:  # pragma: no cover - only under --base
    admit_mig_pool = None  # type: ignore[assignment]

A100 = GpuFamily("NVIDIA-A100")
DEFAULT_BASE = "70d953a"  # main when this work started (joint planning wired in, before the guard)
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
    start = time.process_time()
    if admit_mig_pool is not None:
        result, outcome = admit_mig_pool(pool, workloads, previous, parse_mig_layouts(recorded))
    else:  # a base before ``mig_pool``
        planner = PoolMigPlanner(pool, parse_mig_layouts(recorded), previous, workloads)
        result = admit_pool(pool, workloads, previous, planner)
        outcome = planner.finish(result)
    return result, outcome, time.process_time() - start


def previous_of(result: PoolAdmission) -> list[PreviousAdmission]:
    return [
        PreviousAdmission(d.key, tuple(u.ref for u in d.gpus), d.mig)
        for d in result.workloads.values()
        if d.gpus or d.mig
    ]


def row(name: str, result: PoolAdmission, outcome: PoolMigOutcome, seconds: float) -> dict[str, object]:
    actions = Counter(str(d.action) for d in result.workloads.values())
    return {
        "pass": name,
        "ms": seconds * 1000,
        "actions": dict(sorted(actions.items())),
        "admitted": actions["admit"] + actions["admitted"],
        "gpus": result.capacity[A100].admitted,
        "mig_gpus": sum(len(v) for v in outcome.mig.values()),
        "used": outcome.usage.used,
        "stranded": outcome.usage.stranded,
    }


def passes(hosts: int, count: int, seed: int) -> list[dict[str, object]]:
    """The three passes (cold, warm, churn) of this tree's product."""
    rng = random.Random(seed)
    units = tuple(
        GpuUnit(f"uid-{h:04}", f"gpu-{h:04}", i, A100, mig_capable=True, memory_bytes=80 * 10**9)
        for h in range(hosts)
        for i in range(8)
    )
    pool = PoolState(("bench", "pool"), gpus=units, mig_strategy="mixed")
    workloads = [workload(rng, f"w{n:04}") for n in range(count)]
    # An untimed pass first: what a process pays once (importing highspy, its first solve) is not a
    # pass's cost, and the base's child process would pay it in every round where this one pays it once.
    one_pass(pool, workloads, [], None)
    cold, cold_out, t = one_pass(pool, workloads, [], None)
    rows = [row("cold", cold, cold_out, t)]
    warm, warm_out, t = one_pass(pool, workloads, previous_of(cold), json.loads(json.dumps(cold_out.mig)))
    rows.append(row("warm", warm, warm_out, t))
    gone = set(rng.sample(range(len(workloads)), len(workloads) // 10))
    churned = [w for n, w in enumerate(workloads) if n not in gone]
    churned += [workload(rng, f"new{n:04}") for n in range(len(workloads) // 10)]
    churn, churn_out, t = one_pass(pool, churned, previous_of(warm), json.loads(json.dumps(warm_out.mig)))
    rows.append(row("churn", churn, churn_out, t))
    return rows


def base_passes(base: str, hosts: int, count: int, seed: int) -> tuple[str, list[dict[str, object]]]:
    """The same passes by the product of ``base``, in a child process with that tree on PYTHONPATH."""
    sha, path = base_tree(base)
    cmd = [sys.executable, __file__, "--json", "--hosts", str(hosts), "--workloads", str(count)]
    cmd += ["--seed", str(seed)]
    env = {**os.environ, "PYTHONPATH": str(path)}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return sha[:7], json.loads(done.stdout.strip().splitlines()[-1])


def show(rows: list[dict[str, object]]) -> str:
    return (
        f"{rows[0]['ms']:7.1f} ms  {rows[0]['actions']}  admitted {rows[0]['admitted']}, "
        f"{rows[0]['gpus']} GPUs admitted, {rows[0]['mig_gpus']} in MIG mode, "
        f"slices used {rows[0]['used']} stranded {rows[0]['stranded']}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--workloads", type=int, default=60)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--base", default=DEFAULT_BASE, help="previous version to run alternately ('': skip)")
    parser.add_argument("--rounds", type=int, default=2, help="alternated runs of this tree and the base")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # the child's mode
    args = parser.parse_args()
    if args.json:
        print(json.dumps(passes(args.hosts, args.workloads, args.seed)))
        return
    mine: list[list[dict[str, object]]] = []
    theirs: list[list[dict[str, object]]] = []
    name = ""
    for _ in range(args.rounds):
        mine.append(passes(args.hosts, args.workloads, args.seed))
        if args.base:
            name, found = base_passes(args.base, args.hosts, args.workloads, args.seed)
            theirs.append(found)
    print(f"{args.hosts * 8} GPUs, {args.workloads} workloads, seed {args.seed}; CPU, {args.rounds} rounds")
    for k, label in enumerate(("cold", "warm", "churn")):
        ms = sorted(float(str(r[k]["ms"])) for r in mine)
        print(f"{label:5} this  {show([mine[0][k]])} (rounds {' / '.join(f'{m:.0f}' for m in ms)} ms)")
        if theirs:
            base_ms = sorted(float(str(r[k]["ms"])) for r in theirs)
            ratio = statistics.median(ms) / statistics.median(base_ms)
            shown = " / ".join(f"{m:.0f}" for m in base_ms)
            print(f"{'':5} {name} {show([theirs[0][k]])} (rounds {shown} ms)")
            print(f"{'':5} this / {name}: {ratio:.2f}x CPU (medians)")


if __name__ == "__main__":
    main()
