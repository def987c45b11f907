"""Helpers of the loop-safety end-to-end tests: controllers with fast retries, `reconciler run`
processes (started, stopped, their /metrics read), and status branch readers."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, MutableMapping
from pathlib import Path
from typing import Any

import yaml

from reconciler.palette.client import PaletteClient
from reconciler.resolve import Target
from reconciler.runtime import wiring
from reconciler.runtime.options import ControllerOptions
from reconciler.runtime.pipeline import Pipeline
from tests._e2e_support import API_KEY
from tests._git_support import RemoteRepo, git
from tests._palette_support import fast_retry

# The loops' git lease, seconds: a holder renews every 2 s and stops writing 4 s after its last renewal.
LEASE_SECONDS = "6"


def fast_controller(
    remote: RemoteRepo,
    url: str | None,
    cache: Path,
    *,
    environ: MutableMapping[str, str] | None = None,
    **options: Any,
) -> Pipeline:
    """A controller whose Palette client gives up quickly (an outage costs milliseconds, not 30 s)."""

    def client(target: Target, key: str) -> PaletteClient:
        return PaletteClient(target.url, key, target.project_uid, retry=fast_retry(max_attempts=2))

    opts = ControllerOptions(repo=str(remote.bare), palette_url=url, cache_dir=cache, **options)
    env = environ if environ is not None else {"PALETTE_API_KEY": API_KEY}
    return wiring.build(opts, client_factory=client, environ=env)


def until_running(ctl: Pipeline, passes: int = 15) -> None:
    for _ in range(passes):
        result = ctl.reconcile_once()
        if result.phases and all(str(p) == "Running" for p in result.phases.values()):
            return
        time.sleep(0.3)
    raise AssertionError("platforms did not reach Running")


def status_files(remote: RemoteRepo, ref: str = "reconciler/status") -> dict[str, dict[str, Any]]:
    """Every YAML file of the status branch, parsed."""
    names = git("ls-tree", "-r", "--name-only", ref, cwd=remote.bare).split()
    return {
        name: yaml.safe_load(git("show", f"{ref}:{name}", cwd=remote.bare))
        for name in names
        if name.endswith(".yaml")
    }


def recorded(remote: RemoteRepo, ref: str = "reconciler/status") -> dict[str, Any]:
    doc = yaml.safe_load(git("show", f"{ref}:reconciler.yaml", cwd=remote.bare))
    assert isinstance(doc, dict)
    return doc


def run_args(remote: RemoteRepo, cache: Path, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "reconciler.cli",
        "run",
        "--repo",
        str(remote.bare),
        "--cache-dir",
        str(cache),
        "--listen",
        "127.0.0.1:0",
        *args,
    ]


def start_run(
    remote: RemoteRepo,
    cache: Path,
    *args: str,
    env: Mapping[str, str] | None = None,
    log: Path | None = None,
) -> subprocess.Popen[bytes]:
    """``reconciler run ARGS`` in the background; its output on a pipe, or in ``log`` (a pipe that
    nobody reads while the test waits could fill and block a long-lived loop)."""
    environ = {**os.environ, "PALETTE_API_KEY": API_KEY, **(env or {})}
    if log is None:
        return subprocess.Popen(
            run_args(remote, cache, *args), env=environ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
    with log.open("wb") as sink:
        return subprocess.Popen(
            run_args(remote, cache, *args), env=environ, stdout=sink, stderr=subprocess.STDOUT
        )


def start_loop(
    remote: RemoteRepo, palette_url: str, cache: Path, port: int, *extra: str, log: Path | None = None
) -> subprocess.Popen[bytes]:
    """A long-lived ``reconciler run``: a pass a second, the git lease of 6 s (renewed every 2 s), its
    /metrics and /readyz on ``port`` (a repeated --listen: the last one wins)."""
    args = ("--palette", palette_url, "--interval", "1", "--lease-duration", LEASE_SECONDS, *extra)
    return start_run(remote, cache, *args, "--listen", f"127.0.0.1:{port}", log=log)


def stop_runs(*procs: subprocess.Popen[bytes]) -> list[str]:
    """Stop each process as Kubernetes would (SIGTERM; SIGCONT first, for one a test paused); their
    output, once each has exited. One that outlives the stop deadline is killed: a test failure."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.terminate()
    logs = []
    for proc in procs:
        try:
            out, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate(timeout=60)
            raise
        logs.append((out or b"").decode(errors="replace"))
    return logs


def http_get(port: int, path: str) -> tuple[int, str]:
    """A loop's answer on ``path`` (status, body); (0, "") while it does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


def metric(port: int, name: str) -> float | None:
    """The value of the sample ``name`` (with its labels, as exported) of a loop's /metrics."""
    status, text = http_get(port, "/metrics")
    if status != 200:
        return None
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else None


def passes(port: int) -> float:
    """Passes a loop has finished so far, of every outcome (0 while it does not answer)."""
    status, text = http_get(port, "/metrics")
    if status != 200:
        return 0.0
    return sum(float(n) for n in re.findall(r"^reconciler_passes_total\{[^}]*\} (\S+)$", text, re.MULTILINE))


def run_once(
    remote: RemoteRepo, cache: Path, *args: str, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "PALETTE_API_KEY": API_KEY, **(env or {})}
    return subprocess.run(
        run_args(remote, cache, "--once", *args),
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def wait_for(predicate: Callable[[], object], timeout: float = 120.0, what: str = "condition") -> None:
    """Poll ``predicate`` until it is true; ``timeout`` only bounds a hang (at least 60 s: a busy
    machine is slow, and a condition, not a time, is what a test waits for)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"{what} not met within {timeout} s")
