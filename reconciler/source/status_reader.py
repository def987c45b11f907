"""Read-only view of a status branch for ``reconciler status`` and ``plan --from-status``.

A local repository (work tree or bare) is read in place; a URL is cloned bare into a temporary
directory removed on close. A local repository with a remote ``origin`` (a clone) first fetches the
status branch from it into ``refs/remotes/origin/<branch>``: a clone's remote-tracking copy is never read
as it is, unless ``fetch=False`` (``--no-fetch``; :attr:`StatusBranch.fetched` is then False). The
branch is looked up as ``refs/heads/<branch>``, then as the remote tracking
``refs/remotes/origin/<branch>`` (a work-tree clone of the config repository has it only there); after a
fetch, the fetched copy is read. Nothing is checked out; no hook of the repository runs.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

import git

from reconciler.source import _gitutil
from reconciler.source.errors import GitError, redact
from reconciler.status.basis import Basis, ObservationKind
from reconciler.status.render import whole_record

_FIELD = "\x1f"
_RECORD = "\x1e"


@dataclass(frozen=True)
class StatusCommit:
    """One commit of the status branch that changed a file."""

    sha: str
    time: str  # committer date, ISO 8601
    subject: str
    trailers: dict[str, str] = field(default_factory=dict)


class StatusBranch:
    """The status branch ``branch`` of the config repository ``repo`` (a path or URL), read-only: at the
    commit it named when opened (:attr:`tip`), so its files, time and history are that commit's even
    when a writer moves the branch meanwhile."""

    def __init__(self, repo: str, branch: str = "reconciler/status", *, fetch: bool = True) -> None:
        self.branch = branch
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        # True when what is read is the remote's branch as of now: a fresh clone of a URL, a repository
        # with no remote (it is the one written to), or a clone whose copy was just fetched.
        self.fetched = True
        self._remote_only = False  # fetched: read refs/remotes/origin/<branch>, never a stale local copy
        location = _gitutil.normalize_url(repo)
        if _gitutil.is_local(location):
            if not Path(location).exists():
                raise GitError(f"repository {location} does not exist")
            try:
                self._repo = git.Repo(location)
            except (git.InvalidGitRepositoryError, git.NoSuchPathError):
                raise GitError(f"{location} is not a git repository") from None
        else:
            self._tmp = tempfile.TemporaryDirectory(prefix="reconciler-status-")
            target = Path(self._tmp.name) / "repo.git"
            try:
                _gitutil.clone_bare(location, target)
            except GitError:
                self._tmp.cleanup()
                raise
            self._repo = git.Repo(target)
        self._repo.git.update_environment(**_gitutil.git_env())
        if self._tmp is None:
            self._fetch(fetch)
        found = self._find_ref()
        self.ref = found[0] if found is not None else None
        self._tip = found[1] if found is not None else None

    def _fetch(self, fetch: bool) -> None:
        """Fetch the status branch from ``origin`` when the repository has that remote (a clone)."""
        try:
            origin = str(_gitutil.run(self._repo.git, "remote", "get-url", "origin")).strip()
        except GitError:
            return  # no remote: the repository read is the one the reconciler writes to
        if not origin:
            return
        if not fetch:
            self.fetched = False
            return
        remote_ref = f"refs/remotes/origin/{self.branch}"
        try:
            sha = _gitutil.ls_remote_head(self._repo.git, origin, self.branch)
            if sha is None:  # the remote has no status branch (yet): a stale copy is not read either
                _gitutil.run(self._repo.git, "update-ref", "-d", remote_ref)
            else:
                _gitutil.run(
                    self._repo.git,
                    "fetch",
                    "--no-tags",
                    "--no-write-fetch-head",
                    "--",
                    origin,
                    f"+refs/heads/{self.branch}:{remote_ref}",
                    timeout=_gitutil.NETWORK_TIMEOUT,
                )
        except GitError as exc:
            raise GitError(
                f"cannot fetch the status branch {self.branch} from {redact(origin)}: {exc} "
                "(--no-fetch reads the local copy as it is)"
            ) from None
        self._remote_only = True

    def _find_ref(self, branch: str | None = None) -> tuple[str, str] | None:
        """The ref ``branch`` (default: the status branch) is read at, and the commit it names."""
        name = branch or self.branch
        refs: tuple[str, ...] = (f"refs/heads/{name}", f"refs/remotes/origin/{name}")
        if self._remote_only and name == self.branch:
            refs = (f"refs/remotes/origin/{name}",)
        for ref in refs:
            try:
                out = _gitutil.run(self._repo.git, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
            except GitError:
                continue
            return ref, str(out).strip()
        return None

    @property
    def location(self) -> str:
        """The local repository read (the temporary bare clone of a URL), for reading config revisions
        from the same objects without cloning twice."""
        return str(self._repo.working_tree_dir or self._repo.git_dir)

    def branch_head(self, branch: str) -> str | None:
        """The commit at the tip of another branch of the repository (the config branch, say), looked up
        as the status branch is; None when there is no such branch."""
        found = self._find_ref(branch)
        return found[1] if found is not None else None

    @property
    def tip(self) -> str | None:
        """The commit the status branch named when this reader was opened (None without a branch)."""
        return self._tip

    @property
    def tip_time(self) -> str | None:
        """The tip's committer time, ISO 8601 UTC (``2026-12-02T08:10:00Z``); None without a branch."""
        if self._tip is None:
            return None
        out = str(_gitutil.run(self._repo.git, "log", "-1", "--format=%ct", self._tip, "--")).strip()
        return utc_iso(int(out)) if out.isdigit() else None

    def basis(self, revision: str | None, observation: ObservationKind) -> Basis:
        """What a plan of ``revision`` reading this branch was made against."""
        return Basis(revision, self.tip, self.tip_time, observation, fetched=self.fetched)

    def files(self, commit: str | None = None) -> dict[str, bytes]:
        """Every file of the branch's tip (or of ``commit``) by path."""
        rev = commit or self._tip
        if rev is None:
            return {}
        listing = str(_gitutil.run(self._repo.git, "ls-tree", "-r", "-z", "--full-tree", rev))
        found: dict[str, bytes] = {}
        for entry in listing.split("\0"):
            if not entry:
                continue
            meta, path = entry.split("\t", 1)
            _mode, kind, blob = meta.split()
            if kind == "blob":
                found[path] = self._blob(blob)
        return found

    def read(self, path: str, commit: str | None = None) -> bytes | None:
        rev = commit or self._tip
        if rev is None:
            return None
        try:
            blob = str(
                _gitutil.run(self._repo.git, "rev-parse", "--verify", "--quiet", f"{rev}:{path}")
            ).strip()
        except GitError:
            return None
        return self._blob(blob)

    def _blob(self, blob: str) -> bytes:
        data: bytes = self._repo.odb.stream(bytes.fromhex(blob)).read()
        return data

    def history(self, path: str) -> list[StatusCommit]:
        """The commits that changed ``path``, newest first, with their trailers."""
        if self._tip is None:
            return []
        fmt = _FIELD.join(["%H", "%cI", "%s", "%(trailers:only,unfold)"]) + _RECORD
        out = str(_gitutil.run(self._repo.git, "log", f"--format={fmt}", self._tip, "--", path))
        commits = []
        for record in out.split(_RECORD):
            record = record.strip("\n")
            if not record:
                continue
            sha, time, subject, trailer_text = ([*record.split(_FIELD), "", "", "", ""])[:4]
            trailers = {}
            for line in trailer_text.splitlines():
                key, sep, value = line.partition(":")
                if sep and key.strip():
                    trailers[key.strip()] = value.strip()
            commits.append(StatusCommit(sha.strip(), time, subject, trailers))
        return commits

    def config_commit(self, sha: str) -> tuple[str, str] | None:
        """(subject, ``Name <email>``) of a config commit, when this repository has it."""
        try:
            out = str(_gitutil.run(self._repo.git, "log", "-1", "--format=%s%x1f%an <%ae>", sha, "--"))
        except GitError:
            return None
        subject, _, author = out.strip().partition(_FIELD)
        return subject, author

    def newest(self, revisions: Sequence[str]) -> str | None:
        """The revision every other one of ``revisions`` is an ancestor of (the config branch's newest
        of them); None when the history does not say (unknown commits, diverged revisions)."""
        for candidate in revisions:
            if all(other == candidate or self._is_ancestor(other, candidate) for other in revisions):
                return candidate
        return None

    def _is_ancestor(self, older: str, newer: str) -> bool:
        try:
            _gitutil.run(self._repo.git, "merge-base", "--is-ancestor", older, newer)
        except GitError:
            return False
        return True

    def record(self) -> Mapping[str, bytes]:
        """Every file of the tip, a sharded branch's records read as one ``reconciler.yaml`` whose
        revision is the newest any shard reported."""
        return whole_record(self.files(), newest=self.newest)

    def commit_message(self, sha: str) -> str | None:
        """The whole message of a config commit (its trailers), when this repository has it."""
        try:
            return str(_gitutil.run(self._repo.git, "log", "-1", "--format=%B", sha, "--"))
        except GitError:
            return None

    def close(self) -> None:
        self._repo.close()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> StatusBranch:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def utc_iso(seconds: int) -> str:
    """Unix seconds as ISO 8601 UTC to the second, ``2026-12-02T08:10:00Z``."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
