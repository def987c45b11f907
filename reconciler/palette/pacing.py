"""Palette's rate limits, as token buckets (docs/palette.md), and the resync rule derived from them.

Palette documents its limits per parent path prefix: 10 requests/s with a burst of 5 on ``/v1/dashboard``
(every search, so every inventory read) and 50 requests/s on ``/v1/spectroclusters`` and the other
resources. The client takes a token before each request instead of leaning on 429 retries; the emulator
enforces the same :class:`RateLimits` (it answers 429 when a bucket is empty). Nothing here does I/O: the
clock is injected, and waiting is the caller's business (:meth:`TokenBucket.reserve` says how long).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

DASHBOARD = "dashboard"
OTHER = "other"

Clock = Callable[[], float]


def path_class(path: str) -> str:
    """The rate-limit class of a request path: ``dashboard`` for ``/v1/dashboard/...``, else ``other``."""
    return DASHBOARD if path == "/v1/dashboard" or path.startswith("/v1/dashboard/") else OTHER


@dataclass(frozen=True)
class Limit:
    """A sustained ``rate`` (requests per second) and a ``burst`` (the bucket's size, in requests)."""

    rate: float
    burst: int

    def __post_init__(self) -> None:
        if not self.rate > 0 or self.burst < 1:
            raise ValueError("a rate limit needs a positive rate and a burst of at least 1")


@dataclass(frozen=True)
class RateLimits:
    """Limits per path class; ``None`` for a class means unlimited. ``RateLimits.off()`` turns them off."""

    dashboard: Limit | None = Limit(10.0, 5)
    other: Limit | None = Limit(50.0, 5)

    @classmethod
    def palette(cls) -> RateLimits:
        """Palette's documented limits."""
        return cls()

    @classmethod
    def off(cls) -> RateLimits:
        return cls(None, None)

    @classmethod
    def parse(cls, text: str) -> RateLimits:
        """``palette`` or ``off`` (the emulator's ``--rate-limits``)."""
        if text == "palette":
            return cls.palette()
        if text == "off":
            return cls.off()
        raise ValueError(f"rate limits are 'palette' or 'off', not {text!r}")

    def for_class(self, name: str) -> Limit | None:
        return self.dashboard if name == DASHBOARD else self.other


class TokenBucket:
    """A thread-safe token bucket over an injected clock.

    :meth:`reserve` takes a token now if there is one, else books the next one and returns how long to
    wait for it; bookings queue in order, so threads sharing a bucket are served first come, first served
    and never together exceed the rate.
    """

    def __init__(self, limit: Limit, clock: Clock = time.monotonic) -> None:
        self.limit = limit
        self._clock = clock
        self._lock = threading.Lock()
        self._tokens = float(limit.burst)
        self._stamp = clock()

    def _refill(self, now: float) -> None:
        elapsed = max(now - self._stamp, 0.0)
        self._tokens = min(float(self.limit.burst), self._tokens + elapsed * self.limit.rate)
        self._stamp = now

    def reserve(self) -> float:
        """Take one token; the seconds to wait before using it (0 when one was available)."""
        with self._lock:
            now = self._clock()
            self._refill(now)
            self._tokens -= 1.0
            return 0.0 if self._tokens >= 0 else -self._tokens / self.limit.rate

    def try_take(self, tolerance: float = 0.0) -> float | None:
        """Take a token if one is available (``tolerance`` seconds early is still fine); else take
        nothing and return the seconds until one will be (what a server puts in ``Retry-After``)."""
        with self._lock:
            now = self._clock()
            self._refill(now)
            if self._tokens + tolerance * self.limit.rate >= 1.0:
                self._tokens -= 1.0
                return None
            return (1.0 - self._tokens) / self.limit.rate


@dataclass
class Pacer:
    """One bucket per path class of :class:`RateLimits`, and the time spent waiting on them."""

    limits: RateLimits = field(default_factory=RateLimits.palette)
    clock: Clock = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    waited: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._buckets: dict[str, TokenBucket] = {}
        for name in (DASHBOARD, OTHER):
            limit = self.limits.for_class(name)
            if limit is not None:
                self._buckets[name] = TokenBucket(limit, self.clock)

    def acquire(self, path: str) -> float:
        """Wait for a token of ``path``'s class; returns the seconds waited."""
        name = path_class(path)
        bucket = self._buckets.get(name)
        if bucket is None:
            return 0.0
        delay = bucket.reserve()
        if delay > 0:
            self.sleep(delay)
            with self._lock:
                self.waited[name] = self.waited.get(name, 0.0) + delay
        return delay


def resync_interval(
    requests_per_pass: float,
    *,
    floor: float,
    limit: Limit | None = RateLimits().dashboard,
    share: float = 0.25,
) -> float:
    """The shortest resync interval at which idle passes use at most ``share`` of a class's budget.

    ``requests_per_pass / (share * rate)``, never below ``floor`` (the configured resync). A pass that
    takes 15 ``/v1/dashboard`` requests may run every 6 s within a quarter of 10 requests/s; one that
    takes 200 needs 80 s. Without a limit the floor is the answer.
    """
    if limit is None or requests_per_pass <= 0:
        return floor
    if not 0 < share <= 1:
        raise ValueError("share must be in (0, 1]")
    needed = requests_per_pass / (share * limit.rate)
    return max(floor, math.ceil(needed * 10) / 10)
