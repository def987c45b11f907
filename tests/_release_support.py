"""Session fixtures of the tests that install the project the way its users do (the GitHub Action, the
GitLab job, pre-commit): one release of this checkout, and one pre-commit home, built once per session
and shared, so that each way of installing costs one install however many tests use it.

The tests that use them are in three files, one per way of installing (tests/test_ci_integration.py:
pre-commit; tests/test_ci_github.py; tests/test_ci_gitlab.py), and the suite runs with ``--dist
loadfile`` (pyproject.toml): under ``pytest -n`` each file runs on one worker, so each install is made
once, and the three run side by side (the release, a copy of this checkout in git, is made once per
worker: seconds).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests._git_support import git

ROOT = Path(__file__).resolve().parent.parent
RELEASE_TAG = "v0.0.0-ci-test"
# Installs under load take minutes: these tests get more than the suite's hang detector (300 s).
INSTALL_TIMEOUT = 900
_SKIP_COPY = shutil.ignore_patterns(
    ".git",
    ".venv",
    "node_modules",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    ".*_cache",
    ".hypothesis",
    "tools",
)


def need(condition: bool, why: str) -> None:
    """Skip without a tool, or fail on CI (``CI`` set), where every tool must be there."""
    if not condition:
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)


@pytest.fixture(scope="session")
def release(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """This checkout as it is now (committed or not) in a git repository tagged ``RELEASE_TAG``: what a
    release of the project is. Returns (path, commit)."""
    need(shutil.which("git") is not None, "git is not installed")
    root = tmp_path_factory.mktemp("project") / "paletteai-reconciler"
    shutil.copytree(ROOT, root, ignore=_SKIP_COPY)
    git("init", "-q", "-b", "main", cwd=root)
    git("add", "-A", ".", cwd=root)
    git("commit", "-q", "-m", "release", cwd=root)
    git("tag", RELEASE_TAG, cwd=root)
    return root, git("rev-parse", "HEAD", cwd=root).strip()


@pytest.fixture(scope="session")
def pre_commit_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One ``PRE_COMMIT_HOME`` for the session: the hook's environment for ``release`` at its tag is
    built by the first test that runs the hook and reused by the others."""
    need(shutil.which("pre-commit") is not None, "pre-commit is not installed (the dev extra has it)")
    return tmp_path_factory.mktemp("pre-commit-home")
