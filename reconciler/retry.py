"""Retry throttling as a small object over delays (kopf style), not sleeps sprinkled in loops: the
one back-off of the project (the Palette client, the status store's pushes after a lost race, and
the loop after a failed pass).

Exponential backoff with full jitter (AWS architecture blog, "Exponential Backoff And Jitter"): the n-th
delay is uniform in ``[0, min(max_delay, base_delay * 2**n)]``, which spreads synchronized clients apart.
A server's ``Retry-After`` replaces the jittered delay. Retries stop when either the attempt budget or the
total time budget would be exceeded, so every call ends within a known bound.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long a client retries a failed call. ``sleep``, ``rng`` and ``clock`` are
    injectable so tests run without waiting."""

    max_attempts: int = 5
    base_delay: float = 0.5
    max_delay: float = 8.0
    total_timeout: float = 30.0
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random = field(default_factory=random.Random)
    clock: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.base_delay < 0 or self.max_delay < 0 or self.total_timeout < 0:
            raise ValueError("delays and timeouts must not be negative")

    def backoff(self) -> Backoff:
        """A fresh throttle for one logical call."""
        return Backoff(self)


class Backoff:
    """The retry state of one call: attempts made, time spent, the next delay."""

    def __init__(self, policy: RetryPolicy) -> None:
        self._policy = policy
        self._started = policy.clock()
        self.attempts = 0

    def elapsed(self) -> float:
        return self._policy.clock() - self._started

    def remaining(self) -> float:
        """Seconds left of the total budget (negative once it is spent)."""
        return self._policy.total_timeout - self.elapsed()

    def next_delay(self, retry_after: float | None = None) -> float | None:
        """Record a failed attempt; return how long to wait before the next one, or None to give up."""
        policy = self._policy
        self.attempts += 1
        if self.attempts >= policy.max_attempts:
            return None
        if retry_after is not None:
            # The server knows best; if its wait does not fit the time budget we give up below.
            delay = max(retry_after, 0.0)
        else:
            ceiling = min(policy.max_delay, policy.base_delay * (2 ** (self.attempts - 1)))
            delay = policy.rng.uniform(0.0, ceiling)
        if self.elapsed() + delay > policy.total_timeout:
            return None
        return delay

    def wait(self, delay: float) -> None:
        self._policy.sleep(delay)
