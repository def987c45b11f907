"""Real git repositories for tests: a bare "remote" with a work tree to commit from, and git daemon."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.com",
    "GIT_COMMITTER_NAME": "Test Author",
    "GIT_COMMITTER_EMAIL": "author@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
}


def git(*args: str, cwd: Path) -> str:
    """Run git in ``cwd`` and return its stdout; fail the test with git's stderr otherwise."""
    proc = subprocess.run(
        ["git", *args], cwd=cwd, env=GIT_ENV, capture_output=True, text=True, timeout=60, check=False
    )
    if proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr}")
    return proc.stdout


class RemoteRepo:
    """A bare repository (the "remote") and a work tree clone used to commit and push to it."""

    def __init__(self, root: Path, branch: str = "main") -> None:
        self.bare = root / "remote.git"
        self.work = root / "work"
        self.branch = branch
        git("init", "--quiet", "--bare", "-b", branch, str(self.bare), cwd=root)
        git("init", "--quiet", "-b", branch, str(self.work), cwd=root)
        git("remote", "add", "origin", str(self.bare), cwd=self.work)

    def commit(
        self,
        files: Mapping[str, bytes | str | None],
        message: str = "change",
        *,
        symlinks: Mapping[str, str] | None = None,
        push: bool = True,
    ) -> str:
        """Write (or, for None, delete) files, commit them all, push; return the new commit sha."""
        for rel, content in files.items():
            path = self.work / rel
            if content is None:
                path.unlink()
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content.encode() if isinstance(content, str) else content)
        for rel, target in (symlinks or {}).items():
            path = self.work / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.symlink_to(target)
        git("add", "--all", ".", cwd=self.work)
        git("commit", "--quiet", "--allow-empty", "-m", message, cwd=self.work)
        if push:
            git("push", "--quiet", "origin", f"HEAD:refs/heads/{self.branch}", cwd=self.work)
        return git("rev-parse", "HEAD", cwd=self.work).strip()

    def head(self) -> str:
        return git("rev-parse", f"refs/heads/{self.branch}", cwd=self.bare).strip()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def git_daemon(base: Path) -> Iterator[str]:
    """Serve every repository under ``base`` over git:// on loopback (push enabled); yield the URL base.

    ``git://127.0.0.1:PORT/remote.git`` then names ``base/remote.git``.
    """
    port = free_port()
    proc = subprocess.Popen(
        [
            "git",
            "daemon",
            "--reuseaddr",
            "--export-all",
            "--enable=receive-pack",
            "--informative-errors",
            f"--base-path={base}",
            "--listen=127.0.0.1",
            f"--port={port}",
            str(base),
        ],
        env=GIT_ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("git daemon did not start") from None
                time.sleep(0.05)
        yield f"git://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
