"""Utilisation series and the one rule about them: when a threshold is held over a window.

A :class:`Series` is what one Prometheus range query said about one metric of one pool (or why it said
nothing). It is plain data, so a decision can be recorded and replayed without Prometheus.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from reconciler.model.duration import format_duration

# Prometheus timestamps are milliseconds; grid points are compared at that resolution.
_MS = 1000.0


class Metric(StrEnum):
    GPU = "gpu"
    CPU = "cpu"


class Availability(StrEnum):
    """Whether a pass's metrics can be used, and if not why. Any but ``AVAILABLE`` makes the condition
    ``PrometheusAvailable=False`` with reason ``PrometheusUnavailable`` (docs/status-branch.md's vocabulary);
    the cause is in its message."""

    AVAILABLE = "Available"
    UNREACHABLE = "Unreachable"  # connection refused, timeout, HTTP or query error
    NO_DATA = "NoData"  # the query matched nothing
    STALE = "Stale"  # no value at the latest step


@dataclass(frozen=True, slots=True)
class Series:
    """A range query's answer: ``points`` are ``(unix seconds, value)`` at the query's steps, ascending.

    ``error`` says why there is no answer (Prometheus unreachable, timed out, refused the query);
    then ``points`` is empty. ``query`` is the PromQL as sent (``$cluster`` already replaced).
    """

    metric: Metric
    query: str
    start: float
    end: float
    step: float
    points: tuple[tuple[float, float], ...] = ()
    error: str | None = None

    def availability(self, now: float) -> tuple[Availability, str]:
        """Whether the series can be trusted at ``now``, with the reason's message."""
        if self.error is not None:
            return Availability.UNREACHABLE, f"{self.metric} query failed: {self.error}"
        if not self.points:
            return Availability.NO_DATA, f"{self.metric} query returned no samples: {self.query}"
        latest = self.points[-1][0]
        if _ms(latest) < _ms(now - self.step):
            age = format_duration(round(now - latest, 3))
            return Availability.STALE, f"{self.metric} metrics are stale: the latest sample is {age} old"
        return Availability.AVAILABLE, f"{self.metric} metrics available"


@dataclass(frozen=True, slots=True)
class Window:
    """A threshold checked over ``[end - duration, end]`` at ``step``: what was used and what it showed."""

    metric: Metric
    query: str
    start: float
    end: float
    step: float
    expected: int  # grid points in the window
    values: tuple[float, ...]  # the values found at those points, in time order
    held: bool

    @property
    def duration(self) -> float:
        return self.end - self.start

    @property
    def mean(self) -> float:
        return sum(self.values) / len(self.values) if self.values else math.nan


def grid(end: float, duration: float, step: float) -> list[float]:
    """The step timestamps of ``[end - duration, end]``, anchored at ``end``, ascending."""
    count = math.floor(duration / step + 1e-9)
    return [end - k * step for k in range(count, -1, -1)]


def held(series: Series, now: float, duration: float, threshold: float, above: bool) -> Window:
    """Is every value of the last ``duration`` beyond ``threshold``? A missing step means not held.

    ``above`` True checks ``value > threshold`` (scale up), False ``value < threshold`` (scale down).
    NaN (Prometheus's answer for a division by zero, say) counts as missing.
    """
    points = grid(now, duration, series.step)
    by_time = {_ms(t): v for t, v in series.points}
    values: list[float] = []
    for t in points:
        value = by_time.get(_ms(t))
        if value is not None and not math.isnan(value):
            values.append(value)
    complete = len(values) == len(points) and series.error is None
    beyond = all(v > threshold for v in values) if above else all(v < threshold for v in values)
    return Window(
        metric=series.metric,
        query=series.query,
        start=points[0],
        end=now,
        step=series.step,
        expected=len(points),
        values=tuple(values),
        held=complete and beyond,
    )


def _ms(t: float) -> int:
    return round(t * _MS)
