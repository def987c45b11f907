"""The GitLab jobs of the project, for real (tests/test_ci_integration.py says how)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests._ci_repo_support import (
    GITLAB,
    TAG,
    base_env,
    checkout,
    make_config,
    move_main,
    move_status,
    push_pr,
)
from tests._ci_support import FakeForge, run_gitlab_job
from tests._contract_support import ConfigRepo, git
from tests._release_support import INSTALL_TIMEOUT

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(INSTALL_TIMEOUT)
def test_the_gitlab_jobs_install_from_git_and_keep_one_note(
    ci_config: tuple[ConfigRepo, str], release: tuple[Path, str], tmp_path: Path
) -> None:
    repo, _ = ci_config
    venv = tmp_path / "image-python"  # the job image's Python
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    forge = FakeForge()
    overrides = {"RECONCILER_GIT_URL": f"file://{release[0]}", "RECONCILER_REF": TAG}
    with forge.serve() as api:
        env = base_env()
        env["PATH"] = f"{venv / 'bin'}:{env['PATH']}"
        env.update(
            CI_API_V4_URL=f"{api}/api/v4",
            CI_PROJECT_ID="42",
            CI_MERGE_REQUEST_IID="3",
            CI_MERGE_REQUEST_TARGET_BRANCH_NAME="main",
            CI_PIPELINE_SOURCE="merge_request_event",
            RECONCILER_NOTE_TOKEN="glpat-test",
        )
        head = git("rev-parse", "origin/pr", cwd=repo.work)
        workspace = checkout(repo, tmp_path / "validate", head)
        validate = run_gitlab_job(GITLAB, "validate", workspace, {**env, "CI_COMMIT_SHA": head}, overrides)
        assert validate.returncode == 0, validate.stdout + validate.stderr
        assert f"reconciler 0.1.0 (commit {release[1]})" in validate.stdout
        assert json.loads((workspace / "validate.json").read_text()) == []

        notes = "/api/v4/projects/42/merge_requests/3/notes"
        for rev in (head, push_pr(repo, 3)):
            workspace = checkout(repo, tmp_path / f"plan-{rev[:8]}", rev)
            # The image's Python already has the reconciler the validate job installed: no new install.
            env_rev = {**env, "CI_COMMIT_SHA": rev}
            plan = run_gitlab_job(GITLAB, "plan", workspace, env_rev, overrides, installed=True)
            assert plan.returncode == 0, plan.stdout + plan.stderr
            [note] = forge.threads[notes]
            assert note["body"].endswith((workspace / "plan.md").read_text())
        assert [m for m, _p, _h in forge.requests if m != "GET"] == ["POST", "PUT"]
        assert all(h.get("Private-Token") == "glpat-test" for _m, _p, h in forge.requests)


@pytest.mark.timeout(INSTALL_TIMEOUT)
def test_the_gitlab_plan_is_of_the_merge_and_the_replan_of_a_token_that_may_not_write_only_warns(
    release: tuple[Path, str], tmp_path: Path
) -> None:
    repo, head = make_config(tmp_path / "config", release)
    git("push", "-q", "origin", f"{head}:refs/merge-requests/3/head", cwd=repo.work)
    move_main(repo)
    venv = tmp_path / "image-python"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    forge = FakeForge()
    forge.merge_requests = [{"iid": 3, "sha": head, "target_branch": "main", "state": "opened"}]
    overrides = {"RECONCILER_GIT_URL": f"file://{release[0]}", "RECONCILER_REF": TAG}
    notes = "/api/v4/projects/42/merge_requests/3/notes"
    with forge.serve() as api:
        env = base_env()
        env["PATH"] = f"{venv / 'bin'}:{env['PATH']}"
        env.update(CI_API_V4_URL=f"{api}/api/v4", CI_PROJECT_ID="42", RECONCILER_NOTE_TOKEN="glpat-test")
        mr = {
            "CI_PIPELINE_SOURCE": "merge_request_event",
            "CI_MERGE_REQUEST_IID": "3",
            "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main",
            "CI_COMMIT_SHA": head,
        }
        workspace = checkout(repo, tmp_path / "plan", head)
        plan = run_gitlab_job(GITLAB, "plan", workspace, {**env, **mr}, overrides)
        assert plan.returncode == 0, plan.stdout + plan.stderr
        install = [line for line in GITLAB[".reconciler"]["before_script"] if "pip install" in line]
        assert install and '-c "$lock/requirements.lock"' in install[0], install
        text = (workspace / "plan.md").read_text()
        assert "project-a/notebooks" in text and "cpu-sandbox" not in text, text
        [note] = forge.threads[notes]

        move_status(repo)
        forge.read_only = True  # the token's role may not write notes (or it expired)
        main = git("rev-parse", "refs/heads/main", cwd=repo.bare)
        workspace = checkout(repo, tmp_path / "replan", main)
        schedule = {"CI_PIPELINE_SOURCE": "schedule", "CI_COMMIT_SHA": main, "CI_COMMIT_BRANCH": "main"}
        replan = run_gitlab_job(GITLAB, "replan", workspace, {**env, **schedule}, overrides)
        assert replan.returncode == 0, replan.stdout + replan.stderr
        assert "planning !3" in replan.stdout
        assert "warning: the plan was not posted as a note (HTTP 403" in replan.stdout
        assert "project-a/notebooks" in (workspace / "plan.md").read_text()
        assert forge.threads[notes] == [note]
        assert ("PUT", f"{notes}/{note['id']}") in [(m, p) for m, p, _h in forge.requests]
    assert GITLAB["plan"]["artifacts"]["expose_as"] == "Reconciler plan"
    assert [m for m, _p, _h in forge.requests if m != "GET"] == ["POST", "PUT"]
