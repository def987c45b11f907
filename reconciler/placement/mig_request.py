"""One MIG request beyond the pool-wide plan: the best host for a replica's instances, the MIG type a
growing pool adds, and the refusal -- the message counting what a new request can use where it was
looked for, naming the GPUs held and the growth that would let it in (docs/mig.md). Pure; used by
``mig_admission.PoolMigPlanner``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from reconciler.model.conditions import Reason
from reconciler.model.gpu import GpuFamily
from reconciler.model.mig import MigGpuType
from reconciler.placement.mig import (
    MigPlan,
    MigShortfall,
    PoolGpu,
    describe_shortfall,
    mig_usage,
    plan_mig_admission,
    state_of,
    usable_slices,
)
from reconciler.placement.mig import MigRefusal as PlanRefusal
from reconciler.placement.mig_outcome import index_ranges, plural
from reconciler.placement.seam import MigRefusal

_Key = tuple[str, int]  # a GPU: (host uid, device index)
_HOSTS_SHOWN = 4  # hosts a refusal names; more are counted


def refusal(
    pool: str,
    host_names: Mapping[str, str],
    family: GpuFamily,
    wanted: Mapping[str, int],
    outcome: PlanRefusal,
    refs: Sequence[_Key],
    view_of: Callable[[_Key], PoolGpu],
    hosts: Sequence[str] | None,
) -> MigRefusal:
    """The message: what a new request can use where it was looked for (the pool, or the hosts of
    one replica), the GPUs held there, and the growth that would let it in. ``host_names``: host uid ->
    name; ``view_of``: a GPU as the request sees it."""
    shown = ", ".join(f"{name} x{count}" for name, count in sorted(wanted.items()))
    scope, where = f"pool {pool}", set(hosts or ())
    if hosts is not None and not {ref[0] for ref in refs} <= where:
        refs = [ref for ref in refs if ref[0] in where]
        names = sorted(host_names.get(h, h) for h in where)
        scope = f"host {names[0]}" if len(names) == 1 else f"hosts {', '.join(names[:3])}"
        scope += f" and {len(names) - 3} more" if len(names) > 3 else ""
    view = [view_of(ref) for ref in refs]
    types = sorted({g.gpu_type.key: g.gpu_type for g in view if g.gpu_type is not None}.items())
    if outcome.reason is MigShortfall.MIG_UNSUPPORTED:
        return MigRefusal(Reason.MIG_UNSUPPORTED, _unsupported(family, shown, pool, wanted, view, types))
    room = " and ".join(f"{n} of {wanted[name]} {name}" for name, n in outcome.room)
    alone = ", each profile alone" if len(outcome.room) > 1 else ""
    usable = [usable_slices(g) for g in view]
    switchable = [g for g, n in zip(view, usable, strict=True) if n and g.instances is None]
    partial = [n for g, n in zip(view, usable, strict=True) if n and g.instances is not None]
    in_mig = sum(partial)
    head = (
        f"needs MIG instances {shown} of {family} ({outcome.needed_slices} memory slices); {scope} "
        f"can take {room} now{alone} ({outcome.free_slices} memory slices usable: "
        f"{plural(len(switchable), f'whole {family} GPU')} free to switch to MIG, {in_mig} in free "
        f"space of {plural(len(partial), 'GPU')} in MIG mode)"
    )
    if outcome.reason is MigShortfall.NO_FITTING_LAYOUT:
        head += (
            ": no single host holds them (one replica's instances go on one host)"
            if len(where) > 1
            else ": no valid layout holds them without moving bound instances"
        )
    held = [g for g, n in zip(view, usable, strict=True) if not n]
    if held:
        head += f"; held: {_listed(held, host_names, _held_kind)}"
    frozen = [g for g in view if g.frozen]
    if frozen:
        head += (
            f"; {_listed(frozen, host_names, lambda g: '')} keep their layouts while workloads "
            "admitted before use them"
        )
    grow = outcome.growth
    tail = f", or the pool grows by {plural(grow, f'{family} GPU')}" if grow else ""
    return MigRefusal(Reason(outcome.reason.value), f"{head}; frees when MIG instances are released{tail}")


def plan_on_one_host(
    refs: Sequence[_Key],
    hosts: Sequence[str],
    profiles: Mapping[str, int],
    label: str,
    view_of: Callable[[_Key], PoolGpu],
    growth_type_of: Callable[[Sequence[PoolGpu]], MigGpuType | None],
) -> MigPlan | PlanRefusal:
    """The best host of ``hosts`` for all the instances (fewest GPUs switched, then fewest slices
    stranded, then the earlier host). Hosts in the same state give the same answer: planned once.
    ``view_of``: a GPU as the request sees it; ``growth_type_of``: the type a growing pool adds."""
    by_host: dict[str, list[_Key]] = {}
    for ref in refs:
        by_host.setdefault(ref[0], []).append(ref)
    best: tuple[tuple[int, int, int], list[PoolGpu], MigPlan] | None = None
    tried: set[tuple[Any, ...]] = set()
    for rank, host in enumerate(hosts):
        view = [view_of(ref) for ref in by_host.get(host, ())]
        state = tuple(state_of(g) for g in view)
        if not view or state in tried:
            continue
        tried.add(state)
        outcome = plan_mig_admission(view, profiles, label)
        if isinstance(outcome, MigPlan):
            cost = (outcome.switched, outcome.stranded - mig_usage(view).stranded, rank)
            if best is None or cost < best[0]:
                best = (cost, view, outcome)
    if best is None:
        view = [view_of(ref) for host in dict.fromkeys(hosts) for ref in by_host.get(host, ())]
        types = {g.gpu_type for g in view if g.gpu_type is not None}
        if any(not any(t.profile(name) for t in types) for name in profiles):
            return PlanRefusal(MigShortfall.MIG_UNSUPPORTED, "", 0, 0)
        return describe_shortfall(view, profiles, growth_type=growth_type_of(view))
    return best[2]


def growth_type(view: Sequence[PoolGpu], wanted: Mapping[str, int]) -> MigGpuType | None:
    """The MIG type a growing pool adds: the family's commonest one that offers every profile asked."""
    counts = Counter(
        g.gpu_type for g in view if g.gpu_type is not None and all(g.gpu_type.profile(n) for n in wanted)
    )
    if not counts:
        return None
    return min(counts, key=lambda t: (-counts[t], t.key))


def _unsupported(
    family: GpuFamily,
    shown: str,
    pool: str,
    wanted: Mapping[str, int],
    view: Sequence[PoolGpu],
    types: Sequence[tuple[str, MigGpuType]],
) -> str:
    if not view:
        return f"asks for MIG instances {shown} of {family}; pool {pool} has no {family} GPUs"
    if not types:
        return (
            f"asks for MIG instances {shown} of {family}; no {family} GPU of pool {pool} is MIG-capable (the "
            "agent must report migCapable: true for a model and memory in the MIG catalogue): ask for whole "
            "GPUs"
        )
    offered = "; ".join(f"{k} offers {', '.join(t.profiles)}" for k, t in types)
    missing = [name for name in sorted(wanted) if not any(t.profile(name) for _, t in types)]
    return (
        f"asks for MIG instances {shown} of {family}; the GPUs of pool {pool} have no {', '.join(missing)} "
        f"({offered}): ask for one of their profiles"
    )


def _held_kind(gpu: PoolGpu) -> str:
    if gpu.gpu_type is None:
        return "not MIG-capable"
    return "whole" if gpu.instances is None else "MIG, full"


def _listed(gpus: Sequence[PoolGpu], names: Mapping[str, str], kind: Callable[[PoolGpu], str]) -> str:
    """``gpu-a100-01 GPUs 0-3 (whole), GPUs 4-7 (MIG, full); ...``: GPUs by host, the first hosts by
    name, the rest counted."""
    kinds: dict[str, dict[str, list[int]]] = {}
    for gpu in gpus:
        kinds.setdefault(gpu.host, {}).setdefault(kind(gpu), []).append(gpu.index)
    hosts = sorted(kinds, key=lambda h: (names.get(h, h), h))
    shown = [
        f"{names.get(h, h)} "
        + ", ".join(f"{index_ranges(i)}{f' ({k})' if k else ''}" for k, i in sorted(kinds[h].items()))
        for h in hosts[:_HOSTS_SHOWN]
    ]
    more = len(hosts) - _HOSTS_SHOWN
    if more > 0:
        rest = sum(len(i) for h in hosts[_HOSTS_SHOWN:] for i in kinds[h].values())
        shown.append(f"{plural(more, 'more host')} ({plural(rest, 'GPU')})")
    return "; ".join(shown)
