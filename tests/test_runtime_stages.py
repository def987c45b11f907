"""The runtime's seams, each on its own with fake ports (milliseconds): the outcome table
(``runtime/outcome.classify``), the load stage, the apply stage and the report stage.

The end-to-end stories drive the same functions through the whole pipeline (``runtime/wiring.build``);
these say what each one does with what it is handed, and what it never does (write for a revision that
is no longer the head, write Palette in a dry run, push status without the lease).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from reconciler.fencing import Fenced
from reconciler.inventory import Inventory
from reconciler.manifests import ParsedFile, parse_file
from reconciler.metrics import PassOutcome
from reconciler.model.diagnostics import Diagnostic
from reconciler.model.observed import ManagedCluster
from reconciler.model.outcomes import Outcome
from reconciler.plan import plan_targets
from reconciler.resolve import EVERY_NAMESPACE, NamespaceSelector, Routing, Target, route
from reconciler.runtime.branch import BranchReader
from reconciler.runtime.outcome import classify
from reconciler.runtime.ports import HeadMoved
from reconciler.runtime.stages import apply, load, report
from reconciler.status.records import NO_RECORDS, read_records
from reconciler.status.report_facts import ReportFacts
from tests._allocate_support import cps, desired, inventory, machine, platform

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample-repo"
URL = "https://palette.example.com"
NOW = "2026-01-10T10:00:00Z"

# --- outcome.classify: the one table --------------------------------------------------------------


def _routing() -> Routing:
    """Platform ``p`` routed to its one target (the test Settings' project on ``URL``)."""
    return route(desired(platform("p", {"NVIDIA-H100": 4})), URL)


(ROUTED,) = _routing().targets
GONE = Target("https://gone.example.com", None)  # recorded once, routed to by nothing now


FAILED_WRITE = Outcome(ok=False, error="boom")
REFUSED_WRITE = Outcome(ok=False, error="401", unauthorized=True)


@pytest.mark.parametrize(
    ("failed", "stalled", "outcomes", "invalid", "report_error", "expected", "error"),
    [
        ({}, {}, {}, False, None, PassOutcome.SUCCESS, None),
        ({}, {}, {("ns", "p"): Outcome(ok=True)}, False, None, PassOutcome.SUCCESS, None),
        ({ROUTED: "timed out"}, {}, {}, False, None, PassOutcome.ERROR, f"{URL}: timed out"),
        # An outage of a target nothing routes to any more does not fail the pass (it is retried).
        ({GONE: "timed out"}, {}, {}, False, None, PassOutcome.SUCCESS, None),
        ({}, {ROUTED: "key refused"}, {}, False, None, PassOutcome.STALLED, f"{URL}: key refused"),
        ({}, {}, {("ns", "p"): FAILED_WRITE}, False, None, PassOutcome.ERROR, "1 Palette writes failed"),
        ({}, {}, {("ns", "p"): REFUSED_WRITE}, False, None, PassOutcome.STALLED, "1 Palette writes failed"),
        ({}, {}, {}, True, None, PassOutcome.INVALID, None),
        ({}, {}, {}, False, "status branch not written: x", PassOutcome.ERROR, "status branch not written"),
        # Precedence: transient before stalled before invalid.
        ({ROUTED: "down"}, {ROUTED: "key refused"}, {}, True, None, PassOutcome.ERROR, f"{URL}: down"),
        ({}, {ROUTED: "key refused"}, {}, True, None, PassOutcome.STALLED, "key refused"),
        ({}, {}, {("ns", "p"): FAILED_WRITE}, True, None, PassOutcome.ERROR, "first: boom"),
    ],
)
def test_classify_sorts_a_pass_into_one_outcome(
    failed: Mapping[Target, str],
    stalled: Mapping[Target, str],
    outcomes: Mapping[tuple[str, str], Outcome],
    invalid: bool,
    report_error: str | None,
    expected: PassOutcome,
    error: str | None,
) -> None:
    outcome, message = classify(
        routing=_routing(),
        failed=failed,
        stalled=stalled,
        outcomes=outcomes,
        invalid=invalid,
        report_error=report_error,
    )
    assert outcome is expected
    if error is None:
        assert message is None
    else:
        assert message is not None and error in message


def test_classify_names_every_problem_in_one_message_in_target_order() -> None:
    other = Target("https://a.example.com", "p1")
    _, message = classify(
        routing=replace(_routing(), platforms={**_routing().platforms, other: set()}),
        failed={ROUTED: "down", other: "reset"},
        stalled={},
        outcomes={("ns", "p"): FAILED_WRITE},
        invalid=False,
        report_error="status branch not written: lease",
    )
    assert message == (
        "https://a.example.com: reset; https://palette.example.com: down; "
        "1 Palette writes failed (first: boom); status branch not written: lease"
    )


# --- load: a revision's manifests -> the desired state --------------------------------------------


def _sample() -> dict[str, bytes]:
    return {
        str(p.relative_to(SAMPLE)): p.read_bytes()
        for p in sorted(SAMPLE.rglob("*"))
        if p.is_file() and p.suffix in (".yaml", ".yml")
    }


@dataclass
class FakeSource:
    """The config repository as the load stage sees it: files per revision, parsed on request."""

    revisions: dict[str, dict[str, bytes]]
    complete: bool = True
    diagnostics: Sequence[Diagnostic] = ()
    fetch_count: int = 0
    last_fetch_seconds: float = 0.0
    read: list[str] = field(default_factory=list)

    def sync(self) -> str:
        return next(reversed(self.revisions))

    def read_parsed(self, sha: str) -> Sequence[ParsedFile]:
        self.read.append(sha)
        return [parse_file(path, data) for path, data in sorted(self.revisions[sha].items())]


NOTEBOOKS = "project-a/platforms/notebooks.yaml"
NOTEBOOKS_ID = ("MLPlatform", "project-a", "notebooks")


def _load(source: FakeSource, head: str, **changes: Any) -> Any:
    options: dict[str, Any] = {
        "previous": None,
        "records": NO_RECORDS,
        "history": True,
        "namespaces": EVERY_NAMESPACE,
    }
    return load.load(source, head, **{**options, **changes})


def test_load_builds_the_desired_state_of_the_head_it_is_given() -> None:
    source = FakeSource({"r1": _sample()})
    state = _load(source, "r1")
    assert state.revision == "r1" and state.complete
    assert ("project-a", "notebooks") in {(p.metadata.namespace, p.metadata.name) for p in state.platforms()}
    assert source.read == ["r1"]


def test_a_source_that_skipped_a_manifest_makes_the_revision_incomplete() -> None:
    state = _load(FakeSource({"r1": _sample()}, complete=False), "r1")
    assert not state.complete  # (a skipped file may hold a resource: the plan prunes nothing)


def test_a_shard_keeps_only_the_namespaces_it_owns() -> None:
    state = _load(FakeSource({"r1": _sample()}), "r1", namespaces=NamespaceSelector(("project-a",)))
    assert {p.metadata.namespace for p in state.platforms()} == {"project-a"}


def test_a_file_that_stops_parsing_carries_its_resources_as_invalid_not_absent() -> None:
    broken = {**_sample(), NOTEBOOKS: b"kind: MLPlatform\nmetadata: [unclosed\n"}
    source = FakeSource({"r1": _sample(), "r2": broken})
    previous = _load(source, "r1")
    state = _load(source, "r2", previous=previous)
    assert NOTEBOOKS_ID in state.invalid
    assert NOTEBOOKS_ID not in state.resources


def test_after_a_restart_the_revision_the_status_branch_reported_says_what_was_there() -> None:
    broken = {**_sample(), NOTEBOOKS: b"kind: MLPlatform\nmetadata: [unclosed\n"}
    source = FakeSource({"r1": _sample(), "r2": broken})
    records = read_records({"reconciler.yaml": b"revision: r1\nbranch: main\n"})
    state = _load(source, "r2", records=records)
    assert NOTEBOOKS_ID in state.invalid
    assert source.read == ["r2", "r1"]
    # Without history (a plain directory) nothing earlier can be read: the head alone.
    plain = FakeSource({"r1": _sample(), "r2": broken})
    assert NOTEBOOKS_ID not in _load(plain, "r2", records=records, history=False).invalid
    assert plain.read == ["r2"]


# --- apply: never a write for a revision that is no longer the head -------------------------------


@dataclass
class SeenTarget:
    inventory: Inventory
    clusters: Sequence[ManagedCluster]
    raw_clusters: Sequence[Mapping[str, Any]] = ()

    def snapshot(self) -> bytes:
        return b'{"edgeHosts": [], "clusters": []}\n'


def _to_create() -> tuple[Any, Any]:
    """Platform ``p`` (4 GPUs) planned for creation on one target."""
    state = desired(platform("p", {"NVIDIA-H100": 4}))
    routing = route(state, URL)
    seen = SeenTarget(inventory([*cps(2), machine("a", 4)]), [])
    plans = plan_targets(state, routing, {ROUTED: seen})  # type: ignore[dict-item]
    assert any(p.mutating for plan in plans.values() for p in plan.platforms)
    return state, plans


class Calls:
    """What a stage asked of its ports, in order; any Palette client asked for is refused."""

    def __init__(self) -> None:
        self.log: list[str] = []

    def client(self, target: Target) -> Any:
        self.log.append("client")
        raise AssertionError("no Palette client may be asked for here")

    def confirm(self) -> None:
        self.log.append("confirm")

    def fence(self) -> None:
        self.log.append("fence")


def _apply(state: Any, plans: Any, calls: Calls, **changes: Any) -> Any:
    options: dict[str, Any] = {
        "client": calls.client,
        "confirm": calls.confirm,
        "stopped": lambda: False,
        "writes_allowed": lambda: True,
        "now": lambda: 1000.0,
        "dry_run": False,
        "concurrency": 4,
        "fence": calls.fence,
    }
    return apply.apply_pass(state, plans, {}, **{**options, **changes})


def test_apply_with_nothing_to_change_asks_nothing() -> None:
    calls = Calls()
    applied = _apply(desired(), {}, calls)
    assert applied.writes == {} and calls.log == []


def test_a_dry_run_writes_nothing_and_asks_no_client() -> None:
    calls = Calls()
    state, plans = _to_create()
    applied = _apply(state, plans, calls, dry_run=True)
    assert applied.writes == {} and calls.log == []


def test_a_stop_request_before_the_first_write_writes_nothing() -> None:
    calls = Calls()
    state, plans = _to_create()
    assert _apply(state, plans, calls, stopped=lambda: True).writes == {}
    assert calls.log == []


def test_the_head_is_confirmed_before_the_first_write_and_a_moved_head_writes_nothing() -> None:
    calls = Calls()
    state, plans = _to_create()

    def moved() -> None:
        calls.log.append("confirm")
        raise HeadMoved("r1", "r2")

    with pytest.raises(HeadMoved):
        _apply(state, plans, calls, confirm=moved)
    assert calls.log == ["confirm"]


def test_a_lost_lease_stops_the_pass_before_any_client_is_asked() -> None:
    calls = Calls()
    state, plans = _to_create()

    def fenced() -> None:
        calls.log.append("fence")
        raise Fenced("the lease ran out")

    with pytest.raises(Fenced):
        _apply(state, plans, calls, fence=fenced)
    assert calls.log == ["confirm", "fence"]


# --- report: the status tree pushed only when it changed, with the lease, at the head -------------


class FakeBranch:
    """The status branch in memory: each write is a commit on the tip it was planned from."""

    def __init__(self, files: Mapping[str, bytes] | None = None) -> None:
        self.files = dict(files or {})
        self.commits: list[tuple[str, str | None, Mapping[str, str]]] = []  # (message, expected, trailers)
        self._tip: str | None = "c0" if files else None

    def tip(self) -> str | None:
        return self._tip

    def read(self) -> Mapping[str, bytes]:
        return dict(self.files)

    def write(
        self,
        files: Mapping[str, bytes],
        message: str,
        trailers: Mapping[str, str],
        *,
        expected: str | None,
        may_push: Callable[[], bool] | None,
    ) -> str | None:
        assert expected == self._tip, "a compare-and-swap on the tip the pass planned from"
        if may_push is not None and not may_push():
            raise AssertionError("pushed without the lease")
        if dict(files) == self.files:
            return None
        self.files = dict(files)
        self.commits.append((message, expected, dict(trailers)))
        self._tip = f"c{len(self.commits)}"
        return self._tip

    def close(self) -> None:
        return None


def _facts(revision: str = "r1") -> ReportFacts:
    state = desired(platform("p", {"NVIDIA-H100": 4}))
    routing = route(state, URL)
    seen = SeenTarget(inventory([*cps(2), machine("a", 4)]), [])
    plans = plan_targets(state, routing, {ROUTED: seen})  # type: ignore[dict-item]
    return ReportFacts(
        desired=state,
        revision=revision,
        branch="main",
        routing=routing,
        plans=plans,
        observed={ROUTED: seen},  # type: ignore[dict-item]
        now=NOW,
    )


def _report(reader: BranchReader, calls: Calls, **changes: Any) -> report.Reported:
    options: dict[str, Any] = {
        "branches": report.Branches("main", "reconciler/status", switch=False),
        "history": None,
        "holds_lease": lambda: True,
        "confirm": calls.confirm,
        "dry_run": False,
    }
    options.update(changes)
    facts = options.pop("facts", _facts())
    return report.report_pass(facts, reader.records(), reader, **options)


def test_a_changed_status_tree_is_committed_once_at_the_head() -> None:
    branch, calls = FakeBranch(), Calls()
    reader = BranchReader(branch)
    reported = _report(reader, calls)
    assert reported.error is None and reported.written.commit == "c1"
    assert calls.log == ["confirm"]  # the head is confirmed right before the push
    assert "reconciler.yaml" in branch.files and len(branch.commits) == 1
    # The same pass again finds nothing changed: no commit, no push.
    again = _report(reader, Calls())
    assert again.written.commit is None and len(branch.commits) == 1


def test_a_dry_run_assembles_the_status_and_writes_none_of_it() -> None:
    branch, calls = FakeBranch(), Calls()
    reported = _report(BranchReader(branch), calls, dry_run=True)
    assert reported.status.record and branch.commits == [] and calls.log == []


def test_without_the_lease_nothing_is_pushed_and_the_pass_says_why() -> None:
    branch = FakeBranch()
    reported = _report(BranchReader(branch), Calls(), holds_lease=lambda: False)
    assert branch.commits == []
    assert reported.error is not None and "writer lease was lost" in reported.error


def test_a_status_branch_that_follows_another_config_branch_is_left_alone() -> None:
    branch = FakeBranch({"reconciler.yaml": b"revision: r0\nbranch: staging\n"})
    reported = _report(BranchReader(branch), Calls())
    assert branch.commits == [] and reported.written.mismatch is not None
    assert "follows the config branch 'staging'" in reported.written.mismatch
    # --switch-branch moves it, and the commit says so.
    switch = report.Branches("main", "reconciler/status", switch=True)
    moved = _report(BranchReader(branch), Calls(), branches=switch)
    assert moved.written.commit is not None
    assert "now follows main (was staging)" in branch.commits[-1][0]
