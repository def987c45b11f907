"""The GitHub Action of the project, for real (tests/test_ci_integration.py says how)."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tests._ci_repo_support import (
    ACTION,
    Runner,
    base_env,
    checkout,
    make_config,
    move_main,
    move_status,
    pull_request_event,
    push_pr,
    uses_step,
)
from tests._ci_support import FakeForge, evaluate, run_composite_action
from tests._contract_support import ConfigRepo, git
from tests._release_support import INSTALL_TIMEOUT

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(INSTALL_TIMEOUT)
def test_the_github_action_validates_and_keeps_one_plan_comment(
    ci_config: tuple[ConfigRepo, str], release: tuple[Path, str], tmp_path: Path
) -> None:
    repo, head = ci_config
    action_path = tmp_path / "_actions" / "paletteai-reconciler"  # as GitHub unpacks it: no .git
    shutil.copytree(release[0], action_path, ignore=shutil.ignore_patterns(".git"))
    temp = tmp_path / "runner-temp"
    temp.mkdir()
    forge = FakeForge()
    with forge.serve() as api:
        env = {**base_env(), "GITHUB_API_URL": api, "GITHUB_REPOSITORY": "acme/compute-config"}

        def job(name: str, rev: str) -> Any:
            workspace = checkout(repo, tmp_path / f"{name}-{rev[:8]}", rev)
            github = {
                "action_path": str(action_path),
                "token": "ghs_test_token",
                "sha": rev,
                "event": {"pull_request": {"number": 7, "head": {"sha": rev}, "base": {"ref": "main"}}},
            }
            # The first job installs; the later ones find the installed reconciler in the runner's
            # temporary directory (where the run step looks for it) and skip the install.
            skip = (
                ("Install the reconciler",)
                if (temp / "paletteai-reconciler" / "bin" / "reconciler").exists()
                else ()
            )
            return run_composite_action(
                ACTION, uses_step(name)["with"], github, workspace, temp, env, skip=skip
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

        second = job("plan", push_pr(repo, 5))
        assert second.returncode == 0, second.log()
        [updated] = forge.threads["/repos/acme/compute-config#7"]
        assert updated["id"] == comment["id"] and updated["body"] != posted
        assert updated["body"].endswith(Path(second.outputs["run"]["plan-file"]).read_text())
        methods = [m for m, _p, _h in forge.requests if m != "GET"]
        assert methods == ["POST", "PATCH"]
        assert all(h.get("Authorization") == "Bearer ghs_test_token" for _m, _p, h in forge.requests)


@pytest.mark.timeout(INSTALL_TIMEOUT)
def test_a_fork_pull_request_is_planned_merged_onto_the_moved_base_into_the_job_summary(
    release: tuple[Path, str], ci_runner: Runner, tmp_path: Path
) -> None:
    """A fork's pull request has a read-only token: the comment is refused 403, the plan is in the job
    summary, and a clean plan passes. It plans the merge onto main's tip of now (cpu-sandbox gone)."""
    repo, head = make_config(tmp_path / "config", release)
    move_main(repo)
    forge = FakeForge(read_only=True)
    with forge.serve() as api:
        env = {**base_env(), "GITHUB_API_URL": api, "GITHUB_REPOSITORY": "acme/compute-config"}
        github = {"token": "ghs_read_only", "sha": head, "event": pull_request_event(7, head)}
        workspace = checkout(repo, tmp_path / "plan", head)
        run = ci_runner.run(uses_step("plan")["with"], github, workspace, env)
    assert run.returncode == 0, run.log()
    assert run.outputs["run"]["exit-code"] == "0"
    plan = Path(run.outputs["run"]["plan-file"]).read_text()
    assert "project-a/notebooks" in plan and "cpu-sandbox" not in plan, plan
    assert plan in run.summary
    assert "::warning::the plan was not posted as a comment (HTTP 403" in run.log()
    assert forge.threads == {}
    assert [m for m, _p, _h in forge.requests] == ["GET", "POST"]


@pytest.mark.timeout(INSTALL_TIMEOUT)
def test_a_replan_after_the_status_branch_moved_edits_the_one_comment_and_a_stale_plan_fails(
    release: tuple[Path, str], ci_runner: Runner, tmp_path: Path
) -> None:
    """The workflow's replan job (no pull-request event: a schedule) plans the open pull request again
    and edits its one comment; a plan made on a status tip that is no longer the branch's exits 3 and
    fails the check, with the comment saying it is stale."""
    repo, head = make_config(tmp_path / "config", release)
    forge = FakeForge()
    with forge.serve() as api:
        env = {**base_env(), "GITHUB_API_URL": api, "GITHUB_REPOSITORY": "acme/compute-config"}

        def job(name: str, with_inputs: Mapping[str, str], event: dict[str, Any]) -> Any:
            workspace = checkout(repo, tmp_path / name, head)
            return ci_runner.run(
                with_inputs, {"token": "ghs_test", "sha": head, "event": event}, workspace, env
            )

        first = job("plan", uses_step("plan")["with"], pull_request_event(7, head))
        assert first.returncode == 0, first.log()
        [comment] = forge.threads["/repos/acme/compute-config#7"]
        posted = comment["body"]

        old_tip = git("rev-parse", "refs/heads/reconciler/status", cwd=repo.bare)
        new_tip = move_status(repo)
        matrix = {"matrix": {"pull": {"number": 7, "headRefOid": head}}}
        replan_with = {k: evaluate(str(v), matrix) for k, v in uses_step("replan")["with"].items()}
        assert replan_with == {"command": "plan", "rev": head, "base": "main", "pull-request": "7"}
        replan = job("replan", replan_with, {})
        assert replan.returncode == 0, replan.log()
        [edited] = forge.threads["/repos/acme/compute-config#7"]
        assert edited["id"] == comment["id"] and edited["body"] != posted
        assert new_tip[:7] in edited["body"] and old_tip[:7] not in edited["body"]

        stale = job("stale", {**replan_with, "expect-status": old_tip}, {})
        assert stale.outputs["run"]["exit-code"] == "3", stale.log()
        assert stale.returncode == 3 and "::error::stale plan" in stale.log()
        [marked] = forge.threads["/repos/acme/compute-config#7"]
        assert marked["id"] == comment["id"] and "**Stale plan**" in marked["body"]
    assert [m for m, _p, _h in forge.requests if m != "GET"] == ["POST", "PATCH", "PATCH"]
