"""The one clock of a pass (injected, so tests pin time; nothing reads the wall clock mid-decision).

``time()`` is unix seconds: scaling cooldowns, how long a workload has waited, the timestamps of status
conditions (:func:`utc_stamp`). ``monotonic()`` measures how long passes have been failing (health) and
schedules the loop.
"""

from __future__ import annotations

import time as _time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def time(self) -> float: ...

    def monotonic(self) -> float: ...


class SystemClock:
    """The machine's clock."""

    def time(self) -> float:
        return _time.time()

    def monotonic(self) -> float:
        return _time.monotonic()


SYSTEM_CLOCK = SystemClock()


def utc_stamp(at: float) -> str:
    """``at`` (unix seconds) as a status file's timestamp, to the second: ``2026-01-10T10:00:00Z``."""
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
