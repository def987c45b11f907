"""Joint MIG planning inside a pool's admission pass (docs/mig.md, "Joint planning of a pass"), pure.

``PoolMigPlanner`` plans the pass's new MIG demand together once, at the first placement of a workload
of that demand, over the GPUs as they are then (``mig_joint.plan_pass``, one host per replica), and
each of those workloads' replicas then takes the instances the joint plan gave it when admission asks
(``JointPlan.follow``). The new demand: workloads still in the pool, asking for MIG instances of one
family (and possibly whole GPUs of that family beside them, on the replica's host), with no MIG
instances admitted before, in admission's order (priority, then namespace, name). A replica with whole
GPUs is planned on a host where admission takes its lowest-index free GPUs whole; when admission
offers it another host first while its planned host still holds it as planned, the planner declines
that host (``Defer``), so admission tries the next. Anything the plan did not foresee (a GPU taken
whole meanwhile, a host admission does not offer, a workload the plan refused) goes to the
one-at-a-time planner as before.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field, replace

from reconciler.model.gpu import GpuFamily
from reconciler.model.pools import WorkloadRequest
from reconciler.placement.mig import MigInstance, PoolGpu
from reconciler.placement.mig_joint import WHOLE_GPUS, Placed, is_free, plan_pass
from reconciler.placement.units import MigInstance as Binding

_Key = tuple[str, int]  # a GPU: (host uid, device index)
# A family with more GPUs than this in the pool is planned one at a time: the joint plan re-runs the
# greedy and solves a program per host, which on 5,000 GPUs and 3,000 workloads took 70 s (a size,
# not a time: the same pool decides the same).
MAX_GPUS = 1024


@dataclass(frozen=True, slots=True)
class Demand:
    """One workload of the pass's new MIG demand: its label, family, request, replicas and whole GPUs
    per replica."""

    label: str
    family: GpuFamily
    request: tuple[tuple[str, int], ...]
    replicas: int
    whole: int = 0


def new_demand(workloads: Sequence[WorkloadRequest], previous_mig: Set[str]) -> list[Demand]:
    """The pass's new MIG demand in admission's order (``previous_mig``: labels that held instances):
    workloads whose instances, and whole GPUs if any, are of one family (admission binds no other)."""
    out: list[Demand] = []
    for w in sorted(workloads, key=lambda w: (-w.priority, w.key[0], w.key[1])):
        label = f"{w.key[0]}/{w.key[1]}"
        if w.removed or w.suspended or label in previous_mig:
            continue
        asked: Counter[str] = Counter()
        families = {f for f, n in w.whole.items() if n > 0}
        for mig in w.mig:
            if mig.count > 0:
                asked[mig.profile] += mig.count
                families.add(mig.family)
        if len(families) == 1 and asked and w.replicas > 0:
            family = families.pop()
            whole = w.whole.get(family, 0)
            out.append(Demand(label, family, tuple(sorted(asked.items())), w.replicas, max(whole, 0)))
    return out


@dataclass(frozen=True, slots=True)
class JointPlan:
    """Where each planned replica goes (per label, in replica order) and the layouts of the GPUs the
    plan lays out (free instances)."""

    replicas: Mapping[str, tuple[Placed, ...]]
    layouts: Mapping[_Key, tuple[MigInstance, ...]]
    requests: Mapping[str, tuple[tuple[str, int], ...]]
    whole: Mapping[str, int] = field(default_factory=dict)  # whole GPUs per replica, where any

    def follow(
        self,
        label: str,
        wanted: Mapping[GpuFamily, Mapping[str, int]],
        gpus: Mapping[_Key, PoolGpu],
        free: Set[_Key],
        hosts: Sequence[str] | None,
    ) -> tuple[dict[_Key, PoolGpu], list[Binding], list[_Key]] | Defer | None:
        """The first planned replica of ``label`` that can still be taken as planned: the GPUs it
        changes, its instances and the GPUs it switches from whole (``free``: whole GPUs admission
        offers). None: nothing planned can be taken (the one-at-a-time planner decides). ``Defer``: a
        replica with whole GPUs offered a host it is not planned on, while a host it is planned on
        still holds it as planned (admission offers that one too, if this one is declined)."""
        planned = self.replicas.get(label)
        if not planned or len(wanted) != 1:
            return None
        (asked,) = wanted.values()
        if tuple(sorted((p, n) for p, n in asked.items() if n)) != self.requests[label]:
            return None
        for host, instances in planned:
            if hosts is not None and host not in hosts:
                continue
            taken = self._take(label, host, instances, gpus, free)
            if taken is not None:
                return taken
        whole = self.whole.get(label, 0)
        if not whole or hosts is None:
            return None
        for host, instances in planned:
            if host in hosts or self._take(label, host, instances, gpus, free) is None:
                continue
            mine = {(host, index) for index, _, _ in instances}
            lowest = sorted(ref[1] for ref in free if ref[0] == host)[:whole]
            if len(lowest) == whole and not mine & {(host, index) for index in lowest}:
                return Defer(host)
        return None

    def _take(
        self,
        label: str,
        host: str,
        instances: Sequence[tuple[int, str, int]],
        gpus: Mapping[_Key, PoolGpu],
        free: Set[_Key],
    ) -> tuple[dict[_Key, PoolGpu], list[Binding], list[_Key]] | None:
        changed: dict[_Key, PoolGpu] = {}
        switched: list[_Key] = []
        bindings: list[Binding] = []
        for index, profile, start in instances:
            ref = (host, index)
            gpu = changed.get(ref) or gpus.get(ref)
            if gpu is None or gpu.bound is not None:
                return None
            if ref not in changed:
                target = self.layouts.get(ref)
                current = gpu.instances
                same = current is not None and target is not None and _same(current, target)
                if not same and target is not None and not gpu.frozen:
                    idle = current is None and ref in free
                    relay = current is not None and all(s.workload is None for s in current)
                    if not (idle or relay):
                        return None
                    gpu = replace(gpu, instances=target)
                if ref in free:
                    switched.append(ref)
            slots = list(gpu.instances or ())
            spot = next(
                (
                    k
                    for k, s in enumerate(slots)
                    if (s.start, s.profile, s.workload) == (start, profile, None)
                ),
                None,
            )
            if spot is None:
                return None
            slots[spot] = replace(slots[spot], workload=label)
            changed[ref] = replace(gpu, instances=tuple(slots))
            bindings.append(Binding(host, index, profile, start))
        return changed, bindings, switched


@dataclass(frozen=True, slots=True)
class Defer:
    """The replica is planned on ``host`` (a host uid), which still holds it as planned."""

    host: str


def _same(a: Sequence[MigInstance], b: Sequence[MigInstance]) -> bool:
    """The same layout (whoever holds the instances)."""
    return {(i.profile, i.start) for i in a} == {(i.profile, i.start) for i in b}


def plan_joint(demand: Sequence[Demand], views: Mapping[GpuFamily, Sequence[PoolGpu]]) -> JointPlan:
    """The joint plan of ``demand`` per family over ``views`` (the family's GPUs as a new request sees
    them); empty where the joint plan is no better than the greedy's."""
    replicas: dict[str, list[Placed]] = {}
    layouts: dict[_Key, tuple[MigInstance, ...]] = {}
    for family, view in sorted(views.items()):
        mine = [d for d in demand if d.family == family]
        requests = [
            (d.label, dict(d.request) | ({WHOLE_GPUS: d.whole} if d.whole else {}))
            for d in mine
            for _ in range(d.replicas)
        ]
        if not requests or len(view) > MAX_GPUS or not any(is_free(g) for g in view):
            continue  # nothing to lay out anew: the one-at-a-time planner decides
        planned = plan_pass(view, requests, one_host=True)
        if planned.method != "joint":
            continue
        for label, placed in zip(planned.admitted, planned.placed, strict=True):
            replicas.setdefault(label, []).append(placed)
        for before, after in zip(view, planned.gpus, strict=True):
            if after.instances is not None and after != before:
                key = (after.host, after.index)
                layouts[key] = tuple(replace(i, workload=None) for i in after.instances)
    # A workload the plan admits only in part (not every replica) is left to the one-at-a-time planner.
    wanted = {d.label: d for d in demand}
    whole = {k: tuple(v) for k, v in replicas.items() if len(v) == wanted[k].replicas}
    asks = {k: wanted[k].request for k in whole}
    return JointPlan(whole, layouts, asks, {k: wanted[k].whole for k in whole if wanted[k].whole})
