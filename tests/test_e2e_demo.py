"""``reconciler demo``, the README's main job, end to end in a real process."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path


def test_demo_runs_every_sample_platform_to_running_and_exits_zero() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PALETTE_API_KEY"}
    proc = subprocess.run(
        [sys.executable, "-m", "reconciler.cli", "demo"], env=env, capture_output=True, text=True, timeout=240
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "all 5 platforms Running" in proc.stdout
    for name in ("clearml-prod", "cpu-sandbox", "notebooks", "inference", "training"):
        assert re.search(rf"{name}\s.*Running", proc.stdout), name
    workspace = re.search(r"workspace (\S+)", proc.stdout)
    assert workspace is not None
    remote = Path(workspace.group(1)) / "config-remote.git"
    log = subprocess.run(
        ["git", "--git-dir", str(remote), "log", "--format=%B", "reconciler/status"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "Source-Revision:" in log
    key = (Path(workspace.group(1)) / "palette-api-key").read_text()
    assert key and key not in proc.stdout and key not in proc.stderr
    shutil.rmtree(workspace.group(1), ignore_errors=True)
