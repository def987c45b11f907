"""The scaling stage's decisions over one pass's plans (pure; docs/scaling.md, "How the controller runs
it").

Utilisation comes in through a :class:`SampleSource` (Prometheus in ``run``, ``reconciler.prometheus``;
:class:`NoSamples` for a ``plan`` without ``--prometheus``). Samples that cannot be had carry why
(:func:`unmeasured`): the pool is decided as ``run`` decides it while Prometheus does not answer (demand
still scales up, a wish at a bound is held, nothing scales down), so a plan without utilisation says what
the pass does on demand and bounds. Per pool with a policy whose cluster is Running: ``decide`` on the
samples, and the results the pass records: the decision, the ``status.scaling`` block and, for an
action, the status commit's text. Nothing here writes, queries or logs.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from reconciler.model.desired import DesiredState
from reconciler.model.gpu import GpuFamily
from reconciler.model.pools import PoolKey, WorkloadKey
from reconciler.plan import Plan, ScalingDecision, ScalingPlan
from reconciler.scaling.decide import decide
from reconciler.scaling.decision_types import Decision, Samples
from reconciler.scaling.explain import commit_message
from reconciler.scaling.pools import ScalingSubject, carried_out, scaling_entry, scaling_subjects
from reconciler.scaling.queries import range_queries
from reconciler.scaling.record import after_decision, not_written, resized
from reconciler.scaling.record_types import ScalingStatus, with_intent
from reconciler.scaling.series import Metric

WITHDRAWN = "ScalingWithdrawn"
NOT_ASKED = "plan reads no utilisation without --prometheus"


class SampleSource(Protocol):
    """Where a pool's utilisation comes from. ``None``: no samples and no decision for this pool this
    pass (its size stays what its record implies); otherwise the samples (an unreachable server is
    samples that carry the error) and the Prometheus URL they came from."""

    def samples(self, subject: ScalingSubject, now: float) -> tuple[Samples, str | None] | None: ...


def unmeasured(subject: ScalingSubject, now: float, why: str) -> Samples:
    """The pool's samples when none can be had, each series carrying ``why`` (no query is sent): what
    ``run`` decides on while Prometheus is not configured or does not answer."""
    answers = {q.metric: q.answer(error=why) for q in range_queries(subject.policy, subject.cluster, now)}
    return Samples(gpu=answers.get(Metric.GPU), cpu=answers.get(Metric.CPU))


class NoSamples:
    """A source that reads no utilisation (``plan`` without ``--prometheus``): every pool is decided on
    :func:`unmeasured` samples, as ``run`` decides it without Prometheus."""

    def samples(self, subject: ScalingSubject, now: float) -> tuple[Samples, str | None] | None:
        return unmeasured(subject, now, NOT_ASKED), None


@dataclass(frozen=True, slots=True)
class ScalingOutcome:
    """What one pass decided for one pool, and what to record.

    ``size``: the pool's size before the decision (what the pass's plan requested); ``target``: the
    size once the action is carried out (equal to ``size`` without an action), for the plan that carries
    it out (``plan_targets(..., sizes={key: target})``). ``status``: ``status.scaling`` assuming the
    action's Palette write succeeds at ``now`` (:meth:`written` restamps it, :meth:`unwritten` drops it).
    ``commit``: the status commit's message for an action or a failure (None otherwise).
    """

    key: PoolKey
    policy: str  # namespace/name of the ScalingPolicy
    decision: Decision
    size: Mapping[GpuFamily, int]
    target: Mapping[GpuFamily, int]
    status: ScalingStatus
    previous: ScalingStatus | None
    commit: str | None
    prometheus_url: str | None
    withdrawn: bool = False  # the plan for the new size would not carry the action out safely

    @property
    def entry(self) -> ScalingPlan:
        """The plan JSON's ``scaling`` block of the pool."""
        if self.withdrawn:
            return ScalingPlan(self.status.policy, ScalingDecision.HOLD, WITHDRAWN, self.status.message)
        return scaling_entry(self.status.policy, self.decision, self.status.message)

    @property
    def acts(self) -> bool:
        return self.decision.acts and not self.withdrawn

    def written(self, at: float) -> ScalingStatus:
        """The block once the action's Palette write succeeded at ``at`` (the cooldown runs from it)."""
        last = self.status.last_action
        if not self.acts or last is None:
            return self.status
        return replace(self.status, last_action=replace(last, at=at))

    def confirm(self, before: Plan, plan: Plan) -> ScalingOutcome:
        """This outcome checked against ``plan``, the plan made with :attr:`target` (``before``: the plan
        the decision was made on). When the plan carries the action out safely, the record names the
        hosts the plan adds or removes; otherwise the action is withdrawn: the outcome holds
        (``ScalingWithdrawn``, why in the message), :attr:`target` is :attr:`size` again and the record
        is the previous one (plan the pool with ``size``)."""
        if not self.acts:
            return self
        hosts, problem = carried_out(self.decision, before, plan, self.key)
        last = self.status.last_action
        if problem is None and last is not None:
            return replace(self, status=replace(self.status, last_action=replace(last, hosts=hosts)))
        kept = not_written(self.previous, self.status)
        kept = replace(kept, reason=WITHDRAWN, message=f"{self.decision.message}: withdrawn, {problem}")
        return replace(self, target=dict(self.size), status=kept, commit=None, withdrawn=True)

    def intent(self, at: float) -> ScalingStatus | None:
        """The block to record before the action's Palette write at ``at`` (write-ahead: the block as
        it was, with the intended action, its size before and after); None when nothing acts."""
        last = self.status.last_action
        if not self.acts or last is None:
            return None
        return with_intent(self.previous, self.status.policy, last, self.size, self.target, at)

    def unwritten(self) -> ScalingStatus:
        """The block when the action's Palette write failed: nothing is recorded as done."""
        return not_written(self.previous, self.status) if self.acts else self.status


def decide_subject(subject: ScalingSubject, samples: Samples, url: str | None, now: float) -> ScalingOutcome:
    """One pool's decision on ``samples`` at ``now`` (unix seconds), and what the pass records."""
    size = subject.size()
    previous = subject.previous
    decision = decide(
        subject.policy,
        samples,
        subject.view,
        previous.last() if previous is not None else None,
        subject.pending,
        now,
        subject.fits_without,
    )
    status = after_decision(
        previous, subject.policy_name, decision, size, now, subject.policy.cooldown_duration
    )
    policy = f"{subject.key[0]}/{subject.policy_name}"
    commit = None
    if decision.acts:
        commit = commit_message(decision, policy)
    elif decision.abort is not None:
        commit = f"{decision.message}\n\npolicy: {policy}\n"
    return ScalingOutcome(
        key=subject.key,
        policy=policy,
        decision=decision,
        size=size,
        target=resized(size, decision) if decision.acts else dict(size),
        status=status,
        previous=previous,
        commit=commit,
        prometheus_url=url,
    )


def decide_subjects(
    source: SampleSource, subjects: Iterable[ScalingSubject], now: float
) -> dict[PoolKey, ScalingOutcome]:
    """Every subject the source has samples for, decided at ``now``."""
    out: dict[PoolKey, ScalingOutcome] = {}
    for subject in subjects:
        found = source.samples(subject, now)
        if found is not None:
            out[subject.key] = decide_subject(subject, found[0], found[1], now)
    return out


def evaluate(
    source: SampleSource,
    desired: DesiredState,
    plans: Iterable[Plan],
    now: float,
    recorded: Mapping[PoolKey, ScalingStatus | None] | None = None,
    pending_since: Mapping[WorkloadKey, float] | None = None,
    skip: Collection[PoolKey] = (),
) -> dict[PoolKey, ScalingOutcome]:
    """The scaling stage over a pass's plans (one per Palette target, as ``plan_targets`` returns them):
    subjects from each plan, one decision per pool with a policy whose cluster is Running. ``skip``:
    pools not to decide this pass (their recorded block could not be read, say)."""
    outcomes: dict[PoolKey, ScalingOutcome] = {}
    for plan in plans:
        subjects = scaling_subjects(desired, plan, recorded or {}, now, pending_since)
        outcomes.update(decide_subjects(source, (s for s in subjects if s.key not in skip), now))
    return dict(sorted(outcomes.items()))


def confirm(
    outcomes: Mapping[PoolKey, ScalingOutcome], before: Mapping[Any, Plan], after: Mapping[Any, Plan]
) -> dict[PoolKey, ScalingOutcome]:
    """:meth:`ScalingOutcome.confirm` for every outcome, against the plans of its pool's Palette target
    (``before``: the plans the decisions were made on, ``after``: the plans made with the targets; both
    keyed by target as ``plan_targets`` returns them). An acting outcome whose pool is in no plan pair
    is withdrawn."""
    out: dict[PoolKey, ScalingOutcome] = {}
    for key, outcome in outcomes.items():
        pair = next(
            ((before[t], after[t]) for t in before if t in after and before[t].get_pool(*key) is not None),
            None,
        )
        if pair is None:
            empty = Plan(None, [], [])
            out[key] = outcome.confirm(empty, empty)
        else:
            out[key] = outcome.confirm(*pair)
    return out
