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
    unauthorized: bool = False  # Palette refused the key (401/403): the target stalls


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


def _ready_of(phase: object) -> str:
    return "True" if phase in _READY_PHASES else "False"


def _previous_transition(previous: Mapping[str, Any] | None, status: str) -> str | None:
    """When the Ready condition last took ``status``. An ``Unknown`` Ready (Palette was unreachable)
    is transparent: it kept the phase and the time of the condition before the outage, so a platform
    whose Palette comes back renders exactly as it did before."""
    if not previous:
        return None
    body = previous.get("status") or {}
    for cond in body.get("conditions") or []:
        if not isinstance(cond, dict) or cond.get("type") != "Ready":
            continue
        held = cond.get("status")
        if held == "Unknown":
            held = _ready_of(body.get("phase"))
        if held == status:
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
    ready = _ready_of(phase)
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


PALETTE_REACHABLE = "PaletteReachable"


def unreachable_status(
    namespace: str,
    name: str,
    *,
    previous: Mapping[str, Any] | None,
    reason: Reason,
    message: str,
    now: str,
) -> tuple[Phase, dict[str, Any]]:
    """The status of an MLPlatform whose Palette could not be read (DESIGN.md section 6).

    It never loses facts: the last reported phase, cluster, allocation and observed revision are kept;
    Ready becomes ``Unknown`` (keeping its last transition time, see :func:`_previous_transition`) and
    ``PaletteReachable=False`` says why. Without a previous status the phase is ``Pending``.
    """
    before = dict((previous or {}).get("status") or {})
    try:
        phase = Phase(str(before.get("phase")))
    except ValueError:
        phase = Phase.PENDING
    since = _previous_transition(previous, _ready_of(phase)) or now
    unreachable_since = now
    for cond in before.get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == PALETTE_REACHABLE and cond.get("status") == "False":
            unreachable_since = str(cond.get("lastTransitionTime") or now)
    status: dict[str, Any] = {"observedRevision": before.get("observedRevision"), "phase": str(phase)}
    status["conditions"] = [
        {
            "type": "Ready",
            "status": "Unknown",
            "reason": str(reason),
            "message": message,
            "lastTransitionTime": since,
        },
        {
            "type": PALETTE_REACHABLE,
            "status": "False",
            "reason": str(reason),
            "message": message,
            "lastTransitionTime": unreachable_since,
        },
    ]
    for key in ("cluster", "allocation"):
        if key in before:
            status[key] = before[key]
    doc = {
        "apiVersion": "palette.ai/v1alpha1",
        "kind": "MLPlatform",
        "metadata": {"namespace": namespace, "name": name},
        "status": status,
    }
    return phase, doc


RECONCILER_FILE = "reconciler.yaml"


@dataclass(frozen=True, slots=True)
class Recorded:
    """What the status branch's ``reconciler.yaml`` says: the config branch it follows, the revision
    last reported, and every Palette target (url, project uid) that may hold a managed cluster."""

    branch: str | None = None
    revision: str | None = None
    targets: tuple[tuple[str, str | None], ...] = ()


def reconciler_document(
    branch: str, revision: str | None, targets: Sequence[tuple[str, str | None]]
) -> dict[str, Any]:
    return {
        "branch": branch,
        "revision": revision,
        "targets": [
            {"url": url, "projectUid": project} for url, project in sorted(set(targets), key=_target_key)
        ],
    }


def _target_key(target: tuple[str, str | None]) -> tuple[str, str]:
    return (target[0], target[1] or "")


def parse_recorded(files: Mapping[str, bytes]) -> Recorded:
    """``reconciler.yaml`` of a status tree; an absent or unreadable file records nothing."""
    data = files.get(RECONCILER_FILE)
    doc = parse_previous({RECONCILER_FILE: data}).get(RECONCILER_FILE) if data is not None else None
    if not doc:
        return Recorded()
    targets: list[tuple[str, str | None]] = []
    for item in doc.get("targets") or []:
        if isinstance(item, dict) and isinstance(item.get("url"), str):
            project = item.get("projectUid")
            targets.append((item["url"], str(project) if project is not None else None))
    branch, revision = doc.get("branch"), doc.get("revision")
    return Recorded(
        branch=str(branch) if branch is not None else None,
        revision=str(revision) if revision is not None else None,
        targets=tuple(targets),
    )


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
    revision: str | None,
    plans: list[PlatformPlan],
    outcomes: Mapping[PlatformKey, Outcome],
    notes: Sequence[str] = (),
) -> str:
    """One line that summarises the pass (what was created, scaled, deleted, rejected), then ``notes``
    (such as a rollback of the config branch) as the body."""
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
    subject = f"status: {short}: " + (", ".join(parts) if parts else "status update")
    return subject + ("\n\n" + "\n".join(notes) if notes else "")
