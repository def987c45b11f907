"""The status branch as a pass reads it: its tree, read again only when its tip moved, and the records
parsed from it once per tree (``status/records.py``). Shared by the load stage (what the last pass
recorded) and the report stage (what it writes over)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from reconciler.logging import get_logger
from reconciler.status.records import Records, read_records

log = get_logger(component="controller")


class StatusBranch(Protocol):
    """Where status goes: ``StatusStore``, ``ShardStatusStore``, or :class:`NoStatus`."""

    def tip(self) -> str | None: ...

    def read(self) -> Mapping[str, bytes]: ...

    def write(
        self,
        files: Mapping[str, bytes],
        message: str,
        trailers: Mapping[str, str],
        *,
        expected: str | None,
        may_push: Callable[[], bool] | None,
    ) -> str | None:
        """Write ``files``: a compare-and-swap on ``expected`` (the tip the pass planned from), after
        ``may_push`` (the writer lease) said yes right before the push."""
        ...

    def close(self) -> None: ...


class NoStatus:
    """A local directory that is no git repository: status is kept in memory only (never written)."""

    def __init__(self) -> None:
        self._tree: Mapping[str, bytes] = {}

    def tip(self) -> str | None:
        return None

    def read(self) -> Mapping[str, bytes]:
        return self._tree

    def write(
        self,
        files: Mapping[str, bytes],
        message: str,
        trailers: Mapping[str, str],
        *,
        expected: str | None = None,
        may_push: Callable[[], bool] | None = None,
    ) -> str | None:
        log.info("status not written: the directory is not a git repository", files=len(files))
        self._tree = dict(files)
        return None

    def close(self) -> None:
        return None


class BranchReader:
    """The status branch's tree and records, cached by tip (one ``ls-remote`` per read)."""

    def __init__(self, branch: StatusBranch) -> None:
        self.branch = branch
        self._tree: Mapping[str, bytes] | None = None
        self._tip: str | None = None
        self._records: Records | None = None
        self._records_of: Mapping[str, bytes] | None = None  # the tree ``_records`` was parsed from

    @property
    def tip(self) -> str | None:
        """The tip as last read or written by this process."""
        return self._tip

    def tree(self) -> Mapping[str, bytes]:
        """The branch's files, read again only when its tip moved (another writer, a hand edit)."""
        tip = self.branch.tip()
        if self._tree is None or tip != self._tip:
            self._tree = self.branch.read()
            self._tip = tip
        return self._tree

    def records(self) -> Records:
        """What the last pass recorded, parsed once per tree read."""
        tree = self.tree()
        if self._records is None or self._records_of is not tree:  # (Records.files is a copy)
            self._records, self._records_of = read_records(tree), tree
            for problem in self._records.problems:
                log.warning(problem.meaning, error=problem.error)
        return self._records

    def wrote(self, tree: Mapping[str, bytes], commit: str | None) -> None:
        """This process wrote ``tree`` (as ``commit``, when one was made)."""
        self._tree = tree
        if commit is not None:
            self._tip = commit


def branch_mismatch(recorded_branch: str | None, branch: str, status_branch: str, switch: bool) -> str | None:
    """Why this instance must write nothing: the status branch follows another config branch (unless it
    was started with ``--switch-branch``, a deliberate move)."""
    if recorded_branch is None or recorded_branch == branch or switch:
        return None
    return (
        f"the status branch {status_branch!r} follows the config branch "
        f"{recorded_branch!r}, not {branch!r}: nothing is written (start with --switch-branch to move it)"
    )
