"""The fetch stage: the config branch's head (fetched when it moved), and the revision fence (a
directory has no history: its head is trivially confirmed)."""

from __future__ import annotations

import time

from reconciler.metrics import Metrics
from reconciler.runtime.ports import HeadMoved, History, Source
from reconciler.source import GitError

__all__ = ["confirm_head", "sync"]


def sync(source: Source, metrics: Metrics) -> str:
    """The config branch's head, fetched when it moved; a failure counts as a failed fetch."""
    fetches = source.fetch_count
    started = time.perf_counter()
    try:
        head = source.sync()
    except GitError:
        metrics.observe_git_fetch(time.perf_counter() - started, success=False)
        raise
    if source.fetch_count != fetches:
        metrics.observe_git_fetch(source.last_fetch_seconds)
    return head


def confirm_head(history: History | None, metrics: Metrics, revision: str | None) -> None:
    """The fence: raise :class:`HeadMoved` unless ``revision`` is still the config branch's head."""
    if history is None or revision is None:
        return
    started = time.perf_counter()
    try:
        head = history.remote_head()
    except GitError:
        metrics.observe_git_fetch(time.perf_counter() - started, success=False)
        raise
    if head != revision:
        raise HeadMoved(revision, head)
