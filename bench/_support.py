"""What the benchmarks share: git as the bench author, a free loopback port, a generated fleet in a bare
repository, and the emulator as a separate process.

The scripts run as ``python bench/x.py``, so this directory is on ``sys.path`` and they ``import _support``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import gen_config_tree
import gen_inventory
import httpx

GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@localhost",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@localhost",
}


def git_run(
    *args: str, cwd: Path | None = None, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run git in ``cwd`` (``input`` on stdin) as the bench author; its result, whatever its exit."""
    return subprocess.run(
        ["git", *args], cwd=cwd, env=GIT_ENV, input=input, capture_output=True, text=True, check=False
    )


def git(*args: str, cwd: Path | None = None, input: str | None = None) -> str:
    """git's output, stripped; a failed git stops the benchmark with its stderr."""
    done = git_run(*args, cwd=cwd, input=input)
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {done.stderr}")
    return done.stdout.strip()


REPO = Path(__file__).resolve().parent.parent


def base_tree(rev: str) -> tuple[str, Path]:
    """``rev``'s commit and a detached work tree of it outside the repository
    (``/tmp/reconciler-base-<sha>``), made once and reused by later runs; a benchmark runs a previous
    version from it with ``PYTHONPATH`` pointing there."""
    sha = git("-C", str(REPO), "rev-parse", "--verify", f"{rev}^{{commit}}")
    path = Path(tempfile.gettempdir()) / f"reconciler-base-{sha[:12]}"
    if not (path / "reconciler").is_dir():
        git("-C", str(REPO), "worktree", "add", "--detach", str(path), sha)
    return sha, path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class Fleet:
    """``gen_inventory``'s hosts (``inventory``), ``gen_config_tree``'s platforms committed in the work
    tree ``tree``, and the bare repository ``bare`` cloned from it (what the reconciler reads)."""

    inventory: Path
    tree: Path
    bare: Path


def fleet(work: Path, *, platforms: int, namespaces: int, hosts: int) -> Fleet:
    """A fleet under ``work``: ``platforms`` platforms over ``namespaces`` namespaces (with their support
    documents; one control-plane node each, so that more fit) and ``hosts`` edge hosts."""
    inventory = work / "inventory.json"
    inventory.write_text(json.dumps(gen_inventory.generate(hosts, seed=1)))
    tree = work / "config"
    support = len(gen_config_tree.SUPPORT) * namespaces
    gen_config_tree.generate(tree, documents=platforms + support, namespaces=namespaces)
    for profile in tree.glob("*/computeprofile.yaml"):
        profile.write_text(profile.read_text().replace("nodeCount: 3", "nodeCount: 1"))
    git("init", "-q", "-b", "main", cwd=tree)
    git("add", "-A", cwd=tree)
    git("commit", "-q", "-m", "bench config", cwd=tree)
    bare = work / "remote.git"
    git("clone", "-q", "--bare", str(tree), str(bare))
    return Fleet(inventory, tree, bare)


@contextmanager
def emulator_process(inventory: Path, key: str, *extra: str, ready_within: float = 30.0) -> Iterator[str]:
    """``reconciler emulator`` in its own process (it does not share the benchmark's GIL) on a free
    loopback port, once it answers; yields its URL and stops it on exit."""
    port = free_port()
    command = [sys.executable, "-m", "reconciler.cli", "emulator", "--inventory", str(inventory)]
    env = {**os.environ, "PALETTE_API_KEY": key}
    process = subprocess.Popen(
        [*command, "--port", str(port), *extra], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + ready_within
        while True:
            try:
                httpx.get(f"{url}/__emulator/stats", timeout=1)
                break
            except httpx.HTTPError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(10)
