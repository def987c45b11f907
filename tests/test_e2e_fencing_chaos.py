"""Fencing and write-ahead with real `reconciler run` processes against the emulator (docs/leases.md,
"Fencing"; docs/scaling.md, "Write-ahead").

(a) The lease holder is paused (SIGSTOP) in the middle of a pass, inside the Palette read that comes
    right before a write, for longer than its lease; a second instance takes over and does the work.
    Resumed (SIGCONT), the old holder sends no Palette write and pushes no status: the fence stops it.
(b) The holder is killed (SIGKILL) after its scaling write reached Palette and before its status commit.
    The successor reads the intent it recorded first: it neither scales the pool back nor scales it again
    within the cooldown, and records the action (its time is the intent's).

Invariants are read from the emulator (its request counts and state) and the status branch. No sleeps:
every wait is on a condition.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.emulator import EmulatorServer
from tests._e2e_support import status_tip
from tests._git_support import RemoteRepo, free_port, git
from tests._loop_support import metric, passes, start_loop, status_files, stop_runs, wait_for
from tests._prometheus_support import FakePrometheus
from tests._scaling_support import pool_workload
from tests.test_e2e_scaling import POOL, gpu_hosts, last_action
from tests.test_e2e_scaling import repo as scaling_repo

pytestmark = pytest.mark.e2e

SERVING = "project-b/aiworkloads/llm-serving.yaml"


def _standby_passes(port: int) -> float:
    return metric(port, 'reconciler_passes_total{outcome="standby"}') or 0.0


def _writes(emulator: EmulatorServer) -> int:
    """Every Palette request that changes something (searches are POSTs that read)."""
    searches = emulator.stats.count("POST", "/v1/dashboard/edgehosts/search") + emulator.stats.count(
        "POST", "/v1/dashboard/spectroclusters/search"
    )
    changes = sum(emulator.stats.count(m) for m in ("POST", "PUT", "PATCH", "DELETE"))
    return changes - searches


def _status_paths(remote: RemoteRepo) -> set[str]:
    """The files of the status branch's tip (one read: the branch may move between two)."""
    return set(git("ls-tree", "-r", "--name-only", "reconciler/status", cwd=remote.bare).split())


def _start(
    remote: RemoteRepo, emulator: EmulatorServer, cache: Path, port: int, *extra: str
) -> subprocess.Popen[bytes]:
    return start_loop(remote, emulator.url, cache, port, *extra, "--log-level", "warning")


def _settled(remote: RemoteRepo) -> bool:
    """The sample's pools and workloads recorded Running, llm-serving's profile attached."""
    try:
        files = status_files(remote)
    except AssertionError:
        return False
    serving = files.get(SERVING, {}).get("status", {})
    return serving.get("phase") == "Running" and bool(serving.get("attachedProfiles"))


def test_a_holder_paused_past_its_lease_sends_nothing_after_it_resumes(
    remote: RemoteRepo, emulator: EmulatorServer, held_read: HeldAnswer, tmp_path: Path
) -> None:
    ports = [free_port(), free_port()]
    old = _start(remote, emulator, tmp_path / "old", ports[0])
    new: subprocess.Popen[bytes] | None = None
    try:
        wait_for(lambda: metric(ports[0], "reconciler_lease_held") == 1.0, 60, "the first instance holds")
        wait_for(lambda: _settled(remote), 120, "the sample settled, profiles attached")
        # The holder's next read of a cluster's profiles (the one right before a detach) is held: the
        # holder is paused inside it, so that it resumes between planning the detach and sending it.
        held_read.armed.set()
        head = remote.commit({"project-b/workloads/llm-serving.yaml": None}, "llm-serving removed")
        wait_for(held_read.answered.is_set, 60, "the holder reading the profiles it is about to detach")
        standby = _standby_passes(ports[0])  # read before the pause: a stopped process answers nothing
        old.send_signal(signal.SIGSTOP)
        held_read.released.set()  # its answer waits in the socket while it is stopped

        new = _start(remote, emulator, tmp_path / "new", ports[1])
        wait_for(lambda: metric(ports[1], "reconciler_lease_held") == 1.0, 60, "the second instance holds")
        wait_for(lambda: SERVING not in _status_paths(remote), 60, "the new holder detached and reported")
        recorded = yaml.safe_load(git("show", "reconciler/status:reconciler.yaml", cwd=remote.bare))
        assert recorded["revision"] == head
        writes, tip = _writes(emulator), status_tip(remote)

        old.send_signal(signal.SIGCONT)
        wait_for(
            lambda: _standby_passes(ports[0]) > standby and metric(ports[0], "reconciler_lease_held") == 0.0,
            60,
            "the resumed instance back to standing by",
        )
        assert _writes(emulator) == writes, "the resumed instance sent a Palette write"
        assert status_tip(remote) == tip, "the resumed instance pushed status"
    finally:
        logs = stop_runs(old, *([new] if new is not None else []))
    assert "writer lease ran out during the pass" in logs[0]


# --- (b) SIGKILL between a scaling write and its status record --------------------------------------


@pytest.fixture
def scaling_remote(tmp_path: Path) -> RemoteRepo:
    remote = scaling_repo(tmp_path)
    policy = yaml.safe_load(git("show", "main:project-b/scalingpolicy.yaml", cwd=remote.bare))
    policy["spec"]["cooldownDuration"] = "10m"  # the successor runs well within it
    remote.commit({"project-b/scalingpolicy.yaml": yaml.safe_dump(policy)}, "a long cooldown")
    return remote


class HeldAnswer:
    """Holds the emulator's answer to the next ``method`` request whose path contains ``part``, once
    Palette has handled it, until released: the client is then inside that request, its effect (for a
    write) already applied. Only one answer is held; later requests pass."""

    def __init__(self, emulator: EmulatorServer, method: str, part: str) -> None:
        self.armed = threading.Event()
        self.answered = threading.Event()  # the held request was handled; its answer waits
        self.released = threading.Event()
        self.method, self.part = method, part
        self.original = emulator.app._palette
        self.routes = self.original.routes  # the emulator names requests by them
        emulator.app._palette = self  # type: ignore[assignment]

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        hold = self.armed.is_set() and scope["method"] == self.method and self.part in scope["path"]
        if not hold:
            await self.original(scope, receive, send)
            return
        self.armed.clear()

        async def held(message: Any) -> None:
            if message["type"] == "http.response.start":
                self.answered.set()
                while not self.released.is_set():
                    await asyncio.sleep(0.02)
            await send(message)

        await self.original(scope, receive, held)


@pytest.fixture
def held_write(emulator: EmulatorServer) -> Iterator[HeldAnswer]:
    answer = HeldAnswer(emulator, "PUT", "/machinePools/")
    yield answer
    answer.released.set()


@pytest.fixture
def held_read(emulator: EmulatorServer) -> Iterator[HeldAnswer]:
    answer = HeldAnswer(emulator, "GET", "/profiles")
    yield answer
    answer.released.set()


def _pool(remote: RemoteRepo) -> dict[str, Any]:
    """The pool's status as recorded ({} before it is)."""
    try:
        status = status_files(remote).get(POOL, {}).get("status", {})
    except AssertionError:  # no status branch yet
        return {}
    assert isinstance(status, dict)
    return status


def test_a_successor_neither_undoes_nor_repeats_a_scaling_action_cut_short(
    scaling_remote: RemoteRepo, emulator: EmulatorServer, held_write: HeldAnswer, tmp_path: Path
) -> None:
    remote = scaling_remote
    ports = [free_port(), free_port()]
    with FakePrometheus() as prometheus:  # no data: only pending demand scales the pool up
        first = _start(remote, emulator, tmp_path / "first", ports[0], "--prometheus", prometheus.url)
        successor: subprocess.Popen[bytes] | None = None
        try:
            wait_for(
                lambda: _pool(remote).get("phase") == "Running" and bool(gpu_hosts(emulator)),
                120,
                "the pool Running",
            )
            before = gpu_hosts(emulator)
            puts = emulator.stats.count("PUT")
            held_write.armed.set()
            remote.commit(
                {"project-b/workloads/big.yaml": pool_workload("big", 8)}, "a workload that does not fit"
            )
            wait_for(held_write.answered.is_set, 120, "the scaling write applied by Palette")
            intent = _pool(remote).get("scaling", {}).get("intent")
            assert intent is not None, "the action was not recorded as intended before its write"
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=60)
            held_write.released.set()
            wait_for(lambda: emulator.stats.count("PUT") > puts, 60, "the held write counted")
            grown = gpu_hosts(emulator)
            assert len(grown - before) == 1 and set(intent["hosts"]) == grown - before
            writes = _writes(emulator)

            successor = _start(remote, emulator, tmp_path / "next", ports[1], "--prometheus", prometheus.url)
            wait_for(
                lambda: (a := last_action(_pool(remote))) is not None and a["hosts"] == intent["hosts"],
                120,
                "the successor recorded the action",
            )
            status: dict[str, Any] = {}
            wait_for(lambda: bool(status.update(_pool(remote)) or status), 60, "the pool's status read")
            assert "intent" not in status["scaling"]
            assert status["scaling"]["lastAction"]["at"] == intent["at"]  # the cooldown runs from it
            assert status["scaling"]["size"] == intent["to"]
            done = passes(ports[1])
            wait_for(
                lambda: passes(ports[1]) >= done + 3,
                60,
                "three more passes of the successor",
            )
            assert gpu_hosts(emulator) == grown, "the successor scaled the pool back or again"
            assert _writes(emulator) == writes, "the successor wrote to Palette again"
        finally:
            stop_runs(first, *([successor] if successor is not None else []))
