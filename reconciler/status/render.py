"""Status documents of one pass (pure: the clock comes in as ``now``).

docs/status-branch.md. A status file changes only when something about its own resource changed: phase,
reason, message, cluster state, allocation, or its inputs. ``observedRevision`` is the newest revision
whose inputs for the resource differ from the previous ones: each file stores ``inputsHash``, a
fingerprint of the resource's document and of those it references as resolved for it
(:func:`resource_inputs`), and keeps its ``observedRevision`` while that fingerprint stays the same
(:func:`observed_fields`), so an unrelated merge does not touch it. ``lastTransitionTime`` is carried
over from the previous status while the Ready condition keeps its status, so an idle pass renders the
same bytes and makes no commit.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import BaseModel

from reconciler.model.base import DNS1123_LABEL, LocalRef
from reconciler.model.conditions import Phase, Reason
from reconciler.model.desired import DesiredState
from reconciler.model.observed import cluster_name
from reconciler.model.outcomes import Outcome
from reconciler.model.resources import (
    PLURALS,
    Compute,
    ComputeProfile,
    MLPlatform,
    Resource,
    Settings,
)
from reconciler.plan import Action, PlatformPlan
from reconciler.plan.phases import platform_phase, ready_of, recorded_phase
from reconciler.resolve import (
    compute_profile,
    compute_settings_name,
    platform_settings_name,
    settings,
    workload_profile,
)

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


INVALID_DIR = "_invalid"  # status of documents whose namespace is no valid name ("_" is in none)
_INVALID_PREFIX = "_invalid-"  # ... and of documents whose name is none
_VALID_NAME = re.compile(DNS1123_LABEL)
_INVALID_FILE = re.compile(r"^_invalid-[0-9a-f]{16}$")
_STATUS_PLURALS = frozenset(PLURALS.values())


def _valid_name(text: str) -> bool:
    return len(text) <= 63 and _VALID_NAME.match(text) is not None


def status_path(kind: str, namespace: str, name: str) -> str:
    """Where a resource's status file lives: ``<namespace>/<kind plural>/<name>.yaml``.

    Paths are built only from valid names (DNS-1123 labels). A document whose name or namespace is not
    one (an invalid document: ``..``, ``.git``, a ``/``) is keyed by a digest of what it says instead:
    ``<namespace>/<plural>/_invalid-<digest>.yaml``, or ``_invalid/<plural>/<digest>.yaml`` when the
    namespace is the invalid part. Its status says Invalid, and no path of it can reach outside its
    directory or make the tree unwritable.
    """
    plural = PLURALS[kind]
    if _valid_name(namespace) and _valid_name(name):
        return f"{namespace}/{plural}/{name}.yaml"
    digest = hashlib.sha256(f"{kind}\0{namespace}\0{name}".encode()).hexdigest()[:16]
    if _valid_name(namespace):
        return f"{namespace}/{plural}/{_INVALID_PREFIX}{digest}.yaml"
    return f"{INVALID_DIR}/{plural}/{digest}.yaml"


def is_status_path(path: str) -> bool:
    """Whether ``path`` is one :func:`status_path` can return (a resource's status file)."""
    parts = path.split("/")
    if len(parts) != 3 or parts[1] not in _STATUS_PLURALS or not parts[2].endswith(".yaml"):
        return False
    stem = parts[2][: -len(".yaml")]
    if parts[0] == INVALID_DIR:
        return re.fullmatch(r"[0-9a-f]{16}", stem) is not None
    return _valid_name(parts[0]) and (_valid_name(stem) or _INVALID_FILE.match(stem) is not None)


# -- observedRevision: the newest revision whose inputs for the resource changed --------------------

OBSERVED_REVISION = "observedRevision"
INPUTS_HASH = "inputsHash"

# ``<kind>Ref`` fields followed by the generic resolver (kinds without a resolver of their own).
_REFERENCE_FIELDS: dict[str, str] = {
    "compute_profile_ref": "ComputeProfile",
    "workload_profile_ref": "WorkloadProfile",
    "compute_pool_ref": "ComputePool",
    "environment_ref": "Environment",
    "scaling_policy_ref": "ScalingPolicy",
    "settings_ref": "Settings",
    "profile_bundle_ref": "ProfileBundle",
}


def _platform_references(desired: DesiredState, platform: Resource) -> list[Resource | None]:
    assert isinstance(platform, MLPlatform)
    ns = platform.metadata.namespace
    project = desired.project(ns)
    profile = compute_profile(desired, platform)
    settings_name = platform_settings_name(profile, project)
    own_settings = desired.get(Settings, ns, settings_name) if settings_name else None
    return [profile, workload_profile(desired, platform), project, own_settings]


def _compute_references(desired: DesiredState, compute: Resource) -> list[Resource | None]:
    assert isinstance(compute, Compute)
    ns = compute.metadata.namespace
    project = desired.project(ns)
    settings_name = compute_settings_name(compute, project)
    return [project, desired.get(Settings, ns, settings_name) if settings_name else None]


def _generic_references(desired: DesiredState, resource: Resource) -> list[Resource | None]:
    """Every ``*Ref`` of the spec (same namespace), the namespace's Project, and the Settings: its own
    ``settingsRef``, else its ComputeProfile's, else the Project's (the rule of resolve.py)."""
    ns = resource.metadata.namespace
    spec = getattr(resource, "spec", None)
    found: list[Resource | None] = []
    own_settings: str | None = None
    for field_name, kind in _REFERENCE_FIELDS.items():
        ref = getattr(spec, field_name, None)
        if not isinstance(ref, LocalRef):
            continue
        loaded = desired.resources.get((kind, ns, ref.name))
        target = loaded.resource if loaded is not None else None
        found.append(target)
        if (
            isinstance(target, ComputeProfile)
            and target.spec.settings_ref is not None
            and own_settings is None
        ):
            own_settings = target.spec.settings_ref.name
        if kind == "Settings":
            own_settings = ref.name
    return [*found, desired.project(ns), settings(desired, ns, own_settings)]


ReferenceResolver = Callable[[DesiredState, Resource], list[Resource | None]]
# Which documents a resource of each kind depends on, as resolved for it; kinds not listed use
# :func:`_generic_references`. A kind whose status needs a finer rule registers it here.
REFERENCES: dict[str, ReferenceResolver] = {
    "MLPlatform": _platform_references,
    "Compute": _compute_references,
}


def _fingerprint(parts: Sequence[object]) -> str:
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _as_input(resource: BaseModel | None) -> object:
    # The document as written (unset defaults left out), so that an upgrade adding a defaulted field
    # does not look like a change of every resource.
    return None if resource is None else resource.model_dump(mode="json", by_alias=True, exclude_unset=True)


def resource_inputs(desired: DesiredState, kind: str, namespace: str, name: str) -> str:
    """A fingerprint of what the resource's status is computed from in ``desired``: its document and
    the documents it references as resolved for it (ComputeProfile, WorkloadProfile, Project, Settings
    ...). An invalid document counts by its problems (kind, field, reason, message; not their line, so
    an edit of a neighbouring document in the same file does not count); an absent one as absent."""
    identity = (kind, namespace, name)
    loaded = desired.resources.get(identity)
    if loaded is None:
        problems = desired.invalid.get(identity)
        if problems is None:
            return _fingerprint([kind, "absent"])
        seen = sorted({(d.field or "", d.reason or "", d.message) for d in problems})
        return _fingerprint([kind, "invalid", [list(p) for p in seen]])
    resource = loaded.resource
    resolver = REFERENCES.get(kind, _generic_references)
    refs = resolver(desired, resource)
    return _fingerprint([kind, _as_input(resource), [_as_input(r) for r in refs]])


def observed_fields(revision: str | None, inputs: str, previous: Mapping[str, Any] | None) -> dict[str, Any]:
    """``observedRevision`` and ``inputsHash`` of a status: the previous status's revision while its
    inputs are the same, else ``revision`` (docs/status-branch.md). Every kind's status starts with these."""
    before = (previous or {}).get("status")
    if isinstance(before, Mapping) and before.get(INPUTS_HASH) == inputs and before.get(OBSERVED_REVISION):
        return {OBSERVED_REVISION: str(before[OBSERVED_REVISION]), INPUTS_HASH: inputs}
    return {OBSERVED_REVISION: revision, INPUTS_HASH: inputs}


def ready_condition(
    phase: Phase, reason: str, message: str, previous: Mapping[str, Any] | None, now: str
) -> dict[str, Any]:
    """The Ready condition of a status in ``phase``; it keeps its transition time while it holds."""
    ready = ready_of(phase)
    return {
        "type": "Ready",
        "status": ready,
        "reason": reason,
        "message": message,
        "lastTransitionTime": previous_transition(previous, ready) or now,
    }


def previous_transition(previous: Mapping[str, Any] | None, status: str) -> str | None:
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
            held = ready_of(body.get("phase"))
        if held == status:
            value = cond.get("lastTransitionTime")
            return str(value) if value is not None else None
    return None


def platform_status(
    p: PlatformPlan,
    *,
    revision: str | None,
    inputs: str,
    outcome: Outcome | None,
    previous: Mapping[str, Any] | None,
    now: str,
    unavailable: str | None = None,
    unhealthy: Sequence[str] = (),
) -> tuple[Phase, dict[str, Any]]:
    """The status document of one MLPlatform, and its phase.

    ``inputs`` is the platform's :func:`resource_inputs`. ``unhealthy`` are hosts of the platform's
    cluster that Palette reports unhealthy or not ready: a Running cluster with such hosts is
    ``Degraded`` (its hosts are kept; nothing is moved).
    """
    phase, reason, message = platform_phase(p, outcome, unavailable, unhealthy)
    status: dict[str, Any] = {
        **observed_fields(revision, inputs, previous),
        "phase": str(phase),
        "conditions": [ready_condition(phase, str(reason), message, previous, now)],
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
    """The status of an MLPlatform whose Palette could not be read (docs/status-branch.md).

    It never loses facts: the last reported phase, cluster, allocation, observed revision and inputs
    fingerprint are kept (the inputs count as observed only once Palette could be read again);
    Ready becomes ``Unknown`` (keeping its last transition time, see :func:`previous_transition`) and
    ``PaletteReachable=False`` says why. Without a previous status the phase is ``Pending``.
    """
    before = dict((previous or {}).get("status") or {})
    phase = recorded_phase(before.get("phase"))
    since = previous_transition(previous, ready_of(phase)) or now
    unreachable_since = now
    for cond in before.get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == PALETTE_REACHABLE and cond.get("status") == "False":
            unreachable_since = str(cond.get("lastTransitionTime") or now)
    status: dict[str, Any] = {OBSERVED_REVISION: before.get(OBSERVED_REVISION)}
    if before.get(INPUTS_HASH) is not None:
        status[INPUTS_HASH] = before[INPUTS_HASH]
    status["phase"] = str(phase)
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
    branch: str,
    revision: str | None,
    targets: Sequence[tuple[str, str | None]],
    *,
    palette: str | None = None,
) -> dict[str, Any]:
    """``reconciler.yaml``: the config branch followed, the revision last reported, the targets managed,
    and (only when ``run --palette URL`` pointed every namespace at one endpoint) that endpoint, so that
    ``plan --from-status`` routes as that run did."""
    doc: dict[str, Any] = {
        "branch": branch,
        "revision": revision,
        "targets": [
            {"url": url, "projectUid": project} for url, project in sorted(set(targets), key=_target_key)
        ],
    }
    if palette:
        doc["palette"] = palette.rstrip("/")
    return doc


def _target_key(target: tuple[str, str | None]) -> tuple[str, str]:
    return (target[0], target[1] or "")


SHARDS_DIR = "shards/"


def whole_record(
    files: Mapping[str, bytes], newest: Callable[[Sequence[str]], str | None] | None = None
) -> Mapping[str, bytes]:
    """The status tree as a reader of the whole branch needs it: a sharded branch has no
    ``reconciler.yaml`` but one ``shards/<name>.yaml`` per shard (same shape); they are combined into one
    ``reconciler.yaml`` (every shard's targets; the branch and ``palette`` of the first shard by name
    that records them; the revision is the newest any shard reported: ``newest`` picks it among the
    shards' revisions from the config history, else the first shard's). An unsharded tree is returned as
    it is."""
    if RECONCILER_FILE in files:
        return files
    docs = [
        doc
        for path, doc in sorted(parse_previous(files).items())
        if path.startswith(SHARDS_DIR) and path.endswith(".yaml")
    ]
    if not docs:
        return files
    combined: dict[str, Any] = {"branch": None, "revision": None, "targets": []}
    targets: set[tuple[str, str | None]] = set()
    for doc in docs:
        for key in ("branch", "revision", "palette"):
            if combined.get(key) is None and doc.get(key):
                combined[key] = doc[key]
        for item in doc.get("targets") or []:
            if isinstance(item, dict) and isinstance(item.get("url"), str):
                project = item.get("projectUid")
                targets.add((item["url"], project if isinstance(project, str) else None))
    combined["targets"] = [{"url": u, "projectUid": p} for u, p in sorted(targets, key=_target_key)]
    revisions = sorted({str(doc["revision"]) for doc in docs if doc.get("revision")})
    if newest is not None and len(revisions) > 1:
        combined["revision"] = newest(revisions) or combined["revision"]
    return {**files, RECONCILER_FILE: dump({k: v for k, v in combined.items() if v is not None})}


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
    namespace: str,
    name: str,
    status: Mapping[str, Any],
    *,
    revision: str | None,
    inputs: str,
    previous: Mapping[str, Any] | None,
) -> dict[str, Any]:
    return {
        "apiVersion": "palette.ai/v1alpha1",
        "kind": "Compute",
        "metadata": {"namespace": namespace, "name": name},
        "status": {**observed_fields(revision, inputs, previous), **status},
    }


# Each status file's YAML by the document's ``repr`` (same keys in the same order, same values and
# types): a pass renders every file of a thousand platforms to see which changed, and PyYAML's emitter
# is pure Python (about 5 ms a file). Two generations of at most 16 MB each (keys and texts): what the
# last passes rendered stays, what nobody rendered since goes. Memoised text changes no result.
_DUMPED: list[dict[str, bytes]] = [{}, {}]  # [current, previous]
_DUMPED_SIZE = [0]
_DUMPED_MAX_BYTES = 16 * 1024 * 1024


def dump(doc: Mapping[str, Any]) -> bytes:
    key = repr(doc)
    current, previous = _DUMPED
    text = current.get(key)
    if text is None:
        text = previous.get(key)
        if text is None:
            text = _dump(doc)
        if _DUMPED_SIZE[0] >= _DUMPED_MAX_BYTES:
            _DUMPED[:] = [{}, current]
            current, _DUMPED_SIZE[0] = _DUMPED[0], 0
        current[key] = text
        _DUMPED_SIZE[0] += len(key) + len(text)
    return text


def _dump(doc: Mapping[str, Any]) -> bytes:
    return yaml.safe_dump(dict(doc), sort_keys=False, default_flow_style=False, width=120).encode()


def load(path: str, data: bytes) -> Any:
    """One status branch file parsed: JSON as JSON (the ``inventory/`` snapshots: many times faster
    than YAML), anything else with the C YAML loader. None when it does not parse."""
    try:
        if path.endswith(".json"):
            return json.loads(data)
        return yaml.load(data, Loader=_Loader)
    except (ValueError, yaml.YAMLError):
        return None


def parse_previous(files: Mapping[str, bytes]) -> dict[str, dict[str, Any]]:
    """Previous status documents by path; unreadable ones are ignored (they are rewritten). The
    ``inventory/`` snapshots are no status documents and are not parsed (``plan --from-status`` reads
    them with :func:`reconciler.status.snapshot.read_snapshots`)."""
    out: dict[str, dict[str, Any]] = {}
    for path, data in files.items():
        if path.startswith("inventory/"):
            continue
        doc = load(path, data)
        if isinstance(doc, dict):
            out[path] = doc
    return out
