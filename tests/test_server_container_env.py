"""`reconciler run` configured the way the container image configures it: environment only, no flags.

The image (``Dockerfile``) runs ``reconciler run`` with no arguments, so everything must come from
``RECONCILER_*`` variables and the secrets from the environment or files. This starts the real command
that way against a bare remote and the emulator, and checks what an orchestrator and an operator see:
the health endpoints, JSON log lines on a non-terminal standard error, no secret in them, and a clean
exit on SIGTERM (what ``docker stop`` sends).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from reconciler.emulator import EmulatorServer
from reconciler.forges import sign_body
from tests._e2e_support import API_KEY
from tests._git_support import RemoteRepo, free_port
from tests._loop_support import http_get, wait_for

pytestmark = pytest.mark.e2e

WEBHOOK_SECRET = "container-webhook-secret-5d2a9e"


def test_env_only_configuration_serves_logs_json_and_stops_on_sigterm(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path
) -> None:
    secret_file = tmp_path / "webhook-secret"
    secret_file.write_text(WEBHOOK_SECRET + "\n")
    port = free_port()
    environ = {
        key: value for key, value in os.environ.items() if not key.startswith(("RECONCILER_", "PALETTE_"))
    }
    environ.update(
        RECONCILER_REPO=str(remote.bare),
        RECONCILER_PALETTE=emulator.url,
        RECONCILER_LISTEN=f"127.0.0.1:{port}",
        RECONCILER_CACHE_DIR=str(tmp_path / "cache"),
        RECONCILER_INTERVAL="3600",
        RECONCILER_WEBHOOK_SECRET_FILE=str(secret_file),
        PALETTE_API_KEY=API_KEY,
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "reconciler.cli", "run"],
        env=environ,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: http_get(port, "/healthz")[0] == 200)
        wait_for(lambda: http_get(port, "/readyz")[0] == 200)
        body = json.dumps({"ref": "refs/heads/main"}).encode()
        hook = httpx.post(
            f"{base}/hooks/git",
            content=body,
            headers={
                "X-Hub-Signature-256": sign_body(WEBHOOK_SECRET.encode(), body),
                "X-GitHub-Event": "push",
            },
            timeout=5,
        )
        assert hook.status_code == 202  # the secret file was read
        assert "reconciler_passes_total" in httpx.get(f"{base}/metrics", timeout=5).text
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)  # a hang bound
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(60)

    assert proc.returncode == 0, err.decode()
    # In time: past run's own 15 s stop deadline it would have exited with 130, not 0.
    assert b"stop deadline reached" not in err
    assert http_get(port, "/healthz") == (0, ""), "nothing answers once it stopped"
    lines = [json.loads(line) for line in err.decode().splitlines() if line.strip()]
    assert lines, "no log line on standard error"
    assert all({"timestamp", "level", "event"} <= line.keys() for line in lines)
    assert any(line["event"] == "webhook accepted" for line in lines)
    everything = out.decode() + err.decode()
    assert API_KEY not in everything
    assert WEBHOOK_SECRET not in everything
