"""The status branch: one commit per change of the status tree, pushed without ever forcing.

The git side of the branch; its rules without git (what a writer owns, messages, the back-off) are
:mod:`reconciler.status.store`.

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

import io
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import git
from gitdb.base import IStream  # type: ignore[import-untyped]
from gitdb.db.loose import LooseObjectDB  # type: ignore[import-untyped]

from reconciler.logging import get_logger
from reconciler.retry import RetryPolicy
from reconciler.source import _gitutil
from reconciler.source.cache_repo import GitCache
from reconciler.source.errors import GitError
from reconciler.source.git_tree import build_dirs, hash_tree
from reconciler.status.render import load
from reconciler.status.store import (
    INVENTORY_DIR,
    format_message,
    push_retry,
    reconciler_owns,
)

log = get_logger(component="status")


class StatusError(GitError):
    """The status branch could not be read, committed or pushed. Never contains credentials."""


class StatusConflict(StatusError):
    """The branch moved since the tip the write planned from, and the move changed files this writer
    owns (another instance of it wrote meanwhile): nothing was pushed; plan again from the new tip."""


class Unset:
    """No tip given: the default of :meth:`StatusStore.write`'s ``expected``."""


UNSET = Unset()


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
        self._git = GitCache("status", url, branch, workdir, error=StatusError, on_stale_lock=on_stale_lock)
        self._location = self._git.location
        self._ident = _gitutil.author_env(author)
        self.url = self._git.url
        self.branch = branch
        self.workdir = self._git.path
        self.retry = retry or push_retry()
        self.timeout = timeout
        self._lock = self._git.lock
        self._odb: Any = None  # the cache's loose object database, beside its repository
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
        self._planned: str | Unset | None = UNSET
        # Metrics.
        self.commit_count = 0
        self.push_count = 0
        self.fetch_count = 0
        self.conflict_count = 0
        self.fence: Callable[[], None] | None = None  # the writer lease's, asked before every push

    @property
    def _ref(self) -> str:
        return self._git.ref

    def _cache(self) -> git.Repo:
        repo = self._git.repo()
        if self._odb is None:
            self._odb = LooseObjectDB(str(Path(repo.git_dir) / "objects"))
        return repo

    @contextmanager
    def _operation(self) -> Iterator[git.Repo]:
        """The private repository, held for one operation (threads and processes), stale locks removed."""
        with self._git.operation() as repo:
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
        return hash_tree(build_dirs(files), {}).hex()

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
        expected: str | Unset | None = UNSET,
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
            planned = self._planned if isinstance(expected, Unset) else expected
            self._planned = UNSET
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
                if isinstance(planned, Unset):
                    planned = self._tip
                elif planned != self._tip:
                    self._check_moved(repo, planned, mine)
                    planned = self._tip
                written = {**self._others(repo, mine), **files}
                objects: dict[str, tuple[bytes, bytes]] = {}
                paths: dict[str, str] = {}
                skipped: list[str] = []
                tree = hash_tree(build_dirs(written, skipped), objects, paths).hex()
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
            self._git.close()
            self._odb = None

    def __enter__(self) -> StatusStore:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
