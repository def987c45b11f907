"""The YAML shape of a pool's scaling record (``status.scaling``, see ``scaling.record``): ``render`` writes
the block, ``parse`` reads it back (an intent in it adopted) with errors naming the field. Pure;
``scaling.record`` re-exports every name."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from reconciler.model.duration import format_duration, parse_duration
from reconciler.model.gpu import GpuFamily, canonical_family
from reconciler.scaling.decision_types import CPU, Direction, PendingDemand
from reconciler.scaling.record_types import (
    _TRIGGERS,
    DECISION_DOWN,
    DECISION_HOLD,
    DECISION_NONE,
    DECISION_UP,
    ActionInputs,
    Intent,
    RecordedAction,
    ScalingStatus,
    ScalingStatusError,
    adopt,
)

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
    if status.intent is not None:
        out["intent"] = _render_intent(status.intent)
    return out


def _render_intent(intent: Intent) -> dict[str, Any]:
    action = _render_action(intent.action)
    direction = action.pop("direction")
    return {
        "action": direction,
        **action,
        "from": dict(sorted(intent.before.items())),
        "to": dict(sorted(intent.after.items())),
    }


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
    """Read a rendered block back, an intent in it adopted (:func:`adopt`); anything else is
    :class:`ScalingStatusError` naming the field (``where`` prefixes it: give the status file's path,
    e.g. ``project-a/computepools/x.yaml: status.scaling``)."""
    return adopt(parse_recorded(data, where))


def parse_recorded(data: Any, where: str = "status.scaling") -> ScalingStatus:
    """Read a rendered block back as it is written (an intent kept as an intent)."""
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
        intent=None if m.get("intent") is None else _parse_intent(r, m["intent"]),
    )


def _parse_intent(r: _Reader, data: Any) -> Intent:
    p = ".intent"
    m = dict(r.mapping(data, p))
    fields = {k: v for k, v in m.items() if k not in ("action", "from", "to")}
    action = _parse_action(r, {"direction": m.get("action"), **fields}, p)
    if action.completed_at is not None or action.failed:
        raise r.error(p, "an intent is neither completed nor failed")
    return Intent(action, r.counts(m.get("from", {}), f"{p}.from"), r.counts(m.get("to", {}), f"{p}.to"))


def _parse_action(r: _Reader, data: Any, p: str = ".lastAction") -> RecordedAction:
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
        inputs=None if inputs is None else _parse_inputs(r, inputs, f"{p}.inputs"),
        gpu_family=gpu_family,
    )


def _parse_inputs(r: _Reader, data: Any, p: str) -> ActionInputs:
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
