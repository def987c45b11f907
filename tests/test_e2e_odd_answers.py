"""Never act on a doubtful read: odd but successful Palette answers (host refs missing or mistyped, a GPU
count of null, an empty cluster listing) make no Palette write, and the loop does nothing once the
answers are right again. Real emulator over HTTP, real git; the faults are the emulator's own."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.controller import Controller
from reconciler.emulator import EmulatorServer, FaultRule
from reconciler.metrics import PassOutcome
from tests._e2e_support import controller
from tests._git_support import RemoteRepo

HOSTS = r"^/v1/dashboard/edgehosts/search$"
CLUSTERS = r"^/v1/dashboard/spectroclusters/search$"


def settle(ctl: Controller, emulator: EmulatorServer) -> None:
    """Passes until every platform is Running and a pass writes nothing to Palette."""
    for _ in range(60):
        before = emulator.stats.writes()
        result = ctl.reconcile_once()
        running = result.phases and all(str(p) == "Running" for p in result.phases.values())
        calm = result.outcome in (PassOutcome.SUCCESS, PassOutcome.SKIPPED)
        if running and calm and emulator.stats.writes() == before:
            return
        emulator.state.sweep()  # clusters move Pending -> Running on the emulator's clock (0.3 s)
    raise AssertionError("the loop did not settle")


@pytest.mark.parametrize("corruption", ["drop-refs", "string-refs", "null-gpu-count"])
def test_odd_host_answers_on_a_restart_move_and_grow_nothing(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path, corruption: str
) -> None:
    first = controller(remote, emulator, tmp_path)
    settle(first, emulator)
    first.close()
    writes = emulator.stats.writes()
    emulator.faults.add([FaultRule(path=HOSTS, corrupt=corruption, corrupt_next=2, corrupt_share=0.4)])

    second = controller(remote, emulator, tmp_path / "restarted")  # its first listing is the odd one
    results = [second.reconcile_once() for _ in range(2)]
    assert emulator.stats.writes() == writes, [r.error for r in results]

    emulator.faults.clear()
    for _ in range(4):  # the answers are right again: the bad copies are read again, nothing moves
        second.reconcile_once()
    second.close()
    assert emulator.stats.writes() == writes


def test_an_empty_cluster_listing_creates_nothing(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path
) -> None:
    ctl = controller(remote, emulator, tmp_path)
    settle(ctl, emulator)
    writes = emulator.stats.writes()
    emulator.faults.add([FaultRule(path=CLUSTERS, corrupt="empty", corrupt_next=3)])

    result = ctl.reconcile_once()
    assert emulator.stats.writes() == writes  # no create POST for the clusters the listing left out
    assert result.outcome is PassOutcome.ERROR
    assert result.error is not None and "did not list" in result.error

    emulator.faults.clear()
    after = ctl.reconcile_once()
    ctl.close()
    assert after.outcome is PassOutcome.SUCCESS
    assert emulator.stats.writes() == writes
