"""The scaling decision's types (docs/scaling.md, "Precisely"): what :func:`reconciler.scaling.decide.decide`
reads (samples, the pool, the last action, pending demand) and what it returns, with every input kept
for :func:`reconciler.scaling.decide.replay` (pure).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from reconciler.model.gpu import GpuFamily
from reconciler.scaling.hosts import ScalingHost
from reconciler.scaling.series import Availability, Series, Window

CPU = "cpu"


class Direction(StrEnum):
    NONE = "none"
    UP = "up"
    DOWN = "down"


class ScalingReason(StrEnum):
    """The decision's reason: ``ScaledUp``, ``ScaledDown`` and ``ScalingLimited`` are docs/status-branch.md's
    vocabulary; the others say why nothing happened."""

    SCALED_UP = "ScaledUp"
    SCALED_DOWN = "ScaledDown"
    LIMITED = "ScalingLimited"
    STEADY = "Steady"
    COOLDOWN = "Cooldown"
    IN_PROGRESS = "ScalingInProgress"
    FAILED = "ScalingFailed"
    NO_CANDIDATE = "NoCandidateHost"
    WOULD_UNBIND = "WorkloadsWouldNotFit"
    QUOTA_REACHED = "QuotaReached"  # the namespace's Project gpuQuota has no room for the host


class Trigger(StrEnum):
    """What made an action happen."""

    UTILISATION_HIGH = "UtilisationHigh"
    PENDING_DEMAND = "PendingDemand"
    UTILISATION_LOW = "UtilisationLow"


PROMETHEUS_AVAILABLE = "PrometheusAvailable"  # the condition type


@dataclass(frozen=True, slots=True)
class Samples:
    """The range queries of one pass for one pool: ``None`` when the policy has no rule for the metric."""

    gpu: Series | None = None
    cpu: Series | None = None


@dataclass(frozen=True, slots=True)
class PoolView:
    """A pool as scaling sees it. ``free``: hosts that may join it; ``admitted``: GPUs admitted per family."""

    name: str
    cluster: str
    workers: tuple[ScalingHost, ...]
    free: tuple[ScalingHost, ...] = ()
    admitted: Mapping[GpuFamily, int] = field(default_factory=dict)
    min_workers: int = 0
    # GPUs per family the namespace's Project gpuQuota still allows (a family not listed: no quota)
    quota_room: Mapping[GpuFamily, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LastAction:
    """The last action, as the pool's status file remembers it (a restart keeps the cooldown).

    ``written_at``: when its Palette write succeeded. ``completed_at``: when the host had joined or left.
    ``failed_at``: when it was reported Failed (not complete by ``abortDuration``).
    """

    direction: Direction
    resource: str  # "cpu" or a canonical GPU family
    host: str
    written_at: float
    completed_at: float | None = None
    failed_at: float | None = None

    @property
    def open(self) -> bool:
        return self.completed_at is None and self.failed_at is None


@dataclass(frozen=True, slots=True)
class PendingDemand:
    """A workload pending with PoolCapacityExceeded or NoFittingLayout for ``family`` since ``since``,
    ``gpus`` short. ``per_host``: the GPUs one host must have to hold one of its replicas (a host that
    cannot hold a replica is never added for it); ``mig``: its replicas have MIG instances (the host's
    GPUs must be MIG-capable)."""

    workload: str  # namespace/name
    family: GpuFamily
    gpus: int
    since: float
    per_host: int = 0
    mig: bool = False


@dataclass(frozen=True, slots=True)
class DecisionInputs:
    """Everything a decision read; with the policy, enough to decide again (:func:`replay`)."""

    samples: Samples
    pool: PoolView
    last_action: LastAction | None
    pending: tuple[PendingDemand, ...]
    now: float
    fits: tuple[tuple[str, bool], ...]  # the fits_without answers asked, in order


@dataclass(frozen=True, slots=True)
class Decision:
    direction: Direction
    reason: ScalingReason
    message: str
    resource: str | None = None  # "cpu" or a canonical GPU family
    host: ScalingHost | None = None
    trigger: Trigger | None = None
    prometheus_available: bool = True
    metrics: Availability = Availability.AVAILABLE  # why metrics could (not) be used
    prometheus_message: str = ""
    windows: tuple[Window, ...] = ()  # every threshold window checked, in order
    evidence: Window | PendingDemand | None = None  # what triggered the action
    abort: LastAction | None = None  # set with ActionFailed: the action to record as Failed
    inputs: DecisionInputs | None = None
    upcoming: tuple[Upcoming, ...] = ()  # demand scale-ups on their way for pending workloads

    @property
    def acts(self) -> bool:
        return self.direction is not Direction.NONE

    def prometheus_condition(self) -> dict[str, str]:
        """The policy's ``PrometheusAvailable`` condition (without ``lastTransitionTime``, the shell's)."""
        return {
            "type": PROMETHEUS_AVAILABLE,
            "status": "True" if self.prometheus_available else "False",
            "reason": "MetricsAvailable" if self.prometheus_available else "PrometheusUnavailable",
            "message": self.prometheus_message,
        }


@dataclass(frozen=True, slots=True)
class Upcoming:
    """A demand scale-up on its way for a pending workload: the policy adds ``host`` if the workload is
    still pending when its ``scaleUpDuration`` window ends at ``at`` (unix seconds)."""

    workload: str  # namespace/name
    host: str
    at: float
    window: float  # scaleUpDuration, seconds
