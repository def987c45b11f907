"""The status branch: one commit per change of the status tree, pushed without ever forcing.

Why this shape:

- The branch is an orphan (its first commit has no parent) and is never merged, so the config
  branch's history stays clean and ``git log <status branch> -- <file>`` is one resource's audit trail.
- Commits are built with plumbing on a private bare repository: blobs and trees are hashed in
  process and written as loose objects, the commit with ``git commit-tree -F -`` (the message on
  stdin: no command line grows with the tree or the message; the body is capped, :func:`cap_body`).
  Nothing is checked out.
- The branch is the truth, not this process's memory: ``read`` and ``write`` start from the remote's
  tip as it is now (one ``ls-remote``; a fetch only when it moved). ``write`` takes the complete
  status tree of the files this writer owns (:func:`reconciler_owns`; other writers' files on the
  tip are kept) and commits only when the tree id differs from the tip's, so a file of its own that
  someone edited or deleted is put back by the next pass, and an unchanged pass costs one round trip.
- A push is a compare-and-swap on the tip the writer planned from (``--force-with-lease`` with that
  tip; the commit is always its child, so never a forced update). When the branch moved, the commit
  is rebuilt on the new tip only if the move changed none of this writer's files (another shard, a
  note), after a short random wait and a fetch, a bounded number of times; a move that changed its
  files is a :class:`StatusConflict` (plan again), never a blind retry. ``may_push`` (the writer
  lease) is asked right before every push.
- Each operation holds the private repository's cache lock and first removes lock files a killed
  git left behind (``refs/heads/reconciler/status.lock`` would otherwise fail every later write).
  A commit that reached the remote is reported as written even if updating the private ref
  afterwards failed: the next read repairs the ref.
- Shards (``run --namespaces``) share one branch: each writes with ``owned`` (the paths it answers
  for), and each attempt keeps every file of the tip it does not own, so two shards pushing at the
  same moment never drop or revert each other's files (:class:`ShardStatusStore`).
"""

from __future__ import annotations

import hashlib
import io
import math
import re
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import git
from gitdb.base import IStream  # type: ignore[import-untyped]
from gitdb.db.loose import LooseObjectDB  # type: ignore[import-untyped]

from reconciler.logging import get_logger
from reconciler.resolve import NamespaceSelector
from reconciler.retry import RetryPolicy
from reconciler.source import _gitutil
from reconciler.source._gitutil import GitError
from reconciler.status.render import INVALID_DIR, is_status_path, load, parse_recorded
from reconciler.status.snapshot import target_file

_TRAILER_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*$")
_FILE_MODE = b"100644"
RECORD_FILE = "reconciler.yaml"  # the root record of an unsharded instance (docs/status-branch.md)
SHARDS_DIR = "shards"
INVENTORY_DIR = "inventory"
_TREE_MODE = b"40000"
MAX_BODY_LINES = 200  # lines of a status commit's body; the rest is counted, not listed

log = get_logger(component="status")


class StatusError(GitError):
    """The status branch could not be read, committed or pushed. Never contains credentials."""


class StatusConflict(StatusError):
    """The branch moved since the tip the write planned from, and the move changed files this writer
    owns (another instance of it wrote meanwhile): nothing was pushed; plan again from the new tip."""


class _Unset:
    """No tip given: the default of :meth:`StatusStore.write`'s ``expected``."""


_UNSET = _Unset()


def reconciler_owns(path: str) -> bool:
    """The files an unsharded reconciler writes, and removes when no longer due: ``reconciler.yaml``,
    ``inventory/<target>.json`` and the resource files (:func:`reconciler.status.render.is_status_path`).
    Anything else on the branch (a shard's record, a note someone added) is another writer's: kept."""
    if path == RECORD_FILE:
        return True
    first, _, rest = path.partition("/")
    if first == INVENTORY_DIR:
        return "/" not in rest and rest.endswith(".json")
    return is_status_path(path)


@dataclass
class _Dir:
    files: dict[str, bytes] = field(default_factory=dict)
    dirs: dict[str, _Dir] = field(default_factory=dict)


def _split_path(path: str) -> list[str]:
    """The components of a status file path; ValueError for anything git or a reader would trip on."""
    parts = path.split("/")
    if not path or path.startswith("/") or "\0" in path:
        raise ValueError(f"invalid status file path {path!r}")
    for part in parts:
        if part in ("", ".", "..") or part.lower() == ".git":
            raise ValueError(f"invalid status file path {path!r}")
    return parts


def _build_dirs(files: Mapping[str, bytes], skipped: list[str] | None = None) -> _Dir:
    """The directory tree of ``files``. A path git or a reader would trip on (``..``, ``.git``, empty
    components, a file that is also a directory) is left out and named in ``skipped``: one bad path
    never keeps the other files from being written. Without ``skipped`` it raises ValueError."""
    root = _Dir()
    for path in sorted(files):
        try:
            parts = _split_path(path)
            node = root
            for part in parts[:-1]:
                if part in node.files:
                    raise ValueError(f"status path {path!r} runs through the file {part!r}")
                node = node.dirs.get(part) or node.dirs.setdefault(part, _Dir())
            if parts[-1] in node.dirs:
                raise ValueError(f"status path {path!r} is also a directory")
        except ValueError:
            if skipped is None:
                raise
            skipped.append(path)
            continue
        node.files[parts[-1]] = bytes(files[path])
    return root


def _hash_tree(
    node: _Dir,
    objects: dict[str, tuple[bytes, bytes]],
    paths: dict[str, str] | None = None,
    prefix: str = "",
) -> bytes:
    """The binary id of ``node``'s tree; every blob and tree of it is added to ``objects``
    (hex id -> (kind, content)), so that they can be written only when a commit needs them, and each
    file's blob id to ``paths`` (path -> hex id) when given."""
    entries: list[tuple[bytes, bytes, bytes]] = []  # (sort key, mode, name)
    ids: dict[bytes, bytes] = {}
    for name, data in node.files.items():
        raw = name.encode()
        ids[raw] = _hash_object(b"blob", data, objects)
        if paths is not None:
            paths[prefix + name] = ids[raw].hex()
        entries.append((raw, _FILE_MODE, raw))
    for name, child in node.dirs.items():
        raw = name.encode()
        ids[raw] = _hash_tree(child, objects, paths, f"{prefix}{name}/")
        entries.append((raw + b"/", _TREE_MODE, raw))
    entries.sort()
    body = b"".join(mode + b" " + raw + b"\0" + ids[raw] for _key, mode, raw in entries)
    return _hash_object(b"tree", body, objects)


def _hash_object(kind: bytes, data: bytes, objects: dict[str, tuple[bytes, bytes]]) -> bytes:
    hasher = hashlib.sha1(b"%s %d\0" % (kind, len(data)), usedforsecurity=False)
    hasher.update(data)  # not header + data: a 60 MB snapshot would be copied once more
    digest = hasher.digest()
    objects[digest.hex()] = (kind, data)
    return digest


def push_retry(max_attempts: int = 8, base_delay: float = 0.02, **injected: Any) -> RetryPolicy:
    """The store's back-off after a lost push race (the project's one :class:`RetryPolicy`): at most
    ``max_attempts`` pushes per write, waits of "full jitter" up to ``base_delay``, doubling to at most
    8 x ``base_delay``, and no time budget (the attempts bound it). Random, so that two writers that just
    collided do not collide again. ``injected`` passes ``sleep``, ``rng`` or ``clock`` (tests)."""
    return RetryPolicy(
        max_attempts=max(1, max_attempts),
        base_delay=max(0.0, base_delay),
        max_delay=8 * max(0.0, base_delay),
        total_timeout=math.inf,
        **injected,
    )


def cap_body(message: str, limit: int = MAX_BODY_LINES) -> str:
    """``message`` with its body cut to ``limit`` lines; the last line counts the lines left out (the
    status files carry the detail, and ``git log -- <file>`` shows each one's history)."""
    subject, _, body = message.strip().partition("\n")
    lines = body.strip("\n").split("\n")
    if len(lines) <= limit:
        return message.strip()
    left = sum(1 for line in lines[limit:] if line.strip())
    kept = "\n".join(lines[:limit]).rstrip("\n")
    return f"{subject}\n\n{kept}\n... and {left:,} more; the files carry the detail"


def format_message(message: str, trailers: Mapping[str, str]) -> str:
    """``message`` (its body capped by :func:`cap_body`) with ``Key: value`` trailers appended as git's
    trailer block (one blank line before)."""
    lines = []
    for key, value in trailers.items():
        if not _TRAILER_KEY.match(key):
            raise ValueError(f"invalid trailer key {key!r}")
        if "\n" in value or "\r" in value:
            raise ValueError(f"trailer {key} must be one line")
        lines.append(f"{key}: {value.strip()}")
    body = cap_body(message) or "Update status"
    return body + ("\n\n" + "\n".join(lines) if lines else "") + "\n"


class StatusStore:
    """Status files on an orphan branch of the config repository (docs/status-branch.md).

    ``url`` is a local path, ``file://``, ``git://``, ``ssh://`` or ``https://`` URL of the config
    repository; ``workdir`` a private bare repository used to build commits (default a stable
    directory under ``~/.cache/paletteai-reconciler``). ``retry`` bounds the pushes of one
    :meth:`write` and the waits before each rebuild after a lost race (default :func:`push_retry`).
    ``on_stale_lock(name)`` is called for each lock file a killed git left in ``workdir`` and this
    store removed (for metrics). Thread-safe.
    """

    def __init__(
        self,
        url: str,
        branch: str = "reconciler/status",
        workdir: Path | None = None,
        *,
        author: str = "paletteai-reconciler <reconciler@localhost>",
        retry: RetryPolicy | None = None,
        timeout: float = _gitutil.NETWORK_TIMEOUT,
        on_stale_lock: Callable[[str], None] | None = None,
    ) -> None:
        try:
            self._location = _gitutil.normalize_url(url)
        except GitError as exc:
            raise StatusError(str(exc)) from None
        self._ident = _gitutil.author_env(author)
        self.url = _gitutil.redact(self._location)
        self.branch = branch
        self.workdir = workdir or _gitutil.default_cache_dir("status", self._location)
        self.retry = retry or push_retry()
        self.timeout = timeout
        self._lock = threading.RLock()
        self._cache_lock = _gitutil.CacheLock(self.workdir, on_stale_lock, StatusError)
        self._repo: git.Repo | None = None
        self._odb: Any = None
        # The remote's tip as last seen, its tree, and whether the private ref names it too.
        self._tip: str | None = None
        self._tip_tree: str | None = None
        self._ref_current = False
        # The files of one tip and their blob ids, so that reading an unchanged branch again costs no
        # git at all; the blobs of the last tree read or written (a moved tip reads only new blobs);
        # the documents parsed from them (by blob id); the tip the caller last read (planned from).
        self._files: tuple[str, dict[str, bytes], dict[str, str]] | None = None
        self._blobs: dict[str, bytes] = {}
        self._docs: dict[str, Any] = {}
        self._planned: str | _Unset | None = _UNSET
        # Metrics.
        self.commit_count = 0
        self.push_count = 0
        self.fetch_count = 0
        self.conflict_count = 0
        self.fence: Callable[[], None] | None = None  # the writer lease's, asked before every push

    @property
    def _ref(self) -> str:
        return f"refs/heads/{self.branch}"

    def _cache(self) -> git.Repo:
        if self._repo is None:
            try:
                repo = _gitutil.open_cache_repo(self.workdir)
                _gitutil.check_branch_name(repo.git, self.branch)
            except GitError as exc:
                raise StatusError(str(exc)) from None
            self._repo = repo
            self._odb = LooseObjectDB(str(Path(repo.git_dir) / "objects"))
        return self._repo

    @contextmanager
    def _operation(self) -> Iterator[git.Repo]:
        """The private repository, held for one operation (threads and processes), stale locks removed."""
        with self._lock:
            repo = self._cache()
            with self._cache_lock:
                yield repo

    # -- remote -----------------------------------------------------------------------------------

    def _refresh(self, repo: git.Repo) -> None:
        """Make the private ref equal the remote's branch: one ``ls-remote``, a fetch only when it moved."""
        try:
            remote = _gitutil.ls_remote_head(repo.git, self._location, self.branch, self.timeout)
            if remote == self._tip and self._ref_current:
                return
            # Whether the private ref is the tip we know is tracked, so that the usual case (someone
            # else moved the branch) goes straight to the fetch: the less time between seeing a tip
            # and pushing onto it, the fewer races are lost.
            local = self._tip if self._ref_current else self._local_ref(repo)
            if remote is None:
                if local is not None:
                    _gitutil.run(repo.git, "update-ref", "-d", self._ref)
                self._tip, self._tip_tree, self._ref_current = None, None, True
                return
            if remote != local:
                if not self._ref_current and _gitutil.rev_parse(repo.git, f"{remote}^{{commit}}"):
                    # Our own commit, pushed while the private ref could not follow: no fetch needed.
                    _gitutil.run(repo.git, "update-ref", self._ref, remote)
                else:
                    self.fetch_count += 1
                    _gitutil.fetch_ref(repo.git, self._location, self._ref, self.timeout)
            # The fetch brings the branch as it is when it runs, which may be newer than ls-remote said.
            tip, tree = _gitutil.run(
                repo.git, "rev-parse", f"{self._ref}^{{commit}}", f"{self._ref}^{{tree}}"
            ).split()
        except GitError as exc:
            raise StatusError(f"cannot read {self.branch!r} of {self.url}: {exc}") from None
        self._tip, self._tip_tree, self._ref_current = tip, tree, True

    def _local_ref(self, repo: git.Repo) -> str | None:
        """The commit the private ref names; a ref naming a commit the repository lacks (a damaged
        cache) is dropped, so that the next fetch starts from scratch."""
        local = _gitutil.rev_parse(repo.git, f"{self._ref}^{{commit}}")
        if local is None and _gitutil.rev_parse(repo.git, self._ref) is not None:
            _gitutil.run(repo.git, "update-ref", "-d", self._ref)
        return local

    def tip(self) -> str | None:
        """The remote's current commit of the status branch, None before the first write. The next
        :meth:`write` is a compare-and-swap on this tip (see there)."""
        with self._operation() as repo:
            self._refresh(repo)
            self._planned = self._tip
            return self._tip

    @property
    def known_tip(self) -> str | None:
        """The branch's tip as this store last saw it (a read, :meth:`tip`, or its own write), without
        asking the remote: what a caller that planned from the last read passes as ``expected``."""
        return self._tip

    def read(self) -> dict[str, bytes]:
        """The remote's current status tree as {path: bytes} (empty before the first write).

        Costs one ``ls-remote`` when the branch did not move since the last read or write, and reads
        only the blobs that changed when it did. The next :meth:`write` is a compare-and-swap on the
        tip read here.
        """
        with self._operation() as repo:
            files, _ids = self._current(repo)
            return dict(files)

    def read_docs(self, include: Callable[[str], bool] | None = None) -> dict[str, dict[str, Any]]:
        """The remote's current status files parsed, by path: what :meth:`read` returns, as documents.

        JSON files are parsed as JSON, the others with the C YAML loader; a file whose blob was parsed
        before (same git blob id) is not parsed again. ``include`` picks the paths (default: every file
        but the ``inventory/`` snapshots, which only ``plan --from-status`` reads). Files that do not
        parse, or are not mappings, are left out. The documents are shared with the cache: read-only.
        """
        wanted = include or (lambda path: not path.startswith(INVENTORY_DIR + "/"))
        with self._operation() as repo:
            files, ids = self._current(repo)
            parsed: dict[str, Any] = {}
            docs: dict[str, dict[str, Any]] = {}
            for path, data in files.items():
                if not wanted(path):
                    continue
                blob = ids.get(path)
                doc = self._docs[blob] if blob in self._docs else load(path, data)
                if blob is not None:
                    parsed[blob] = doc
                if isinstance(doc, dict):
                    docs[path] = doc
            self._docs = parsed  # only the current tip's documents stay cached
            return docs

    def _current(self, repo: git.Repo) -> tuple[dict[str, bytes], dict[str, str]]:
        """(files, blob ids) of the remote's tip as this store shows it, refreshed; sets the planned tip."""
        self._refresh(repo)
        self._planned = self._tip
        if self._tip is None:
            return {}, {}
        if self._files is None or self._files[0] != self._tip:
            self._files = (self._tip, *self._read_tree(repo, self._tip))
        return self._view(self._files[1], self._files[2])

    def _view(self, files: dict[str, bytes], ids: dict[str, str]) -> tuple[dict[str, bytes], dict[str, str]]:
        """What a reader of this store sees of the tip's files (all of them; a shard sees its own)."""
        return files, ids

    def _read_tree(self, repo: git.Repo, commit: str) -> tuple[dict[str, bytes], dict[str, str]]:
        """(files, blob ids) of ``commit``; blobs already held (the last tree read or written) are not
        read again, so a moved tip costs what changed."""
        known = self._blobs
        try:
            raw = _gitutil.run_bytes(repo.git, "ls-tree", "-r", "-z", "--full-tree", commit)
            files: dict[str, bytes] = {}
            ids: dict[str, str] = {}
            blobs: dict[str, bytes] = {}
            for record in raw.split(b"\0"):
                if not record:
                    continue
                meta, _, raw_path = record.partition(b"\t")
                _mode, kind, obj = meta.decode("ascii").split()
                if kind != "blob":
                    continue
                data = known.get(obj)
                if data is None:
                    data = bytes(repo.odb.stream(bytes.fromhex(obj)).read())
                path = raw_path.decode("utf-8", "replace")
                files[path], ids[path], blobs[obj] = data, obj, data
        except (GitError, git.GitError, ValueError) as exc:
            raise StatusError(f"cannot read {self.branch!r} at {commit}: {exc}") from None
        self._blobs = blobs
        return files, ids

    # -- objects ----------------------------------------------------------------------------------

    def tree_id(self, files: Mapping[str, bytes]) -> str:
        """The git tree id of ``files`` (computed in process; nothing is written)."""
        return _hash_tree(_build_dirs(files), {}).hex()

    def _write_objects(self, objects: Mapping[str, tuple[bytes, bytes]]) -> None:
        """Write the objects the private repository lacks as loose objects.

        Presence is checked on disk every time rather than remembered, so an object git's
        ``gc --auto`` has pruned meanwhile is written again. (An object present only in a pack is
        written loose once more: harmless.)
        """
        objects_dir = Path(self._cache().git_dir) / "objects"
        for hexsha, (kind, data) in objects.items():
            if (objects_dir / hexsha[:2] / hexsha[2:]).is_file():
                continue
            stored = self._odb.store(IStream(kind, len(data), io.BytesIO(data)))
            written = stored.hexsha.decode() if isinstance(stored.hexsha, bytes) else stored.hexsha
            if written != hexsha:
                raise StatusError(f"object id mismatch writing {kind.decode()}: {written} != {hexsha}")

    # -- write --------------------------------------------------------------------------------------

    def write(
        self,
        files: Mapping[str, bytes],
        message: str,
        trailers: Mapping[str, str],
        *,
        owned: Callable[[str], bool] | None = None,
        expected: str | _Unset | None = _UNSET,
        may_push: Callable[[], bool] | None = None,
    ) -> str | None:
        """Make the branch hold ``files`` (the complete status tree of what this writer owns) plus the
        tip's files it does not own: commit and push when that differs from the remote's tip.

        ``owned`` says which paths this writer answers for (default :func:`reconciler_owns`: the files
        the reconciler writes); the tip's other files (another writer's, a shard's, a hand-added note)
        are kept. A path git would trip on is left out, with a warning, never the whole tree.

        The push is a compare-and-swap (``--force-with-lease=<ref>:<expected>``) on the tip the caller
        planned from: ``expected``, else the tip the last :meth:`read`, :meth:`read_docs` or
        :meth:`tip` saw, else the tip as it is now. When the branch moved from there, the commit is
        rebuilt on the new tip only if what moved it touched no file this writer owns (another shard,
        a note); otherwise :class:`StatusConflict` is raised and nothing is pushed (the caller plans
        again). ``may_push`` (the writer lease) is asked right before every push; False raises
        :class:`StatusError` and nothing is pushed.

        Returns the new commit's sha, or None when the tip already holds that tree. Raises StatusError
        when the remote cannot be reached, refuses the push, or keeps moving for ``retry.max_attempts``.
        """
        full_message = format_message(message, trailers)
        mine = owned or reconciler_owns
        backoff = self.retry.backoff()
        with self._operation() as repo:
            planned = self._planned if isinstance(expected, _Unset) else expected
            self._planned = _UNSET
            rejected: str | None = None
            parent: str | None = None
            while True:
                if rejected is not None:
                    delay = backoff.next_delay()
                    if delay is None:
                        raise StatusError(
                            f"{self.branch!r} of {self.url} kept moving: "
                            f"gave up after {backoff.attempts} attempts"
                        )
                    # Wait first, then fetch: the rebuilt commit goes out right after its parent was seen.
                    backoff.wait(delay)
                self._refresh(repo)
                if rejected is not None:
                    if self._tip == parent:
                        raise StatusError(f"cannot push {self.branch!r} to {self.url}: {rejected}")
                    self.conflict_count += 1
                if isinstance(planned, _Unset):
                    planned = self._tip
                elif planned != self._tip:
                    self._check_moved(repo, planned, mine)
                    planned = self._tip
                written = {**self._others(repo, mine), **files}
                objects: dict[str, tuple[bytes, bytes]] = {}
                paths: dict[str, str] = {}
                skipped: list[str] = []
                tree = _hash_tree(_build_dirs(written, skipped), objects, paths).hex()
                if skipped:
                    log.warning(
                        "status files with unusable paths left out", paths=skipped[:5], count=len(skipped)
                    )
                if tree == self._tip_tree:
                    return None
                parent = self._tip
                self._write_objects(objects)
                commit = self._commit(repo, tree, parent, full_message)
                if may_push is not None and not may_push():
                    raise StatusError("the writer lease is not held: status commit not pushed")
                if self.fence is not None:
                    self.fence()  # raises when this process's lease ran out: nothing is pushed
                rejected = self._push(repo, commit, parent)
                if rejected is None:
                    kept = {path: written[path] for path in paths}
                    self._pushed(repo, commit, tree, kept, paths)
                    return commit

    def _check_moved(self, repo: git.Repo, planned: str | None, mine: Callable[[str], bool]) -> None:
        """The branch moved from ``planned`` to the tip just refreshed: StatusConflict unless every file
        the move changed is another writer's."""
        try:
            if planned is None or not _gitutil.rev_parse(repo.git, f"{planned}^{{commit}}"):
                changed = list(self._others(repo, lambda _path: False))
            else:
                out = _gitutil.run_bytes(
                    repo.git, "diff-tree", "-r", "-z", "--no-renames", "--name-only", planned, str(self._tip)
                )
                changed = [raw.decode("utf-8", "replace") for raw in out.split(b"\0") if raw]
        except GitError as exc:
            raise StatusError(f"cannot compare {self.branch!r} with the tip planned from: {exc}") from None
        touched = sorted(path for path in changed if mine(path))
        if touched:
            self.conflict_count += 1
            raise StatusConflict(
                f"{self.branch!r} of {self.url} moved from {str(planned)[:7]} to {str(self._tip)[:7]} and "
                f"changed {len(touched)} of this writer's files ({', '.join(touched[:3])}): not pushed; "
                "the next pass plans from the new tip"
            )

    def _others(self, repo: git.Repo, owned: Callable[[str], bool]) -> dict[str, bytes]:
        """The files of the tip just refreshed that ``owned`` does not claim (another writer's)."""
        if self._tip is None:
            return {}
        if self._files is None or self._files[0] != self._tip:
            self._files = (self._tip, *self._read_tree(repo, self._tip))
        return {path: data for path, data in self._files[1].items() if not owned(path)}

    def _pushed(
        self, repo: git.Repo, commit: str, tree: str, files: dict[str, bytes], ids: dict[str, str]
    ) -> None:
        """Record a commit the remote accepted. It is written whatever happens here: a failure to move
        the private ref is logged, and the next operation sets the ref from the remote."""
        self.commit_count += 1
        self._tip, self._tip_tree = commit, tree
        self._files = (commit, files, ids)
        self._blobs = {ids[path]: data for path, data in files.items()}
        try:
            _gitutil.run(repo.git, "update-ref", self._ref, commit)
            self._ref_current = True
        except GitError as exc:
            self._ref_current = False
            log.warning(
                "status commit pushed, but the private ref could not follow; the next pass repairs it",
                commit=commit,
                error=str(exc),
            )

    def _commit(self, repo: git.Repo, tree: str, parent: str | None, message: str) -> str:
        """``git commit-tree`` with the message on stdin: no size limit (an argument is capped by the
        kernel at 128 KiB, which a pass of some 660 platforms' changes would pass)."""
        args = ["commit-tree", tree]
        if parent is not None:
            args += ["-p", parent]
        args += ["-F", "-"]
        with tempfile.TemporaryFile() as stream:
            stream.write(message.encode("utf-8"))
            stream.seek(0)
            try:
                return _gitutil.run(repo.git, *args, env=self._ident, istream=stream).strip()
            except GitError as exc:
                raise StatusError(str(exc)) from None

    def _push(self, repo: git.Repo, commit: str, expected: str | None) -> str | None:
        self.push_count += 1
        return _gitutil.push_if_unchanged(repo.git, self._location, self._ref, commit, expected, self.timeout)

    def close(self) -> None:
        """Stop the persistent git processes of the private repository."""
        with self._lock:
            if self._repo is not None:
                self._repo.close()
                self._repo = None

    def __enter__(self) -> StatusStore:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def shard_record_path(shard: str) -> str:
    """Where a shard's root record (``reconciler.yaml``'s content) lives on the status branch."""
    return f"{SHARDS_DIR}/{shard}.yaml"


def shard_owns(path: str, shard: str, namespaces: NamespaceSelector) -> bool:
    """The status files one shard answers for (writes, and removes when they are no longer due): its
    record ``shards/<shard>.yaml`` and the resource files ``<namespace>/...`` of its namespaces.

    Every other root file is not its own: other shards' records, an unsharded instance's
    ``reconciler.yaml``, and ``inventory/``, which is shared (a snapshot is per target, and several
    shards may observe one target: whoever writes it last wins, and no shard removes one).
    """
    if path == shard_record_path(shard):
        return True
    first, sep, _rest = path.partition("/")
    if not sep or first in (SHARDS_DIR, INVENTORY_DIR) or not is_status_path(path):
        return False
    return namespaces.owns(first)


class ShardStatusStore(StatusStore):
    """The status branch as one shard (``run --namespaces --shard``) sees and writes it.

    It reads and writes the same tree shape as an unsharded instance, ``reconciler.yaml`` included, so
    the controller does not know it is a shard: ``read`` shows the shard's own resource files, its
    record ``shards/<shard>.yaml`` *as* ``reconciler.yaml`` and the shared ``inventory/`` snapshots of
    the targets that record names; ``write``
    puts that record back at ``shards/<shard>.yaml`` and writes with ``owned`` = :func:`shard_owns`,
    so other shards' files are kept on every attempt.
    """

    def __init__(
        self,
        url: str,
        branch: str = "reconciler/status",
        workdir: Path | None = None,
        *,
        shard: str,
        namespaces: NamespaceSelector,
        **options: Any,
    ) -> None:
        super().__init__(url, branch, workdir, **options)
        self.shard = shard
        self.namespaces = namespaces
        self.record_path = shard_record_path(shard)

    def owns(self, path: str) -> bool:
        return shard_owns(path, self.shard, self.namespaces)

    def _view(self, files: dict[str, bytes], ids: dict[str, str]) -> tuple[dict[str, bytes], dict[str, str]]:
        shown = [path for path in files if path != self.record_path and self.owns(path)]
        view = {path: files[path] for path in shown}
        view_ids = {path: ids[path] for path in shown if path in ids}
        if self.record_path in files:
            record = files[self.record_path]
            view[RECORD_FILE] = record
            if self.record_path in ids:
                view_ids[RECORD_FILE] = ids[self.record_path]
            # The snapshots of the targets this shard records (whoever wrote them last): the ones it
            # compares its observations with. Other shards' targets are none of its business.
            for url, project in parse_recorded({RECORD_FILE: record}).targets:
                path = target_file(url, project)
                if path in files:
                    view[path] = files[path]
                    if path in ids:
                        view_ids[path] = ids[path]
        return view, view_ids

    def write(
        self,
        files: Mapping[str, bytes],
        message: str,
        trailers: Mapping[str, str],
        *,
        owned: Callable[[str], bool] | None = None,
        expected: str | _Unset | None = _UNSET,
        may_push: Callable[[], bool] | None = None,
    ) -> str | None:
        if owned is not None:
            raise ValueError("a shard's store decides what it owns itself")
        placed = {(self.record_path if path == RECORD_FILE else path): data for path, data in files.items()}
        unowned = [p for p in placed if not self.owns(p) and not p.startswith(INVENTORY_DIR + "/")]
        # A document with an invalid namespace has its status under ``_invalid/``, which names no
        # namespace a shard could own: left out (with a warning), never a reason to write nothing.
        dropped = [p for p in unowned if p.startswith(INVALID_DIR + "/")]
        foreign = sorted(set(unowned) - set(dropped))
        if foreign:
            raise ValueError(f"shard {self.shard} may not write {', '.join(foreign[:3])}: not its namespaces")
        if dropped:
            log.warning(
                "status of documents with an invalid namespace not written by a shard", paths=dropped[:5]
            )
            placed = {p: data for p, data in placed.items() if p not in dropped}
        return super().write(placed, message, trailers, owned=self.owns, expected=expected, may_push=may_push)
