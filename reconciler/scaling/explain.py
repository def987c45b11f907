"""The sentences of a scaling decision: why a wish to scale was refused (the reason and its message),
an action's status-commit line (:func:`sentence`) and the commit's body (:func:`commit_message`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol

from reconciler.model.duration import format_duration
from reconciler.model.scaling import ScalingPolicySpec
from reconciler.scaling.decision_types import CPU, Decision, Direction, PendingDemand, PoolView, ScalingReason
from reconciler.scaling.findings import Findings
from reconciler.scaling.hosts import ScalingHost
from reconciler.scaling.series import Metric, Window


def no_host(
    found: Findings,
    pool: PoolView,
    resource: str,
    room: int,
    exclude: frozenset[str],
    demand: PendingDemand | None = None,
) -> Decision:
    """A wish to add a ``resource`` host that no free host meets: the bound (``ScalingLimited``), or no
    candidate (``NoCandidateHost``); for ``demand``, also no host big (or MIG-capable) enough for it."""
    what = "host" if resource == CPU else f"{resource} host"
    unit = "cores" if resource == CPU else "GPUs"
    if demand is not None and room > 0:
        need = max(demand.gpus, demand.per_host, 1)
        big = [h for h in pool.free if h.family == resource and h.gpus >= need and h.name not in exclude]
        if not big or (demand.mig and not any(h.mig_capable for h in big)):
            kind = "MIG-capable " if demand.mig else ""
            message = (
                f"no free {kind}{what} with at least {need} GPUs to add to {pool.name}: one more "
                f"host would not let {demand.workload} be admitted"
            )
            return found.decision(Direction.NONE, ScalingReason.NO_CANDIDATE, message, resource=resource)
    if room <= 0:
        message = f"{pool.name} is at its maximum ({unit}): no {what} added"
        return found.decision(Direction.NONE, ScalingReason.LIMITED, message, resource=resource)
    candidates = [h for h in pool.free if (resource == CPU or h.family == resource) and h.name not in exclude]
    if candidates:
        message = f"every free {what} would take {pool.name} past its maximum ({room} {unit} of room)"
        return found.decision(Direction.NONE, ScalingReason.LIMITED, message, resource=resource)
    message = f"no free {what} to add to {pool.name}"
    return found.decision(Direction.NONE, ScalingReason.NO_CANDIDATE, message, resource=resource)


def cannot_remove(found: Findings, pool: PoolView, resource: str, room: int) -> Decision:
    """A wish to remove a ``resource`` host that none can grant: the minimum (``ScalingLimited``), or
    every host holds bound GPUs or is needed by the admitted workloads (``WorkloadsWouldNotFit``)."""
    if room <= 0:
        message = f"{pool.name} is at its minimum ({resource}): no host removed"
        return found.decision(Direction.NONE, ScalingReason.LIMITED, message, resource=resource)
    message = (
        f"no {resource} host of {pool.name} can go: each holds bound GPUs, would take the pool "
        "below a minimum, or its admitted workloads would no longer fit"
    )
    return found.decision(Direction.NONE, ScalingReason.WOULD_UNBIND, message, resource=resource)


def sentence(
    pool: str,
    direction: Direction,
    resource: str,
    host: ScalingHost,
    evidence: Window | PendingDemand,
    spec: ScalingPolicySpec,
    now: float,
) -> str:
    """The status commit's first line, for instance "scaled up shared-a100 by 1 NVIDIA-A100 host
    (8 GPUs): GPU utilisation 91% > 80% over 5m0s, 10 samples"."""
    verb = "scaled up" if direction is Direction.UP else "scaled down"
    if resource == CPU:
        what = f"1 host ({host.cpus} cores)"
    else:
        what = f"1 {resource} host ({host.gpus} GPU{'' if host.gpus == 1 else 's'})"
    if isinstance(evidence, PendingDemand):
        why = (
            f"{evidence.workload} pending for {format_duration(round(now - evidence.since, 3))} "
            f"(needs {evidence.gpus} more {resource} GPU{'' if evidence.gpus == 1 else 's'})"
        )
    else:
        label = "GPU" if evidence.metric is Metric.GPU else "CPU"
        sign = ">" if direction is Direction.UP else "<"
        threshold = _rule_threshold(spec, resource, direction)
        why = (
            f"{label} utilisation {evidence.mean:.0f}% {sign} {threshold:g}% over "
            f"{format_duration(evidence.duration)}, {len(evidence.values)} samples"
        )
    return f"{verb} {pool} by {what}: {why}"


def commit_message(decision: Decision, policy: str) -> str:
    """The status commit of an action: the sentence, then the policy, query, window and values used."""
    lines = [decision.message, "", f"policy: {policy}"]
    evidence = decision.evidence
    if isinstance(evidence, Window):
        lines += [
            f"query: {evidence.query}",
            f"window: {_iso(evidence.start)} .. {_iso(evidence.end)} step {format_duration(evidence.step)}",
            f"samples: {len(evidence.values)} of {evidence.expected}",
            "values: " + ", ".join(f"{v:.4g}" for v in evidence.values),
        ]
    elif isinstance(evidence, PendingDemand):
        lines.append(f"pending: {evidence.workload} since {_iso(evidence.since)}, {evidence.gpus} GPUs short")
    return "\n".join(lines) + "\n"


def _rule_threshold(spec: ScalingPolicySpec, resource: str, direction: Direction) -> float:
    rule = _rule(spec, resource)
    return rule.scale_up_threshold if direction is Direction.UP else rule.scale_down_threshold


class _RuleLike(Protocol):  # what CpuScaling and GpuScaling share
    @property
    def scale_up_threshold(self) -> float: ...
    @property
    def scale_down_threshold(self) -> float: ...


def _rule(spec: ScalingPolicySpec, resource: str) -> _RuleLike:
    if resource == CPU and spec.cpu is not None:
        return spec.cpu
    return next(r for r in spec.gpu if r.canonical == resource)


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
