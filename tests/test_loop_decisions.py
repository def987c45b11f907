"""The pure decisions of the loop, tested alone: the prune guard over a pass, the status of a platform
whose Palette could not be read, and ``reconciler.yaml``."""

from __future__ import annotations

import copy

from hypothesis import given
from hypothesis import strategies as st

from reconciler.model.conditions import Reason
from reconciler.model.observed import ManagedCluster
from reconciler.plan import Action, Observed, PlatformPlan, plan_targets
from reconciler.resolve import Routing, Target
from reconciler.status.recorded import missing_clusters
from reconciler.status.render import (
    RECONCILER_FILE,
    dump,
    parse_previous,
    parse_recorded,
    platform_status,
    reconciler_document,
    unreachable_status,
)
from tests._allocate_support import cluster, desired, inventory


def running_plan() -> PlatformPlan:
    cluster = ManagedCluster(
        uid="c1",
        name="ns-a",
        namespace="ns",
        platform="a",
        state="Running",
        control_plane=("h1",),
        workers=("h2",),
    )
    return PlatformPlan(
        "ns", "a", Action.UNCHANGED, Reason.PROVISIONED, "running", ("h1",), ("h2",), {"X": 1}, cluster
    )


@given(
    orphans=st.lists(st.integers(min_value=0, max_value=4), min_size=1, max_size=3),
    limit=st.integers(min_value=0, max_value=5),
)
def test_a_pass_deletes_all_it_planned_or_nothing(orphans: list[int], limit: int) -> None:
    """Orphan clusters spread over several Palette targets: the guard counts the whole pass."""
    observed = {
        Target(f"https://palette-{i}", None): Observed(
            inventory([]), [cluster(f"p{i}-{j}", [], [], ns="gone") for j in range(n)]
        )
        for i, n in enumerate(orphans)
    }
    plans = plan_targets(desired(), Routing(), observed, max_deletions=limit)
    planned = sum(orphans)
    kept = [p for plan in plans.values() for p in plan.platforms]
    deleting = [p for p in kept if p.action is Action.DELETE]
    blocked = [p for p in kept if p.reason is Reason.PRUNE_BLOCKED]
    assert len(kept) == planned
    assert len(deleting) == (planned if planned <= limit else 0)
    assert len(blocked) == (0 if planned <= limit else planned)


def running_doc() -> dict[str, object]:
    return platform_status(
        running_plan(),
        revision="r1",
        inputs="i1",
        outcome=None,
        previous=None,
        now="2026-01-01T00:00:00Z",
    )[1]


def test_an_unreachable_platform_keeps_its_facts_and_recovers_to_the_same_bytes() -> None:
    before = running_doc()
    phase, during = unreachable_status(
        "ns",
        "a",
        previous=before,
        reason=Reason.PALETTE_UNAUTHORIZED,
        message="401",
        now="2026-01-02T00:00:00Z",
    )
    assert str(phase) == "Running"
    for key in ("phase", "cluster", "allocation", "observedRevision", "inputsHash"):
        assert during["status"][key] == before["status"][key]  # type: ignore[index]
    ready, reachable = during["status"]["conditions"]  # type: ignore[index]
    assert (ready["status"], ready["reason"]) == ("Unknown", "PaletteUnauthorized")
    assert ready["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    assert (reachable["type"], reachable["status"]) == ("PaletteReachable", "False")

    _phase, after = platform_status(
        running_plan(),
        revision="r2",
        inputs="i1",
        outcome=None,
        previous=during,
        now="2026-01-03T00:00:00Z",
    )
    assert dump(after) == dump(before)


def test_an_unreachable_platform_never_reported_is_pending() -> None:
    phase, doc = unreachable_status(
        "ns", "a", previous=None, reason=Reason.PALETTE_UNAVAILABLE, message="down", now="t"
    )
    assert str(phase) == "Pending"
    assert "cluster" not in doc["status"]  # type: ignore[operator]


def test_reconciler_yaml_round_trips_and_an_absent_file_records_nothing() -> None:
    doc = reconciler_document("main", "abc", [("https://b", None), ("https://a", "p1"), ("https://a", "p1")])
    recorded = parse_recorded({RECONCILER_FILE: dump(doc)})
    assert recorded.branch == "main" and recorded.revision == "abc"
    assert recorded.targets == (("https://a", "p1"), ("https://b", None))
    assert parse_recorded({}).branch is None
    assert parse_recorded({RECONCILER_FILE: b": not yaml ["}).targets == ()


def test_recorded_clusters_are_found_in_the_parsed_records_as_in_the_files() -> None:
    files = {
        "pa/mlplatforms/one.yaml": b"status:\n  cluster: {uid: c1, name: pa-one}\n",
        "pa/mlplatforms/two.yaml": b"status:\n  cluster: {uid: c2, name: pa-two}\n",
        "pa/computepools/pool.yaml": b"status:\n  phase: Pending\n",
        "pa/mlplatforms/bad.yaml": b"status: [\n",
    }
    keys = [("pa", "one"), ("pa", "two"), ("pa", "bad")]
    from_files = missing_clusters(files, keys, [("pa", "pool")], ["c1"])
    from_docs = missing_clusters({}, keys, [("pa", "pool")], ["c1"], parse_previous(files))
    assert from_files == from_docs == {"c2": "pa/two"}


def test_a_remembered_status_text_is_only_reused_for_the_same_document() -> None:
    doc = {"status": {"phase": "Running", "allocation": {"gpus": {"NVIDIA-H100": 8}}}}
    first = dump(doc)
    assert dump(copy.deepcopy(doc)) is first  # rendered once
    assert dump({"status": {"phase": "Running", "allocation": {"gpus": {"NVIDIA-H100": "8"}}}}) != first
    assert dump({1: "a"}) != dump({"1": "a"})  # type: ignore[dict-item]
    reordered = {"status": {"allocation": {"gpus": {"NVIDIA-H100": 8}}, "phase": "Running"}}
    assert dump(reordered) != first  # key order is the file's order
