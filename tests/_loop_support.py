"""Helpers of the loop-safety end-to-end tests: controllers with fast retries, `reconciler run`
processes, and status branch readers."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, MutableMapping
from pathlib import Path
from typing import Any

import yaml

from reconciler.controller import Controller, ControllerOptions, Target
from reconciler.palette.client import PaletteClient
from tests._e2e_support import API_KEY
from tests._git_support import RemoteRepo, git
from tests._palette_support import fast_retry


def fast_controller(
    remote: RemoteRepo,
    url: str | None,
    cache: Path,
    *,
    environ: MutableMapping[str, str] | None = None,
    **options: Any,
) -> Controller:
    """A controller whose Palette client gives up quickly (an outage costs milliseconds, not 30 s)."""

    def client(target: Target, key: str) -> PaletteClient:
        return PaletteClient(target.url, key, target.project_uid, retry=fast_retry(max_attempts=2))

    opts = ControllerOptions(repo=str(remote.bare), palette_url=url, cache_dir=cache, **options)
    env = environ if environ is not None else {"PALETTE_API_KEY": API_KEY}
    return Controller(opts, client_factory=client, environ=env)


def until_running(ctl: Controller, passes: int = 15) -> None:
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
    remote: RemoteRepo, cache: Path, *args: str, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    environ = {**os.environ, "PALETTE_API_KEY": API_KEY, **(env or {})}
    return subprocess.Popen(
        run_args(remote, cache, *args), env=environ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )


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


def wait_for(predicate: Callable[[], object], timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"{what} not met within {timeout} s")
