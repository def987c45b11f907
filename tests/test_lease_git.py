"""The git lease (one writer, docs/reconciling.md) between real contenders on a real bare repository.

Each contender has its own cache, as two reconciler processes on two machines would. Durations are
shortened to seconds; the rules are the same as with the 60 s default.
"""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from reconciler.runtime.lease import Lease, LeaseKeeper, NoLease
from reconciler.source.lease import GitLease, LeaseError, LeaseRecord
from reconciler.source.status_store import StatusStore
from tests._git_support import RemoteRepo, git
from tests._loop_support import wait_for

BRANCH = "reconciler/lease"


@pytest.fixture
def remote(tmp_path: Path) -> RemoteRepo:
    repo = RemoteRepo(tmp_path)
    repo.commit({"project-a/platform.yaml": "kind: MLPlatform\n"}, "config")
    return repo


def contender(remote: RemoteRepo, tmp_path: Path, name: str, **kwargs: Any) -> GitLease:
    return GitLease(str(remote.bare), name, cache_dir=tmp_path / f"cache-{name}", **kwargs)


class Clocks:
    """One process's clocks: a monotonic clock the test moves, and a wall clock ``offset`` s off."""

    def __init__(self, offset: float = 0.0) -> None:
        self.mono = 1000.0
        self.offset = offset

    def monotonic(self) -> float:
        return self.mono

    def time(self) -> float:
        return 1_790_000_000.0 + self.mono + self.offset

    def pinned(self) -> dict[str, Any]:
        """GitLease's clock arguments: time moves only when the test says so, however slow the machine."""
        return {"clock": self.time, "monotonic": self.monotonic}


def on_branch(remote: RemoteRepo) -> dict[str, object]:
    """The lease record as the branch holds it."""
    return dict(json.loads(git("show", f"{BRANCH}:lease.json", cwd=remote.bare)))


def assert_one_commit(remote: RemoteRepo) -> None:
    assert git("rev-list", "--count", BRANCH, cwd=remote.bare).strip() == "1"
    assert git("rev-list", "--parents", "-n", "1", BRANCH, cwd=remote.bare).split()[1:] == []


def test_git_lease_and_no_lease_satisfy_the_protocol(remote: RemoteRepo, tmp_path: Path) -> None:
    leases: list[Lease] = [contender(remote, tmp_path, "a"), NoLease("solo")]
    assert [lease.identity for lease in leases] == ["a", "solo"]
    solo = leases[1]
    assert solo.acquire() and solo.holds() and solo.holder() == "solo"


def test_only_one_of_two_contenders_holds_the_lease(remote: RemoteRepo, tmp_path: Path) -> None:
    a, b = contender(remote, tmp_path, "a"), contender(remote, tmp_path, "b")
    assert a.acquire() is True and a.holds()
    assert b.acquire() is False and not b.holds()
    assert b.holder() == "a" and a.holder() == "a"
    assert a.acquire() is True, "the holder renews"
    assert b.acquire() is False
    record = on_branch(remote)
    assert record["holderIdentity"] == "a" and record["leaseDurationSeconds"] == 60.0
    assert record["renewTime"] >= record["acquireTime"]  # type: ignore[operator]
    assert_one_commit(remote)


def race(lease: GitLease, barrier: threading.Barrier, results: dict[str, bool]) -> None:
    barrier.wait()
    results[lease.identity] = lease.acquire()


def test_simultaneous_contenders_never_both_win(remote: RemoteRepo, tmp_path: Path) -> None:
    for round_ in range(4):
        leases = [contender(remote, tmp_path, f"r{round_}-{n}") for n in range(3)]
        barrier = threading.Barrier(len(leases))
        results: dict[str, bool] = {}

        threads = [threading.Thread(target=race, args=(lease, barrier, results)) for lease in leases]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        winners = [name for name, won in results.items() if won]
        assert len(winners) == 1, results
        assert on_branch(remote)["holderIdentity"] == winners[0]
        next(lease for lease in leases if lease.identity == winners[0]).release()
    assert_one_commit(remote)


def test_the_standby_takes_over_after_the_lease_expires(remote: RemoteRepo, tmp_path: Path) -> None:
    clock = Clocks()
    a = contender(remote, tmp_path, "a", duration=1.5, safety_margin=0.5, **clock.pinned())
    b = contender(remote, tmp_path, "b", duration=1.5, safety_margin=0.5, **clock.pinned())
    assert a.acquire()
    record = a.record()
    assert record is not None
    expires = record.renew_time + timedelta(seconds=record.duration)
    # a stops renewing (a process that hangs or dies without releasing); b times it from its first look.
    assert b.acquire() is False and b.holder() == "a"
    clock.mono += 0.75
    assert a.holds()
    clock.mono += 0.25  # duration - safety margin since a's renewal started
    assert not a.holds(), "the old holder stopped holding before the lease expired"
    clock.mono += 0.5  # seen unchanged for exactly its duration: not expired yet
    assert b.acquire() is False and b.holder() == "a"
    clock.mono += 0.25
    assert b.acquire() is True, "the standby takes over once the lease expired"
    taken = b.record()
    assert taken is not None
    assert taken.renew_time > expires, "taken over only after the lease expired"
    assert a.acquire() is False and a.holder() == "b"
    assert on_branch(remote)["leaseTransitions"] == 1
    assert_one_commit(remote)


def test_the_standby_takes_over_at_once_after_release(remote: RemoteRepo, tmp_path: Path) -> None:
    a, b = contender(remote, tmp_path, "a"), contender(remote, tmp_path, "b")
    assert a.acquire() and not b.acquire()
    a.release()
    assert not a.holds()
    assert on_branch(remote)["holderIdentity"] == ""
    assert b.acquire() is True, "no waiting for the 60 s lease to run out"
    assert a.acquire() is False and a.holder() == "b"
    assert_one_commit(remote)


def test_a_holder_that_cannot_renew_stops_holding_before_its_lease_expires(
    remote: RemoteRepo, tmp_path: Path
) -> None:
    clock = Clocks()
    a = contender(remote, tmp_path, "a", duration=2.0, safety_margin=0.5, **clock.pinned())
    assert a.acquire()
    record = a.record()
    assert record is not None
    expires = record.renew_time.timestamp() + record.duration
    hidden = remote.bare.with_name("unreachable.git")
    remote.bare.rename(hidden)  # the remote is gone: every renewal fails
    try:
        clock.mono += 1.0
        assert a.acquire() is True, "a failed renewal inside the lease keeps it held for now"
        assert a.last_error is not None
        clock.mono += 0.25
        assert a.holds() and a.acquire() is True
        clock.mono += 0.25  # the safety margin before the lease expires: it stops holding here
        assert not a.holds()
        assert a.acquire() is False
    finally:
        hidden.rename(remote.bare)
    assert clock.time() == expires - 0.5, "stopped holding the safety margin before the lease expired"
    b = contender(remote, tmp_path, "b", duration=2.0, safety_margin=0.5, **clock.pinned())
    assert b.acquire() is False, "a standby that first looks now times a whole duration from now"
    clock.mono += 2.25
    assert b.acquire() is True
    assert clock.time() > expires


def test_the_lease_branch_never_grows_history(remote: RemoteRepo, tmp_path: Path) -> None:
    a, b = contender(remote, tmp_path, "a"), contender(remote, tmp_path, "b")
    commits = set()
    for _ in range(5):
        assert a.acquire() and not b.acquire()
        commits.add(git("rev-parse", BRANCH, cwd=remote.bare).strip())
    a.release()
    assert b.acquire()
    commits.add(git("rev-parse", BRANCH, cwd=remote.bare).strip())
    assert len(commits) == 6, "every renewal is a new commit"
    assert_one_commit(remote)
    assert git("rev-list", "--count", "main", cwd=remote.bare).strip() == "1", "main untouched"


def test_an_unreadable_lease_is_not_taken_over_before_it_could_expire(
    remote: RemoteRepo, tmp_path: Path
) -> None:
    git("checkout", "--quiet", "--orphan", "lease", cwd=remote.work)
    git("rm", "-rf", "--quiet", ".", cwd=remote.work)
    (remote.work / "lease.json").write_text("not json\n")
    git("add", "lease.json", cwd=remote.work)
    git("commit", "--quiet", "-m", "garbage", cwd=remote.work)
    git("push", "--quiet", "origin", f"HEAD:refs/heads/{BRANCH}", cwd=remote.work)
    b = contender(remote, tmp_path, "b")
    assert b.acquire() is False
    assert b.holder() == "(unreadable lease)"


def test_bad_settings_are_refused(remote: RemoteRepo, tmp_path: Path) -> None:
    with pytest.raises(LeaseError):
        contender(remote, tmp_path, "a", duration=10, safety_margin=10)
    with pytest.raises(LeaseError):
        GitLease(str(remote.bare), "two\nlines", cache_dir=tmp_path / "c")
    with pytest.raises(LeaseError):
        GitLease("ext::sh -c id", "a", cache_dir=tmp_path / "c")


def test_lease_record_round_trips_and_expires() -> None:
    record = LeaseRecord.from_json(
        b'{"holderIdentity": "a", "acquireTime": "2026-12-01T12:00:00.000000Z",'
        b' "renewTime": "2026-12-01T12:00:20.500000Z", "leaseDurationSeconds": 60, "leaseTransitions": 2}'
    )
    assert LeaseRecord.from_json(record.to_json()) == record
    assert not record.expired(record.renew_time + timedelta(seconds=60))
    assert record.expired(record.renew_time + timedelta(seconds=60.001))
    with pytest.raises(ValueError):
        LeaseRecord.from_json(b'{"holderIdentity": "a"}')


def test_keepers_hand_over_when_the_holder_stops(remote: RemoteRepo, tmp_path: Path) -> None:
    """Both contenders' monotonic clocks are pinned: no lease of theirs can expire (a renewal slowed by
    a busy machine does not lose it), so b can only take over because a released the lease on stop."""
    changes: dict[str, list[bool]] = {"a": [], "b": []}
    leases = {
        name: contender(remote, tmp_path, name, duration=3.0, safety_margin=1.0, monotonic=lambda: 1000.0)
        for name in ("a", "b")
    }
    attempts: list[bool] = []  # b's answers while a holds the lease
    acquire_b = leases["b"].acquire

    def counted() -> bool:
        attempts.append(acquire_b())
        return attempts[-1]

    leases["b"].acquire = counted  # type: ignore[method-assign]
    keepers = {
        name: LeaseKeeper(lease, renew_every=0.3, retry_every=0.1, on_change=changes[name].append)
        for name, lease in leases.items()
    }
    keepers["a"].start()
    assert keepers["a"].wait_until_held(60)
    keepers["b"].start()
    try:
        wait_for(lambda: len(attempts) >= 5, 60, "five attempts of the standby")
        assert [k.holds() for k in keepers.values()] == [True, False]
        assert not any(attempts), attempts
        assert keepers["b"].holder() == "a"
        keepers["a"].stop()
        assert not keepers["a"].holds()
        assert keepers["b"].wait_until_held(60), "taken over on release (its lease could never expire)"
    finally:
        for keeper in keepers.values():
            keeper.stop()
    assert changes == {"a": [True, False], "b": [True, False]}
    assert on_branch(remote)["holderIdentity"] == "", "the last holder released on stop"
    assert_one_commit(remote)


def test_a_stale_lock_in_the_lease_cache_does_not_stop_renewals(remote: RemoteRepo, tmp_path: Path) -> None:
    a = contender(remote, tmp_path, "a")
    assert a.acquire()
    a.release()
    assert a.acquire()
    b = contender(remote, tmp_path, "b")
    assert not b.acquire()  # b's cache now holds the lease ref
    a.release()
    lock = tmp_path / "cache-b" / "refs" / "heads" / f"{BRANCH}.lock"
    lock.write_text("0" * 40 + "\n")
    assert b.acquire() is True
    assert not lock.exists()


@pytest.mark.parametrize("author", ["no email", "<only@email>", "Ann <a@x", "Ann <a@x>\n", "A <b> <c>"])
def test_the_lease_and_the_status_store_refuse_the_same_bad_authors(author: str, tmp_path: Path) -> None:
    with pytest.raises(LeaseError, match="author must look like"):
        GitLease(str(tmp_path), "me", cache_dir=tmp_path / "lease", author=author)
    with pytest.raises(ValueError, match="author must look like"):
        StatusStore(str(tmp_path), workdir=tmp_path / "status", author=author)


def test_the_lease_commits_as_its_author(remote: RemoteRepo, tmp_path: Path) -> None:
    lease = GitLease(str(remote.bare), "me", cache_dir=tmp_path / "lease", author=" Lease Bot  < bot@x > ")
    assert lease.acquire()
    assert git("log", "-1", "--format=%an|%ae|%cn|%ce", BRANCH, cwd=remote.bare).strip() == (
        "Lease Bot|bot@x|Lease Bot|bot@x"
    )


# --- clock skew: expiry is timed on each process's own monotonic clock (client-go's rule) ---------------


def skewed(remote: RemoteRepo, tmp_path: Path, name: str, clocks: Clocks) -> GitLease:
    return GitLease(
        str(remote.bare),
        name,
        cache_dir=tmp_path / f"cache-{name}",
        duration=60.0,
        safety_margin=20.0,
        clock=clocks.time,
        monotonic=clocks.monotonic,
    )


def run(
    leases: dict[str, GitLease], clocks: list[Clocks], seconds: float, step: float, alive: set[str]
) -> tuple[str | None, float | None]:
    """Move every clock by ``step`` up to ``seconds``; each live process acquires each step. Checks that
    at most one holds at any moment; returns who holds at the end and when the holder last changed."""
    changed: float | None = None
    holder: str | None = None
    t = 0.0
    while t < seconds:
        for name, lease in leases.items():
            if name in alive:
                lease.acquire()
        holding = [n for n, lease in leases.items() if lease.holds()]
        assert len(holding) <= 1, f"two writers at {t} s: {holding}"
        if holding and holding[0] != holder:
            holder, changed = holding[0], t
        for c in clocks:
            c.mono += step
        t += step
    return holder, changed


@pytest.mark.parametrize("offset", [3600.0, -3600.0, 60.0])
def test_a_standby_whose_clock_is_off_never_takes_over_a_live_holder(
    remote: RemoteRepo, tmp_path: Path, offset: float
) -> None:
    a_clock, b_clock = Clocks(), Clocks(offset)
    a, b = skewed(remote, tmp_path, "a", a_clock), skewed(remote, tmp_path, "b", b_clock)
    assert a.acquire()
    with capture_logs() as logs:
        holder, _ = run({"a": a, "b": b}, [a_clock, b_clock], 300.0, 20.0, {"a", "b"})
    assert holder == "a" and not b.holds()
    skews = [e["skew_seconds"] for e in logs if e["event"] == "lease clock skew"]
    assert skews and all(abs(s + offset) < 1.0 for s in skews)  # renewTime - b's clock = -offset
    assert b.skew is not None and abs(b.skew + offset) < 1.0


@pytest.mark.parametrize("offset", [3600.0, -3600.0])
def test_a_dead_holder_whose_clock_was_off_is_taken_over_within_two_lease_durations(
    remote: RemoteRepo, tmp_path: Path, offset: float
) -> None:
    a_clock, b_clock = Clocks(offset), Clocks()
    a, b = skewed(remote, tmp_path, "a", a_clock), skewed(remote, tmp_path, "b", b_clock)
    leases, clocks = {"a": a, "b": b}, [a_clock, b_clock]
    assert a.acquire()
    run(leases, clocks, 40.0, 5.0, {"a", "b"})  # a renews, b watches
    holder, changed = run(leases, clocks, 240.0, 5.0, {"b"})  # a dies (no release)
    assert holder == "b" and changed is not None
    assert changed <= 2 * 60.0, f"taken over {changed} s after the holder died"
