"""Project GPU quotas (docs/environments.md#project-gpu-quota), pure.

``Project.spec.gpuQuota: {<family>: <count>}`` caps the GPUs of a namespace's own clusters: its
dedicated MLPlatforms and its ComputePools. The rules:

- Used, per namespace and family: the GPUs on the workers of each of those clusters as the plan leaves
  them (a pool at its current, possibly scaled, size). A cluster that stays counts: running, suspended,
  rejected or invalid (it keeps its hosts). A cluster being deleted counts nothing. Shared-mode
  platforms and workloads inside a pool count nothing more: their GPUs are the pool's.
- Creations and grows are taken in allocation order (priority, high first, then namespace, then name;
  pools have priority 0), after every cluster that does not grow is counted. One that would take a
  family above its quota is refused: a create is ``rejected``, ``QuotaExceeded``; a grow is held (its
  cluster keeps its size and hosts), ``QuotaExceeded``. "needs 8 NVIDIA-A100 GPUs; project-a uses 16 of
  20". A family the quota does not name has no limit.
- Placement runs again without what was refused, so the hosts a refused create would have taken are
  free for the others; whatever that placement grants is counted again the same way, until nothing
  more is refused (each round refuses at least one more resource or ends).
- Nothing running is shrunk or removed for a lowered quota: it keeps running, and ``used`` may be
  above ``quota`` (the Project's status says so).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from reconciler.allocate import Allocation, Decision, Placement, Rejection, split_clusters
from reconciler.inventory import Machine
from reconciler.model.conditions import Reason
from reconciler.model.desired import DesiredState, Identity
from reconciler.model.gpu import GpuFamily, canonical_family
from reconciler.model.observed import ManagedCluster
from reconciler.model.pools import PLATFORM_KIND, POOL_KIND
from reconciler.model.resources import ComputePool, GpuRequest, MLPlatform, Project
from reconciler.resolve import is_tenant

Quotas = Mapping[str, Mapping[GpuFamily, int]]  # namespace -> family -> quota


@dataclass(frozen=True, slots=True)
class QuotaUse:
    """One namespace's use of one family's quota, as the plan leaves it."""

    namespace: str
    family: GpuFamily
    used: int
    quota: int

    @property
    def free(self) -> int:
        return max(self.quota - self.used, 0)

    def to_json(self) -> dict[str, object]:
        return {"namespace": self.namespace, "family": self.family, "used": self.used, "quota": self.quota}


def quotas_of(desired: DesiredState) -> dict[str, dict[GpuFamily, int]]:
    """Each namespace's ``gpuQuota`` by canonical family (namespaces whose Project sets none are left out)."""
    out: dict[str, dict[GpuFamily, int]] = {}
    for project in desired.of_kind(Project):
        ns = project.metadata.namespace
        if ns in out or not project.spec.gpu_quota or desired.project(ns) is not project:
            continue
        out[ns] = {canonical_family(f): n for f, n in sorted(project.spec.gpu_quota.items())}
    return out


def _gpus(hosts: Sequence[str], machines: Mapping[str, Machine]) -> dict[GpuFamily, int]:
    out: dict[GpuFamily, int] = {}
    for uid in hosts:
        m = machines.get(uid)
        if m is not None and m.gpu_family is not None and m.gpu_count > 0:
            family = GpuFamily(m.gpu_family)
            out[family] = out.get(family, 0) + m.gpu_count
    return out


@dataclass(frozen=True, slots=True)
class QuotaPlacement:
    """Placement within quotas: the decisions, the grows held (identity -> message; their decision keeps
    the cluster's size), and the use of every quota as the plan leaves it."""

    placement: Placement
    held: Mapping[Identity, str]
    uses: tuple[QuotaUse, ...]


class _Ledger:
    def __init__(self, quotas: Quotas) -> None:
        self.quotas = quotas
        self.used: dict[tuple[str, GpuFamily], int] = {}

    def charge(self, ns: str, gpus: Mapping[GpuFamily, int]) -> None:
        for family, n in gpus.items():
            if family in self.quotas.get(ns, {}):
                self.used[(ns, family)] = self.used.get((ns, family), 0) + n

    def refusal(self, ns: str, before: Mapping[GpuFamily, int], after: Mapping[GpuFamily, int]) -> str | None:
        """Why growing from ``before`` to ``after`` GPUs breaks the namespace's quota, or None."""
        for family, quota in sorted(self.quotas.get(ns, {}).items()):
            extra = after.get(family, 0) - before.get(family, 0)
            used = self.used.get((ns, family), 0) + before.get(family, 0)
            if extra > 0 and used + extra > quota:
                return f"needs {extra} {family} GPUs; {ns} uses {used} of {quota}"
        return None

    def uses(self) -> tuple[QuotaUse, ...]:
        return tuple(
            QuotaUse(ns, family, self.used.get((ns, family), 0), quota)
            for ns, families in sorted(self.quotas.items())
            for family, quota in sorted(families.items())
        )


def _subjects(desired: DesiredState) -> dict[Identity, MLPlatform | ComputePool]:
    out: dict[Identity, MLPlatform | ComputePool] = {}
    for p in desired.platforms():
        if not is_tenant(p):
            out[(PLATFORM_KIND, p.metadata.namespace, p.metadata.name)] = p
    for pool in desired.of_kind(ComputePool):
        out[(POOL_KIND, pool.metadata.namespace, pool.metadata.name)] = pool
    return out


def _decision(placement: Placement, ident: Identity) -> Decision | None:
    decisions = placement.platforms if ident[0] == PLATFORM_KIND else placement.pools
    return decisions.get((ident[1], ident[2]))


def _priority(resource: MLPlatform | ComputePool) -> int:
    return resource.spec.priority if isinstance(resource, MLPlatform) else 0


def _at_size(resource: MLPlatform | ComputePool, gpus: Mapping[GpuFamily, int]) -> MLPlatform | ComputePool:
    asked = [GpuRequest(family=f, count=n) for f, n in sorted(gpus.items()) if n > 0]
    return resource.model_copy(update={"spec": resource.spec.model_copy(update={"gpus": asked})})


def place_within_quota(
    desired: DesiredState,
    clusters: Sequence[ManagedCluster],
    machines: Mapping[str, Machine],
    place: Callable[[DesiredState], Placement],
) -> QuotaPlacement:
    """``place`` (allocation over ``desired``), with every namespace's quota applied (module docstring)."""
    quotas = quotas_of(desired)
    if not quotas:
        return QuotaPlacement(place(desired), {}, ())
    platform_clusters, pool_clusters = split_clusters(clusters)
    current: dict[Identity, dict[GpuFamily, int]] = {}
    for (ns, name), c in platform_clusters.items():
        current[(PLATFORM_KIND, ns, name)] = _gpus(c.workers, machines)
    for (ns, name), c in pool_clusters.items():
        current[(POOL_KIND, ns, name)] = _gpus(c.workers, machines)
    subjects = _subjects(desired)
    kept = {i for i in current if i in subjects or i in desired.invalid}  # not being deleted
    refused: dict[Identity, str] = {}
    trimmed = desired
    while True:
        placement = place(trimmed)
        ledger = _Ledger(quotas)
        growing: list[tuple[Identity, dict[GpuFamily, int]]] = []
        for ident in sorted(kept | set(subjects)):
            ns = ident[1]
            if ns not in quotas:
                continue
            before = current.get(ident, {})
            decision = _decision(placement, ident) if ident not in refused else None
            after = _gpus(decision.workers, machines) if isinstance(decision, Allocation) else before
            if any(after.get(f, 0) > before.get(f, 0) for f in quotas[ns]):
                growing.append((ident, after))
            else:
                ledger.charge(ns, after)  # what does not grow is counted before what does
        fresh: dict[Identity, str] = {}
        order = sorted(growing, key=lambda g: (-_priority(subjects[g[0]]), g[0][1], g[0][2], g[0][0]))
        for ident, after in order:
            before = current.get(ident, {})
            why = ledger.refusal(ident[1], before, after)
            if why is None:
                ledger.charge(ident[1], after)
            else:
                fresh[ident] = why
                ledger.charge(ident[1], before)
        if not fresh:
            held = {i: m for i, m in refused.items() if i in current}
            return QuotaPlacement(_refuse(placement, refused, current), held, ledger.uses())
        refused.update(fresh)
        trimmed = _without(desired, refused, current, subjects)


def _without(
    desired: DesiredState,
    refused: Mapping[Identity, str],
    current: Mapping[Identity, Mapping[GpuFamily, int]],
    subjects: Mapping[Identity, MLPlatform | ComputePool],
) -> DesiredState:
    """The desired state with refused creates left out and refused grows asking for their current size."""
    resources = dict(desired.resources)
    for ident in refused:
        if ident not in current:
            resources.pop(ident, None)
        elif ident in resources:
            resources[ident] = replace(resources[ident], resource=_at_size(subjects[ident], current[ident]))
    return replace(desired, resources=resources)


def _refuse(
    placement: Placement, refused: Mapping[Identity, str], current: Mapping[Identity, object]
) -> Placement:
    platforms, pools = dict(placement.platforms), dict(placement.pools)
    for ident, message in sorted(refused.items()):
        if ident in current:
            continue  # a held grow: its decision (at its current size) stands
        target = platforms if ident[0] == PLATFORM_KIND else pools
        target[(ident[1], ident[2])] = Rejection(Reason.QUOTA_EXCEEDED, message)
    return Placement(platforms=dict(sorted(platforms.items())), pools=dict(sorted(pools.items())))
