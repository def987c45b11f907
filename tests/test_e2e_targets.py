"""A Palette endpoint whose last platform was removed while no reconciler ran is still pruned
(docs/status-branch.md, ``reconciler.yaml`` ``targets``), under the usual ``--max-deletions`` guard.

Two emulators stand for two Palette endpoints: project-a's Settings name one, project-b's the other
(no ``--palette``). Every pass is a fresh ``reconciler run --once`` process.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.emulator import EmulatorServer
from reconciler.snapshots import load_snapshot
from tests._e2e_support import API_KEY, SAMPLE, clusters_by_name, sample_files
from tests._git_support import RemoteRepo
from tests._loop_support import recorded, run_once, status_files


@pytest.fixture
def second_palette(emulator: EmulatorServer) -> Iterator[EmulatorServer]:
    snapshot = load_snapshot(SAMPLE / "inventory.json")
    with EmulatorServer.from_snapshot(snapshot, API_KEY, provision_seconds=0.3, delete_seconds=0.2) as server:
        yield server


def platform_files() -> dict[str, bytes]:
    """The sample without its pools and workloads: these tests are about platforms and endpoints."""
    return {p: d for p, d in sample_files().items() if "/pools/" not in p and "/workloads/" not in p}


def two_endpoints(tmp_path: Path, a: EmulatorServer, b: EmulatorServer) -> RemoteRepo:
    files = platform_files()
    for namespace, palette in (("project-a", a), ("project-b", b)):
        path = f"{namespace}/settings.yaml"
        text = files[path].decode().replace("https://api.spectrocloud.com", palette.url)
        text = text.replace("file: /var/run/secrets/palette/api-key", "env: PALETTE_API_KEY")
        files[path] = text.encode()
    (tmp_path / "git").mkdir()
    repo = RemoteRepo(tmp_path / "git")
    repo.commit(files, "two Palette endpoints")
    return repo


def test_an_endpoint_whose_platforms_were_removed_while_down_is_pruned_under_the_guard(
    emulator: EmulatorServer, second_palette: EmulatorServer, tmp_path: Path
) -> None:
    repo = two_endpoints(tmp_path, emulator, second_palette)
    created = run_once(repo, tmp_path / "cache")
    assert created.returncode == 0, created.stderr
    assert set(clusters_by_name(second_palette)) == {"project-b-inference", "project-b-training"}

    # While no reconciler runs, project-b (the only user of the second endpoint) is removed.
    repo.commit({p: None for p in platform_files() if p.startswith("project-b/")}, "retire project-b")
    requests = second_palette.stats.count()

    blocked = run_once(repo, tmp_path / "fresh-1")
    assert blocked.returncode == 0, blocked.stderr
    assert second_palette.stats.count() > requests  # observed, though no Settings names it any more
    assert set(clusters_by_name(second_palette)) == {"project-b-inference", "project-b-training"}
    inference = status_files(repo)["project-b/mlplatforms/inference.yaml"]["status"]
    assert inference["conditions"][0]["reason"] == "PruneBlocked"
    assert inference["cluster"]["name"] == "project-b-inference"
    assert '"prune blocked"' in blocked.stderr and '"name": "inference"' in blocked.stderr
    assert {t["url"] for t in recorded(repo)["targets"]} == {emulator.url, second_palette.url}

    deleted = run_once(repo, tmp_path / "fresh-2", "--max-deletions", "2")
    assert deleted.returncode == 0, deleted.stderr
    assert second_palette.stats.count("DELETE") == 2
    files = status_files(repo)
    for name in ("inference", "training"):
        assert files[f"project-b/mlplatforms/{name}.yaml"]["status"]["phase"] == "Deleting"
    assert second_palette.url in {t["url"] for t in recorded(repo)["targets"]}

    time.sleep(0.5)  # the emulator finishes deleting
    gone = run_once(repo, tmp_path / "fresh-3")
    assert gone.returncode == 0, gone.stderr
    assert clusters_by_name(second_palette) == {}
    files = status_files(repo)
    assert not [p for p in files if p.startswith("project-b/")]
    assert {t["url"] for t in recorded(repo)["targets"]} == {emulator.url}  # it held nothing any more
    assert set(clusters_by_name(emulator)) == {
        "project-a-clearml-prod",
        "project-a-cpu-sandbox",
        "project-a-notebooks",
    }


def test_an_unreachable_endpoint_no_platform_uses_keeps_its_status_without_failing_the_pass(
    emulator: EmulatorServer, second_palette: EmulatorServer, tmp_path: Path
) -> None:
    repo = two_endpoints(tmp_path, emulator, second_palette)
    assert run_once(repo, tmp_path / "cache").returncode == 0
    before = status_files(repo)
    repo.commit({p: None for p in platform_files() if p.startswith("project-b/")}, "retire project-b")
    second_palette.stop()

    result = run_once(repo, tmp_path / "cache")

    assert result.returncode == 0, result.stderr  # nothing desired waits on the old endpoint
    after = status_files(repo)
    for name in ("inference", "training"):
        path = f"project-b/mlplatforms/{name}.yaml"
        assert after[path] == before[path]  # its clusters may still run: their status is kept
    assert second_palette.url in {t["url"] for t in recorded(repo)["targets"]}
    assert '"palette unavailable"' in result.stderr
