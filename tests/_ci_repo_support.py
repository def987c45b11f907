"""The config repository the CI-integration tests run the project's CI files on (module docstring of
tests/test_ci_integration.py), the runner environment, and the fixtures they share: ``ci_config`` (one
config repository per test module) and ``ci_runner`` (one unpacked, once-installed action per module).
Registered as a pytest plugin in tests/conftest.py."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests._ci_support import run_composite_action, write_observed_status
from tests._contract_support import SAMPLE_INVENTORY, SAMPLE_REPO, ConfigRepo, git, make_config_repo
from tests._release_support import RELEASE_TAG, need

ROOT = Path(__file__).resolve().parent.parent
ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
WORKFLOW = yaml.safe_load((ROOT / "examples" / "github" / "workflows" / "reconciler.yml").read_text())
GITLAB_TEXT = (ROOT / "examples" / "gitlab" / ".gitlab-ci.yml").read_text()
GITLAB = yaml.safe_load(GITLAB_TEXT)
URL = "https://api.spectrocloud.com"
PROJECT = "6514216503b1d1cd4f1bdc44"  # the sample Settings' defaultProjectID
TAG = RELEASE_TAG
NOTEBOOKS = "project-a/platforms/notebooks.yaml"
_need = need


def base_env() -> dict[str, str]:
    """The environment of a runner: no reconciler or Palette settings, no virtualenv of this session."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("PALETTE_", "RECONCILER_", "VIRTUAL_ENV"))
    }
    env.pop("PYTHONPATH", None)
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = ":".join(p for p in env["PATH"].split(":") if p != venv_bin)
    env.update(GIT_AUTHOR_NAME="ci", GIT_AUTHOR_EMAIL="ci@example.com", GIT_COMMITTER_NAME="ci")
    env.update(GIT_COMMITTER_EMAIL="ci@example.com", NO_COLOR="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def make_config(root: Path, release: tuple[Path, str]) -> tuple[ConfigRepo, str]:
    """The config repository (module docstring) with a status branch and a pull-request branch ``pr``
    that makes notebooks 6 H100; returns it and the pull request's head."""
    source = root / "source"
    shutil.copytree(SAMPLE_REPO, source)
    (source / "inventory.json").unlink()  # a Palette snapshot is no config file
    (source / ".github" / "workflows").mkdir(parents=True)
    shutil.copy(
        ROOT / "examples" / "github" / "workflows" / "reconciler.yml", source / ".github" / "workflows"
    )
    (source / ".gitlab-ci.yml").write_text(GITLAB_TEXT)
    hook = {"repos": [{"repo": str(release[0]), "rev": TAG, "hooks": [{"id": "reconciler-validate"}]}]}
    (source / ".pre-commit-config.yaml").write_text(yaml.safe_dump(hook))
    repo = make_config_repo(root, source)
    hosts = json.loads(SAMPLE_INVENTORY.read_text())["edgeHosts"]
    write_observed_status(repo, hosts, URL, PROJECT)
    git("checkout", "-q", "-b", "pr", cwd=repo.work)
    path = repo.work / NOTEBOOKS
    path.write_text(path.read_text().replace("count: 4", "count: 6"))
    git("commit", "-q", "-am", "notebooks: 6 H100", cwd=repo.work)
    git("push", "-q", "origin", "pr", cwd=repo.work)
    return repo, repo.head()


@pytest.fixture(scope="module")
def ci_config(tmp_path_factory: pytest.TempPathFactory, release: tuple[Path, str]) -> tuple[ConfigRepo, str]:
    """The config repository of :func:`make_config`, shared by the module's tests."""
    return make_config(tmp_path_factory.mktemp("config"), release)


def checkout(repo: ConfigRepo, where: Path, rev: str) -> Path:
    """actions/checkout with fetch-depth 0 (GitLab: GIT_DEPTH 0): the whole history, at ``rev``."""
    git("clone", "-q", str(repo.bare), str(where))
    git("checkout", "-q", rev, cwd=where)
    return where


def uses_step(job: str) -> dict[str, Any]:
    """The example workflow's step that uses the action (the project, at a tag)."""
    steps = WORKFLOW["jobs"][job]["steps"]
    [step] = [s for s in steps if s.get("uses", "").endswith("/paletteai-reconciler@v0.1.0")]
    return step


def push_pr(repo: ConfigRepo, count: int) -> str:
    git("checkout", "-q", "pr", cwd=repo.work)
    path = repo.work / NOTEBOOKS
    path.write_text(re.sub(r"count: \d+", f"count: {count}", path.read_text(), count=1))
    git("commit", "-q", "-am", f"notebooks: {count} H100", cwd=repo.work)
    git("push", "-q", "origin", "pr", cwd=repo.work)
    return repo.head()


SANDBOX = "project-a/platforms/cpu-sandbox.yaml"


def move_main(repo: ConfigRepo) -> str:
    """main moves on after the pull request branched: the cpu-sandbox platform goes (it was never
    deployed, so nothing is pruned); returns main's new head."""
    git("checkout", "-q", "main", cwd=repo.work)
    git("rm", "-q", SANDBOX, cwd=repo.work)
    git("commit", "-q", "-m", "cpu-sandbox: retired", cwd=repo.work)
    git("push", "-q", "origin", "main", cwd=repo.work)
    head = repo.head()
    git("checkout", "-q", "pr", cwd=repo.work)
    return head


def move_status(repo: ConfigRepo) -> str:
    """The reconciler commits to its status branch again; returns the branch's new tip."""
    work = repo.work.parent / "status-work"
    git("commit", "-q", "--allow-empty", "-m", "status: another pass", cwd=work)
    git("push", "-q", str(repo.bare), "HEAD:refs/heads/reconciler/status", cwd=work)
    return git("rev-parse", "HEAD", cwd=work)


INSTALL = "Install the reconciler (from this action, through its lock file)"


class Runner:
    """One runner for the module's later action runs: the action unpacked once, installed by the first
    run into ``temp`` (the install itself is tested there and by the first GitHub test), then reused."""

    def __init__(self, root: Path, release: tuple[Path, str]) -> None:
        self.action_path = root / "_actions" / "paletteai-reconciler"  # as GitHub unpacks it: no .git
        shutil.copytree(release[0], self.action_path, ignore=shutil.ignore_patterns(".git"))
        self.temp = root / "runner-temp"
        self.temp.mkdir()
        self.installed = False

    def run(
        self, with_inputs: Mapping[str, str], github: dict[str, Any], workspace: Path, env: dict[str, str]
    ) -> Any:
        github = {"action_path": str(self.action_path), **github}
        skip = (INSTALL,) if self.installed else ()
        done = run_composite_action(ACTION, with_inputs, github, workspace, self.temp, env, skip=skip)
        self.installed = self.installed or all(s.returncode == 0 for s in done.steps[:1])
        return done


@pytest.fixture(scope="module")
def ci_runner(tmp_path_factory: pytest.TempPathFactory, release: tuple[Path, str]) -> Runner:
    return Runner(tmp_path_factory.mktemp("runner"), release)


def pull_request_event(number: int, head: str) -> dict[str, Any]:
    return {"pull_request": {"number": number, "head": {"sha": head}, "base": {"ref": "main"}}}
