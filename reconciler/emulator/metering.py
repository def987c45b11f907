"""What the emulator counts and meters per request: the request stats tests read
(:class:`Stats`) and Palette's rate limits per API key and path class (:class:`RateLimiter`).
"""

from __future__ import annotations

import hashlib
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from reconciler.palette.pacing import RateLimits, TokenBucket, path_class


class Stats:
    """Request counts by (method, path template, status); status 0 is a dropped connection."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[tuple[str, str, int]] = Counter()

    def record(self, method: str, template: str, status: int) -> None:
        with self._lock:
            self._counts[(method, template, status)] += 1

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()

    def count(self, method: str | None = None, path: str | None = None, status: int | None = None) -> int:
        """Requests matching the given method / template / status (None matches anything)."""
        with self._lock:
            return sum(
                n
                for (m, p, s), n in self._counts.items()
                if (method is None or m == method)
                and (path is None or p == path)
                and (status is None or s == status)
            )

    def writes(self) -> int:
        """Requests that change state: PUT/PATCH/DELETE and POSTs other than searches."""
        with self._lock:
            return sum(
                n
                for (m, p, _s), n in self._counts.items()
                if m in ("PUT", "PATCH", "DELETE") or (m == "POST" and not p.endswith("/search"))
            )

    def to_json(self) -> dict[str, Any]:
        with self._lock:
            rows = [
                {"method": m, "path": p, "status": s, "count": n}
                for (m, p, s), n in sorted(self._counts.items())
            ]
        return {"total": sum(r["count"] for r in rows), "writes": self.writes(), "requests": rows}


class RateLimiter:
    """Palette's rate limits: one token bucket per (API key, path class).

    A request may arrive ``TOLERANCE`` seconds before its token: a client that paces itself to the same
    limits sees its requests bunch up by a few milliseconds on the way, and Palette documents a burst
    queue rather than a hard edge.
    """

    TOLERANCE = 0.05

    def __init__(self, limits: RateLimits, clock: Callable[[], float]) -> None:
        self.limits = limits
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[tuple[str, str], TokenBucket] = {}

    def check(self, key: bytes, path: str) -> float | None:
        """None to serve the request; else the seconds until the caller's next token."""
        name = path_class(path)
        limit = self.limits.for_class(name)
        if limit is None:
            return None
        who = hashlib.sha256(key).hexdigest()  # the key itself is never kept
        with self._lock:
            bucket = self._buckets.get((who, name))
            if bucket is None:
                bucket = self._buckets[(who, name)] = TokenBucket(limit, self._clock)
        return bucket.try_take(self.TOLERANCE)
