"""One pool's utilisation for one pass: the policy's range queries, answers as scaling ``Series``."""

from __future__ import annotations

from reconciler.model.scaling import ScalingPolicySpec
from reconciler.prometheus.client import PrometheusClient, PrometheusError
from reconciler.scaling.decision_types import Samples
from reconciler.scaling.queries import RangeQuery, range_queries
from reconciler.scaling.series import Metric, Series


def observe_pool(client: PrometheusClient, spec: ScalingPolicySpec, cluster: str, now: float) -> Samples:
    """At most one range query per metric the policy has a rule for; failures become ``Series.error``."""
    answers = {q.metric: _ask(client, q) for q in range_queries(spec, cluster, now)}
    return Samples(gpu=answers.get(Metric.GPU), cpu=answers.get(Metric.CPU))


def _ask(client: PrometheusClient, query: RangeQuery) -> Series:
    try:
        result = client.query_range(query.query, query.start, query.end, query.step)
    except PrometheusError as exc:
        return query.answer(error=str(exc))
    if len(result.series) > 1:
        return query.answer(
            error=f"the query returned {len(result.series)} series; it must return one (aggregate it)"
        )
    points = result.series[0].points if result.series else ()
    return query.answer(points)
