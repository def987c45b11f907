"""Joint MIG planning of one pass: the pass's new MIG demand laid out together over the free GPUs (pure).

Admission places MIG requests one at a time (``plan_mig_admission``), each the best for itself; that
can fill a GPU with two 3g where the pass as a whole wants a 3g and two 2g on it. ``plan_pass`` runs
that greedy first, then re-plans what it placed on *free* GPUs (MIG-capable, not frozen, not bound
whole, no bound instance) as one integer program: per GPU type, how many free GPUs take each layout,
fewest GPUs then fewest stranded slices, the instances the greedy placed there as the cover. The
result replaces the greedy's only when it uses fewer GPUs (or as many with fewer stranded slices), so:

- a bound instance, a frozen GPU and a GPU bound whole are never changed (they are not free);
- the pass never uses more GPUs than the greedy on the same input;
- the same input gives the same layout: the solver runs on one thread with a fixed seed and a branch
  and bound *node* limit (``node_limit``), never a wall-clock budget, so a plan and the run that
  applies it decide the same. When the limit stops the search, the best layout found so far counts if
  it beats the greedy; without ``highspy`` (or with ``node_limit=0``) the greedy's answer stands.

Requests the greedy refuses stay refused, and a request's instances may go on several GPUs, as with
``plan_mig_admission`` without hosts (one host per replica is not modelled here).
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from reconciler.model.mig import MigGpuType
from reconciler.placement.mig import (
    MigInstance,
    MigPlan,
    PoolGpu,
    layout_mask,
    plan_mig_admission,
    stranded_slices,
    uncovered,
    valid_layouts,
)

NODE_LIMIT = 2000  # branch-and-bound nodes per GPU type: deterministic work, not time
SEED = 0

Request = tuple[str, Mapping[str, int]]  # (workload label, {profile: count})


@dataclass(frozen=True, slots=True)
class PassPlan:
    """The GPUs after the pass (same order as given), the labels admitted and refused, and which
    answer won (``joint`` or ``greedy``)."""

    gpus: tuple[PoolGpu, ...]
    admitted: tuple[str, ...]
    pending: tuple[str, ...]
    method: str


def is_free(gpu: PoolGpu) -> bool:
    """A GPU the joint plan may lay out anew: MIG-capable, not frozen, not bound whole, no bound instance."""
    return (
        gpu.gpu_type is not None
        and not gpu.frozen
        and gpu.bound is None
        and all(i.workload is None for i in gpu.instances or ())
    )


def used_gpus(gpus: Sequence[PoolGpu]) -> int:
    """GPUs holding at least one bound instance."""
    return sum(1 for g in gpus if any(i.workload is not None for i in g.instances or ()))


def greedy_pass(gpus: Sequence[PoolGpu], requests: Sequence[Request]) -> PassPlan:
    """Admission's way: each request in turn, the best for itself (``plan_mig_admission``)."""
    state = tuple(gpus)
    admitted: list[str] = []
    pending: list[str] = []
    for label, request in requests:
        outcome = plan_mig_admission(state, request, label)
        if isinstance(outcome, MigPlan):
            state = outcome.gpus
            admitted.append(label)
        else:
            pending.append(label)
    return PassPlan(state, tuple(admitted), tuple(pending), "greedy")


def plan_pass(
    gpus: Sequence[PoolGpu], requests: Sequence[Request], *, node_limit: int = NODE_LIMIT
) -> PassPlan:
    """The pass's requests planned jointly over the free GPUs, or the greedy's answer when that is no
    better (see the module docstring)."""
    greedy = greedy_pass(gpus, requests)
    if node_limit <= 0:
        return greedy
    try:
        import highspy  # noqa: F401  (optional at run time: the greedy stands without it)
    except ImportError:
        return greedy
    start = tuple(gpus)
    out = list(greedy.gpus)
    by_type: dict[str, list[int]] = {}
    for position, gpu in enumerate(start):
        if is_free(gpu):
            assert gpu.gpu_type is not None
            by_type.setdefault(gpu.gpu_type.key, []).append(position)
    changed = False
    for _, positions in sorted(by_type.items()):
        replanned = _replan_type(start, greedy.gpus, positions, node_limit)
        if replanned is not None:
            for position, gpu in replanned.items():
                out[position] = gpu
            changed = True
    if not changed:
        return greedy
    return PassPlan(tuple(out), greedy.admitted, greedy.pending, "joint")


def _replan_type(
    start: Sequence[PoolGpu], after: Sequence[PoolGpu], positions: Sequence[int], node_limit: int
) -> dict[int, PoolGpu] | None:
    """The free GPUs of one type laid out anew for what the greedy bound there, or None (no better)."""
    gpu_type = start[positions[0]].gpu_type
    assert gpu_type is not None
    order = sorted(positions, key=lambda p: start[p].order)
    wanted: list[tuple[str, str]] = []  # (workload, profile) per instance, by GPU order then start
    for position in order:
        wanted.extend((i.workload, i.profile) for i in after[position].instances or () if i.workload)
    if not wanted:
        return None
    greedy_used = [p for p in order if any(i.workload for i in after[p].instances or ())]
    greedy_cost = (len(greedy_used), sum(stranded_slices(after[p]) for p in greedy_used))
    demand = Counter(profile for _, profile in wanted)
    counts = _solve(gpu_type, tuple(sorted(demand.items())), len(order), node_limit)
    if counts is None:
        return None
    layouts = [layout for layout, n in counts for _ in range(n)]
    laid = [
        replace(start[p], instances=tuple(MigInstance(s, name) for name, s in sorted(layout, key=_by_start)))
        for p, layout in zip(order, layouts, strict=False)
    ]
    bound = _bind(laid, sorted(wanted, key=lambda w: (w[0], w[1])))
    if bound is None:
        return None
    mine = [g for g in bound if any(i.workload for i in g.instances or ())]
    cost = (len(mine), sum(stranded_slices(g) for g in mine))
    if cost >= greedy_cost:
        return None
    result = {p: start[p] for p in order}  # untouched free GPUs stay as they came in
    for p, gpu in zip(order, bound, strict=False):
        result[p] = gpu if gpu in mine else start[p]
    return result


def _by_start(placement: tuple[str, int]) -> tuple[int, str]:
    return placement[1], placement[0]


def _bind(laid: list[PoolGpu], wanted: Sequence[tuple[str, str]]) -> list[PoolGpu] | None:
    """Each wanted instance bound to the first free instance of its profile, GPUs in order."""
    slots = [list(g.instances or ()) for g in laid]
    for workload, profile in wanted:
        spot = next(
            (
                (g, k)
                for g, row in enumerate(slots)
                for k, s in enumerate(row)
                if s.profile == profile and s.workload is None
            ),
            None,
        )
        if spot is None:
            return None
        g, k = spot
        slots[g][k] = replace(slots[g][k], workload=workload)
    return [replace(g, instances=tuple(row)) for g, row in zip(laid, slots, strict=True)]


_banner_silenced = False


def _new_solver() -> Any:
    """A HiGHS solver with its logging off. HiGHS prints a start-up banner on file descriptor 1 from
    the constructor of the process's first solver, before any option can be set; that would corrupt
    ``plan --format json``, so the first construction runs with descriptor 1 pointed at /dev/null."""
    global _banner_silenced
    import highspy

    if _banner_silenced:
        solver = highspy.Highs()  # type: ignore[no-untyped-call]
    else:
        sys.stdout.flush()
        saved = os.dup(1)
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, 1)
            solver = highspy.Highs()  # type: ignore[no-untyped-call]
        finally:
            os.dup2(saved, 1)
            os.close(saved)
            os.close(devnull)
        _banner_silenced = True
    solver.setOptionValue("output_flag", False)
    solver.setOptionValue("log_to_console", False)
    return solver


@lru_cache(maxsize=64)
def _configurations(
    gpu_type: MigGpuType, profiles: tuple[str, ...]
) -> tuple[tuple[tuple[int, ...], int, frozenset[tuple[str, int]]], ...]:
    """Per count vector of ``profiles`` a layout holds, the layout stranding fewest slices (then the
    first in a fixed order): what one GPU can take. Instances of other profiles stay free padding."""
    best: dict[tuple[int, ...], tuple[int, tuple[tuple[str, int], ...]]] = {}
    for layout in valid_layouts(gpu_type):
        names = Counter(name for name, _ in layout)
        vector = tuple(names.get(p, 0) for p in profiles)
        if not any(vector):
            continue
        key = (uncovered(gpu_type, layout_mask(gpu_type, layout)), tuple(sorted(layout)))
        if vector not in best or key < best[vector]:
            best[vector] = key
    return tuple((v, s, frozenset(layout)) for v, (s, layout) in sorted(best.items()))


def _solve(
    gpu_type: MigGpuType, demand: tuple[tuple[str, int], ...], gpus: int, node_limit: int
) -> list[tuple[frozenset[tuple[str, int]], int]] | None:
    """How many GPUs take each layout: fewest GPUs, then fewest stranded slices, covering ``demand``
    (HiGHS, one thread, fixed seed, at most ``node_limit`` nodes). None without a feasible answer."""
    profiles = tuple(name for name, _ in demand)
    configs = _configurations(gpu_type, profiles)
    if not configs:
        return None
    solver = _new_solver()
    for option, value in (
        ("output_flag", False),
        ("log_to_console", False),
        ("threads", 1),
        ("random_seed", SEED),
        ("mip_max_nodes", node_limit),
        ("mip_rel_gap", 0.0),
    ):
        solver.setOptionValue(option, value)
    scale = gpu_type.memory_slices * gpus + 1
    x = [solver.addIntegral(lb=0, ub=gpus) for _ in configs]
    for k, (_, count) in enumerate(demand):
        solver.addConstr(sum(v[k] * xi for (v, _, _), xi in zip(configs, x, strict=True)) >= count)
    solver.addConstr(sum(x) <= gpus)
    solver.minimize(sum((scale + s) * xi for (_, s, _), xi in zip(configs, x, strict=True)))
    if solver.getInfo().primal_solution_status != 2:  # no feasible solution found within the limit
        return None
    values = solver.getSolution().col_value
    counts = [(layout, round(values[k])) for k, (_, _, layout) in enumerate(configs)]
    return [(layout, n) for layout, n in counts if n > 0]
