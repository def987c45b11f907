"""What a workload asks of its pool, resolved from an AIWorkload or a shared MLPlatform (docs/pools.md).

One place turns both kinds of tenant into the same request, and one place counts a request against the
pool's ComputeProfile ``gpuLimits`` (whole GPUs plus MIG instances rounded up to GPUs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from reconciler.model.gpu import GpuFamily, canonical_family
from reconciler.model.mig import family_gpu_equivalents
from reconciler.model.observed import managed_labels
from reconciler.model.pickling import by_fields
from reconciler.model.resources import AIWorkload, MLPlatform

# (namespace, name) of an AIWorkload or a shared MLPlatform; of a ComputePool
WorkloadKey = tuple[str, str]
PoolKey = tuple[str, str]

# Which kind of resource a managed cluster belongs to; a cluster without the label is an MLPlatform's
# (clusters made before pools existed). A pool's cluster also records the mode it was made for.
KIND_LABEL = "palette.ai/kind"
PLATFORM_KIND = "MLPlatform"
POOL_KIND = "ComputePool"
POOL_MODE_LABEL = "palette.ai/pool-mode"
# A pool provisioned for a workload (docs/bundles.md): its cluster says for which kind it was made.
PROVISIONED_LABEL = "palette.ai/provisioned-for"


def cluster_kind(labels: Mapping[str, str]) -> str:
    """``MLPlatform`` or ``ComputePool``: the kind a managed cluster's labels name (MLPlatform if none)."""
    return labels.get(KIND_LABEL) or PLATFORM_KIND


def pool_cluster_labels(
    namespace: str, name: str, mode: str, provisioned_for: str | None = None
) -> dict[str, str]:
    """The labels of a pool's cluster: the managed labels, its kind and the mode it is made for (and,
    for a pool provisioned for a workload, that workload's kind)."""
    labels = {**managed_labels(namespace, name), KIND_LABEL: POOL_KIND, POOL_MODE_LABEL: mode}
    if provisioned_for is not None:
        labels[PROVISIONED_LABEL] = provisioned_for
    return labels


@by_fields
@dataclass(frozen=True, slots=True)
class MigRequest:
    family: GpuFamily
    profile: str
    count: int


@by_fields
@dataclass(frozen=True, slots=True)
class WorkloadRequest:
    """One tenant of a pool: what it asks for and whether it takes part in this pass.

    ``whole`` counts whole GPUs per canonical family and ``mig`` lists MIG instances per (family,
    profile), both per replica: each of the ``replicas`` pods asks for that much on one host.
    ``removed`` marks a workload that left the repository or its pool (its previous admission is released).
    """

    key: WorkloadKey
    kind: str = "AIWorkload"
    priority: int = 0
    whole: Mapping[GpuFamily, int] = field(default_factory=dict)
    mig: tuple[MigRequest, ...] = ()
    suspended: bool = False
    removed: bool = False
    replicas: int = 1

    def asked(self) -> tuple[int, tuple[tuple[GpuFamily, int], ...], tuple[MigRequest, ...]]:
        """What it asks for (replicas, whole GPUs and MIG instances per replica) as a key: two requests
        with equal keys are refused, bound and explained alike by admission, whatever their names (the
        whole GPUs in the mapping's own order: equal ones written in another order just get two keys)."""
        return self.replicas, tuple(self.whole.items()), self.mig

    def total_whole(self) -> dict[GpuFamily, int]:
        """Whole GPUs per family over all replicas."""
        return {family: n * self.replicas for family, n in self.whole.items()}

    @property
    def label(self) -> str:
        return f"{self.key[0]}/{self.key[1]}"

    def limit_counts(self) -> dict[GpuFamily, int]:
        """GPUs counted against ``gpuLimits`` per family, over all replicas: whole GPUs plus, for MIG
        instances, the sum of their compute slices over the GPU's slices, rounded up (7 x 1g counts 1; one
        3g counts 1). The MIG rule is the catalogue's (``model.mig.family_gpu_equivalents``)."""
        counts: dict[GpuFamily, int] = self.total_whole()
        mig: dict[GpuFamily, dict[str, int]] = {}
        for request in self.mig:
            profiles = mig.setdefault(request.family, {})
            profiles[request.profile] = profiles.get(request.profile, 0) + request.count * self.replicas
        for family, profiles in mig.items():
            counts[family] = counts.get(family, 0) + family_gpu_equivalents(family, profiles)
        return counts


def pool_ref_of(resource: AIWorkload | MLPlatform) -> str | None:
    """The name of the ComputePool a tenant names (None for a dedicated platform, and for a workload
    placed through an Environment: :mod:`reconciler.placement.environment` chooses its pool)."""
    if isinstance(resource, AIWorkload):
        ref = resource.spec.compute_pool_ref
        return ref.name if ref is not None else None  # None: placed through its Environment
    if resource.spec.mode == "shared" and resource.spec.compute_pool_ref is not None:
        return resource.spec.compute_pool_ref.name
    return None


def workload_request(resource: AIWorkload | MLPlatform) -> WorkloadRequest:
    """The admission request of a valid tenant (family names are canonical after validation)."""
    key = (resource.metadata.namespace, resource.metadata.name)
    whole: dict[GpuFamily, int] = {}
    mig: dict[tuple[GpuFamily, str], int] = {}
    if isinstance(resource, AIWorkload):
        for entry in resource.spec.gpus:
            family = canonical_family(entry.family)
            if entry.mig is None:
                whole[family] = whole.get(family, 0) + entry.count
            else:
                mig[(family, entry.mig)] = mig.get((family, entry.mig), 0) + entry.count
        priority, suspend, kind = resource.spec.priority, resource.spec.suspend, "AIWorkload"
        replicas = resource.spec.replicas
    else:
        for gpu in resource.spec.gpus:
            family = canonical_family(gpu.family)
            whole[family] = whole.get(family, 0) + gpu.count
        priority, suspend, kind, replicas = resource.spec.priority, resource.spec.suspend, "MLPlatform", 1
    return WorkloadRequest(
        key=key,
        kind=kind,
        priority=priority,
        whole={f: n for f, n in sorted(whole.items()) if n > 0},
        mig=tuple(MigRequest(f, p, n) for (f, p), n in sorted(mig.items()) if n > 0),
        suspended=suspend,
        replicas=replicas,
    )


def canonical_limits(limits: Mapping[str, int]) -> dict[GpuFamily, int]:
    """A ComputeProfile's ``gpuLimits`` keyed by canonical family (names that do not parse are skipped:
    validation reports them)."""
    out: dict[GpuFamily, int] = {}
    for name, value in limits.items():
        try:
            out[canonical_family(name)] = value
        except ValueError:
            continue
    return out


def tenants_by_pool(
    tenants: Iterable[AIWorkload | MLPlatform],
    request_of: Callable[[AIWorkload | MLPlatform], WorkloadRequest] = workload_request,
) -> dict[PoolKey, list[WorkloadRequest]]:
    """The admission requests of valid tenants grouped by the pool they name (dedicated platforms are
    not tenants and are left out). Order inside a group is admission's business, not this one's.
    ``request_of``: :func:`workload_request`, or one that knows the requests already."""
    out: dict[PoolKey, list[WorkloadRequest]] = {}
    for resource in tenants:
        pool = pool_ref_of(resource)
        if pool is not None:
            out.setdefault((resource.metadata.namespace, pool), []).append(request_of(resource))
    return dict(sorted(out.items()))
