"""The config repository: git fetch/read at a revision, a local directory as a source, the git lease.

Names are imported lazily, so that ``reconciler validate`` (which only needs ``source.directory``)
does not pay for importing GitPython and watchfiles.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reconciler.source.cache import ParseCache, blob_id
    from reconciler.source.errors import GitError, SourceError
    from reconciler.source.git import GitSource, SkippedEntry
    from reconciler.source.lease import GitLease
    from reconciler.source.revision import read_revision
    from reconciler.source.watch import DirectorySource, watch_directory

_WHERE = {
    "GitError": "reconciler.source.errors",
    "ParseCache": "reconciler.source.cache",
    "blob_id": "reconciler.source.cache",
    "SourceError": "reconciler.source.errors",
    "GitSource": "reconciler.source.git",
    "SkippedEntry": "reconciler.source.git",
    "read_revision": "reconciler.source.revision",
    "GitLease": "reconciler.source.lease",
    "DirectorySource": "reconciler.source.watch",
    "watch_directory": "reconciler.source.watch",
}

__all__ = [
    "DirectorySource",
    "GitError",
    "GitLease",
    "GitSource",
    "ParseCache",
    "SkippedEntry",
    "SourceError",
    "blob_id",
    "read_revision",
    "watch_directory",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
