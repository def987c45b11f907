"""The config repository: git fetch/read at a revision, and a local directory as a source."""

from reconciler.source.errors import SourceError
from reconciler.source.git import GitSource, SkippedEntry, read_revision

__all__ = ["GitSource", "SkippedEntry", "SourceError", "read_revision"]
