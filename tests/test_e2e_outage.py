"""A Palette outage never erases status; a refused key stalls its target (docs/palette.md).

Real parts: the sample repository in a bare remote, the emulator on a fixed loopback port (stopped and
started again for the outage), controllers reading and writing the real status branch.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.emulator import EmulatorServer, FaultRule
from reconciler.metrics import PassOutcome
from reconciler.snapshots import load_snapshot
from tests._e2e_support import API_KEY, SAMPLE, platform_clusters
from tests._git_support import RemoteRepo, free_port, git
from tests._loop_support import fast_controller, status_files, until_running

PLATFORMS = [
    "project-a/mlplatforms/clearml-prod.yaml",
    "project-a/mlplatforms/cpu-sandbox.yaml",
    "project-a/mlplatforms/notebooks.yaml",
    "project-b/mlplatforms/inference.yaml",
    "project-b/mlplatforms/training.yaml",
]


@pytest.fixture
def palette() -> Iterator[EmulatorServer]:
    """The emulator on a fixed port, so that a test can stop it and start it again at the same URL."""
    snapshot = load_snapshot(SAMPLE / "inventory.json")
    server = EmulatorServer.from_snapshot(
        snapshot, API_KEY, provision_seconds=0.3, delete_seconds=0.2, port=free_port()
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


def facts(doc: dict[str, object]) -> dict[str, object]:
    status = doc["status"]
    assert isinstance(status, dict)
    return {k: status.get(k) for k in ("phase", "cluster", "allocation", "observedRevision")}


def conditions(doc: dict[str, object]) -> dict[str, dict[str, str]]:
    status = doc["status"]
    assert isinstance(status, dict)
    return {c["type"]: c for c in status["conditions"]}


def test_palette_unreachable_keeps_phase_cluster_and_allocation_and_recovers_exactly(
    remote: RemoteRepo, palette: EmulatorServer, tmp_path: Path
) -> None:
    ctl = fast_controller(remote, palette.url, tmp_path / "cache")
    until_running(ctl)
    before = status_files(remote)
    assert all(before[p]["status"]["phase"] == "Running" for p in PLATFORMS)

    palette.stop()  # Palette unreachable: connection refused
    down = ctl.reconcile_once()
    during = status_files(remote)

    assert down.outcome is PassOutcome.ERROR
    assert down.error is not None and "Palette unavailable" in down.error
    for path in PLATFORMS:
        assert facts(during[path]) == facts(before[path])  # phase, cluster, allocation kept
        cond = conditions(during[path])
        assert cond["PaletteReachable"]["status"] == "False"
        assert cond["PaletteReachable"]["reason"] == "PaletteUnavailable"
        assert cond["Ready"]["status"] == "Unknown"
        assert cond["Ready"]["lastTransitionTime"] == conditions(before[path])["Ready"]["lastTransitionTime"]
    tip = git("rev-parse", "reconciler/status", cwd=remote.bare)
    ctl.reconcile_once()  # the outage goes on: nothing new to say, no second commit
    assert git("rev-parse", "reconciler/status", cwd=remote.bare) == tip

    palette.start()
    up = ctl.reconcile_once()
    ctl.close()
    assert up.outcome is PassOutcome.SUCCESS
    after = status_files(remote)
    for path in PLATFORMS:
        assert after[path] == before[path]  # the condition is gone; status is as before the outage


def test_server_errors_keep_status_and_report_palette_unavailable(
    remote: RemoteRepo, palette: EmulatorServer, tmp_path: Path
) -> None:
    ctl = fast_controller(remote, palette.url, tmp_path / "cache")
    until_running(ctl)
    before = status_files(remote)
    palette.faults.add([FaultRule(path=r"^/v1/", error_rate=1.0, error_status=503)])

    result = ctl.reconcile_once()
    ctl.close()

    assert result.outcome is PassOutcome.ERROR
    during = status_files(remote)
    for path in PLATFORMS:
        assert facts(during[path]) == facts(before[path])
        assert conditions(during[path])["PaletteReachable"]["reason"] == "PaletteUnavailable"


@pytest.mark.parametrize("key", ["not-the-right-key", None], ids=["wrong-key", "no-key"])
def test_refused_key_stalls_the_target_keeps_status_and_retries_only_when_the_key_changes(
    remote: RemoteRepo, palette: EmulatorServer, tmp_path: Path, key: str | None
) -> None:
    first = fast_controller(remote, palette.url, tmp_path / "cache-1")
    until_running(first)
    first.close()
    before = status_files(remote)

    environ: dict[str, str] = {} if key is None else {"PALETTE_API_KEY": key}
    ctl = fast_controller(remote, palette.url, tmp_path / "cache-2", environ=environ)
    stalled = ctl.reconcile_once()
    assert stalled.outcome is PassOutcome.STALLED
    assert stalled.error is not None
    during = status_files(remote)
    for path in PLATFORMS:
        assert facts(during[path]) == facts(before[path])
        cond = conditions(during[path])
        assert cond["PaletteReachable"] == {
            **cond["PaletteReachable"],
            "status": "False",
            "reason": "PaletteUnauthorized",
        }
        assert cond["Ready"]["status"] == "Unknown"
        assert "not-the-right-key" not in str(during[path])

    requests = palette.stats.count()
    again = ctl.reconcile_once()
    assert again.outcome is PassOutcome.STALLED
    assert palette.stats.count() == requests  # not retried: the key did not change
    passes = ctl.metrics.render().decode()
    assert 'reconciler_passes_total{outcome="stalled"} 2.0' in passes

    environ["PALETTE_API_KEY"] = API_KEY  # the operator fixes the key
    fixed = ctl.reconcile_once()
    ctl.close()
    assert fixed.outcome is PassOutcome.SUCCESS
    assert palette.stats.count() > requests
    after = status_files(remote)
    for path in PLATFORMS:
        assert after[path] == before[path]
    assert len(platform_clusters(palette)) == 5


def test_a_failed_ls_remote_counts_as_a_failed_git_fetch(
    remote: RemoteRepo, palette: EmulatorServer, tmp_path: Path
) -> None:
    ctl = fast_controller(remote, palette.url, tmp_path / "cache")
    ctl.reconcile_once()
    moved = remote.bare.with_name("moved.git")
    remote.bare.rename(moved)
    try:
        result = ctl.reconcile_once()
    finally:
        moved.rename(remote.bare)
        ctl.close()
    assert result.outcome is PassOutcome.ERROR
    metrics = ctl.metrics.render().decode()
    assert 'reconciler_git_fetches_total{outcome="error"} 1.0' in metrics
