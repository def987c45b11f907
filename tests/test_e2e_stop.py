"""Graceful stop (docs/reconciling.md), with a real ``reconciler run`` process and a few hundred
platforms: SIGTERM mid-pass stops new Palette writes at once, the requests in flight finish, the status
of what was done is committed, and the process exits in time (0 for the loop, 130 for ``--once``)."""

from __future__ import annotations

import importlib
import json
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler.emulator import EmulatorServer, FaultRule
from reconciler.emulator.faults import Decision
from reconciler.palette.observe import load_snapshot
from tests._e2e_support import API_KEY, ROOT
from tests._git_support import RemoteRepo, git
from tests._loop_support import start_run, status_files, wait_for

PLATFORMS = 300
CREATE = "/v1/spectroclusters/edge-native"


def _bench(name: str) -> Any:
    if str(ROOT / "bench") not in sys.path:
        sys.path.insert(0, str(ROOT / "bench"))
    return importlib.import_module(name)


@pytest.fixture
def fleet(tmp_path: Path) -> RemoteRepo:
    """A bare repository of PLATFORMS small platforms over three namespaces (bench's generator)."""
    (tmp_path / "git").mkdir()
    repo = RemoteRepo(tmp_path / "git")
    support = len(_bench("gen_config_tree").SUPPORT) * 3
    _bench("gen_config_tree").generate(repo.work, documents=PLATFORMS + support, namespaces=3)
    for profile in repo.work.glob("*/computeprofile.yaml"):  # one control-plane node: more platforms fit
        profile.write_text(profile.read_text().replace("nodeCount: 3", "nodeCount: 1"))
    repo.commit({}, "a fleet")
    return repo


class Arrivals:
    """Every Palette request as the emulator receives it: (monotonic time, method, path)."""

    def __init__(self, server: EmulatorServer) -> None:
        self._decide = server.faults.decide
        self._lock = threading.Lock()
        self.log: list[tuple[float, str, str]] = []
        server.faults.decide = self  # type: ignore[method-assign]

    def __call__(self, method: str, path: str) -> Decision:
        with self._lock:
            self.log.append((time.monotonic(), method, path))
        return self._decide(method, path)

    def creates(self, after: float = 0.0) -> int:
        with self._lock:
            return sum(1 for t, m, p in self.log if m == "POST" and p == CREATE and t > after)


@pytest.fixture
def slow_palette(tmp_path: Path) -> Iterator[EmulatorServer]:
    inventory = tmp_path / "inventory.json"
    inventory.write_text(json.dumps(_bench("gen_inventory").generate(2500, seed=1)))
    snapshot = load_snapshot(inventory)
    with EmulatorServer.from_snapshot(
        snapshot,
        API_KEY,
        provision_seconds=1,
        delete_seconds=1,
        faults=[FaultRule(path=f"^{CREATE}$", methods=("POST",), latency=0.25)],
    ) as server:
        yield server


@pytest.mark.parametrize(("mode", "code"), [("loop", 0), ("once", 130)])
def test_sigterm_mid_pass_stops_creates_at_once_commits_status_and_exits_in_time(
    fleet: RemoteRepo, slow_palette: EmulatorServer, tmp_path: Path, mode: str, code: int
) -> None:
    arrivals = Arrivals(slow_palette)
    args = ["--palette", slow_palette.url, "--interval", "3600"] + (["--once"] if mode == "once" else [])
    proc = start_run(fleet, tmp_path / "cache", *args)
    try:
        wait_for(lambda: arrivals.creates() >= 20, timeout=90, what="20 creates")
    finally:
        signalled = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    took = time.monotonic() - signalled
    log = out.decode()

    assert proc.returncode == code, log[-3000:]
    assert took < 15, took
    # No create was started after the signal (a margin for one already on the wire).
    assert arrivals.creates(after=signalled + 0.5) == 0
    created = arrivals.creates()
    assert 20 <= created < PLATFORMS
    # The status of what was done is committed: every cluster the emulator holds is reported.
    clusters = list(slow_palette.state.clusters.values())
    assert len(clusters) == created
    files = status_files(fleet)
    for cluster in clusters:
        ns, name = cluster.labels["palette.ai/namespace"], cluster.labels["palette.ai/name"]
        status = files[f"{ns}/mlplatforms/{name}.yaml"]["status"]
        assert status["cluster"]["uid"] == cluster.uid
    reported = sum(1 for p, doc in files.items() if "/mlplatforms/" in p and "cluster" in doc["status"])
    assert reported == created
    assert "stopping" in log
    assert git("rev-parse", "--verify", "reconciler/status", cwd=fleet.bare)


def test_a_second_signal_exits_at_once_without_waiting_for_requests_in_flight(
    fleet: RemoteRepo, slow_palette: EmulatorServer, tmp_path: Path
) -> None:
    slow_palette.faults.add([FaultRule(path=f"^{CREATE}$", methods=("POST",), latency=4.0)])
    arrivals = Arrivals(slow_palette)
    proc = start_run(fleet, tmp_path / "cache", "--palette", slow_palette.url, "--interval", "3600")
    try:
        wait_for(lambda: arrivals.creates() >= 4, timeout=90, what="4 creates in flight")
    finally:
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        second = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert time.monotonic() - second < 2.0  # the creates in flight needed about 4 s more
