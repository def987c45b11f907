"""Contract of ``reconciler run --once`` and the status branch (docs/palette.md), black box.

One module-wide story against a real bare repository and ``reconciler emulator`` on loopback: the first
pass, then passes until everything is Running, a no-op pass, another status branch, a broken file, and
plans that would prune. The tests run in file order and each one leaves the state the next expects.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests._contract_support import (
    API_KEY,
    PHASES,
    REASONS,
    SAMPLE_COMPUTES,
    SAMPLE_INVENTORY,
    SAMPLE_PLATFORMS,
    SAMPLE_POOLS,
    SAMPLE_REPO,
    ConfigRepo,
    Emulator,
    git_rc,
    load_json,
    make_config_repo,
    run_cli,
    running_emulator,
    with_key,
)

STATUS_BRANCH = "reconciler/status"
PASSES = 20  # the most passes a wait on the emulator may take (each pass is a `reconciler run --once`)
TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


@dataclass
class Loop:
    repo: ConfigRepo
    emulator: Emulator
    tmp: Path
    first_revision: str
    first_status_commit: str

    def run_once(self, *extra: str) -> None:
        """One pass; ``--once`` exits 0 when the pass completed (invalid input is reported, not failed)."""
        result = run_cli(
            "run",
            "--repo",
            str(self.repo.bare),
            "--palette",
            self.emulator.url,
            "--once",
            "--listen",
            "127.0.0.1:0",
            "--cache-dir",
            str(self.tmp / "cache"),
            *extra,
            env=with_key(),
        )
        assert result.returncode == 0, result.stderr[-2000:]

    def status(self, path: str, ref: str = STATUS_BRANCH) -> dict[str, Any]:
        data = yaml.safe_load(self.repo.status_git("show", f"{ref}:{path}"))
        assert isinstance(data, dict)
        return data

    def commits(self, ref: str = STATUS_BRANCH) -> int:
        return int(self.repo.status_git("rev-list", "--count", ref))


@pytest.fixture(scope="module")
def loop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Loop]:
    tmp = tmp_path_factory.mktemp("contract-status")
    repo = make_config_repo(tmp)
    with running_emulator(tmp, provision_seconds=0.3, delete_seconds=0.1) as emulator:
        first = Loop(repo, emulator, tmp, repo.head(), "")
        first.run_once()
        first.first_status_commit = repo.status_git("rev-parse", STATUS_BRANCH)
        yield first


def platform_path(namespace: str, name: str) -> str:
    return f"{namespace}/mlplatforms/{name}.yaml"


def test_status_branch_has_one_file_per_platform_and_compute(loop: Loop) -> None:
    files = set(loop.repo.status_git("ls-tree", "-r", "--name-only", loop.first_status_commit).splitlines())
    expected = {platform_path(ns, n) for ns, n in SAMPLE_PLATFORMS}
    expected |= {f"{ns}/computes/{n}.yaml" for ns, n in SAMPLE_COMPUTES}
    assert expected <= files
    resources = {f for f in files if f != "reconciler.yaml" and not f.startswith("inventory/")}
    assert "reconciler.yaml" in files  # docs/status-branch.md: branch, revision, targets
    assert all(re.fullmatch(r"[a-z0-9-]+/[a-z]+s/[a-z0-9-]+\.yaml", f) for f in resources), files


def test_platform_status_file_has_the_documented_shape(loop: Loop) -> None:
    for namespace, name in SAMPLE_PLATFORMS:
        doc = loop.status(platform_path(namespace, name), ref=loop.first_status_commit)
        assert doc["apiVersion"] == "palette.ai/v1alpha1"
        assert doc["kind"] == "MLPlatform"
        assert doc["metadata"] == {"namespace": namespace, "name": name}
        status = doc["status"]
        assert status["observedRevision"] == loop.first_revision
        assert status["phase"] in PHASES
        assert status["phase"] in {"Pending", "Provisioning"}  # a pass never waits for provisioning
        for condition in status["conditions"]:
            assert set(condition) == {"type", "status", "reason", "message", "lastTransitionTime"}
            assert condition["status"] in {"True", "False", "Unknown"}
            assert condition["reason"] in REASONS
            assert TIMESTAMP.match(str(condition["lastTransitionTime"])), condition
        assert [c["type"] for c in status["conditions"]].count("Ready") == 1
        cluster = status["cluster"]
        assert set(cluster) == {"uid", "name", "state"}
        assert cluster["name"] == f"{namespace}-{name}"
        assert cluster["uid"]
        allocation = status["allocation"]
        assert set(allocation) == {"controlPlane", "workers", "gpus"}
        assert allocation["controlPlane"] and allocation["controlPlane"] == sorted(allocation["controlPlane"])
        assert allocation["workers"] == sorted(allocation["workers"])
    clearml = loop.status(platform_path("project-a", "clearml-prod"), ref=loop.first_status_commit)
    assert clearml["status"]["allocation"]["gpus"] == {"NVIDIA-H100": 6}


def test_compute_status_file_has_the_documented_shape(loop: Loop) -> None:
    for namespace, name in SAMPLE_COMPUTES:
        doc = loop.status(f"{namespace}/computes/{name}.yaml", ref=loop.first_status_commit)
        assert doc["apiVersion"] == "palette.ai/v1alpha1"
        assert doc["kind"] == "Compute"
        assert doc["metadata"] == {"namespace": namespace, "name": name}
        status = doc["status"]
        assert status["observedRevision"] == loop.first_revision
        assert isinstance(status["availableControlPlaneCompute"], list)
        assert isinstance(status["availableWorkerCompute"], list)


def test_status_commit_carries_the_source_revision_trailer(loop: Loop) -> None:
    trailers = loop.repo.status_git(
        "log", "-1", "--format=%(trailers:key=Source-Revision,valueonly)", loop.first_status_commit
    )
    assert trailers.strip() == loop.first_revision
    history = loop.repo.status_git(
        "log", "--format=%H", STATUS_BRANCH, "--", platform_path("project-a", "notebooks")
    )
    assert loop.first_status_commit in history.split()


def test_status_branch_is_an_orphan(loop: Loop) -> None:
    assert git_rc("--git-dir", str(loop.repo.bare), "merge-base", "main", STATUS_BRANCH) == 1
    roots = loop.repo.status_git("rev-list", "--max-parents=0", STATUS_BRANCH).split()
    assert loop.repo.head() not in loop.repo.status_git("rev-list", STATUS_BRANCH).split()
    assert len(roots) == 1


def test_managed_clusters_are_named_and_labelled(loop: Loop) -> None:
    snapshot = loop.emulator.export(loop.tmp / "after-first-pass.yaml")
    clusters = {c["metadata"]["name"]: c for c in snapshot["clusters"]}
    assert sorted(clusters) == sorted(f"{ns}-{n}" for ns, n in SAMPLE_PLATFORMS + SAMPLE_POOLS)
    for namespace, name in SAMPLE_PLATFORMS:
        labels = clusters[f"{namespace}-{name}"]["metadata"]["labels"]
        assert labels["palette.ai/managed-by"] == "reconciler"
        assert labels["palette.ai/namespace"] == namespace
        assert labels["palette.ai/name"] == name
    assert len(snapshot["edgeHosts"]) == len(load_json(SAMPLE_INVENTORY.read_text())["edgeHosts"])


def test_passes_reach_running_then_a_pass_without_changes_commits_nothing(loop: Loop) -> None:
    # Bounded by passes, not by time: the emulator provisions in 0.3 s, so a slow machine (slow passes)
    # needs fewer of them, never more.
    for _ in range(PASSES):
        loop.run_once()
        phases = {loop.status(platform_path(ns, n))["status"]["phase"] for ns, n in SAMPLE_PLATFORMS}
        if phases == {"Running"}:
            break
        time.sleep(0.3)
    assert phases == {"Running"}
    clearml = loop.status(platform_path("project-a", "clearml-prod"))["status"]
    ready = next(c for c in clearml["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("True", "Provisioned")
    assert clearml["cluster"]["state"] == "Running"
    loop.run_once()
    before = loop.repo.status_git("rev-parse", STATUS_BRANCH)
    loop.run_once()
    assert loop.repo.status_git("rev-parse", STATUS_BRANCH) == before


def test_the_api_key_is_in_no_status_file_commit_or_cache_file(loop: Loop) -> None:
    history = loop.repo.status_git("log", "--all", "-p", "--format=%H%n%B")
    assert API_KEY not in history
    for path in (loop.tmp / "cache").rglob("*"):
        if path.is_file():
            assert API_KEY.encode() not in path.read_bytes(), path


def test_status_branch_flag_is_honoured(loop: Loop) -> None:
    loop.run_once("--status-branch", "audit/palette")
    files = loop.repo.status_git("ls-tree", "-r", "--name-only", "audit/palette").splitlines()
    assert platform_path("project-b", "training") in files
    trailer = loop.repo.status_git(
        "log", "-1", "--format=%(trailers:key=Source-Revision,valueonly)", "audit/palette"
    )
    assert trailer.strip() == loop.repo.head()


def test_a_broken_file_keeps_its_cluster_and_reports_invalid(loop: Loop) -> None:
    target = loop.repo.work / "project-a" / "platforms" / "notebooks.yaml"
    target.write_text(target.read_text() + "  bogusField: 1\n")
    broken = loop.repo.commit_and_push("break notebooks")
    loop.run_once()
    status = loop.status(platform_path("project-a", "notebooks"))["status"]
    assert status["phase"] == "Invalid"
    assert status["observedRevision"] == broken
    trailer = loop.repo.status_git(
        "log", "-1", "--format=%(trailers:key=Source-Revision,valueonly)", STATUS_BRANCH
    )
    assert trailer.strip() == broken
    clusters = {
        c["metadata"]["name"] for c in loop.emulator.export(loop.tmp / "after-break.yaml")["clusters"]
    }
    assert "project-a-notebooks" in clusters
    assert loop.status(platform_path("project-a", "clearml-prod"))["status"]["phase"] == "Running"


def test_plan_prunes_at_most_max_deletions(loop: Loop) -> None:
    tree = loop.tmp / "pruned"
    shutil.copytree(loop.repo.work, tree, ignore=shutil.ignore_patterns(".git"))
    (tree / "project-a" / "platforms" / "notebooks.yaml").unlink()
    result = run_cli(
        "plan", "--repo", str(tree), "--palette", loop.emulator.url, "--format", "json", env=with_key()
    )
    plan = load_json(result.stdout)
    by_name = {p["name"]: p for p in plan["platforms"]}
    assert (by_name["notebooks"]["action"], by_name["notebooks"]["reason"]) == ("delete", "Deleting")
    assert by_name["clearml-prod"]["action"] == "unchanged"
    assert result.returncode == 0

    for platform in (tree / "project-b" / "platforms").iterdir():
        platform.unlink()
    result = run_cli(
        "plan", "--repo", str(tree), "--palette", loop.emulator.url, "--format", "json", env=with_key()
    )
    plan = load_json(result.stdout)
    assert not [p for p in plan["platforms"] if p["action"] == "delete"]
    blocked = {p["name"] for p in plan["platforms"] if p["reason"] == "PruneBlocked"}
    assert blocked == {"notebooks", "inference", "training"}

    raised = run_cli(
        "plan",
        "--repo",
        str(tree),
        "--palette",
        loop.emulator.url,
        "--max-deletions",
        "3",
        "--format",
        "json",
        env=with_key(),
    )
    deleted = {p["name"] for p in load_json(raised.stdout)["platforms"] if p["action"] == "delete"}
    assert deleted == {"notebooks", "inference", "training"}

    snapshot = loop.tmp / "snapshot.yaml"
    loop.emulator.export(snapshot)
    offline = run_cli("plan", "--repo", str(tree), "--inventory", str(snapshot), "--format", "json")
    assert load_json(offline.stdout)["platforms"] == plan["platforms"]

    # Without this reconciler's labels a cluster is not ours: never pruned, whatever --max-deletions says.
    data = yaml.safe_load(snapshot.read_text())
    for cluster in data["clusters"]:
        cluster["metadata"]["labels"] = {"team": "someone-else"}
    foreign = loop.tmp / "foreign.yaml"
    foreign.write_text(yaml.safe_dump(data))
    args = ("--repo", str(tree), "--inventory", str(foreign), "--max-deletions", "9", "--format", "json")
    unlabelled = load_json(run_cli("plan", *args).stdout)
    assert not [p for p in unlabelled["platforms"] if p["action"] == "delete"]


def test_suspend_reject_and_delete_show_in_status_and_history(loop: Loop) -> None:
    platforms = loop.repo.work / "project-a" / "platforms"
    (platforms / "notebooks.yaml").unlink()
    sandbox = platforms / "cpu-sandbox.yaml"
    sandbox.write_text(sandbox.read_text() + "  suspend: true\n")
    inference = loop.repo.work / "project-b" / "platforms" / "inference.yaml"
    inference.write_text(inference.read_text().replace("count: 2", "count: 40"))
    revision = loop.repo.commit_and_push("suspend, outgrow and remove")
    loop.run_once()

    suspended = loop.status(platform_path("project-a", "cpu-sandbox"))["status"]
    assert (suspended["phase"], suspended["conditions"][0]["reason"]) == ("Suspended", "Suspended")
    assert suspended["cluster"]["name"] == "project-a-cpu-sandbox"
    outgrown = loop.status(platform_path("project-b", "inference"))["status"]
    assert outgrown["conditions"][0]["reason"] == "InsufficientCompute"
    assert outgrown["phase"] in {"Rejected", "Degraded"}  # its running cluster is kept, never half-scaled
    deleting = loop.status(platform_path("project-a", "notebooks"))["status"]
    assert (deleting["phase"], deleting["observedRevision"]) == ("Deleting", revision)

    gone = platform_path("project-a", "notebooks")
    for _ in range(PASSES):  # the emulator deletes in 0.1 s: passes, not time, bound the wait
        if gone not in loop.repo.status_git("ls-tree", "-r", "--name-only", STATUS_BRANCH).splitlines():
            break
        time.sleep(0.3)
        loop.run_once()
    else:
        raise AssertionError(f"the status file of a deleted platform stays after {PASSES} passes")
    assert len(loop.repo.status_git("log", "--format=%H", STATUS_BRANCH, "--", gone).split()) >= 3
    clusters = {
        c["metadata"]["name"] for c in loop.emulator.export(loop.tmp / "after-delete.yaml")["clusters"]
    }
    assert "project-a-notebooks" not in clusters
    assert {"project-a-cpu-sandbox", "project-b-inference"} <= clusters


NEW_PLATFORMS = {
    "bad-spec": ("spec:\n  bogus: 1\n", "Invalid", "InvalidSpec"),
    "bad-ref": ("spec:\n  computeProfileRef: {name: no-such-profile}\n", "Invalid", "ReferenceNotFound"),
}


def test_new_platforms_that_cannot_be_placed_get_a_status_with_their_reason(loop: Loop) -> None:
    for name, (spec, _, _) in NEW_PLATFORMS.items():
        (loop.repo.work / "project-a" / "platforms" / f"{name}.yaml").write_text(
            "apiVersion: palette.ai/v1alpha1\nkind: MLPlatform\n"
            f"metadata: {{name: {name}, namespace: project-a}}\n{spec}"
        )
    revision = loop.repo.commit_and_push("platforms that cannot be placed")
    loop.run_once()  # invalid input is reported in status; the pass itself completed
    for name, (_, phase, reason) in NEW_PLATFORMS.items():
        status = loop.status(platform_path("project-a", name))["status"]
        assert (status["phase"], status["observedRevision"]) == (phase, revision)
        assert [(c["type"], c["status"], c["reason"]) for c in status["conditions"]] == [
            ("Ready", "False", reason)
        ]
    clusters = {c["metadata"]["name"] for c in loop.emulator.export(loop.tmp / "after-new.yaml")["clusters"]}
    assert not {f"project-a-{name}" for name in NEW_PLATFORMS} & clusters


def test_without_palette_flag_each_namespace_uses_its_settings(tmp_path: Path) -> None:
    """Settings' ``hostUrl`` and ``apiKeySecretRef`` ({env} in project-a, {file} in project-b) are used."""
    with running_emulator(tmp_path) as emulator:
        tree = tmp_path / "tree"
        shutil.copytree(SAMPLE_REPO, tree)
        key_file = tmp_path / "palette-key"
        key_file.write_text(API_KEY + "\n")
        for namespace, ref in (
            ("project-a", "env: PROJECT_A_PALETTE_KEY"),
            ("project-b", f"file: {key_file}"),
        ):
            settings = tree / namespace / "settings.yaml"
            doc = yaml.safe_load(settings.read_text())
            doc["spec"]["palette"]["hostUrl"] = emulator.url
            doc["spec"]["palette"]["apiKeySecretRef"] = yaml.safe_load(ref)
            settings.write_text(yaml.safe_dump(doc))
        repo = make_config_repo(tmp_path / "git", source=tree)
        result = run_cli(
            "run",
            "--repo",
            str(repo.bare),
            "--once",
            "--listen",
            "127.0.0.1:0",
            "--cache-dir",
            str(tmp_path / "cache"),
            env={"PROJECT_A_PALETTE_KEY": API_KEY},
        )
        assert result.returncode == 0, result.stderr[-2000:]
        clusters = {c["metadata"]["name"] for c in emulator.export(tmp_path / "snapshot.yaml")["clusters"]}
        assert clusters == {f"{ns}-{n}" for ns, n in SAMPLE_PLATFORMS + SAMPLE_POOLS}


def test_a_file_that_stops_parsing_reports_invalid_after_a_restart(loop: Loop) -> None:
    """docs/reconciling.md: a resource whose file stops parsing keeps its cluster; its status says Invalid."""
    target = loop.repo.work / "project-b" / "platforms" / "training.yaml"
    target.write_text(
        "apiVersion: palette.ai/v1alpha1\nkind: MLPlatform\nmetadata: {name: training\nspec: [\n"
    )
    revision = loop.repo.commit_and_push("training no longer parses")
    loop.run_once()
    clusters = {
        c["metadata"]["name"] for c in loop.emulator.export(loop.tmp / "after-syntax.yaml")["clusters"]
    }
    assert "project-b-training" in clusters
    status = loop.status(platform_path("project-b", "training"))["status"]
    assert status["observedRevision"] == revision
    assert status["phase"] == "Invalid"


def test_run_once_exits_one_when_palette_refuses_the_key(loop: Loop, tmp_path: Path) -> None:
    """A failed pass (here Palette answering 401) exits 1; its statuses say PaletteUnauthorized."""
    repo = make_config_repo(tmp_path)
    result = run_cli(
        "run",
        "--repo",
        str(repo.bare),
        "--palette",
        loop.emulator.url,
        "--once",
        "--listen",
        "127.0.0.1:0",
        "--cache-dir",
        str(tmp_path / "cache"),
        env={"PALETTE_API_KEY": "not-the-key"},
    )
    assert result.returncode == 1
    status = yaml.safe_load(
        repo.status_git("show", f"{STATUS_BRANCH}:{platform_path('project-a', 'clearml-prod')}")
    )
    assert status["status"]["conditions"][0]["reason"] == "PaletteUnauthorized"
    assert "not-the-key" not in result.stdout + result.stderr
