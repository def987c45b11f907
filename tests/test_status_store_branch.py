"""StatusStore against real bare repositories: orphan branch, no-op writes, trailers, races, no force."""

from __future__ import annotations

import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from reconciler.status import StatusError, StatusStore, format_message
from tests._git_support import RemoteRepo, git, git_daemon, git_http_server

BRANCH = "reconciler/status"
PLATFORM_FILE = "project-a/mlplatforms/clearml-prod.yaml"
COMPUTE_FILE = "project-a/computes/edge-compute.yaml"


@pytest.fixture
def remote(tmp_path: Path) -> RemoteRepo:
    repo = RemoteRepo(tmp_path)
    repo.commit({"project-a/platform.yaml": "kind: MLPlatform\n"}, "config")
    return repo


def store_for(remote: RemoteRepo, tmp_path: Path, name: str = "store", **kwargs: object) -> StatusStore:
    return StatusStore(str(remote.bare), workdir=tmp_path / name, **kwargs)  # type: ignore[arg-type]


def status(phase: str) -> bytes:
    return f"kind: MLPlatform\nstatus:\n  phase: {phase}\n".encode()


def parents(remote: RemoteRepo, commit: str) -> list[str]:
    return git("rev-list", "--parents", "-n", "1", commit, cwd=remote.bare).split()[1:]


def is_ancestor(remote: RemoteRepo, older: str, newer: str) -> bool:
    proc = subprocess.run(["git", "merge-base", "--is-ancestor", older, newer], cwd=remote.bare, check=False)
    return proc.returncode == 0


def test_first_write_creates_an_orphan_branch(remote: RemoteRepo, tmp_path: Path) -> None:
    store = store_for(remote, tmp_path)
    assert store.tip() is None and store.read() == {}
    commit = store.write(
        {PLATFORM_FILE: status("Pending")}, "Create clearml-prod", {"Source-Revision": "a" * 40}
    )
    assert commit is not None
    assert git("rev-parse", f"refs/heads/{BRANCH}", cwd=remote.bare).strip() == commit
    assert parents(remote, commit) == [], "the status branch shares no history with main"
    assert not is_ancestor(remote, remote.head(), commit)
    assert remote.head() == git("rev-parse", "refs/heads/main", cwd=remote.bare).strip()
    git("fsck", "--strict", "--no-dangling", cwd=remote.bare)


def test_unchanged_files_make_no_commit(remote: RemoteRepo, tmp_path: Path) -> None:
    store = store_for(remote, tmp_path)
    files = {PLATFORM_FILE: status("Running"), COMPUTE_FILE: b"kind: Compute\n"}
    first = store.write(files, "pass 1", {"Source-Revision": "1" * 40})
    assert first is not None
    pushes = store.push_count
    assert store.write(dict(files), "pass 2", {"Source-Revision": "2" * 40}) is None
    assert store.push_count == pushes, "a no-op write must not touch the remote"
    fresh = store_for(remote, tmp_path, "fresh")
    assert fresh.write(dict(files), "pass 3", {"Source-Revision": "3" * 40}) is None
    assert store.tip() == first


def test_changed_file_makes_one_commit_with_the_trailer(remote: RemoteRepo, tmp_path: Path) -> None:
    store = store_for(remote, tmp_path)
    first = store.write(
        {PLATFORM_FILE: status("Provisioning")}, "Create clearml-prod", {"Source-Revision": "a" * 40}
    )
    second = store.write(
        {PLATFORM_FILE: status("Running")}, "clearml-prod is Running", {"Source-Revision": "b" * 40}
    )
    assert second is not None and parents(remote, second) == [first]
    assert git("rev-list", "--count", BRANCH, cwd=remote.bare).strip() == "2"
    trailers = git("log", "-1", "--format=%(trailers:key=Source-Revision,valueonly)", BRANCH, cwd=remote.bare)
    assert trailers.strip() == "b" * 40
    subject = git("log", "-1", "--format=%s", BRANCH, cwd=remote.bare).strip()
    assert subject == "clearml-prod is Running"
    assert store.read() == {PLATFORM_FILE: status("Running")}


def test_git_log_of_one_status_file_is_its_audit_trail(remote: RemoteRepo, tmp_path: Path) -> None:
    store = store_for(remote, tmp_path)
    store.write({PLATFORM_FILE: status("Pending")}, "p1", {"Source-Revision": "1" * 40})
    store.write(
        {PLATFORM_FILE: status("Pending"), COMPUTE_FILE: b"c: 1\n"}, "p2", {"Source-Revision": "2" * 40}
    )
    store.write(
        {PLATFORM_FILE: status("Running"), COMPUTE_FILE: b"c: 1\n"}, "p3", {"Source-Revision": "3" * 40}
    )
    log = git("log", "--format=%s", BRANCH, "--", PLATFORM_FILE, cwd=remote.bare).split()
    assert log == ["p3", "p1"]


def test_deleted_file_is_removed_from_the_tree(remote: RemoteRepo, tmp_path: Path) -> None:
    store = store_for(remote, tmp_path)
    store.write(
        {PLATFORM_FILE: status("Running"), COMPUTE_FILE: b"c: 1\n"}, "two", {"Source-Revision": "1" * 40}
    )
    commit = store.write({COMPUTE_FILE: b"c: 1\n"}, "clearml-prod deleted", {"Source-Revision": "2" * 40})
    assert commit is not None
    listed = git("ls-tree", "-r", "--name-only", commit, cwd=remote.bare).split()
    assert listed == [COMPUTE_FILE]
    assert store_for(remote, tmp_path, "other").read() == {COMPUTE_FILE: b"c: 1\n"}


def test_concurrent_pusher_is_kept_and_the_commit_rebuilt_on_its_tip(
    remote: RemoteRepo, tmp_path: Path
) -> None:
    ours = store_for(remote, tmp_path, "ours", retry_delay=0)
    theirs = store_for(remote, tmp_path, "theirs")
    base = ours.write({PLATFORM_FILE: status("Pending")}, "ours 1", {"Source-Revision": "1" * 40})
    # Another writer pushes behind our back: our cached tip is now stale.
    other = theirs.write(
        {PLATFORM_FILE: status("Pending"), COMPUTE_FILE: b"theirs\n"}, "theirs", {"Source-Revision": "2" * 40}
    )
    assert base is not None and other is not None and parents(remote, other) == [base]

    rebuilt = ours.write({PLATFORM_FILE: status("Running")}, "ours 2", {"Source-Revision": "3" * 40})
    assert rebuilt is not None
    assert ours.conflict_count == 1
    assert parents(remote, rebuilt) == [other], "rebuilt on the other pusher's tip, not forced over it"
    assert is_ancestor(remote, other, rebuilt) and is_ancestor(remote, base, rebuilt)
    assert ours.read() == {PLATFORM_FILE: status("Running")}, "the same files, on the new tip"
    history = git("rev-list", BRANCH, cwd=remote.bare).split()
    assert history == [rebuilt, other, base]


def test_race_that_already_holds_our_files_makes_no_commit(remote: RemoteRepo, tmp_path: Path) -> None:
    ours = store_for(remote, tmp_path, "ours", retry_delay=0)
    theirs = store_for(remote, tmp_path, "theirs")
    ours.write({PLATFORM_FILE: status("Pending")}, "ours 1", {"Source-Revision": "1" * 40})
    theirs.write({PLATFORM_FILE: status("Running")}, "theirs", {"Source-Revision": "2" * 40})
    assert ours.write({PLATFORM_FILE: status("Running")}, "ours 2", {"Source-Revision": "3" * 40}) is None


def test_unreachable_remote_raises_status_error(remote: RemoteRepo, tmp_path: Path) -> None:
    store = store_for(remote, tmp_path)
    store.write({PLATFORM_FILE: status("Pending")}, "p1", {"Source-Revision": "1" * 40})
    shutil.rmtree(remote.bare)
    with pytest.raises(StatusError):
        store.write({PLATFORM_FILE: status("Running")}, "p2", {"Source-Revision": "2" * 40})
    with pytest.raises(StatusError):
        store.tip()


def test_rejected_push_that_is_not_a_race_raises_without_retrying(remote: RemoteRepo, tmp_path: Path) -> None:
    store = store_for(remote, tmp_path)
    hook = remote.bare / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'status branch is protected' >&2\nexit 1\n")
    hook.chmod(0o755)
    with pytest.raises(StatusError, match="protected"):
        store.write({PLATFORM_FILE: status("Pending")}, "p1", {"Source-Revision": "1" * 40})
    assert store.push_count == 1


def test_push_over_git_daemon(remote: RemoteRepo, tmp_path: Path) -> None:
    with git_daemon(remote.bare.parent) as base:
        store = StatusStore(f"{base}/remote.git", workdir=tmp_path / "store")
        commit = store.write({PLATFORM_FILE: status("Running")}, "over git://", {"Source-Revision": "1" * 40})
        assert commit == git("rev-parse", BRANCH, cwd=remote.bare).strip()
        assert store.read() == {PLATFORM_FILE: status("Running")}


def test_tree_ids_match_git_for_nested_and_sorted_entries(remote: RemoteRepo, tmp_path: Path) -> None:
    files = {
        "a/b.yaml": b"1\n",
        "a-b/c.yaml": b"2\n",
        "a.yaml": b"3\n",
        "project-a/mlplatforms/z.yaml": b"4\n",
        "project-a/mlplatforms.yaml": b"5\n",
    }
    store = store_for(remote, tmp_path)
    commit = store.write(files, "nested", {"Source-Revision": "1" * 40})
    assert commit is not None
    git("fsck", "--strict", "--no-dangling", cwd=remote.bare)
    for path, data in files.items():
        assert git("show", f"{commit}:{path}", cwd=remote.bare).encode() == data
    assert store.tree_id(files) == git("rev-parse", f"{commit}^{{tree}}", cwd=remote.bare).strip()


@pytest.mark.parametrize("bad", ["/abs.yaml", "a/../b.yaml", "a//b.yaml", ".git/config", "a/"])
def test_invalid_paths_are_refused(bad: str, remote: RemoteRepo, tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        store_for(remote, tmp_path).write({bad: b"x"}, "bad", {})


def test_format_message_appends_trailers_in_git_format() -> None:
    message = format_message("Pass: 1 created\n\nclearml-prod created", {"Source-Revision": "abc"})
    assert message == "Pass: 1 created\n\nclearml-prod created\n\nSource-Revision: abc\n"
    with pytest.raises(ValueError):
        format_message("x", {"Bad Key": "v"})
    with pytest.raises(ValueError):
        format_message("x", {"Source-Revision": "a\nb"})


def test_a_damaged_workdir_is_refetched(remote: RemoteRepo, tmp_path: Path) -> None:
    store = store_for(remote, tmp_path)
    first = store.write({PLATFORM_FILE: status("Pending")}, "p1", {"Source-Revision": "1" * 40})
    store.close()
    objects = tmp_path / "store" / "objects"
    shutil.rmtree(objects)
    objects.mkdir()
    again = store_for(remote, tmp_path)
    second = again.write({PLATFORM_FILE: status("Running")}, "p2", {"Source-Revision": "2" * 40})
    assert second is not None and parents(remote, second) == [first]


def test_push_over_http_with_credentials(remote: RemoteRepo, tmp_path: Path) -> None:
    with git_http_server(remote.bare.parent, "bot:push-token") as base:
        store = StatusStore(
            base.replace("http://", "http://bot:push-token@") + "/remote.git", workdir=tmp_path / "s"
        )
        assert "push-token" not in store.url
        commit = store.write({PLATFORM_FILE: status("Running")}, "over http", {"Source-Revision": "1" * 40})
        assert commit == git("rev-parse", BRANCH, cwd=remote.bare).strip()
        denied = StatusStore(
            base.replace("http://", "http://bot:bad@") + "/remote.git", workdir=tmp_path / "d"
        )
        with pytest.raises(StatusError) as info:
            denied.write({PLATFORM_FILE: status("Pending")}, "denied", {"Source-Revision": "2" * 40})
        assert "wrong-9f3" not in str(info.value)


def test_parallel_writers_never_lose_a_commit(remote: RemoteRepo, tmp_path: Path) -> None:
    stores = [store_for(remote, tmp_path, f"writer-{w}", retry_delay=0.01, max_attempts=20) for w in range(3)]
    made: list[str] = []
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        try:
            for n in range(4):
                files = {f"project-a/computes/writer-{w}.yaml": f"n: {n}\n".encode()}
                commit = stores[w].write(files, f"writer {w} pass {n}", {"Source-Revision": str(n) * 40})
                if commit is not None:
                    made.append(commit)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors
    history = set(git("rev-list", BRANCH, cwd=remote.bare).split())
    assert len(made) == 12
    assert set(made) <= history, "every commit a writer reported is still on the branch (no force-push)"
    assert len(history) == 12
