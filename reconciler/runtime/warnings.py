"""What a pass says besides its stages' own lines: the summary line, metrics, health and readiness
(:class:`Health`, the one place a pass's result becomes them), one warning per rejection and blocked
prune (again only when its reason or message changes), and the scaling decisions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.logging import get_logger
from reconciler.metrics import Metrics, PassOutcome
from reconciler.model.conditions import Phase, Reason
from reconciler.model.desired import PlatformKey
from reconciler.model.pools import PoolKey
from reconciler.plan import Action, Plan, PlatformPlan, PoolPlan
from reconciler.runtime.clock import Clock
from reconciler.runtime.outcome import PassResult, summary
from reconciler.scaling.stage import ScalingOutcome

log = get_logger(component="controller")


class Warnings:
    """The warnings already given (kept between passes, so a standing rejection is said once)."""

    def __init__(self) -> None:
        self._given: set[tuple[PlatformKey, str, str]] = set()

    def platforms(self, entries: list[PlatformPlan]) -> None:
        current: set[tuple[PlatformKey, str, str]] = set()
        for p in entries:
            if p.action is Action.REJECTED or p.reason is Reason.PRUNE_BLOCKED:
                mark = (p.key, str(p.reason), p.message)
                current.add(mark)
                if mark not in self._given:
                    log.warning(
                        "prune blocked" if p.reason is Reason.PRUNE_BLOCKED else "platform rejected",
                        namespace=p.namespace,
                        name=p.name,
                        reason=str(p.reason),
                        message=p.message,
                    )
        self._given = current

    @staticmethod
    def scaling(outcomes: Mapping[PoolKey, ScalingOutcome], *, dry_run: bool) -> None:
        for (ns, name), o in outcomes.items():
            entry = o.entry
            if dry_run:
                log.info(
                    "dry run: scaling decision",
                    namespace=ns,
                    name=name,
                    decision=str(entry.decision),
                    reason=entry.reason,
                    message=entry.message,
                )
            elif o.acts:
                log.info("scaling", namespace=ns, name=name, message=entry.message)


def summary_fields(result: PassResult) -> dict[str, Any]:
    """The pass summary line: outcome, counts, writes, commit, duration, error."""
    fields: dict[str, Any] = {
        "outcome": str(result.outcome),
        "revision": result.revision,
        **summary(result.plan),
        "writes": result.writes,
        "commit": result.commit,
        "duration": round(result.duration, 3),
        "error": result.error,
    }
    if result.interrupted:
        fields["interrupted"] = True
    return fields


def deletion_notes(plans: Mapping[Any, Plan]) -> list[str]:
    """The deletion guard's sentence about an approval (``Reconciler-Allow-Deletions``), for the status
    commit (once, whichever target's plan carries it)."""
    return next(([p.deletions_note] for p in plans.values() if p.deletions_note), [])


def mig_figures(pool: PoolPlan) -> tuple[int, int]:
    """A pool's stranded MIG slices and MIG instances bound to a workload, for /metrics."""
    in_use = sum(
        1
        for gpus in pool.mig.values()
        for gpu in gpus
        for instance in gpu.get("instances") or []
        if instance.get("workload") is not None
    )
    return (pool.mig_usage.stranded if pool.mig_usage is not None else 0), in_use


class Health:
    """How passes have gone: ``/healthz`` (failing for too long) and ``/readyz`` (why not ready)."""

    def __init__(self, metrics: Metrics, clock: Clock, bound: float) -> None:
        self._metrics, self._clock, self._bound = metrics, clock, bound
        self._failing_since: float | None = None
        self.not_ready: str | None = "no pass has completed yet"

    def health(self) -> str | None:
        """None when healthy; else why: passes have failed continuously for longer than the bound."""
        since, now = self._failing_since, self._clock.monotonic()
        if since is not None and now - since > self._bound:
            return f"every pass has failed for {now - since:.0f} s (bound {self._bound:.0f} s)"
        return None

    def finish(self, result: PassResult) -> None:
        """The pass's result as metrics, health, readiness and its summary line."""
        self._metrics.observe_pass(result.outcome, result.duration)
        if result.phases:
            counts: dict[Phase | str, int] = {}
            for phase in result.phases.values():
                counts[phase] = counts.get(phase, 0) + 1
            self._metrics.set_platform_phases(counts)
        failing = result.outcome is PassOutcome.ERROR
        if not failing:
            self._failing_since = None
        elif self._failing_since is None:
            self._failing_since = self._clock.monotonic()
        if result.not_ready is not None:
            self.not_ready = result.not_ready
        elif not failing:
            self.not_ready = None
        (log.warning if failing else log.info)("pass finished", **summary_fields(result))
