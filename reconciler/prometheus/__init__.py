"""Prometheus's HTTP API (``/api/v1/query_range``): the one input of scaling that is not git or Palette.

Only this package talks to Prometheus; it turns answers into :class:`reconciler.scaling.Series`.
"""

from reconciler.prometheus.client import (
    PrometheusClient,
    PrometheusError,
    PrometheusQueryError,
    PrometheusUnavailable,
    RangeResult,
    RangeSeries,
    bearer_token,
)
from reconciler.prometheus.observe import observe_pool
from reconciler.prometheus.stage import ScalingStage

__all__ = [
    "PrometheusClient",
    "PrometheusError",
    "PrometheusQueryError",
    "PrometheusUnavailable",
    "RangeResult",
    "RangeSeries",
    "ScalingStage",
    "bearer_token",
    "observe_pool",
]
