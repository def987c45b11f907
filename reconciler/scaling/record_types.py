"""The types of a pool's scaling record (``status.scaling``, the block ``scaling.record`` describes): the
recorded action, its inputs, the write-ahead intent and the block itself, with the intent's two steps
(``with_intent`` records it, ``adopt`` reads it back as done). Pure; ``scaling.record`` re-exports every
name."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from reconciler.model.gpu import GpuFamily, canonical_family
from reconciler.scaling.decision_types import CPU, Direction, LastAction, PendingDemand
from reconciler.scaling.series import Window

# The plan's decision words: none = no policy; hold = a policy that did not act.
DECISION_NONE, DECISION_UP, DECISION_DOWN, DECISION_HOLD = "none", "up", "down", "hold"

_TRIGGERS = ("UtilisationHigh", "UtilisationLow", "PendingDemand")


class ScalingStatusError(ValueError):
    """The recorded block is not what this module writes; the message names the field."""


@dataclass(frozen=True, slots=True)
class ActionInputs:
    """What an action's decision read: a utilisation window, or the pending workload (demand)."""

    query: str | None = None
    start: float | None = None
    end: float | None = None
    step: float | None = None
    samples: int = 0
    expected: int = 0
    values: tuple[float, ...] = ()
    pending: PendingDemand | None = None

    @classmethod
    def of(cls, evidence: Window | PendingDemand | None) -> ActionInputs | None:
        if isinstance(evidence, Window):
            return cls(
                evidence.query,
                evidence.start,
                evidence.end,
                evidence.step,
                len(evidence.values),
                evidence.expected,
                evidence.values,
            )
        if isinstance(evidence, PendingDemand):
            return cls(pending=evidence)
        return None


@dataclass(frozen=True, slots=True)
class RecordedAction:
    """One scaling action as the status file keeps it."""

    direction: Direction  # UP or DOWN
    family: str  # what scaled: a canonical GPU family, or "cpu"
    hosts: tuple[str, ...]
    gpus: int
    at: float  # when its Palette write succeeded
    cpus: int = 0
    trigger: str | None = None
    message: str = ""
    completed_at: float | None = None
    failed_at: float | None = None
    failed_message: str = ""
    inputs: ActionInputs | None = None
    gpu_family: GpuFamily | None = None  # a cpu action on a GPU host: the family of its GPUs

    @property
    def failed(self) -> bool:
        return self.failed_at is not None

    def delta(self) -> dict[GpuFamily, int]:
        """What it changed the size by (nothing once failed, nothing for a GPU-less host)."""
        family = self.gpu_family or (None if self.family == CPU else canonical_family(self.family))
        if self.failed or family is None or self.gpus == 0:
            return {}
        return {family: self.gpus if self.direction is Direction.UP else -self.gpus}

    def last_action(self) -> LastAction:
        """The decision's view of it (one host per action)."""
        return LastAction(
            self.direction,
            self.family,
            self.hosts[0] if self.hosts else "",
            self.at,
            self.completed_at,
            self.failed_at,
        )


@dataclass(frozen=True, slots=True)
class ScalingStatus:
    """``status.scaling`` of a pool (see the module docstring)."""

    policy: str
    size: Mapping[str, int] = field(default_factory=dict)
    earlier: Mapping[str, int] = field(default_factory=dict)
    last_action: RecordedAction | None = None
    decision: str = DECISION_HOLD
    reason: str = ""
    message: str = ""
    prometheus_available: bool = True
    prometheus_reason: str = "MetricsAvailable"
    prometheus_message: str = ""
    intent: Intent | None = None  # write-ahead: an action about to be written to Palette

    def last(self) -> LastAction | None:
        return self.last_action.last_action() if self.last_action is not None else None

    def adjustment(self) -> dict[GpuFamily, int]:
        """Net GPUs per family of every counted action (failed ones are not counted)."""
        total: dict[GpuFamily, int] = {canonical_family(f): n for f, n in self.earlier.items()}
        if self.last_action is not None:
            for family, n in self.last_action.delta().items():
                total[family] = total.get(family, 0) + n
        return {f: n for f, n in sorted(total.items()) if n}


@dataclass(frozen=True, slots=True)
class Intent:
    """An action recorded before its Palette write: the action (``at``: when it was recorded), the
    pool's size before it and the size it makes."""

    action: RecordedAction
    before: Mapping[str, int]
    after: Mapping[str, int]


def with_intent(
    previous: ScalingStatus | None,
    policy: str,
    action: RecordedAction,
    before: Mapping[GpuFamily, int],
    after: Mapping[GpuFamily, int],
    at: float,
) -> ScalingStatus:
    """The block to record before ``action`` is written to Palette at ``at``: the block as it is (a
    fresh one under ``policy`` when there is none) with the intent added."""
    base = previous if previous is not None else ScalingStatus(policy)
    intent = Intent(replace(action, at=at), _counts(before), _counts(after))
    return replace(base, intent=intent)


def _counts(size: Mapping[GpuFamily, int]) -> dict[str, int]:
    return {str(f): n for f, n in sorted(size.items())}


def adopt(status: ScalingStatus) -> ScalingStatus:
    """A block with an intent, read as if its action were done (see the module docstring): the intended
    action becomes the last action (the one before it folds into ``earlierActions``), the size is the
    intent's ``to`` and the intent is gone. A block without one is returned as it is."""
    intent = status.intent
    if intent is None:
        return status
    earlier = dict(status.earlier)
    if status.last_action is not None:
        for family, n in status.last_action.delta().items():
            earlier[family] = earlier.get(family, 0) + n
    return replace(
        status,
        earlier={f: n for f, n in sorted(earlier.items()) if n},
        last_action=intent.action,
        size=dict(intent.after),
        intent=None,
    )
