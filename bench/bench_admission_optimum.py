"""Admission under overload against the best priority-respecting admission (docs/pools.md).

Per seed, one pool and a demand of 1.2x, 1.5x and 2x its capacity, all new workloads (a cold pass):

- ``whole``: hosts of 4 and 8 NVIDIA-A100 GPUs, workloads of 1-8 whole GPUs per replica, 1-3 replicas;
- ``big``: the same hosts, workloads of 3, 5, 6 or 8 whole GPUs per replica (where one host per replica
  binds: a 5 or 6 never fits a host of 4, and an 8-GPU host holds one of them and a 3 at most);
- ``mig``: hosts of 8 A100 80GB, workloads of MIG instances (1-2 profiles, 1-3 each) and a few whole GPUs;

each with one priority, and with three (0, 1, 2). Prints how many workloads are admitted by:

- ``name``: name order, the rule before (the product with its search budget set to 0);
- ``product``: ``admit_pool`` as shipped;
- ``opt``: the priority-respecting optimum (HiGHS, lexicographic: the most admissions of the highest
  priority, that count fixed, then the next), modelled per host as the product's rule is;
- ``pooled``: the same optimum with the pool's GPUs as one bin (per family, hosts ignored): the looser
  bound a pooled model gives, printed to show what modelling per host changes;
- ``free``: the per-host optimum ignoring priorities (the most admissions);

and the ratios product/opt, name/opt and product/pooled. The integer programs: a workload is admitted
whole or not (binary ``x[w]``), each replica on one host (``y[w,h]`` replicas of ``w`` on host ``h``,
integral, adding up to ``replicas * x[w]``; replicas of a workload may share a host), whole GPUs within
each host's GPUs. For MIG, a
simplified per-GPU model: each GPU of a host is whole or holds one maximal combination of the demand's
profiles that some valid layout of the A100 80GB catalogue entry holds; a replica's instances come from
its host's combinations (where the instances start is left out: any valid layout of the combination
serves). Deterministic: one thread, a fixed seed, no gap tolerance (``new_solver``, which also keeps
HiGHS's banner off stdout). A solve has a time limit; when it stops before proving the optimum, its best
bound is used (the ratio is then a lower bound) and the line says so. The branch-and-bound nodes and CPU
seconds of the per-host solves are printed per line.

    python bench/bench_admission_optimum.py [--seeds 1 2 3] [--time-limit 20]
"""

from __future__ import annotations

import argparse
import random
import time
from collections import Counter
from dataclasses import dataclass

import highspy

import reconciler.placement.admission_trial as admission_trial
from reconciler.model.gpu import GpuFamily
from reconciler.model.mig import entry_by_key
from reconciler.model.pools import MigRequest, WorkloadRequest
from reconciler.placement.admission import admit_pool
from reconciler.placement.admission_types import PoolState
from reconciler.placement.mig import valid_layouts
from reconciler.placement.mig_admission import PoolMigPlanner
from reconciler.placement.mig_joint_solve import new_solver
from reconciler.placement.units import GpuUnit

A100 = GpuFamily("NVIDIA-A100")
GPU = entry_by_key("NVIDIA-A100-80GB")
PROFILES = ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")
FACTORS = (1.2, 1.5, 2.0)


@dataclass(frozen=True)
class Case:
    pool: PoolState
    workloads: tuple[WorkloadRequest, ...]
    hosts: tuple[tuple[str, int], ...]  # (uid, GPUs)


def whole_case(rng: random.Random, factor: float, levels: int) -> Case:
    return _whole(rng, factor, levels, (1, 1, 2, 2, 3, 4, 4, 6, 8))


def big_case(rng: random.Random, factor: float, levels: int) -> Case:
    """Whole GPUs, replicas of 3, 5, 6 or 8: a host's leftovers are rarely whole replicas."""
    return _whole(rng, factor, levels, (3, 5, 6, 8))


def _whole(rng: random.Random, factor: float, levels: int, per_replica: tuple[int, ...]) -> Case:
    sizes = [rng.choice((4, 8, 8)) for _ in range(10)]
    units = tuple(GpuUnit(f"uid-h{h:02}", f"h{h:02}", i, A100) for h, n in enumerate(sizes) for i in range(n))
    workloads: list[WorkloadRequest] = []
    demand = 0
    while demand < factor * len(units):
        per, replicas = rng.choice(per_replica), rng.choice((1, 1, 1, 2, 3))
        name = f"w{rng.randrange(10**6):06}"
        workloads.append(
            WorkloadRequest(
                ("bench", name), priority=rng.randrange(levels), whole={A100: per}, replicas=replicas
            )
        )
        demand += per * replicas
    pool = PoolState(("bench", "pool"), gpus=units)
    return Case(pool, tuple(workloads), tuple((f"uid-h{h:02}", n) for h, n in enumerate(sizes)))


def mig_case(rng: random.Random, factor: float, levels: int) -> Case:
    hosts = 4
    units = tuple(
        GpuUnit(f"uid-g{h}", f"g{h}", i, A100, mig_capable=True, memory_bytes=80 * 10**9)
        for h in range(hosts)
        for i in range(8)
    )
    workloads: list[WorkloadRequest] = []
    demand = 0
    while demand < factor * len(units) * GPU.memory_slices:
        whole = rng.choice((1, 2)) if rng.random() < 0.15 else 0
        mig: tuple[MigRequest, ...] = ()
        if not whole:
            chosen = sorted(set(rng.sample(PROFILES, rng.randint(1, 2))))
            mig = tuple(MigRequest(A100, p, rng.randint(1, 3)) for p in chosen)
        replicas = rng.choice((1, 1, 1, 2))
        demand += replicas * (whole * GPU.memory_slices + sum(_size(m.profile) * m.count for m in mig))
        name = f"w{rng.randrange(10**6):06}"
        workloads.append(
            WorkloadRequest(
                ("bench", name),
                priority=rng.randrange(levels),
                whole={A100: whole} if whole else {},
                mig=mig,
                replicas=replicas,
            )
        )
    pool = PoolState(("bench", "pool"), gpus=units, mig_strategy="mixed")
    return Case(pool, tuple(workloads), tuple((f"uid-g{h}", 8) for h in range(hosts)))


def _size(profile: str) -> int:
    found = GPU.profile(profile)
    assert found is not None
    return found.size


def product(case: Case, budget: int | None) -> tuple[list[int], set[int]]:
    """Admitted per priority (high first) and which (indices); ``budget`` 0 is name order."""
    saved = admission_trial._SEARCH_BUDGET
    if budget is not None:
        admission_trial._SEARCH_BUDGET = budget
    try:
        planner = (
            PoolMigPlanner(case.pool, (), (), case.workloads) if case.pool.mig_strategy == "mixed" else None
        )
        result = admit_pool(case.pool, case.workloads, (), planner)
    finally:
        admission_trial._SEARCH_BUDGET = saved
    levels = sorted({w.priority for w in case.workloads}, reverse=True)
    admitted = {i for i, w in enumerate(case.workloads) if result.workloads[w.key].action == "admit"}
    got = Counter(case.workloads[i].priority for i in admitted)
    return [got[p] for p in levels], admitted


def combinations() -> list[Counter[str]]:
    """Maximal combinations of PROFILES one A100 80GB holds in a valid layout."""
    found = {
        tuple(sorted(Counter(n for n, _ in layout if n in PROFILES).items())) for layout in valid_layouts(GPU)
    }
    combos = [Counter(dict(c)) for c in found if c]
    return [c for c in combos if not any(o != c and all(o[p] >= n for p, n in c.items()) for o in combos)]


def levels_of(case: Case) -> list[list[int]]:
    levels = sorted({w.priority for w in case.workloads}, reverse=True)
    return [[i for i, w in enumerate(case.workloads) if w.priority == p] for p in levels]


@dataclass
class Stats:
    """Work of the solves behind one figure: branch-and-bound nodes and CPU seconds."""

    nodes: int = 0
    seconds: float = 0.0

    def add(self, other: Stats) -> None:
        self.nodes += other.nodes
        self.seconds += other.seconds


def pooled(case: Case) -> Case:
    """The case with every GPU of the pool on one host: the bound a per-family pooled model gives."""
    return Case(case.pool, case.workloads, (("pool", sum(n for _, n in case.hosts)),))


def optimum(case: Case, by_priority: bool, limit: float) -> tuple[list[int], bool, Stats]:
    """The most admissions (lexicographic per priority when ``by_priority``), whether proven, the work."""
    groups = levels_of(case) if by_priority else [list(range(len(case.workloads)))]
    return solve(case, groups, {}, limit)


def given_higher(case: Case, admitted: set[int], limit: float) -> tuple[list[int], bool, Stats]:
    """Per priority, the most admissions when every higher priority admits what the product admitted:
    where the product reaches it, what it lost to the optimum came from a tie kept in name order above."""
    counts: list[int] = []
    proven = True
    stats = Stats()
    groups = levels_of(case)
    for n, group in enumerate(groups):
        fixed = {i: int(i in admitted) for above in groups[:n] for i in above}
        got, ok, work = solve(case, [group], fixed, limit)
        counts += got
        proven = proven and ok
        stats.add(work)
    return counts, proven, stats


def solve(
    case: Case, groups: list[list[int]], fixed: dict[int, int], limit: float
) -> tuple[list[int], bool, Stats]:
    """Maximise the admissions of each group in turn (each fixed at its best before the next);
    ``fixed``: workloads admitted (1) or not (0) whatever the objective."""
    h = new_solver()
    h.setOptionValue("time_limit", limit)
    ws = case.workloads
    x = [h.addBinary() for _ in ws]
    for i, value in fixed.items():
        h.addConstr(x[i] == value)
    y = [[h.addIntegral(lb=0, ub=w.replicas) for _ in case.hosts] for w in ws]
    for i, w in enumerate(ws):
        h.addConstr(sum(y[i]) == w.replicas * x[i])
    mig = case.pool.mig_strategy == "mixed"
    combos = combinations() if mig else []
    for k, (_, gpus) in enumerate(case.hosts):
        whole_used = sum(w.whole.get(A100, 0) * y[i][k] for i, w in enumerate(ws) if w.whole)
        if not mig:
            h.addConstr(whole_used <= gpus)
            continue
        z = [h.addIntegral(lb=0, ub=gpus) for _ in combos]
        wholes = h.addIntegral(lb=0, ub=gpus)
        h.addConstr(wholes + sum(z) <= gpus)
        h.addConstr(whole_used <= wholes)
        for p in PROFILES:
            asked = [(i, sum(m.count for m in w.mig if m.profile == p)) for i, w in enumerate(ws)]
            asked = [(i, n) for i, n in asked if n]
            if asked:
                h.addConstr(
                    sum(n * y[i][k] for i, n in asked)
                    <= sum(c[p] * zc for c, zc in zip(combos, z, strict=True))
                )
    counts: list[int] = []
    proven = True
    stats = Stats()
    for group in groups:
        t = time.process_time()
        h.maximize(sum(x[i] for i in group))
        stats.seconds += time.process_time() - t
        status = h.getModelStatus()
        info = h.getInfo()
        stats.nodes += max(info.mip_node_count, 0)
        if status != highspy.HighsModelStatus.kOptimal:
            proven = False
        best = (
            int(info.mip_dual_bound + 1e-6)
            if status != highspy.HighsModelStatus.kOptimal
            else round(info.objective_function_value)
        )
        counts.append(best)
        # This level keeps the count found before the next one is maximised (when that count is not
        # proven, the next levels are not bounds either: the line says so).
        h.addConstr(sum(x[i] for i in group) >= round(info.objective_function_value))
    return counts, proven, stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--time-limit", type=float, default=20.0, help="seconds per solve (HiGHS)")
    args = parser.parse_args()
    print(f"HiGHS: one thread, seed 0, no gap tolerance, time limit {args.time_limit:g} s per solve")
    print(
        f"{'case':16} {'n':>3} {'name':>5} {'product':>8} {'opt':>5} {'pooled':>6} {'free':>5} "
        f"{'prod/opt':>8} {'name/opt':>8} {'prod/pooled':>11} {'prod/given':>10}  "
        "per priority: product | opt | pooled | given higher  cpu ms name/product  opt nodes/cpu s"
    )
    totals: dict[str, Counter[str]] = {}
    for kind, make in (("whole", whole_case), ("big", big_case), ("mig", mig_case)):
        for levels in (1, 3):
            for factor in FACTORS:
                for seed in args.seeds:
                    case = make(random.Random(seed * 1000 + int(factor * 10) + levels), factor, levels)
                    t = time.process_time()
                    name, _ = product(case, 0)
                    t_name = time.process_time() - t
                    t = time.process_time()
                    mine, admitted = product(case, None)
                    t_mine = time.process_time() - t
                    opt, proven, work = optimum(case, True, args.time_limit)
                    loose, loose_proven, _ = optimum(pooled(case), True, args.time_limit)
                    free, free_proven, _ = optimum(case, False, args.time_limit)
                    given, given_proven, _ = given_higher(case, admitted, args.time_limit)
                    done = proven and loose_proven and free_proven and given_proven
                    note = "" if done else "  (time limit: bounds)"
                    label = f"{kind} {levels}p {factor}x s{seed}"
                    row = totals.setdefault(f"{kind} {levels}p", Counter())
                    row.update(
                        name=sum(name),
                        product=sum(mine),
                        opt=sum(opt),
                        pooled=sum(loose),
                        given=sum(given),
                        free=free[0],
                        runs=1,
                        opt_below_pooled=int(opt < loose),
                    )
                    print(
                        f"{label:16} {len(case.workloads):3} {sum(name):5} {sum(mine):8} {sum(opt):5} "
                        f"{sum(loose):6} {free[0]:5} {sum(mine) / sum(opt):8.3f} {sum(name) / sum(opt):8.3f} "
                        f"{sum(mine) / sum(loose):11.3f} {sum(mine) / sum(given):10.3f}  "
                        f"{mine} | {opt} | {loose} | {given}  "
                        f"{t_name * 1000:.0f} / {t_mine * 1000:.0f}  {work.nodes} / {work.seconds:.2f}{note}"
                    )
    for label, row in totals.items():
        ratios = {
            "product/opt": row["product"] / row["opt"],
            "name/opt": row["name"] / row["opt"],
            "product/pooled": row["product"] / row["pooled"],
            "opt/pooled": row["opt"] / row["pooled"],
            "product/given higher": row["product"] / row["given"],
            "opt/free": row["opt"] / row["free"],
        }
        print(
            f"{label}: "
            + ", ".join(f"{k} {v:.3f}" for k, v in ratios.items())
            + f"; per-host optimum lexicographically below the pooled bound in {row['opt_below_pooled']}"
            f" of {row['runs']} runs"
        )


if __name__ == "__main__":
    main()
