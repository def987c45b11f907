"""The ports the stages speak to (``Protocol``s; ``runtime/wiring.py`` picks the implementations).

``Source`` is what the stages need of the config repository (a git branch, or a local directory read
as it is on disk); ``History`` what only git has: the remote head for the fence, ancestry for a
rollback, a commit's subject and author for the status commit's trailers. A directory has no history
(``None``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from reconciler.manifests import CheckedFile, ParsedFile
from reconciler.model.diagnostics import Diagnostic


class Source(Protocol):
    fetch_count: int
    last_fetch_seconds: float

    def sync(self) -> str: ...

    def read_parsed(self, sha: str) -> Sequence[ParsedFile | CheckedFile]: ...

    @property
    def diagnostics(self) -> Sequence[Diagnostic]: ...

    @property
    def complete(self) -> bool: ...


class History(Protocol):
    def remote_head(self) -> str: ...

    def is_ancestor(self, ancestor: str, descendant: str) -> bool: ...

    def commit_summary(self, sha: str) -> tuple[str, str] | None: ...

    def commit_message(self, sha: str) -> str | None: ...


class HeadMoved(Exception):
    """The config branch moved while a pass held an older revision: the pass starts over."""

    def __init__(self, held: str | None, head: str) -> None:
        super().__init__(f"the config branch moved from {(held or '?')[:12]} to {head[:12]}")
        self.held, self.head = held, head


def rollback_note(
    history: History | None, recorded: str | None, revision: str | None, branch: str
) -> str | None:
    """``main moved back from 1a2b3c4 to 9f8e7d6`` when the recorded revision is not an ancestor of the
    one reported now (the branch was moved back, e.g. force-pushed to roll back)."""
    if history is None or not recorded or not revision or recorded == revision:
        return None
    if history.is_ancestor(recorded, revision):
        return None
    return f"{branch} moved back from {recorded[:7]} to {revision[:7]}"
