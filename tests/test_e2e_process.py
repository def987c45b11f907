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
from reconciler.metrics import PassOutcome
from reconciler.status.creates import INDEXING_DELAY, read_creates
from reconciler.status.render import RECONCILER_FILE
from tests._e2e_support import API_KEY, PinnedClock, clusters_by_name, controller, status_tip
from tests._git_support import RemoteRepo, free_port, git
from tests._loop_support import http_get, passes, start_run, stop_runs, wait_for

PLATFORMS = [
    "project-a-clearml-prod",
    "project-a-cpu-sandbox",
    "project-a-notebooks",
    "project-b-finetune-l40s",  # the sample's compute pools
    "project-b-inference",
    "project-b-shared-a100",
    "project-b-training",
    "project-b-whisper",  # the pool the workload whisper provisions
]


def recorded(remote: RemoteRepo) -> dict[str, bytes]:
    """The status branch's ``reconciler.yaml`` (where the create intents are)."""
    text = git("show", f"reconciler/status:{RECONCILER_FILE}", cwd=remote.bare)
    return {RECONCILER_FILE: text.encode()}


def test_sigkill_right_after_a_create_then_restart_adopts_one_cluster_per_platform(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path
) -> None:
    """Killed after its first create, before the pass's status: the creates were written ahead, so the
    restart adopts what was created, holds back what it cannot tell was sent, and a pass past the
    indexing delay creates the rest once each: one cluster per platform, every intent resolved."""
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
        proc.wait(60)
    created_before_kill = sorted(clusters_by_name(emulator))
    assert 1 <= len(created_before_kill) < 5
    # Only the write-ahead intent reached the status branch: one per create, sent or not.
    assert git("ls-tree", "--name-only", "reconciler/status", cwd=remote.bare).split() == [RECONCILER_FILE]
    intended = [i.cluster for i in read_creates(recorded(remote))]
    assert sorted(intended) == PLATFORMS
    killed_tip = status_tip(remote)

    emulator.faults.clear()
    again = start_run(remote, cache, "--palette", emulator.url, "--once", "--lease", "none")
    out, _ = again.communicate(timeout=60)
    assert again.returncode == 0, out.decode()
    assert API_KEY not in out.decode()
    adopted = clusters_by_name(emulator)  # (a create in flight at the kill may have landed since)
    assert set(created_before_kill) <= set(adopted) and all(len(u) == 1 for u in adopted.values())
    assert status_tip(remote) != killed_tip
    still_open = sorted(i.cluster for i in read_creates(recorded(remote)))
    assert still_open == sorted(set(PLATFORMS) - set(adopted))  # may have been sent: held back

    # Past the indexing delay each held create is looked up by name, found absent and sent once.
    later = PinnedClock(time.time() + INDEXING_DELAY + 1)
    ctl = controller(remote, emulator, tmp_path / "later", clock=later)
    try:
        done = ctl.reconcile_once()
        assert done.outcome is PassOutcome.SUCCESS, done.error
        later.at += 5
        assert ctl.reconcile_once().outcome is PassOutcome.SUCCESS
    finally:
        ctl.close()
    names = clusters_by_name(emulator)
    assert sorted(names) == PLATFORMS
    assert all(len(uids) == 1 for uids in names.values())  # adopted, never created twice
    assert read_creates(recorded(remote)) == ()


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
        wait_for(lambda: passes(port) > before, timeout=60)
    finally:
        (out,) = stop_runs(proc)
    assert secret not in out and API_KEY not in out
