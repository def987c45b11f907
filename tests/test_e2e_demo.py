"""``reconciler demo``, the README's main job, end to end in a real process."""

from __future__ import annotations

import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests._git_support import git, stop_process


def test_demo_runs_every_sample_platform_to_running_and_exits_zero() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PALETTE_API_KEY"}
    proc = subprocess.run(
        [sys.executable, "-m", "reconciler.cli", "demo"], env=env, capture_output=True, text=True, timeout=280
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "all 5 platforms Running" in proc.stdout
    for name in ("clearml-prod", "cpu-sandbox", "notebooks", "inference", "training"):
        assert re.search(rf"{name}\s.*Running", proc.stdout), name
    # The sample pools: all Running; shared-a100 admits three, sweep waits with its shortfall.
    assert "all 3 pools Running, 5 workloads Running, 1 pending" in proc.stdout
    for name, mode in (("finetune-l40s", "dedicated"), ("shared-a100", "shared"), ("whisper", "dedicated")):
        assert re.search(rf"project-b/{name}\s.*ComputePool \({mode}\)\s.*Running", proc.stdout), name
    assert re.search(r"project-b/sweep\s.*Pending\s.*PoolCapacityExceeded: needs 4 NVIDIA-A100", proc.stdout)
    # finetune-l40s is a bundle-built pool: its cluster has the bundle l40s-stack's profiles.
    assert (
        "pool project-b/finetune-l40s is built from its profile bundle: cluster profiles "
        "6651a2b3c4d5e6f708192a3c, 66f1a2b3c4d5e6f7a8b9c0f1" in proc.stdout
    )
    # whisper provisions a pool of its own, built from its Fullstack bundle (and its WorkloadProfile's).
    assert (
        "pool project-b/whisper is provisioned for AIWorkload project-b/whisper and built from its profile "
        "bundle: cluster profiles 6651a2b3c4d5e6f708192a3c, 66f1a2b3c4d5e6f7a8b9c0f1, "
        "66f1a2b3c4d5e6f7a8b9c0e1" in proc.stdout
    )
    assert re.search(r"project-b/whisper\s.*AIWorkload\s.*Running\s.*project-b-whisper", proc.stdout)
    # notebook is placed through the Environment team-gpus: finetune-l40s is dedicated, shared-a100 takes it.
    assert (
        "environment project-b/team-gpus (candidates finetune-l40s, shared-a100): notebook -> shared-a100"
        in proc.stdout
    )
    # The scaling scene: a scale-up with its status commit when Prometheus is installed, else one hint.
    if shutil.which("prometheus"):
        assert (
            "scaled up shared-a100 by 1 NVIDIA-A100 host (8 GPUs): GPU utilisation 95% > 80%" in proc.stdout
        )
        assert "policy: project-b/demo-autoscale" in proc.stdout
    else:
        assert "scaling: install Prometheus (apt-get install prometheus)" in proc.stdout
    workspace = re.search(r"workspace (\S+)", proc.stdout)
    assert workspace is not None
    remote = Path(workspace.group(1)) / "config-remote.git"
    log = git("--git-dir", str(remote), "log", "--format=%B", "reconciler/status")
    assert "Source-Revision:" in log
    assert f"reconciler status --repo {remote}\n" in proc.stdout
    assert f"reconciler status --repo {remote} --html " in proc.stdout
    key = (Path(workspace.group(1)) / "palette-api-key").read_text()
    assert key and key not in proc.stdout and key not in proc.stderr
    shutil.rmtree(workspace.group(1), ignore_errors=True)


class _Lines:
    """A running process's standard output, line by line, read in a thread so a wait can time out."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.seen: list[str] = []
        self._queue: queue.Queue[str] = queue.Queue()
        assert proc.stdout is not None
        stdout = proc.stdout
        threading.Thread(target=lambda: [self._queue.put(line) for line in stdout], daemon=True).start()

    def wait_for(self, pattern: str, timeout: float) -> re.Match[str]:
        """The first line from now on that matches ``pattern``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=0.2)
            except queue.Empty:
                continue
            self.seen.append(line)
            if found := re.search(pattern, line):
                return found
        raise AssertionError(f"no line matching {pattern!r} in {timeout} s:\n" + "".join(self.seen))


def test_demo_keep_shows_the_pass_that_applies_a_pushed_change_and_stops_cleanly_on_sigterm(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PALETTE_API_KEY"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "reconciler.cli", "demo", "--keep", "--heartbeat", "2"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    out = _Lines(proc)
    workspace = ""
    try:
        workspace = out.wait_for(r"^workspace (\S+)", 60).group(1)
        remote = Path(workspace) / "config-remote.git"
        out.wait_for(r"all 5 platforms Running", 240)
        # The demo's scaling scene runs before the hint is printed: seconds on a quiet machine, more on a
        # loaded one. These are waits for a line, not sleeps: a generous bound costs nothing when it passes.
        out.wait_for(rf"git clone -q {re.escape(str(remote))} ", 120)
        # Idle passes (one a second) are summed up, not printed one by one.
        idle = int(out.wait_for(r"idle: (\d+) passes in \d+ s, nothing to do", 60).group(1))
        assert idle >= 2

        clone = tmp_path / "edit"
        git("clone", "-q", str(remote), str(clone))
        notebooks = clone / "project-a/platforms/notebooks.yaml"
        notebooks.write_text(notebooks.read_text() + "  suspend: true\n")
        (clone / "project-a/platforms/cpu-sandbox.yaml").unlink()
        message = "Suspend notebooks, drop the sandbox"
        for args in (["commit", "-qam", message], ["push", "-q"]):
            git(*args, cwd=clone)
        head = git("rev-parse", "HEAD", cwd=clone).strip()

        out.wait_for(rf"pass \d+: success at revision {head[:12]} \"{message}\"", 60)
        block = [out.wait_for(r"^  \S", 60).string]
        while not block[-1].startswith("  status commit"):
            block.append(out.wait_for(r"^  \S", 60).string)
        text = "".join(block)
        suspended = r"suspended +project-a/notebooks: suspended; cluster project-a-notebooks left"
        assert re.search(suspended, text), text
        deleted = r"deleted +project-a/cpu-sandbox: cluster project-a-cpu-sandbox, hosts \S"
        assert re.search(deleted, text), text
        assert re.search(r"phase +project-a/notebooks: Running -> Suspended", text), text
        deleting = r"project-a/cpu-sandbox: Running -> Deleting"
        commit = re.search(r"status commit ([0-9a-f]{12}) \".*" + deleting + r".*\"", text)
        assert commit is not None, text
        subject = git("--git-dir", str(remote), "log", "-1", "--format=%h %s", "reconciler/status")
        assert subject.startswith(commit.group(1)[:7])

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        out.wait_for(rf"the workspace {re.escape(workspace)} is left for you", 60)
        key = (Path(workspace) / "palette-api-key").read_text()
        assert key not in "".join(out.seen)
    finally:
        if proc.poll() is None:
            # SIGTERM first, so the demo stops the Prometheus and emulator it started.
            stop_process(proc, 30)
        if workspace:
            shutil.rmtree(workspace, ignore_errors=True)
