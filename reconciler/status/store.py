"""The status branch's rules, without git: which files a writer owns, where a shard's record lives, the
shape of a status commit's message, and the back-off after a lost push race (pure).

The git side - the private repository, commits built with plumbing, compare-and-swap pushes, reads
that cost one ``ls-remote`` when nothing moved - is :mod:`reconciler.source.status_store`
(``StatusStore``, ``StatusError``, ``StatusConflict``) and :mod:`reconciler.source.status_shard`
(``ShardStatusStore``); docs/status-branch.md.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from reconciler.resolve import NamespaceSelector
from reconciler.retry import RetryPolicy
from reconciler.status.render import is_status_path

_TRAILER_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*$")
RECORD_FILE = "reconciler.yaml"  # the root record of an unsharded instance (docs/status-branch.md)
SHARDS_DIR = "shards"
INVENTORY_DIR = "inventory"
MAX_BODY_LINES = 200  # lines of a status commit's body; the rest is counted, not listed

__all__ = [
    "INVENTORY_DIR",
    "MAX_BODY_LINES",
    "RECORD_FILE",
    "SHARDS_DIR",
    "cap_body",
    "format_message",
    "push_retry",
    "reconciler_owns",
    "shard_owns",
    "shard_record_path",
]


def reconciler_owns(path: str) -> bool:
    """The files an unsharded reconciler writes, and removes when no longer due: ``reconciler.yaml``,
    ``inventory/<target>.json`` and the resource files (:func:`reconciler.status.render.is_status_path`).
    Anything else on the branch (a shard's record, a note someone added) is another writer's: kept."""
    if path == RECORD_FILE:
        return True
    first, _, rest = path.partition("/")
    if first == INVENTORY_DIR:
        return "/" not in rest and rest.endswith(".json")
    return is_status_path(path)


def push_retry(max_attempts: int = 8, base_delay: float = 0.02, **injected: Any) -> RetryPolicy:
    """The store's back-off after a lost push race (the project's one :class:`RetryPolicy`): at most
    ``max_attempts`` pushes per write, waits of "full jitter" up to ``base_delay``, doubling to at most
    8 x ``base_delay``, and no time budget (the attempts bound it). Random, so that two writers that just
    collided do not collide again. ``injected`` passes ``sleep``, ``rng`` or ``clock`` (tests)."""
    return RetryPolicy(
        max_attempts=max(1, max_attempts),
        base_delay=max(0.0, base_delay),
        max_delay=8 * max(0.0, base_delay),
        total_timeout=math.inf,
        **injected,
    )


def cap_body(message: str, limit: int = MAX_BODY_LINES) -> str:
    """``message`` with its body cut to ``limit`` lines; the last line counts the lines left out (the
    status files carry the detail, and ``git log -- <file>`` shows each one's history)."""
    subject, _, body = message.strip().partition("\n")
    lines = body.strip("\n").split("\n")
    if len(lines) <= limit:
        return message.strip()
    left = sum(1 for line in lines[limit:] if line.strip())
    kept = "\n".join(lines[:limit]).rstrip("\n")
    return f"{subject}\n\n{kept}\n... and {left:,} more; the files carry the detail"


def format_message(message: str, trailers: Mapping[str, str]) -> str:
    """``message`` (its body capped by :func:`cap_body`) with ``Key: value`` trailers appended as git's
    trailer block (one blank line before)."""
    lines = []
    for key, value in trailers.items():
        if not _TRAILER_KEY.match(key):
            raise ValueError(f"invalid trailer key {key!r}")
        if "\n" in value or "\r" in value:
            raise ValueError(f"trailer {key} must be one line")
        lines.append(f"{key}: {value.strip()}")
    body = cap_body(message) or "Update status"
    return body + ("\n\n" + "\n".join(lines) if lines else "") + "\n"


def shard_record_path(shard: str) -> str:
    """Where a shard's root record (``reconciler.yaml``'s content) lives on the status branch."""
    return f"{SHARDS_DIR}/{shard}.yaml"


def shard_owns(path: str, shard: str, namespaces: NamespaceSelector) -> bool:
    """The status files one shard answers for (writes, and removes when they are no longer due): its
    record ``shards/<shard>.yaml`` and the resource files ``<namespace>/...`` of its namespaces.

    Every other root file is not its own: other shards' records, an unsharded instance's
    ``reconciler.yaml``, and ``inventory/``, which is shared (a snapshot is per target, and several
    shards may observe one target: whoever writes it last wins, and no shard removes one).
    """
    if path == shard_record_path(shard):
        return True
    first, sep, _rest = path.partition("/")
    if not sep or first in (SHARDS_DIR, INVENTORY_DIR) or not is_status_path(path):
        return False
    return namespaces.owns(first)
