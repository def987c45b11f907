"""The ``reconciler run`` process: killed with SIGKILL mid-pass and restarted; its webhook."""

from __future__ import annotations

import hashlib
import hmac
import json
import signal
import time
from pathlib import Path

import httpx

from reconciler.emulator import EmulatorServer, FaultRule
from tests._e2e_support import API_KEY, clusters_by_name
from tests._git_support import RemoteRepo, free_port, git
from tests._loop_support import http_get, passes, start_run, stop_runs, wait_for


def test_sigkill_right_after_a_create_then_restart_adopts_one_cluster_per_platform(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path
) -> None:
    # Slow creates down so that the kill lands after the first create and before the status commit.
    emulator.faults.add(
        [FaultRule(path=r"^/v1/spectroclusters/edge-native$", methods=("POST",), latency=0.4)]
    )
    # --lease none: this is about adoption; a killed holder's git lease would make the restart wait.
    cache = tmp_path / "cache"
    proc = start_run(remote, cache, "--palette", emulator.url, "--interval", "3600", "--lease", "none")
    try:
        wait_for(lambda: len(emulator.state.clusters) >= 1)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    created_before_kill = len(clusters_by_name(emulator))
    assert 1 <= created_before_kill < 5
    branches = git("branch", "--list", "reconciler/status", cwd=remote.bare)
    assert branches.strip() == ""  # killed before any status was written

    emulator.faults.clear()
    again = start_run(remote, cache, "--palette", emulator.url, "--once", "--lease", "none")
    out, _ = again.communicate(timeout=60)
    assert again.returncode == 0, out.decode()

    names = clusters_by_name(emulator)
    assert sorted(names) == [
        "project-a-clearml-prod",
        "project-a-cpu-sandbox",
        "project-a-notebooks",
        "project-b-finetune-l40s",  # the sample's compute pools
        "project-b-inference",
        "project-b-shared-a100",
        "project-b-training",
    ]
    assert all(len(uids) == 1 for uids in names.values())  # adopted, never created twice
    assert API_KEY not in out.decode()


def test_webhook_with_a_bad_signature_gets_401_and_starts_no_pass(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path
) -> None:
    secret = "hook-secret-for-tests"
    port = free_port()
    args = ("--palette", emulator.url, "--interval", "3600", "--listen", f"127.0.0.1:{port}")
    proc = start_run(remote, tmp_path / "cache", *args, env={"RECONCILER_WEBHOOK_SECRET": secret})
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: http_get(port, "/readyz")[0] == 200, what="the loop ready")
        before = passes(port)
        body = json.dumps({"ref": "refs/heads/main"}).encode()
        headers = {"X-GitHub-Event": "push", "Content-Type": "application/json"}
        missing = httpx.post(f"{base}/hooks/git", content=body, headers=headers, timeout=5)
        wrong = httpx.post(
            f"{base}/hooks/git",
            content=body,
            headers={**headers, "X-Hub-Signature-256": "sha256=" + "0" * 64},
            timeout=5,
        )
        assert (missing.status_code, wrong.status_code) == (401, 401)
        time.sleep(1.0)
        assert passes(port) == before

        good = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        accepted = httpx.post(
            f"{base}/hooks/git", content=body, headers={**headers, "X-Hub-Signature-256": good}, timeout=5
        )
        assert accepted.status_code == 202
        wait_for(lambda: passes(port) > before, timeout=15)
    finally:
        (out,) = stop_runs(proc)
    assert secret not in out and API_KEY not in out
