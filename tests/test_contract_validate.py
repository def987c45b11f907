"""Contract of ``reconciler validate PATH [--format text|json|github]`` (docs/validation.md), black box."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

from tests._contract_support import (
    API_KEY,
    DIAGNOSTIC_KEYS,
    SAMPLE_REPO,
    load_json,
    run_cli,
)

GITHUB_LINE = re.compile(r"^::(error|warning) file=([^,]+),line=(\d+),col=(\d+)::(.+)$")

BAD_PLATFORM = """\
apiVersion: palette.ai/v1alpha1
kind: MLPlatform
metadata:
  name: Bad_Name
  namespace: project-x
spec:
  gpus:
    - family: NVIDIA-H100
      count: -1
"""


def _json_diagnostics(*args: str) -> tuple[int, list[dict[str, Any]]]:
    result = run_cli("validate", *args, "--format", "json")
    data = load_json(result.stdout)
    assert isinstance(data, list)
    for item in data:
        assert set(item) == DIAGNOSTIC_KEYS, item
    return result.returncode, data


def test_valid_sample_repo_exits_zero_in_every_format() -> None:
    assert _json_diagnostics(str(SAMPLE_REPO)) == (0, [])
    github = run_cli("validate", str(SAMPLE_REPO), "--format", "github")
    assert github.returncode == 0
    assert not [line for line in github.stdout.splitlines() if line.startswith("::error")]
    text = run_cli("validate", str(SAMPLE_REPO))
    assert text.returncode == 0
    assert "valid" in text.stdout


def test_json_diagnostics_have_exactly_the_contract_keys_and_positions(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(BAD_PLATFORM)
    code, diags = _json_diagnostics(str(tmp_path))
    assert code == 1
    by_line = {d["line"]: d for d in diags}
    name_diag = by_line[4]
    assert name_diag["column"] == 9
    assert name_diag["severity"] == "error"
    assert (name_diag["kind"], name_diag["namespace"], name_diag["name"]) == (
        "MLPlatform",
        "project-x",
        "Bad_Name",
    )
    assert "DNS-1123" in name_diag["message"]
    assert Path(name_diag["file"]).name == "bad.yaml"
    count_diag = by_line[9]
    assert "spec.gpus[0].count" in count_diag["message"]
    for diag in diags:
        assert isinstance(diag["line"], int) and diag["line"] >= 1
        assert isinstance(diag["column"], int) and diag["column"] >= 1


def test_github_and_text_formats_give_one_line_per_diagnostic(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(BAD_PLATFORM)
    _, diags = _json_diagnostics(str(tmp_path))
    result = run_cli("validate", str(tmp_path), "--format", "github")
    assert result.returncode == 1
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    matches = [GITHUB_LINE.match(line) for line in lines]
    assert all(matches), lines
    seen = sorted((m.group(2), int(m.group(3)), int(m.group(4))) for m in matches if m)
    assert seen == sorted((d["file"], d["line"], d["column"]) for d in diags)
    assert {m.group(1) for m in matches if m} == {"error"}
    text = run_cli("validate", str(tmp_path))
    assert text.returncode == 1
    assert f"{(tmp_path / 'bad.yaml').as_posix()}:4:9" in text.stdout


def test_github_annotation_paths_are_relative_to_where_validate_runs(tmp_path: Path) -> None:
    """Run from a repository root with ``.``: GitHub needs repo-relative paths to place annotations."""
    (tmp_path / "platforms").mkdir()
    (tmp_path / "platforms" / "bad.yaml").write_text(BAD_PLATFORM)
    result = run_cli("validate", ".", "--format", "github", cwd=tmp_path)
    files = {m.group(2) for m in map(GITHUB_LINE.match, result.stdout.splitlines()) if m}
    assert files == {"platforms/bad.yaml"}


def test_nonexistent_path_is_an_error_not_a_crash(tmp_path: Path) -> None:
    """docs/planning.md: an unreadable PATH exits 2, and the error is still reported in the format."""
    missing = tmp_path / "nope"
    code, diags = _json_diagnostics(str(missing))
    assert code == 2
    assert len(diags) == 1 and diags[0]["severity"] == "error"
    assert diags[0]["file"] == missing.as_posix()
    assert run_cli("validate", str(missing), "--format", "github").stdout.startswith("::error file=")


def test_single_self_contained_file_validates_alone(tmp_path: Path) -> None:
    profile = SAMPLE_REPO / "project-a" / "computeprofile-edge.yaml"
    assert _json_diagnostics(str(profile)) == (0, [])
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD_PLATFORM)
    code, diags = _json_diagnostics(str(bad))
    assert code == 1
    assert {d["file"] for d in diags} == {bad.as_posix()}


def test_a_single_sample_file_is_valid_alone_its_references_only_warned() -> None:
    """A lone file cannot see its namespace (a pre-commit hook passes files one by one): unresolved
    references are warnings there; the directory run (above) checks them as errors."""
    code, diags = _json_diagnostics(str(SAMPLE_REPO / "project-a" / "platforms" / "clearml-prod.yaml"))
    assert code == 0
    assert diags and {d["severity"] for d in diags} == {"warning"}
    assert all("ReferenceNotFound" in d["message"] for d in diags)


def test_unknown_kind_and_duplicate_identity_are_errors(tmp_path: Path) -> None:
    shutil.copytree(SAMPLE_REPO, tmp_path / "repo")
    repo = tmp_path / "repo"
    (repo / "foreign.yaml").write_text(
        "apiVersion: palette.ai/v1alpha1\nkind: Gizmo\nmetadata: {name: g, namespace: project-a}\n"
    )
    original = repo / "project-a" / "platforms" / "notebooks.yaml"
    (repo / "copy.yaml").write_text(original.read_text())
    code, diags = _json_diagnostics(str(repo))
    assert code == 1
    assert any(Path(d["file"]).name == "foreign.yaml" and d["severity"] == "error" for d in diags)
    duplicate_files = {Path(d["file"]).name for d in diags if d["name"] == "notebooks"}
    assert duplicate_files == {"copy.yaml", "notebooks.yaml"}


def test_inline_api_key_is_an_error_that_never_echoes_the_value(tmp_path: Path) -> None:
    (tmp_path / "settings.yaml").write_text(
        "apiVersion: mural.sh/v1alpha1\nkind: Settings\nmetadata: {name: palette, namespace: project-a}\n"
        "spec:\n  palette:\n    hostUrl: https://api.spectrocloud.com\n    tenant: acme\n"
        f'    defaultProjectID: "6514216503b1d1cd4f1bdc44"\n    apiKey: {API_KEY}\n'
    )
    code, diags = _json_diagnostics(str(tmp_path))
    assert code == 1
    assert any(d["kind"] == "Settings" and "apiKey" in d["message"] for d in diags)
    assert run_cli("validate", str(tmp_path), "--format", "github").returncode == 1


def test_a_path_that_is_a_link_is_followed_but_links_inside_are_not(tmp_path: Path) -> None:
    linked_dir = tmp_path / "linked-repo"
    linked_dir.symlink_to(SAMPLE_REPO, target_is_directory=True)
    assert _json_diagnostics(str(linked_dir)) == (0, [])
    inside = tmp_path / "with-link"
    inside.mkdir()
    (inside / "profile.yaml").symlink_to(SAMPLE_REPO / "project-a" / "computeprofile-edge.yaml")
    code, diags = _json_diagnostics(str(inside))
    assert code == 1
    assert [Path(d["file"]).name for d in diags] == ["profile.yaml"]
    assert "link" in diags[0]["message"]


SECTION_3_ERRORS = """\
apiVersion: palette.ai/v1alpha1
kind: MLPlatform
metadata: {name: no-namespace}
spec: {}
---
apiVersion: palette.ai/v1alpha1
kind: MLPlatform
metadata: {name: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa, namespace: ns}
spec: {}
---
apiVersion: palette.ai/v1alpha1
kind: ComputeProfile
metadata: {name: two, namespace: ns}
spec:
  controlPlaneDefaults: {nodeCount: 2}
  minWorkerNode: 3
---
apiVersion: mural.spectrocloud.com/v1alpha1
kind: WorkloadProfile
metadata:
  name: wp
  namespace: ns
  labels: {palette.ai/min-nodes: "0"}
spec: {}
---
apiVersion: palette.ai/v1alpha1
kind: ComputeProfile
metadata: {name: nocp, namespace: ns}
spec: {}
---
apiVersion: palette.ai/v1alpha1
kind: MLPlatform
metadata: {name: p1, namespace: ns2}
spec:
  computeProfileRef: {name: x}
---
apiVersion: mural.sh/v1alpha1
kind: Project
metadata: {name: ns3, namespace: ns3}
spec: {}
"""


def test_section_3_rules_are_reported_at_their_line(tmp_path: Path) -> None:
    """Identity, DNS-1123 names, nodeCount, unknown fields, min-nodes, required fields, references."""
    expected = {
        3: "metadata.namespace",
        8: "DNS-1123",
        15: "nodeCount",
        16: "minWorkerNode",
        23: "palette.ai/min-nodes",
        29: "spec.controlPlaneDefaults",
        35: "spec.computeProfileRef",
        40: "spec.computeProfileRef",
    }
    (tmp_path / "rules.yaml").write_text(SECTION_3_ERRORS)
    code, diags = _json_diagnostics(str(tmp_path))
    assert code == 1
    assert sorted(d["line"] for d in diags) == sorted(expected)
    for diag in diags:
        assert expected[diag["line"]] in diag["message"], diag
