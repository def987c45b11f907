"""Go/Kubernetes duration strings (``30s``, ``5m``, ``1h30m``, ``1.5h``): one parser, one formatter.

The grammar is Go's ``time.ParseDuration`` (what ``metav1.Duration`` uses): an optional sign and one or
more decimal numbers, each with a unit ``ns``, ``us`` (or ``µs``), ``ms``, ``s``, ``m``, ``h``; ``0``
alone is zero. Formatting follows Go's ``Duration.String`` (``300s`` -> ``5m0s``), the spelling the
status sentences use.
"""

from __future__ import annotations

import re
from functools import lru_cache

_UNITS: dict[str, float] = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
DURATION_PATTERN = r"^[-+]?((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+$|^0$"
DURATION_HINT = "must be a Go duration such as 30s, 5m or 1h30m"


@lru_cache(maxsize=1024)
def parse_duration(text: str) -> float:
    """Seconds in ``text``; ValueError (with :data:`DURATION_HINT`) when it is not a Go duration."""
    body = text.strip()
    sign = -1.0 if body.startswith("-") else 1.0
    body = body.lstrip("+-") if body[:1] in "+-" else body
    if body == "0":
        return 0.0
    total, pos = 0.0, 0
    for match in _PART.finditer(body):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if pos == 0 or pos != len(body):
        raise ValueError(DURATION_HINT)
    return sign * total


def format_duration(seconds: float) -> str:
    """Go's ``Duration.String``: ``5m0s``, ``1h30m0s``, ``15s``, ``1.5s``, ``0s``."""
    if seconds == 0:
        return "0s"
    sign = "-" if seconds < 0 else ""
    rest = abs(seconds)
    if rest < 1:
        for unit, size in (("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
            if rest >= size:
                return f"{sign}{_trim(rest / size)}{unit}"
        return f"{sign}{_trim(rest / 1e-9)}ns"
    hours, rest = divmod(rest, 3600.0)
    minutes, secs = divmod(rest, 60.0)
    out = f"{int(hours)}h" if hours else ""
    if hours or minutes:
        out += f"{int(minutes)}m"
    return f"{sign}{out}{_trim(secs)}s"


def _trim(value: float) -> str:
    text = f"{value:.9f}".rstrip("0").rstrip(".")
    return text or "0"
