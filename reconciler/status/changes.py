"""What a status commit changed, and its message (pure: two status trees in, text out).

docs/status-branch.md. The diff of the status tree (the files before -> after) is the one source of
truth for "what changed": a status file differs exactly when something about its own resource did.
The message names the changes:

- subject: one resource by name (``project-a/clearml-prod: Provisioning -> Running``); two or three by
  name when they fit on one line; more counted by what happened (``12 created, 1 scaled, 2 rejected``);
- body: the notes of the pass (a rollback of the config branch, a branch switch), then one line per
  changed resource: kind, namespace/name, phase before -> after, Ready reason, hosts added/removed and the
  observed revision when it moved; a pool or workload line also says why (the Ready message), and a
  pool's line what moved in it: workloads admitted or gone, GPUs admitted per family, the scaling
  decision, the hosts whose MIG layout changed;
- trailers (:func:`source_trailers`): the config commit's sha, subject and author.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from reconciler.model.resources import PLURALS
from reconciler.status.render import parse_recorded
from reconciler.status.view import host_label, host_names

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_KINDS = {plural: kind for kind, plural in PLURALS.items()}
NEW = "new"
REMOVED = "removed"
MAX_SUBJECT = 100
"""A subject listing resources by name falls back to counts beyond this many characters."""
MAX_NAMED = 3
"""Up to this many changed resources are named in the subject; more are counted."""
MAX_HOSTS_LISTED = 10
"""Hosts named per body line and direction; the rest are counted."""
_REJECTIONS = {"GPULimitExceeded", "InsufficientCompute", "UnsupportedMode", "ReplaceBlocked"}
_UNREACHABLE = {"PaletteUnavailable", "PaletteUnauthorized"}
# Labels of the counted subject, in the order they are listed.
_LABELS = (
    "created",
    "scaled",
    "provisioning",
    "running",
    "degraded",
    "rejected",
    "invalid",
    "suspended",
    "deleting",
    "removed",
    "prune blocked",
    "failed",
    "unreachable",
    "updated",
)


@dataclass(frozen=True, slots=True)
class Change:
    """One status file that differs between two trees. ``before``/``after`` are its status mappings
    (None: the file is absent on that side)."""

    path: str
    kind: str
    namespace: str
    name: str
    before: Mapping[str, Any] | None
    after: Mapping[str, Any] | None

    @property
    def key(self) -> str:
        """``namespace/name``; other kinds than MLPlatform say theirs (a Compute may share a name)."""
        base = f"{self.namespace}/{self.name}"
        return base if self.kind == "MLPlatform" else f"{base} ({self.kind})"

    @property
    def phase_before(self) -> str | None:
        return _str(self.before.get("phase")) if self.before is not None else None

    @property
    def phase_after(self) -> str | None:
        return _str(self.after.get("phase")) if self.after is not None else None

    @property
    def reason_before(self) -> str | None:
        return _ready(self.before).get("reason") if self.before is not None else None

    @property
    def reason_after(self) -> str | None:
        return _ready(self.after).get("reason") if self.after is not None else None

    @property
    def hosts_added(self) -> list[str]:
        return sorted(_hosts(self.after) - _hosts(self.before))

    @property
    def hosts_removed(self) -> list[str]:
        return sorted(_hosts(self.before) - _hosts(self.after))

    @property
    def revision_moved(self) -> str | None:
        """The new ``observedRevision`` when it differs from the one before (the inputs changed)."""
        after = _str(self.after.get("observedRevision")) if self.after is not None else None
        before = _str(self.before.get("observedRevision")) if self.before is not None else None
        return after if after is not None and after != before else None


def _str(value: object) -> str | None:
    return None if value is None else str(value)


def _ready(status: Mapping[str, Any]) -> dict[str, str]:
    for cond in status.get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == "Ready":
            return {str(k): str(v) for k, v in cond.items() if v is not None}
    return {}


def _has_condition(status: Mapping[str, Any] | None, kind: str) -> bool:
    if status is None:
        return False
    return any(isinstance(c, Mapping) and c.get("type") == kind for c in status.get("conditions") or [])


def _hosts(status: Mapping[str, Any] | None) -> set[str]:
    """Hosts a status holds: its allocation (platforms, pools), else the machines a Compute lists as
    available."""
    if status is None:
        return set()
    found: set[str] = set()
    allocation = status.get("allocation")
    if isinstance(allocation, Mapping):
        for role in ("controlPlane", "workers"):
            found.update(str(h) for h in allocation.get(role) or [])
    for key in ("availableControlPlaneCompute", "availableWorkerCompute"):
        for entry in status.get(key) or []:
            if isinstance(entry, Mapping):
                found.update(str(h) for h in entry.get("machines") or [])
    return found


def _status_of(data: bytes | None) -> Mapping[str, Any] | None:
    if data is None:
        return None
    try:
        doc = yaml.load(data, Loader=_LOADER)
    except yaml.YAMLError:
        return {}
    status = doc.get("status") if isinstance(doc, Mapping) else None
    return status if isinstance(status, Mapping) else {}


def resource_path(path: str) -> tuple[str, str, str] | None:
    """(kind, namespace, name) of a per-resource status file path, None for the root files."""
    parts = path.split("/")
    if len(parts) != 3 or parts[1] not in _KINDS or not parts[2].endswith(".yaml"):
        return None
    return _KINDS[parts[1]], parts[0], parts[2].removesuffix(".yaml")


def status_changes(before: Mapping[str, bytes], after: Mapping[str, bytes]) -> list[Change]:
    """Every per-resource status file that differs between the trees, sorted by namespace, name, kind."""
    found: list[Change] = []
    for path in set(before) | set(after):
        if before.get(path) == after.get(path):
            continue
        where = resource_path(path)
        if where is None:
            continue
        kind, namespace, name = where
        found.append(
            Change(path, kind, namespace, name, _status_of(before.get(path)), _status_of(after.get(path)))
        )
    return sorted(found, key=lambda c: (c.namespace, c.name, c.kind))


def label(change: Change) -> str:
    """What happened to the resource, in a word, for the counted subject."""
    after, phase, reason = change.after, change.phase_after, change.reason_after
    if after is None:
        return "removed"
    if reason in _UNREACHABLE:
        return "unreachable" if _has_condition(after, "PaletteReachable") else "failed"
    if reason == "PruneBlocked":
        return "prune blocked"
    if phase == "Rejected" or (phase == "Degraded" and reason in _REJECTIONS):
        return "rejected"
    if phase in ("Invalid", "Suspended", "Deleting"):
        return phase.lower()
    if reason == "Scaling":
        return "scaled"
    if change.before is None and phase is not None:
        return "created"
    if phase is not None and phase != change.phase_before and phase.lower() in _LABELS:
        return phase.lower()
    return "updated"


def transition(change: Change) -> str:
    """``Provisioning -> Running``; ``new -> Provisioning``; ``Deleting -> removed``; for an unchanged
    phase what did change (``Running, Provisioned -> PruneBlocked``, ``Running, hosts +1 -0``); a kind
    without phases (Compute) says ``new``, ``removed`` or what changed."""
    before = NEW if change.before is None else change.phase_before
    after = REMOVED if change.after is None else change.phase_after
    if before != after:
        if before is None or after is None:
            return str(before or after)
        return f"{before} -> {after}"
    prefix = f"{after}, " if after else ""
    if change.reason_before != change.reason_after:
        return f"{prefix}{change.reason_before or '-'} -> {change.reason_after or '-'}"
    added, removed = change.hosts_added, change.hosts_removed
    if added or removed:
        return f"{prefix}hosts +{len(added)} -{len(removed)}"
    notes = pool_notes(change)
    if notes:
        return f"{prefix}{notes[0]}"
    if change.revision_moved:
        return f"{prefix}inputs changed"
    return f"{prefix}updated"


def _hosts_text(added: Sequence[str], removed: Sequence[str], names: Mapping[str, str] | None = None) -> str:
    def listed(sign: str, hosts: Sequence[str]) -> list[str]:
        shown = [f"{sign}{host_label(h, names or {})}" for h in hosts[:MAX_HOSTS_LISTED]]
        if len(hosts) > MAX_HOSTS_LISTED:
            shown.append(f"{sign}{len(hosts) - MAX_HOSTS_LISTED} more")
        return shown

    return " ".join(listed("+", added) + listed("-", removed))


def is_pool_or_workload(change: Change) -> bool:
    """A ComputePool, an AIWorkload, or a shared MLPlatform (a tenant of a pool: its status has ``pool``)."""
    side = change.after if change.after is not None else change.before
    return change.kind in ("ComputePool", "AIWorkload") or (side is not None and bool(side.get("pool")))


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def _why(change: Change) -> str | None:
    """The Ready message after the change, when it is news (the phase, reason or message moved)."""
    if change.after is None:
        return None
    after = _ready(change.after).get("message")
    before = _ready(change.before).get("message") if change.before is not None else None
    moved = change.phase_before != change.phase_after or change.reason_before != change.reason_after
    return _one_line(after) if after and (moved or after != before) else None


def _mapping(status: Mapping[str, Any] | None, key: str) -> Mapping[str, Any]:
    value = status.get(key) if status is not None else None
    return value if isinstance(value, Mapping) else {}


def _capacity_moves(change: Change) -> list[str]:
    before, after = _mapping(change.before, "capacity"), _mapping(change.after, "capacity")
    moves = []
    for family in sorted(set(before) | set(after)):
        old, new = before.get(family), after.get(family)
        old_text = f"{old.get('admitted')}/{old.get('total')}" if isinstance(old, Mapping) else "-"
        new_text = f"{new.get('admitted')}/{new.get('total')}" if isinstance(new, Mapping) else "-"
        if old_text == new_text:
            continue
        if old_text == "-":
            moves.append(f"{family} {new_text} GPUs admitted")
        else:
            moves.append(f"{family} admitted {old_text} -> {new_text} GPUs")
    return moves


def _decision(scaling: Mapping[str, Any]) -> Mapping[str, Any]:
    """The decision of a pool's ``status.scaling`` block (``decision: {decision, reason, message}``), or the
    block itself when it carries them at its top level."""
    inner = scaling.get("decision")
    return inner if isinstance(inner, Mapping) else scaling


def _relaid(change: Change) -> list[str]:
    """Hosts whose MIG layout differs between the two sides of a pool's change."""
    mig_before, mig_after = _mapping(change.before, "mig"), _mapping(change.after, "mig")
    return sorted(h for h in set(mig_before) | set(mig_after) if mig_before.get(h) != mig_after.get(h))


def pool_notes(change: Change, names: Mapping[str, str] | None = None) -> list[str]:
    """What moved inside a pool: workloads admitted or gone, GPUs admitted per family, the scaling
    decision with its reason and message, the hosts whose MIG layout changed (by name and uid when
    ``names`` knows them)."""
    if change.kind != "ComputePool" or change.after is None:
        return []
    notes = []
    old = {str(w) for w in (change.before or {}).get("admitted") or []}
    new = {str(w) for w in change.after.get("admitted") or []}
    if old != new:
        notes.append(
            "admitted "
            + " ".join([*(f"+{w}" for w in sorted(new - old)), *(f"-{w}" for w in sorted(old - new))])
        )
    notes += _capacity_moves(change)
    scaling = _decision(_mapping(change.after, "scaling"))
    before = _decision(_mapping(change.before, "scaling"))
    keys = ("decision", "reason", "message")
    quiet = change.before is None and scaling.get("decision") in (None, "none")  # a new pool, no policy
    if scaling and not quiet and [scaling.get(k) for k in keys] != [before.get(k) for k in keys]:
        text = f"scaling {scaling.get('decision') or 'none'} ({scaling.get('reason') or '-'})"
        notes.append(text + (f": {_one_line(scaling['message'])}" if scaling.get("message") else ""))
    relaid = _relaid(change)
    if relaid:
        shown = ", ".join(host_label(h, names or {}) for h in relaid[:MAX_HOSTS_LISTED]) + (
            f" and {len(relaid) - MAX_HOSTS_LISTED} more" if len(relaid) > MAX_HOSTS_LISTED else ""
        )
        notes.append(f"MIG layout changed on {shown}")
    return notes


def body_line(change: Change, names: Mapping[str, str] | None = None) -> str:
    """``MLPlatform project-a/clearml-prod: Provisioning -> Running (Provisioned); hosts +a -b``; for a
    kind without phases (Compute: its available machines) ``new``, ``removed`` or how many hosts
    became available or not. A pool's or workload's line says why (``AIWorkload ns/w: new -> Pending
    (PoolCapacityExceeded: needs 4 ...)``) and what moved in a pool (:func:`pool_notes`). Hosts are
    named ``name (uid)`` when ``names`` knows them."""
    head = f"{change.kind} {change.namespace}/{change.name}: "
    added, removed = change.hosts_added, change.hosts_removed
    if change.phase_before is None and change.phase_after is None:
        if change.before is None:
            return head + f"{NEW}; {len(added)} available hosts"
        if change.after is None:
            return head + REMOVED
        return head + (f"available hosts +{len(added)} -{len(removed)}" if added or removed else "updated")
    before = NEW if change.before is None else (change.phase_before or "-")
    after = REMOVED if change.after is None else (change.phase_after or "-")
    parts = [head + f"{before} -> {after}"]
    why = _why(change) if is_pool_or_workload(change) else None
    if change.after is not None and change.reason_after:
        parts[0] += f" ({change.reason_after}: {why})" if why else f" ({change.reason_after})"
    elif why:
        parts[0] += f" ({why})"
    if (added or removed) and change.after is not None:
        parts.append(f"hosts {_hosts_text(added, removed, names)}")
    parts += pool_notes(change, names)
    moved = change.revision_moved
    if moved and change.before is not None:
        parts.append(f"observes {moved[:12]}")
    return "; ".join(parts)


# Kinds whose status files carry no phase (what they say is counted, not a lifecycle): Compute, the
# Environment's candidates and placements, the Project's GPU quota.
PHASELESS_KINDS = frozenset({"Compute", "Environment", "Project"})


def _counted(changes: Sequence[Change]) -> str:
    counts: dict[str, int] = {}
    other: dict[str, int] = {}
    for change in changes:
        if change.kind in PHASELESS_KINDS:  # no phase to count by: counted by kind
            other[f"{change.kind} updated"] = other.get(f"{change.kind} updated", 0) + 1
        else:
            word = label(change)
            counts[word] = counts.get(word, 0) + 1
    parts = [f"{counts[word]} {word}" for word in _LABELS if word in counts]
    parts += [f"{n} {word}" for word, n in sorted(other.items())]
    return ", ".join(parts)


def root_changes(before: Mapping[str, bytes], after: Mapping[str, bytes]) -> list[str]:
    """What changed in the root files (``reconciler.yaml``'s branch and targets, ``inventory/``), for
    the subject of a commit that changed no resource. The recorded revision alone is not a change."""
    old, new = parse_recorded(before), parse_recorded(after)
    found: list[str] = []
    if old.branch != new.branch:
        found.append(f"follows {new.branch}" + (f" (was {old.branch})" if old.branch else ""))
    added, dropped = set(new.targets) - set(old.targets), set(old.targets) - set(new.targets)
    if added or dropped:
        found.append(f"Palette targets +{len(added)} -{len(dropped)}")
    inventories = [
        p for p in set(before) | set(after) if p.startswith("inventory/") and before.get(p) != after.get(p)
    ]
    if inventories:
        found.append(f"inventory of {len(inventories)} target{'s' if len(inventories) > 1 else ''} updated")
    return found


def subject(changes: Sequence[Change], root: Sequence[str] = ()) -> str:
    """The first line of a status commit (see the module docstring); ``root`` (:func:`root_changes`)
    says what changed when no resource did."""
    if not changes:
        return "; ".join(root) or "status updated"
    if len(changes) == 1:
        return f"{changes[0].key}: {transition(changes[0])}"
    if len(changes) <= MAX_NAMED:
        steps = [transition(c) for c in changes]
        if len(set(steps)) == 1:
            named = f"{', '.join(c.key for c in changes)}: {steps[0]}"
        else:
            named = "; ".join(f"{c.key}: {step}" for c, step in zip(changes, steps, strict=True))
        if len(named) <= MAX_SUBJECT:
            return named
    return _counted(changes)


def commit_message(
    before: Mapping[str, bytes],
    after: Mapping[str, bytes],
    notes: Sequence[str] = (),
    scaling: Sequence[str] = (),
) -> str:
    """The message of the status commit that turns the tree ``before`` into ``after`` (no trailers).
    ``scaling``: the pass's scaling records (``ScalingOutcome.commit``: the sentence, then the policy,
    query, window and values), each a paragraph of the body before the list of changes."""
    changes = status_changes(before, after)
    paragraphs = [subject(changes, root_changes(before, after) if not changes else ())]
    if notes:
        paragraphs.append("\n".join(notes))
    paragraphs.extend(text.strip() for text in scaling if text.strip())
    if changes:
        names = _names_for(changes, before, after)
        paragraphs.append("\n".join(body_line(c, names) for c in changes))
    return "\n\n".join(paragraphs)


def _names_for(
    changes: Sequence[Change], before: Mapping[str, bytes], after: Mapping[str, bytes]
) -> Mapping[str, str]:
    """Host names for the body, read from the inventory snapshots only when a line lists hosts."""
    listed = any(
        (change.after is not None and (change.hosts_added or change.hosts_removed)) or _relaid(change)
        for change in changes
    )
    return host_names({**before, **after}) if listed else {}


def source_trailers(revision: str | None, summary: tuple[str, str] | None) -> dict[str, str]:
    """``Source-Revision`` (the config commit's full sha), and its ``Source-Subject`` and
    ``Source-Author`` (``Name <email>``) when known. Values are single lines by construction."""
    trailers = {"Source-Revision": revision or "unknown"}
    if summary is not None:
        subject_line, author = (" ".join(text.split()) for text in summary)
        if subject_line:
            trailers["Source-Subject"] = subject_line
        if author:
            trailers["Source-Author"] = author
    return trailers
