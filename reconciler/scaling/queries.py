"""The range queries one pass makes for one pool: at most one per metric, over the longest window."""

from __future__ import annotations

import math
from dataclasses import dataclass

from reconciler.model.duration import parse_duration
from reconciler.model.scaling import ScalingPolicySpec
from reconciler.scaling.series import Metric, Series


@dataclass(frozen=True, slots=True)
class RangeQuery:
    """``query`` over ``[start, end]`` at ``step`` seconds; ``start`` lies on ``end``'s step grid."""

    metric: Metric
    query: str
    start: float
    end: float
    step: float

    def answer(self, points: tuple[tuple[float, float], ...] = (), error: str | None = None) -> Series:
        return Series(self.metric, self.query, self.start, self.end, self.step, points, error)


def render_query(template: str, cluster: str) -> str:
    """``$cluster`` -> the pool cluster's name, quoted for a PromQL string (it is a DNS label anyway)."""
    return template.replace("$cluster", cluster.replace("\\", "\\\\").replace('"', '\\"'))


def range_queries(spec: ScalingPolicySpec, cluster: str, now: float) -> list[RangeQuery]:
    """GPU then CPU, each over its longest scale window ending at ``now`` (whole milliseconds)."""
    step = parse_duration(spec.metrics.step)
    end = round(now, 3)
    out: list[RangeQuery] = []
    plans: list[tuple[Metric, str, list[str]]] = []
    if spec.gpu:
        durations = [d for rule in spec.gpu for d in (rule.scale_up_duration, rule.scale_down_duration)]
        plans.append((Metric.GPU, spec.metrics.gpu_query, durations))
    if spec.cpu is not None:
        plans.append(
            (Metric.CPU, spec.metrics.cpu_query, [spec.cpu.scale_up_duration, spec.cpu.scale_down_duration])
        )
    for metric, template, durations in plans:
        longest = max(parse_duration(d) for d in durations)
        start = end - math.floor(longest / step + 1e-9) * step
        out.append(RangeQuery(metric, render_query(template, cluster), round(start, 3), end, step))
    return out
