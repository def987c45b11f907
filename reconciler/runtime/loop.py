"""The loop: pass after pass until stopped, with one back-off (``reconciler.retry``).

Git is checked every ``interval`` (with jitter) or at once on a webhook; Palette is re-read every
``resync_interval`` (longer when idle passes would use more than a quarter of Palette's
``/v1/dashboard`` budget); after a transient error the next pass waits an exponentially growing,
jittered delay (capped by ``max_backoff`` and the interval).
"""

from __future__ import annotations

import math
import random
import sys
import threading
from collections.abc import Callable
from typing import Protocol

from reconciler.metrics import PassOutcome
from reconciler.palette.pacing import resync_interval
from reconciler.retry import RetryPolicy
from reconciler.runtime.clock import Clock
from reconciler.runtime.options import ControllerOptions
from reconciler.runtime.outcome import PassResult


class Passes(Protocol):
    """What the loop drives: passes, a stop flag and a wake-up."""

    stopping: threading.Event
    wake: threading.Event
    clock: Clock

    def reconcile_once(self, *, check_source: bool = True) -> PassResult: ...

    def dashboard_requests(self) -> int: ...


def backoff_policy(options: ControllerOptions) -> RetryPolicy:
    """Retries without end (the loop keeps going), from 2 s doubling up to the interval."""
    cap = max(2.0, min(options.max_backoff, options.interval))
    return RetryPolicy(max_attempts=sys.maxsize, base_delay=2.0, max_delay=cap, total_timeout=math.inf)


def run_forever(
    passes: Passes, options: ControllerOptions, on_pass: Callable[[PassResult], None] | None = None
) -> None:
    """Pass after pass until ``passes.stopping`` is set."""
    policy = backoff_policy(options)
    backoff = policy.backoff()
    next_source = 0.0
    force = True
    while not passes.stopping.is_set():
        now = passes.clock.monotonic()
        check_source = force or now >= next_source
        if check_source:
            next_source = now + options.interval * (1 + random.uniform(-options.jitter, options.jitter))
        result = passes.reconcile_once(check_source=check_source)
        if on_pass is not None:
            on_pass(result)
        if result.outcome is PassOutcome.ERROR:
            delay = backoff.next_delay() or policy.max_delay
        else:
            backoff = policy.backoff()
            resync = resync_interval(
                passes.dashboard_requests(),
                floor=options.resync_interval,
                limit=options.palette_rate_limits.dashboard,
            )
            delay = max(0.0, min(resync, next_source - passes.clock.monotonic()))
        force = passes.wake.wait(delay)
        passes.wake.clear()
