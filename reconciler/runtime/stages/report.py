"""The report stage: the status tree the pure assembly made (``status/report.py``) written to the
status branch, but only while this instance holds the lease, the revision is still the config
branch's head (the fence) and the branch still follows this config branch. The commit message names
what changed against the branch as it is now, says a rollback or a branch switch, and carries the
scaling records and the config commit's trailers."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from reconciler.logging import get_logger
from reconciler.runtime.branch import BranchReader, branch_mismatch
from reconciler.runtime.ports import History, rollback_note
from reconciler.source import GitError
from reconciler.status.changes import commit_message, source_trailers
from reconciler.status.records import Records
from reconciler.status.report import StatusTree, status_tree
from reconciler.status.report_facts import ReportFacts

log = get_logger(component="controller")


@dataclass(frozen=True)
class Written:
    """What the report stage did: the commit (None: nothing to commit), or why nothing was written."""

    commit: str | None = None
    mismatch: str | None = None  # the status branch follows another config branch


@dataclass(frozen=True)
class Branches:
    branch: str  # the config branch followed
    status_branch: str
    switch: bool  # --switch-branch


def write_status(
    reader: BranchReader,
    tree: Mapping[str, bytes],
    revision: str | None,
    scaling: Sequence[str],
    *,
    branches: Branches,
    history: History | None,
    holds_lease: Callable[[], bool],
    confirm: Callable[[], None],
    extra: Sequence[str] = (),
) -> Written:
    """Push ``tree`` for ``revision`` (raises :class:`GitError` when the lease was lost or git failed)."""
    if not holds_lease():
        raise GitError("the writer lease was lost (or could not be renewed in time); status not written")
    # The tip this pass's status was built from: the push is a compare-and-swap on it, so a writer that
    # lost the lease meanwhile never moves a file back (the store retries only over others' files).
    planned = reader.tip
    records = reader.records()  # read again when another writer moved it
    current, recorded = records.files, records.recorded
    mismatch = branch_mismatch(recorded.branch, branches.branch, branches.status_branch, branches.switch)
    if mismatch is not None:
        log.warning("status branch follows another config branch; writing nothing", reason=mismatch)
        return Written(mismatch=mismatch)
    confirm()
    notes: list[str] = []
    if recorded.branch is not None and recorded.branch != branches.branch:
        notes.append(f"the status branch now follows {branches.branch} (was {recorded.branch})")
    else:
        moved = rollback_note(history, recorded.revision, revision, branches.branch)
        if moved is not None:
            notes.append(moved)
    for note in notes:
        log.warning(note, recorded=recorded.revision, revision=revision)
    notes.extend(extra)
    summary = history.commit_summary(revision) if history is not None and revision else None
    commit = reader.branch.write(
        tree,
        commit_message(current, tree, notes, scaling=list(scaling)),
        source_trailers(revision, summary),
        expected=planned,
        may_push=holds_lease,
    )
    reader.wrote(tree, commit)
    if commit:
        log.info("status committed", commit=commit, files=len(tree))
    return Written(commit=commit)


@dataclass(frozen=True)
class Reported:
    """The report stage's result: the tree assembled, and what became of it."""

    status: StatusTree
    written: Written = Written()
    error: str | None = None  # the status branch could not be written (the pass failed)


def report_pass(
    facts: ReportFacts,
    records: Records,
    reader: BranchReader,
    *,
    branches: Branches,
    history: History | None,
    holds_lease: Callable[[], bool],
    confirm: Callable[[], None],
    dry_run: bool,
    notes: Sequence[str] = (),
) -> Reported:
    """The status branch after this pass, written when it changed (never in a dry run)."""
    status = status_tree(facts, records)
    if not status.changed(records, branches.branch):
        return Reported(status)
    if dry_run:
        log.info("dry run: status not written", files=len(status.files))
        return Reported(status)
    try:
        written = write_status(
            reader,
            status.tree,
            facts.revision,
            status.commits,
            branches=branches,
            history=history,
            holds_lease=holds_lease,
            confirm=confirm,
            extra=notes,
        )
    except GitError as exc:
        log.warning("status branch not written", error=str(exc))
        return Reported(status, error=f"status branch not written: {exc}")
    return Reported(status, written)
