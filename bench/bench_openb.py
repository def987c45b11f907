"""Whole-GPU admission on the Alibaba ``openb`` GPU cluster trace, against first-fit and the optimum.

Data (``bench/data/``, Apache-2.0, see ``bench/data/NOTICE``): 1,213 GPU nodes (6,212 GPUs) and 8,152
pods of the ``openb`` trace. The whole-GPU pods (``gpu_milli`` 1000, 1 to 8 GPUs: 3,986 pods, 4,355
GPUs) become one-replica AIWorkloads of one shared pool holding every node, named in trace order so
that admission's order (priority, namespace, name) is the trace's. The trace asks for 70% of the GPUs,
so it is replayed in order (the FGD paper's workload inflation, without departures) until the GPUs asked
reach ``--load`` times the cluster's. Pods' CPU and memory are not modelled (the pool binds GPUs); all
GPU models count as one family (the pods name none).

The same runs with the multi-GPU pods only (2, 4 or 8 GPUs: 75 pods of the trace, sampled the same
way) show fragmentation, which the 1-GPU pods (98% of the whole-GPU pods) hide.

Reported, for each load: the GPU allocation ratio (GPUs bound / GPUs of the cluster) at the first pod
that is refused and at the end, for

- admission (``reconciler.placement.admission.admit_pool``: each replica on one host, best fit, no
  head-of-line blocking), with the time of the pass and of the next pass that keeps them all (sticky);
- first-fit in the same order (each pod to the first node by name with enough free GPUs, also no
  head-of-line blocking);
- the optimum ignoring order (HiGHS), modelled per host as the product's rule is (each pod on one
  node): the most GPUs that whole-GPU pods of the stream can take. Two integer programs that must agree:
  ``per host``, one integer per pod size and node (how many pods of that size the node holds, within its
  GPUs, at most the stream's pods of that size over all nodes), and ``patterns``, its aggregation (nodes
  of one size are interchangeable and so are pods of one size: per node size, how many nodes take each
  packing). Both are exact for the whole cluster, not a sample;
- the pooled bound: the same with every GPU in one bin (per family, nodes ignored), the looser bound a
  pooled model gives.

Deterministic solves: one thread, a fixed seed, no gap tolerance (``new_solver``, which also keeps
HiGHS's banner off stdout), a time limit (``--time-limit``); the branch-and-bound nodes and CPU
seconds of the per-host program are printed. A solve stopped by its limit prints its proven bound
(``<=``).

Run: ``pip install -e '.[bench]'`` then ``python bench/bench_openb.py [--loads 1.0,1.2,1.5,2.0]``.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import random
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler.model.gpu import GpuFamily
from reconciler.model.pools import WorkloadRequest
from reconciler.placement.admission import admit_pool
from reconciler.placement.admission_types import PoolState, WorkloadAction
from reconciler.placement.mig_joint_solve import new_solver
from reconciler.placement.units import GpuUnit

DATA = Path(__file__).parent / "data"
FAMILY = GpuFamily("NVIDIA-GPU")


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    gpus: int


def nodes() -> list[Node]:
    with (DATA / "openb_node_list_gpu_node.csv").open() as f:
        return [Node(r["sn"], int(r["gpu"])) for r in csv.DictReader(f) if int(r["gpu"]) > 0]


def whole_gpu_pods() -> list[int]:
    """GPUs of each whole-GPU pod, in trace order (creation time)."""
    with (DATA / "openb_pod_list_default.csv").open() as f:
        rows = [r for r in csv.DictReader(f) if int(r["num_gpu"]) > 0 and int(r["gpu_milli"]) == 1000]
    rows.sort(key=lambda r: (int(r["creation_time"]), r["name"]))
    return [int(r["num_gpu"]) for r in rows]


def stream(pods: Sequence[int], target: int, seed: int | None = None) -> list[int]:
    """The trace replayed in order (``seed`` None), or pods sampled from it at random with replacement
    (FGD's inflation), until the GPUs asked reach ``target``."""
    rng = random.Random(seed)
    source = itertools.cycle(pods) if seed is None else (rng.choice(pods) for _ in itertools.count())
    out: list[int] = []
    asked = 0
    for gpus in source:
        if asked >= target:
            return out
        out.append(gpus)
        asked += gpus
    raise AssertionError("unreachable")


@dataclass(frozen=True, slots=True)
class Outcome:
    at_first_refusal: int  # GPUs bound when the first pod was refused (all of them if none was)
    at_end: int
    admitted: int


def outcome(sizes: Sequence[int], admitted: Sequence[bool]) -> Outcome:
    bound = 0
    first: int | None = None
    for gpus, ok in zip(sizes, admitted, strict=True):
        if ok:
            bound += gpus
        elif first is None:
            first = bound
    return Outcome(bound if first is None else first, bound, sum(admitted))


def first_fit(cluster: Sequence[Node], sizes: Sequence[int]) -> list[bool]:
    free = [n.gpus for n in sorted(cluster, key=lambda n: n.name)]
    out = []
    for gpus in sizes:
        host = next((i for i, f in enumerate(free) if f >= gpus), None)
        if host is not None:
            free[host] -= gpus
        out.append(host is not None)
    return out


def admission(cluster: Sequence[Node], sizes: Sequence[int]) -> tuple[list[bool], float, float]:
    units = tuple(GpuUnit(f"uid-{n.name}", n.name, i, FAMILY) for n in cluster for i in range(n.gpus))
    pool = PoolState(("openb", "cluster"), gpus=units)
    width = len(str(len(sizes)))
    requests = [
        WorkloadRequest(("openb", f"pod-{k:0{width}d}"), whole={FAMILY: g}) for k, g in enumerate(sizes)
    ]
    start = time.perf_counter()
    result = admit_pool(pool, requests)
    first = time.perf_counter() - start
    previous = [d.previous() for d in result.workloads.values() if d.gpus]
    start = time.perf_counter()
    again = admit_pool(pool, requests, previous)
    sticky = time.perf_counter() - start
    assert all(again.workloads[p.key].action is WorkloadAction.ADMITTED for p in previous)
    admitted = [result.workloads[r.key].action is WorkloadAction.ADMIT for r in requests]
    return admitted, first, sticky


def patterns(capacity: int, sizes: Sequence[int]) -> Iterator[tuple[int, ...]]:
    """Every count vector of pod sizes one node of ``capacity`` GPUs holds."""

    def grow(k: int, left: int) -> Iterator[tuple[int, ...]]:
        if k == len(sizes):
            yield ()
            return
        for n in range(left // sizes[k] + 1):
            for rest in grow(k + 1, left - n * sizes[k]):
                yield (n, *rest)

    return grow(0, capacity)


@dataclass(frozen=True, slots=True)
class Bound:
    gpus: int  # the optimum, or the proven bound when ``proven`` is False
    proven: bool
    nodes: int = 0  # branch-and-bound nodes
    seconds: float = 0.0  # CPU

    def text(self, capacity: int) -> str:
        return ("" if self.proven else "<=") + f"{self.gpus / capacity:.2%}"


def _result(solver: Any, seconds: float) -> Bound:
    import highspy

    info = solver.getInfo()
    proven = solver.getModelStatus() == highspy.HighsModelStatus.kOptimal
    value = info.objective_function_value if proven else info.mip_dual_bound
    return Bound(
        int(value + 1e-6) if not proven else round(value), proven, max(info.mip_node_count, 0), seconds
    )


def _maximise(solver: Any, objective: Any) -> Bound:
    start = time.process_time()
    solver.maximize(objective)
    return _result(solver, time.process_time() - start)


def optimum(cluster: Sequence[Node], sizes: Sequence[int], limit: float) -> Bound:
    """The most GPUs the pods can take, ignoring order (integer program over node sizes and patterns)."""
    demand = Counter(sizes)
    kinds = sorted(demand)
    node_sizes = Counter(n.gpus for n in cluster)
    solver = new_solver()
    solver.setOptionValue("time_limit", limit)
    columns: list[tuple[tuple[int, ...], Any]] = []
    for capacity, count in sorted(node_sizes.items()):
        mine = []
        for pattern in patterns(capacity, kinds):
            var = solver.addIntegral(lb=0, ub=count)
            columns.append((pattern, var))
            mine.append(var)
        solver.addConstr(sum(mine) == count)
    for k, kind in enumerate(kinds):
        solver.addConstr(sum(p[k] * v for p, v in columns) <= demand[kind])
    return _maximise(solver, sum(sum(n * s for n, s in zip(p, kinds, strict=True)) * v for p, v in columns))


def per_host(cluster: Sequence[Node], sizes: Sequence[int], limit: float) -> Bound:
    """The same optimum modelled node by node: ``y[s, h]`` pods of ``s`` GPUs on node ``h`` (each pod on
    one node), within the node's GPUs; pods of one size are interchangeable, so counts stand for pods."""
    demand = Counter(sizes)
    solver = new_solver()
    solver.setOptionValue("time_limit", limit)
    on: dict[int, list[Any]] = {s: [] for s in demand}
    gpus = []
    for node in cluster:
        here = [
            (s, solver.addIntegral(lb=0, ub=min(node.gpus // s, demand[s]))) for s in demand if s <= node.gpus
        ]
        if not here:
            continue
        solver.addConstr(sum(s * y for s, y in here) <= node.gpus)
        for s, y in here:
            on[s].append(y)
            gpus.append(s * y)
    for s, ys in on.items():
        if ys:
            solver.addConstr(sum(ys) <= demand[s])
    return _maximise(solver, sum(gpus))


def pooled(cluster: Sequence[Node], sizes: Sequence[int], limit: float) -> Bound:
    """The bound with every GPU in one bin: the most GPUs of whole pods within the cluster's total."""
    demand = Counter(sizes)
    solver = new_solver()
    solver.setOptionValue("time_limit", limit)
    n = {s: solver.addIntegral(lb=0, ub=count) for s, count in demand.items()}
    solver.addConstr(sum(s * v for s, v in n.items()) <= sum(node.gpus for node in cluster))
    return _maximise(solver, sum(s * v for s, v in n.items()))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--loads", default="1.0,1.2,1.5,2.0", help="GPUs asked / GPUs of the cluster")
    parser.add_argument("--seeds", default="1,2,3", help="runs of pods sampled at random (FGD's inflation)")
    parser.add_argument("--no-optimum", action="store_true", help="skip the integer programs (no highspy)")
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per integer program")
    args = parser.parse_args()
    cluster = nodes()
    pods = whole_gpu_pods()
    capacity = sum(n.gpus for n in cluster)
    print(
        f"openb: {len(cluster)} nodes, {capacity} GPUs; {len(pods)} whole-GPU pods asking "
        f"{sum(pods)} GPUs ({Counter(pods)})"
    )
    if not args.no_optimum:
        print(f"HiGHS: one thread, seed 0, no gap tolerance, time limit {args.time_limit:g} s per program")
    print(
        "order              load  pods  | admission: first refusal  end  admitted  pass s  sticky s"
        " | first-fit: first refusal  end | pooled bound | optimum per host (patterns)  nodes  cpu s"
        " | admission end / per host, / pooled"
    )
    seeds: list[int | None] = [None, *(int(x) for x in args.seeds.split(",") if x)]
    multi = [g for g in pods if g > 1]
    runs = [("", pods, seed) for seed in seeds] + [("multi ", multi, seed) for seed in seeds]
    for prefix, population, seed in runs:
        for load in (float(x) for x in args.loads.split(",")):
            sizes = stream(population, round(load * capacity), seed)
            ours, seconds, sticky = admission(cluster, sizes)
            a = outcome(sizes, ours)
            f = outcome(sizes, first_fit(cluster, sizes))
            order = prefix + ("trace" if seed is None else f"sampled #{seed}")
            line = (
                f"{order:<18} {load:<4}  {len(sizes):<5} | {a.at_first_refusal / capacity:.2%}  "
                f"{a.at_end / capacity:.2%}  {a.admitted}  {seconds:.2f}  {sticky:.2f} | "
                f"{f.at_first_refusal / capacity:.2%}  {f.at_end / capacity:.2%} | "
            )
            if args.no_optimum:
                print(line + "n/a")
                continue
            loose = pooled(cluster, sizes, args.time_limit)
            host = per_host(cluster, sizes, args.time_limit)
            aggregated = optimum(cluster, sizes, args.time_limit)
            if host.proven and aggregated.proven:
                assert host.gpus == aggregated.gpus, (host, aggregated)
            print(
                line + f"{loose.text(capacity)} | {host.text(capacity)} ({aggregated.text(capacity)})  "
                f"{host.nodes}  {host.seconds:.2f} | {a.at_end / host.gpus:.3f}, {a.at_end / loose.gpus:.3f}"
            )


if __name__ == "__main__":
    main()
