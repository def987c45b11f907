"""The private bare repository each git user of the config repository keeps: one class for all three.

The config source (:class:`~reconciler.source.git.GitSource`), the writer lease
(:class:`~reconciler.source.lease.GitLease`) and the status branch
(:class:`~reconciler.source.status_store.StatusStore`) each mirror one branch of the remote into a
cache repository of their own. :class:`GitCache` is what they share: the remote's location (checked,
and redacted for messages), the cache directory (a stable one per URL by default), the repository
opened lazily (hooks off, the branch name checked), and one operation at a time on it - a thread lock
in this process, the cache's ``flock`` across processes, and the lock files a killed git left behind
removed first (:class:`~reconciler.source._gitutil.CacheLock`). Errors are raised as the owner's own
error class (``SourceError``, ``LeaseError``, ``StatusError``), each a :class:`GitError`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import git

from reconciler.source import _gitutil
from reconciler.source.errors import GitError, redact


class GitCache:
    """One remote branch's private cache repository (see the module). Thread-safe.

    ``kind`` names the default cache directory (``<kind>-<digest of the URL>``); ``error`` is the class
    every failure is raised as; ``on_stale_lock(name)`` is called for each lock file a killed git left
    in the cache and that was removed (for metrics).
    """

    def __init__(
        self,
        kind: str,
        url: str,
        branch: str,
        cache_dir: Path | None = None,
        *,
        error: type[GitError] = GitError,
        on_stale_lock: Callable[[str], None] | None = None,
    ) -> None:
        self.error = error
        try:
            self.location = _gitutil.normalize_url(url)
        except GitError as exc:
            raise error(str(exc)) from None
        self.url = redact(self.location)
        self.branch = branch
        self.path = cache_dir or _gitutil.default_cache_dir(kind, self.location)
        self.lock = threading.RLock()
        self._flock = _gitutil.CacheLock(self.path, on_stale_lock, error)
        self._repo: git.Repo | None = None

    @property
    def ref(self) -> str:
        """The branch's ref, in the cache as on the remote."""
        return f"refs/heads/{self.branch}"

    def repo(self) -> git.Repo:
        """The cache repository, opened (or created) on first use; call it holding :attr:`lock`."""
        if self._repo is None:
            try:
                repo = _gitutil.open_cache_repo(self.path)
                _gitutil.check_branch_name(repo.git, self.branch)
            except GitError as exc:
                raise self.error(str(exc)) from None
            self._repo = repo
        return self._repo

    @contextmanager
    def operation(self) -> Iterator[git.Repo]:
        """The cache repository, held for one operation (threads and processes), stale locks removed."""
        with self.lock:
            repo = self.repo()
            with self._flock:
                yield repo

    def close(self) -> None:
        """Stop the persistent git processes of the cache repository (it is opened again when used)."""
        with self.lock:
            if self._repo is not None:
                self._repo.close()
                self._repo = None
