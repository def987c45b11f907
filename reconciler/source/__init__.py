"""The config repository: git fetch/read at a revision, and a local directory as a source."""

from reconciler.source._gitutil import GitError
from reconciler.source.cache import ParseCache, blob_id
from reconciler.source.errors import SourceError
from reconciler.source.git import GitSource, SkippedEntry, read_revision
from reconciler.source.watch import DirectorySource, watch_directory

__all__ = [
    "DirectorySource",
    "GitError",
    "GitSource",
    "ParseCache",
    "SkippedEntry",
    "SourceError",
    "blob_id",
    "read_revision",
    "watch_directory",
]
