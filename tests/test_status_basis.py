"""The basis of a plan or status report (docs/planning.md, "Basis"), and the status branch fetched before
it is read: a clone's remote-tracking copy is never read as it is, unless ``--no-fetch`` says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.source.errors import GitError
from reconciler.source.status_reader import StatusBranch, utc_iso
from reconciler.status.basis import Basis, stale_message
from tests._git_support import RemoteRepo, git

CONFIG = "1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d"
STATUS = "9f8e7d6c5b4a39281706f5e4d3c2b1a098f7e6d5"
BRANCH = "reconciler/status"


def test_basis_json_and_first_line() -> None:
    basis = Basis(CONFIG, STATUS, "2026-12-02T08:10:00Z", "status")
    assert basis.to_json() == {
        "revision": CONFIG,
        "statusCommit": STATUS,
        "statusTime": "2026-12-02T08:10:00Z",
        "observation": "status",
    }
    assert basis.line() == "planned at 1a2b3c4 against status 9f8e7d6 of 2026-12-02T08:10:00Z"
    assert basis.header() == "status 9f8e7d6 of 2026-12-02T08:10:00Z (config 1a2b3c4)"


def test_basis_says_what_it_lacks() -> None:
    assert Basis(CONFIG, None, None, "palette").line() == (
        "planned at 1a2b3c4 against no status branch (a first start: nothing is recorded yet)"
    )
    first = Basis(CONFIG, None, None, "inventory", records=False)
    assert "--no-status" in first.line() and "first start" in first.line()
    assert first.to_json()["statusCommit"] is None
    unfetched = Basis(CONFIG, STATUS, "2026-12-02T08:10:00Z", "status", fetched=False)
    assert unfetched.line().startswith("planned at 1a2b3c4 against status 9f8e7d6 of 2026-12-02T08:10:00Z")
    assert "--no-fetch" in unfetched.line()
    assert Basis(None, STATUS, None, "none").line() == (
        "planned at the work tree (no commit) against status 9f8e7d6"
    )
    with pytest.raises(ValueError, match="observation"):
        Basis(CONFIG, None, None, "snapshot")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("expected", "stale"),
    [(STATUS, False), (STATUS[:7], False), (STATUS[:7].upper(), False), ("9f8", True), ("abcdef0", True)],
)
def test_expect_status_accepts_the_tip_or_a_prefix(expected: str, stale: bool) -> None:
    assert Basis(CONFIG, STATUS, None, "status").stale(expected) is stale


def test_expect_status_without_status_branch_is_stale() -> None:
    basis = Basis(CONFIG, None, None, "palette")
    assert basis.stale(STATUS)
    assert stale_message(basis, STATUS).startswith("stale plan: the status branch is at absent, not 9f8e7d6")


def test_utc_iso() -> None:
    assert utc_iso(1_796_199_000) == "2026-12-02T08:10:00Z"


def _push_status(repo: RemoteRepo, text: str) -> str:
    """A commit on the remote's status branch, written in the remote as run's push leaves it (the
    clone's remote-tracking copy does not move)."""
    bare = repo.bare
    blob = git("hash-object", "-w", "--stdin", cwd=bare, input=text).strip()
    tree = git("mktree", cwd=bare, input=f"100644 blob {blob}\treconciler.yaml\n").strip()
    commit = git("commit-tree", tree, "-m", "status", cwd=bare).strip()
    git("update-ref", f"refs/heads/{BRANCH}", commit, cwd=bare)
    return commit


def test_a_clone_fetches_the_status_branch_before_reading_it(tmp_path: Path) -> None:
    repo = RemoteRepo(tmp_path)
    repo.commit({"README.md": "config"})
    first = _push_status(repo, "revision: a\n")
    git("fetch", "--quiet", "origin", cwd=repo.work)  # the clone's copy: first
    second = _push_status(repo, "revision: b\n")  # the remote moves on
    assert git("rev-parse", f"refs/remotes/origin/{BRANCH}", cwd=repo.work).strip() == first

    with StatusBranch(str(repo.work), BRANCH, fetch=False) as stale:
        assert stale.tip == first and stale.fetched is False
        assert "not fetched" in stale.basis(None, "status").line()
    with StatusBranch(str(repo.work), BRANCH) as fresh:
        assert fresh.tip == second and fresh.fetched is True
        assert fresh.read("reconciler.yaml") == b"revision: b\n"
        basis = fresh.basis(repo.head(), "status")
        assert basis.status_commit == second and basis.status_time is not None
        assert basis.status_time.endswith("Z")
    with StatusBranch(str(repo.bare), BRANCH) as remote:  # the remote itself: nothing to fetch from
        assert remote.tip == second and remote.fetched is True


def test_a_status_branch_gone_from_the_remote_is_not_read_from_a_stale_copy(tmp_path: Path) -> None:
    repo = RemoteRepo(tmp_path)
    repo.commit({"README.md": "config"})
    _push_status(repo, "revision: a\n")
    git("fetch", "--quiet", "origin", cwd=repo.work)
    git("update-ref", "-d", f"refs/heads/{BRANCH}", cwd=repo.bare)
    with StatusBranch(str(repo.work), BRANCH) as branch:
        assert branch.ref is None and branch.tip is None


def test_an_unreachable_remote_names_no_fetch(tmp_path: Path) -> None:
    repo = RemoteRepo(tmp_path)
    repo.commit({"README.md": "config"})
    git("remote", "set-url", "origin", str(tmp_path / "gone.git"), cwd=repo.work)
    with pytest.raises(GitError, match="--no-fetch"):
        StatusBranch(str(repo.work), BRANCH)
    with StatusBranch(str(repo.work), BRANCH, fetch=False) as branch:
        assert branch.tip is None and not branch.fetched


def test_a_reader_keeps_the_commit_it_opened_at_while_the_branch_moves(tmp_path: Path) -> None:
    repo = RemoteRepo(tmp_path)
    repo.commit({"README.md": "config"})
    first = _push_status(repo, "revision: a\n")
    with StatusBranch(str(repo.bare), BRANCH) as reader:
        second = _push_status(repo, "revision: b\n")  # a writer moves the branch meanwhile
        assert reader.tip == first != second
        assert reader.files() == {"reconciler.yaml": b"revision: a\n"}
        assert reader.read("reconciler.yaml") == b"revision: a\n"
        assert [c.sha for c in reader.history("reconciler.yaml")] == [first]
        assert reader.basis(None, "status").status_commit == first
