"""Shared git plumbing of the source package (the config source, the lease, the status branch): URLs,
environment, cache repos, locks.

Every git process the reconciler starts goes through :func:`run`, so that each one has a timeout,
never prompts for credentials, and fails with a message whose URLs carry no userinfo. The errors and
``redact`` are public, in :mod:`reconciler.source.errors`.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import unquote

import git

from reconciler.source.errors import GitError, redact


def _log() -> Any:
    """The git logger, imported when a line is logged: structlog (and rich through it) costs every command
    that only reads a repository a tenth of a second of start-up."""
    from reconciler.logging import get_logger

    return get_logger(component="git")


# Seconds a network git command (ls-remote, fetch, push, clone) may take before it is killed.
NETWORK_TIMEOUT = 120.0
# Seconds a local git command (rev-parse, ls-tree, commit-tree, update-ref) may take.
LOCAL_TIMEOUT = 60.0

_URL_SCHEMES = frozenset({"file", "git", "ssh", "http", "https"})
_SCHEME_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_SCP_RE = re.compile(r"^[A-Za-z0-9._-]+@[A-Za-z0-9._-]+:")
_HTTP_USERINFO_RE = re.compile(r"^(https?://)([^/@\s]*)@(.+)$", re.IGNORECASE)
# The credential helper git runs for a URL that carried ``user:token@``: it answers from the
# environment of that one git process, so the token is neither on a command line (``ps``) nor in any
# config file (a temporary clone keeps the bare URL).
_USER_ENV = "RECONCILER_GIT_USERNAME"
_PASSWORD_ENV = "RECONCILER_GIT_PASSWORD"
_CREDENTIAL_HELPER = (
    f'!f() {{ test "$1" = get || exit 0; '
    f'printf \'username=%s\\npassword=%s\\n\' "${_USER_ENV}" "${_PASSWORD_ENV}"; }}; f'
)


# Lock files git creates next to what it updates and renames into place when done. A git killed in
# between (SIGKILL, OOM, node loss) leaves them behind, and every later update of the same file fails
# with "cannot lock ref" / "Unable to create '...lock': File exists" until someone removes them.
_TOP_LEVEL_LOCKS = ("packed-refs.lock", "HEAD.lock", "index.lock", "shallow.lock", "config.lock")
# The file this process flocks while it runs git in a cache repository (the kernel drops the flock when
# the process dies, however it dies, so it can never go stale itself).
CACHE_FLOCK = "reconciler.flock"


def normalize_url(url: str) -> str:
    """Return the location git should talk to: an absolute path for local repositories, else the URL.

    Unknown transports (``ext::``, ``fd::`` and the like, which can run commands) are refused, and so
    is anything git could read as an option.
    """
    if not url or url.startswith("-"):
        raise GitError(f"invalid repository location: {url!r}")
    match = _SCHEME_RE.match(url)
    if match:
        scheme = match.group(1).lower()
        if scheme not in _URL_SCHEMES:
            raise GitError(f"unsupported repository URL scheme {scheme!r} in {url}")
        return url
    if "::" in url:
        raise GitError(f"unsupported repository location: {url}")
    if _SCP_RE.match(url):
        return url
    return str(Path(url).expanduser().resolve())


def is_local(location: str) -> bool:
    """True when ``location`` (as returned by :func:`normalize_url`) is a path on this machine."""
    return location.startswith("/")


def git_env() -> dict[str, str]:
    """Environment overrides for every git process: never prompt, never wait on a terminal."""
    env = {
        "GIT_TERMINAL_PROMPT": "0",
        "GCM_INTERACTIVE": "never",
        "LC_ALL": "C",
    }
    if "GIT_SSH_COMMAND" not in os.environ and "GIT_SSH" not in os.environ:
        env["GIT_SSH_COMMAND"] = "ssh -o BatchMode=yes"
    return env


_AUTHOR = re.compile(r"^\s*(?P<name>[^<>]+?)\s*<(?P<email>[^<>]*)>\s*$")


def author_env(author: str) -> dict[str, str]:
    """The environment that makes ``author`` (``Name <email>``) the author and committer of the commits
    git writes. ValueError when it does not look like that."""
    match = _AUTHOR.match(author)
    if match is None or not author.isprintable():
        raise ValueError(f"author must look like 'Name <email>', got {author!r}")
    name, email = match["name"], match["email"].strip()
    return {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
    }


def user_cache_root() -> Path:
    """The reconciler's directory in the user's cache: ``$XDG_CACHE_HOME/paletteai-reconciler``
    (``~/.cache`` without the variable)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "paletteai-reconciler"


def default_cache_dir(kind: str, url: str) -> Path:
    """A stable directory per repository URL under the user's cache (:func:`user_cache_root`)."""
    digest = hashlib.sha256(url.encode()).hexdigest()[:16]
    return user_cache_root() / f"{kind}-{digest}"


def open_cache_repo(path: Path) -> git.Repo:
    """Open, or create, the bare repository the reconciler keeps as its own cache.

    It is created without a template (so it has no hooks at all) and with ``core.hooksPath`` pointing
    nowhere, so no hook ever runs in it.
    """
    try:
        if (path / "HEAD").is_file() and (path / "objects").is_dir():
            repo = git.Repo(path)
        else:
            if path.exists() and any(path.iterdir()):
                raise GitError(f"cache directory {path} exists and is not a git repository")
            path.mkdir(parents=True, exist_ok=True)
            runner = git.Git(str(path))
            runner.update_environment(**git_env())
            run(runner, "init", "--quiet", "--bare", "--template=", "--", str(path))
            repo = git.Repo(path)
            with repo.config_writer() as cfg:
                cfg.set_value("core", "hooksPath", os.devnull)
                cfg.set_value("gc", "autoDetach", "false")
    except (git.GitError, OSError) as exc:
        raise GitError(f"cannot open cache repository {path}: {exc}") from exc
    repo.git.update_environment(**git_env())
    return repo


def _one_line(text: str) -> str:
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


def credentials_env(username: str, password: str) -> dict[str, str]:
    """Environment for one git process that answers an HTTP credential request with ``username`` and
    ``password`` (a credential helper given as ``GIT_CONFIG_*`` variables, after the helpers
    configured elsewhere are reset, so no stored credential is used instead)."""
    base = os.environ.get("GIT_CONFIG_COUNT", "0")
    start = int(base) if base.isdigit() else 0
    env = {"GIT_CONFIG_COUNT": str(start + 2), _USER_ENV: username, _PASSWORD_ENV: password}
    for index, value in enumerate(("", _CREDENTIAL_HELPER), start):
        env[f"GIT_CONFIG_KEY_{index}"] = "credential.helper"
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    return env


def split_credentials(args: tuple[str, ...]) -> tuple[tuple[str, ...], dict[str, str]]:
    """``args`` with the userinfo of an ``http(s)://user:token@`` URL removed, and the environment that
    hands it to git by the credential helper instead (empty when no argument carried any)."""
    env: dict[str, str] = {}
    out: list[str] = []
    for arg in args:
        match = _HTTP_USERINFO_RE.match(arg)
        if match is not None:
            user, _, password = match.group(2).partition(":")
            if not env:
                env = credentials_env(unquote(user), unquote(password))
            arg = match.group(1) + match.group(3)
        out.append(arg)
    return tuple(out), env


def _execute(repo_git: git.Git, args: tuple[str, ...], timeout: float, **kwargs: Any) -> str | bytes:
    """``git <args>`` through GitPython with a timeout; GitError with git's own (redacted) message.
    Credentials in an HTTP URL go to git through its environment (:func:`split_credentials`)."""
    args, secret_env = split_credentials(args)
    if secret_env:
        kwargs["env"] = {**(kwargs.get("env") or {}), **secret_env}
    try:
        out = repo_git.execute(
            ["git", *args], kill_after_timeout=timeout, with_extended_output=False, **kwargs
        )
    except git.GitCommandError as exc:
        stderr = exc.stderr.strip() if isinstance(exc.stderr, str) else ""
        detail = _one_line(stderr.removeprefix("stderr:").strip().strip("'")) or str(exc)
        raise GitError(f"git {args[0]} failed: {detail}") from None
    except (git.GitError, OSError) as exc:
        raise GitError(f"git {args[0]} failed: {exc}") from None
    return out if isinstance(out, bytes) else str(out)


def run(repo_git: git.Git, *args: str, timeout: float = LOCAL_TIMEOUT, **kwargs: Any) -> str:
    """Run ``git <args>`` and return its stdout as text (``kwargs`` go to GitPython's ``execute``)."""
    out = _execute(repo_git, args, timeout, **kwargs)
    return out.decode("utf-8", "replace") if isinstance(out, bytes) else out


def run_bytes(repo_git: git.Git, *args: str, timeout: float = LOCAL_TIMEOUT) -> bytes:
    """Like :func:`run` but returns raw stdout (for ``-z`` listings whose paths may not be UTF-8)."""
    out = _execute(repo_git, args, timeout, stdout_as_string=False, strip_newline_in_stdout=False)
    return out if isinstance(out, bytes) else out.encode()


def clone_bare(location: str, target: Path) -> None:
    """``git clone --bare`` of ``location`` into ``target`` (no templates, so no hooks); GitError with
    the location redacted when it fails."""
    runner = git.Git(str(target.parent))
    runner.update_environment(**git_env())
    try:
        run(
            runner,
            "clone",
            "--bare",
            "--template=",
            "--quiet",
            "--",
            location,
            str(target),
            timeout=NETWORK_TIMEOUT,
        )
    except GitError as exc:
        raise GitError(f"cannot clone {redact(location)}: {exc}") from None


def ls_remote_head(
    repo_git: git.Git, location: str, branch: str, timeout: float = NETWORK_TIMEOUT
) -> str | None:
    """The sha the remote's ``refs/heads/<branch>`` points at, or None when it has no such branch."""
    ref = f"refs/heads/{branch}"
    out = run(repo_git, "ls-remote", "--", location, ref, timeout=timeout)
    for line in out.splitlines():
        sha, _, name = line.partition("\t")
        if name.strip() == ref:
            return sha.strip()
    return None


def fetch_ref(repo_git: git.Git, location: str, ref: str, timeout: float) -> None:
    """Fetch one ref of ``location`` into the same ref of a private cache repository (forced)."""
    run(
        repo_git,
        "fetch",
        "--no-tags",
        "--no-write-fetch-head",
        "--",
        location,
        f"+{ref}:{ref}",
        timeout=timeout,
    )


def push_if_unchanged(
    repo_git: git.Git, location: str, ref: str, commit: str, expected: str | None, timeout: float
) -> str | None:
    """Compare-and-swap: move ``ref`` of ``location`` to ``commit`` only if it still names ``expected``
    (None: only if it does not exist), never over a tip the writer did not build on. The error text
    on failure, None once pushed."""
    try:
        run(
            repo_git,
            "push",
            "--porcelain",
            "--no-verify",
            f"--force-with-lease={ref}:{expected or ''}",
            "--",
            location,
            f"{commit}:{ref}",
            timeout=timeout,
        )
    except GitError as exc:
        return str(exc)
    return None


def rev_parse(repo_git: git.Git, rev: str) -> str | None:
    """The sha of ``rev`` in the repository, or None when it does not exist."""
    try:
        out = repo_git.execute(
            ["git", "rev-parse", "--verify", "--quiet", "--end-of-options", rev],
            kill_after_timeout=LOCAL_TIMEOUT,
            with_extended_output=False,
        )
    except git.GitCommandError:
        return None
    except (git.GitError, OSError) as exc:
        raise GitError(f"git rev-parse failed: {exc}") from None
    sha = str(out).strip()
    return sha or None


def check_branch_name(repo_git: git.Git, branch: str) -> None:
    """Refuse branch names git would not accept (and anything that looks like an option)."""
    if not branch or branch.startswith("-"):
        raise GitError(f"invalid branch name {branch!r}")
    run(repo_git, "check-ref-format", "--branch", branch)


def remove_stale_locks(git_dir: Path, on_stale_lock: Callable[[str], None] | None = None) -> list[str]:
    """Remove the lock files git left in ``git_dir``; return their paths relative to it.

    Only call this while holding the repository's :class:`CacheLock`: then no git of any reconciler
    process is running in it, so every lock found is one a killed git left behind. Each removal is
    logged (the cache path holds no URL, only a digest of it) and reported to ``on_stale_lock``.
    """
    found = [git_dir / name for name in _TOP_LEVEL_LOCKS]
    refs = git_dir / "refs"
    if refs.is_dir():
        found.extend(sorted(refs.rglob("*.lock")))
    removed: list[str] = []
    for path in found:
        if path.is_symlink() or not path.is_file():
            continue
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise GitError(f"cannot remove the stale git lock {path}: {exc}") from None
        name = path.relative_to(git_dir).as_posix()
        removed.append(name)
        _log().warning(
            "removed a stale git lock left by an interrupted git", lock=name, repository=str(git_dir)
        )
        if on_stale_lock is not None:
            on_stale_lock(name)
    return removed


class CacheLock:
    """Serialises the git operations on one cache repository across processes; clears stale locks.

    The owner enters it around each operation (nested entries only count depth) while holding its
    own thread lock, so this object itself needs no thread safety. The first entry takes an exclusive
    ``flock`` on :data:`CACHE_FLOCK` in the repository - blocking while another process (a second
    reconciler sharing the cache volume) runs git there - and then removes the lock files git left
    behind: with the flock held, none of them can belong to a live git.
    """

    def __init__(
        self,
        git_dir: Path,
        on_stale_lock: Callable[[str], None] | None = None,
        error: type[GitError] = GitError,
    ) -> None:
        self.git_dir = git_dir
        self.on_stale_lock = on_stale_lock
        self._error = error
        self._fd: int | None = None
        self._depth = 0

    def __enter__(self) -> None:
        if self._depth == 0:
            try:
                fd = os.open(self.git_dir / CACHE_FLOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            except OSError as exc:
                raise self._error(f"cannot lock the cache repository {self.git_dir}: {exc}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                remove_stale_locks(self.git_dir, self.on_stale_lock)
            except BaseException as exc:
                os.close(fd)
                if isinstance(exc, OSError):
                    raise self._error(f"cannot lock the cache repository {self.git_dir}: {exc}") from None
                if isinstance(exc, GitError):
                    raise self._error(str(exc)) from None
                raise
            self._fd = fd
        self._depth += 1

    def __exit__(
        self, _type: type[BaseException] | None, _exc: BaseException | None, _tb: TracebackType | None
    ) -> None:
        self._depth -= 1
        if self._depth == 0 and self._fd is not None:
            os.close(self._fd)  # drops the flock
            self._fd = None
