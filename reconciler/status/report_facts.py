"""What one pass knows when it reports (the input of ``status/report.py``; pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from reconciler.inventory import HostState, Inventory, Machine
from reconciler.model.conditions import Reason
from reconciler.model.desired import DesiredState, PlatformKey
from reconciler.model.observed import ManagedCluster
from reconciler.model.outcomes import Outcome, WorkloadOutcome
from reconciler.model.pools import PoolKey, WorkloadKey
from reconciler.plan import Plan, PlatformPlan
from reconciler.resolve import Routing, Target
from reconciler.scaling.stage import ScalingOutcome
from reconciler.status.creates import CreateIntent

Cut = tuple[Reason, str]


class ObservedTarget(Protocol):
    """What the pass read of one Palette target."""

    @property
    def inventory(self) -> Inventory: ...

    @property
    def clusters(self) -> Sequence[ManagedCluster]: ...

    @property
    def raw_clusters(self) -> Sequence[Mapping[str, Any]]: ...

    def snapshot(self) -> bytes: ...


@dataclass(frozen=True)
class ReportFacts:
    """Everything one pass knows when it reports."""

    desired: DesiredState
    revision: str | None
    branch: str  # the config branch followed
    routing: Routing
    plans: Mapping[Target, Plan]
    observed: Mapping[Target, ObservedTarget]
    now: str  # the status timestamp of this pass (conditions that change now)
    failed: Mapping[Target, str] = field(default_factory=dict)  # transient: PaletteUnavailable
    stalled: Mapping[Target, str] = field(default_factory=dict)  # refused key: PaletteUnauthorized
    outcomes: Mapping[PlatformKey, Outcome] = field(default_factory=dict)  # platform writes
    pools: Mapping[PoolKey, Outcome] = field(default_factory=dict)  # pool cluster writes
    workloads: Mapping[WorkloadKey, WorkloadOutcome] | None = None  # None: profiles not touched
    scaling: Mapping[PoolKey, ScalingOutcome] = field(default_factory=dict)
    applied_at: float | None = None  # when the pool writes finished (a scaling cooldown runs from it)
    stopped: bool = False  # a stop request cut apply short: entries not started keep their files
    palette: str | None = None  # run --palette URL (recorded so that plan --from-status routes alike)
    creates: tuple[CreateIntent, ...] | None = None  # open create intents (None: the recorded ones)

    @property
    def platforms(self) -> list[PlatformPlan]:
        return [p for plan in self.plans.values() for p in plan.platforms]


def unhealthy(hosts: Sequence[str], machines: Mapping[str, Machine]) -> list[str]:
    return [h for h in hosts if h in machines and machines[h].state is HostState.UNAVAILABLE]
