"""The status branch: one commit per change of the status tree, pushed without ever forcing.

Why this shape:

- The branch is an orphan (its first commit has no parent) and is never merged, so the config
  branch's history stays clean and ``git log <status branch> -- <file>`` is one resource's audit trail.
- Commits are built with plumbing on a private bare repository: blobs and trees are hashed in
  process and written as loose objects, the commit with ``git commit-tree``. Nothing is checked out.
- ``write`` takes the complete desired status tree and compares its tree id with the current tip's:
  equal ids mean nothing changed, so no commit and no network at all (a no-op pass stays cheap).
- A push that loses a race (non-fast-forward) fetches the new tip and rebuilds the commit on it with
  the same files, a bounded number of times. It never force-pushes: another writer's commits are
  always kept as ancestors.
- The store trusts its cached tip between writes (a status branch has one writer: this reconciler);
  the first write of an instance, :meth:`read` and :meth:`tip` always ask the remote.
"""

from __future__ import annotations

import hashlib
import io
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import git
from gitdb.base import IStream  # type: ignore[import-untyped]
from gitdb.db.loose import LooseObjectDB  # type: ignore[import-untyped]

from reconciler.source import _gitutil
from reconciler.source._gitutil import GitError

_TRAILER_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*$")
_AUTHOR = re.compile(r"^\s*(?P<name>[^<>]+?)\s*<(?P<email>[^<>]*)>\s*$")
_FILE_MODE = b"100644"
_TREE_MODE = b"40000"


class StatusError(GitError):
    """The status branch could not be read, committed or pushed. Never contains credentials."""


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


def _build_dirs(files: Mapping[str, bytes]) -> _Dir:
    root = _Dir()
    for path, data in files.items():
        parts = _split_path(path)
        node = root
        for part in parts[:-1]:
            if part in node.files:
                raise ValueError(f"status path {path!r} runs through the file {part!r}")
            node = node.dirs.setdefault(part, _Dir())
        if parts[-1] in node.dirs:
            raise ValueError(f"status path {path!r} is also a directory")
        node.files[parts[-1]] = bytes(data)
    return root


def format_message(message: str, trailers: Mapping[str, str]) -> str:
    """``message`` with ``Key: value`` trailers appended as git's trailer block (one blank line before)."""
    lines = []
    for key, value in trailers.items():
        if not _TRAILER_KEY.match(key):
            raise ValueError(f"invalid trailer key {key!r}")
        if "\n" in value or "\r" in value:
            raise ValueError(f"trailer {key} must be one line")
        lines.append(f"{key}: {value.strip()}")
    body = message.strip() or "Update status"
    return body + ("\n\n" + "\n".join(lines) if lines else "") + "\n"


class StatusStore:
    """Status files on an orphan branch of the config repository (DESIGN.md section 6).

    ``url`` is a local path, ``file://``, ``git://``, ``ssh://`` or ``https://`` URL of the config
    repository; ``workdir`` a private bare repository used to build commits (default a stable
    directory under ``~/.cache/paletteai-reconciler``). Thread-safe.
    """

    def __init__(
        self,
        url: str,
        branch: str = "reconciler/status",
        workdir: Path | None = None,
        *,
        author: str = "paletteai-reconciler <reconciler@localhost>",
        max_attempts: int = 5,
        retry_delay: float = 0.2,
        timeout: float = _gitutil.NETWORK_TIMEOUT,
    ) -> None:
        try:
            self._location = _gitutil.normalize_url(url)
        except GitError as exc:
            raise StatusError(str(exc)) from None
        match = _AUTHOR.match(author)
        if match is None:
            raise ValueError(f"author must look like 'Name <email>', got {author!r}")
        self._ident = {
            "GIT_AUTHOR_NAME": match["name"],
            "GIT_AUTHOR_EMAIL": match["email"],
            "GIT_COMMITTER_NAME": match["name"],
            "GIT_COMMITTER_EMAIL": match["email"],
        }
        self.url = _gitutil.redact(self._location)
        self.branch = branch
        self.workdir = workdir or _gitutil.default_cache_dir("status", self._location)
        self.max_attempts = max(1, max_attempts)
        self.retry_delay = retry_delay
        self.timeout = timeout
        self._lock = threading.RLock()
        self._repo: git.Repo | None = None
        self._odb: Any = None
        self._known: set[str] = set()
        self._synced = False
        self._tip: str | None = None
        self._tip_tree: str | None = None
        # Metrics.
        self.commit_count = 0
        self.push_count = 0
        self.conflict_count = 0

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

    # -- remote -----------------------------------------------------------------------------------

    def _refresh(self) -> None:
        """Make the cached ref equal the remote's branch (fetching only when it moved)."""
        repo = self._cache()
        try:
            remote = _gitutil.ls_remote_head(repo.git, self._location, self.branch, self.timeout)
            local = _gitutil.rev_parse(repo.git, f"{self._ref}^{{commit}}")
            if (remote is None or local is None) and _gitutil.rev_parse(repo.git, self._ref) is not None:
                # Gone from the remote, or naming a commit the private repository lacks (damaged).
                _gitutil.run(repo.git, "update-ref", "-d", self._ref)
            if remote is not None and remote != local:
                _gitutil.fetch_ref(repo.git, self._location, self._ref, self.timeout)
        except GitError as exc:
            raise StatusError(f"cannot read {self.branch!r} of {self.url}: {exc}") from None
        if remote is not None and remote != self._tip:
            # Start over from the tip's (reachable) objects: a fetch may have run ``gc --auto``, which
            # can prune unreachable objects written earlier.
            self._known = self._objects_of(repo, remote)
        self._tip = remote
        self._tip_tree = None if remote is None else _gitutil.rev_parse(repo.git, f"{remote}^{{tree}}")
        self._synced = True

    def _objects_of(self, repo: git.Repo, commit: str) -> set[str]:
        """The ids of the commit's trees and blobs: present, so unchanged files are not written again."""
        try:
            raw = _gitutil.run_bytes(repo.git, "ls-tree", "-r", "-t", "-z", "--full-tree", commit)
        except GitError as exc:
            raise StatusError(f"cannot list {self.branch!r}: {exc}") from None
        known: set[str] = set()
        for record in raw.split(b"\0"):
            meta = record.partition(b"\t")[0].split()
            if len(meta) == 3:
                known.add(meta[2].decode("ascii"))
        return known

    def tip(self) -> str | None:
        """The remote's current commit of the status branch, None before the first write."""
        with self._lock:
            self._refresh()
            return self._tip

    def read(self) -> dict[str, bytes]:
        """The remote's current status tree as {path: bytes} (empty before the first write)."""
        with self._lock:
            self._refresh()
            if self._tip is None:
                return {}
            repo = self._cache()
            raw = _gitutil.run_bytes(repo.git, "ls-tree", "-r", "-z", "--full-tree", self._tip)
            files: dict[str, bytes] = {}
            for record in raw.split(b"\0"):
                if not record:
                    continue
                meta, _, raw_path = record.partition(b"\t")
                _mode, kind, obj = meta.decode("ascii").split()
                if kind != "blob":
                    continue
                data = repo.odb.stream(bytes.fromhex(obj)).read()
                files[raw_path.decode("utf-8", "replace")] = bytes(data)
            return files

    # -- objects ----------------------------------------------------------------------------------

    def _store(self, kind: bytes, data: bytes) -> bytes:
        """Write one object (unless known to be there) and return its binary id."""
        sha = hashlib.sha1(b"%s %d\0" % (kind, len(data)) + data, usedforsecurity=False)
        hexsha = sha.hexdigest()
        if hexsha not in self._known:
            stored = self._odb.store(IStream(kind, len(data), io.BytesIO(data)))
            if stored.hexsha != hexsha.encode() and stored.hexsha != hexsha:
                raise StatusError(f"object id mismatch writing {kind.decode()}: {stored.hexsha} != {hexsha}")
            self._known.add(hexsha)
        return sha.digest()

    def _write_tree(self, node: _Dir) -> bytes:
        entries: list[tuple[bytes, bytes, bytes]] = []  # (sort key, mode, name) -> id
        ids: dict[bytes, bytes] = {}
        for name, data in node.files.items():
            raw = name.encode()
            ids[raw] = self._store(b"blob", data)
            entries.append((raw, _FILE_MODE, raw))
        for name, child in node.dirs.items():
            raw = name.encode()
            ids[raw] = self._write_tree(child)
            entries.append((raw + b"/", _TREE_MODE, raw))
        entries.sort()
        body = b"".join(mode + b" " + raw + b"\0" + ids[raw] for _key, mode, raw in entries)
        return self._store(b"tree", body)

    def tree_id(self, files: Mapping[str, bytes]) -> str:
        """The git tree id of ``files`` (written to the private repository)."""
        with self._lock:
            self._cache()
            return self._write_tree(_build_dirs(files)).hex()

    # -- write --------------------------------------------------------------------------------------

    def write(self, files: Mapping[str, bytes], message: str, trailers: Mapping[str, str]) -> str | None:
        """Commit ``files`` (the complete status tree) if it differs from the tip, and push it.

        Returns the new commit's sha, or None when the tree is unchanged. Raises StatusError when the
        remote cannot be reached or keeps moving after ``max_attempts`` rebuilds.
        """
        full_message = format_message(message, trailers)
        with self._lock:
            root = _build_dirs(files)
            repo = self._cache()
            if not self._synced:
                self._refresh()
            tree = self._write_tree(root).hex()
            for attempt in range(self.max_attempts):
                if tree == self._tip_tree:
                    return None
                commit = self._commit(repo, tree, self._tip, full_message)
                error = self._push(repo, commit)
                if error is None:
                    _gitutil.run(repo.git, "update-ref", self._ref, commit)
                    self._tip, self._tip_tree = commit, tree
                    self.commit_count += 1
                    return commit
                stale = self._tip
                self._refresh()
                if self._tip == stale:
                    raise StatusError(f"cannot push {self.branch!r} to {self.url}: {error}")
                self.conflict_count += 1
                if attempt + 1 < self.max_attempts:
                    time.sleep(self.retry_delay * (attempt + 1))
            raise StatusError(
                f"{self.branch!r} of {self.url} kept moving: gave up after {self.max_attempts} attempts"
            )

    def _commit(self, repo: git.Repo, tree: str, parent: str | None, message: str) -> str:
        args = ["commit-tree", tree]
        if parent is not None:
            args += ["-p", parent]
        args += ["-m", message]
        try:
            return _gitutil.run(repo.git, *args, env=self._ident).strip()
        except GitError as exc:
            raise StatusError(str(exc)) from None

    def _push(self, repo: git.Repo, commit: str) -> str | None:
        """Push ``commit`` to the branch, fast-forward only; the error text on failure."""
        self.push_count += 1
        try:
            _gitutil.run(
                repo.git,
                "push",
                "--porcelain",
                "--no-verify",
                "--",
                self._location,
                f"{commit}:{self._ref}",
                timeout=self.timeout,
            )
        except GitError as exc:
            return str(exc)
        return None

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
