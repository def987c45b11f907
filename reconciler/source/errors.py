"""Errors of the source layer."""

from __future__ import annotations

from reconciler.source._gitutil import GitError


class SourceError(GitError):
    """The config repository could not be read at all (unreachable remote, missing branch, bad URL).

    Raised instead of returning an empty listing: a failed read must never look like "the repository
    is empty", which the controller would take as "desired = nothing" and prune every cluster. The
    message never contains credentials.
    """
