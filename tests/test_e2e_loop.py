"""End-to-end stories of the loop: a real bare repository, the emulator on loopback, real passes."""

from __future__ import annotations

import time
from pathlib import Path

import yaml

from reconciler.emulator import EmulatorServer
from reconciler.metrics import PassOutcome
from reconciler.plan import Action
from reconciler.runtime import wiring
from reconciler.runtime.options import ControllerOptions
from reconciler.runtime.pipeline import Pipeline
from tests._e2e_support import (
    PinnedClock,
    clusters_by_name,
    controller,
    copy_sample,
    platform_clusters,
    status_doc,
    status_tip,
)
from tests._git_support import RemoteRepo, git

NOTEBOOKS = "project-a/platforms/notebooks.yaml"
INFERENCE = "project-b/platforms/inference.yaml"
PLATFORM_FILES = [
    "project-a/platforms/clearml-prod.yaml",
    "project-a/platforms/cpu-sandbox.yaml",
    NOTEBOOKS,
    INFERENCE,
    "project-b/platforms/training.yaml",
]


def settle(ctl: Pipeline, passes: int = 6, pause: float = 0.4) -> None:
    """Run passes until every platform is Running (clusters provision in 0.3 s in these tests)."""
    for _ in range(passes):
        result = ctl.reconcile_once()
        if result.phases and all(str(p) == "Running" for p in result.phases.values()):
            return
        time.sleep(pause)


def edit(remote: RemoteRepo, path: str, change: dict[str, object]) -> str:
    doc = yaml.safe_load((remote.work / path).read_text())
    doc["spec"].update(change)
    return remote.commit({path: yaml.safe_dump(doc)}, f"edit {path}")


def test_merging_a_platform_creates_its_cluster_and_a_status_commit(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path
) -> None:
    notebooks = (remote.work / NOTEBOOKS).read_bytes()
    remote.commit({NOTEBOOKS: None}, "start without notebooks")
    ctl = controller(remote, emulator, tmp_path)
    settle(ctl)
    assert "project-a-notebooks" not in clusters_by_name(emulator)

    sha = remote.commit({NOTEBOOKS: notebooks}, "merge: notebooks platform")
    result = ctl.reconcile_once()
    ctl.close()

    assert result.revision == sha
    assert [p.action for p in result.plan if p.name == "notebooks"] == [Action.CREATE]
    assert len(clusters_by_name(emulator)["project-a-notebooks"]) == 1
    message = git("log", "-1", "--format=%B", "reconciler/status", cwd=remote.bare)
    assert f"Source-Revision: {sha}" in message
    assert message.splitlines()[0] == "project-a/notebooks: new -> Provisioning"
    assert "Source-Subject: merge: notebooks platform" in message
    doc = status_doc(remote, "project-a/mlplatforms/notebooks.yaml")
    status = doc["status"]
    assert isinstance(status, dict)
    assert status["observedRevision"] == sha
    assert status["phase"] == "Provisioning"
    assert status["allocation"]["gpus"] == {"NVIDIA-H100": 4}


def test_raising_gpu_count_scales_the_cluster_in_place(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path
) -> None:
    # The sample's dedicated L40S pool holds the other L40S hosts: without it they are free to grow into.
    no_pool = {"project-b/pools/finetune-l40s.yaml": None, "project-b/workloads/finetune.yaml": None}
    remote.commit(no_pool, "no L40S pool")
    ctl = controller(remote, emulator, tmp_path)
    settle(ctl)
    before = clusters_by_name(emulator)["project-b-inference"]

    edit(remote, INFERENCE, {"gpus": [{"family": "NVIDIA-L40S", "count": 4}]})
    result = ctl.reconcile_once()
    settle(ctl)
    ctl.close()

    entry = next(p for p in result.plan if p.name == "inference")
    assert entry.action is Action.SCALE
    assert clusters_by_name(emulator)["project-b-inference"] == before  # same cluster, no replacement
    status = status_doc(remote, "project-b/mlplatforms/inference.yaml")["status"]
    assert isinstance(status, dict)
    assert status["phase"] == "Running"
    assert sum(status["allocation"]["gpus"].values()) >= 4
    cluster = emulator.state.clusters[before[0]]
    assert sorted(cluster.host_uids()) == sorted(
        status["allocation"]["controlPlane"] + status["allocation"]["workers"]
    )


def test_deleting_a_platform_file_deletes_its_cluster(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path
) -> None:
    ctl = controller(remote, emulator, tmp_path)
    settle(ctl)
    remote.commit({INFERENCE: None}, "retire inference")
    result = ctl.reconcile_once()
    assert [p.action for p in result.plan if p.name == "inference"] == [Action.DELETE]
    time.sleep(0.5)
    ctl.reconcile_once()
    ctl.close()

    assert "project-b-inference" not in clusters_by_name(emulator)
    assert len(platform_clusters(emulator)) == 4
    files = git("ls-tree", "-r", "--name-only", "reconciler/status", cwd=remote.bare).split()
    assert "project-b/mlplatforms/inference.yaml" not in files  # gone with its cluster
    assert "project-a/mlplatforms/notebooks.yaml" in files


def test_deleting_every_platform_deletes_nothing_and_reports_prune_blocked(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path
) -> None:
    ctl = controller(remote, emulator, tmp_path)
    settle(ctl)
    remote.commit(dict.fromkeys(PLATFORM_FILES), "delete every platform")
    writes = emulator.stats.writes()
    result = ctl.reconcile_once()
    ctl.close()

    assert emulator.stats.writes() == writes
    assert len(platform_clusters(emulator)) == 5
    assert {p.reason for p in result.plan} == {"PruneBlocked"}
    status = status_doc(remote, "project-a/mlplatforms/clearml-prod.yaml")["status"]
    assert isinstance(status, dict)
    assert status["conditions"][0]["reason"] == "PruneBlocked"
    assert "--max-deletions 1" in status["conditions"][0]["message"]


def test_a_broken_file_keeps_the_cluster_and_reports_invalid(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path
) -> None:
    ctl = controller(remote, emulator, tmp_path)
    settle(ctl)
    uid = clusters_by_name(emulator)["project-a-notebooks"]

    edit(remote, NOTEBOOKS, {"gpus": [{"family": "NVIDIA-H100", "count": "many"}]})
    result = ctl.reconcile_once()
    assert [p.action for p in result.plan if p.name == "notebooks"] == [Action.INVALID]
    assert result.outcome is PassOutcome.INVALID
    status = status_doc(remote, "project-a/mlplatforms/notebooks.yaml")["status"]
    assert isinstance(status, dict)
    assert status["phase"] == "Invalid"
    assert "spec.gpus[0].count" in status["conditions"][0]["message"]

    # A YAML syntax error hides the document entirely: still Invalid, never absent.
    remote.commit({NOTEBOOKS: "apiVersion: palette.ai/v1alpha1\nkind: MLPlatform\nmetadata: {name: [\n"})
    ctl.reconcile_once()
    ctl.close()
    assert clusters_by_name(emulator)["project-a-notebooks"] == uid
    status = status_doc(remote, "project-a/mlplatforms/notebooks.yaml")["status"]
    assert isinstance(status, dict)
    assert status["phase"] == "Invalid"
    assert "YAML" in status["conditions"][0]["message"]


def test_passes_without_changes_make_no_commit_and_no_palette_write(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path
) -> None:
    ctl = controller(remote, emulator, tmp_path)
    settle(ctl)
    ctl.reconcile_once()
    tip = status_tip(remote)
    writes = emulator.stats.writes()

    first = ctl.reconcile_once()
    second = ctl.reconcile_once()
    ctl.close()

    assert first.outcome is PassOutcome.SKIPPED and second.outcome is PassOutcome.SKIPPED
    assert status_tip(remote) == tip
    assert emulator.stats.writes() == writes


def test_a_hand_edit_of_the_status_branch_is_repaired_by_the_next_idle_pass(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path
) -> None:
    """The branch is read, not assumed: with nothing changed in git or Palette, the next pass still
    notices that someone edited (or deleted) a status file and writes it back (its condition's time is
    the repair's: the clock is pinned, so that is the same second whenever the test runs)."""
    ctl = controller(remote, emulator, tmp_path, clock=PinnedClock())
    settle(ctl)
    ctl.reconcile_once()
    path = "project-a/mlplatforms/notebooks.yaml"
    good = status_doc(remote, path)

    editor = tmp_path / "editor"
    git("clone", "-q", "--branch", "reconciler/status", str(remote.bare), str(editor), cwd=tmp_path)
    (editor / path).write_text("status: {phase: Running, note: edited by hand}\n")
    (editor / "project-a" / "mlplatforms" / "cpu-sandbox.yaml").unlink()
    git("commit", "-qam", "hand edit", cwd=editor)
    git("push", "-q", "origin", "reconciler/status", cwd=editor)

    repaired = ctl.reconcile_once()
    ctl.close()
    assert repaired.outcome is not PassOutcome.SKIPPED
    assert repaired.commit is not None
    assert status_doc(remote, path) == good
    assert status_doc(remote, "project-a/mlplatforms/cpu-sandbox.yaml")["kind"] == "MLPlatform"


def test_a_restarted_controller_adopts_clusters_and_rewrites_nothing(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path
) -> None:
    first = controller(remote, emulator, tmp_path)
    settle(first)
    first.close()
    tip = status_tip(remote)
    writes = emulator.stats.writes()

    again = controller(remote, emulator, tmp_path / "fresh")  # a new cache, as after a lost disk
    result = again.reconcile_once()
    again.close()

    assert {p.action for p in result.plan} == {Action.UNCHANGED}
    assert emulator.stats.writes() == writes
    assert status_tip(remote) == tip


def test_a_local_directory_is_a_source_read_as_it_is_on_disk(
    emulator: EmulatorServer, tmp_path: Path
) -> None:
    directory = copy_sample(tmp_path / "config")  # not a git repository: no status branch
    (directory / "project-b/pools/finetune-l40s.yaml").unlink()  # its L40S hosts are for inference here
    (directory / "project-b/workloads/finetune.yaml").unlink()
    ctl = wiring.build(ControllerOptions(repo=str(directory), palette_url=emulator.url, watch=True))
    first = ctl.reconcile_once()
    assert first.revision is not None and first.revision.startswith("content-")
    assert len(platform_clusters(emulator)) == 5

    path = directory / INFERENCE
    doc = yaml.safe_load(path.read_text())
    doc["spec"]["gpus"] = [{"family": "NVIDIA-L40S", "count": 4}]
    path.write_text(yaml.safe_dump(doc))
    second = ctl.reconcile_once()
    ctl.close()

    assert second.revision != first.revision
    assert [p.action for p in second.plan if p.name == "inference"] == [Action.SCALE]


def test_an_unhealthy_host_degrades_its_platform_and_moves_nothing(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path
) -> None:
    ctl = controller(remote, emulator, tmp_path)
    settle(ctl)
    status = status_doc(remote, "project-a/mlplatforms/notebooks.yaml")["status"]
    assert isinstance(status, dict)
    sick = status["allocation"]["workers"][0]
    writes = emulator.stats.writes()

    emulator.state.patch_host(sick, {"healthState": "unhealthy"})
    result = ctl.reconcile_once()
    assert str(result.phases[("project-a", "notebooks")]) == "Degraded"
    assert emulator.stats.writes() == writes  # kept, not moved or replaced
    status = status_doc(remote, "project-a/mlplatforms/notebooks.yaml")["status"]
    assert isinstance(status, dict)
    assert status["phase"] == "Degraded"
    assert sick in status["conditions"][0]["message"]
    assert status["conditions"][0]["reason"] == "InsufficientCompute", "not Provisioned: it is degraded"

    emulator.state.patch_host(sick, {"healthState": "healthy"})
    healed = ctl.reconcile_once()
    ctl.close()
    assert str(healed.phases[("project-a", "notebooks")]) == "Running"


def test_after_a_restart_a_file_that_stopped_parsing_is_invalid_not_absent(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path
) -> None:
    first = controller(remote, emulator, tmp_path)
    settle(first)
    first.close()
    remote.commit({NOTEBOOKS: "apiVersion: palette.ai/v1alpha1\nkind: MLPlatform\nmetadata: {name: [\n"})

    restarted = controller(remote, emulator, tmp_path / "fresh")  # no memory of the last revision
    result = restarted.reconcile_once()
    restarted.close()

    assert [p.action for p in result.plan if p.name == "notebooks"] == [Action.INVALID]
    assert "project-a-notebooks" in clusters_by_name(emulator)
    status = status_doc(remote, "project-a/mlplatforms/notebooks.yaml")["status"]
    assert isinstance(status, dict)
    assert status["phase"] == "Invalid"
