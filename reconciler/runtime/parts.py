"""What a pipeline is made of: the stages' ports and the shell's services, built by ``runtime/wiring.py``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from reconciler.metrics import Metrics
from reconciler.runtime.branch import StatusBranch
from reconciler.runtime.clock import Clock
from reconciler.runtime.lease import Lease
from reconciler.runtime.options import ControllerOptions
from reconciler.runtime.ports import History, Source
from reconciler.runtime.stages import observe
from reconciler.scaling.stage import SampleSource


@dataclass
class Parts:
    """What a pipeline is made of (``runtime/wiring.py`` builds them)."""

    options: ControllerOptions
    source: Source
    history: History | None  # None: a directory read as it is on disk
    status: StatusBranch
    observer: observe.Observer
    samples: SampleSource
    metrics: Metrics
    lease: Lease
    clock: Clock
    close: Callable[[], None]  # releases what the parts hold (git caches, clients)
