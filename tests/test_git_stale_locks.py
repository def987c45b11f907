"""Lock files a killed git leaves in a cache repository never wedge the source or the status store.

A SIGKILL while git updates a ref leaves ``<ref>.lock`` behind; git then refuses every later update
of that ref ("cannot lock ref ... File exists"), across restarts, since the cache volume is kept. The
locks are planted here as such a kill leaves them (the new sha written, never renamed into place).
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from reconciler.metrics import Metrics
from reconciler.source import GitSource
from reconciler.source._gitutil import CACHE_FLOCK
from reconciler.source.status_store import StatusStore
from tests._git_support import RemoteRepo, git, git_http_server, git_run

PLATFORM = "apiVersion: palette.ai/v1alpha1\nkind: MLPlatform\nmetadata: {name: p, namespace: a}\n"
STATUS_BRANCH = "reconciler/status"
STATUS_FILE = "project-a/mlplatforms/p.yaml"


@pytest.fixture
def remote(tmp_path: Path) -> RemoteRepo:
    repo = RemoteRepo(tmp_path)
    repo.commit({"project-a/platform.yaml": PLATFORM}, "initial")
    return repo


def plant(git_dir: Path, name: str, content: str = "") -> Path:
    """A lock file as a git killed between creating and renaming it leaves it."""
    path = git_dir / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    return path


def test_source_sync_removes_a_stale_ref_lock_and_counts_it(remote: RemoteRepo, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    GitSource(str(remote.bare), cache_dir=cache).sync()
    newer = remote.commit({"project-a/more.yaml": PLATFORM.replace("name: p", "name: q")})
    ref_lock = plant(cache, "refs/heads/main.lock", newer + "\n")
    packed_lock = plant(cache, "packed-refs.lock")
    git("update-ref", "refs/heads/unrelated", newer, cwd=remote.bare)  # not a lock: left alone

    removed: list[str] = []
    # A restart: a new instance on the kept cache volume.
    source = GitSource(str(remote.bare), cache_dir=cache, on_stale_lock=removed.append)
    with capture_logs() as logs:
        assert source.sync() == newer
    assert sorted(removed) == ["packed-refs.lock", "refs/heads/main.lock"]
    assert not ref_lock.exists() and not packed_lock.exists()
    warned = sorted(e["lock"] for e in logs if e["log_level"] == "warning" and "stale git lock" in e["event"])
    assert warned == ["packed-refs.lock", "refs/heads/main.lock"]
    assert [p for p, _ in source.read_tree(newer)] == ["project-a/more.yaml", "project-a/platform.yaml"]


def test_source_without_recovery_would_fail_on_the_planted_lock(remote: RemoteRepo, tmp_path: Path) -> None:
    """The planted lock is the real failure: git itself refuses to fetch past it."""
    cache = tmp_path / "cache"
    GitSource(str(remote.bare), cache_dir=cache).sync()
    newer = remote.commit({"x.yaml": "x: 1\n"})
    plant(cache, "refs/heads/main.lock", newer + "\n")
    proc = git_run(
        "fetch", "--no-tags", "--", str(remote.bare), "+refs/heads/main:refs/heads/main", cwd=cache
    )
    assert proc.returncode != 0 and "lock" in proc.stderr


def test_source_lock_warning_never_carries_credentials(remote: RemoteRepo, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with git_http_server(remote.bare.parent, "deploy:s3cr3t-token") as base:
        url = base.replace("http://", "http://deploy:s3cr3t-token@") + "/remote.git"
        GitSource(url, cache_dir=cache).sync()
        newer = remote.commit({"x.yaml": "x: 1\n"})
        plant(cache, "refs/heads/main.lock", newer + "\n")
        with capture_logs() as logs:
            assert GitSource(url, cache_dir=cache).sync() == newer
    assert any(e.get("lock") == "refs/heads/main.lock" for e in logs)
    assert "s3cr3t" not in repr(logs)


def test_status_write_removes_a_stale_branch_lock_and_reports_the_commit(
    remote: RemoteRepo, tmp_path: Path
) -> None:
    workdir = tmp_path / "status"
    first = StatusStore(str(remote.bare), workdir=workdir).write({STATUS_FILE: b"phase: Pending\n"}, "p1", {})
    assert first is not None
    lock = plant(workdir, f"refs/heads/{STATUS_BRANCH}.lock", "0" * 40 + "\n")
    plant(workdir, "HEAD.lock")
    plant(workdir, "config.lock")

    removed: list[str] = []
    store = StatusStore(str(remote.bare), workdir=workdir, on_stale_lock=removed.append)
    commit = store.write({STATUS_FILE: b"phase: Running\n"}, "p2", {})
    assert commit is not None
    assert commit == git("rev-parse", f"refs/heads/{STATUS_BRANCH}", cwd=remote.bare).strip()
    assert sorted(removed) == ["HEAD.lock", "config.lock", f"refs/heads/{STATUS_BRANCH}.lock"]
    assert not lock.exists()
    assert git("rev-parse", f"refs/heads/{STATUS_BRANCH}", cwd=workdir).strip() == commit
    assert store.read() == {STATUS_FILE: b"phase: Running\n"}


def test_status_read_removes_a_stale_branch_lock(remote: RemoteRepo, tmp_path: Path) -> None:
    workdir = tmp_path / "status"
    StatusStore(str(remote.bare), workdir=workdir).write({STATUS_FILE: b"phase: Pending\n"}, "p1", {})
    other = StatusStore(str(remote.bare), workdir=tmp_path / "other")
    other.write({STATUS_FILE: b"phase: Running\n"}, "p2", {})
    plant(workdir, f"refs/heads/{STATUS_BRANCH}.lock", "0" * 40 + "\n")
    removed: list[str] = []
    store = StatusStore(str(remote.bare), workdir=workdir, on_stale_lock=removed.append)
    assert store.read() == {STATUS_FILE: b"phase: Running\n"}
    assert removed == [f"refs/heads/{STATUS_BRANCH}.lock"]


def test_a_pushed_commit_is_reported_written_when_the_local_ref_update_fails(
    remote: RemoteRepo, tmp_path: Path
) -> None:
    workdir = tmp_path / "status"
    store = StatusStore(str(remote.bare), workdir=workdir)
    store.write({STATUS_FILE: b"phase: Pending\n"}, "p1", {})
    # The remote accepts the push, and meanwhile a lock appears on the store's private ref (as if a
    # git of a killed process held it): the push landed, only the local bookkeeping cannot follow.
    hook = remote.bare / "hooks" / "post-receive"
    lock = workdir / "refs" / "heads" / f"{STATUS_BRANCH}.lock"
    hook.write_text(f"#!/bin/sh\nmkdir -p '{lock.parent}'\necho x > '{lock}'\n")
    hook.chmod(0o755)
    with capture_logs() as logs:
        commit = store.write({STATUS_FILE: b"phase: Running\n"}, "p2", {})
    assert commit is not None, "a commit the remote holds is written, never 'not written'"
    assert commit == git("rev-parse", f"refs/heads/{STATUS_BRANCH}", cwd=remote.bare).strip()
    assert any(e["log_level"] == "warning" and e.get("commit") == commit for e in logs)
    assert lock.exists()

    hook.unlink()
    assert store.read() == {STATUS_FILE: b"phase: Running\n"}, "the next operation repairs the ref"
    assert not lock.exists()
    assert git("rev-parse", f"refs/heads/{STATUS_BRANCH}", cwd=workdir).strip() == commit
    assert store.write({STATUS_FILE: b"phase: Running\n"}, "p3", {}) is None
    third = store.write({STATUS_FILE: b"phase: Deleting\n"}, "p4", {})
    assert third is not None and git("rev-parse", f"{third}^", cwd=remote.bare).strip() == commit


_HOLD_FLOCK = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()
"""


def test_a_lock_of_another_process_working_in_the_same_cache_is_not_touched(
    remote: RemoteRepo, tmp_path: Path
) -> None:
    """Another reconciler process sharing the cache holds it while its git runs: its locks are live."""
    cache = tmp_path / "cache"
    GitSource(str(remote.bare), cache_dir=cache).sync()
    newer = remote.commit({"x.yaml": "x: 1\n"})
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_FLOCK, str(cache / CACHE_FLOCK)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        live = plant(cache, "refs/heads/main.lock", newer + "\n")
        result: list[str] = []
        worker = threading.Thread(
            target=lambda: result.append(GitSource(str(remote.bare), cache_dir=cache).sync())
        )
        worker.start()
        time.sleep(0.5)
        assert live.exists() and result == [], "waits for the other process instead of breaking its lock"
        live.unlink()  # that process's git finishes and renames its lock away
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(60)
    worker.join(60)
    assert result == [newer]


def test_removed_locks_are_counted_in_the_metrics(remote: RemoteRepo, tmp_path: Path) -> None:
    metrics = Metrics()
    cache = tmp_path / "cache"
    GitSource(str(remote.bare), cache_dir=cache).sync()
    plant(cache, "refs/heads/main.lock")
    plant(cache, "shallow.lock")
    GitSource(str(remote.bare), cache_dir=cache, on_stale_lock=metrics.on_stale_git_lock).sync()
    assert b"reconciler_git_stale_locks_removed_total 2.0" in metrics.render()
