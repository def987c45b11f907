"""A pool's scaling state as its status file records it (``status.scaling``), and the size it implies.

DESIGN.md section 9: with a scaling policy the pool's current size is ``spec.gpus`` adjusted by the scaling
actions recorded in its status; section 11: the last action's time and what it did are on the status
branch, so a restart keeps the cooldown. This module is the one place that reads and writes that record
(pure: no clock; times are passed in).

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

Size rule (:func:`current_size`): ``spec.gpus`` + ``earlierActions`` + the last action unless it failed,
per family, clamped to the policy's ``gpuResourceBounds``. A failed action is never counted (its host is
released by the next plan); an action in progress is (its host is already written to Palette).
Nothing in the block changes from pass to pass unless the decision's outcome does: messages that would
(time left in a cooldown, a sample's age) are made stable here, so the status branch gets no commit per
pass (DESIGN.md section 6).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from reconciler.model.duration import format_duration, parse_duration
from reconciler.model.gpu import GpuFamily, canonical_family
from reconciler.model.scaling import ScalingPolicySpec
from reconciler.scaling.decide import CPU, Decision, Direction, LastAction, PendingDemand, ScalingReason
from reconciler.scaling.series import Availability, Window

# The plan's decision words (DESIGN.md section 8): none = no policy; hold = a policy that did not act.
DECISION_NONE, DECISION_UP, DECISION_DOWN, DECISION_HOLD = "none", "up", "down", "hold"

_TRIGGERS = ("UtilisationHigh", "UtilisationLow", "PendingDemand")


class ScalingStatusError(ValueError):
    """The recorded block is not what this module writes; the message names the field."""


@dataclass(frozen=True, slots=True)
class ActionInputs:
    """What an action's decision read: a utilisation window, or the pending workload (demand)."""

    query: str | None = None
    start: float | None = None
    end: float | None = None
    step: float | None = None
    samples: int = 0
    expected: int = 0
    values: tuple[float, ...] = ()
    pending: PendingDemand | None = None

    @classmethod
    def of(cls, evidence: Window | PendingDemand | None) -> ActionInputs | None:
        if isinstance(evidence, Window):
            return cls(
                evidence.query,
                evidence.start,
                evidence.end,
                evidence.step,
                len(evidence.values),
                evidence.expected,
                evidence.values,
            )
        if isinstance(evidence, PendingDemand):
            return cls(pending=evidence)
        return None


@dataclass(frozen=True, slots=True)
class RecordedAction:
    """One scaling action as the status file keeps it."""

    direction: Direction  # UP or DOWN
    family: str  # what scaled: a canonical GPU family, or "cpu"
    hosts: tuple[str, ...]
    gpus: int
    at: float  # when its Palette write succeeded
    cpus: int = 0
    trigger: str | None = None
    message: str = ""
    completed_at: float | None = None
    failed_at: float | None = None
    failed_message: str = ""
    inputs: ActionInputs | None = None
    gpu_family: GpuFamily | None = None  # a cpu action on a GPU host: the family of its GPUs

    @property
    def failed(self) -> bool:
        return self.failed_at is not None

    def delta(self) -> dict[GpuFamily, int]:
        """What it changed the size by (nothing once failed, nothing for a GPU-less host)."""
        family = self.gpu_family or (None if self.family == CPU else canonical_family(self.family))
        if self.failed or family is None or self.gpus == 0:
            return {}
        return {family: self.gpus if self.direction is Direction.UP else -self.gpus}

    def last_action(self) -> LastAction:
        """The decision's view of it (one host per action)."""
        return LastAction(
            self.direction,
            self.family,
            self.hosts[0] if self.hosts else "",
            self.at,
            self.completed_at,
            self.failed_at,
        )


@dataclass(frozen=True, slots=True)
class ScalingStatus:
    """``status.scaling`` of a pool (see the module docstring)."""

    policy: str
    size: Mapping[str, int] = field(default_factory=dict)
    earlier: Mapping[str, int] = field(default_factory=dict)
    last_action: RecordedAction | None = None
    decision: str = DECISION_HOLD
    reason: str = ""
    message: str = ""
    prometheus_available: bool = True
    prometheus_reason: str = "MetricsAvailable"
    prometheus_message: str = ""

    def last(self) -> LastAction | None:
        return self.last_action.last_action() if self.last_action is not None else None

    def adjustment(self) -> dict[GpuFamily, int]:
        """Net GPUs per family of every counted action (failed ones are not counted)."""
        total: dict[GpuFamily, int] = {canonical_family(f): n for f, n in self.earlier.items()}
        if self.last_action is not None:
            for family, n in self.last_action.delta().items():
                total[family] = total.get(family, 0) + n
        return {f: n for f, n in sorted(total.items()) if n}


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


# --- YAML shape ------------------------------------------------------------------------------------


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def render(status: ScalingStatus) -> dict[str, Any]:
    """The ``status.scaling`` mapping (plain data, ready for YAML)."""
    out: dict[str, Any] = {
        "policy": status.policy,
        "size": dict(sorted(status.size.items())),
        "earlierActions": dict(sorted(status.earlier.items())),
        "decision": {"decision": status.decision, "reason": status.reason, "message": status.message},
        "prometheusAvailable": {
            "status": "True" if status.prometheus_available else "False",
            "reason": status.prometheus_reason,
            "message": status.prometheus_message,
        },
    }
    if status.last_action is not None:
        out["lastAction"] = _render_action(status.last_action)
    return out


def _render_action(a: RecordedAction) -> dict[str, Any]:
    out: dict[str, Any] = {
        "direction": str(a.direction),
        "family": a.family,
        **({"gpuFamily": a.gpu_family} if a.gpu_family is not None else {}),
        "hosts": list(a.hosts),
        "gpus": a.gpus,
        "cpus": a.cpus,
    }
    if a.trigger is not None:
        out["trigger"] = a.trigger
    out["message"] = a.message
    out["at"] = iso(a.at)
    if a.completed_at is not None:
        out["completedAt"] = iso(a.completed_at)
    if a.failed_at is not None:
        out["failed"] = {"at": iso(a.failed_at), "message": a.failed_message}
    if a.inputs is not None:
        out["inputs"] = _render_inputs(a.inputs)
    return out


def _render_inputs(i: ActionInputs) -> dict[str, Any]:
    if i.pending is not None:
        p = i.pending
        pending: dict[str, Any] = {
            "workload": p.workload,
            "family": p.family,
            "gpus": p.gpus,
            "since": iso(p.since),
        }
        if p.per_host:
            pending["perHost"] = p.per_host
        if p.mig:
            pending["mig"] = True
        return {"pending": pending}
    assert i.start is not None and i.end is not None and i.step is not None
    return {
        "query": i.query,
        "window": {"start": iso(i.start), "end": iso(i.end), "step": format_duration(i.step)},
        "samples": i.samples,
        "expected": i.expected,
        "values": [_number(v) for v in i.values],
    }


def _number(v: float) -> float | int:
    return int(v) if v.is_integer() else round(v, 6)


def parse(data: Any, where: str = "status.scaling") -> ScalingStatus:
    """Read a rendered block back; anything else is :class:`ScalingStatusError` naming the field
    (``where`` prefixes it: give the status file's path, e.g. ``project-a/computepools/x.yaml:
    status.scaling``)."""
    r = _Reader(where)
    m = r.mapping(data, "")
    decision = r.mapping(m.get("decision", {}), ".decision")
    prom = r.mapping(m.get("prometheusAvailable", {}), ".prometheusAvailable")
    last = m.get("lastAction")
    status = r.text(prom.get("status", "True"), ".prometheusAvailable.status")
    if status not in ("True", "False"):
        raise r.error(".prometheusAvailable.status", 'must be "True" or "False"')
    choice = r.text(decision.get("decision", DECISION_HOLD), ".decision.decision")
    if choice not in (DECISION_NONE, DECISION_UP, DECISION_DOWN, DECISION_HOLD):
        raise r.error(".decision.decision", "must be one of none, up, down, hold")
    return ScalingStatus(
        policy=r.text(m.get("policy"), ".policy", required=True),
        size=r.counts(m.get("size", {}), ".size"),
        earlier=r.counts(m.get("earlierActions", {}), ".earlierActions", signed=True),
        last_action=None if last is None else _parse_action(r, last),
        decision=choice,
        reason=r.text(decision.get("reason", ""), ".decision.reason"),
        message=r.text(decision.get("message", ""), ".decision.message"),
        prometheus_available=status == "True",
        prometheus_reason=r.text(prom.get("reason", ""), ".prometheusAvailable.reason"),
        prometheus_message=r.text(prom.get("message", ""), ".prometheusAvailable.message"),
    )


def _parse_action(r: _Reader, data: Any) -> RecordedAction:
    p = ".lastAction"
    m = r.mapping(data, p)
    direction = r.text(m.get("direction"), f"{p}.direction", required=True)
    if direction not in ("up", "down"):
        raise r.error(f"{p}.direction", "must be up or down")
    family = r.text(m.get("family"), f"{p}.family", required=True)
    if family != CPU:
        try:
            family = canonical_family(family)
        except ValueError:
            raise r.error(f"{p}.family", "must be a GPU family or cpu") from None
    gpu_family: GpuFamily | None = None
    if m.get("gpuFamily") is not None:
        try:
            gpu_family = canonical_family(r.text(m.get("gpuFamily"), f"{p}.gpuFamily"))
        except ValueError:
            raise r.error(f"{p}.gpuFamily", "must be a GPU family") from None
    hosts = m.get("hosts")
    if not isinstance(hosts, list) or not hosts or not all(isinstance(h, str) and h for h in hosts):
        raise r.error(f"{p}.hosts", "must be a non-empty list of host names")
    trigger = m.get("trigger")
    if trigger is not None and trigger not in _TRIGGERS:
        raise r.error(f"{p}.trigger", "must be one of " + ", ".join(_TRIGGERS))
    failed = m.get("failed")
    failed_at, failed_message = None, ""
    if failed is not None:
        f = r.mapping(failed, f"{p}.failed")
        failed_at = r.time(f.get("at"), f"{p}.failed.at", required=True)
        failed_message = r.text(f.get("message", ""), f"{p}.failed.message")
    completed = r.time(m.get("completedAt"), f"{p}.completedAt")
    if completed is not None and failed_at is not None:
        raise r.error(f"{p}", "has both completedAt and failed: an action either completes or fails")
    inputs = m.get("inputs")
    return RecordedAction(
        direction=Direction(direction),
        family=family,
        hosts=tuple(hosts),
        gpus=r.count(m.get("gpus", 0), f"{p}.gpus"),
        cpus=r.count(m.get("cpus", 0), f"{p}.cpus"),
        at=r.time(m.get("at"), f"{p}.at", required=True) or 0.0,
        trigger=trigger,
        message=r.text(m.get("message", ""), f"{p}.message"),
        completed_at=completed,
        failed_at=failed_at,
        failed_message=failed_message,
        inputs=None if inputs is None else _parse_inputs(r, inputs),
        gpu_family=gpu_family,
    )


def _parse_inputs(r: _Reader, data: Any) -> ActionInputs:
    p = ".lastAction.inputs"
    m = r.mapping(data, p)
    if "pending" in m:
        q = r.mapping(m["pending"], f"{p}.pending")
        family = r.text(q.get("family"), f"{p}.pending.family", required=True)
        try:
            canonical = canonical_family(family)
        except ValueError:
            raise r.error(f"{p}.pending.family", "must be a GPU family") from None
        demand = PendingDemand(
            r.text(q.get("workload"), f"{p}.pending.workload", required=True),
            canonical,
            r.count(q.get("gpus", 0), f"{p}.pending.gpus"),
            r.time(q.get("since"), f"{p}.pending.since", required=True) or 0.0,
            r.count(q.get("perHost", 0), f"{p}.pending.perHost"),
            q.get("mig") is True,
        )
        return ActionInputs(pending=demand)
    window = r.mapping(m.get("window"), f"{p}.window")
    step_text = r.text(window.get("step"), f"{p}.window.step", required=True)
    try:
        step = parse_duration(step_text)
    except ValueError:
        raise r.error(f"{p}.window.step", "must be a Go duration such as 15s") from None
    values = m.get("values", [])
    if not isinstance(values, list) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in values
    ):
        raise r.error(f"{p}.values", "must be a list of numbers")
    return ActionInputs(
        query=r.text(m.get("query"), f"{p}.query", required=True),
        start=r.time(window.get("start"), f"{p}.window.start", required=True),
        end=r.time(window.get("end"), f"{p}.window.end", required=True),
        step=step,
        samples=r.count(m.get("samples", len(values)), f"{p}.samples"),
        expected=r.count(m.get("expected", len(values)), f"{p}.expected"),
        values=tuple(float(v) for v in values),
    )


class _Reader:
    def __init__(self, where: str) -> None:
        self.where = where

    def error(self, path: str, message: str) -> ScalingStatusError:
        return ScalingStatusError(f"{self.where}{path}: {message}")

    def mapping(self, value: Any, path: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.error(path, "must be a mapping")
        return value

    def text(self, value: Any, path: str, required: bool = False) -> str:
        if value is None and not required:
            return ""
        if not isinstance(value, str) or (required and not value):
            raise self.error(path, "must be a non-empty string" if required else "must be a string")
        return value

    def count(self, value: Any, path: str, signed: bool = False) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or (value < 0 and not signed):
            raise self.error(path, "must be an integer" if signed else "must be a whole number >= 0")
        return value

    def counts(self, value: Any, path: str, signed: bool = False) -> dict[str, int]:
        m = self.mapping(value, path)
        out: dict[str, int] = {}
        for family, n in m.items():
            try:
                key = canonical_family(str(family))
            except ValueError:
                raise self.error(f"{path}.{family}", "must be keyed by a GPU family") from None
            out[key] = self.count(n, f"{path}.{family}", signed)
        return dict(sorted(out.items()))

    def time(self, value: Any, path: str, required: bool = False) -> float | None:
        if value is None and not required:
            return None
        if isinstance(value, datetime):  # YAML loaders may turn timestamps into datetimes
            moment = value if value.tzinfo else value.replace(tzinfo=UTC)
            return moment.timestamp()
        if not isinstance(value, str):
            raise self.error(path, "must be a UTC time such as 2027-01-15T08:00:00.000Z")
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise self.error(path, "must be a UTC time such as 2027-01-15T08:00:00.000Z") from None
        if moment.tzinfo is None:
            raise self.error(path, "must carry a time zone (Z)")
        return moment.timestamp()
