"""One replica's MIG instances on one host (a pod cannot span machines), over the exact layout planner.

:func:`on_one_host` takes the same arguments as ``plan_mig_admission`` plus the candidate hosts (uids, in
order of preference) and plans the request on each host's GPUs alone; the best host is the one whose
placement switches the fewest GPUs to MIG mode, then adds the fewest stranded slices, then comes first
in ``hosts``. Hosts whose GPUs are in the same state offer the same plans, so each state is planned once
(the first host in order having it stands for the others). Refused everywhere: ``MIGUnsupported`` when no
host offers the profiles, ``PoolCapacityExceeded`` when the hosts have fewer free slices in total than the
request needs, else ``NoFittingLayout`` (enough in total, but not on one host).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import replace
from typing import Any

from reconciler.placement.mig import (
    MigPlan,
    MigRefusal,
    MigShortfall,
    PoolGpu,
    plan_mig_admission,
    stranded_slices,
)


def _state(gpus: Sequence[PoolGpu], frozen: Set[str]) -> tuple[Any, ...]:
    return tuple(
        (
            g.gpu_type,
            g.bound is not None,
            None
            if g.instances is None
            else tuple((s.start, s.profile, s.workload is None) for s in g.instances),
            g.host in frozen,
        )
        for g in sorted(gpus, key=lambda g: g.index)
    )


def on_one_host(
    gpus: Sequence[PoolGpu],
    request: Mapping[str, int],
    workload: str,
    frozen_hosts: Set[str],
    hosts: Sequence[str],
) -> MigPlan | MigRefusal:
    """Place ``request`` ({profile: count}) on one of ``hosts``; ``gpus`` are the pool's GPUs of one
    family (the plan returned lists them all, in the same order, with the chosen host's changed)."""
    by_host: dict[str, list[int]] = {}
    for i, gpu in enumerate(gpus):
        by_host.setdefault(gpu.host, []).append(i)
    planned: dict[tuple[Any, ...], MigPlan | MigRefusal] = {}
    best: tuple[tuple[int, int, int], list[int], MigPlan] | None = None
    refusals: list[MigRefusal] = []
    for rank, host in enumerate(hosts):
        idx = by_host.get(host)
        if not idx:
            continue
        mine = [gpus[i] for i in idx]
        state = _state(mine, frozen_hosts)
        seen = state in planned
        if not seen:
            planned[state] = plan_mig_admission(mine, request, workload, frozen_hosts)
        outcome = planned[state]
        if isinstance(outcome, MigRefusal):
            refusals.append(outcome)
            continue
        if seen:
            continue  # the same plan on an earlier host in order
        score = (outcome.switched, outcome.stranded - sum(stranded_slices(g) for g in mine), rank)
        if best is None or score < best[0]:
            best = (score, idx, outcome)
    if best is None:
        return _refusal(request, refusals)
    _, idx, plan = best
    after = list(gpus)
    for i, gpu in zip(idx, plan.gpus, strict=True):
        after[i] = gpu
    stranded = sum(stranded_slices(g) for g in after)
    # The plan was made on the host's GPUs alone: bindings name the host already; the GPUs list the pool.
    return replace(plan, gpus=tuple(after), stranded=stranded)


def _refusal(request: Mapping[str, int], refusals: Sequence[MigRefusal]) -> MigRefusal:
    shown = ", ".join(f"{name} x{count}" for name, count in sorted(request.items()) if count)
    usable = [r for r in refusals if r.reason is not MigShortfall.MIG_UNSUPPORTED]
    if not usable:
        if refusals:
            return refusals[0]
        return MigRefusal(MigShortfall.MIG_UNSUPPORTED, f"no host of the pool offers {shown}", 0, 0)
    needed = min(r.needed_slices for r in usable)
    free = sum(r.free_slices for r in usable)
    if needed > free:
        return MigRefusal(
            MigShortfall.POOL_CAPACITY_EXCEEDED,
            f"needs {shown} ({needed} memory slices), {free} free in the pool: not enough free MIG capacity",
            needed,
            free,
        )
    return MigRefusal(
        MigShortfall.NO_FITTING_LAYOUT,
        f"needs {shown} ({needed} memory slices) on one host, {free} free in the pool: no host holds them "
        "without moving bound instances",
        needed,
        free,
    )
