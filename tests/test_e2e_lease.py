"""One writer (docs/reconciling.md) with real processes and the default git lease: two `reconciler run`
on one repository, only the lease holder writes; the standby is ready, says that it stands by on
/readyz?verbose and in /metrics, and takes over when the holder dies (lease expiry) or stops
(release). `run --once` writes nothing while another instance holds the lease."""

from __future__ import annotations

import json
import signal
from datetime import timedelta
from pathlib import Path

from reconciler.emulator.server import EmulatorServer
from reconciler.source.lease import LeaseRecord
from tests._e2e_support import clusters_by_name
from tests._git_support import RemoteRepo, free_port, git
from tests._loop_support import (
    LEASE_SECONDS,
    http_get,
    metric,
    recorded,
    run_once,
    start_loop,
    status_files,
    stop_runs,
    wait_for,
)


def _held(port: int) -> bool | None:
    held = metric(port, "reconciler_lease_held")
    return None if held is None else held == 1.0


def _stands_by_ready(port: int) -> bool:
    status, verbose = http_get(port, "/readyz?verbose")
    return status == 200 and "standing by, held by" in verbose


def _all_running(remote: RemoteRepo) -> bool:
    try:
        files = status_files(remote)
    except Exception:
        return False
    phases = [doc["status"]["phase"] for path, doc in files.items() if "/mlplatforms/" in path]
    return bool(phases) and all(phase == "Running" for phase in phases)


def _lease(remote: RemoteRepo) -> LeaseRecord:
    return LeaseRecord.from_json(git("show", "reconciler/lease:lease.json", cwd=remote.bare).encode())


def _acquired_from(log: str) -> list[str | None]:
    """Whom a loop took the lease from, each time it did ("" when it had been released)."""
    events = (json.loads(line) for line in log.splitlines() if line.startswith("{"))
    return [event.get("previous") for event in events if event.get("event") == "lease acquired"]


def _holder_and_standby(ports: list[int]) -> tuple[int, int]:
    """Which of two loops holds the lease and which stands by (by index), once that is settled."""
    wait_for(lambda: {_held(p) for p in ports} == {True, False}, 60, "one holder and one standby")
    holder = 0 if _held(ports[0]) else 1
    return holder, 1 - holder


def test_two_instances_one_writer_and_the_standby_takes_over_when_the_holder_dies(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path
) -> None:
    ports = [free_port(), free_port()]
    procs = [start_loop(remote, emulator.url, tmp_path / f"cache-{i}", port) for i, port in enumerate(ports)]
    try:
        holder, standby = _holder_and_standby(ports)
        # The standby is ready (a rollout completes); that it stands by is a verbose line and the gauge.
        # (Right after losing the race to create the lease branch it has not read the holder yet: it
        # knows by its next attempt.)
        wait_for(lambda: _stands_by_ready(ports[standby]), 60, "the standby ready, saying that it stands by")
        wait_for(lambda: http_get(ports[holder], "/readyz")[0] == 200, 60, "the holder ready")
        assert git("rev-list", "--count", "reconciler/lease", cwd=remote.bare).strip() == "1"

        before = _lease(remote)  # the dead holder renews once more at most: that only makes it later
        procs[holder].send_signal(signal.SIGKILL)  # dies without releasing: the lease must expire
        procs[holder].wait(timeout=60)
        wait_for(lambda: _held(ports[standby]) is True, 60, "the standby holds the lease")
        taken = _lease(remote)
        assert taken.holder != before.holder and taken.transitions == before.transitions + 1
        # Taken on this machine's clock, a whole lease after a renewal the standby saw (never sooner).
        expired = before.renew_time + timedelta(seconds=before.duration)
        assert taken.acquire_time > expired, f"taken at {taken.acquire_time}, before the lease expired"
        wait_for(lambda: http_get(ports[standby], "/readyz")[0] == 200, 60, "the new holder ready")

        notebooks = "project-a/platforms/notebooks.yaml"
        text = (remote.work / notebooks).read_text()
        # A label changes the platform's inputs (a comment would not: no status file would change).
        labelled = text.replace("  name: notebooks\n", "  name: notebooks\n  labels: {reviewed: 'yes'}\n")
        head = remote.commit({notebooks: labelled}, "a change after the takeover")
        wait_for(lambda: recorded(remote)["revision"] == head, 60, "the new holder reports the new head")
        assert git("rev-list", "--count", "reconciler/lease", cwd=remote.bare).strip() == "1"
    finally:
        stop_runs(*procs)


def test_a_stopped_holder_releases_so_the_standby_takes_over_at_once(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path
) -> None:
    ports = [free_port(), free_port()]
    procs = [start_loop(remote, emulator.url, tmp_path / f"cache-{i}", port) for i, port in enumerate(ports)]
    try:
        holder, standby = _holder_and_standby(ports)
        procs[holder].send_signal(signal.SIGTERM)
        assert procs[holder].wait(timeout=60) == 0
        wait_for(lambda: _held(ports[standby]) is True, 60, "the standby holds the lease")
    finally:
        logs = stop_runs(*procs)
    # Released, not expired: the standby took a record with no holder (after an expiry it would name
    # the stopped holder), whatever the time it took on a busy machine.
    assert _acquired_from(logs[standby]) == [""], logs[standby][-3000:]
    assert "lease released" in logs[holder]


def test_run_once_writes_nothing_while_another_instance_holds_the_lease(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path
) -> None:
    port = free_port()
    proc = start_loop(remote, emulator.url, tmp_path / "holder", port)
    try:
        wait_for(lambda: _held(port) is True, 60, "the loop holds the lease")
        wait_for(lambda: http_get(port, "/readyz")[0] == 200, 60, "the loop ready")
        wait_for(lambda: _all_running(remote), 60, "the holder's platforms Running (it commits no more)")
        tip = git("rev-parse", "reconciler/status", cwd=remote.bare).strip()
        before = json.dumps(clusters_by_name(emulator), sort_keys=True)
        result = run_once(
            remote, tmp_path / "once", "--palette", emulator.url, "--lease-duration", LEASE_SECONDS
        )
        assert result.returncode == 1, result.stderr
        assert "lease is held by" in result.stderr
        assert git("rev-parse", "reconciler/status", cwd=remote.bare).strip() == tip
        assert json.dumps(clusters_by_name(emulator), sort_keys=True) == before
    finally:
        stop_runs(proc)
