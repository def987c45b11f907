"""A merge during a long host sweep is planned against the inventory the loop already holds: the pass
reads what changed since the last read (and its share of the sweep), never the whole inventory again.
The sweep is scheduled by the pass's clock, pinned here: no sleeping."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.emulator import EmulatorServer
from reconciler.palette.client import PaletteClient
from reconciler.palette.endpoints import EDGE_HOSTS_SEARCH
from reconciler.palette.pacing import RateLimits
from reconciler.plan import Action
from reconciler.resolve import Target
from reconciler.runtime import wiring
from reconciler.runtime.options import ControllerOptions
from reconciler.snapshots import load_snapshot
from tests._e2e_support import API_KEY, SAMPLE, PinnedClock
from tests._git_support import RemoteRepo
from tests._palette_support import host

NOTEBOOKS = "project-a/platforms/notebooks.yaml"
FILLERS = 300  # with the sample's 31 hosts: 7 pages of 50


@pytest.fixture
def fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[EmulatorServer]:
    """The sample inventory and 300 hosts more (unpaired: listed, never placed), all last modified
    long ago: a read of what changed since the last read finds only what the passes changed."""
    monkeypatch.setenv("PALETTE_API_KEY", API_KEY)
    raw = json.loads((SAMPLE / "inventory.json").read_text())
    raw["edgeHosts"] += [host(f"filler-{i:03d}", state="unpaired") for i in range(FILLERS)]
    for item in raw["edgeHosts"]:
        item["metadata"]["lastModifiedTimestamp"] = "2026-01-01T00:00:00.000Z"
    path = tmp_path / "inventory.json"
    path.write_text(json.dumps(raw))
    with EmulatorServer.from_snapshot(
        load_snapshot(path), API_KEY, provision_seconds=0.3, delete_seconds=0.2, rate_limits=RateLimits.off()
    ) as server:
        yield server


class HostPages:
    """Counts the edge-host search pages every client of the controller sends."""

    def __init__(self) -> None:
        self.count = 0

    def client(self, target: Target, key: str) -> PaletteClient:
        return PaletteClient(
            target.url, key, target.project_uid, rate_limits=RateLimits.off(), on_request=self.seen
        )

    def seen(self, method: str, template: str, status: int) -> None:
        self.count += template == EDGE_HOSTS_SEARCH


def test_a_merge_during_a_running_sweep_is_planned_at_once_against_the_held_inventory(
    remote: RemoteRepo, fleet: EmulatorServer, tmp_path: Path
) -> None:
    notebooks = (remote.work / NOTEBOOKS).read_bytes()
    remote.commit({NOTEBOOKS: None}, "start without notebooks")
    clock = PinnedClock()
    pages = HostPages()
    options = ControllerOptions(
        repo=str(remote.bare),
        palette_url=fleet.url,
        cache_dir=tmp_path / "cache",
        palette_rate_limits=RateLimits.off(),
        host_sweep_every=600.0,
        host_sweep_rate=0.01,  # one sweep page per 100 s: the sweep outlasts many passes
    )
    ctl = wiring.build(options, clock=clock, client_factory=pages.client)
    ctl.reconcile_once()
    full_listing = pages.count
    assert full_listing == 7

    clock.at += 600.0  # a sweep is due: this pass starts it and reads the one page it has earned
    before = pages.count
    ctl.reconcile_once()
    assert pages.count - before == 2  # what changed since the last read, and one sweep page

    sha = remote.commit({NOTEBOOKS: notebooks}, "merge: notebooks platform")
    clock.at += 1.0
    before = pages.count
    result = ctl.reconcile_once()
    ctl.close()

    assert result.revision == sha
    assert [p.action for p in result.plan if p.name == "notebooks"] == [Action.CREATE]
    assert pages.count - before == 1  # only what changed: the sweep goes on at its own pace


def test_a_merge_during_the_first_listing_is_planned_against_it_without_reading_it_again(
    remote: RemoteRepo, fleet: EmulatorServer, tmp_path: Path
) -> None:
    notebooks = (remote.work / NOTEBOOKS).read_bytes()
    remote.commit({NOTEBOOKS: None}, "start without notebooks")
    pushed: list[str] = []

    class MergeMidListing(HostPages):
        def seen(self, method: str, template: str, status: int) -> None:
            super().seen(method, template, status)
            if self.count == 3 and not pushed:  # the listing is half read when the merge lands
                pushed.append(remote.commit({NOTEBOOKS: notebooks}, "merge: notebooks platform"))

    pages = MergeMidListing()
    options = ControllerOptions(
        repo=str(remote.bare),
        palette_url=fleet.url,
        cache_dir=tmp_path / "cache",
        palette_rate_limits=RateLimits.off(),
    )
    ctl = wiring.build(options, clock=PinnedClock(), client_factory=pages.client)
    result = ctl.reconcile_once()
    ctl.close()

    assert result.revision == pushed[0]  # the fence saw the head move before the first write
    assert [p.action for p in result.plan if p.name == "notebooks"] == [Action.CREATE]
    assert pages.count == 7 + 1  # the listing, then only what changed since it began
