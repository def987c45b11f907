"""``plan --what-if``, ``--path`` on plan and validate, and ``--version``.

The overlay and the path rule are pure and tested as such; one offline plan and one ``--from-status``
plan (no Palette, no key) check the command end to end.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from reconciler.source.overlay import WhatIfError, overlay, read_what_if, repository_path
from reconciler.version import _from_checkout, _from_file
from tests._ci_support import write_observed_status
from tests._contract_support import SAMPLE_INVENTORY, SAMPLE_REPO, git, make_config_repo, run_cli
from tests._git_support import git_run
from tests._manifests_support import WHAT_IF_WORKLOAD

ROOT = Path(__file__).resolve().parent.parent
OFFLINE = {"HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9", "NO_PROXY": ""}
NOTEBOOKS = "project-a/platforms/notebooks.yaml"


def test_overlay_adds_replaces_and_sorts() -> None:
    tree = [("a.yaml", b"a"), ("c/d.yaml", b"d")]
    merged = overlay(tree, [("c/d.yaml", b"new d"), ("b.yaml", b"b"), ("b.yaml", b"last b")])
    assert merged == [("a.yaml", b"a"), ("b.yaml", b"last b"), ("c/d.yaml", b"new d")]
    assert overlay(tree, []) == tree


def test_a_what_if_file_lands_at_its_path_in_the_checkout_else_at_the_root(tmp_path: Path) -> None:
    checkout = tmp_path / "repo"
    (checkout / "team").mkdir(parents=True)
    inside = checkout / "team" / "w.yaml"
    outside = tmp_path / "elsewhere" / "w.yaml"
    assert repository_path(inside, checkout) == "team/w.yaml"
    assert repository_path(outside, checkout) == "w.yaml"
    assert repository_path(outside, None) == "w.yaml"
    assert repository_path(outside, checkout, "clusters/prod") == "clusters/prod/w.yaml"


def test_unreadable_what_if_files_are_errors(tmp_path: Path) -> None:
    with pytest.raises(WhatIfError, match="No such file"):
        read_what_if([tmp_path / "missing.yaml"], None)
    with pytest.raises(WhatIfError, match="a directory"):
        read_what_if([tmp_path], None)
    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * (1024 * 1024 + 1))
    with pytest.raises(WhatIfError, match="1 MiB"):
        read_what_if([big], None)


def _workloads(result: subprocess.CompletedProcess[str]) -> dict[str, dict[str, Any]]:
    return {w["name"]: w for w in json.loads(result.stdout)["workloads"]}


def test_offline_what_if_adds_a_workload_and_replaces_a_file(tmp_path: Path) -> None:
    config = tmp_path / "config"
    shutil.copytree(SAMPLE_REPO, config)
    new = tmp_path / "new-workload.yaml"  # outside the checkout: lands at the root
    new.write_text(WHAT_IF_WORKLOAD)
    common = ("plan", "--repo", str(config), "--inventory", str(SAMPLE_INVENTORY), "--format", "json")
    before = run_cli(*common)
    result = run_cli(*common, "--what-if", str(new))
    assert before.returncode == result.returncode == 0, result.stderr
    assert "what-if-train" not in _workloads(before)
    added = _workloads(result)["what-if-train"]
    assert (added["pool"], added["action"]) == ("shared-a100", "pending")
    # A file inside the checkout replaces the revision's file at that path: an uncommitted edit of the
    # work tree, planned against the committed revision.
    repo = make_config_repo(tmp_path / "git")
    edited = repo.work / NOTEBOOKS
    edited.write_text(re.sub(r"count: \d+", "count: 40", edited.read_text(), count=1))
    at_rev = ("plan", "--repo", str(repo.work), "--rev", "HEAD", "--inventory", str(SAMPLE_INVENTORY))
    committed = run_cli(*at_rev, "--format", "json")
    rejected = run_cli(*at_rev, "--format", "json", "--what-if", str(edited))
    assert committed.returncode == 0 and rejected.returncode == 1, rejected.stdout
    platforms = [p for p in json.loads(rejected.stdout)["platforms"] if p["name"] == "notebooks"]
    assert [(p["action"], p["reason"]) for p in platforms] == [("rejected", "GPULimitExceeded")]


def test_from_status_what_if_needs_no_palette_and_no_key(tmp_path: Path) -> None:
    repo = make_config_repo(tmp_path)
    hosts = json.loads(SAMPLE_INVENTORY.read_text())["edgeHosts"]
    write_observed_status(repo, hosts, "https://api.spectrocloud.com", "6514216503b1d1cd4f1bdc44")
    git("fetch", "-q", "origin", "reconciler/status:reconciler/status", cwd=repo.work)
    new = tmp_path / "w.yaml"
    new.write_text(WHAT_IF_WORKLOAD)
    args = ("plan", "--repo", str(repo.work), "--from-status", "--format", "json", "--what-if", str(new))
    result = run_cli(*args, env=OFFLINE)
    assert result.returncode == 0, result.stderr
    assert _workloads(result)["what-if-train"]["action"] == "pending"
    missing = run_cli(*args[:-1], str(tmp_path / "nope.yaml"), env=OFFLINE)
    assert missing.returncode == 2 and "nope.yaml" in missing.stderr


def test_path_reads_only_that_subtree_in_validate_and_plan(tmp_path: Path) -> None:
    validate = run_cli("validate", str(SAMPLE_REPO), "--path", "project-a", "--format", "json")
    assert validate.returncode == 0 and json.loads(validate.stdout) == []
    text = run_cli("validate", str(SAMPLE_REPO), "--path", "./project-a/")
    files = len(list((SAMPLE_REPO / "project-a").rglob("*.yaml")))
    assert f"{files} resources in {files} files, all valid" in text.stdout
    repo = make_config_repo(tmp_path)
    for where in (str(repo.work), str(repo.bare)):  # a directory, and git objects
        plan = run_cli(
            "plan",
            "--repo",
            where,
            "--path",
            "project-a",
            "--inventory",
            str(SAMPLE_INVENTORY),
            "--format",
            "json",
        )
        assert plan.returncode == 0, plan.stderr
        doc = json.loads(plan.stdout)
        assert {p["namespace"] for p in doc["platforms"]} == {"project-a"} and doc["workloads"] == []
        typo = run_cli("plan", "--repo", where, "--path", "project-z", "--inventory", str(SAMPLE_INVENTORY))
        assert typo.returncode == 2 and "no such directory" in typo.stderr
    outside = run_cli("validate", str(SAMPLE_REPO), "--path", "../x")
    assert outside.returncode == 2 and "inside the repository" in outside.stdout


def test_version_names_the_commit_of_this_checkout() -> None:
    result = run_cli("--version")
    assert result.returncode == 0
    head = git_run("rev-parse", "HEAD", cwd=ROOT)
    if head.returncode != 0:
        pytest.skip("not a git checkout")
    assert re.fullmatch(
        rf"reconciler 0\.1\.0 \(commit {head.stdout.strip()}( with local changes)?\)\n", result.stdout
    )


def test_version_reads_the_build_file_and_ignores_a_repository_around_a_virtualenv(tmp_path: Path) -> None:
    package = tmp_path / "site-packages" / "reconciler"
    package.mkdir(parents=True)
    assert _from_file(package) is None
    (package / "COMMIT").write_text("0123456789abcdef0123456789abcdef01234567\n")
    assert _from_file(package) == "0123456789abcdef0123456789abcdef01234567"
    git("init", "-q", str(tmp_path))  # a config repo holding a .venv
    assert _from_checkout(package) is None
