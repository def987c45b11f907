"""One pass with read-only ports: what ``reconciler plan`` prints, and what a merge's pass compares with.

Every mode of ``plan`` is ``run``'s pass with read-only ports (docs/planning.md, "One pass, every
mode"): the load stage (:func:`reconciler.runtime.stages.load.load`, the carry-over of unreadable files
included) over the revision's files (:mod:`.preview_source`), the status branch's records (read once by
the caller, or none for a first start), and the plan stage
(:func:`reconciler.runtime.stages.plan.plan_pass`); only the observation differs
(:mod:`.preview_observe`: Palette, a snapshot file, or the snapshots the status branch recorded).
Nothing is applied and nothing is reported. ``Pipeline._drift`` plans the pull request's view of a
merge through :func:`preview` too, so the two are one code path.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from reconciler.model.desired import DesiredState
from reconciler.plan import Observation, Plan, merge
from reconciler.resolve import EVERY_NAMESPACE, NamespaceSelector, Routing, Target
from reconciler.runtime.facts import Planned
from reconciler.runtime.ports import Source
from reconciler.runtime.stages import load
from reconciler.runtime.stages import plan as plan_stage
from reconciler.scaling.stage import NoSamples, SampleSource
from reconciler.status.basis import ObservationKind
from reconciler.status.records import NO_RECORDS, Records

__all__ = ["Preview", "PreviewOptions", "ReadOnlyObserver", "load_revision", "preview"]


class ReadOnlyObserver(Protocol):
    """What a preview observes through: it routes as ``run`` routes and reads, never writes."""

    @property
    def kind(self) -> ObservationKind: ...

    @property
    def warnings(self) -> list[str]: ...

    def route(self, desired: DesiredState) -> Routing: ...

    def observe(
        self, desired: DesiredState, routing: Routing, records: Records
    ) -> Mapping[Target, Observation]: ...


@dataclass(frozen=True)
class PreviewOptions:
    """The pass's settings: the deletion limit and the revision's approval, the shard's namespaces,
    the moment (scaling cooldowns, waiting times) and the utilisation source (none: no decision)."""

    max_deletions: int = 1
    approved_deletions: int | None = None
    namespaces: NamespaceSelector = EVERY_NAMESPACE
    now: float = 0.0
    samples: SampleSource = field(default_factory=NoSamples)


@dataclass(frozen=True)
class Preview:
    """A preview's result: what was planned, routed and observed, the stage's plans and their merge."""

    desired: DesiredState
    routing: Routing
    observed: Mapping[Target, Observation]
    planned: Planned
    plan: Plan


def load_revision(
    source: Source, revision: str | None, records: Records = NO_RECORDS, *, history: bool = True
) -> DesiredState:
    """The load stage over a read-only source: the desired state of ``revision`` with the carry-over
    of unreadable files (from the revision ``records`` last reported, read when ``history``)."""
    return load.load(
        source,
        revision,
        previous=None,
        records=records,
        history=history,
        namespaces=EVERY_NAMESPACE,
        quiet=True,
    )


def preview(
    desired: DesiredState,
    observer: ReadOnlyObserver,
    records: Records = NO_RECORDS,
    options: PreviewOptions | None = None,
) -> Preview:
    """``run``'s pass over ``desired`` without its apply and report: route, observe, plan.
    Raises :class:`ObserveError` when a target cannot be observed."""
    opts = options or PreviewOptions()
    routing = observer.route(desired)
    observed = observer.observe(desired, routing, records)
    planned = plan_stage.plan_pass(
        desired,
        routing,
        observed,
        records,
        samples=opts.samples,
        now=opts.now,
        max_deletions=opts.max_deletions,
        namespaces=opts.namespaces,
        approved_deletions=opts.approved_deletions,
    )
    plans = planned.plans
    diagnostics = next(iter(plans.values())).diagnostics if plans else desired.diagnostics
    return Preview(desired, routing, observed, planned, merge(desired.revision, plans, diagnostics))
