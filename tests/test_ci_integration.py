"""The project's CI integration, for real, on a config repository that holds its own CI files.

The config repository is the sample plus the usual dotfiles (``.github/workflows/reconciler.yml``,
``.gitlab-ci.yml``, ``.pre-commit-config.yaml``) and a README, in git, with a status branch recording
the sample inventory. On it:

- the GitHub Action (``action.yml``): its ``run:`` steps, run by bash with the inputs the example
  workflow gives, installing the reconciler from a copy of this checkout (as GitHub unpacks an action)
  through the lock file; the pull-request comment goes to a fake GitHub API on loopback and stays ONE
  comment, updated in place by the second push;
- the GitLab job: its ``before_script`` and ``script`` lines, installing with
  ``pip install "git+<url>@<tag>"`` where the URL is a git repository of this checkout, keeping ONE
  merge-request note on a fake GitLab API;
- ``pre-commit run --all-files`` with the hook of ``.pre-commit-hooks.yaml`` from that git repository,
  on this config repository and on the plain sample (valid, then with a broken file);
- ``reconciler validate .``: clean, the dotfiles never read.

Each way of installing runs once (tests/_release_support.py): the action's install step installs into
the runner's temporary directory for the first job, and the later jobs of the test find it there; the
GitLab jobs share the job image's Python, installed by the first job's ``before_script``; the pre-commit
hook's environment is the session's, shared with tests/test_examples.py.

Only package registries are reachable here (the installs need them); off CI a missing tool skips.

The tests are in three files so that the parallel workers (``--dist loadfile``) run the three ways of
installing side by side: this file (validate, pre-commit), tests/test_ci_github.py (the Action) and
tests/test_ci_gitlab.py (the GitLab jobs); tests/_ci_repo_support.py holds what they share.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests._ci_repo_support import (
    base_env,
)
from tests._contract_support import SAMPLE_REPO, ConfigRepo, git
from tests._release_support import INSTALL_TIMEOUT, RELEASE_TAG

pytestmark = pytest.mark.e2e


def test_the_config_repository_with_its_ci_files_validates_clean(ci_config: tuple[ConfigRepo, str]) -> None:
    repo, _ = ci_config
    for name in (
        ".github/workflows/reconciler.yml",
        ".gitlab-ci.yml",
        ".pre-commit-config.yaml",
        "README.md",
    ):
        assert (repo.work / name).is_file()
    done = subprocess.run(
        [sys.executable, "-m", "reconciler.cli", "validate", ".", "--format", "json"],
        cwd=repo.work,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout) == []


@pytest.mark.timeout(INSTALL_TIMEOUT)
def test_pre_commit_runs_the_hook_from_the_project(
    ci_config: tuple[ConfigRepo, str], pre_commit_home: Path
) -> None:
    repo, _ = ci_config
    env = {**base_env(), "PRE_COMMIT_HOME": str(pre_commit_home), "PRE_COMMIT_COLOR": "never"}
    env["PATH"] = f"{Path(shutil.which('pre-commit') or '').parent}:{env['PATH']}"
    done = subprocess.run(
        ["pre-commit", "run", "--all-files"],
        cwd=repo.work,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "reconciler validate" in done.stdout and "Passed" in done.stdout


# --- the hook on the sample, valid and broken (one hook environment for the session) ---------------


def sample_config_repo(tmp_path: Path, release: tuple[Path, str]) -> Path:
    """The sample as a config repository whose ``.pre-commit-config.yaml`` uses the project's hook, from
    this checkout as released at its tag (the session's: tests/_release_support.py)."""
    repo = tmp_path / "config"
    shutil.copytree(SAMPLE_REPO, repo)
    hook = {
        "repos": [{"repo": str(release[0]), "rev": RELEASE_TAG, "hooks": [{"id": "reconciler-validate"}]}]
    }
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump(hook))
    git("init", "-q", "-b", "main", cwd=repo)
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "config", cwd=repo)
    return repo


def run_hook(repo: Path, home: Path) -> subprocess.CompletedProcess[str]:
    """``pre-commit run --all-files`` with the session's ``PRE_COMMIT_HOME``: the hook's environment is
    built once for the session (``pre-commit try-repo`` would build one per call, in a store of its own)."""
    env = {**os.environ, "PRE_COMMIT_HOME": str(home), "PRE_COMMIT_COLOR": "never"}
    env.pop("PYTHONPATH", None)  # the hook's own virtualenv must use what pre-commit installed in it
    return subprocess.run(
        ["pre-commit", "run", "--all-files"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT,
        check=False,
    )


@pytest.mark.timeout(INSTALL_TIMEOUT)
def test_pre_commit_runs_the_hook_and_passes_a_valid_config_repository(
    tmp_path: Path, pre_commit_home: Path, release: tuple[Path, str]
) -> None:
    done = run_hook(sample_config_repo(tmp_path, release), pre_commit_home)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "reconciler validate" in done.stdout and "Passed" in done.stdout


@pytest.mark.timeout(INSTALL_TIMEOUT)
def test_pre_commit_runs_the_hook_and_fails_on_a_broken_file(
    tmp_path: Path, pre_commit_home: Path, release: tuple[Path, str]
) -> None:
    repo = sample_config_repo(tmp_path, release)
    broken = repo / "broken.yaml"
    broken.write_text(
        "apiVersion: palette.ai/v1alpha1\nkind: MLPlatform\nmetadata: {name: Bad_Name, namespace: x}\n"
    )
    git("add", "-A", cwd=repo)
    done = run_hook(repo, pre_commit_home)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "broken.yaml" in done.stdout
