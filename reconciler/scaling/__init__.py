"""Scaling policies' decisions (DESIGN.md section 11): pure, replayable, one host per action.

The shell fetches utilisation (``reconciler.prometheus.observe``), describes the pool, and calls
:func:`decide`; everything the decision used is recorded in it, so :func:`replay` repeats it.
"""

from reconciler.scaling.decide import (
    PROMETHEUS_AVAILABLE,
    Decision,
    DecisionInputs,
    Direction,
    LastAction,
    PendingDemand,
    PoolView,
    Samples,
    ScalingReason,
    Trigger,
    commit_message,
    decide,
    replay,
    sentence,
)
from reconciler.scaling.hosts import (
    ScalingHost,
    cpu_host_to_add,
    cpu_host_to_remove,
    gpu_host_to_add,
    gpu_host_to_remove,
)
from reconciler.scaling.series import Availability, Metric, Series, Window, grid, held

__all__ = [
    "PROMETHEUS_AVAILABLE",
    "Availability",
    "Decision",
    "DecisionInputs",
    "Direction",
    "LastAction",
    "Metric",
    "PendingDemand",
    "PoolView",
    "Samples",
    "ScalingHost",
    "ScalingReason",
    "Series",
    "Trigger",
    "Window",
    "commit_message",
    "cpu_host_to_add",
    "cpu_host_to_remove",
    "decide",
    "gpu_host_to_add",
    "gpu_host_to_remove",
    "grid",
    "held",
    "replay",
    "sentence",
]
