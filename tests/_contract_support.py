"""Black-box helpers for the contract tests: the installed ``reconciler`` command, real git, a real emulator.

The contract tests check docs/validation.md from the outside, as an acceptance test would:
they only start subprocesses and read files, git objects and HTTP answers. Every command run through
``run_cli`` is also checked for the API key in its output, so the "secrets never in any output" rule is
exercised by every test, not by one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests import _git_support
from tests._git_support import RemoteRepo, free_port, stop_process

REPO_ROOT = Path(__file__).resolve().parents[1]
SAMPLE_REPO = REPO_ROOT / "sample-repo"
SAMPLE_INVENTORY = SAMPLE_REPO / "inventory.json"

# A recognisable canary: it must never show up in anything a command prints.
API_KEY = "contract-canary-key-5c1e9a77d0"

ACTIONS = {"create", "scale", "replace", "delete", "unchanged", "rejected", "invalid", "suspended"}
REASONS = {
    "Provisioned",
    "Provisioning",
    "Scaling",
    "Deleting",
    "GPULimitExceeded",
    "InsufficientCompute",
    "InvalidSpec",
    "ReferenceNotFound",
    "UnsupportedMode",
    "Suspended",
    "PaletteUnavailable",
    "PaletteUnauthorized",
    "PruneBlocked",
    "ReplaceBlocked",
}
PHASES = {"Pending", "Provisioning", "Running", "Rejected", "Invalid", "Suspended", "Deleting", "Degraded"}
DIAGNOSTIC_KEYS = {"file", "line", "column", "severity", "kind", "namespace", "name", "message"}
PLATFORM_KEYS = {"namespace", "name", "action", "reason", "message", "controlPlane", "workers", "gpus"}
SAMPLE_PLATFORMS = [
    ("project-a", "clearml-prod"),
    ("project-a", "cpu-sandbox"),
    ("project-a", "notebooks"),
    ("project-b", "inference"),
    ("project-b", "training"),
]
SAMPLE_POOLS = [("project-b", "finetune-l40s"), ("project-b", "shared-a100"), ("project-b", "whisper")]
SAMPLE_WORKLOADS = [
    ("project-b", "batch-train"),
    ("project-b", "finetune"),
    ("project-b", "llm-serving"),
    ("project-b", "notebook"),
    ("project-b", "sweep"),
    ("project-b", "whisper"),
]
SAMPLE_COMPUTES = [("project-a", "edge-compute"), ("project-b", "edge-compute")]

_GIT_ENV = {
    "GIT_AUTHOR_NAME": "Contract Test",
    "GIT_AUTHOR_EMAIL": "contract@example.com",
    "GIT_COMMITTER_NAME": "Contract Test",
    "GIT_COMMITTER_EMAIL": "contract@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def reconciler_bin() -> str:
    """The installed console script (the acceptance tests run exactly this)."""
    found = shutil.which("reconciler")
    if found is None:
        raise RuntimeError("the reconciler command is not installed (pip install -e .)")
    return found


def _clean_env(extra: Mapping[str, str] | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PALETTE_", "RECONCILER_"))}
    env.update(_GIT_ENV)
    env["NO_COLOR"] = "1"
    env["COLUMNS"] = "200"
    if extra:
        env.update(extra)
    return env


def assert_no_secret(*texts: str) -> None:
    for text in texts:
        assert API_KEY not in text, "the API key appeared in a command's output"


def run_cli(
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 60.0,
) -> subprocess.CompletedProcess[str]:
    """Run ``reconciler ARGS`` and check that the API key is in neither stdout nor stderr."""
    result = subprocess.run(
        [reconciler_bin(), *args],
        capture_output=True,
        text=True,
        env=_clean_env(env),
        cwd=cwd,
        timeout=timeout,
        check=False,
    )
    assert_no_secret(result.stdout, result.stderr)
    assert "Traceback (most recent call last)" not in result.stderr, result.stderr
    return result


def with_key(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {"PALETTE_API_KEY": API_KEY}
    if extra:
        env.update(extra)
    return env


# --- git ----------------------------------------------------------------------------------------------


def git(*args: str, cwd: Path | None = None) -> str:
    """git's output, stripped: the contract tests compare shas and names."""
    return _git_support.git(*args, cwd=cwd).strip()


def git_rc(*args: str, cwd: Path | None = None) -> int:
    return _git_support.git_run(*args, cwd=cwd).returncode


@dataclass
class ConfigRepo:
    """A work tree (where tests edit and commit) and the bare "remote" the reconciler reads."""

    work: Path
    bare: Path

    def head(self) -> str:
        return git("rev-parse", "HEAD", cwd=self.work)

    def commit_and_push(self, message: str) -> str:
        git("add", "-A", ".", cwd=self.work)
        git("commit", "-q", "-m", message, cwd=self.work)
        git("push", "-q", "origin", "main", cwd=self.work)
        return self.head()

    def status_git(self, *args: str) -> str:
        return git("--git-dir", str(self.bare), *args)


def make_config_repo(root: Path, source: Path = SAMPLE_REPO) -> ConfigRepo:
    """A bare repository whose ``main`` holds a copy of ``source`` in one commit."""
    root.mkdir(parents=True, exist_ok=True)
    remote = RemoteRepo(root)
    shutil.copytree(source, remote.work, dirs_exist_ok=True)
    remote.commit({}, "initial config")
    return ConfigRepo(work=remote.work, bare=remote.bare)


# --- emulator -----------------------------------------------------------------------------------------


@dataclass
class Emulator:
    url: str
    log: Path

    def export(self, out: Path) -> dict[str, Any]:
        """The emulator's state as ``reconciler inventory export`` writes it."""
        result = run_cli("inventory", "export", "--palette", self.url, "--out", str(out), env=with_key())
        assert result.returncode == 0, result.stderr
        data = yaml.safe_load(out.read_text())
        assert isinstance(data, dict)
        return data


@contextmanager
def running_emulator(
    tmp: Path,
    inventory: Path = SAMPLE_INVENTORY,
    provision_seconds: float = 0.3,
    delete_seconds: float = 0.1,
    key_by_flag: bool = False,
) -> Iterator[Emulator]:
    """``reconciler emulator`` as a subprocess on a free loopback port; stopped, log checked, on exit."""
    port = free_port()
    log = tmp / f"emulator-{port}.log"
    args = [
        reconciler_bin(),
        "emulator",
        "--inventory",
        str(inventory),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--provision-seconds",
        str(provision_seconds),
        "--delete-seconds",
        str(delete_seconds),
    ]
    env = _clean_env(None if key_by_flag else {"PALETTE_API_KEY": API_KEY})
    if key_by_flag:
        args += ["--api-key", API_KEY]
    with log.open("w") as sink:
        proc = subprocess.Popen(args, stdout=sink, stderr=subprocess.STDOUT, env=env, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60  # a hang bound: a busy machine starts it late
        while True:
            assert proc.poll() is None, f"emulator exited: {log.read_text()}"
            try:
                httpx.post(f"{url}/v1/dashboard/edgehosts/search", json={}, timeout=1.0)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield Emulator(url=url, log=log)
    finally:
        stop_process(proc, 10)
        assert_no_secret(log.read_text())


def load_json(text: str) -> Any:
    import json

    return json.loads(text)
