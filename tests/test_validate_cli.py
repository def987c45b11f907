"""``reconciler validate``: exit codes and the text, json and github formats (docs/planning.md)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from reconciler.cli_app import app
from tests._manifests_support import SAMPLE_REPO

CORPUS = Path(__file__).parent / "data" / "manifests"
runner = CliRunner()


def _bad_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "profiles").mkdir(parents=True)
    shutil.copy(CORPUS / "nodecount-4.yaml", repo / "profiles" / "prof.yaml")
    shutil.copy(CORPUS / "settings-inline-api-key.yaml", repo / "settings.yaml")
    return repo


def test_sample_repo_is_valid() -> None:
    result = runner.invoke(app, ["validate", str(SAMPLE_REPO)])
    assert result.exit_code == 0, result.output
    files = len(list(SAMPLE_REPO.rglob("*.yaml")))  # one resource per file in the sample
    assert f"{files} resources in {files} files, all valid" in result.output


def test_text_format_shows_position_resource_field_and_what_is_allowed(tmp_path: Path) -> None:
    repo = _bad_repo(tmp_path)
    result = runner.invoke(app, ["validate", str(repo)])
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[0] == (
        f"{repo.as_posix()}/profiles/prof.yaml:6:16: error: ComputeProfile ns/prof: "
        "spec.controlPlaneDefaults.nodeCount: must be 1, 3 or 5 (2 only when spec.edge.isTwoNode is true); "
        "got 4"
    )
    assert lines[1].startswith(
        f"{repo.as_posix()}/settings.yaml:8:5: error: Settings ns/palette: spec.palette.apiKey:"
    )
    assert lines[-1] == f"2 errors in {repo.as_posix()}"


def test_json_format_is_a_list_of_diagnostics(tmp_path: Path) -> None:
    repo = _bad_repo(tmp_path)
    result = runner.invoke(app, ["validate", str(repo), "--format", "json"])
    assert result.exit_code == 1
    items = json.loads(result.output)
    assert items[0] == {
        "file": f"{repo.as_posix()}/profiles/prof.yaml",
        "line": 6,
        "column": 16,
        "severity": "error",
        "kind": "ComputeProfile",
        "namespace": "ns",
        "name": "prof",
        "message": "spec.controlPlaneDefaults.nodeCount: must be 1, 3 or 5 (2 only when spec.edge.isTwoNode "
        "is true); got 4",
    }
    assert [i["line"] for i in items] == [6, 8]


def test_json_format_of_a_valid_tree_is_an_empty_list() -> None:
    result = runner.invoke(app, ["validate", str(SAMPLE_REPO), "--format", "json"])
    assert result.exit_code == 0
    assert json.loads(result.output) == []


def test_github_format_prints_annotations(tmp_path: Path) -> None:
    repo = _bad_repo(tmp_path)
    result = runner.invoke(app, ["validate", str(repo), "--format", "github"])
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(
        f"::error file={repo.as_posix()}/profiles/prof.yaml,line=6,col=16::ComputeProfile"
    )
    assert lines[1].startswith(f"::error file={repo.as_posix()}/settings.yaml,line=8,col=5::")


def test_github_format_escapes_newlines_and_percent(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text("a: [unclosed\n")
    result = runner.invoke(app, ["validate", str(tmp_path), "--format", "github"])
    assert result.exit_code == 1
    assert len(result.output.splitlines()) == 1


@pytest.mark.parametrize("fmt", ["text", "json", "github"])
def test_inline_secret_never_reaches_the_output(tmp_path: Path, fmt: str) -> None:
    result = runner.invoke(app, ["validate", str(_bad_repo(tmp_path)), "--format", fmt])
    assert result.exit_code == 1
    assert "DO-NOT-ECHO" not in result.output
    assert "apiKeySecretRef" in result.output


def test_single_file_path_is_reported_as_given(tmp_path: Path) -> None:
    path = _bad_repo(tmp_path) / "profiles" / "prof.yaml"
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 1
    assert result.output.startswith(f"{path.as_posix()}:6:16: error:")


def test_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["validate", str(tmp_path / "nope")])
    assert result.exit_code == 2
    assert "no such file or directory" in result.output


def test_all_errors_of_a_tree_are_reported_at_once() -> None:
    result = runner.invoke(app, ["validate", str(CORPUS), "--format", "json"])
    assert result.exit_code == 1
    files = {Path(item["file"]).name for item in json.loads(result.output)}
    assert files == {p.name for p in CORPUS.glob("*.yaml")}


def test_warnings_are_shown_but_do_not_fail(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(SAMPLE_REPO, repo, ignore=shutil.ignore_patterns("*.json"))
    platform = repo / "project-a" / "platforms" / "notebooks.yaml"
    platform.write_text(platform.read_text().replace("count: 4", "count: 7"))
    result = runner.invoke(app, ["validate", str(repo)])
    assert result.exit_code == 0, result.output
    expected = "notebooks.yaml:17:14: warning: MLPlatform project-a/notebooks: spec.gpus[0].count: 7 NVIDIA"
    assert expected in result.output
    assert result.output.splitlines()[-1].endswith("all valid, 1 warning")
    github = runner.invoke(app, ["validate", str(repo), "--format", "github"])
    assert github.exit_code == 0
    assert github.output.startswith(f"::warning file={platform.as_posix()},line=17,col=14::")
