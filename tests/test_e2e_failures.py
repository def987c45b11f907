"""A failed read of git or of Palette never looks like "desired = nothing" (docs/reconciling.md)."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from reconciler.emulator import EmulatorServer, FaultRule
from reconciler.metrics import PassOutcome
from reconciler.palette.client import Page, PaletteClient
from reconciler.plan import Action
from reconciler.resolve import Target
from reconciler.runtime import wiring
from reconciler.runtime.options import ControllerOptions
from reconciler.runtime.pipeline import Pipeline
from tests._e2e_support import API_KEY, platform_clusters, status_doc, status_tip
from tests._git_support import RemoteRepo
from tests._palette_support import fast_retry


def fast_controller(remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path) -> Pipeline:
    def client(target: Target, key: str) -> PaletteClient:
        return PaletteClient(target.url, key, target.project_uid, retry=fast_retry(max_attempts=2))

    options = ControllerOptions(repo=str(remote.bare), palette_url=emulator.url, cache_dir=tmp_path / "cache")
    return wiring.build(options, client_factory=client)


def running(ctl: Pipeline) -> None:
    for _ in range(10):
        result = ctl.reconcile_once()
        if result.phases and all(str(p) == "Running" for p in result.phases.values()):
            return
        time.sleep(0.3)
    raise AssertionError("platforms did not reach Running")


def test_palette_unreachable_changes_nothing_and_reports_palette_unavailable(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path
) -> None:
    ctl = fast_controller(remote, emulator, tmp_path)
    running(ctl)
    remote.commit({"project-b/platforms/inference.yaml": None}, "retire inference")  # a delete is due
    emulator.faults.add(
        [FaultRule(path=r"^/v1/dashboard/edgehosts/search$", error_rate=1.0, error_status=503)]
    )
    writes = emulator.stats.writes()

    result = ctl.reconcile_once()

    assert result.outcome is PassOutcome.ERROR
    assert emulator.stats.writes() == writes  # no create, no delete: nothing was observed
    assert len(platform_clusters(emulator)) == 5
    status = status_doc(remote, "project-a/mlplatforms/notebooks.yaml")["status"]
    assert isinstance(status, dict)
    assert status["conditions"][0]["reason"] == "PaletteUnavailable"
    assert API_KEY not in status["conditions"][0]["message"]

    emulator.faults.clear()
    recovered = ctl.reconcile_once()
    ctl.close()
    assert recovered.outcome is PassOutcome.SUCCESS
    assert [p.action for p in recovered.plan if p.name == "inference"] == [Action.DELETE]


def test_git_unreachable_changes_nothing(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path
) -> None:
    ctl = fast_controller(remote, emulator, tmp_path)
    running(ctl)
    tip = status_tip(remote)
    writes = emulator.stats.writes()
    moved = remote.bare.with_name("moved.git")
    shutil.move(remote.bare, moved)  # the remote disappears

    result = ctl.reconcile_once()
    ctl.close()

    assert result.outcome is PassOutcome.ERROR
    assert result.error is not None and "cannot" in result.error
    assert emulator.stats.writes() == writes
    assert len(platform_clusters(emulator)) == 5
    shutil.move(moved, remote.bare)
    assert status_tip(remote) == tip


def test_an_unexpected_error_fails_the_pass_not_the_loop(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path
) -> None:
    calls = {"n": 0}

    class Flaky(PaletteClient):
        def edge_host_pages(self, body: Mapping[str, Any]) -> Iterator[Page]:
            calls["n"] += 1
            if calls["n"] == 1:
                raise RuntimeError("surprise")
            return super().edge_host_pages(body)

    def client(target: Target, key: str) -> PaletteClient:
        return Flaky(target.url, key, target.project_uid, retry=fast_retry())

    options = ControllerOptions(repo=str(remote.bare), palette_url=emulator.url, cache_dir=tmp_path / "c")
    ctl = wiring.build(options, client_factory=client)
    first = ctl.reconcile_once()
    second = ctl.reconcile_once()
    ctl.close()

    assert first.outcome is PassOutcome.ERROR and first.error == "RuntimeError: surprise"
    assert second.outcome is PassOutcome.SUCCESS
    assert len(platform_clusters(emulator)) == 5
