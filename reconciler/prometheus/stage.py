"""The scaling stage of a pass: utilisation from Prometheus, one decision per pool with a policy.

Input: the pools with a policy (:class:`reconciler.scaling.pools.ScalingSubject`, built from the plan by
``scaling_subjects``) and ``now``. Per pool: at most one range query per metric (``observe_pool``) at the
pool's Prometheus, ``decide``, and the results the pass records: the decision, the ``status.scaling``
block and, for an action, the status commit's text. Nothing here writes to Palette or git.

Where Prometheus is: ``--prometheus URL`` (``ScalingStage(prometheus_url=...)``) for every pool, else the
``spec.prometheus.url`` of the pool's Settings, with its bearer token by reference (``{env}`` or
``{file}``, read at each pass, registered with the log redactor, never in a message). No URL, an
unreadable token, an unreachable server: the series carry the error, so the decision says
``PrometheusAvailable=False`` with the reason; there is no scale-down and demand still scales up.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from reconciler.model.desired import DesiredState
from reconciler.model.gpu import GpuFamily
from reconciler.model.pools import PoolKey, WorkloadKey
from reconciler.plan import Plan, ScalingDecision, ScalingPlan
from reconciler.prometheus.client import PrometheusClient, PrometheusError, bearer_token
from reconciler.prometheus.observe import observe_pool
from reconciler.scaling.decide import Decision, Samples, commit_message, decide
from reconciler.scaling.pools import ScalingSubject, carried_out, scaling_entry, scaling_subjects
from reconciler.scaling.queries import range_queries
from reconciler.scaling.record import ScalingStatus, after_decision, not_written, resized
from reconciler.scaling.series import Metric

WITHDRAWN = "ScalingWithdrawn"
NO_PROMETHEUS = (
    "no Prometheus configured: set spec.prometheus of the pool's Settings or run with --prometheus"
)


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

    def unwritten(self) -> ScalingStatus:
        """The block when the action's Palette write failed: nothing is recorded as done."""
        return not_written(self.previous, self.status) if self.acts else self.status


class ScalingStage:
    """One per controller (it keeps a client per Prometheus across passes); :meth:`close` at the end."""

    def __init__(
        self,
        prometheus_url: str | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        timeout: float = 5.0,
    ) -> None:
        self.prometheus_url = prometheus_url
        self._environ = environ
        self._timeout = timeout
        self._clients: dict[tuple[str, str | None], PrometheusClient] = {}

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()

    def __enter__(self) -> ScalingStage:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @property
    def queries(self) -> int:
        """Range queries sent so far (every client)."""
        return sum(c.queries for c in self._clients.values())

    def run(self, subjects: Iterable[ScalingSubject], now: float) -> dict[PoolKey, ScalingOutcome]:
        """Decide every subject at ``now`` (the pass's clock, unix seconds)."""
        return {s.key: self.decide(s, now) for s in subjects}

    def decide(self, subject: ScalingSubject, now: float) -> ScalingOutcome:
        samples, url = self._observe(subject, now)
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

    def _observe(self, subject: ScalingSubject, now: float) -> tuple[Samples, str | None]:
        settings = subject.prometheus
        url = self.prometheus_url or (settings.url if settings is not None else None)
        if url is None:
            return _failed(subject, now, NO_PROMETHEUS), None
        token: str | None = None
        if settings is not None and settings.bearer_token_secret_ref is not None:
            try:
                token = bearer_token(settings.bearer_token_secret_ref, self._environ)
            except PrometheusError as exc:
                return _failed(subject, now, str(exc)), url
        client = self._clients.get((url, token))
        if client is None:
            client = PrometheusClient(url, token, timeout=self._timeout)
            self._clients[(url, token)] = client
        return observe_pool(client, subject.policy, subject.cluster, now), url


def _failed(subject: ScalingSubject, now: float, why: str) -> Samples:
    """Samples that say why there are none (no query is sent)."""
    answers = {q.metric: q.answer(error=why) for q in range_queries(subject.policy, subject.cluster, now)}
    return Samples(gpu=answers.get(Metric.GPU), cpu=answers.get(Metric.CPU))


def evaluate(
    stage: ScalingStage,
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
        outcomes.update(stage.run((s for s in subjects if s.key not in skip), now))
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
