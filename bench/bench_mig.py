"""Benchmark of the MIG planner against the templates people use and against the exact optimum.

Random MIG demands (a list of workloads, each {profile: count}) on pools of 8-64 A100 80GB GPUs (hosts
of 8). Each demand is admitted in one pass by the product (``admit_mig_pool``: ``admit_pool`` with
``PoolMigPlanner``, one host per replica, the pass's new demand planned jointly), by the same product of
a previous version (``--base``, default the main this work started from; run in a child process with
that tree on ``PYTHONPATH``, on the same demands), workload by workload with ``plan_mig_admission``
alone (nothing frozen, replicas may span hosts: the planner), and compared with:

- ``all-1g.10gb``: every GPU pre-split into 7 x 1g.10gb (strands 1 slice per GPU, serves only 1g.10gb);
- ``all-balanced``: every GPU pre-split into 2 x 1g.10gb + 2g.20gb + 3g.40gb (mig-parted's default);
- the exact optimum for the whole demand at once: fewest GPUs, then fewest stranded slices (an integer
  program over per-GPU configurations, solved with HiGHS; needs ``pip install highspy``).

A template admits a workload when all its instances fit in free instances of the template (first fit
in GPU order). Demand classes (one third each): ``1g`` (only 1g.10gb), ``mixed`` (1g.10gb, 2g.20gb,
3g.40gb with random weights per demand: the profiles all-balanced offers), ``any`` (every plain profile).

Each demand is also admitted over 4 passes (a quarter of its workloads each): between passes a GPU
holding an instance of an earlier pass is frozen (its layout stays; the rule), or, as the product did
before, every GPU of its host (``passes/host``; it refuses workloads the per-GPU rule admits).

Prints per class: workloads left pending, GPUs used (GPUs holding an instance), stranded slices and
unused slices on used GPUs for each method; GPUs used against the optimum; how often the one-pass
planner uses as few GPUs as the optimum; CPU time per admission by pool size; then, on one pool of
``--scale-gpus`` GPUs (5,000 by default), CPU time per admission of the planner alone and per placement
in one ``admit_pool`` pass of MIG workloads. Targets: at most +1.5% GPUs over the optimum, at least 30%
fewer GPUs than the better template on mixed demand, per-admission p95 under 100 ms on 5,000 GPUs.

    python bench/bench_mig.py [--demands 1000] [--seed 7] [--no-optimum] [--scale-gpus 5000] [--base REV]
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from _support import base_tree

from reconciler.model.gpu import GpuFamily
from reconciler.model.mig import MigGpuType, entry_by_key
from reconciler.model.pools import MigRequest, WorkloadKey, WorkloadRequest
from reconciler.placement.admission import admit_pool
from reconciler.placement.admission_types import PoolState
from reconciler.placement.mig import (
    MigPlan,
    PoolGpu,
    frozen_gpus,
    layout_mask,
    mig_usage,
    plan_mig_admission,
    release_idle_gpus,
    repad,
    uncovered,
    valid_layouts,
)
from reconciler.placement.mig_admission import PoolMigPlanner
from reconciler.placement.mig_joint import plan_pass, used_gpus
from reconciler.placement.seam import MigPlacement, MigRefusal

try:  # the product's pass; a base older than it runs admit_pool + PoolMigPlanner
    from reconciler.placement.mig_pool import admit_mig_pool
except ImportError:  # pragma: no cover - only under --base
    admit_mig_pool = None  # type: ignore[assignment]
from reconciler.placement.units import GpuUnit

GPU = entry_by_key("NVIDIA-A100-80GB")
A100 = GpuFamily("NVIDIA-A100")
SLICES = GPU.memory_slices
TEMPLATES: Mapping[str, Mapping[str, int]] = {
    "all-1g.10gb": {"1g.10gb": 7},
    "all-balanced": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
}
CLASSES: Mapping[str, tuple[str, ...]] = {
    "1g": ("1g.10gb",),
    "mixed": ("1g.10gb", "2g.20gb", "3g.40gb"),
    "any": ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
}


@dataclass
class Outcome:
    gpus: int = 0  # GPUs holding at least one bound instance
    stranded: int = 0  # memory slices of MIG-mode GPUs no instance covers
    unused: int = 0  # memory slices of used GPUs not bound to a workload
    pending: int = 0  # workloads not admitted


@dataclass
class Totals:
    demands: int = 0
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    complete: dict[str, int] = field(default_factory=Counter)  # demands a method placed entirely
    at_optimum: int = 0  # same GPUs and stranded slices as the optimum
    gpus_at_optimum: int = 0  # same GPUs
    optimum_known: int = 0
    joint_at_optimum_gpus: int = 0  # demands the joint pass places on as few GPUs as the optimum
    product_at_optimum_gpus: int = 0  # demands the product admits entirely on the optimum's GPUs
    # (GPUs, pending) of the product per demand the optimum is known for (the gap is over those)
    on_known: dict[str, list[tuple[int, int]]] = field(
        default_factory=lambda: {"product": [], "product@base": []}
    )
    fewer_than_template: list[float] = field(default_factory=list)

    def add(self, method: str, outcome: Outcome) -> None:
        total = self.outcomes.setdefault(method, Outcome())
        total.gpus += outcome.gpus
        total.stranded += outcome.stranded
        total.unused += outcome.unused
        total.pending += outcome.pending
        if outcome.pending == 0:
            self.complete[method] += 1


def size(profile: str) -> int:
    found = GPU.profile(profile)
    assert found is not None
    return found.size


def make_demand(rng: random.Random, pool_gpus: int, profiles: Sequence[str]) -> list[dict[str, int]]:
    """Workloads of 1-2 profiles, 1-4 instances each, until 20-60% of the pool's slices are asked for."""
    weights = [rng.random() ** 2 + 0.01 for _ in profiles]
    budget = rng.uniform(0.2, 0.6) * pool_gpus * SLICES
    workloads: list[dict[str, int]] = []
    asked = 0.0
    while asked < budget:
        kinds = rng.choices(profiles, weights, k=rng.choice((1, 1, 2)))
        workload: dict[str, int] = {}
        for kind in kinds:
            most = 1 if size(kind) == 8 else 4
            workload[kind] = workload.get(kind, 0) + rng.randint(1, most)
        workloads.append(workload)
        asked += sum(size(k) * n for k, n in workload.items())
    return workloads


def run_planner(
    pool_gpus: int,
    workloads: Sequence[Mapping[str, int]],
    times: list[float],
    passes: int = 1,
    freeze: str = "gpu",
    repadding: bool = True,
) -> Outcome:
    """Admit the workloads one by one over ``passes`` passes of equal size. Between passes the GPUs
    holding an instance of an earlier pass are frozen (``freeze="gpu"``, the rule) or, as before, every
    GPU of their host (``freeze="host"``); idle MIG GPUs not frozen return to whole."""
    state = tuple(PoolGpu(f"host-{i // 8:02d}", i % 8, GPU) for i in range(pool_gpus))
    pending = 0
    size = -(-len(workloads) // passes)
    for first in range(0, len(workloads), size):
        earlier = {f"bench/w{n}" for n in range(first)}
        if repadding:
            asked: Counter[str] = Counter()
            for workload in workloads[:first]:
                asked.update(workload)
            state = repad(state, asked, {(g.host, g.index) for g in state if g.instances is not None})
        held = frozen_gpus(state, earlier)
        state = release_idle_gpus(tuple(replace(g, frozen=(g.host, g.index) in held) for g in state))
        hosts = frozenset(h for h, _ in held) if freeze == "host" else frozenset()
        for n in range(first, min(first + size, len(workloads))):
            started = time.process_time()
            result = plan_mig_admission(state, workloads[n], f"bench/w{n}", hosts)
            times.append(time.process_time() - started)
            if isinstance(result, MigPlan):
                state = result.gpus
            else:
                pending += 1
    used = [g for g in state if any(i.workload for i in g.instances or ())]
    bound = mig_usage(state).used
    return Outcome(len(used), mig_usage(state).stranded, len(used) * SLICES - bound, pending)


def run_joint(pool_gpus: int, workloads: Sequence[Mapping[str, int]], times: list[float]) -> Outcome:
    """The whole demand in one pass, planned jointly (``plan_pass``: the greedy, then HiGHS over the free
    GPUs under a node limit; the greedy's answer when that is no better)."""
    state = tuple(PoolGpu(f"host-{i // 8:02d}", i % 8, GPU) for i in range(pool_gpus))
    started = time.process_time()
    result = plan_pass(state, [(f"bench/w{n}", w) for n, w in enumerate(workloads)])
    times.append(time.process_time() - started)
    usage = mig_usage(result.gpus)
    used = used_gpus(result.gpus)
    return Outcome(used, usage.stranded, used * SLICES - usage.used, len(result.pending))


def run_template(
    pool_gpus: int, template: Mapping[str, int], workloads: Sequence[Mapping[str, int]]
) -> Outcome:
    free = [dict(template) for _ in range(pool_gpus)]
    used: set[int] = set()
    bound = pending = 0
    for workload in workloads:
        trial = [dict(f) for f in free]
        touched: set[int] = set()
        ok = True
        for profile, count in workload.items():
            for _ in range(count):
                gpu = next((i for i, f in enumerate(trial) if f.get(profile, 0) > 0), None)
                if gpu is None:
                    ok = False
                    break
                trial[gpu][profile] -= 1
                touched.add(gpu)
            if not ok:
                break
        if not ok:
            pending += 1
            continue
        free = trial
        used |= touched
        bound += sum(size(p) * n for p, n in workload.items())
    per_gpu = SLICES - sum(size(p) * n for p, n in template.items())
    return Outcome(len(used), per_gpu * pool_gpus, len(used) * SLICES - bound, pending)


def configurations(gpu_type: MigGpuType, profiles: Sequence[str]) -> dict[tuple[int, ...], int]:
    """Per count vector of the demand's profiles one GPU's layout can hold, the fewest stranded slices.

    Every plain layout counts, whatever its profiles: instances the demand does not use stay free (they
    cover their slices), as the planner's padding does.
    """
    best: dict[tuple[int, ...], int] = {}
    for layout in valid_layouts(gpu_type):
        if any(name.endswith("+me") for name, _ in layout):
            continue
        counts = Counter(name for name, _ in layout)
        vector = tuple(counts.get(p, 0) for p in profiles)
        stranded = uncovered(gpu_type, layout_mask(gpu_type, layout))
        best[vector] = min(best.get(vector, SLICES), stranded)
    return best


def optimum(demand: Mapping[str, int], pool_gpus: int, solver: object) -> tuple[int, int] | None:
    """Fewest GPUs, then fewest stranded slices, to hold the whole demand (integer program, HiGHS)."""
    import highspy

    assert isinstance(solver, highspy.Highs)
    profiles = tuple(sorted(demand))
    configs = configurations(GPU, profiles)
    configs.pop((0,) * len(profiles), None)
    # Covering with >= is exact: a GPU may keep instances of its configuration free.
    scale = SLICES * pool_gpus + 1
    solver.clearModel()
    x = [solver.addIntegral(lb=0, ub=pool_gpus) for _ in configs]
    for k, profile in enumerate(profiles):
        solver.addConstr(sum(v[k] * xi for v, xi in zip(configs, x, strict=True)) >= demand[profile])
    solver.addConstr(sum(x) <= pool_gpus)
    solver.minimize(sum((scale + s) * xi for s, xi in zip(configs.values(), x, strict=True)))
    if solver.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return None
    value = round(solver.getInfo().objective_function_value)
    return value // scale, value % scale


JOINT_TIMES: list[float] = []  # CPU time of each joint pass (greedy + solver)
PASSES = 4  # the multi-pass runs: the demand arrives in this many passes
PRODUCT_TIMES: list[float] = []  # CPU time of each product pass
DEFAULT_BASE = "70d953a"  # main when this work started (joint planning wired in, before the guard)
REPO = Path(__file__).resolve().parent.parent


def demands(seed: int, count: int) -> list[tuple[str, int, list[dict[str, int]]]]:
    """The benchmark's demands: (class, pool GPUs, workloads), the same for every version."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        kind = list(CLASSES)[i % len(CLASSES)]
        pool_gpus = 8 * rng.randint(1, 8)
        out.append((kind, pool_gpus, make_demand(rng, pool_gpus, CLASSES[kind])))
    return out


def a100_pool(pool_gpus: int) -> PoolState:
    """A MIG pool (strategy mixed) of ``pool_gpus`` A100 80 GB GPUs on hosts of 8."""
    units = tuple(
        GpuUnit(
            f"uid-{i // 8:02d}", f"host-{i // 8:02d}", i % 8, A100, mig_capable=True, memory_bytes=80 * 10**9
        )
        for i in range(pool_gpus)
    )
    return PoolState(("bench", "pool"), gpus=units, mig_strategy="mixed")


def run_product(pool_gpus: int, workloads: Sequence[Mapping[str, int]], times: list[float]) -> Outcome:
    """The product's pass: ``admit_pool`` with ``PoolMigPlanner`` on a pool of hosts of 8 GPUs."""
    pool = a100_pool(pool_gpus)
    requests = [
        WorkloadRequest(
            ("bench", f"w{n:04d}"), mig=tuple(MigRequest(A100, p, c) for p, c in sorted(w.items()))
        )
        for n, w in enumerate(workloads)
    ]
    started = time.process_time()
    if admit_mig_pool is not None:
        result, outcome = admit_mig_pool(pool, requests)
    else:  # a base before ``mig_pool``
        planner = PoolMigPlanner(pool, (), (), requests)
        result = admit_pool(pool, requests, (), planner)
        outcome = planner.finish(result)
    times.append(time.process_time() - started)
    used = {(i.host_uid, i.gpu) for d in result.workloads.values() for i in d.mig}
    pending = sum(1 for d in result.workloads.values() if str(d.action) == "pending")
    asked = sum(
        size(p) * n
        for d in result.workloads.values()
        if d.mig
        for p, n in Counter(i.profile for i in d.mig).items()
    )
    return Outcome(len(used), outcome.usage.stranded, len(used) * SLICES - asked, pending)


def base_products(base: str, seed: int, count: int) -> tuple[str, list[Outcome], list[float]]:
    """The product of ``base`` on the same demands, in a child process with that tree on PYTHONPATH."""

    sha, path = base_tree(base)
    cmd = [sys.executable, __file__, "--product-only", "--seed", str(seed), "--demands", str(count)]
    env = {**os.environ, "PYTHONPATH": str(path)}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    rows = json.loads(done.stdout.strip().splitlines()[-1])
    return sha[:7], [Outcome(*row[:4]) for row in rows], [row[4] for row in rows]


def one_demand(
    demand_: tuple[str, int, list[dict[str, int]]],
    totals: Mapping[str, Totals],
    times: dict[int, list[float]],
    solver: object | None,
    base: Outcome | None,
) -> float | None:
    """Run every method on one random demand; the optimum's solve time (None without one)."""
    kind, pool_gpus, workloads = demand_
    total = totals[kind]
    total.demands += 1
    product = run_product(pool_gpus, workloads, PRODUCT_TIMES)
    total.add("product", product)
    if base is not None:
        total.add("product@base", base)
    planned = run_planner(pool_gpus, workloads, times.setdefault(pool_gpus, []))
    total.add("planner", planned)
    joint = run_joint(pool_gpus, workloads, JOINT_TIMES)
    total.add("joint", joint)
    for freeze in ("gpu", "host"):
        total.add(f"{PASSES} passes/{freeze}", run_planner(pool_gpus, workloads, [], PASSES, freeze))
    template_gpus: list[int] = []
    for name, template in TEMPLATES.items():
        outcome = run_template(pool_gpus, template, workloads)
        total.add(name, outcome)
        if outcome.pending == 0:
            template_gpus.append(outcome.gpus)
    if template_gpus and planned.pending == 0:
        total.fewer_than_template.append(1 - planned.gpus / min(template_gpus))
    if solver is None or planned.pending != 0:
        return None
    demand: Counter[str] = Counter()
    for workload in workloads:
        demand.update(workload)
    started = time.process_time()
    best = optimum(demand, pool_gpus, solver)
    seconds = time.process_time() - started
    if best is not None:
        total.optimum_known += 1
        total.at_optimum += (planned.gpus, planned.stranded) == best
        total.gpus_at_optimum += planned.gpus == best[0]
        total.joint_at_optimum_gpus += joint.gpus == best[0]
        total.product_at_optimum_gpus += product.gpus == best[0] and product.pending == 0
        total.on_known["product"].append((product.gpus, product.pending))
        if base is not None:
            total.on_known["product@base"].append((base.gpus, base.pending))
        asked = sum(size(p) * n for p, n in demand.items())
        total.add("optimum", Outcome(best[0], best[1], best[0] * SLICES - asked, 0))
    return seconds


def report(totals: Mapping[str, Totals]) -> None:
    for kind, total in totals.items():
        print(f"\n[{kind}] {total.demands} demands (profiles: {', '.join(CLASSES[kind])})")
        print(f"  {'method':<18}{'complete':>10}{'pending':>9}{'GPUs used':>11}{'stranded':>10}{'unused':>8}")
        for method, o in total.outcomes.items():
            done = total.complete[method] if method != "optimum" else total.optimum_known
            print(f"  {method:<18}{done:>10}{o.pending:>9}{o.gpus:>11}{o.stranded:>10}{o.unused:>8}")
        if total.optimum_known:
            best = total.outcomes["optimum"]
            known = [
                f"{method} {sum(g for g, _ in rows)} ({sum(g for g, _ in rows) / best.gpus - 1:+.2%})"
                + (f" ({p} pending)" if (p := sum(n for _, n in rows)) else "")
                for method, rows in total.on_known.items()
                if rows
            ]
            gaps = ", ".join(
                known
                + [
                    f"{method} {o.gpus / best.gpus - 1:+.1%}"
                    + (f" ({o.pending} pending)" if o.pending else "")
                    for method in (
                        "planner",
                        "joint",
                        f"{PASSES} passes/gpu",
                        f"{PASSES} passes/host",
                    )
                    if (found := total.outcomes.get(method)) is not None and (o := found)
                ]
            )
            print(
                f"  GPUs used vs the optimum ({best.gpus}, demands it places): {gaps}; product on the "
                f"optimum's GPUs on {total.product_at_optimum_gpus}/{total.optimum_known} demands; planner "
                f"{total.gpus_at_optimum} (as few stranded slices too on {total.at_optimum}); joint pass "
                f"{total.joint_at_optimum_gpus}"
            )
            base = total.outcomes.get("product@base")
            if base is not None:
                mine = total.outcomes["product"]
                print(
                    f"  product vs product@base: GPUs {mine.gpus}/{base.gpus} = "
                    f"{mine.gpus / base.gpus:.3f}x, "
                    f"pending {mine.pending} vs {base.pending}, stranded {mine.stranded} vs {base.stranded}"
                )
        if total.fewer_than_template:
            mean = statistics.mean(total.fewer_than_template)
            print(
                f"  planner vs the better template (demands both place entirely, "
                f"{len(total.fewer_than_template)}): {mean:.0%} fewer GPUs on average, "
                f"min {min(total.fewer_than_template):.0%}"
            )


def percentiles(values: list[float]) -> str:
    values = sorted(values)
    p95 = values[int(0.95 * (len(values) - 1))]
    return (
        f"{len(values):>6} admissions, median {statistics.median(values) * 1000:.1f} ms, "
        f"p95 {p95 * 1000:.1f} ms, max {values[-1] * 1000:.1f} ms"
    )


class TimedPlanner(PoolMigPlanner):
    """The pool's planner, timing each placement (CPU time)."""

    times: list[float]

    def place(
        self,
        key: WorkloadKey,
        requests: Sequence[MigRequest],
        whole_free: Sequence[GpuUnit],
        hosts: Sequence[str] | None = None,
    ) -> MigPlacement | MigRefusal:
        started = time.process_time()
        try:
            return super().place(key, requests, whole_free, hosts)
        finally:
            self.times.append(time.process_time() - started)


def at_scale(gpus: int, admissions: int, workloads_in_pass: int, seed: int) -> None:
    """Per-admission CPU time on one big pool: the planner alone, then a whole admission pass."""
    rng = random.Random(seed)
    state = tuple(PoolGpu(f"host-{i // 8:04d}", i % 8, GPU) for i in range(gpus))
    demand = make_demand(rng, gpus, CLASSES["any"])[:admissions]
    times: list[float] = []
    for n, workload in enumerate(demand):
        started = time.process_time()
        result = plan_mig_admission(state, workload, f"bench/w{n}")
        times.append(time.process_time() - started)
        if isinstance(result, MigPlan):
            state = result.gpus
    print(f"\n{gpus:,} GPUs, plan_mig_admission one by one: {percentiles(times)}")
    units = tuple(
        GpuUnit(
            f"uid-{i // 8:04d}", f"host-{i // 8:04d}", i % 8, A100, mig_capable=True, memory_bytes=80 * 10**9
        )
        for i in range(gpus)
    )
    pool = PoolState(("bench", "big"), gpus=units, mig_strategy="mixed")
    workloads = [
        WorkloadRequest(
            ("bench", f"w{n:05d}"), mig=tuple(MigRequest(A100, p, c) for p, c in sorted(w.items()))
        )
        for n, w in enumerate((make_demand(rng, gpus, CLASSES["any"]) * 4)[:workloads_in_pass])
    ]
    planner = TimedPlanner(pool, (), (), workloads)
    planner.times = []
    started = time.process_time()
    admitted = admit_pool(pool, workloads, (), planner)
    planner.finish(admitted)
    seconds = time.process_time() - started
    actions = Counter(str(d.action) for d in admitted.workloads.values())
    print(
        f"{gpus:,} GPUs, one admission pass of {len(workloads):,} MIG workloads ({dict(actions)}): "
        f"{seconds:.1f} s; per placement {percentiles(planner.times)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--demands", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-optimum", action="store_true", help="skip the integer program (no highspy)")
    parser.add_argument("--scale-gpus", type=int, default=5000, help="the big pool (0: skip)")
    parser.add_argument("--scale-admissions", type=int, default=1000, help="planner calls on the big pool")
    parser.add_argument("--scale-workloads", type=int, default=3000, help="workloads of the big pool's pass")
    parser.add_argument("--base", default=DEFAULT_BASE, help="previous version for product@base ('': skip)")
    parser.add_argument("--product-only", action="store_true", help=argparse.SUPPRESS)  # the child's mode
    args = parser.parse_args()
    cases = demands(args.seed, args.demands)
    if args.product_only:
        rows = []
        for _, pool_gpus, workloads in cases:
            spent: list[float] = []
            o = run_product(pool_gpus, workloads, spent)
            rows.append([o.gpus, o.stranded, o.unused, o.pending, spent[0]])
        print(json.dumps(rows))
        return
    bases: list[Outcome | None] = [None] * len(cases)
    base_name, base_times = "", list[float]()
    if args.base:
        base_name, found, base_times = base_products(args.base, args.seed, args.demands)
        bases = list(found)
    solver: object | None = None
    if not args.no_optimum:
        from reconciler.placement.mig_joint_solve import new_solver

        solver = new_solver()  # no banner on standard output
    totals = {name: Totals() for name in CLASSES}
    times: dict[int, list[float]] = {}
    ilp_times: list[float] = []
    wall = time.perf_counter()
    for case, base in zip(cases, bases, strict=True):
        seconds = one_demand(case, totals, times, solver, base)
        if seconds is not None:
            ilp_times.append(seconds)
    elapsed = time.perf_counter() - wall
    print(f"{args.demands} demands, seed {args.seed}, pools of 8-64 {GPU.key} GPUs; {elapsed:.1f} s in all")
    if base_name:
        print(f"product@base: the product of {base_name} on the same demands")
    report(totals)
    print("\nCPU time per admission (plan_mig_admission, CPU not wall clock), by pool size:")
    for gpus in sorted(times):
        print(f"  {gpus:>2} GPUs: {percentiles(times[gpus])}")
    shown = percentiles(PRODUCT_TIMES).replace("admissions", "passes")
    print(f"product pass (admit_pool + PoolMigPlanner + finish): {shown}")
    if base_times:
        shown = percentiles(base_times).replace("admissions", "passes")
        print(f"product@base pass ({base_name}): {shown}")
    if JOINT_TIMES:
        shown = percentiles(JOINT_TIMES).replace("admissions", "passes")
        print(f"joint pass (whole demand, greedy + HiGHS): {shown}")
    if ilp_times:
        print(
            f"optimum (HiGHS integer program, whole demand, no ties): median "
            f"{statistics.median(ilp_times) * 1000:.1f} ms, max {max(ilp_times) * 1000:.1f} ms per demand"
        )
    if args.scale_gpus:
        at_scale(args.scale_gpus, args.scale_admissions, args.scale_workloads, args.seed)


if __name__ == "__main__":
    main()
