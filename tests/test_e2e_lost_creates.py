"""Creates written ahead, end to end with a fake clock: the controller against the emulator (its search
index lagging its store, a create's answer lost after Palette acted) and a real git remote. Each create
is recorded on the status branch before it is sent, and no second create is sent for a cluster Palette
does not list yet: not within the indexing delay, nor after it when a lookup by name finds it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.emulator import EmulatorServer, FaultRule
from reconciler.metrics import PassOutcome
from reconciler.palette.endpoints import CLUSTER_CREATE
from reconciler.palette.pacing import RateLimits
from reconciler.runtime.pipeline import Pipeline
from reconciler.snapshots import load_snapshot
from reconciler.status.creates import INDEXING_DELAY, read_creates
from tests._e2e_support import API_KEY, SAMPLE, PinnedClock, controller, sample_files
from tests._git_support import RemoteRepo, git

pytestmark = pytest.mark.e2e

LAG = 20.0  # the emulator's search index lag, seconds on the fake clock


@pytest.fixture
def clock() -> PinnedClock:
    return PinnedClock()


@pytest.fixture
def lagging(clock: PinnedClock, monkeypatch: pytest.MonkeyPatch) -> Iterator[EmulatorServer]:
    monkeypatch.setenv("PALETTE_API_KEY", API_KEY)
    with EmulatorServer.from_snapshot(
        load_snapshot(SAMPLE / "inventory.json"),
        API_KEY,
        provision_seconds=0.3,
        delete_seconds=0.2,
        clock=clock.time,
        rate_limits=RateLimits.off(),
    ) as server:
        server.state.index_delay = LAG
        yield server


def creates_sent(emulator: EmulatorServer) -> int:
    return emulator.stats.count("POST", CLUSTER_CREATE)


def recorded(remote: RemoteRepo) -> dict[str, bytes]:
    text = git("show", "reconciler/status:reconciler.yaml", cwd=remote.bare)
    return {"reconciler.yaml": text.encode()}


FAULTS = {
    "503 after acting": {"lost_next": 1},
    "delivered after the client gave up": {"late_next": 1, "late_by": 8.0},
}
SANDBOX = "project-a/platforms/cpu-sandbox.yaml"


def settled_without_sandbox(
    tmp_path: Path, emulator: EmulatorServer, clock: PinnedClock
) -> tuple[RemoteRepo, Pipeline]:
    """The sample without cpu-sandbox, every cluster created and listed with no lag; the index lags
    again (``LAG``) from then on."""
    emulator.state.index_delay = 0.0
    (tmp_path / "git").mkdir()
    remote = RemoteRepo(tmp_path / "git")
    remote.commit({p: d for p, d in sample_files().items() if p != SANDBOX}, "the sample, no sandbox")
    ctl = controller(remote, emulator, tmp_path, clock=clock)
    for _ in range(3):
        ctl.reconcile_once()
        clock.at += 5
    clock.at += LAG  # older than any lag now
    emulator.state.index_delay = LAG
    return remote, ctl


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_lost_create_answer_sends_no_second_create(
    lagging: EmulatorServer, clock: PinnedClock, tmp_path: Path, fault: str
) -> None:
    remote, ctl = settled_without_sandbox(tmp_path, lagging, clock)
    try:
        before = creates_sent(lagging)
        rule = FaultRule(path=f"^{CLUSTER_CREATE}$", methods=("POST",), error_status=503, **FAULTS[fault])  # type: ignore[arg-type]
        lagging.faults.add([rule])
        remote.commit({SANDBOX: (SAMPLE / SANDBOX).read_bytes()}, "the sandbox")
        ctl.reconcile_once()
        assert creates_sent(lagging) == before + 1  # its answer lost
        intents = read_creates(recorded(remote))
        assert [i.cluster for i in intents] == ["project-a-cpu-sandbox"]  # written ahead, still open

        for _ in range(4):  # within the lag: not listed, not created again
            clock.at += 5
            ctl.reconcile_once()
            assert creates_sent(lagging) == before + 1
        clock.at += LAG  # listed now: the intent is resolved, nothing created
        ctl.reconcile_once()
        ctl.reconcile_once()
        assert creates_sent(lagging) == before + 1  # one create, whatever became of its answer
        names = [c.name for c in lagging.state.clusters.values()]
        assert len(names) == len(set(names)) and "project-a-cpu-sandbox" in names
        assert read_creates(recorded(remote)) == ()
    finally:
        ctl.close()


def test_a_create_that_did_not_happen_is_sent_again_once_its_absence_is_confirmed(
    lagging: EmulatorServer, clock: PinnedClock, tmp_path: Path
) -> None:
    remote, ctl = settled_without_sandbox(tmp_path, lagging, clock)
    try:
        before = creates_sent(lagging)
        # Failed before Palette acted: the client cannot tell, so it does not send it again at once.
        lagging.faults.add(
            [FaultRule(path=f"^{CLUSTER_CREATE}$", methods=("POST",), error_next=1, error_status=503)]
        )
        remote.commit({SANDBOX: (SAMPLE / SANDBOX).read_bytes()}, "the sandbox")
        ctl.reconcile_once()
        for _ in range(3):  # within the indexing delay: held back
            clock.at += INDEXING_DELAY / 4
            ctl.reconcile_once()
        assert creates_sent(lagging) == before + 1
        clock.at += INDEXING_DELAY / 4 + 1  # past it: looked up by name, absent: created once more
        ctl.reconcile_once()
        assert creates_sent(lagging) == before + 2
        clock.at += LAG + 1
        ctl.reconcile_once()
        ctl.reconcile_once()
        assert creates_sent(lagging) == before + 2
        assert [c.name for c in lagging.state.clusters.values()].count("project-a-cpu-sandbox") == 1
        assert read_creates(recorded(remote)) == ()
    finally:
        ctl.close()


def test_a_create_answered_with_its_uid_neither_wedges_its_target_nor_is_sent_again_while_unlisted(
    lagging: EmulatorServer, clock: PinnedClock, tmp_path: Path
) -> None:
    remote, ctl = settled_without_sandbox(tmp_path, lagging, clock)
    try:
        clock.at += 3 * INDEXING_DELAY  # the settled clusters stay listed under the longer lag
        lagging.state.index_delay = 3 * INDEXING_DELAY  # the search by name lags as long as the listing
        before = creates_sent(lagging)
        remote.commit({SANDBOX: (SAMPLE / SANDBOX).read_bytes()}, "the sandbox")
        ctl.reconcile_once()
        assert creates_sent(lagging) == before + 1
        (intent,) = read_creates(recorded(remote))
        uid = next(c.uid for c in lagging.state.clusters.values() if c.name == "project-a-cpu-sandbox")
        assert intent.uid == uid  # the answer resolved the intent to the new cluster's uid

        for _ in range(3):  # within the delay: the unlisted new cluster is the index's lag, not doubt
            clock.at += INDEXING_DELAY / 4
            result = ctl.reconcile_once()
            assert result.outcome is PassOutcome.SUCCESS, result.error
            assert creates_sent(lagging) == before + 1
        for _ in range(4):  # past the delay, still not listed: never created again
            clock.at += INDEXING_DELAY / 2
            ctl.reconcile_once()
            assert creates_sent(lagging) == before + 1
        clock.at += INDEXING_DELAY  # listed now: the intent is closed
        ctl.reconcile_once()
        assert creates_sent(lagging) == before + 1
        assert read_creates(recorded(remote)) == ()
    finally:
        ctl.close()
