"""The reconciler of one config repository branch: the names its users import.

A pass is the pipeline of ``reconciler/runtime/`` (fetch -> load -> observe -> plan -> apply -> report,
one stage function each, composed by ``runtime/pipeline.py``); ``runtime/wiring.py`` builds it from
options. ``Controller(options, ...)`` is that pipeline, built.
"""

from __future__ import annotations

from collections.abc import Mapping

from reconciler.metrics import Metrics
from reconciler.resolve import Target
from reconciler.runtime.clock import Clock
from reconciler.runtime.lease import Lease
from reconciler.runtime.options import ControllerOptions, KeyRef
from reconciler.runtime.outcome import MAX_RESTARTS, PassResult
from reconciler.runtime.pipeline import Pipeline
from reconciler.runtime.stages.observe import ClientFactory
from reconciler.runtime.wiring import parts

__all__ = ["MAX_RESTARTS", "Controller", "ControllerOptions", "KeyRef", "PassResult", "Target"]


class Controller(Pipeline):
    """A :class:`Pipeline` built from ``options`` (what tests and commands construct)."""

    def __init__(
        self,
        options: ControllerOptions,
        *,
        metrics: Metrics | None = None,
        environ: Mapping[str, str] | None = None,
        client_factory: ClientFactory | None = None,
        lease: Lease | None = None,
        clock: Clock | None = None,
    ) -> None:
        super().__init__(
            parts(
                options,
                metrics=metrics,
                environ=environ,
                client_factory=client_factory,
                lease=lease,
                clock=clock,
            )
        )
