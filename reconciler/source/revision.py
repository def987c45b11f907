"""One revision of a repository read once, outside the source's cached mirror: a local repository in
place or a URL cloned bare into a temporary directory (``plan --rev``, ``validate --rev``, what-if), and
the few facts of a local work tree the preview asks for.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import git

from reconciler.source import _gitutil
from reconciler.source.errors import GitError, SourceError
from reconciler.source.git import SkippedEntry, TreeEntry, list_yaml_entries, read_blobs, resolve_commit


def work_tree_head(path: Path) -> tuple[bool, str | None]:
    """(is a bare repository, HEAD sha of a work tree) of a local directory; (False, None) when it is
    not a repository or has no commit yet. Nothing is run but reading refs."""
    try:
        repo = git.Repo(path)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return False, None
    try:
        if repo.bare:
            return True, None
        return False, str(repo.head.commit.hexsha)
    except (ValueError, GitError, git.GitCommandError):
        return False, None
    finally:
        repo.close()


def read_revision(
    repo: str, rev: str | None = None, *, skipped: list[SkippedEntry] | None = None, subtree: str = ""
) -> tuple[str, list[tuple[str, bytes]]]:
    """One revision's YAML files, read from git objects: ``(commit sha, [(path, bytes), ...])``.

    ``repo`` is a local work tree or bare repository (read in place, nothing fetched or checked out)
    or a URL (cloned bare into a temporary directory that is removed afterwards). ``rev`` is any
    revision git understands; the default is ``HEAD`` (the default branch of a URL). Symlinks,
    submodules and oversized files are left out, as in :meth:`GitSource.read_tree`; pass a list as
    ``skipped`` to receive their notes. ``subtree`` (``--path``) reads only that directory.
    """
    with open_repository(repo) as local:
        sha, entries = list_revision(local, rev or "HEAD", skipped, subtree)
        data = read_blobs(local, [e.blob for e in entries])
        return sha, [(e.path, data[e.blob]) for e in entries]


@contextmanager
def open_repository(repo: str) -> Iterator[git.Repo]:
    """``repo`` opened for reading (see :func:`read_revision`): a local repository in place, a URL cloned
    bare into a temporary directory removed afterwards."""
    try:
        location = _gitutil.normalize_url(repo)
    except GitError as exc:
        raise SourceError(str(exc)) from None
    if _gitutil.is_local(location):
        if not Path(location).exists():
            raise SourceError(f"repository {location} does not exist")
        try:
            local = git.Repo(location)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            raise SourceError(f"{location} is not a git repository") from None
        local.git.update_environment(**_gitutil.git_env())
        try:
            yield local
        finally:
            local.close()
        return
    with tempfile.TemporaryDirectory(prefix="reconciler-rev-") as tmp:
        target = Path(tmp) / "repo.git"
        try:
            _gitutil.clone_bare(location, target)
        except GitError as exc:
            raise SourceError(str(exc)) from None
        clone = git.Repo(target)
        clone.git.update_environment(**_gitutil.git_env())
        try:
            yield clone
        finally:
            clone.close()


def list_revision(
    repo: git.Repo, rev: str, skipped: list[SkippedEntry] | None, subtree: str
) -> tuple[str, list[TreeEntry]]:
    """The commit ``rev`` names and its YAML blobs (nothing read yet); ``skipped`` receives the notes."""
    sha = resolve_commit(repo, rev)
    try:
        entries, notes = list_yaml_entries(repo, sha, subtree)
    except SourceError:
        raise
    except GitError as exc:
        raise SourceError(f"cannot list the tree of {rev}: {exc}") from None
    if skipped is not None:
        skipped.extend(notes)
    return sha, entries


def local_commit_message(repo: str, sha: str) -> str | None:
    """The whole message of ``sha`` in a local repository (None for a URL or an unknown commit)."""
    if not _gitutil.is_local(_gitutil.normalize_url(repo)):
        return None
    try:
        local = git.Repo(repo)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None
    try:
        return str(_gitutil.run(local.git, "log", "-1", "--format=%B", sha, "--"))
    except GitError:
        return None
    finally:
        local.close()
