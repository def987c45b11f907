"""The status branch and the revision a preview reads: the records (fetched first), and which revision.

Every mode of ``plan`` reads the records of the status branch whenever the repository has one
(``--no-status``: none, a first start); ``--from-status`` without ``--rev`` plans the config branch's
head, read from the objects the status branch was read from (a URL is cloned once).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.runtime.preview_source import RevisionError, RevisionFiles, read_revision_files
from reconciler.status.records import NO_RECORDS, Records, read_records

if TYPE_CHECKING:
    from reconciler.source.status_reader import StatusBranch

DEFAULT_STATUS_BRANCH = "reconciler/status"
DEFAULT_CONFIG_BRANCH = "main"


class InputError(Exception):
    """The status branch or the revision cannot be read (an error of the command, exit 2)."""


@dataclass(frozen=True)
class StatusRead:
    """What the status branch gave: its records, its tip and time, whether it was fetched; ``problems``:
    recorded values that could not be read (planned as ``run`` plans them; said as ``run`` logs them)."""

    records: Records = NO_RECORDS
    commit: str | None = None
    time: str | None = None
    fetched: bool = True
    read: bool = True  # False: --no-status
    problems: tuple[str, ...] = field(default=())


def _plain(repo: str) -> bool:
    """A directory outside git, or a file: no status branch to read."""
    path = Path(repo)
    if path.is_file():
        return True
    return path.is_dir() and not (path / ".git").exists() and not (path / "HEAD").is_file()


def open_status(repo: str, branch: str, *, fetch: bool, required: bool) -> StatusBranch | None:
    """The status branch reader (fetched first), or None when the repository has none to read."""
    from reconciler.source.errors import GitError, redact
    from reconciler.source.status_reader import StatusBranch

    if not required and _plain(repo):
        return None
    try:
        return StatusBranch(repo, branch, fetch=fetch)
    except GitError as exc:
        raise InputError(f"cannot read the status branch of {redact(repo)}: {exc}") from None


def read_status(status: StatusBranch | None) -> StatusRead:
    """The records of the branch's tip (none when there is no branch)."""
    if status is None or status.ref is None:
        return StatusRead(fetched=status.fetched if status is not None else True)
    records = read_records(status.record())
    problems = tuple(str(p) for p in records.problems)
    return StatusRead(records, status.tip, status.tip_time, status.fetched, problems=problems)


def planned_revision(
    repo: str,
    rev: str | None,
    status: StatusBranch | None,
    read: StatusRead,
    *,
    from_status: bool,
    branch: str | None,
    subtree: str,
    extra: Sequence[tuple[str, bytes]],
) -> RevisionFiles:
    """The revision planned: ``--from-status`` without ``--rev`` plans the config branch's head (``branch``,
    else the one the status records, else main); otherwise ``repo`` as it is (or ``rev``)."""
    from reconciler.source.errors import redact

    try:
        if status is not None and (from_status or not Path(repo).exists()):
            if rev is None and from_status:
                name = branch or read.records.recorded.branch or DEFAULT_CONFIG_BRANCH
                rev = status.branch_head(name)
                if rev is None:
                    raise InputError(
                        f"no config branch {name!r} in {redact(repo)}; name the revision with --rev"
                    )
            return read_revision_files(status.location, rev, subtree, extra)
        return read_revision_files(repo, rev, subtree, extra)
    except RevisionError as exc:
        raise InputError(str(exc)) from None
