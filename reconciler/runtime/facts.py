"""The values stages hand each other (frozen: a stage makes a new one, never changes the last)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconciler.inventory import Inventory
from reconciler.model.desired import DesiredState, PlatformKey
from reconciler.model.observed import ManagedCluster
from reconciler.model.outcomes import Outcome, WorkloadOutcome
from reconciler.model.pools import PoolKey, WorkloadKey
from reconciler.plan import Plan
from reconciler.resolve import Target
from reconciler.scaling.stage import ScalingOutcome
from reconciler.status.creates import CreateIntent
from reconciler.status.records import Records
from reconciler.status.snapshot import render_snapshot

__all__ = ["Applied", "Loaded", "Observation", "ObservedTarget", "Planned"]


@dataclass(frozen=True, slots=True)
class Planned:
    """The plan stage's result: one plan per Palette target, each scaled pool's outcome, and the
    records the plans were made with (checked against the observation: what the report writes)."""

    plans: Mapping[Target, Plan]
    scaling: Mapping[PoolKey, ScalingOutcome] = field(default_factory=dict)
    records: Records | None = None  # None: the records as read


@dataclass(frozen=True)
class Loaded:
    """What fetch and load made: the revision held, its desired state and the status branch's records
    (read once per pass)."""

    revision: str | None
    desired: DesiredState
    records: Records


@dataclass
class ObservedTarget:
    """One Palette target as read: machines and managed clusters (and the raw listing, for the
    status branch's inventory snapshot, rendered once per observation)."""

    inventory: Inventory
    clusters: Sequence[ManagedCluster]
    fingerprint: str
    raw_hosts: Sequence[Any] = field(default_factory=list)  # host JSON as listed
    raw_clusters: Sequence[Mapping[str, Any]] = field(default_factory=list)
    # Whether the snapshot records the catalogue's answers: not by a shard, whose bundles are its own
    # namespaces' while the target's snapshot is shared (docs/bundles.md).
    records_catalogue: bool = True
    _snapshot: bytes | None = None

    def snapshot(self) -> bytes:
        if self._snapshot is None:
            catalogue = self.inventory.catalogue if self.records_catalogue else None
            profiles = [{"uid": u, "type": t} for u, t in catalogue.types] if catalogue is not None else []
            asked = catalogue.asked if catalogue is not None else None
            self._snapshot = render_snapshot(list(self.raw_hosts), list(self.raw_clusters), profiles, asked)
        return self._snapshot


@dataclass(frozen=True)
class Observation:
    """The observe stage's result: what was read, and which targets could not be read and why."""

    observed: Mapping[Target, ObservedTarget] = field(default_factory=dict)
    failed: Mapping[Target, str] = field(default_factory=dict)  # transient: PaletteUnavailable
    stalled: Mapping[Target, str] = field(default_factory=dict)  # refused key: PaletteUnauthorized


@dataclass(frozen=True)
class Applied:
    """The apply stage's result: what Palette was asked and answered."""

    clusters: Mapping[PlatformKey, Outcome] = field(default_factory=dict)  # platform clusters
    pools: Mapping[PoolKey, Outcome] = field(default_factory=dict)
    workloads: Mapping[WorkloadKey, WorkloadOutcome] = field(default_factory=dict)
    failed_profiles: Mapping[PlatformKey, Outcome] = field(default_factory=dict)  # a workload's profiles
    at: float | None = None  # when the pool writes finished (a scaling action's cooldown runs from it)
    refused: Mapping[Target, str] = field(default_factory=dict)  # targets that refused the key meanwhile
    creates: tuple[CreateIntent, ...] | None = None  # the open create intents (None: as recorded)

    @property
    def writes(self) -> dict[PlatformKey, Outcome]:
        """Every Palette write of the pass (failed profile changes count as writes)."""
        return {**self.clusters, **self.pools, **self.failed_profiles}
