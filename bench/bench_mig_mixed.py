"""Benchmark of joint MIG planning on mixed demand: MIG workloads, a quarter of them with 1-2 whole GPUs
beside their instances (on the replica's host), admitted in one pass by the product (``admit_mig_pool``)
and, alternately in the same run, by a previous version's product (``--base``, in a child process with
that tree on ``PYTHONPATH``, on the same demands).

Demands as ``bench_mig.py`` makes them (seed, pools of 8-64 A100 80GB GPUs in hosts of 8, classes
``mixed`` (1g.10gb, 2g.20gb, 3g.40gb) and ``any``), one priority. Counted per class: GPUs held (bound
whole or holding an instance), pending workloads, stranded slices; against a lower bound, where every
workload is admitted: the whole GPUs plus the exact optimum of the instances (``bench_mig.optimum``:
the pool as one bin, replicas may span hosts, so no plan of the product can go below it). CPU time per
pass, median and p95. ``--host-bound``: also a tighter lower bound, modelled per host (each workload's
instances and whole GPUs on one host, whole GPUs taking GPUs of that host; HiGHS, 5 s per demand, its
dual bound when stopped), to tell what part of the gap is the pooled bound's.

    python bench/bench_mig_mixed.py [--demands 300] [--seed 7] [--base REV] [--host-bound]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _support import base_tree
from bench_mig import A100, CLASSES, GPU, a100_pool, configurations, make_demand, optimum

from reconciler.model.pools import MigRequest, WorkloadRequest
from reconciler.placement.mig_pool import admit_mig_pool

KINDS = ("mixed", "any")
REPO = Path(__file__).resolve().parent.parent
Demand = tuple[str, int, list[tuple[int, dict[str, int]]]]  # class, pool GPUs, (whole GPUs, instances)


def demands(seed: int, count: int) -> list[Demand]:
    rng = random.Random(seed)
    out: list[Demand] = []
    for i in range(count):
        kind = KINDS[i % len(KINDS)]
        pool_gpus = 8 * rng.randint(1, 8)
        workloads = make_demand(rng, pool_gpus, CLASSES[kind])
        out.append(
            (kind, pool_gpus, [(rng.randint(1, 2) if rng.random() < 0.25 else 0, w) for w in workloads])
        )
    return out


def run_product(pool_gpus: int, workloads: list[tuple[int, dict[str, int]]]) -> list[float]:
    """GPUs held, pending, stranded slices, CPU seconds of the product's pass."""
    pool = a100_pool(pool_gpus)
    requests = [
        WorkloadRequest(
            ("bench", f"w{n:04d}"),
            whole={A100: whole} if whole else {},
            mig=tuple(MigRequest(A100, p, c) for p, c in sorted(w.items())),
        )
        for n, (whole, w) in enumerate(workloads)
    ]
    started = time.process_time()
    result, outcome = admit_mig_pool(pool, requests)
    cpu = time.process_time() - started
    held = {(u.host_uid, u.index) for d in result.workloads.values() for u in d.gpus}
    held |= {(i.host_uid, i.gpu) for d in result.workloads.values() for i in d.mig}
    pending = sum(1 for d in result.workloads.values() if str(d.action) == "pending")
    return [len(held), pending, outcome.usage.stranded, cpu]


def base_rows(base: str, seed: int, count: int) -> tuple[str, list[list[float]]]:
    sha, path = base_tree(base)
    cmd = [sys.executable, __file__, "--product-only", "--seed", str(seed), "--demands", str(count)]
    done = subprocess.run(
        cmd, env={**os.environ, "PYTHONPATH": str(path)}, capture_output=True, text=True, check=True
    )
    return sha[:7], json.loads(done.stdout.strip().splitlines()[-1])


def host_bound(workloads: list[tuple[int, dict[str, int]]], pool_gpus: int, seconds: float = 5.0) -> int:
    """Fewest GPUs holding every workload with each on one host of 8 GPUs (its dual bound when stopped):
    per host, GPUs per configuration (``bench_mig.configurations``) plus the whole GPUs of its
    workloads at most 8, instances per profile covered."""
    from reconciler.placement.mig_joint_solve import new_solver

    hosts = range(pool_gpus // 8)
    profiles = tuple(sorted({p for _, w in workloads for p in w}))
    vectors = [v for v in configurations(GPU, profiles) if any(v)]
    solver = new_solver()
    solver.setOptionValue("time_limit", seconds)
    x = {(h, c): solver.addIntegral(lb=0, ub=8) for h in hosts for c in range(len(vectors))}
    y = {(n, h): solver.addBinary() for n in range(len(workloads)) for h in hosts}
    for n in range(len(workloads)):
        solver.addConstr(sum(y[n, h] for h in hosts) == 1)
    for h in hosts:
        whole = sum(k * y[n, h] for n, (k, _) in enumerate(workloads) if k)
        solver.addConstr(sum(x[h, c] for c in range(len(vectors))) + whole <= 8)
        for p, name in enumerate(profiles):
            supply = sum(vectors[c][p] * x[h, c] for c in range(len(vectors)) if vectors[c][p])
            asked = sum(w.get(name, 0) * y[n, h] for n, (_, w) in enumerate(workloads))
            solver.addConstr(supply - asked >= 0)
    solver.minimize(sum(x.values()))
    dual: float = solver.getInfo().mip_dual_bound
    return math.ceil(dual - 1e-6) + sum(k for k, _ in workloads)


def p95(values: list[float]) -> float:
    return sorted(values)[max(0, round(0.95 * len(values)) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demands", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--base", default="", help="previous version to run on the same demands ('': skip)")
    parser.add_argument("--host-bound", action="store_true", help="also the per-host lower bound")
    parser.add_argument("--product-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    cases = demands(args.seed, args.demands)
    if args.product_only:
        print(json.dumps([run_product(gpus, workloads) for _, gpus, workloads in cases]))
        return
    name, theirs = base_rows(args.base, args.seed, args.demands) if args.base else ("", [])
    from reconciler.placement.mig_joint_solve import new_solver

    solver = new_solver()
    totals: dict[str, Counter[str]] = {kind: Counter() for kind in KINDS}
    times: dict[str, list[float]] = {"this": [], name: []}
    for n, (kind, gpus, workloads) in enumerate(cases):
        mine = run_product(gpus, workloads)
        row = totals[kind]
        row.update(demands=1, held=int(mine[0]), pending=int(mine[1]), stranded=int(mine[2]))
        times["this"].append(mine[3])
        if theirs:
            row.update(
                base_held=int(theirs[n][0]), base_pending=int(theirs[n][1]), base_stranded=int(theirs[n][2])
            )
            times[name].append(theirs[n][3])
        if mine[1] == 0 and (not theirs or theirs[n][1] == 0):
            asked: Counter[str] = Counter()
            for _, w in workloads:
                asked.update(w)
            best = optimum(asked, gpus, solver)
            if best is not None:
                bound = best[0] + sum(whole for whole, _ in workloads)
                row.update(placed=1, bound=bound, placed_held=int(mine[0]))
                if args.host_bound:
                    row.update(host_bound=host_bound(workloads, gpus))
                if theirs:
                    row.update(placed_base_held=int(theirs[n][0]))
    print(
        f"{args.demands} demands, seed {args.seed}, pools of 8-64 {GPU.key} GPUs,"
        " a quarter of the workloads with 1-2 whole GPUs"
    )
    for kind, row in totals.items():
        print(f"[{kind}] {row['demands']} demands (profiles: {', '.join(CLASSES[kind])})")
        print(f"  this: GPUs held {row['held']}, pending {row['pending']}, stranded {row['stranded']}")
        if theirs:
            print(
                f"  {name}: GPUs held {row['base_held']}, pending {row['base_pending']},"
                f" stranded {row['base_stranded']}"
                f"; this / {name}: {row['held'] / row['base_held']:.3f}x GPUs"
            )
        if row["placed"]:
            over = row["placed_held"] / row["bound"] - 1
            line = f"  where all are admitted ({row['placed']} demands): bound {row['bound']}"
            line += f", this {row['placed_held']} ({over:+.2%})"
            if theirs:
                line += (
                    f", {name} {row['placed_base_held']} ({row['placed_base_held'] / row['bound'] - 1:+.2%})"
                )
            print(line)
            if row["host_bound"]:
                over = row["placed_held"] / row["host_bound"] - 1
                print(f"  per-host bound {row['host_bound']} (this {over:+.2%})")
    for who, values in times.items():
        if values:
            ms = [v * 1000 for v in values]
            print(
                f"CPU per pass, {who}: median {statistics.median(ms):.1f} ms, p95 {p95(ms):.1f} ms,"
                f" max {max(ms):.1f} ms"
            )
    if theirs:
        print(
            f"this / {name}: {statistics.median(times['this']) / statistics.median(times[name]):.2f}x"
            " CPU (medians)"
        )


if __name__ == "__main__":
    main()
