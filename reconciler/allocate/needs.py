"""What one platform or pool needs, and the engine's answers: an allocation or a rejection (pure).

The needs are resolved from the spec, the profiles and their precedence rules
(:mod:`reconciler.resolve`); see :mod:`reconciler.allocate` for the engine's decisions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from reconciler import resolve
from reconciler.model.conditions import Reason
from reconciler.model.desired import DesiredState
from reconciler.model.gpu import GpuFamily
from reconciler.model.observed import ClusterState, ManagedCluster
from reconciler.model.pools import POOL_MODE_LABEL, PoolKey
from reconciler.model.resources import ComputePool, MLPlatform

ALLOW_REPLACE_ANNOTATION = "palette.ai/allow-replace"
DELETING_STATE = ClusterState.DELETING  # Palette's status.state of a cluster on its way out


@dataclass(frozen=True, slots=True)
class Allocation:
    """The hosts of one platform's cluster. Host lists are sorted uids; ``gpus`` counts worker GPUs.

    ``replaces`` is True when the allocation is a new cluster that replaces the existing one
    (a different architecture, allowed by the ``palette.ai/allow-replace`` annotation).
    """

    control_plane: tuple[str, ...]
    workers: tuple[str, ...]
    gpus: dict[str, int]
    arch: str
    replaces: bool = False

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(sorted(self.control_plane + self.workers))


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why a platform cannot be placed, in the condition vocabulary and in words a person can act on."""

    reason: Reason
    message: str


Decision = Allocation | Rejection


@dataclass(frozen=True, slots=True)
class Requirements:
    """What one platform needs, resolved from its spec, its profiles and their precedence rules."""

    control_plane: int
    gpus: dict[GpuFamily, int]  # positive requests only, canonical family -> count
    min_workers: int
    groups: Mapping[str, str] = field(default_factory=dict)

    @property
    def requested_gpus(self) -> int:
        return sum(self.gpus.values())


def allow_replace(resource: resolve.Clustered) -> bool:
    return resource.metadata.annotations.get(ALLOW_REPLACE_ANNOTATION, "").strip().lower() == "true"


def requirements(desired: DesiredState, platform: MLPlatform) -> Requirements | Rejection:
    """Resolve a dedicated platform's needs (the rules themselves are in :mod:`reconciler.resolve`)."""
    return _needs(desired, platform)


def pool_requirements(desired: DesiredState, pool: ComputePool) -> Requirements | Rejection:
    """A pool's needs: a dedicated platform requesting the pool's ``gpus``, without limits (they apply to
    the pool's workloads), with the pool's minimum-worker precedence."""
    return _needs(desired, pool)


def _needs(desired: DesiredState, owner: MLPlatform | ComputePool) -> Requirements | Rejection:
    """The needs of a cluster's owner: its ComputeProfile (own or the Project's), the GPUs it requests,
    the profile's GPU limits (a platform's; a pool's apply to its workloads, not to the pool), and its
    minimum workers under the owner kind's precedence."""
    ns = owner.metadata.namespace
    profile = resolve.compute_profile(desired, owner)
    if profile is None:
        name = resolve.compute_profile_name(owner, desired.project(ns)) or "(from the Project)"
        return Rejection(Reason.REFERENCE_NOT_FOUND, f"ComputeProfile {name} not found in namespace {ns}")
    gpus = resolve.requested_gpus(owner)
    if isinstance(gpus, resolve.Invalid):
        return Rejection(Reason.INVALID_SPEC, gpus.message)
    workload = resolve.workload_profile(desired, owner)
    if isinstance(owner, MLPlatform):
        if breaches := resolve.limit_breaches(owner, profile):
            return Rejection(Reason.GPU_LIMIT_EXCEEDED, breaches[0].message(profile))
        min_workers = resolve.min_workers(owner, profile, workload)
    else:
        min_workers = resolve.pool_min_workers(owner, profile, workload)
    if isinstance(min_workers, resolve.Invalid):
        return Rejection(Reason.INVALID_SPEC, min_workers.message)
    return Requirements(
        control_plane=profile.spec.control_plane_defaults.node_count,
        gpus=gpus,
        min_workers=min_workers,
        groups=dict(sorted(owner.spec.resource_groups.items())),
    )


def previous_pool_mode(cluster: ManagedCluster, reported: Mapping[PoolKey, str]) -> str | None:
    """The mode a pool's cluster was made for: its ``palette.ai/pool-mode`` label, else what the caller
    reports (the status branch), else unknown (None)."""
    return cluster.labels.get(POOL_MODE_LABEL) or reported.get(cluster.key)
