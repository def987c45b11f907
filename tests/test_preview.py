"""The one entry point of every plan mode (``reconciler/runtime/preview.py``) with fake ports: the load
stage over files in memory (its carry-over included), a fixed observation, the plan stage (pure, fast)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.plan import Observed, merge, plan_targets
from reconciler.plan_report import changes_only, held, render_markdown, render_text
from reconciler.runtime.preview import PreviewOptions, load_revision, preview
from reconciler.runtime.preview_observe import ObserveError
from reconciler.runtime.preview_source import RevisionFiles
from reconciler.runtime.stages.plan import snapshot_observation
from reconciler.snapshots import load_read_snapshot
from reconciler.status.basis import Basis
from reconciler.status.records import Records
from reconciler.status.render import Recorded
from tests._allocate_support import cluster
from tests._preview_support import FixedObserver

SAMPLE = Path(__file__).resolve().parent.parent / "sample-repo"
URL = "inventory:sample"
NOTEBOOKS = "project-a/platforms/notebooks.yaml"


def _files() -> list[tuple[str, bytes]]:
    return sorted((str(p.relative_to(SAMPLE)), p.read_bytes()) for p in SAMPLE.rglob("*.yaml") if p.is_file())


def _observer() -> FixedObserver:
    seen = snapshot_observation(load_read_snapshot(SAMPLE / "inventory.json"))
    observer = FixedObserver(URL)
    targets = observer.route(load_revision(RevisionFiles("r1", _files()), "r1")).targets
    observer.observed = {t: seen for t in targets}
    return observer


def test_preview_is_the_plan_stage_over_what_the_observer_shows() -> None:
    desired = load_revision(RevisionFiles("r1", _files()), "r1")
    observer = _observer()
    made = preview(desired, observer)
    assert observer.calls == 1
    expected = plan_targets(desired, made.routing, made.observed, max_deletions=1)
    assert made.plan.to_json() == merge("r1", expected, made.plan.diagnostics).to_json()
    assert made.plan.revision == "r1" and made.plan.platforms


def test_an_unreadable_file_is_carried_from_the_revision_last_reported() -> None:
    """As ``run`` after a restart: the file that stops parsing keeps its platform, Invalid, read from
    the revision the status branch last reported (through the source's history)."""
    before = _files()
    broken = [(path, b"kind: [\n" if path == NOTEBOOKS else data) for path, data in before]
    records = Records(recorded=Recorded(branch="main", revision="r1"))
    source = RevisionFiles("r2", broken, earlier=lambda sha: before if sha == "r1" else [])
    desired = load_revision(source, "r2", records)
    assert ("MLPlatform", "project-a", "notebooks") in desired.invalid
    without_history = load_revision(RevisionFiles("r2", broken), "r2", records, history=False)
    assert ("MLPlatform", "project-a", "notebooks") not in without_history.invalid
    assert not without_history.complete  # an unreadable file: nothing is pruned either way


def test_an_observer_that_cannot_read_a_target_is_an_error_of_the_preview() -> None:
    class Failing(FixedObserver):
        def observe(self, *_args: object) -> dict[object, object]:  # type: ignore[override]
            raise ObserveError("Palette at http://x: unreachable")

    desired = load_revision(RevisionFiles("r1", _files()), "r1")
    with pytest.raises(ObserveError, match="unreachable"):
        preview(desired, Failing(URL))


def test_a_held_deletion_stays_under_changes_only_with_its_trailer() -> None:
    """Deleting two platforms (one more than --max-deletions 1): both are held, listed first in
    markdown under Held with the exact trailer line, and the text names the fix on each entry."""
    observer = _observer()
    first = preview(load_revision(RevisionFiles("r1", _files()), "r1"), observer)
    created = {p.key: p for p in first.plan.platforms}
    assert created  # nothing runs yet in the snapshot: run the sample's clusters as planned
    kept = [(p, d) for p, d in _files() if p not in (NOTEBOOKS, "project-a/platforms/cpu-sandbox.yaml")]
    desired = load_revision(RevisionFiles("r2", kept), "r2")
    clusters = [cluster(name, p.control_plane, p.workers, ns=ns) for (ns, name), p in created.items()]
    assert observer.observed is not None
    seen = next(iter(observer.observed.values()))
    observer.observed = {t: Observed(seen.inventory, clusters) for t in observer.observed}
    made = preview(desired, observer, options=PreviewOptions(max_deletions=1))
    document = changes_only(made.plan.to_json())
    blocked = [p for p in document["platforms"] if p["reason"] == "PruneBlocked"]
    assert {p["name"] for p in blocked} == {"notebooks", "cpu-sandbox"}
    assert "Reconciler-Allow-Deletions: 2" in blocked[0]["message"]
    assert [e["name"] for _s, e, _fix in held(document)] == ["cpu-sandbox", "notebooks"]
    basis = Basis("r2" * 20, None, None, "inventory")
    markdown = render_markdown(document, {}, basis=basis.line())
    assert markdown.splitlines()[0] == basis.line()
    assert markdown.index("#### Held") < markdown.index("<details")
    assert "    Reconciler-Allow-Deletions: 2\n" in markdown
    text = render_text(document, {}, basis=basis.line())
    assert "[held: approve the 2 removals with the commit trailer `Reconciler-Allow-Deletions: 2`" in text
