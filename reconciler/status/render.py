"""Status documents of one pass (pure: the clock comes in as ``now``).

DESIGN.md section 6. A status file changes only when something a person cares about changed: phase,
reason, message, cluster state, allocation or the observed revision. ``lastTransitionTime`` is carried
over from the previous status while the Ready condition keeps its status, so an idle pass renders the
same bytes and makes no commit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from reconciler.model.conditions import Phase, Reason
from reconciler.model.desired import PlatformKey
from reconciler.model.observed import cluster_name
from reconciler.model.resources import PLURALS
from reconciler.plan import Action, PlatformPlan

_READY_PHASES = {Phase.RUNNING}


@dataclass(frozen=True, slots=True)
class Outcome:
    """What applying one platform's action did (None fields: nothing was attempted)."""

    ok: bool
    cluster_uid: str | None = None
    error: str | None = None


def status_path(kind: str, namespace: str, name: str) -> str:
    return f"{namespace}/{PLURALS[kind]}/{name}.yaml"


def _phase_and_reason(
    p: PlatformPlan, outcome: Outcome | None, unavailable: str | None, unhealthy: Sequence[str]
) -> tuple[Phase, Reason, str]:
    if unavailable is not None:
        return Phase.PENDING, Reason.PALETTE_UNAVAILABLE, unavailable
    if outcome is not None and not outcome.ok:
        phase = Phase.DEGRADED if p.existing is not None else Phase.PENDING
        return phase, Reason.PALETTE_UNAVAILABLE, outcome.error or "the Palette request failed"
    reason = p.reason or Reason.PROVISIONING
    state = p.existing.state if p.existing is not None else None
    match p.action:
        case Action.CREATE | Action.REPLACE:
            return Phase.PROVISIONING, Reason.PROVISIONING, p.message
        case Action.SCALE:
            return Phase.PROVISIONING, Reason.SCALING, p.message
        case Action.DELETE:
            return Phase.DELETING, Reason.DELETING, p.message
        case Action.INVALID:
            return Phase.INVALID, reason, p.message
        case Action.SUSPENDED:
            return Phase.SUSPENDED, Reason.SUSPENDED, p.message
        case Action.REJECTED:
            return (Phase.DEGRADED if p.existing is not None else Phase.REJECTED), reason, p.message
        case _:
            if reason is Reason.PRUNE_BLOCKED:
                return Phase.DEGRADED, reason, p.message
            if state == "Failed":
                return Phase.DEGRADED, Reason.PROVISIONING, f"{p.message}: Palette reports the cluster Failed"
            if state == "Running" and unhealthy:
                hosts = ", ".join(sorted(unhealthy))
                return Phase.DEGRADED, Reason.PROVISIONED, f"{p.message}; unhealthy hosts: {hosts}"
            if state == "Running":
                return Phase.RUNNING, Reason.PROVISIONED, p.message
            if state in ("Deleting", "Deleted"):
                return Phase.DELETING, Reason.DELETING, p.message
            return Phase.PROVISIONING, Reason.PROVISIONING, p.message


def _previous_transition(previous: Mapping[str, Any] | None, status: str) -> str | None:
    if not previous:
        return None
    for cond in (previous.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "Ready" and cond.get("status") == status:
            value = cond.get("lastTransitionTime")
            return str(value) if value is not None else None
    return None


def platform_status(
    p: PlatformPlan,
    *,
    revision: str | None,
    outcome: Outcome | None,
    previous: Mapping[str, Any] | None,
    now: str,
    unavailable: str | None = None,
    unhealthy: Sequence[str] = (),
) -> tuple[Phase, dict[str, Any]]:
    """The status document of one MLPlatform, and its phase.

    ``unhealthy`` are hosts of the platform's cluster that Palette reports unhealthy or not ready: a
    Running cluster with such hosts is ``Degraded`` (its hosts are kept; nothing is moved).
    """
    phase, reason, message = _phase_and_reason(p, outcome, unavailable, unhealthy)
    ready = "True" if phase in _READY_PHASES else "False"
    status: dict[str, Any] = {
        "observedRevision": revision,
        "phase": str(phase),
        "conditions": [
            {
                "type": "Ready",
                "status": ready,
                "reason": str(reason),
                "message": message,
                "lastTransitionTime": _previous_transition(previous, ready) or now,
            }
        ],
    }
    uid = p.existing.uid if p.existing is not None else None
    state = p.existing.state if p.existing is not None else None
    if p.action is Action.CREATE and outcome is not None and outcome.ok:
        uid, state = outcome.cluster_uid, "Pending"
    if uid is not None:
        status["cluster"] = {"uid": uid, "name": cluster_name(p.namespace, p.name), "state": state}
    if p.control_plane or p.workers:
        status["allocation"] = {
            "controlPlane": sorted(p.control_plane),
            "workers": sorted(p.workers),
            "gpus": dict(sorted(p.gpus.items())),
        }
    doc = {
        "apiVersion": "palette.ai/v1alpha1",
        "kind": "MLPlatform",
        "metadata": {"namespace": p.namespace, "name": p.name},
        "status": status,
    }
    return phase, doc


def compute_document(
    namespace: str, name: str, revision: str | None, status: Mapping[str, Any]
) -> dict[str, Any]:
    return {
        "apiVersion": "palette.ai/v1alpha1",
        "kind": "Compute",
        "metadata": {"namespace": namespace, "name": name},
        "status": {"observedRevision": revision, **status},
    }


def dump(doc: Mapping[str, Any]) -> bytes:
    return yaml.safe_dump(dict(doc), sort_keys=False, default_flow_style=False, width=120).encode()


def parse_previous(files: Mapping[str, bytes]) -> dict[str, dict[str, Any]]:
    """Previous status documents by path; unreadable ones are ignored (they are rewritten)."""
    out: dict[str, dict[str, Any]] = {}
    for path, data in files.items():
        try:
            doc = yaml.load(data, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        except yaml.YAMLError:
            continue
        if isinstance(doc, dict):
            out[path] = doc
    return out


def commit_message(
    revision: str | None, plans: list[PlatformPlan], outcomes: Mapping[PlatformKey, Outcome]
) -> str:
    """One line that summarises the pass: what was created, scaled, deleted, rejected."""
    counts: dict[str, int] = {}
    failed = sum(1 for o in outcomes.values() if not o.ok)
    for p in plans:
        label = {
            Action.CREATE: "created",
            Action.SCALE: "scaled",
            Action.REPLACE: "replaced",
            Action.DELETE: "deleted",
            Action.REJECTED: "rejected",
            Action.INVALID: "invalid",
        }.get(p.action)
        if p.reason is Reason.PRUNE_BLOCKED:
            label = "prune blocked"
        if label:
            counts[label] = counts.get(label, 0) + 1
    parts = [f"{n} {label}" for label, n in counts.items()]
    if failed:
        parts.append(f"{failed} failed")
    short = (revision or "unknown")[:12]
    return f"status: {short}: " + (", ".join(parts) if parts else "status update")
