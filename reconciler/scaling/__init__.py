"""Scaling policies' decisions (docs/scaling.md): pure, replayable, one host per action.

The shell fetches utilisation (``reconciler.prometheus.observe``), describes the pool, and calls
:func:`decide`; everything the decision used is recorded in it, so :func:`replay` repeats it.
``record`` is the pool status's ``scaling`` block and the size it implies; ``pools`` (imported on its
own: it reads plans) turns a pass's plan into the decision's inputs.
"""

from reconciler.scaling.decide import decide, replay
from reconciler.scaling.decision_types import (
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
)
from reconciler.scaling.explain import commit_message, sentence
from reconciler.scaling.hosts import (
    ScalingHost,
    cpu_host_to_add,
    cpu_host_to_remove,
    gpu_host_to_add,
    gpu_host_to_remove,
)
from reconciler.scaling.record import current_size
from reconciler.scaling.record_types import RecordedAction, ScalingStatus, ScalingStatusError
from reconciler.scaling.record_yaml import parse, render
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
    "RecordedAction",
    "Samples",
    "ScalingHost",
    "ScalingReason",
    "ScalingStatus",
    "ScalingStatusError",
    "Series",
    "Trigger",
    "Window",
    "commit_message",
    "cpu_host_to_add",
    "cpu_host_to_remove",
    "current_size",
    "decide",
    "gpu_host_to_add",
    "gpu_host_to_remove",
    "grid",
    "held",
    "parse",
    "render",
    "replay",
    "sentence",
]
