"""The demo's workspace (``reconciler demo``): the sample repository found, and a bare "remote" made
from it as a team's Git server would hold it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path


def find_sample_repo() -> Path:
    """``$RECONCILER_SAMPLE_REPO``, else ``sample-repo/`` beside the package (a source checkout)."""
    candidates = [
        os.environ.get("RECONCILER_SAMPLE_REPO"),
        str(Path(__file__).resolve().parents[2] / "sample-repo"),
        str(Path.cwd() / "sample-repo"),
    ]
    for candidate in candidates:
        if candidate and (Path(candidate) / "inventory.json").is_file():
            return Path(candidate)
    raise FileNotFoundError(
        "sample-repo/ not found: run from a source checkout or set RECONCILER_SAMPLE_REPO"
    )


def make_remote(sample: Path, workspace: Path) -> Path:
    """A bare repository holding one commit of the sample repository, as a team's Git server would."""
    work = workspace / "config"
    shutil.copytree(sample, work, ignore=shutil.ignore_patterns("inventory.json"))
    remote = workspace / "config-remote.git"
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Platform Team",
        "GIT_AUTHOR_EMAIL": "platform@example.com",
        "GIT_COMMITTER_NAME": "Platform Team",
        "GIT_COMMITTER_EMAIL": "platform@example.com",
    }

    def git(*args: str) -> None:
        subprocess.run(["git", *args], check=True, env=env, capture_output=True)

    git("init", "-q", "-b", "main", str(work))
    git("-C", str(work), "add", "-A")
    git("-C", str(work), "commit", "-q", "-m", "Sample PaletteAI compute configuration")
    git("clone", "-q", "--bare", str(work), str(remote))
    # The server's repository has no upstream: readers of its status branch read it, not an "origin".
    git("--git-dir", str(remote), "remote", "remove", "origin")
    return remote
