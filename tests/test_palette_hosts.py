"""Incremental edge-host reads (HostLister) against the emulator's timestamp filter and sort."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.edgehost import HostFacts, read_host
from reconciler.emulator import EmulatorServer
from reconciler.metrics import PassOutcome
from reconciler.palette.hosts import HostLister, format_time
from reconciler.palette.pacing import RateLimits
from reconciler.snapshots import Snapshot, load_snapshot
from tests._e2e_support import API_KEY, SAMPLE, controller
from tests._git_support import RemoteRepo
from tests._palette_support import KEY, FakeClock, admin, client, host, running

SEARCH = "/v1/dashboard/edgehosts/search"


def _hosts(n: int) -> list[dict[str, Any]]:
    return [host(f"edge-{i:03d}") for i in range(n)]


def _health(listing: list[HostFacts]) -> dict[str, str]:
    return {h.uid: h.health for h in listing}


def test_an_idle_read_costs_one_page_not_the_whole_inventory() -> None:
    clock = FakeClock()
    with running(_hosts(120), clock=clock) as server, client(server) as palette:
        lister = HostLister(palette, clock=clock)
        first = lister.list()
        assert lister.last_requests == 3  # 120 hosts: pages of 50
        clock.advance(60)  # past the overlap: the seeded timestamps are no longer re-read
        lister.list()
        clock.advance(30)
        again = lister.list()
        assert lister.last_requests == 1
        assert again == first and len(first) == 120
        assert server.stats.count(path=SEARCH) == 3 + 3 + 1


def test_changes_additions_and_removals_all_reach_the_listing() -> None:
    clock = FakeClock()
    with running(_hosts(120), clock=clock) as server, client(server) as palette:
        lister = HostLister(palette, clock=clock, full_every=600, sweep_rate=None, overlap=1.0)
        clock.advance(10)  # the seeded timestamps lie before the first read
        lister.list()
        clock.advance(5)
        admin(server, "PATCH", "hosts/edge-007", {"healthState": "unhealthy"})
        admin(server, "PUT", "hosts/edge-new", host("edge-new"))
        admin(server, "DELETE", "hosts/edge-050")
        clock.advance(5)
        listing = lister.list()
        assert lister.last_requests == 1
        assert _health(listing)["edge-007"] == "unhealthy"
        assert "edge-new" in _health(listing)
        assert "edge-050" in _health(listing)  # a removal shows only in a full sweep
        clock.advance(600)
        listing = lister.list()
        assert lister.last_requests == 1 + 3  # the changes since, then the sweep
        assert "edge-050" not in _health(listing) and "edge-new" in _health(listing)
        assert lister.list() == sorted(
            (read_host(h) for h in server.state.snapshot_view()["edgeHosts"]),
            key=lambda h: (h.name, h.uid) if h else ("", ""),
        )


def test_a_change_made_during_a_listing_is_not_lost() -> None:
    clock = FakeClock()
    pages = {"n": 0}
    state_box: dict[str, EmulatorServer] = {}

    def meanwhile(method: str, path: str, status: int) -> None:
        # After the first page: change a host already read, then (later) one still to come. The second
        # change's timestamp is the newest the listing sees; keying the next read on it would skip the
        # first change (overlap 0 here, so no safety margin hides the mistake).
        pages["n"] += 1
        if path == SEARCH and pages["n"] == 1:
            clock.advance(1)
            state_box["s"].state.patch_host("edge-000", {"healthState": "unhealthy"})
            clock.advance(1)
            state_box["s"].state.patch_host("edge-119", {"healthState": "unhealthy"})

    with running(_hosts(120), clock=clock) as server:
        state_box["s"] = server
        with client(server, on_request=meanwhile) as palette:
            lister = HostLister(palette, clock=clock, overlap=0.0)
            first = _health(lister.list())
            assert first["edge-000"] == "healthy" and first["edge-119"] == "unhealthy"
            clock.advance(30)
            after = _health(lister.list())
    assert after["edge-000"] == "unhealthy"


def test_the_sweep_reads_only_the_pages_its_budget_has_earned() -> None:
    clock = FakeClock()
    with running(_hosts(200), clock=clock) as server, client(server) as palette:
        lister = HostLister(palette, clock=clock, full_every=0, sweep_rate=1.0, overlap=1.0)
        clock.advance(10)
        lister.list()
        assert lister.last_requests == 4
        clock.advance(2)
        lister.list()
        assert lister.last_requests == 1 + 2  # the changes, then 2 of the 4 sweep pages
        full = lister.full_listings
        clock.advance(2)
        lister.list()
        assert lister.full_listings == full + 1  # the sweep finished


def _search(server: EmulatorServer, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(server.url + SEARCH, json=body, headers={"ApiKey": KEY}, timeout=5)


def _date_filter(operator: str, *values: str) -> dict[str, Any]:
    return {
        "filter": {
            "conjunction": "and",
            "filterGroups": [
                {
                    "conjunction": "and",
                    "filters": [
                        {
                            "property": "lastModifiedTimestamp",
                            "type": "date",
                            "condition": {
                                "date": {
                                    "operator": operator,
                                    "match": {"conjunction": "or", "values": list(values)},
                                }
                            },
                        }
                    ],
                }
            ],
        },
        "sort": [{"field": "lastModifiedTimestamp", "order": "desc"}, {"field": "name", "order": "asc"}],
    }


def test_emulator_filters_and_sorts_hosts_by_last_modified_time() -> None:
    clock = FakeClock()
    with running(_hosts(5), clock=clock) as server:
        seeded = format_time(clock.now)
        clock.advance(10)
        server.state.patch_host("edge-003", {"healthState": "unhealthy"})
        clock.advance(10)
        server.state.patch_host("edge-001", {"healthState": "unhealthy"})
        names = lambda r: [h["metadata"]["name"] for h in r.json()["items"]]  # noqa: E731
        assert names(_search(server, _date_filter("gt", seeded))) == ["edge-001", "edge-003"]
        assert names(_search(server, _date_filter("lte", seeded))) == ["edge-000", "edge-002", "edge-004"]
        middle = format_time(clock.now - 15), format_time(clock.now - 5)
        assert names(_search(server, _date_filter("range", *middle))) == ["edge-003"]
        stamps = [
            h["metadata"]["lastModifiedTimestamp"]
            for h in _search(server, _date_filter("gte", seeded)).json()["items"]
        ]
        assert stamps == sorted(stamps, reverse=True)


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"sort": [{"field": "memoryUsage", "order": "asc"}]}, 422),
        (_date_filter("gte", "yesterday"), 400),
        (_date_filter("range", "2026-01-01T00:00:00.000Z"), 400),
    ],
)
def test_emulator_refuses_bad_sorts_and_dates(body: dict[str, Any], status: int) -> None:
    with running(_hosts(2)) as server:
        answer = _search(server, body)
    assert answer.status_code == status
    assert set(answer.json()) == {"code", "message", "details", "ref"}


def test_the_loops_idle_pass_reads_changed_hosts_not_every_page(
    remote: RemoteRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PALETTE_API_KEY", API_KEY)
    snapshot = load_snapshot(SAMPLE / "inventory.json")
    extra = [host(f"extra-{i:03d}", labels={"other": "x"}) for i in range(120)]  # three pages and more
    snapshot = Snapshot(edge_hosts=[*snapshot.edge_hosts, *extra], clusters=snapshot.clusters)
    clock = FakeClock()
    with EmulatorServer.from_snapshot(
        snapshot, API_KEY, clock=clock, provision_seconds=1, delete_seconds=1, rate_limits=RateLimits.off()
    ) as server:
        ctl = controller(remote, server, tmp_path)
        ctl.reconcile_once()
        clock.advance(120)  # every cluster runs; every change lies before the next read's overlap
        for _ in range(3):
            ctl.reconcile_once()
        server.stats.reset()
        idle = ctl.reconcile_once()
        ctl.close()
        assert server.stats.count(path=SEARCH) == 1
    assert idle.outcome is PassOutcome.SKIPPED


@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_no_change_is_lost_whatever_happens_during_the_listings(data: st.DataObject) -> None:
    """Changes, additions and removals land between and *during* listings (after any page); one quiet
    read later the list holds every current host as it is now, and after a sweep nothing removed."""
    clock = FakeClock()
    ops = st.tuples(st.sampled_from(["change", "add", "remove", "none"]), st.integers(0, 119))
    box: dict[str, EmulatorServer] = {}
    added = {"n": 0}
    quiet = {"on": False}

    def apply(op: tuple[str, int]) -> None:
        kind, i = op
        state = box["s"].state
        clock.advance(data.draw(st.sampled_from([0.0, 0.001, 0.5, 2.0])))
        uids = sorted(state.hosts)
        if kind == "change" and uids:
            state.patch_host(uids[i % len(uids)], {"tags": {"rev": str(clock.now)}})
        elif kind == "add":
            added["n"] += 1
            state.put_host(host(f"new-{added['n']:03d}-{i:03d}"))
        elif kind == "remove" and uids:
            state.remove_host(uids[i % len(uids)])

    def meanwhile(method: str, path: str, status: int) -> None:
        if not quiet["on"]:
            apply(data.draw(ops))

    with running(_hosts(120), clock=clock) as server:
        box["s"] = server
        with client(server, on_request=meanwhile) as palette:
            lister = HostLister(palette, clock=clock, full_every=3600, sweep_rate=None, overlap=1.0)
            for _ in range(data.draw(st.integers(1, 4))):
                clock.advance(data.draw(st.sampled_from([0.0, 1.0, 30.0])))
                lister.list()
            # One quiet read: every change so far is in; only removed hosts may linger until a sweep.
            quiet["on"] = True
            clock.advance(5)
            listing = {h.uid: h for h in lister.list()}
            truth = {h["metadata"]["uid"]: read_host(h) for h in server.state.snapshot_view()["edgeHosts"]}
            assert {u: listing[u] for u in truth} == truth
            clock.advance(3600)
            swept = {h.uid: h for h in lister.list()}
            assert swept == truth


class _PaletteWithoutDateFilters(httpx.BaseTransport):
    """Loopback to the emulator, except that a date filter is refused (422), as a Palette whose
    edge-host search does not know the property would answer."""

    def __init__(self) -> None:
        self._inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if b'"type":"date"' in request.read().replace(b" ", b""):
            body = {"code": "InvalidFilter", "message": "unsupported property", "details": {}, "ref": "r"}
            return httpx.Response(422, json=body)
        return self._inner.handle_request(request)

    def close(self) -> None:
        self._inner.close()


def test_a_palette_refusing_the_date_filter_gets_full_listings_instead() -> None:
    clock = FakeClock()
    with running(_hosts(120), clock=clock) as server:
        palette = client(server, transport=_PaletteWithoutDateFilters())
        with palette:
            lister = HostLister(palette, clock=clock)
            lister.list()
            clock.advance(60)
            admin(server, "PATCH", "hosts/edge-010", {"healthState": "unhealthy"})
            listing = lister.list()
            assert not lister.incremental
            assert lister.last_requests == 3  # every page (the refused read brought none)
            clock.advance(60)
            lister.list()
            assert lister.last_requests == 3
    assert _health(listing)["edge-010"] == "unhealthy"


def test_hosts_are_kept_as_facts_and_a_change_nobody_reads_moves_nothing() -> None:
    clock = FakeClock()
    with running(_hosts(60), clock=clock) as server, client(server) as palette:
        lister = HostLister(palette, clock=clock, overlap=1.0)
        clock.advance(10)
        first = lister.list()
        assert all(isinstance(h, HostFacts) for h in first)
        version = lister.version
        clock.advance(5)
        admin(server, "PUT", "hosts/edge-001", host("edge-001"))  # the same host again: a newer timestamp
        clock.advance(5)
        assert lister.list() == first and lister.last_requests == 1
        assert lister.version == version, "a timestamp alone is no change of the inventory"
        admin(server, "PATCH", "hosts/edge-002", {"healthState": "unhealthy"})
        clock.advance(5)
        assert _health(lister.list())["edge-002"] == "unhealthy" and lister.version == version + 1
