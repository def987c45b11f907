#!/usr/bin/env python3
"""New platforms under overload: how many are placed, against two exact optima (HiGHS).

Per seed, a fleet from ``bench/gen_inventory.py`` (mixed GPU families and counts, architectures, resource
groups, control-plane and CPU worker hosts) and new MLPlatforms (tests/_allocate_support.py builders)
whose GPU requests add up to 1.2x, 1.5x and 2x the free GPUs, all of one priority or spread over three.
Printed per row, platforms placed by:

- ``name``: (priority, namespace, name) order only, no search;
- ``product``: :func:`reconciler.allocate.place` as shipped;
- ``opt/prio``: the priority-respecting optimum: lexicographic maximum, highest priority first;
- ``opt/any``: the most platforms that fit at all, ignoring order and priority.

The optima come from an integer program over host *classes* (architecture, role, worker tag, GPU family,
GPU count, the resource groups platforms ask for): per platform, one architecture, its control-plane
hosts, per requested family whole hosts whose GPUs add up to at least the request (the exact worker
knapsack, hosts as bins), and at least its minimum number of workers counting hosts of any GPU family and
CPU hosts tagged ``palette.ai/worker``; each class's hosts are used once. That is every feasibility rule of
the engine, so the optimum is an upper bound on what any order can place (the engine's tie-breaks among
hosts are not modelled: they can only lose). A solve that hits ``--time-limit`` reports its proven upper
bound instead (marked ``<=``), so a ratio against it is conservative.

    python bench/bench_overload.py [--hosts 1000] [--seeds 1 2 3] [--loads 1.2 1.5 2] [--time-limit 40]

The figures in bench/README.md took about 35 minutes on the shared 2-core machine (most of it HiGHS).
"""

from __future__ import annotations

import argparse
import math
import random
import resource
import sys
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gen_inventory

from reconciler import allocate
from reconciler.allocate import Allocation, Requirements, engine
from reconciler.inventory import HostState, Inventory, Machine, Role, discover
from reconciler.model.desired import DesiredState
from reconciler.model.resources import Resource
from tests._allocate_support import desired, platform, profile

FAMILIES = ("NVIDIA-H100", "NVIDIA-A100", "NVIDIA-L40S", "NVIDIA-L4")
REQUESTS = (1, 2, 3, 4, 4, 6, 8, 8, 12, 16, 16, 24, 32)
NAMESPACES = 8


def fleet(hosts: int, seed: int) -> Inventory:
    return discover(gen_inventory.generate(hosts, seed)["edgeHosts"])


def free_gpus(inventory: Inventory) -> int:
    return sum(m.gpu_count for m in inventory.machines if m.available and m.role is Role.WORKER)


def demand(inventory: Inventory, load: float, priorities: int, seed: int) -> DesiredState:
    """New platforms whose GPU requests add up to ``load`` times the free GPUs (the last one crosses it)."""
    rnd = random.Random(seed * 1000 + round(load * 100) + priorities)
    resources: list[Resource] = [
        profile(ns=f"team-{n}", node_count=3 if n % 8 == 0 else 1, min_workers=n % 3)
        for n in range(NAMESPACES)
    ]
    target, total, i = load * free_gpus(inventory), 0, 0
    while total < target:
        fams = rnd.sample(FAMILIES, 2 if rnd.random() < 0.15 else 1)
        gpus = {f: rnd.choice(REQUESTS) for f in fams}
        groups = {"network-pool": str(rnd.randint(1, 4))} if rnd.random() < 0.1 else None
        override = rnd.choice((1, 2, 4)) if rnd.random() < 0.1 else None
        p = platform(
            f"p-{rnd.randrange(16**6):06x}-{i:04d}",
            gpus,
            ns=f"team-{i % NAMESPACES}",
            groups=groups,
            override_min=override,
        )
        prio = rnd.choices((0, 1, 2), (5, 3, 2))[0] if priorities > 1 else 0
        resources.append(p.model_copy(update={"spec": p.spec.model_copy(update={"priority": prio})}))
        total += sum(gpus.values())
        i += 1
    return desired(*resources)


# --- the product, and name order alone --------------------------------------------------------------


@contextmanager
def name_order_only() -> Iterator[None]:
    """The engine with its search switched off: each priority placed in (namespace, name) order."""
    saved = engine._place_new
    engine._place_new = engine._place_in_order
    try:
        yield
    finally:
        engine._place_new = saved


def placed_by_priority(
    state: DesiredState, inventory: Inventory
) -> tuple[Counter[int], float, dict[Any, Allocation]]:
    """Platforms placed per priority, the plan's CPU seconds, and the allocations."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    decisions = allocate.place(state, inventory, []).platforms
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    prio = {(p.metadata.namespace, p.metadata.name): p.spec.priority for p in state.platforms()}
    placed = {k: d for k, d in decisions.items() if isinstance(d, Allocation)}
    return Counter(prio[k] for k in placed), cpu, placed


def given_above(
    reqs: Mapping[Any, tuple[Requirements, int]],
    inventory: Inventory,
    placed: Mapping[Any, Allocation],
    level: int,
    time_limit: float,
) -> Optimum:
    """The most of ``level`` that fit on the hosts the product left after the priorities above it: what
    a search within that priority alone could reach (the rule keeps the choices above)."""
    taken = {h for k, a in placed.items() if reqs[k][1] > level for h in a.hosts}
    rest = Inventory(
        tuple(replace(m, state=HostState.IN_USE) if m.uid in taken else m for m in inventory.machines)
    )
    return optimum({k: v for k, v in reqs.items() if v[1] == level}, rest, False, time_limit)


# --- the optimum ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class HostClass:
    arch: str
    role: Role
    tagged: bool
    family: str | None
    count: int
    groups: tuple[tuple[str, str], ...]

    def serves(self, groups: Mapping[str, str]) -> bool:
        mine = dict(self.groups)
        return all(mine.get(k) == v for k, v in groups.items())


def host_classes(inventory: Inventory, keys: set[str]) -> Counter[HostClass]:
    def of(m: Machine) -> HostClass:
        groups = tuple(sorted((k, v) for k, v in m.resource_groups.items() if k in keys))
        family = m.gpu_family if m.gpu_count > 0 else None
        return HostClass(m.arch, m.role, m.worker_tagged, family, m.gpu_count, groups)

    return Counter(of(m) for m in inventory.machines if m.available)


@dataclass
class Optimum:
    placed: dict[int, int]
    proven: bool
    chosen: frozenset[Any] = frozenset()  # the platforms of the last solve's best solution


def optimum(
    reqs: Mapping[Any, tuple[Requirements, int]], inventory: Inventory, by_priority: bool, time_limit: float
) -> Optimum:
    """The most platforms placed: lexicographically by priority (high first), or in total."""
    import highspy

    keys = {k for r, _ in reqs.values() for k in r.groups}
    classes = host_classes(inventory, keys)
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", time_limit)
    h.setOptionValue("random_seed", 0)
    h.setOptionValue("threads", 1)
    h.setOptionValue("mip_rel_gap", 0.005)
    use: dict[HostClass, list[Any]] = {c: [] for c in classes}
    placed: dict[Any, Any] = {}
    for key, (req, _) in reqs.items():
        z = placed[key] = h.addBinary()
        arches = sorted({c.arch for c in classes if c.serves(req.groups)})
        picks = []
        for arch in arches:
            w = h.addBinary()
            picks.append(w)
            mine = [c for c in classes if c.arch == arch and c.serves(req.groups)]
            hosts_here: list[Any] = []
            cps = [c for c in mine if c.role is Role.CONTROL_PLANE]
            if req.control_plane:
                xs = [h.addIntegral(lb=0, ub=min(classes[c], req.control_plane)) for c in cps]
                h.addConstr(sum(xs) == req.control_plane * w)
                for c, x in zip(cps, xs, strict=True):
                    use[c].append(x)
                hosts_here += xs
            workers: list[Any] = []
            for c in (c for c in mine if c.role is Role.WORKER):
                need = req.gpus.get(c.family, 0) if c.family else 0
                cap = (math.ceil(need / c.count) if need else 0) + req.min_workers
                if cap == 0:
                    continue
                x = h.addIntegral(lb=0, ub=min(classes[c], cap))
                use[c].append(x)
                workers.append((c, x))
            for family, need in req.gpus.items():
                on = [c.count * x for c, x in workers if c.family == family]
                h.addConstr(sum(on) >= need * w)
            if req.min_workers:
                h.addConstr(sum(x for _, x in workers) >= req.min_workers * w)
            hosts_here += [x for _, x in workers]
            bound = req.control_plane + req.min_workers + sum(req.gpus.values())
            if hosts_here:
                h.addConstr(sum(hosts_here) <= bound * w)
        h.addConstr(sum(picks) == z)
    for c, xs in use.items():
        if xs:
            h.addConstr(sum(xs) <= classes[c])
    levels = sorted({p for _, p in reqs.values()}, reverse=True) if by_priority else [None]
    out: dict[int, int] = {}
    proven = True
    for level in levels:
        mine = [placed[k] for k, (_, p) in reqs.items() if level is None or p == level]
        h.maximize(sum(mine))
        status = h.getModelStatus()
        info = h.getInfo()
        if status != highspy.HighsModelStatus.kOptimal:
            proven = False
        if status == highspy.HighsModelStatus.kOptimal:
            value = round(info.objective_function_value)
        else:  # the proven upper bound (no better than every platform of the level)
            value = min(len(mine), math.floor(min(info.mip_dual_bound, len(mine)) + 1e-6))
        if level is not None:
            out[level] = value
            # Later levels keep this level's best (its found value: a lower bound, so they stay feasible).
            if math.isfinite(info.objective_function_value):
                h.addConstr(sum(mine) >= round(info.objective_function_value))
        else:
            out[-1] = value
    values = h.getSolution().col_value
    chosen = frozenset(k for k, z in placed.items() if values[z.index] > 0.5)
    return Optimum(out, proven, chosen)


# --- report ---------------------------------------------------------------------------------------


def row(seed: int, load: float, priorities: int, hosts: int, time_limit: float) -> str:
    inventory = fleet(hosts, seed)
    state = demand(inventory, load, priorities, seed)
    reqs: dict[Any, tuple[Requirements, int]] = {}
    for p in state.platforms():
        r = allocate.requirements(state, p)
        assert isinstance(r, Requirements)
        reqs[(p.metadata.namespace, p.metadata.name)] = (r, p.spec.priority)
    with name_order_only():
        naive, naive_cpu, _ = placed_by_priority(state, inventory)
    product, product_cpu, allocations = placed_by_priority(state, inventory)
    by_prio = optimum(reqs, inventory, True, time_limit)
    if priorities > 1:
        anyway = optimum(reqs, inventory, False, time_limit)
    else:  # one priority: the two optima are one
        anyway = Optimum({-1: sum(by_prio.placed.values())}, by_prio.proven, by_prio.chosen)
    levels = sorted(by_prio.placed, reverse=True)
    # Per-level bounds of unfinished solves can add up past the any-order optimum: take the smaller.
    opt_total = min(sum(by_prio.placed.values()), anyway.placed[-1])

    def split(c: Mapping[int, int]) -> str:
        return "+".join(str(c.get(p, 0)) for p in levels) if len(levels) > 1 else str(sum(c.values()))

    def bound(o: Optimum, text: str) -> str:
        return text if o.proven else f"<={text}"

    given = [given_above(reqs, inventory, allocations, p, time_limit) for p in levels[1:]]
    return (
        f"| {seed} | {load:g}x | {len(levels)} | {len(reqs)} | {split(naive)} | {split(product)} | "
        f"{bound(by_prio, split(by_prio.placed))} | {bound(anyway, str(anyway.placed[-1]))} | "
        f"{sum(naive.values()) / opt_total:.3f} | {sum(product.values()) / opt_total:.3f} | "
        f"{sum(product.values()) / anyway.placed[-1]:.3f} | "
        + " / ".join(
            f"{product.get(p, 0) / by_prio.placed[p]:.3f}" if by_prio.placed[p] else "-" for p in levels
        )
        + " | "
        + (
            " / ".join(
                f"{product.get(p, 0)} of {bound(g, str(g.placed[-1]))}"
                for p, g in zip(levels[1:], given, strict=True)
            )
            or "-"
        )
        + f" | {naive_cpu:.2f} / {product_cpu:.2f} |"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--loads", type=float, nargs="+", default=[1.2, 1.5, 2.0])
    parser.add_argument("--priorities", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--time-limit", type=float, default=40.0, help="seconds per HiGHS solve")
    args = parser.parse_args(argv)
    print(
        f"{args.hosts} hosts per fleet; placed counts split by priority (high first) where there are several"
    )
    print(
        "| seed | load | priorities | platforms | name order | product | opt/prio | opt/any | "
        "name/opt | product/opt | product/opt-any | product/opt per priority | "
        "lower priorities: product of opt given the product's choices above | CPU s name / product |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for seed in args.seeds:
        for priorities in args.priorities:
            for load in args.loads:
                print(row(seed, load, priorities, args.hosts, args.time_limit), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
