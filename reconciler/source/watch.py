"""A local working directory as a source: change notifications (watchfiles) and a snapshot reader.

Revisions of a directory (what :meth:`DirectorySource.sync` returns, and what status files then carry
as ``observedRevision`` / ``Source-Revision``):

- the directory is the root of a git work tree and its manifests are exactly those of ``HEAD``:
  the ``HEAD`` commit sha, the same revision the git source would report for that commit;
- a git work tree whose manifests differ from ``HEAD`` (edited, added, deleted, untracked):
  ``<HEAD sha>-dirty-<12 hex>``, where the suffix is a hash of the content, so every distinct edit
  is a distinct revision (an invalid edit is then retried as soon as the file changes again);
- any other directory: ``content-<16 hex>``, a hash of every manifest's path and content.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Generic, TypeVar, cast, overload

import git
import watchfiles

from reconciler.model.diagnostics import Diagnostic, Severity
from reconciler.source import _gitutil
from reconciler.source.cache import ParseCache, Store, blob_id
from reconciler.source.directory import MissingSubtree, read_directory
from reconciler.source.errors import GitError, SourceError
from reconciler.source.git import list_yaml_entries
from reconciler.source.select import SelectionError

T = TypeVar("T")

_EDITOR_NOISE = ("~", ".swp", ".swx", ".tmp")


def _relevant(root: Path) -> Callable[[watchfiles.Change, str], bool]:
    """A watchfiles filter: anything under ``root`` except ``.git`` and editor scratch files."""

    def accept(_change: watchfiles.Change, raw: str) -> bool:
        path = Path(raw)
        try:
            parts = path.relative_to(root).parts
        except ValueError:
            parts = path.parts
        if ".git" in parts:
            return False
        name = path.name
        return not (name.startswith(".#") or name.endswith(_EDITOR_NOISE))

    return accept


def watch_directory(
    path: Path, on_change: Callable[[], None], stop: threading.Event, *, debounce_ms: int = 300
) -> None:
    """Call ``on_change()`` after each (debounced) batch of changes under ``path`` until ``stop`` is set.

    Blocks; run it in a thread. Changes inside ``.git`` are ignored (a commit or fetch there is not a
    change of the manifests on disk; the next content hash tells the controller whether it was).
    """
    root = path.resolve()
    if not root.is_dir():
        raise SourceError(f"cannot watch {path}: not a directory")
    for _changes in watchfiles.watch(
        root,
        watch_filter=_relevant(root),
        debounce=debounce_ms,
        step=50,
        stop_event=stop,
        rust_timeout=1000,
        yield_on_timeout=False,
        raise_interrupt=False,
    ):
        if stop.is_set():
            return
        on_change()


def _identity(path: str, data: bytes) -> tuple[str, bytes]:
    return (path, data)


class DirectorySource(Generic[T]):
    """Manifests of a local directory, with the ``sync()`` / ``read_parsed()`` shape of GitSource.

    ``sync()`` takes a snapshot (through ``read_directory``: the manifests the file rule selects, under
    ``subtree`` when given, no symlink followed, files over 1 MiB not read) and returns its revision
    (see the module docstring); ``read_parsed`` and ``read_tree`` return that snapshot, so one pass sees
    one consistent set of files even while they are being edited. Parsed files are cached by blob id, as
    in GitSource (with a ``store``, on disk too).
    """

    @overload
    def __init__(
        self: DirectorySource[tuple[str, bytes]],
        path: Path,
        *,
        parse: None = None,
        parse_cache_size: int = 100_000,
        subtree: str = "",
    ) -> None: ...

    @overload
    def __init__(
        self: DirectorySource[T],
        path: Path,
        *,
        parse: Callable[[str, bytes], T],
        parse_cache_size: int = 100_000,
        subtree: str = "",
        store: Store[T] | None = None,
    ) -> None: ...

    def __init__(
        self,
        path: Path,
        *,
        parse: Callable[[str, bytes], T] | None = None,
        parse_cache_size: int = 100_000,
        subtree: str = "",
        store: Store[T] | None = None,
    ) -> None:
        self.path = Path(path).resolve()
        self.subtree = subtree
        self.url = str(self.path)
        self._parsed: ParseCache[T] = ParseCache(
            parse or cast(Callable[[str, bytes], T], _identity), parse_cache_size, store
        )
        self._lock = threading.RLock()
        self._revision: str | None = None
        self._files: list[tuple[str, str, bytes]] = []  # (path, blob id, data)
        self._diagnostics: list[Diagnostic] = []
        # Same metric names as GitSource; a directory is never fetched.
        self.fetch_count = 0
        self.last_fetch_seconds = 0.0

    def sync(self) -> str:
        """Snapshot the directory and return its revision."""
        with self._lock:
            if not self.path.is_dir():
                raise SourceError(f"{self.path} is not a directory")
            try:
                files, diagnostics = read_directory(self.path, self.subtree)
            except (MissingSubtree, SelectionError) as exc:
                raise SourceError(str(exc)) from None
            except OSError as exc:
                raise SourceError(f"cannot read {self.path}: {exc.strerror or exc}") from None
            snapshot = [(rel, blob_id(data), data) for rel, data in files]
            digest = hashlib.sha256()
            for rel, blob, _data in snapshot:
                digest.update(f"{rel}\0{blob}\n".encode())
            content = digest.hexdigest()
            head, head_blobs = self._git_head()
            if head is None:
                revision = f"content-{content[:16]}"
            elif head_blobs == {rel: blob for rel, blob, _data in snapshot}:
                revision = head
            else:
                revision = f"{head}-dirty-{content[:12]}"
            self._revision, self._files, self._diagnostics = revision, snapshot, diagnostics
            return revision

    def _git_head(self) -> tuple[str | None, dict[str, str]]:
        """HEAD of the work tree rooted at the directory and its manifests' blob ids, if it is one."""
        if not (self.path / ".git").exists():
            return None, {}
        try:
            repo = git.Repo(self.path)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            return None, {}
        try:
            repo.git.update_environment(**_gitutil.git_env())
            head = _gitutil.rev_parse(repo.git, "HEAD^{commit}")
            if head is None:
                return None, {}
            entries, _skipped = list_yaml_entries(repo, head, self.subtree)
            return head, {e.path: e.blob for e in entries}
        except GitError:
            return None, {}
        finally:
            repo.close()

    def _snapshot(self, revision: str) -> list[tuple[str, str, bytes]]:
        if revision != self._revision:
            raise SourceError(
                f"revision {revision} is not the directory's current snapshot ({self._revision}); sync first"
            )
        return self._files

    def read_tree(self, revision: str) -> list[tuple[str, bytes]]:
        """The manifest files of the snapshot ``revision`` (the last :meth:`sync`), sorted by path."""
        with self._lock:
            return [(rel, data) for rel, _blob, data in self._snapshot(revision)]

    def read_parsed(self, revision: str) -> list[T]:
        """``parse(path, data)`` of every file of the snapshot, parsing only content not seen before."""
        with self._lock:
            snapshot = self._snapshot(revision)
            if self._parsed.store is None:
                return [self._parsed.get(blob, rel, partial(bytes, data)) for rel, blob, data in snapshot]
            data_of = {(blob, rel): data for rel, blob, data in snapshot}
            return self._parsed.get_all(list(data_of), lambda _keys: data_of)

    @property
    def diagnostics(self) -> list[Diagnostic]:
        """What the last snapshot could not read (symlinks, oversized or unreadable files)."""
        return list(self._diagnostics)

    @property
    def complete(self) -> bool:
        """False when the last snapshot could not read some manifest (it may hold a resource)."""
        return not any(d.severity is Severity.ERROR for d in self._diagnostics)

    @property
    def parse_hits(self) -> int:
        return self._parsed.hits

    @property
    def parse_misses(self) -> int:
        return self._parsed.misses
