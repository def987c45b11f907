"""The read-only source of a preview: one revision's files, read once, as the load stage's ``Source``.

``reconciler plan`` reads the revision it plans (a directory as it is on disk, the work tree of a pull
request; or one git revision of a repository or URL) and hands it to the load stage that ``run`` uses
(:func:`reconciler.runtime.stages.load.load`), so the same carry-over applies: a file that stops parsing
keeps the resources it held as Invalid, read from the revision the status branch last reported (an
earlier revision is read from the same repository when it has it). Nothing is fetched or checked out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from reconciler.manifests import CheckedFile
from reconciler.model.diagnostics import Diagnostic, Severity
from reconciler.source import GitError
from reconciler.source.errors import SourceError

Reader = Callable[[str], Sequence[tuple[str, bytes]]]


class RevisionError(Exception):
    """The revision could not be read (an error of the command, exit 2)."""


@dataclass
class RevisionFiles:
    """One revision's files as the load stage's ``Source``: ``sha`` (None for a directory outside git),
    the files, what was skipped, and ``earlier`` reading another revision's files (None: no history).
    A git revision comes already checked (``_parsed``, through the documents cache), its ``files`` empty."""

    sha: str | None
    files: Sequence[tuple[str, bytes]]
    skipped: Sequence[Diagnostic] = ()
    earlier: Reader | None = None
    message: str | None = None  # the commit message (its Reconciler-Allow-Deletions trailer)
    fetch_count: int = 0
    last_fetch_seconds: float = 0.0
    _parsed: list[CheckedFile] | None = field(default=None, repr=False)

    def sync(self) -> str:
        return self.sha or ""

    def read_parsed(self, sha: str) -> list[CheckedFile]:
        """The files of ``sha`` checked, through the documents cache (``source.documents``: only what
        no earlier command checked is parsed)."""
        from reconciler.source.documents import checked_files

        if sha == (self.sha or ""):
            if self._parsed is None:
                self._parsed = checked_files(self.files)
            return self._parsed
        if self.earlier is None:
            raise GitError(f"revision {sha[:12]} cannot be read: no history")
        try:
            return checked_files(self.earlier(sha))
        except SourceError as exc:
            raise GitError(str(exc)) from None

    @property
    def diagnostics(self) -> Sequence[Diagnostic]:
        return self.skipped

    @property
    def complete(self) -> bool:
        return not any(d.severity is Severity.ERROR for d in self.skipped)

    @property
    def history(self) -> bool:
        return self.earlier is not None


def read_revision_files(
    repo: str, rev: str | None, subtree: str = "", extra: Sequence[tuple[str, bytes]] = ()
) -> RevisionFiles:
    """The files of ``repo`` (a directory's files as on disk, or one git revision): under ``subtree``
    (``--path``), with the what-if files ``extra`` added (``reconciler.source.overlay``)."""

    path = Path(repo)
    if path.is_symlink():  # --repo is what the user named: follow it (links inside are never followed)
        path = path.resolve()
    if rev is None and (path.is_dir() or path.is_file()):
        bare, head = _work_tree_head(path) if path.is_dir() else (False, None)
        if not bare:
            return _directory(path, head, subtree, extra)
    return _git_revision(repo, rev, subtree, extra)


def _directory(
    path: Path, head: str | None, subtree: str, extra: Sequence[tuple[str, bytes]]
) -> RevisionFiles:
    from reconciler.source.directory import MissingSubtree, read_directory
    from reconciler.source.overlay import overlay

    try:
        files, diagnostics = read_directory(path, subtree)
    except MissingSubtree as exc:
        raise RevisionError(str(exc)) from None
    if extra:
        files = overlay(files, extra)
    git_root = path if (path / ".git").exists() else None
    earlier = _reader(str(git_root), subtree) if git_root is not None and head else None
    # A directory read as it is: its manifests may differ from HEAD's, so HEAD's trailer approves nothing.
    return RevisionFiles(head, files, diagnostics, earlier)


def _git_revision(
    repo: str, rev: str | None, subtree: str, extra: Sequence[tuple[str, bytes]]
) -> RevisionFiles:
    from reconciler.source.documents import read_checked
    from reconciler.source.git import SkippedEntry
    from reconciler.source.revision import local_commit_message

    # Only the blob ids of the tree are listed; the blobs no pack of the documents cache holds are read
    # and checked (``source.documents``), so ``files`` stays empty and the checked files stand for it.
    skipped: list[SkippedEntry] = []
    try:
        sha, checked = read_checked(repo, rev, skipped=skipped, subtree=subtree, extra=extra)
    except SourceError as exc:
        if rev is not None:
            raise RevisionError(str(exc)) from None
        # `git init --bare` may leave HEAD on a branch never pushed (master) while the config lives on
        # main, the branch `run` follows by default: plan that before giving up.
        try:
            skipped.clear()
            sha, checked = read_checked(repo, "main", skipped=skipped, subtree=subtree, extra=extra)
        except SourceError:
            raise RevisionError(str(exc)) from None
    return RevisionFiles(
        sha,
        (),
        [s.to_diagnostic() for s in skipped],
        _reader(repo, subtree),
        message=local_commit_message(repo, sha),
        _parsed=checked,
    )


def _reader(repo: str, subtree: str) -> Reader:
    from reconciler.source.revision import read_revision

    def read(sha: str) -> Sequence[tuple[str, bytes]]:
        return read_revision(repo, sha, subtree=subtree)[1]

    return read


def _work_tree_head(path: Path) -> tuple[bool, str | None]:
    """``work_tree_head`` of a directory; a plain one (no ``.git``, not a bare repository) is told
    without loading git."""
    if not (path / ".git").exists() and not (path / "HEAD").is_file():
        return False, None
    from reconciler.source.revision import work_tree_head

    return work_tree_head(path)
