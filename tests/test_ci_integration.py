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
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests._ci_support import FakeForge, run_composite_action, run_gitlab_job, write_observed_status
from tests._contract_support import SAMPLE_INVENTORY, SAMPLE_REPO, ConfigRepo, git, make_config_repo
from tests._release_support import INSTALL_TIMEOUT, RELEASE_TAG, need

pytestmark = pytest.mark.e2e

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


def _base_env() -> dict[str, str]:
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


@pytest.fixture(scope="module")
def project(release: tuple[Path, str]) -> tuple[Path, str]:
    """This checkout as a release tagged ``TAG`` (the session's): (path, commit)."""
    return release


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory, project: tuple[Path, str]) -> tuple[ConfigRepo, str]:
    """The config repository (module docstring) with a status branch and a pull-request branch ``pr``;
    returns it and the pull request's head."""
    root = tmp_path_factory.mktemp("config")
    source = root / "source"
    shutil.copytree(SAMPLE_REPO, source)
    (source / "inventory.json").unlink()  # a Palette snapshot is no config file
    (source / ".github" / "workflows").mkdir(parents=True)
    shutil.copy(
        ROOT / "examples" / "github" / "workflows" / "reconciler.yml", source / ".github" / "workflows"
    )
    (source / ".gitlab-ci.yml").write_text(GITLAB_TEXT)
    hook = {"repos": [{"repo": str(project[0]), "rev": TAG, "hooks": [{"id": "reconciler-validate"}]}]}
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


def _checkout(repo: ConfigRepo, where: Path, rev: str) -> Path:
    """actions/checkout with fetch-depth 0 (GitLab: GIT_DEPTH 0): the whole history, at ``rev``."""
    git("clone", "-q", str(repo.bare), str(where))
    git("checkout", "-q", rev, cwd=where)
    return where


def _uses_step(job: str) -> dict[str, Any]:
    """The example workflow's step that uses the action (the project, at a tag)."""
    steps = WORKFLOW["jobs"][job]["steps"]
    [step] = [s for s in steps if s.get("uses", "").endswith("/paletteai-reconciler@v0.1.0")]
    return step


def _push(repo: ConfigRepo, count: int) -> str:
    git("checkout", "-q", "pr", cwd=repo.work)
    path = repo.work / NOTEBOOKS
    path.write_text(re.sub(r"count: \d+", f"count: {count}", path.read_text(), count=1))
    git("commit", "-q", "-am", f"notebooks: {count} H100", cwd=repo.work)
    git("push", "-q", "origin", "pr", cwd=repo.work)
    return repo.head()


def test_the_config_repository_with_its_ci_files_validates_clean(config: tuple[ConfigRepo, str]) -> None:
    repo, _ = config
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
def test_the_github_action_validates_and_keeps_one_plan_comment(
    config: tuple[ConfigRepo, str], project: tuple[Path, str], tmp_path: Path
) -> None:
    repo, head = config
    action_path = tmp_path / "_actions" / "paletteai-reconciler"  # as GitHub unpacks it: no .git
    shutil.copytree(project[0], action_path, ignore=shutil.ignore_patterns(".git"))
    temp = tmp_path / "runner-temp"
    temp.mkdir()
    forge = FakeForge()
    with forge.serve() as api:
        env = {**_base_env(), "GITHUB_API_URL": api, "GITHUB_REPOSITORY": "acme/compute-config"}

        def job(name: str, rev: str) -> Any:
            workspace = _checkout(repo, tmp_path / f"{name}-{rev[:8]}", rev)
            github = {
                "action_path": str(action_path),
                "token": "ghs_test_token",
                "sha": rev,
                "event": {"pull_request": {"number": 7, "head": {"sha": rev}}},
            }
            # The first job installs; the later ones find the installed reconciler in the runner's
            # temporary directory (where the run step looks for it) and skip the install.
            skip = (
                ("Install the reconciler",)
                if (temp / "paletteai-reconciler" / "bin" / "reconciler").exists()
                else ()
            )
            return run_composite_action(
                ACTION, _uses_step(name)["with"], github, workspace, temp, env, skip=skip
            )

        validate = job("validate", head)
        assert validate.returncode == 0, validate.log()
        assert "::error" not in validate.log() and "::warning" not in validate.log()
        installed = validate.steps[0].stdout
        assert installed.startswith("reconciler 0.1.0 (commit "), installed

        first = job("plan", head)
        assert first.returncode == 0, first.log()
        assert first.outputs["run"]["exit-code"] == "0"
        [comment] = forge.threads["/repos/acme/compute-config#7"]
        posted = comment["body"]
        assert posted.endswith(Path(first.outputs["run"]["plan-file"]).read_text())
        assert "project-a/notebooks" in posted

        second = job("plan", _push(repo, 5))
        assert second.returncode == 0, second.log()
        [updated] = forge.threads["/repos/acme/compute-config#7"]
        assert updated["id"] == comment["id"] and updated["body"] != posted
        assert updated["body"].endswith(Path(second.outputs["run"]["plan-file"]).read_text())
        methods = [m for m, _p, _h in forge.requests if m != "GET"]
        assert methods == ["POST", "PATCH"]
        assert all(h.get("Authorization") == "Bearer ghs_test_token" for _m, _p, h in forge.requests)


@pytest.mark.timeout(INSTALL_TIMEOUT)
def test_the_gitlab_jobs_install_from_git_and_keep_one_note(
    config: tuple[ConfigRepo, str], project: tuple[Path, str], tmp_path: Path
) -> None:
    repo, _ = config
    venv = tmp_path / "image-python"  # the job image's Python
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    forge = FakeForge()
    overrides = {"RECONCILER_GIT_URL": f"file://{project[0]}", "RECONCILER_REF": TAG}
    with forge.serve() as api:
        env = _base_env()
        env["PATH"] = f"{venv / 'bin'}:{env['PATH']}"
        env.update(
            CI_API_V4_URL=f"{api}/api/v4",
            CI_PROJECT_ID="42",
            CI_MERGE_REQUEST_IID="3",
            CI_PIPELINE_SOURCE="merge_request_event",
            RECONCILER_NOTE_TOKEN="glpat-test",
        )
        head = git("rev-parse", "origin/pr", cwd=repo.work)
        workspace = _checkout(repo, tmp_path / "validate", head)
        validate = run_gitlab_job(GITLAB, "validate", workspace, {**env, "CI_COMMIT_SHA": head}, overrides)
        assert validate.returncode == 0, validate.stdout + validate.stderr
        assert f"reconciler 0.1.0 (commit {project[1]})" in validate.stdout
        assert json.loads((workspace / "validate.json").read_text()) == []

        notes = "/api/v4/projects/42/merge_requests/3/notes"
        for rev in (head, _push(repo, 3)):
            workspace = _checkout(repo, tmp_path / f"plan-{rev[:8]}", rev)
            # The image's Python already has the reconciler the validate job installed: no new install.
            env_rev = {**env, "CI_COMMIT_SHA": rev}
            plan = run_gitlab_job(GITLAB, "plan", workspace, env_rev, overrides, installed=True)
            assert plan.returncode == 0, plan.stdout + plan.stderr
            [note] = forge.threads[notes]
            assert note["body"].endswith((workspace / "plan.md").read_text())
        assert [m for m, _p, _h in forge.requests if m != "GET"] == ["POST", "PUT"]
        assert all(h.get("Private-Token") == "glpat-test" for _m, _p, h in forge.requests)


@pytest.mark.timeout(INSTALL_TIMEOUT)
def test_pre_commit_runs_the_hook_from_the_project(
    config: tuple[ConfigRepo, str], pre_commit_home: Path
) -> None:
    repo, _ = config
    env = {**_base_env(), "PRE_COMMIT_HOME": str(pre_commit_home), "PRE_COMMIT_COLOR": "never"}
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


def _sample_config_repo(tmp_path: Path, release: tuple[Path, str]) -> Path:
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


def _run_hook(repo: Path, home: Path) -> subprocess.CompletedProcess[str]:
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
    done = _run_hook(_sample_config_repo(tmp_path, release), pre_commit_home)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "reconciler validate" in done.stdout and "Passed" in done.stdout


@pytest.mark.timeout(INSTALL_TIMEOUT)
def test_pre_commit_runs_the_hook_and_fails_on_a_broken_file(
    tmp_path: Path, pre_commit_home: Path, release: tuple[Path, str]
) -> None:
    repo = _sample_config_repo(tmp_path, release)
    broken = repo / "broken.yaml"
    broken.write_text(
        "apiVersion: palette.ai/v1alpha1\nkind: MLPlatform\nmetadata: {name: Bad_Name, namespace: x}\n"
    )
    git("add", "-A", cwd=repo)
    done = _run_hook(repo, pre_commit_home)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "broken.yaml" in done.stdout
