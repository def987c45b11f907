"""The config repository as a source: a cached mirror of one branch, read straight from git objects.

Why this shape:

- ``sync()`` asks the remote for its branch head (``git ls-remote``) and fetches only when that differs
  from the cached ref, so a pass over an unchanged repository costs one round trip and no transfer.
- Files are read from the commit's tree with ``git ls-tree`` and ``git cat-file`` on a bare cache:
  nothing is checked out, so no symlink of the repository is followed and no hook or filter of it runs.
- Parsed documents are cached by (blob id, path): a blob id names the exact bytes, so an unchanged file
  is never parsed again, across passes and across revisions.
- Every operation holds the cache's :class:`~reconciler.source._gitutil.CacheLock` and starts by
  removing lock files a killed git left behind (``refs/heads/main.lock`` would otherwise make every
  later fetch fail with "cannot lock ref", across restarts, since the cache volume is kept).
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Generic, TypeVar, cast, overload

import git

from reconciler.model.diagnostics import Diagnostic, Severity
from reconciler.source import _gitutil
from reconciler.source.cache import ParseCache, Store
from reconciler.source.cache_repo import GitCache
from reconciler.source.errors import GitError, SourceError
from reconciler.source.select import IGNORE_FILE, SUFFIXES, FileSelection, SelectionError

T = TypeVar("T")

# Files larger than this are skipped (with a note): no config document is that large, and the YAML
# parser should never be handed an arbitrarily large input.
MAX_BLOB_BYTES = 1 << 20
YAML_SUFFIXES = SUFFIXES

_MODE_SYMLINK = "120000"
_FULL_SHA = re.compile(r"[0-9a-f]{40}")
_MODE_SUBMODULE = "160000"


@dataclass(frozen=True, slots=True)
class SkippedEntry:
    """A tree entry that was deliberately not read, and why (reported, never silent).

    A skipped ``.yaml``/``.yml`` entry is an error, as in ``read_directory``: it may hide a resource,
    so the loaded state must count as incomplete (nothing pruned). Other symlinks and submodules are
    warnings.
    """

    path: str
    reason: str
    severity: Severity = Severity.WARNING

    def to_diagnostic(self) -> Diagnostic:
        return Diagnostic(file=self.path, line=0, column=0, message=self.reason, severity=self.severity)


@dataclass(frozen=True, slots=True)
class TreeEntry:
    """One YAML blob of a commit's tree."""

    path: str
    blob: str
    size: int


def is_yaml_path(path: str) -> bool:
    return path.lower().endswith(YAML_SUFFIXES)


def _tree_records(raw: bytes, sha: str) -> Iterator[tuple[str, str, str, str]]:
    """(mode, object id, size, path) of each record of ``git ls-tree -r -l -z``. The output is decoded
    once: its separators are ASCII, so each path decodes as it would alone (and git writes the other
    fields in ASCII; any other byte is replaced, as a path's are)."""
    for record in raw.decode("utf-8", "replace").split("\0"):
        if not record:
            continue
        meta, _, path = record.partition("\t")
        parts = meta.split()
        if len(parts) != 4:
            raise SourceError(f"unexpected git ls-tree output for {sha}: {record[:200].encode()!r}")
        yield parts[0], parts[2], parts[3], path


def _ignore_text(repo: git.Repo, root: dict[str, tuple[str, str, str]], skipped: list[SkippedEntry]) -> str:
    """The root's ``.reconcilerignore`` (mode, object, size by path); one that cannot be read is an error
    (what it would have ignored is then read, so the state must count as incomplete)."""
    found = root.get(IGNORE_FILE)
    if found is None:
        return ""
    mode, obj, size = found
    if mode in (_MODE_SYMLINK, _MODE_SUBMODULE) or int(size) > MAX_BLOB_BYTES:
        reason = f"{IGNORE_FILE} not applied: a symbolic link, submodule or file over 1 MiB is not read"
        skipped.append(SkippedEntry(IGNORE_FILE, reason, Severity.ERROR))
        return ""
    return read_blob(repo, obj).decode("utf-8", "replace")


def list_yaml_entries(
    repo: git.Repo, sha: str, subtree: str = ""
) -> tuple[list[TreeEntry], list[SkippedEntry]]:
    """Every manifest blob of the commit ``sha`` (the rule of :mod:`reconciler.source.select`: ``.yaml``/
    ``.yml``, no dot path, under ``subtree``, not in ``.reconcilerignore``), sorted by path, plus the
    entries skipped on purpose.

    Symlinks and submodules are skipped whatever their name (a symlink could point anywhere, a
    submodule's content is not in this repository); blobs over :data:`MAX_BLOB_BYTES` too. A
    ``subtree`` that is no directory of the commit is an error, never an empty repository.
    """
    raw = _gitutil.run_bytes(repo.git, "ls-tree", "-r", "-l", "-z", "--full-tree", sha)
    records = list(_tree_records(raw, sha))
    entries: list[TreeEntry] = []
    skipped: list[SkippedEntry] = []
    root = {path: (mode, obj, size) for mode, obj, size, path in records if "/" not in path}
    try:
        selection = FileSelection(_ignore_text(repo, root, skipped), subtree)
    except SelectionError as exc:
        raise SourceError(str(exc)) from None
    prefix = selection.prefix
    if prefix and not any(path.startswith(prefix) for _m, _o, _s, path in records):
        raise SourceError(f"--path {selection.subtree}: no such directory in commit {sha[:12]}")
    for mode, obj, size, path in records:
        if selection.excludes(path):
            continue
        if mode == _MODE_SYMLINK:
            severity = Severity.ERROR if is_yaml_path(path) else Severity.WARNING
            reason = "symbolic link not followed; put the manifest itself in the repository"
            skipped.append(SkippedEntry(path, reason, severity))
        elif mode == _MODE_SUBMODULE:
            skipped.append(SkippedEntry(path, "git submodule not read; its files are ignored"))
        elif is_yaml_path(path):
            nbytes = int(size)
            if nbytes > MAX_BLOB_BYTES:
                reason = f"file is {nbytes} bytes; the limit is {MAX_BLOB_BYTES} (1 MiB); not read"
                skipped.append(SkippedEntry(path, reason, Severity.ERROR))
            else:
                entries.append(TreeEntry(path, obj, nbytes))
    entries.sort(key=lambda e: e.path)
    skipped.sort(key=lambda s: s.path)
    return entries, skipped


def read_blob(repo: git.Repo, blob: str) -> bytes:
    """The bytes of one blob, through GitPython's persistent ``git cat-file --batch``."""
    try:
        data = repo.odb.stream(bytes.fromhex(blob)).read()
    except (git.GitError, OSError, ValueError) as exc:
        raise SourceError(f"cannot read blob {blob}: {exc}") from None
    return cast(bytes, data)


def read_blobs(repo: git.Repo, blobs: Sequence[str]) -> dict[str, bytes]:
    """The bytes of many blobs, by blob id, from one ``git cat-file --batch`` fed every id at once (about
    a tenth of the time of :func:`read_blob` per blob at 10,000 blobs: no round trip per object)."""
    wanted = list(dict.fromkeys(blobs))
    if not wanted:
        return {}
    if any(not _FULL_SHA.fullmatch(b) for b in wanted):
        raise SourceError(f"cannot read blobs: not an object id in {wanted[:3]}")
    command = ["git", "--git-dir", str(repo.git_dir), "cat-file", "--batch"]
    stdin = ("\n".join(wanted) + "\n").encode()
    try:
        done = subprocess.run(
            command, input=stdin, capture_output=True, env={**os.environ, **_gitutil.git_env()}, check=False
        )
    except OSError as exc:
        raise SourceError(f"cannot read blobs: {exc}") from None
    if done.returncode != 0:
        raise SourceError(f"cannot read blobs: {done.stderr.decode(errors='replace').strip()}")
    out, found, at = done.stdout, {}, 0
    for blob in wanted:
        end = out.find(b"\n", at)
        header = out[at:end].split()
        if end < 0 or len(header) != 3 or header[0].decode() != blob or header[1] != b"blob":
            raise SourceError(f"cannot read blob {blob}: {out[at:end][:200].decode(errors='replace')}")
        size = int(header[2])
        found[blob] = out[end + 1 : end + 1 + size]
        at = end + 1 + size + 1
    return found


def resolve_commit(repo: git.Repo, rev: str) -> str:
    """The commit sha ``rev`` names in ``repo``; SourceError when it names none."""
    if rev.startswith("-"):
        raise SourceError(f"invalid revision {rev!r}")
    sha = _gitutil.rev_parse(repo.git, f"{rev}^{{commit}}")
    if sha is None:
        raise SourceError(f"revision {rev!r} not found")
    return sha


def _identity(path: str, data: bytes) -> tuple[str, bytes]:
    return (path, data)


class GitSource(Generic[T]):
    """One branch of a config repository, mirrored into a local bare cache and read from objects.

    ``url`` is a local path (bare repository or work tree), or a ``file://``, ``git://``, ``ssh://``
    or ``https://`` URL. ``parse(path, data)`` turns one file into whatever the caller needs (the
    controller passes ``reconciler.manifests.check_bytes``: each file parsed and checked); without it,
    :meth:`read_parsed` returns ``(path, data)`` pairs. ``timeout`` bounds each network git command
    (ls-remote, fetch) in seconds.
    An instance is safe to share between threads (one lock serialises git). ``on_stale_lock(name)`` is
    called for each lock file a killed git left in the cache and this instance removed (for metrics).
    ``subtree`` (``--path``) reads only that directory of each revision; paths stay relative to the root.
    """

    @overload
    def __init__(
        self: GitSource[tuple[str, bytes]],
        url: str,
        branch: str = "main",
        cache_dir: Path | None = None,
        *,
        parse: None = None,
        parse_cache_size: int = 100_000,
        timeout: float = _gitutil.NETWORK_TIMEOUT,
        on_stale_lock: Callable[[str], None] | None = None,
        subtree: str = "",
    ) -> None: ...

    @overload
    def __init__(
        self: GitSource[T],
        url: str,
        branch: str = "main",
        cache_dir: Path | None = None,
        *,
        parse: Callable[[str, bytes], T],
        parse_cache_size: int = 100_000,
        timeout: float = _gitutil.NETWORK_TIMEOUT,
        on_stale_lock: Callable[[str], None] | None = None,
        subtree: str = "",
        store: Store[T] | None = None,
    ) -> None: ...

    def __init__(
        self,
        url: str,
        branch: str = "main",
        cache_dir: Path | None = None,
        *,
        parse: Callable[[str, bytes], T] | None = None,
        parse_cache_size: int = 100_000,
        timeout: float = _gitutil.NETWORK_TIMEOUT,
        on_stale_lock: Callable[[str], None] | None = None,
        subtree: str = "",
        store: Store[T] | None = None,
    ) -> None:
        self._git = GitCache("source", url, branch, cache_dir, error=SourceError, on_stale_lock=on_stale_lock)
        self._location = self._git.location
        self.url = self._git.url
        self.branch = branch
        self.subtree = subtree
        self.timeout = timeout
        self.cache_dir = self._git.path
        self._parsed: ParseCache[T] = ParseCache(
            parse or cast(Callable[[str, bytes], T], _identity), parse_cache_size, store
        )
        self._lock = self._git.lock
        self._listing: tuple[str, list[TreeEntry], list[SkippedEntry]] | None = None
        # The cached branch head as this instance last saw it (only this instance writes the cache).
        self._head: str | None = None
        self.skipped: list[SkippedEntry] = []
        # Metrics: read by the controller/server for /metrics.
        self.ls_remote_count = 0
        self.fetch_count = 0
        self.last_fetch_seconds = 0.0
        self.fetch_seconds_total = 0.0

    # -- git ------------------------------------------------------------------------------------

    def _cache(self) -> git.Repo:
        return self._git.repo()

    @contextmanager
    def _operation(self) -> Iterator[git.Repo]:
        """The cache repository, held for one operation (threads and processes), stale locks removed."""
        with self._git.operation() as repo:
            yield repo

    @property
    def _ref(self) -> str:
        return self._git.ref

    def remote_head(self) -> str:
        """The remote's head of the branch, asked with ``git ls-remote`` (nothing is fetched)."""
        with self._operation() as repo:
            self.ls_remote_count += 1
            try:
                sha = _gitutil.ls_remote_head(repo.git, self._location, self.branch, self.timeout)
            except GitError as exc:
                raise SourceError(f"cannot reach {self.url}: {exc}") from None
            if sha is None:
                raise SourceError(f"branch {self.branch!r} not found in {self.url}")
            return sha

    def cached_head(self) -> str | None:
        """The branch head in the local cache (what the last fetch brought), without any network."""
        with self._operation() as repo:
            return _gitutil.rev_parse(repo.git, f"{self._ref}^{{commit}}")

    def sync(self) -> str:
        """The commit sha of the branch head, fetching only when the remote moved since the last fetch."""
        with self._operation() as repo:
            remote = self.remote_head()
            if remote == self._head:
                return remote
            local = _gitutil.rev_parse(repo.git, f"{self._ref}^{{commit}}")
            if local == remote:
                self._head = remote
                return remote
            if local is None and _gitutil.rev_parse(repo.git, self._ref) is not None:
                # The cached ref names a commit the cache lacks (a damaged cache): fetch from scratch.
                self._drop_ref(repo)
            started = time.monotonic()
            try:
                _gitutil.fetch_ref(repo.git, self._location, self._ref, self.timeout)
            except GitError as exc:
                raise SourceError(f"cannot fetch {self.branch!r} from {self.url}: {exc}") from None
            finally:
                self.fetch_count += 1
                self.last_fetch_seconds = time.monotonic() - started
                self.fetch_seconds_total += self.last_fetch_seconds
            self._head = resolve_commit(repo, self._ref)
            return self._head

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        """True when commit ``ancestor`` is ``descendant`` or an ancestor of it, as far as the cache
        knows; False when it is not, or when the cache lacks either (e.g. a commit rolled back away)."""
        if not (_FULL_SHA.fullmatch(ancestor) and _FULL_SHA.fullmatch(descendant)):
            return False
        with self._lock:
            repo = self._cache()
            if None in (
                _gitutil.rev_parse(repo.git, f"{ancestor}^{{commit}}"),
                _gitutil.rev_parse(repo.git, f"{descendant}^{{commit}}"),
            ):
                return False
            try:
                return _gitutil.run(repo.git, "merge-base", ancestor, descendant).strip() == ancestor
            except GitError:  # no common ancestor
                return False

    def commit_summary(self, sha: str) -> tuple[str, str] | None:
        """(first line of the message, ``Name <email>`` of the author) of commit ``sha``, read from the
        cache (no network); None when the cache lacks it. The status commits' ``Source-Subject`` and
        ``Source-Author`` trailers come from here."""
        out = self._cached_log(sha, "%s%x1f%an <%ae>")
        if out is None:
            return None
        subject, _, author = out.strip("\n").partition("\x1f")
        return subject.strip(), author.strip()

    def commit_message(self, sha: str) -> str | None:
        """The whole message of commit ``sha`` (its trailers, e.g. ``Reconciler-Allow-Deletions``), read
        from the cache (no network); None when the cache lacks it."""
        return self._cached_log(sha, "%B")

    def _cached_log(self, sha: str, fmt: str) -> str | None:
        """``git log -1 --format=fmt`` of commit ``sha`` (a full sha) in the cache; None when it lacks it."""
        if not _FULL_SHA.fullmatch(sha):
            return None
        with self._operation() as repo:
            if _gitutil.rev_parse(repo.git, f"{sha}^{{commit}}") is None:
                return None
            try:
                return _gitutil.run(
                    repo.git, "log", "-1", "--no-show-signature", f"--format={fmt}", sha, "--"
                )
            except GitError:
                return None

    def _drop_ref(self, repo: git.Repo) -> None:
        try:
            _gitutil.run(repo.git, "update-ref", "-d", self._ref)
        except GitError as exc:
            raise SourceError(f"cannot repair the cache {self.cache_dir}: {exc}") from None

    # -- reading ----------------------------------------------------------------------------------

    def _list(self, sha: str) -> tuple[list[TreeEntry], list[SkippedEntry]]:
        """The YAML entries of ``sha``; a commit's tree never changes, so the last listing is reused.

        Only a full commit sha is memoised: a ref name (``main``) may point elsewhere after a fetch.
        """
        if self._listing is not None and self._listing[0] == sha:
            return self._listing[1], self._listing[2]
        repo = self._cache()
        commit = resolve_commit(repo, sha)
        try:
            entries, skipped = list_yaml_entries(repo, commit, self.subtree)
        except SourceError:
            raise
        except GitError as exc:
            raise SourceError(f"cannot list the tree of {sha}: {exc}") from None
        if commit == sha:
            self._listing = (sha, entries, skipped)
        return entries, skipped

    def read_tree(self, sha: str) -> list[tuple[str, bytes]]:
        """Every ``.yaml``/``.yml`` file of commit ``sha`` as (path, bytes), sorted by path.

        What was skipped (symlinks, submodules, oversized files) is kept in :attr:`skipped`.
        """
        with self._operation() as repo:
            entries, skipped = self._list(sha)
            self.skipped = list(skipped)
            data = read_blobs(repo, [e.blob for e in entries])
            return [(e.path, data[e.blob]) for e in entries]

    def read_parsed(self, sha: str) -> list[T]:
        """``parse(path, data)`` of every YAML file of ``sha``, parsing only blobs not seen before (by
        this instance, or, with a ``store``, kept in it: the blobs it lacks are read all at once)."""
        with self._operation() as repo:
            entries, skipped = self._list(sha)
            self.skipped = list(skipped)
            if self._parsed.store is None:
                return [self._parsed.get(e.blob, e.path, partial(read_blob, repo, e.blob)) for e in entries]

            def read(keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], bytes]:
                data = read_blobs(repo, [blob for blob, _path in keys])
                return {(blob, path): data[blob] for blob, path in keys}

            return self._parsed.get_all([(e.blob, e.path) for e in entries], read)

    @property
    def parse_hits(self) -> int:
        """Files whose parse came from the cache (an unchanged blob)."""
        return self._parsed.hits

    @property
    def parse_misses(self) -> int:
        """Files parsed (a blob not seen before)."""
        return self._parsed.misses

    @property
    def diagnostics(self) -> list[Diagnostic]:
        """Notes on the entries the last read skipped (symlinks, submodules, oversized files)."""
        return [s.to_diagnostic() for s in self.skipped]

    @property
    def complete(self) -> bool:
        """False when the last read skipped a YAML file (it may hold a resource: prune nothing)."""
        return not any(s.severity is Severity.ERROR for s in self.skipped)

    def close(self) -> None:
        """Stop the persistent ``git cat-file`` processes of the cache repository."""
        self._git.close()

    def __enter__(self) -> GitSource[T]:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
