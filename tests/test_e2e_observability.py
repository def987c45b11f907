"""What an operator sees of the loop (docs/planning.md): /healthz and /readyz, the pass summary
line and one warning per rejection, ``--log-level``, ``--dry-run`` and ``--interval``."""

from __future__ import annotations

import io
import json
import re
import signal
import subprocess
import time
from pathlib import Path

import httpx
import yaml
from typer.testing import CliRunner

from reconciler.cli_app import app
from reconciler.emulator import EmulatorServer
from reconciler.logging import configure_logging
from tests._git_support import RemoteRepo, git
from tests._loop_support import fast_controller, run_once, start_run, until_running, wait_for

NOTEBOOKS = "project-a/platforms/notebooks.yaml"


def listening_url(proc_output: list[str]) -> str | None:
    for line in proc_output:
        match = re.search(r'"event": "http server listening".*?"url": "([^"]+)"', line)
        if match:
            return match.group(1)
    return None


def read_until_listening(proc: subprocess.Popen[bytes], lines: list[str]) -> str | None:
    """The run's server URL, once its log says it listens; every line read is kept in ``lines``."""
    assert proc.stdout is not None
    while listening_url(lines) is None:
        lines.append(proc.stdout.readline().decode())
    return listening_url(lines)


def get(url: str) -> tuple[int, str]:
    try:
        response = httpx.get(url, timeout=2)
    except httpx.HTTPError as exc:
        return 0, str(exc)
    return response.status_code, response.text


def test_healthz_fails_after_passes_fail_longer_than_the_bound_and_recovers(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path
) -> None:
    moved = remote.bare.with_name("away.git")
    proc = start_run(
        remote, tmp_path / "cache", "--palette", emulator.url, "--interval", "1", "--unhealthy-after", "2"
    )
    lines: list[str] = []
    try:
        base = read_until_listening(proc, lines)
        wait_for(lambda: get(f"{base}/readyz")[0] == 200, what="ready")
        remote.bare.rename(moved)  # every pass fails from now on
        assert get(f"{base}/healthz")[0] == 200
        wait_for(lambda: get(f"{base}/healthz")[0] == 503, timeout=60, what="unhealthy")
        assert "every pass has failed" in get(f"{base}/healthz")[1]
        metrics = httpx.get(f"{base}/metrics", timeout=2).text
        assert re.search(r'reconciler_git_fetches_total\{outcome="error"\} [1-9]', metrics)
        assert re.search(r'reconciler_passes_total\{outcome="error"\} [1-9]', metrics)
        moved.rename(remote.bare)
        wait_for(lambda: get(f"{base}/healthz")[0] == 200, timeout=60, what="healthy again")
    finally:
        if moved.exists():
            moved.rename(remote.bare)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    passes = [json.loads(line) for line in (lines + out.decode().splitlines()) if '"pass finished"' in line]
    failed = [p for p in passes if p["outcome"] == "error"]
    assert failed and all(p["error"] for p in failed)  # the error is said on an error pass
    assert {"created", "scaled", "deleted", "rejected", "prune_blocked", "duration"} <= set(passes[0])


def test_readyz_says_why_when_the_status_branch_follows_another_branch(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path
) -> None:
    assert run_once(remote, tmp_path / "first", "--palette", emulator.url).returncode == 0
    git("branch", "staging", "main", cwd=remote.bare)
    proc = start_run(remote, tmp_path / "cache", "--palette", emulator.url, "--branch", "staging")
    lines: list[str] = []
    try:
        base = read_until_listening(proc, lines)
        wait_for(lambda: "follows the config branch" in get(f"{base}/readyz")[1], what="reason")
        status, text = get(f"{base}/readyz")
        assert status == 503 and "--switch-branch" in text
        assert get(f"{base}/healthz")[0] == 200  # not wedged: a restart would not help
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)


def test_interval_below_one_second_is_a_usage_error(remote: RemoteRepo) -> None:
    result = CliRunner().invoke(app, ["run", "--repo", str(remote.bare), "--interval", "0", "--once"])
    assert result.exit_code == 2


def test_dry_run_logs_what_it_would_do_and_writes_nothing(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path
) -> None:
    result = run_once(remote, tmp_path / "cache", "--palette", emulator.url, "--dry-run")
    assert result.returncode == 0, result.stderr
    assert emulator.stats.writes() == 0
    assert emulator.stats.count() > 0  # it did plan against Palette
    assert git("branch", "--list", "reconciler/status", cwd=remote.bare).strip() == ""
    would = [json.loads(line) for line in result.stderr.splitlines() if "dry run: would create" in line]
    assert {entry["name"] for entry in would} == {
        "clearml-prod",
        "cpu-sandbox",
        "notebooks",
        "inference",
        "training",
        "finetune-l40s",  # the sample's pools
        "shared-a100",
        "whisper",  # the pool the workload whisper provisions for itself
    }


def test_log_level_from_the_environment_silences_info_lines(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path
) -> None:
    quiet = run_once(
        remote, tmp_path / "cache", "--palette", emulator.url, env={"RECONCILER_LOG_LEVEL": "warning"}
    )
    assert quiet.returncode == 0
    assert '"level": "info"' not in quiet.stderr
    loud = run_once(remote, tmp_path / "cache", "--palette", emulator.url, "--log-level", "debug")
    assert '"pass finished"' in loud.stderr


def test_each_rejection_is_warned_once_and_counted_in_the_summary(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path
) -> None:
    ctl = fast_controller(remote, emulator.url, tmp_path / "cache")
    until_running(ctl)
    doc = yaml.safe_load((remote.work / NOTEBOOKS).read_text())
    doc["spec"]["gpus"] = [{"family": "NVIDIA-H100", "count": 64}]
    remote.commit({NOTEBOOKS: yaml.safe_dump(doc)}, "notebooks: far too many GPUs")
    buffer = io.StringIO()
    configure_logging("info", json=True, stream=buffer)
    try:
        ctl.reconcile_once()
        time.sleep(0.1)
        ctl.reconcile_once()
        ctl.reconcile_once(check_source=False)
    finally:
        configure_logging()
        ctl.close()
    lines = [json.loads(line) for line in buffer.getvalue().splitlines()]
    warned = [line for line in lines if line["event"] == "platform rejected"]
    assert len(warned) == 1
    assert warned[0]["level"] == "warning"
    assert (warned[0]["namespace"], warned[0]["name"]) == ("project-a", "notebooks")
    assert warned[0]["reason"] and warned[0]["message"]
    summaries = [line for line in lines if line["event"] == "pass finished"]
    assert len(summaries) == 3
    assert summaries[0]["rejected"] == 1 and summaries[0]["outcome"] == "success"
