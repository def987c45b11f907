"""The status branch a pass writes, assembled by a pure function (status/report.py): plain values in,
files out; no git, no Palette, no clock."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import yaml

from reconciler.inventory import Inventory
from reconciler.model.desired import DesiredState
from reconciler.model.observed import ManagedCluster
from reconciler.model.outcomes import Outcome
from reconciler.plan import plan_targets
from reconciler.resolve import Target, route
from reconciler.status.records import NO_RECORDS, Records, read_records
from reconciler.status.report import StatusTree, status_tree
from reconciler.status.report_facts import ReportFacts
from tests._allocate_support import NS, cluster, cps, desired, inventory, machine, platform

URL = "https://palette.example.com"
NOW = "2026-01-10T10:00:00Z"
LATER = "2026-01-10T11:00:00Z"
PATH = f"{NS}/mlplatforms/p.yaml"


@dataclass
class Seen:
    """One target's observation, as the observe stage hands it on."""

    inventory: Inventory
    clusters: Sequence[ManagedCluster]
    raw_clusters: Sequence[Mapping[str, Any]] = field(default_factory=list)

    def snapshot(self) -> bytes:
        return b'{"edgeHosts": [], "clusters": []}\n'


def running() -> tuple[DesiredState, Seen]:
    """Platform ``p`` (4 GPUs) Running on cp-0 and a."""
    state = desired(platform("p", {"NVIDIA-H100": 4}))
    machines = [*cps(2), machine("a", 4), machine("b", 8)]
    return state, Seen(inventory(machines), [cluster("p", ["cp-0"], ["a"])])


def facts(state: DesiredState, seen: Seen | None, now: str = NOW, **changes: Any) -> ReportFacts:
    routing = route(state, URL)
    (target,) = routing.targets
    observed = {target: seen} if seen is not None else {}
    plans = plan_targets(state, routing, observed) if seen is not None else {}
    base = ReportFacts(
        desired=state,
        revision="abc123",
        branch="main",
        routing=routing,
        plans=plans,
        observed=observed,
        now=now,
    )
    return replace(base, **changes)


def doc(tree: StatusTree, path: str = PATH) -> dict[str, Any]:
    loaded = yaml.safe_load(tree.files[path])
    assert isinstance(loaded, dict)
    return loaded


def ready(status: Mapping[str, Any]) -> dict[str, Any]:
    found = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert isinstance(found, dict)
    return found


def after(tree: StatusTree) -> Records:
    return read_records(tree.tree)


def test_a_running_platform_reports_its_hosts_and_the_same_facts_render_the_same_bytes() -> None:
    state, seen = running()
    first = status_tree(facts(state, seen), NO_RECORDS)
    status = doc(first)["status"]
    assert (status["phase"], ready(status)["reason"]) == ("Running", "Provisioned")
    assert status["allocation"]["workers"] == ["a"]
    assert first.phases == {(NS, "p"): "Running"}
    again = status_tree(facts(state, seen, now=LATER), after(first))
    assert again.tree == first.tree  # no timestamp that changes every pass
    assert not again.changed(after(first), "main")
    assert first.changed(NO_RECORDS, "main")


def test_a_platform_whose_target_refused_the_key_keeps_its_facts_with_reason_palette_unauthorized() -> None:
    state, seen = running()
    before = after(status_tree(facts(state, seen), NO_RECORDS))
    (target,) = route(state, URL).targets
    tree = status_tree(facts(state, None, now=LATER, stalled={target: "HTTP 401"}), before)
    status = doc(tree)["status"]
    assert ready(status)["status"] == "Unknown" and ready(status)["reason"] == "PaletteUnauthorized"
    assert status["allocation"] == before.docs[PATH]["status"]["allocation"]
    assert target in tree.keep  # still observed next pass


def test_an_entry_a_stop_request_kept_from_being_applied_keeps_its_file_as_it_was() -> None:
    state, seen = running()
    before = after(status_tree(facts(state, seen), NO_RECORDS))
    bigger = desired(platform("p", {"NVIDIA-H100": 8}))  # a scale the stop request cut short
    tree = status_tree(facts(bigger, seen, now=LATER, stopped=True), before)
    assert tree.files[PATH] == before.files[PATH]
    applied = status_tree(facts(bigger, seen, now=LATER, outcomes={(NS, "p"): Outcome(ok=True)}), before)
    assert doc(applied)["status"]["phase"] == "Provisioning"


def test_a_target_leaves_the_record_only_when_it_holds_no_managed_cluster() -> None:
    _state, seen = running()
    gone = desired(
        platform("q", {"NVIDIA-H100": 4}, ns="project-b")
    )  # p left git; its cluster is still there
    old = Target(URL, None)
    keeps = status_tree(facts(gone, None, observed={old: seen}), NO_RECORDS)
    assert old in keeps.keep
    empty = Seen(seen.inventory, [])
    leaves = status_tree(facts(gone, None, observed={old: empty}), NO_RECORDS)
    assert old not in leaves.keep
    assert (URL, None) not in leaves.targets
    assert yaml.safe_load(leaves.record)["branch"] == "main"


def test_the_inventory_snapshot_of_a_target_not_read_this_pass_is_kept() -> None:
    state, seen = running()
    first = status_tree(facts(state, seen), NO_RECORDS)
    (path,) = first.inventory
    (target,) = route(state, URL).targets
    unread = status_tree(facts(state, None, failed={target: "503"}), after(first))
    assert unread.inventory == first.inventory and path in unread.tree


def test_a_merge_that_does_what_its_pull_request_planned_says_nothing_and_one_that_does_not_says_why() -> (
    None
):
    from reconciler.inventory import HostState
    from reconciler.plan import merge
    from reconciler.status.drift import drift_note, plan_drift

    state = desired(platform("p", {"NVIDIA-H100": 4}))
    routing = route(state, URL)
    (target,) = routing.targets
    recorded = inventory([*cps(2), machine("a", 4), machine("b", 8)])
    live = inventory([*cps(2), machine("a", 4, state=HostState.UNAVAILABLE), machine("b", 8)])

    def planned(machines: Inventory) -> Any:
        return merge("abc123", plan_targets(state, routing, {target: Seen(machines, [])}), [])

    assert plan_drift(planned(recorded), planned(recorded)) == [] and drift_note([]) is None
    (line,) = plan_drift(planned(recorded), planned(live))
    assert line.startswith(f"{NS}/p: the pull request's plan said create") and "on b" in line.split("does")[1]
    note = drift_note([line])
    assert note is not None and note.splitlines()[1] == f"- {line}"


def test_the_status_branch_is_read_once_into_records_and_an_unreadable_scaling_block_keeps_its_pool() -> None:
    tree = {
        "reconciler.yaml": b"branch: main\nrevision: abc123\ntargets: [{url: 'https://p', projectUid: x}]\n",
        f"{NS}/computepools/shared.yaml": b"status: {mode: shared, scaling: {size: 7, lastAction: 1}}\n",
        f"{NS}/aiworkloads/w.yaml": (
            b"status: {phase: Running, pool: shared, attachedProfiles: [u1],"
            b" allocation: {bound: [{host: h, gpu: 0}]}}\n"
        ),
    }
    records = read_records(tree)
    assert (records.recorded.branch, records.recorded.revision) == ("main", "abc123")
    assert records.recorded.targets == (("https://p", "x"),)
    assert records.pools.modes == {(NS, "shared"): "shared"}
    assert records.pools.attached == {(NS, "w"): ("shared", ("u1",))}
    assert [a.key for a in records.pools.previous[(NS, "shared")]] == [(NS, "w")]
    assert records.unreadable == {(NS, "shared")} and (NS, "shared") not in records.scaling
    assert [p.meaning for p in records.problems] == [
        "unreadable scaling status: the pool keeps its size, not scaled"
    ]
    assert NO_RECORDS.files == {} and NO_RECORDS.recorded.branch is None
