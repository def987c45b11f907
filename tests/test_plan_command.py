"""``reconciler plan`` end to end: the sample repository, git revisions, snapshots and the emulator."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from reconciler.commands import plan as cmd
from reconciler.snapshots import load_snapshot
from tests._git_support import RemoteRepo
from tests._palette_support import KEY, running

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample-repo"
INVENTORY = SAMPLE / "inventory.json"
UIDS = {
    h["metadata"]["name"]: h["metadata"]["uid"]
    for h in json.loads(INVENTORY.read_text(encoding="utf-8"))["edgeHosts"]
}


def _json(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def _copy_sample(tmp_path: Path) -> Path:
    target = tmp_path / "repo"
    shutil.copytree(SAMPLE, target, ignore=shutil.ignore_patterns("inventory.json", "README.md"))
    return target


def test_plan_sample_repo_offline_json_places_every_platform_as_documented(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cmd.run(str(SAMPLE), None, INVENTORY, None, 1, "json") == 0
    doc = _json(capsys)
    assert set(doc) == {"revision", "basis", "platforms", "pools", "workloads", "quotas", "diagnostics"}
    keys = [(p["namespace"], p["name"]) for p in doc["platforms"]]
    assert keys == sorted(keys) and len(keys) == 5
    prod = next(p for p in doc["platforms"] if p["name"] == "clearml-prod")
    assert prod["action"] == "create" and prod["gpus"] == {"NVIDIA-H100": 6}
    expected = sorted(UIDS[n] for n in ("gpu-h100-04", "gpu-h100-06", "cpu-worker-01"))
    assert prod["workers"] == expected
    assert prod["controlPlane"] == sorted(UIDS[n] for n in ("cp-01", "cp-02", "cp-03"))
    training = next(p for p in doc["platforms"] if p["name"] == "training")
    assert training["workers"] == sorted(UIDS[n] for n in ("gpu-a100-01", "gpu-a100-02"))


def test_plan_markdown_has_a_row_per_platform_with_host_names_and_free_capacity(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cmd.run(str(SAMPLE), None, INVENTORY, None, 1, "markdown") == 0
    out = capsys.readouterr().out
    summary = next(line for line in out.splitlines() if line.startswith("| Platforms |"))
    assert sum(int(cell) for cell in summary.strip("|").split("|")[1:]) == 5
    assert out.index(summary) < out.index("<details")
    row = next(line for line in out.splitlines() if "`project-a/clearml-prod`" in line)
    assert row.startswith("| create | `project-a/clearml-prod` | 6 x NVIDIA-H100 |")
    assert f"gpu-h100-04 (`{UIDS['gpu-h100-04']}`)" in row
    assert "NVIDIA-H100: 3 hosts, 24 GPUs" in out


def test_plan_text_prints_every_uid_unfolded_beside_its_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert cmd.run(str(SAMPLE), None, INVENTORY, None, 1, "text") == 0
    out = capsys.readouterr().out
    assert "Platforms: 5 create" in out
    line = next(line for line in out.splitlines() if " project-b/training " in line)
    for name in ("gpu-a100-01", "gpu-a100-02"):
        assert f"{name}={UIDS[name]}" in line


def test_plan_formats_say_the_same_as_the_json(capsys: pytest.CaptureFixture[str]) -> None:
    from reconciler.plan_report import render_markdown, render_text

    assert cmd.run(str(SAMPLE), None, INVENTORY, None, 1, "json") == 0
    doc = _json(capsys)
    names = {uid: name for name, uid in UIDS.items()}
    for fmt, render in (("markdown", render_markdown), ("text", render_text)):
        assert cmd.run(str(SAMPLE), None, INVENTORY, None, 1, fmt) == 0
        out = capsys.readouterr().out
        # The command adds only its basis (the first line) and the free-capacity line to what the
        # renderer makes of the JSON.
        assert out.splitlines()[0] == "planned at the work tree (no commit) against no status branch " + (
            "(a first start: nothing is recorded yet)"
        )
        assert _content(out)[1:] == _content(render(doc, names))


def _content(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("Free after this plan")]


@pytest.mark.parametrize(("inventory", "palette"), [(None, None), (INVENTORY, "http://127.0.0.1:9")])
def test_plan_needs_exactly_one_of_inventory_or_palette(
    inventory: Path | None, palette: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cmd.run(str(SAMPLE), None, inventory, palette, 1, "json") == 2
    assert "exactly one of --inventory FILE, --palette URL or --from-status" in capsys.readouterr().err


def test_plan_missing_inventory_file_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cmd.run(str(SAMPLE), None, tmp_path / "nope.json", None, 1, "json") == 2
    assert capsys.readouterr().err.startswith("error: cannot read inventory")


def test_plan_exit_1_when_a_platform_is_rejected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = _copy_sample(tmp_path)
    path = repo / "project-b" / "platforms" / "inference.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace("count: 2", "count: 64"), encoding="utf-8")
    assert cmd.run(str(repo), None, INVENTORY, None, 1, "json") == 1
    entry = next(p for p in _json(capsys)["platforms"] if p["name"] == "inference")
    assert entry["action"] == "rejected" and entry["reason"] == "InsufficientCompute"
    # gpu-l40s-02 (4 of the 8) went to the pool finetune-l40s, placed before inference by name; whisper's
    # pool, placed after it, has not taken gpu-l40s-03 yet.
    assert entry["message"] == "needs 64 NVIDIA-L40S GPUs, 4 available"


def test_plan_exit_1_when_a_platform_is_invalid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = _copy_sample(tmp_path)
    path = repo / "project-b" / "platforms" / "inference.yaml"
    text = path.read_text(encoding="utf-8").replace("triton-inference-profile", "no-such-profile")
    path.write_text(text, encoding="utf-8")
    assert cmd.run(str(repo), None, INVENTORY, None, 1, "json") == 1
    doc = _json(capsys)
    entry = next(p for p in doc["platforms"] if p["name"] == "inference")
    assert entry["action"] == "invalid" and entry["reason"] == "ReferenceNotFound"
    assert doc["diagnostics"]


def test_plan_git_work_tree_revision_and_rev(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    remote = RemoteRepo(tmp_path)
    files = {str(p.relative_to(SAMPLE)): p.read_bytes() for p in SAMPLE.rglob("*.yaml") if p.is_file()}
    first = remote.commit(files)
    assert cmd.run(str(remote.work), None, INVENTORY, None, 1, "json") == 0
    assert _json(capsys)["revision"] == first
    second = remote.commit({"project-b/platforms/inference.yaml": None})
    assert cmd.run(str(remote.bare), None, INVENTORY, None, 1, "json") == 0
    doc = _json(capsys)
    assert doc["revision"] == second and len(doc["platforms"]) == 4
    assert cmd.run(str(remote.bare), first, INVENTORY, None, 1, "json") == 0
    doc = _json(capsys)
    assert doc["revision"] == first and len(doc["platforms"]) == 5


def test_plan_unknown_revision_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    remote = RemoteRepo(tmp_path)
    remote.commit({"a.yaml": "---\n"})
    assert cmd.run(str(remote.bare), "no-such-rev", INVENTORY, None, 1, "json") == 2
    assert "no-such-rev" in capsys.readouterr().err


def test_plan_online_needs_the_api_key_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("PALETTE_API_KEY", raising=False)
    assert cmd.run(str(SAMPLE), None, None, "http://127.0.0.1:9", 1, "json") == 2
    assert "PALETTE_API_KEY" in capsys.readouterr().err


def test_plan_online_against_the_emulator_matches_offline(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cmd.run(str(SAMPLE), None, INVENTORY, None, 1, "json") == 0
    offline = _json(capsys)
    monkeypatch.setenv("PALETTE_API_KEY", KEY)
    with running(load_snapshot(INVENTORY).edge_hosts) as server:
        assert cmd.run(str(SAMPLE), None, None, server.url, 1, "json") == 0
    online = _json(capsys)
    kinds = (online.pop("basis")["observation"], offline.pop("basis")["observation"])
    assert kinds == ("palette", "inventory")
    assert online == offline


def test_plan_online_rejected_key_is_an_error_without_the_key(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    wrong = "pk-wrong-key-that-must-not-leak-0000"
    monkeypatch.setenv("PALETTE_API_KEY", wrong)
    with running(load_snapshot(INVENTORY).edge_hosts) as server:
        assert cmd.run(str(SAMPLE), None, None, server.url, 1, "json") == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("error: Palette at")
    assert wrong not in captured.err + captured.out


def test_plan_cli_wires_every_option(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from reconciler.cli_app import app

    result = CliRunner().invoke(
        app, ["plan", "--repo", str(SAMPLE), "--inventory", str(INVENTORY), "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["platforms"]


def test_plan_missing_repository_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cmd.run(str(tmp_path / "absent"), None, INVENTORY, None, 1, "json") == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_plan_single_manifest_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = [
        (SAMPLE / "project-b" / name).read_text(encoding="utf-8")
        for name in ("project.yaml", "settings.yaml", "computeprofile-a100.yaml", "platforms/inference.yaml")
    ]
    workloads = sorted((SAMPLE / "project-b").glob("workloadprofile-*.yaml"))
    docs += [w.read_text(encoding="utf-8") for w in workloads]
    path = tmp_path / "all.yaml"
    path.write_text("\n---\n".join(docs), encoding="utf-8")
    assert cmd.run(str(path), None, INVENTORY, None, 1, "json") == 0
    assert [p["name"] for p in _json(capsys)["platforms"]] == ["inference"]
