"""Contract of ``reconciler plan`` (docs/planning.md), black box: output shape, sorting, exit codes."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests._contract_support import (
    ACTIONS,
    DIAGNOSTIC_KEYS,
    PLATFORM_KEYS,
    REASONS,
    SAMPLE_INVENTORY,
    SAMPLE_PLATFORMS,
    SAMPLE_REPO,
    ConfigRepo,
    git,
    load_json,
    make_config_repo,
    run_cli,
)

POOL_KEYS = PLATFORM_KEYS | {"mode", "capacity", "mig", "migConfig", "scaling"}
WORKLOAD_KEYS = {
    "namespace",
    "name",
    "pool",
    "action",
    "reason",
    "message",
    "replicas",
    "gpus",
    "mig",
    "bound",
    "position",
    "environment",
    "candidates",
}
WORKLOAD_ACTIONS = {"admit", "admitted", "pending", "remove", "rejected", "invalid", "suspended"}


def _plan(*args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    result = run_cli("plan", *args, "--format", "json", env=env)
    assert result.returncode in (0, 1), result.stderr
    data = load_json(result.stdout)  # exactly one JSON document on stdout
    assert isinstance(data, dict)
    return result.returncode, data


def check_plan_shape(plan: dict[str, Any]) -> None:
    """Everything section 8 promises about one plan object."""
    assert set(plan) == {"revision", "basis", "platforms", "pools", "workloads", "quotas", "diagnostics"}
    assert set(plan["basis"]) == {"revision", "statusCommit", "statusTime", "observation"}
    assert plan["basis"]["revision"] == plan["revision"]
    assert plan["basis"]["observation"] in ("palette", "inventory", "status", "none")
    assert plan["revision"] is None or re.fullmatch(r"[0-9a-f]{40}", plan["revision"])
    platforms = plan["platforms"]
    keys = [(p["namespace"], p["name"]) for p in platforms]
    assert keys == sorted(keys), "platforms are sorted by namespace, then name"
    for p in platforms:
        assert set(p) == PLATFORM_KEYS, p
        assert p["action"] in ACTIONS
        assert p["reason"] in REASONS
        assert isinstance(p["message"], str)
        assert p["controlPlane"] == sorted(p["controlPlane"])
        assert p["workers"] == sorted(p["workers"])
        assert all(isinstance(h, str) for h in p["controlPlane"] + p["workers"])
        assert isinstance(p["gpus"], dict)
        assert all(isinstance(v, int) for v in p["gpus"].values())
    pools = plan["pools"]
    assert [(p["namespace"], p["name"]) for p in pools] == sorted((p["namespace"], p["name"]) for p in pools)
    for p in pools:
        # ``profiles`` on an in-place update of a bundle-built pool; ``provisionedFor`` on a pool a workload
        # provisioned for itself (named after it).
        assert POOL_KEYS <= set(p) <= POOL_KEYS | {"profiles", "provisionedFor"}, p
        assert p.get("provisionedFor", p["name"]) == p["name"]
        assert p["mode"] in ("shared", "dedicated", None) and p["action"] in ACTIONS
        assert p["controlPlane"] == sorted(p["controlPlane"]) and p["workers"] == sorted(p["workers"])
        for family, c in p["capacity"].items():
            assert set(c) == {"total", "admitted", "free"} and c["total"] == c["admitted"] + c["free"], family
        assert isinstance(p["mig"], dict) and (p["migConfig"] is None) == (p["mig"] == {})
        assert set(p["scaling"]) == {"policy", "decision", "reason", "message"}
        assert p["scaling"]["decision"] in ("none", "up", "down", "hold")
    workloads = plan["workloads"]
    keys = [(w["namespace"], w["name"]) for w in workloads]
    assert keys == sorted(keys), "workloads are sorted by namespace, then name"
    for w in workloads:
        assert set(w) == WORKLOAD_KEYS, w
        assert w["action"] in WORKLOAD_ACTIONS
        assert all(isinstance(v, int) for v in w["gpus"].values())
        assert all(set(m) == {"host", "gpu", "profile", "start", "replica"} for m in w["mig"])
        assert isinstance(w["replicas"], int) and w["replicas"] >= 1
        assert all(set(b) == {"replica", "host", "gpus"} for b in w["bound"])
        assert sum(len(b["gpus"]) for b in w["bound"]) == sum(w["gpus"].values())
        assert w["position"] is None or w["action"] == "pending"
        assert w["environment"] is None or isinstance(w["environment"], str)
        assert all(set(c) == {"pool", "reason", "message"} for c in w["candidates"])
    for q in plan["quotas"]:
        assert set(q) == {"namespace", "family", "used", "quota"}
    for d in plan["diagnostics"]:
        assert set(d) == DIAGNOSTIC_KEYS


@pytest.fixture(scope="module")
def sample_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample repository as a plain directory (not a git work tree)."""
    root = tmp_path_factory.mktemp("plan-dir") / "repo"
    shutil.copytree(SAMPLE_REPO, root)
    return root


@pytest.fixture(scope="module")
def config_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[ConfigRepo, str, str]:
    """A bare repo with two commits: the sample, then one that breaks a platform (returns both shas)."""
    repo = make_config_repo(tmp_path_factory.mktemp("plan-git"))
    first = repo.head()
    target = repo.work / "project-a" / "platforms" / "notebooks.yaml"
    target.write_text(target.read_text() + "  bogusField: 1\n")
    second = repo.commit_and_push("break notebooks")
    return repo, first, second


@pytest.fixture(scope="module")
def sample_plan(sample_dir: Path) -> dict[str, Any]:
    code, plan = _plan("--repo", str(sample_dir), "--inventory", str(SAMPLE_INVENTORY))
    assert code == 0
    return plan


def test_offline_plan_of_the_sample_places_every_platform(sample_plan: dict[str, Any]) -> None:
    plan = sample_plan
    check_plan_shape(plan)
    assert plan["revision"] is None  # a plain directory has no commit
    assert [(p["namespace"], p["name"]) for p in plan["platforms"]] == SAMPLE_PLATFORMS
    assert {p["action"] for p in plan["platforms"]} == {"create"}
    assert plan["diagnostics"] == []
    hosts = [h for p in plan["platforms"] + plan["pools"] for h in p["controlPlane"] + p["workers"]]
    assert len(hosts) == len(set(hosts)), "no host in two clusters"
    gpus = {p["name"]: p["gpus"] for p in plan["platforms"]}
    assert gpus["cpu-sandbox"] == {}
    assert gpus["notebooks"] == {"NVIDIA-H100": 4}


def test_offline_plan_of_the_sample_places_its_pools_and_admits_their_workloads(
    sample_plan: dict[str, Any],
) -> None:
    pools = {p["name"]: p for p in sample_plan["pools"]}
    assert {n: (p["action"], p["mode"]) for n, p in pools.items()} == {
        "finetune-l40s": ("create", "dedicated"),
        "shared-a100": ("create", "shared"),
        "whisper": ("create", "dedicated"),  # provisioned for the workload whisper
    }
    assert pools["whisper"]["provisionedFor"] == "whisper"
    assert pools["shared-a100"]["capacity"] == {"NVIDIA-A100": {"total": 8, "admitted": 7, "free": 1}}
    actions = {w["name"]: (w["pool"], w["action"]) for w in sample_plan["workloads"]}
    assert actions == {
        "batch-train": ("shared-a100", "admit"),
        "finetune": ("finetune-l40s", "admit"),
        "llm-serving": ("shared-a100", "admit"),
        "notebook": ("shared-a100", "admit"),
        "sweep": ("shared-a100", "pending"),
        "whisper": ("whisper", "admit"),
    }


def test_rejected_platform_exits_one_with_its_reason(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(SAMPLE_REPO, repo)
    notebooks = repo / "project-a" / "platforms" / "notebooks.yaml"
    notebooks.write_text(notebooks.read_text().replace("count: 4", "count: 400"))
    inference = repo / "project-b" / "platforms" / "inference.yaml"
    inference.write_text(inference.read_text().replace("count: 2", "count: 40"))
    code, plan = _plan("--repo", str(repo), "--inventory", str(SAMPLE_INVENTORY))
    assert code == 1
    check_plan_shape(plan)
    by_name = {p["name"]: p for p in plan["platforms"]}
    assert by_name["notebooks"]["action"] == "rejected"
    assert by_name["notebooks"]["reason"] == "GPULimitExceeded"  # the edge profile allows 6 H100
    assert by_name["inference"]["action"] == "rejected"
    assert by_name["inference"]["reason"] == "InsufficientCompute"  # no L40S limit, too few L40S GPUs
    assert "40" in by_name["inference"]["message"]
    for rejected in (by_name["notebooks"], by_name["inference"]):
        assert rejected["controlPlane"] == [] and rejected["workers"] == []  # nothing half-allocated
    assert by_name["clearml-prod"]["action"] == "create"


def test_bare_repo_plans_head_and_any_rev(config_repo: tuple[ConfigRepo, str, str]) -> None:
    repo, first, second = config_repo
    code, plan = _plan("--repo", str(repo.bare), "--inventory", str(SAMPLE_INVENTORY))
    check_plan_shape(plan)
    assert code == 1
    assert plan["revision"] == second
    by_name = {p["name"]: p for p in plan["platforms"]}
    assert by_name["notebooks"]["action"] == "invalid"
    assert by_name["notebooks"]["reason"] == "InvalidSpec"
    assert by_name["clearml-prod"]["action"] == "create"  # one bad resource never blocks the others
    bad = [d for d in plan["diagnostics"] if d["name"] == "notebooks"]
    assert bad and bad[0]["file"].endswith("notebooks.yaml") and bad[0]["severity"] == "error"

    code, old = _plan("--repo", str(repo.bare), "--rev", first, "--inventory", str(SAMPLE_INVENTORY))
    assert code == 0
    assert old["revision"] == first
    assert {p["action"] for p in old["platforms"]} == {"create"}
    code, by_url = _plan("--repo", repo.bare.as_uri(), "--rev", first, "--inventory", str(SAMPLE_INVENTORY))
    assert by_url == old


def test_unknown_rev_is_an_error(config_repo: tuple[ConfigRepo, str, str]) -> None:
    repo, _, _ = config_repo
    result = run_cli(
        "plan", "--repo", str(repo.bare), "--rev", "no-such-rev", "--inventory", str(SAMPLE_INVENTORY)
    )
    assert result.returncode == 2


def test_work_tree_revision_is_its_head(config_repo: tuple[ConfigRepo, str, str]) -> None:
    repo, _, second = config_repo
    _, plan = _plan("--repo", str(repo.work), "--inventory", str(SAMPLE_INVENTORY))
    assert plan["revision"] == second


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param([], id="neither-inventory-nor-palette"),
        pytest.param(["--inventory", str(SAMPLE_INVENTORY), "--palette", "http://127.0.0.1:9"], id="both"),
    ],
)
def test_usage_and_input_errors_exit_two(sample_dir: Path, extra: list[str]) -> None:
    result = run_cli("plan", "--repo", str(sample_dir), *extra, "--format", "json")
    assert result.returncode == 2
    assert result.stderr.strip()


def test_missing_or_malformed_inventory_and_missing_repo_exit_two(tmp_path: Path, sample_dir: Path) -> None:
    missing = run_cli("plan", "--repo", str(sample_dir), "--inventory", str(tmp_path / "none.json"))
    assert missing.returncode == 2 and missing.stderr.strip()
    broken = tmp_path / "inventory.yaml"
    broken.write_text("edgeHosts: [\n")
    assert run_cli("plan", "--repo", str(sample_dir), "--inventory", str(broken)).returncode == 2
    missing = tmp_path / "no-repo"
    assert run_cli("plan", "--repo", str(missing), "--inventory", str(SAMPLE_INVENTORY)).returncode == 2


def test_text_and_markdown_formats_name_every_platform(sample_dir: Path) -> None:
    outputs = {}
    for fmt in ("text", "markdown"):
        result = run_cli(
            "plan", "--repo", str(sample_dir), "--inventory", str(SAMPLE_INVENTORY), "--format", fmt
        )
        assert result.returncode == 0
        for namespace, name in SAMPLE_PLATFORMS:
            assert f"{namespace}/{name}" in result.stdout
        outputs[fmt] = result.stdout
    assert "|---" in outputs["markdown"]


def test_an_unreadable_manifest_means_not_all_placeable(tmp_path: Path) -> None:
    """A YAML syntax error may hide a platform: plan reports it and exits 1, never "all placeable"."""
    repo = tmp_path / "repo"
    shutil.copytree(SAMPLE_REPO, repo)
    (repo / "project-a" / "platforms" / "notebooks.yaml").write_text(
        "apiVersion: palette.ai/v1alpha1\nkind: MLPlatform\nmetadata: {name: notebooks\nspec: [\n"
    )
    code, plan = _plan("--repo", str(repo), "--inventory", str(SAMPLE_INVENTORY))
    assert code == 1
    check_plan_shape(plan)
    assert [d["file"] for d in plan["diagnostics"]] == ["project-a/platforms/notebooks.yaml"]
    assert not [p for p in plan["platforms"] if p["action"] == "delete"]


def test_foreign_documents_are_reported_but_do_not_fail_the_plan(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(SAMPLE_REPO, repo)
    (repo / ".github" / "workflows").mkdir(parents=True)
    (repo / ".github" / "workflows" / "ci.yml").write_text("name: ci\non: [push]\njobs: {}\n")
    (repo / "compose.yml").write_text("services: {}\n")  # YAML outside a dot path is read
    code, plan = _plan("--repo", str(repo), "--inventory", str(SAMPLE_INVENTORY))
    assert code == 0
    assert [d["file"] for d in plan["diagnostics"]] == ["compose.yml"]  # .github/ is never read
    assert run_cli("validate", str(repo), "--format", "json").returncode == 1


def test_repo_given_as_a_link_to_a_directory_is_followed(
    tmp_path: Path, sample_dir: Path, sample_plan: dict[str, Any]
) -> None:
    link = tmp_path / "repo-link"
    link.symlink_to(sample_dir, target_is_directory=True)
    code, linked = _plan("--repo", str(link), "--inventory", str(SAMPLE_INVENTORY))
    assert code == 0
    assert linked == sample_plan


def test_bare_repo_whose_head_names_an_unpushed_branch_plans_main(
    tmp_path: Path, config_repo: tuple[ConfigRepo, str, str]
) -> None:
    """`git init --bare` may point HEAD at master while the config was pushed to main."""
    repo, _, second = config_repo
    bare = tmp_path / "remote.git"
    git("init", "-q", "--bare", "-b", "master", str(bare))
    git("push", "-q", str(bare), "HEAD:refs/heads/main", cwd=repo.work)
    _, plan = _plan("--repo", str(bare), "--inventory", str(SAMPLE_INVENTORY))
    assert plan["revision"] == second
