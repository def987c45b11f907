"""StatusStore against real bare repositories: orphan branch, no-op writes, trailers, races, no force."""

from __future__ import annotations

import random
import shutil
import threading
from collections.abc import Mapping
from pathlib import Path

import pytest

from reconciler.source.status_store import StatusConflict, StatusError, StatusStore
from reconciler.status.store import format_message, push_retry
from tests._git_support import RemoteRepo, git, git_daemon, git_http_server, git_run

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
    return git_run("merge-base", "--is-ancestor", older, newer, cwd=remote.bare).returncode == 0


def hand_commit(remote: RemoteRepo, files: Mapping[str, bytes | None], message: str) -> str:
    """Someone else edits the status branch with plain git (a clone, a commit, a push)."""
    git("fetch", "--quiet", "origin", BRANCH, cwd=remote.work)
    git("checkout", "--quiet", "-B", "hand", "FETCH_HEAD", cwd=remote.work)
    for path, data in files.items():
        target = remote.work / path
        if data is None:
            git("rm", "--quiet", path, cwd=remote.work)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            git("add", path, cwd=remote.work)
    git("commit", "--quiet", "-m", message, cwd=remote.work)
    git("push", "--quiet", "origin", f"HEAD:refs/heads/{BRANCH}", cwd=remote.work)
    return git("rev-parse", "HEAD", cwd=remote.work).strip()


class RivalWriter:
    """Another writer of the status branch with plain git, as fast as it gets: fetch the tip, commit its
    own file on it (keeping the tip's other files), push (no force)."""

    def __init__(self, remote: RemoteRepo, path: Path) -> None:
        git("init", "--quiet", "--bare", str(path), cwd=remote.bare.parent)
        self.path = path
        self.url = str(remote.bare)
        self.attempts = 0

    def push_one(self, n: int) -> bool:
        """Fetch, commit, push; on a lost race fetch and try again at once. True when it landed."""
        blob = git("hash-object", "-w", "--stdin", cwd=self.path, input=f"n: {n}\n").strip()
        for _ in range(20):
            self.attempts += 1
            git("fetch", "--quiet", self.url, f"+refs/heads/{BRANCH}:refs/heads/{BRANCH}", cwd=self.path)
            kept = [
                line
                for line in git("ls-tree", BRANCH, cwd=self.path).splitlines()
                if "\trival.yaml" not in line
            ]
            listing = "\n".join([*kept, f"100644 blob {blob}\trival.yaml"]) + "\n"
            tree = git("mktree", cwd=self.path, input=listing).strip()
            commit = git("commit-tree", tree, "-p", BRANCH, "-m", f"rival {n}", cwd=self.path).strip()
            if (
                git_run(
                    "push", "--quiet", self.url, f"{commit}:refs/heads/{BRANCH}", cwd=self.path
                ).returncode
                == 0
            ):
                return True
        return False


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


def test_a_write_after_another_writer_pushed_builds_on_its_tip(remote: RemoteRepo, tmp_path: Path) -> None:
    ours = store_for(remote, tmp_path, "ours", retry=push_retry(base_delay=0))
    theirs = store_for(remote, tmp_path, "theirs")
    base = ours.write({PLATFORM_FILE: status("Pending")}, "ours 1", {"Source-Revision": "1" * 40})
    other = theirs.write(
        {PLATFORM_FILE: status("Pending"), COMPUTE_FILE: b"theirs\n"}, "theirs", {"Source-Revision": "2" * 40}
    )
    assert base is not None and other is not None and parents(remote, other) == [base]

    rebuilt = ours.write({PLATFORM_FILE: status("Running")}, "ours 2", {"Source-Revision": "3" * 40})
    assert rebuilt is not None
    assert ours.conflict_count == 0, "the write starts from the remote's tip, not from memory"
    assert parents(remote, rebuilt) == [other], "built on the other writer's tip, not forced over it"
    assert ours.read() == {PLATFORM_FILE: status("Running")}
    assert git("rev-list", BRANCH, cwd=remote.bare).split() == [rebuilt, other, base]


def race_on_push(remote: RemoteRepo, tmp_path: Path, path: str) -> str:
    """Another writer's commit (adding ``path``) on top of the branch, which the remote moves the branch
    to while our next push is in flight (after our fetch): that push fails its compare on the server,
    a genuine lost race. Returns the winner's commit."""
    git("fetch", "--quiet", "origin", BRANCH, cwd=remote.work)
    git("checkout", "--quiet", "-B", "theirs", "FETCH_HEAD", cwd=remote.work)
    (remote.work / path).parent.mkdir(parents=True, exist_ok=True)
    (remote.work / path).write_text("theirs\n")
    git("add", path, cwd=remote.work)
    git("commit", "--quiet", "-m", "theirs", cwd=remote.work)
    winner = git("rev-parse", "HEAD", cwd=remote.work).strip()
    git("push", "--quiet", "origin", "HEAD:refs/heads/side", cwd=remote.work)
    marker = tmp_path / "raced"
    hook = remote.bare / "hooks" / "pre-receive"
    hook.write_text(
        f"#!/bin/sh\n[ -e '{marker}' ] && exit 0\ntouch '{marker}'\n"
        f"env -u GIT_QUARANTINE_PATH git update-ref refs/heads/{BRANCH} {winner}\n"
    )
    hook.chmod(0o755)
    return winner


def test_a_push_that_loses_a_race_to_another_writers_file_is_rebuilt_on_the_winners_tip(
    remote: RemoteRepo, tmp_path: Path
) -> None:
    ours = store_for(remote, tmp_path, "ours", retry=push_retry(base_delay=0))
    base = ours.write({PLATFORM_FILE: status("Pending")}, "ours 1", {"Source-Revision": "1" * 40})
    assert base is not None
    winner = race_on_push(remote, tmp_path, "notes/theirs.txt")

    rebuilt = ours.write({PLATFORM_FILE: status("Running")}, "ours 2", {"Source-Revision": "3" * 40})
    assert rebuilt is not None
    assert ours.conflict_count == 1 and ours.push_count == 3
    assert parents(remote, rebuilt) == [winner], "rebuilt on the winner's tip, not forced over it"
    assert is_ancestor(remote, base, rebuilt)
    assert ours.read() == {PLATFORM_FILE: status("Running"), "notes/theirs.txt": b"theirs\n"}


class _Ceiling(random.Random):
    """Always the largest wait full jitter allows, so the ceilings themselves are seen."""

    def uniform(self, a: float, b: float) -> float:
        return b


def test_push_retry_waits_up_to_the_base_doubling_to_eight_times_it_for_its_attempts() -> None:
    now = iter(range(0, 10**9, 10**6))  # a clock that jumps 11 days a reading: no time budget applies
    policy = push_retry(max_attempts=8, base_delay=0.02, rng=_Ceiling(), clock=lambda: float(next(now)))
    backoff = policy.backoff()
    delays = [backoff.next_delay() for _ in range(8)]
    assert delays == [0.02, 0.04, 0.08, 0.16, 0.16, 0.16, 0.16, None]
    assert backoff.attempts == 8


def test_a_lost_race_waits_once_before_the_rebuild(remote: RemoteRepo, tmp_path: Path) -> None:
    slept: list[float] = []
    retry = push_retry(base_delay=0.02, sleep=slept.append, rng=_Ceiling())
    ours = store_for(remote, tmp_path, "ours", retry=retry)
    ours.write({PLATFORM_FILE: status("Pending")}, "ours 1", {})
    race_on_push(remote, tmp_path, "notes/theirs.txt")
    assert ours.write({PLATFORM_FILE: status("Running")}, "ours 2", {}) is not None
    assert slept == [0.02], "one lost race, one wait of at most the base delay, then the rebuild"


def test_a_branch_that_keeps_moving_gives_up_after_the_attempts(remote: RemoteRepo, tmp_path: Path) -> None:
    slept: list[float] = []
    ours = store_for(remote, tmp_path, "ours", retry=push_retry(3, base_delay=0.02, sleep=slept.append))
    ours.write({PLATFORM_FILE: status("Pending")}, "ours 1", {})
    hook = remote.bare / "hooks" / "pre-receive"  # every push loses to a note committed just before it
    hook.write_text(
        "#!/bin/sh\n"
        "unset GIT_QUARANTINE_PATH GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES\n"
        f"tip=$(git rev-parse refs/heads/{BRANCH})\n"
        "note=$(echo $$ | git hash-object -w --stdin)\n"
        "tree=$({ git ls-tree $tip; printf '100644 blob %s\\tnote-%s.txt\\n' $note $$; } | git mktree)\n"
        f"git update-ref refs/heads/{BRANCH} $(git commit-tree $tree -p $tip -m note)\n"
    )
    hook.chmod(0o755)
    with pytest.raises(StatusError, match="kept moving: gave up after 3 attempts"):
        ours.write({PLATFORM_FILE: status("Running")}, "ours 2", {})
    assert ours.push_count == 4 and len(slept) == 2


def test_a_push_that_loses_a_race_to_a_change_of_its_own_files_is_not_retried(
    remote: RemoteRepo, tmp_path: Path
) -> None:
    ours = store_for(remote, tmp_path, "ours", retry=push_retry(base_delay=0))
    ours.write({PLATFORM_FILE: status("Pending")}, "ours 1", {"Source-Revision": "1" * 40})
    winner = race_on_push(remote, tmp_path, COMPUTE_FILE)  # a file the reconciler owns: another instance
    with pytest.raises(StatusConflict, match="edge-compute"):
        ours.write({PLATFORM_FILE: status("Running")}, "ours 2", {"Source-Revision": "3" * 40})
    assert ours.push_count == 2, "one compare-and-swap lost, no blind retry"
    assert git("rev-parse", BRANCH, cwd=remote.bare).strip() == winner


def test_a_write_is_a_compare_and_swap_on_the_tip_it_read(remote: RemoteRepo, tmp_path: Path) -> None:
    ours = store_for(remote, tmp_path, "ours")
    ours.write({PLATFORM_FILE: status("Pending")}, "ours 1", {})
    planned = ours.tip()
    assert ours.known_tip == planned
    moved = hand_commit(remote, {PLATFORM_FILE: status("Running")}, "the new lease holder")
    with pytest.raises(StatusConflict):
        ours.write({PLATFORM_FILE: status("Provisioning")}, "stale", {})
    assert git("rev-parse", BRANCH, cwd=remote.bare).strip() == moved, "a stale writer never goes back"
    with pytest.raises(StatusConflict):
        ours.write({PLATFORM_FILE: status("Provisioning")}, "stale", {}, expected=planned)
    assert ours.read() == {PLATFORM_FILE: status("Running")}
    assert ours.write({PLATFORM_FILE: status("Deleting")}, "planned again", {}) is not None


def test_a_write_asks_the_lease_right_before_it_pushes(remote: RemoteRepo, tmp_path: Path) -> None:
    ours = store_for(remote, tmp_path, "ours")
    first = ours.write({PLATFORM_FILE: status("Pending")}, "ours 1", {}, may_push=lambda: True)
    with pytest.raises(StatusError, match="lease"):
        ours.write({PLATFORM_FILE: status("Running")}, "ours 2", {}, may_push=lambda: False)
    assert git("rev-parse", BRANCH, cwd=remote.bare).strip() == first


def test_files_the_reconciler_does_not_own_are_kept(remote: RemoteRepo, tmp_path: Path) -> None:
    store = store_for(remote, tmp_path)
    store.write({PLATFORM_FILE: status("Pending"), COMPUTE_FILE: b"c\n"}, "p1", {})
    hand_commit(remote, {"README.md": b"notes\n", "project-a/notes/x.yaml": b"x\n"}, "someone's notes")
    store.write({PLATFORM_FILE: status("Running")}, "p2", {})
    assert store_for(remote, tmp_path, "reader").read() == {
        PLATFORM_FILE: status("Running"),
        "README.md": b"notes\n",
        "project-a/notes/x.yaml": b"x\n",
    }, "the compute file (ours, no longer due) is removed; the others' files stay"


def test_a_5000_resource_status_commit_is_written_with_a_capped_body(
    remote: RemoteRepo, tmp_path: Path
) -> None:
    store = store_for(remote, tmp_path)
    files = {f"project-a/mlplatforms/p-{n:05d}.yaml": status("Running") for n in range(5000)}
    body = "\n".join(
        f"project-a/p-{n:05d}: Pending -> Running (Provisioned) +3 hosts {'x' * 160}" for n in range(5000)
    )
    assert len(body) > 128 * 1024, "larger than one command-line argument may be"
    commit = store.write(files, f"5000 created\n\n{body}", {"Source-Revision": "1" * 40})
    assert commit is not None
    message = git("log", "-1", "--format=%B", commit, cwd=remote.bare)
    lines = message.strip().splitlines()
    assert lines[0] == "5000 created" and lines[2].startswith("project-a/p-00000:")
    assert "... and 4,800 more; the files carry the detail" in message
    assert len([line for line in lines if line.startswith("project-a/p-")]) == 200
    assert lines[-1] == "Source-Revision: " + "1" * 40
    assert len(git("ls-tree", "-r", "--name-only", commit, cwd=remote.bare).split()) == 5000


def test_a_hand_edit_on_the_branch_is_repaired_by_the_next_write_of_the_same_files(
    remote: RemoteRepo, tmp_path: Path
) -> None:
    store = store_for(remote, tmp_path)
    files = {PLATFORM_FILE: status("Running"), COMPUTE_FILE: b"kind: Compute\n"}
    store.write(files, "pass 1", {"Source-Revision": "1" * 40})
    edited = hand_commit(remote, {PLATFORM_FILE: b"status: {phase: Deleted}\n"}, "hand edit")

    repaired = store.write(dict(files), "pass 2", {"Source-Revision": "1" * 40})
    assert repaired is not None and parents(remote, repaired) == [edited]
    assert store_for(remote, tmp_path, "reader").read() == files


def test_a_hand_deletion_on_the_branch_is_repaired_by_the_next_write_of_the_same_files(
    remote: RemoteRepo, tmp_path: Path
) -> None:
    store = store_for(remote, tmp_path)
    files = {PLATFORM_FILE: status("Running"), COMPUTE_FILE: b"kind: Compute\n"}
    store.write(files, "pass 1", {"Source-Revision": "1" * 40})
    deleted = hand_commit(remote, {COMPUTE_FILE: None}, "hand deletion")

    repaired = store.write(dict(files), "pass 2", {"Source-Revision": "1" * 40})
    assert repaired is not None and parents(remote, repaired) == [deleted]
    assert git("ls-tree", "-r", "--name-only", repaired, cwd=remote.bare).split() == sorted(files)
    assert store.write(dict(files), "pass 3", {"Source-Revision": "1" * 40}) is None


def test_read_returns_the_branch_and_fetches_only_when_it_moved(remote: RemoteRepo, tmp_path: Path) -> None:
    reader = store_for(remote, tmp_path, "reader")
    reader.write({PLATFORM_FILE: status("Pending")}, "p1", {})
    assert reader.read() == {PLATFORM_FILE: status("Pending")}
    hand_commit(remote, {PLATFORM_FILE: status("Edited")}, "hand edit")
    assert reader.read() == {PLATFORM_FILE: status("Edited")}, "the branch, not what this store wrote"
    reader = store_for(remote, tmp_path, "fresh")
    assert reader.read() == {PLATFORM_FILE: status("Edited")}
    assert reader.fetch_count == 1
    assert reader.read() == {PLATFORM_FILE: status("Edited")}
    assert reader.tip() is not None
    assert reader.fetch_count == 1, "an unchanged branch costs an ls-remote, no fetch"
    hand_commit(remote, {PLATFORM_FILE: status("Running")}, "moved")
    assert reader.read() == {PLATFORM_FILE: status("Running")}
    assert reader.fetch_count == 2


def test_a_rival_winning_races_in_a_row_does_not_starve_the_store(remote: RemoteRepo, tmp_path: Path) -> None:
    """The rival lands a push between our fetch and our push, on a fixed schedule rather than a wall
    clock: for write n it wins the first n % 8 races (0 to 7 in a row, one short of the default
    attempts). Every write must land on top of the rival's, keeping its file, and each lost race costs
    exactly one rebuild and one jittered wait (injected: no sleeping)."""
    slept: list[float] = []
    store = store_for(remote, tmp_path, retry=push_retry(sleep=slept.append, rng=random.Random(7)))
    store.write({PLATFORM_FILE: status("Pending")}, "seed", {})
    rival = RivalWriter(remote, tmp_path / "rival")
    wins_left = [0]
    theirs: list[int] = []

    def rival_pushes_first() -> bool:  # asked by the store right before each of its pushes
        if wins_left[0] > 0:
            wins_left[0] -= 1
            assert rival.push_one(len(theirs) + 1)
            theirs.append(len(theirs) + 1)
        return True

    ours: list[str] = []
    for n in range(12):
        wins_left[0] = n % 8
        commit = store.write(
            {PLATFORM_FILE: f"n: {n}\n".encode()}, f"ours {n}", {}, may_push=rival_pushes_first
        )
        assert commit is not None and wins_left[0] == 0
        ours.append(commit)
    lost = sum(n % 8 for n in range(12))
    assert len(theirs) == lost and store.conflict_count == lost and len(slept) == lost
    history = git("rev-list", BRANCH, cwd=remote.bare).split()
    assert history[0] == ours[-1] and set(ours) <= set(history), "no write of ours is lost"
    assert len(history) == 1 + 12 + lost, "every push of the rival is kept too"
    assert git("show", f"{BRANCH}:rival.yaml", cwd=remote.bare) == f"n: {lost}\n"


def test_race_that_already_holds_our_files_makes_no_commit(remote: RemoteRepo, tmp_path: Path) -> None:
    ours = store_for(remote, tmp_path, "ours", retry=push_retry(base_delay=0))
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


@pytest.mark.parametrize("bad", ["/abs.yaml", "a/../b.yaml", "a//b.yaml", ".git/config", "a/", "a.yaml/b"])
def test_an_invalid_path_is_left_out_and_never_blocks_the_others(
    bad: str, remote: RemoteRepo, tmp_path: Path
) -> None:
    store = store_for(remote, tmp_path)
    with pytest.raises(ValueError):
        store.tree_id({bad: b"x", "a.yaml": b"a\n"})
    commit = store.write({PLATFORM_FILE: status("Running"), "a.yaml": b"a\n", bad: b"x"}, "bad", {})
    assert commit is not None
    assert store.read() == {PLATFORM_FILE: status("Running"), "a.yaml": b"a\n"}


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
    stores = [
        store_for(remote, tmp_path, f"writer-{w}", retry=push_retry(20, base_delay=0.01)) for w in range(3)
    ]
    made: list[str] = []
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        try:
            for n in range(4):
                own = f"project-a/computes/writer-{w}.yaml"
                files = {own: f"n: {n}\n".encode()}
                commit = stores[w].write(
                    files, f"writer {w} pass {n}", {"Source-Revision": str(n) * 40}, owned=own.__eq__
                )
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


def test_read_docs_parses_each_blob_once_and_json_as_json(
    remote: RemoteRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import reconciler.source.status_store as store_module

    parsed: list[str] = []
    real = store_module.load

    def counting(path: str, data: bytes) -> object:
        parsed.append(path)
        return real(path, data)

    monkeypatch.setattr(store_module, "load", counting)
    store = store_for(remote, tmp_path)
    snapshot = "inventory/api.example.com-tenant.json"
    files = {
        PLATFORM_FILE: status("Running"),
        COMPUTE_FILE: b"- not a mapping\n",
        snapshot: b'{"edgeHosts": []}',
    }
    store.write(files, "p1", {})
    assert store.read_docs() == {PLATFORM_FILE: {"kind": "MLPlatform", "status": {"phase": "Running"}}}
    assert sorted(parsed) == [COMPUTE_FILE, PLATFORM_FILE], "the snapshot is not parsed unless asked for"
    hand_commit(remote, {COMPUTE_FILE: b"kind: Compute\n"}, "one file moved")
    parsed.clear()
    docs = store.read_docs(include=lambda _path: True)
    assert sorted(parsed) == [snapshot, COMPUTE_FILE], "unchanged blobs are not parsed again"
    assert docs[snapshot] == {"edgeHosts": []} and docs[COMPUTE_FILE] == {"kind": "Compute"}
