"""Errors of the source layer: every git operation's :class:`GitError`, and the config source's.

Public (import them from here or from :mod:`reconciler.source`); the git plumbing that raises them is
private to the package (``reconciler.source._gitutil``).
"""

from __future__ import annotations

import re

_USERINFO_RE = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]*@")


def redact(text: str) -> str:
    """Remove userinfo (``user:token@``) from every URL in ``text``."""
    return _USERINFO_RE.sub(r"\1", text)


class GitError(Exception):
    """A git operation failed. The message never contains credentials (userinfo is stripped)."""

    def __init__(self, message: str) -> None:
        super().__init__(redact(message))


class SourceError(GitError):
    """The config repository could not be read at all (unreachable remote, missing branch, bad URL).

    Raised instead of returning an empty listing: a failed read must never look like "the repository
    is empty", which the controller would take as "desired = nothing" and prune every cluster. The
    message never contains credentials.
    """
