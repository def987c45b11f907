"""Graceful stop (docs/reconciling.md), with a real ``reconciler run`` process and a few hundred
platforms: SIGTERM mid-pass stops new Palette writes at once, the requests in flight finish, the status
of what was done is committed, and the process exits in time (0 for the loop, 130 for ``--once``)."""

from __future__ import annotations

import asyncio
import importlib
import json
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from reconciler.emulator import EmulatorServer
from reconciler.runtime.options import ControllerOptions
from reconciler.snapshots import load_snapshot
from tests._e2e_support import API_KEY, ROOT
from tests._git_support import RemoteRepo, git
from tests._loop_support import start_run, status_files, wait_for

PLATFORMS = 300
CREATE = "/v1/spectroclusters/edge-native"
WORKERS = next(
    f.default for f in fields(ControllerOptions) if f.name == "apply_concurrency"
)  # requests in flight


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


class CreateGate:
    """In front of the emulator's app: counts the creates that reach it and, while closed, holds them
    (an asyncio wait, so the emulator goes on serving everything else). Creates that arrive once the
    test has marked the signal as sent are counted apart: none may arrive."""

    def __init__(self, app: Any) -> None:
        self._app = app
        self._open = threading.Event()
        self._open.set()
        self._lock = threading.Lock()
        self._signalled = False
        self.arrived = 0
        self.after_signal = 0
        self.held = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and (scope["method"], scope["path"]) == ("POST", CREATE):
            with self._lock:
                self.arrived += 1
                self.after_signal += self._signalled
                self.held += 1
            try:
                while not self._open.is_set():
                    await asyncio.sleep(0.01)
            finally:
                with self._lock:
                    self.held -= 1
        await self._app(scope, receive, send)

    def close(self) -> None:
        self._open.clear()

    def open(self) -> None:
        self._open.set()

    def signalled(self) -> None:
        with self._lock:
            self._signalled = True


@pytest.fixture
def palette(tmp_path: Path) -> Iterator[tuple[EmulatorServer, CreateGate]]:
    inventory = tmp_path / "inventory.json"
    inventory.write_text(json.dumps(_bench("gen_inventory").generate(2500, seed=1)))
    server = EmulatorServer.from_snapshot(
        load_snapshot(inventory), API_KEY, provision_seconds=1, delete_seconds=1
    )
    gate = CreateGate(server.app)
    server.app = gate  # type: ignore[assignment]  # served from start(): every request passes the gate
    try:
        with server:
            yield server, gate
    finally:
        gate.open()  # nothing stays held when the emulator stops


def _logged(log: Path, text: str) -> bool:
    return log.exists() and text in log.read_text(errors="replace")


def _all_workers_held(gate: CreateGate) -> None:
    """Every apply worker waits on a create held at the gate: no other create can be on the wire."""
    wait_for(lambda: gate.held == WORKERS, 120, f"{WORKERS} creates held at the gate")


@pytest.mark.parametrize(("mode", "code"), [("loop", 0), ("once", 130)])
def test_sigterm_mid_pass_stops_creates_at_once_commits_status_and_exits_in_time(
    fleet: RemoteRepo, palette: tuple[EmulatorServer, CreateGate], tmp_path: Path, mode: str, code: int
) -> None:
    server, gate = palette
    log = tmp_path / "run.log"
    args = ["--palette", server.url, "--interval", "3600"] + (["--once"] if mode == "once" else [])
    proc = start_run(fleet, tmp_path / "cache", *args, log=log)
    sent = False
    try:
        wait_for(lambda: gate.arrived >= 20, 120, "20 creates")
        gate.close()
        _all_workers_held(gate)
        gate.signalled()
        proc.send_signal(signal.SIGTERM)
        sent = True
        # Logged once the stop is in force (then the held creates may finish: none may follow them).
        wait_for(lambda: _logged(log, "stopping"), 60, "the signal handled")
    finally:
        gate.open()  # the creates in flight finish
        if not sent:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=120)  # a hang bound: the process itself exits within 15 s, or with 130
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    out = log.read_text(errors="replace")

    assert proc.returncode == code, out[-3000:]
    assert "stop deadline reached" not in out, out[-3000:]
    # No create was started after the signal (the ones held were on the wire before it: they finish).
    assert gate.after_signal == 0
    created = gate.arrived
    assert 20 <= created < PLATFORMS
    # The status of what was done is committed: every cluster the emulator holds is reported.
    clusters = list(server.state.clusters.values())
    assert len(clusters) == created
    files = status_files(fleet)
    for cluster in clusters:
        ns, name = cluster.labels["palette.ai/namespace"], cluster.labels["palette.ai/name"]
        status = files[f"{ns}/mlplatforms/{name}.yaml"]["status"]
        assert status["cluster"]["uid"] == cluster.uid
    reported = sum(1 for p, doc in files.items() if "/mlplatforms/" in p and "cluster" in doc["status"])
    assert reported == created
    assert git("rev-parse", "--verify", "reconciler/status", cwd=fleet.bare)


def test_a_second_signal_exits_at_once_without_waiting_for_requests_in_flight(
    fleet: RemoteRepo, palette: tuple[EmulatorServer, CreateGate], tmp_path: Path
) -> None:
    server, gate = palette
    gate.close()  # every create stays in flight until the process has gone
    log = tmp_path / "run.log"
    proc = start_run(fleet, tmp_path / "cache", "--palette", server.url, "--interval", "3600", log=log)
    try:
        _all_workers_held(gate)
        proc.send_signal(signal.SIGTERM)
        wait_for(lambda: _logged(log, "stopping"), 60, "the first signal handled")
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
        assert proc.returncode == 130
        assert gate.held == WORKERS, "exited while its creates were still in flight"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=60)
        gate.open()
    assert "second signal: exiting at once" in log.read_text(errors="replace")
