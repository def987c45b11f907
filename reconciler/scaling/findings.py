"""What one scaling decision found, carried by every :class:`Decision` it builds: whether the configured
metrics are available (and why not), and every threshold window it evaluated, in order."""

from __future__ import annotations

from reconciler.model.duration import parse_duration
from reconciler.model.scaling import ScalingPolicySpec
from reconciler.scaling.decision_types import (
    Decision,
    Direction,
    LastAction,
    PendingDemand,
    Samples,
    ScalingReason,
    Trigger,
)
from reconciler.scaling.hosts import ScalingHost
from reconciler.scaling.series import Availability, Series, Window, held


class Findings:
    """The metrics' availability for ``spec`` at ``now``, and the windows :meth:`window` evaluated;
    :meth:`decision` builds a decision with what was found so far."""

    def __init__(self, spec: ScalingPolicySpec, samples: Samples, now: float) -> None:
        self.now = now
        self.windows: list[Window] = []
        self.available, self.why, self.why_message = _availability(spec, samples, now)

    def window(self, series: Series | None, duration: str, threshold: float, above: bool) -> Window | None:
        """Whether ``series`` held above (or below) ``threshold`` for ``duration``; None without a series."""
        if series is None:
            return None
        window = held(series, self.now, parse_duration(duration), threshold, above)
        self.windows.append(window)
        return window

    def decision(
        self,
        direction: Direction,
        reason: ScalingReason,
        message: str,
        resource: str | None = None,
        host: ScalingHost | None = None,
        evidence: Window | PendingDemand | None = None,
        abort: LastAction | None = None,
        trigger: Trigger | None = None,
    ) -> Decision:
        return Decision(
            direction=direction,
            reason=reason,
            message=message,
            resource=resource,
            host=host,
            prometheus_available=self.available,
            metrics=self.why,
            prometheus_message=self.why_message,
            windows=tuple(self.windows),
            evidence=evidence,
            abort=abort,
            trigger=trigger,
        )


def _configured(spec: ScalingPolicySpec, samples: Samples) -> list[Series | None]:
    out: list[Series | None] = []
    if spec.gpu:
        out.append(samples.gpu)
    if spec.cpu is not None:
        out.append(samples.cpu)
    return out


def _availability(spec: ScalingPolicySpec, samples: Samples, now: float) -> tuple[bool, Availability, str]:
    for series in _configured(spec, samples):
        if series is None:
            return False, Availability.NO_DATA, "no range query was made for a configured metric"
        status, message = series.availability(now)
        if status is not Availability.AVAILABLE:
            return False, status, message
    return True, Availability.AVAILABLE, "metrics available"
