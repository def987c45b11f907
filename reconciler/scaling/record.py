"""A pool's scaling state as its status file records it (``status.scaling``), and the size it implies.

With a scaling policy the pool's current size is ``spec.gpus`` adjusted by the scaling actions recorded
in its status; the last action's time and what it did are on the status branch, so a restart keeps the
cooldown (docs/scaling.md). This module, with its types (``record_types``) and YAML shape
(``record_yaml``), is the one place that reads and writes that record (pure: no clock; times are passed
in); here: the size it implies and the transitions of a pass. Every name is importable from here.

The block (camelCase, as every status file)::

    scaling:
      policy: gpu-autoscale
      size: {NVIDIA-A100: 24}            # the current size, GPUs per family (what the plan requests)
      earlierActions: {NVIDIA-A100: 8}   # net GPUs of the counted actions before lastAction
      decision: {decision: up, reason: ScaledUp, message: "scaled up shared-a100 by 1 ..."}
      prometheusAvailable: {status: "True", reason: MetricsAvailable, message: "metrics available"}
      lastAction:
        direction: up                    # up | down
        family: NVIDIA-A100              # what scaled: a canonical GPU family, or cpu
        gpuFamily: NVIDIA-A100           # (a cpu action on a GPU host only) the family of its GPUs
        hosts: [a100-3]
        gpus: 8                          # GPUs of those hosts (what the action changed the size by)
        cpus: 64
        trigger: UtilisationHigh         # UtilisationHigh | UtilisationLow | PendingDemand
        message: "scaled up shared-a100 by 1 NVIDIA-A100 host (8 GPUs): GPU utilisation 91% > 80% ..."
        at: "2027-01-15T08:00:00.000Z"   # its Palette write succeeded (the cooldown runs from here)
        completedAt: "2027-01-15T08:04:10.000Z"   # or failed: {at, message}; neither while in progress
        inputs:                          # what the decision used (a demand action: pending instead)
          query: 100 * avg(DCGM_FI_PROF_GR_ENGINE_ACTIVE{cluster="project-a-shared-a100"})
          window: {start: "...", end: "...", step: 15s}
          samples: 21
          expected: 21
          values: [91, 92, ...]
      intent:                            # write-ahead: only between an action's intent and its record
        action: up                       # the action's fields as in lastAction (direction as action)
        family: NVIDIA-A100
        hosts: [a100-4]
        gpus: 8
        from: {NVIDIA-A100: 24}          # the size before the action, and the size it makes
        to: {NVIDIA-A100: 32}
        at: "2027-01-15T08:30:00.000Z"   # when the intent was recorded, before the Palette write

Write-ahead (:class:`Intent`): an action is recorded as intended, in a commit of its own, before its
Palette write; the normal status commit after the write replaces the intent with ``lastAction``. A block
read back with an intent still in it (the writer died, or lost its lease, between the two commits) is
read as if the action were done (:func:`adopt`): the intended action is the last action, the pool's
size is its ``to`` and the cooldown runs from its ``at``, so a successor finishes or confirms the
action instead of undoing it, and does not act again within the cooldown.

Size rule (:func:`current_size`): ``spec.gpus`` + ``earlierActions`` + the last action unless it failed,
per family, clamped to the policy's ``gpuResourceBounds``. A failed action is never counted (its host is
released by the next plan); an action in progress is (its host is already written to Palette).
Nothing in the block changes from pass to pass unless the decision's outcome does: messages that would
(time left in a cooldown, a sample's age) are made stable here, so the status branch gets no commit per
pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from reconciler.model.duration import parse_duration
from reconciler.model.gpu import GpuFamily, canonical_family
from reconciler.model.scaling import ScalingPolicySpec
from reconciler.scaling.decision_types import CPU, Decision, Direction, ScalingReason
from reconciler.scaling.record_types import (
    DECISION_DOWN,
    DECISION_HOLD,
    DECISION_UP,
    ActionInputs,
    RecordedAction,
    ScalingStatus,
)
from reconciler.scaling.record_yaml import iso
from reconciler.scaling.series import Availability

# The record's types (record_types) and its YAML shape (record_yaml) live in their own modules; every
# name is importable from here.
__all__ = [
    "after_decision",
    "current_size",
    "not_written",
    "plan_decision",
    "resized",
    "settle",
    "spec_size",
    "stable_message",
]

# --- size ------------------------------------------------------------------------------------------


def spec_size(gpus: Iterable[Any]) -> dict[GpuFamily, int]:
    """``spec.gpus`` (``[{family, count}]`` models) as GPUs per canonical family."""
    out: dict[GpuFamily, int] = {}
    for request in gpus:
        family = canonical_family(request.family)
        out[family] = out.get(family, 0) + int(request.count)
    return dict(sorted(out.items()))


def current_size(
    spec_gpus: Mapping[GpuFamily, int], policy: ScalingPolicySpec, recorded: ScalingStatus | None
) -> dict[GpuFamily, int]:
    """The pool's size now: ``spec.gpus`` adjusted by the recorded actions, clamped to the policy's bounds.

    A family the policy bounds but ``spec.gpus`` does not name starts at 0 (then its minimum applies)."""
    size = {canonical_family(f): n for f, n in spec_gpus.items()}
    for family, n in (recorded.adjustment() if recorded is not None else {}).items():
        size[family] = size.get(family, 0) + n
    for bound in policy.gpu_resource_bounds:
        family = bound.canonical
        size[family] = min(max(size.get(family, 0), bound.min_gpu_count), bound.max_gpu_count)
    return {f: n for f, n in sorted(size.items()) if n > 0}


def resized(size: Mapping[GpuFamily, int], decision: Decision) -> dict[GpuFamily, int]:
    """The size once an acting decision's host has joined or left (for the plan that carries it out)."""
    out = dict(size)
    host = decision.host
    if decision.acts and host is not None and host.family is not None and host.gpus:
        sign = 1 if decision.direction is Direction.UP else -1
        out[host.family] = out.get(host.family, 0) + sign * host.gpus
    return {f: n for f, n in sorted(out.items()) if n > 0}


# --- transitions (pure: the caller passes the time) ------------------------------------------------


def settle(
    recorded: ScalingStatus | None, workers: Iterable[str], running: bool, now: float
) -> ScalingStatus | None:
    """Mark an open last action complete once its hosts are in (up) or out of (down) the pool's
    cluster and the cluster is Running; otherwise unchanged."""
    if recorded is None or recorded.last_action is None:
        return recorded
    action = recorded.last_action
    if action.completed_at is not None or action.failed or not running:
        return recorded
    members = set(workers)
    joined = all(h in members for h in action.hosts)
    left = not any(h in members for h in action.hosts)
    if (action.direction is Direction.UP and joined) or (action.direction is Direction.DOWN and left):
        return replace(recorded, last_action=replace(action, completed_at=now))
    return recorded


def after_decision(
    previous: ScalingStatus | None,
    policy: str,
    decision: Decision,
    size: Mapping[GpuFamily, int],
    now: float,
    cooldown: str | None = None,
) -> ScalingStatus:
    """The block after this pass's decision, its action (if any) written to Palette at ``now``.

    ``size`` is the size before the action (:func:`current_size`); an acting decision's action becomes
    ``lastAction`` (the one before it folds into ``earlierActions``) and the size includes it. A
    decision that aborts the open action records it failed (its GPUs stop counting). ``cooldown``: the
    policy's ``cooldownDuration``, to say until when a cooldown runs (a stable message).
    """
    base = previous if previous is not None and previous.policy == policy else _fresh(previous, policy)
    last = base.last_action
    earlier = dict(base.earlier)
    if decision.abort is not None and last is not None and last.completed_at is None:
        last = replace(last, failed_at=now, failed_message=decision.message)
    new_size = dict(size)
    if decision.acts and decision.host is not None:
        if last is not None:
            for family, n in last.delta().items():
                earlier[family] = earlier.get(family, 0) + n
        last = _action(decision, now)
        new_size = resized(size, decision)
    elif decision.abort is not None and base.last_action is not None:
        for family, n in base.last_action.delta().items():  # the failed action stops counting
            new_size[family] = new_size.get(family, 0) - n
        new_size = {f: n for f, n in new_size.items() if n > 0}
    return ScalingStatus(
        policy=policy,
        size=dict(sorted(new_size.items())),
        earlier={f: n for f, n in sorted(earlier.items()) if n},
        last_action=last,
        decision=plan_decision(decision),
        reason=str(decision.reason),
        message=stable_message(decision, base, cooldown),
        prometheus_available=decision.prometheus_available,
        prometheus_reason="MetricsAvailable" if decision.prometheus_available else "PrometheusUnavailable",
        prometheus_message=_stable_prometheus(decision),
    )


def not_written(previous: ScalingStatus | None, proposed: ScalingStatus) -> ScalingStatus:
    """The block when an acting decision's Palette write failed: the action is not recorded (no
    cooldown starts, the size is unchanged); the next pass decides again."""
    if previous is None:
        return replace(proposed, last_action=None, earlier={}, size={}, reason="ScalingNotWritten")
    return replace(
        previous,
        decision=DECISION_HOLD,
        reason="ScalingNotWritten",
        message="the scaling action's Palette write failed; the next pass decides again",
    )


def _fresh(previous: ScalingStatus | None, policy: str) -> ScalingStatus:
    """A new policy keeps the previous actions' record (the hosts stay), under its own name."""
    if previous is None:
        return ScalingStatus(policy)
    return replace(previous, policy=policy)


def _action(decision: Decision, now: float) -> RecordedAction:
    host = decision.host
    assert host is not None
    return RecordedAction(
        direction=decision.direction,
        family=decision.resource or (host.family or CPU),
        hosts=(host.name,),
        gpus=host.gpus if host.family is not None else 0,
        gpu_family=host.family if decision.resource == CPU and host.gpus else None,
        cpus=host.cpus,
        at=now,
        trigger=str(decision.trigger) if decision.trigger is not None else None,
        message=decision.message,
        inputs=ActionInputs.of(decision.evidence),
    )


def plan_decision(decision: Decision) -> str:
    """``up``, ``down`` or ``hold`` (a policy that did not act this pass)."""
    if decision.direction is Direction.UP:
        return DECISION_UP
    if decision.direction is Direction.DOWN:
        return DECISION_DOWN
    return DECISION_HOLD


def stable_message(decision: Decision, previous: ScalingStatus | None, cooldown: str | None) -> str:
    """The decision's message without what changes every pass (a cooldown's time left, a sample's age)."""
    if decision.reason is ScalingReason.COOLDOWN and previous is not None and previous.last_action:
        last = previous.last_action
        since = max(last.at, last.failed_at or last.at)
        if cooldown is not None:
            return f"cooldown until {iso(since + parse_duration(cooldown))}"
        return f"cooldown since the last action at {iso(since)}"
    if not decision.prometheus_available and not decision.acts and decision.reason is ScalingReason.STEADY:
        return f"no scale-down: {_stable_prometheus(decision)}"
    return decision.message


def _stable_prometheus(decision: Decision) -> str:
    if decision.metrics is Availability.STALE:
        return "metrics are stale: no value at the latest step"
    return decision.prometheus_message
