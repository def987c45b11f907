"""``validate`` messages that point the right way: a duration without its unit says so (not "quote
it"), what the plan keeps is not announced as rejected, and root causes come before their cascades."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from typer.testing import CliRunner

from reconciler.cli_app import app
from tests._manifests_support import SAMPLE_REPO

runner = CliRunner()


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    shutil.copytree(SAMPLE_REPO, repo)
    return repo


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1))


def _messages(repo: Path) -> list[dict[str, object]]:
    result = runner.invoke(app, ["validate", str(repo), "--format", "json"])
    found: list[dict[str, object]] = json.loads(result.output)
    return found


def test_a_duration_without_its_unit_says_the_unit_is_missing(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    policy = repo / "project-a" / "scalingpolicy-gpu-autoscale.yaml"
    _edit(policy, "cooldownDuration: 15m", "cooldownDuration: 15")
    [error] = [d for d in _messages(repo) if d["severity"] == "error"]
    message = str(error["message"])
    assert "spec.cooldownDuration: must be a duration with its unit, such as 30s, 5m or 1h30m" in message
    assert "quote" not in message and message.endswith("got 15")


def test_a_lowered_limit_is_not_announced_as_a_rejection_of_an_admitted_workload(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    _edit(repo / "project-b" / "computeprofile-a100.yaml", "'NVIDIA-A100': 16", "'NVIDIA-A100': 1")
    found = [d for d in _messages(repo) if "GPULimitExceeded" in str(d["message"])]
    assert all("will be rejected" not in str(d["message"]) for d in found)
    warnings = [str(d["message"]) for d in found if d["kind"] == "AIWorkload"]
    assert warnings, "the lowered limit is warned about"
    for message in warnings:
        assert "will be rejected" not in message
        assert "unless it is already admitted (lowered limits evict nothing)" in message, message
        assert "plan --from-status says" in message


def test_root_causes_are_listed_before_the_errors_that_follow_from_them(tmp_path: Path) -> None:
    """The profile sorts last by file name; the platforms that reference it would come first."""
    repo = _repo(tmp_path)
    profile = repo / "project-a" / "zz-computeprofile-edge.yaml"
    (repo / "project-a" / "computeprofile-edge.yaml").rename(profile)
    _edit(profile, "nodeCount: 3", "nodeCount: 4")
    result = runner.invoke(app, ["validate", str(repo)])
    assert result.exit_code == 1
    errors = [line for line in result.output.splitlines() if ": error: " in line]
    cascades = [i for i, line in enumerate(errors) if re.search(r"is invalid \(see its errors\)", line)]
    assert cascades, result.output
    assert "zz-computeprofile-edge.yaml" in errors[0] and "nodeCount" in errors[0], errors[0]
    assert min(cascades) > 0 and all(
        "is invalid (see its errors)" in errors[i] for i in range(min(cascades), len(errors))
    )
