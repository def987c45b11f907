"""Status documents of pools and workloads, and what the next pass reads back from them
(docs/status-branch.md).

Pure (the clock comes in as ``now``). A pool's file is a platform's (phase, conditions, cluster,
allocation) plus ``mode``, ``capacity`` per family, the ``admitted`` workloads, the MIG layout per host
and GPU (``mig``, the shape of ``plan --format json``'s ``pools[].mig``), ``migConfig``, ``migSlices``
(memory slices used, free in instances, stranded), the MIG ``machinePools`` and ``scaling``. A workload's
file (``aiworkloads/``, or ``mlplatforms/`` for a shared MLPlatform) has ``phase``, its ``pool``, the
GPUs and MIG instances bound to it (``allocation``) and ``attachedProfiles``: the cluster profile uids
attached to the pool cluster for it, so that they can be detached once it is gone (the repository no
longer says which they were).

Read back (:func:`read_pool_records`): the previous admissions (``plan_targets``' ``previous``, including
workloads that are gone), the recorded MIG layouts, each pool's ``mode``, and the attached profiles.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from reconciler.model.conditions import Phase, Reason
from reconciler.model.outcomes import Outcome, WorkloadOutcome
from reconciler.model.pools import PoolKey, WorkloadKey
from reconciler.placement.admission_types import PreviousAdmission
from reconciler.placement.mig_layouts import GpuLayout, MigLayoutError, parse_mig_layouts
from reconciler.placement.units import GpuRef, MigInstance
from reconciler.plan import PoolPlan, WorkloadPlan
from reconciler.plan.phases import workload_phase
from reconciler.status.record_check import Repair, check_admissions
from reconciler.status.render import (
    observed_fields,
    platform_status,
    ready_condition,
    status_path,
    unreachable_status,
)

API_VERSION = "palette.ai/v1alpha1"
WORKLOAD_KINDS = ("AIWorkload", "MLPlatform")


@dataclass
class PoolRecords:
    """What the status branch says about pools and workloads after the last pass."""

    previous: dict[PoolKey, list[PreviousAdmission]] = field(default_factory=dict)
    layouts: dict[PoolKey, tuple[GpuLayout, ...]] = field(default_factory=dict)
    modes: dict[PoolKey, str] = field(default_factory=dict)
    # workload -> (pool name, profile uids attached to the pool cluster for it)
    attached: dict[WorkloadKey, tuple[str, tuple[str, ...]]] = field(default_factory=dict)
    # a bundle-built pool -> its own cluster profile uids, as last carried out (docs/bundles.md)
    profiles: dict[PoolKey, tuple[str, ...]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # recorded values that could not be read
    repairs: list[Repair] = field(default_factory=list)  # claims on a GPU an earlier admission holds


def workload_path(kind: str, namespace: str, name: str) -> str:
    return status_path(kind, namespace, name)


def _split(path: str) -> tuple[str, str, str] | None:
    parts = path.split("/")
    if len(parts) != 3 or not parts[2].endswith(".yaml"):
        return None
    return parts[0], parts[1], parts[2][: -len(".yaml")]


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _replica(item: Mapping[str, Any]) -> int:
    """The replica an entry belongs to: 0 when the file predates replicas (or the value is not a count)."""
    replica = _int(item.get("replica"))
    return replica if replica is not None and replica >= 0 else 0


def _admission(key: WorkloadKey, kind: str, allocation: Mapping[str, Any]) -> PreviousAdmission:
    gpus: dict[GpuRef, int] = {}
    for item in allocation.get("bound") or []:
        if not isinstance(item, Mapping):
            continue
        host, index = item.get("host"), _int(item.get("gpu"))
        if isinstance(host, str) and index is not None:
            gpus.setdefault(GpuRef(host, index), _replica(item))
    mig: set[MigInstance] = set()
    for item in allocation.get("mig") or []:
        if not isinstance(item, Mapping):
            continue
        host, gpu, profile, start = (
            item.get("host"),
            _int(item.get("gpu")),
            item.get("profile"),
            _int(item.get("start")),
        )
        if isinstance(host, str) and isinstance(profile, str) and gpu is not None and start is not None:
            mig.add(MigInstance(host, gpu, profile, start, _replica(item)))
    ordered = tuple(sorted(gpus, key=lambda r: (r.host_uid, r.index)))
    replicas = tuple(gpus[r] for r in ordered) if any(gpus.values()) else ()
    return PreviousAdmission(key, ordered, tuple(sorted(mig)), kind, replicas)


def read_pool_records(docs: Mapping[str, Mapping[str, Any]]) -> PoolRecords:
    """Pool and workload records of a parsed status tree (``render.parse_previous``). Admissions that
    claim a GPU an earlier one holds are repaired (``record_check``, named in ``repairs``)."""
    out = PoolRecords()
    since: dict[WorkloadKey, str] = {}
    for path, doc in sorted(docs.items()):
        where = _split(path)
        status = doc.get("status") if isinstance(doc, Mapping) else None
        if where is None or not isinstance(status, Mapping):
            continue
        ns, plural, name = where
        if plural == "computepools":
            mode = status.get("mode")
            if isinstance(mode, str):
                out.modes[(ns, name)] = mode
            own = status.get("profiles")
            if isinstance(own, list) and all(isinstance(u, str) for u in own):
                out.profiles[(ns, name)] = tuple(own)
            try:
                layouts = parse_mig_layouts(status.get("mig") or None, where=f"{path}: status.mig")
            except MigLayoutError as exc:
                out.problems.append(str(exc))
                continue
            if layouts:
                out.layouts[(ns, name)] = layouts
        elif plural in ("aiworkloads", "mlplatforms"):
            pool = status.get("pool")
            if not isinstance(pool, str) or not pool:
                continue  # a dedicated MLPlatform's file, or a workload that holds nothing
            kind = "AIWorkload" if plural == "aiworkloads" else "MLPlatform"
            allocation = status.get("allocation")
            if isinstance(allocation, Mapping):
                held = _admission((ns, name), kind, allocation)
                if held.gpus or held.mig:
                    out.previous.setdefault((ns, pool), []).append(held)
                    since[(ns, name)] = _ready_since(status)
            uids = tuple(str(u) for u in status.get("attachedProfiles") or [] if isinstance(u, str))
            if uids:
                out.attached[(ns, name)] = (pool, uids)
    out.previous, out.repairs = check_admissions(out.previous, since)
    return out


def _ready_since(status: Mapping[str, Any]) -> str:
    """The Ready condition's ``lastTransitionTime`` (empty when the file has none)."""
    for cond in status.get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == "Ready":
            at = cond.get("lastTransitionTime")
            return at if isinstance(at, str) else ""
    return ""


def scaling_blocks(docs: Mapping[str, Mapping[str, Any]]) -> dict[PoolKey, tuple[str, Any]]:
    """``status.scaling`` of each pool file that holds a recorded block (``reconciler.scaling.record``'s
    shape), as ``(path, block)``: parsing (and warning about) it is the caller's. The plan's entry
    (``decision`` a plain string: no policy, or not evaluated yet) is no record and is left out."""
    out: dict[PoolKey, tuple[str, Any]] = {}
    for path, doc in sorted(docs.items()):
        where = _split(path)
        status = doc.get("status") if isinstance(doc, Mapping) else None
        if where is None or where[1] != "computepools" or not isinstance(status, Mapping):
            continue
        block = status.get("scaling")
        entry = isinstance(block, Mapping) and isinstance(block.get("decision"), str) and "size" not in block
        if block is None or entry:
            continue
        out[(where[0], where[2])] = (path, block)
    return out


_DEMAND = (str(Reason.POOL_CAPACITY_EXCEEDED), str(Reason.NO_FITTING_LAYOUT))


def pending_since(docs: Mapping[str, Mapping[str, Any]]) -> dict[WorkloadKey, float]:
    """When each workload started waiting for capacity: its Ready condition's ``lastTransitionTime``
    while it is Pending with ``PoolCapacityExceeded`` or ``NoFittingLayout`` (unix seconds). Others are
    left out."""
    out: dict[WorkloadKey, float] = {}
    for path, doc in docs.items():
        where = _split(path)
        status = doc.get("status") if isinstance(doc, Mapping) else None
        if where is None or where[1] not in ("aiworkloads", "mlplatforms") or not isinstance(status, Mapping):
            continue
        if status.get("phase") != str(Phase.PENDING):
            continue
        for condition in status.get("conditions") or []:
            if not isinstance(condition, Mapping) or condition.get("type") != "Ready":
                continue
            if condition.get("reason") not in _DEMAND:
                continue
            try:
                since = datetime.fromisoformat(str(condition.get("lastTransitionTime")))
            except ValueError:
                continue
            if since.tzinfo is not None:
                out[(where[0], where[2])] = since.timestamp()
    return out


def pool_document(
    pool: PoolPlan,
    *,
    revision: str | None,
    inputs: str,
    outcome: Outcome | None,
    previous: Mapping[str, Any] | None,
    now: str,
    unhealthy: tuple[str, ...] = (),
) -> tuple[Phase, dict[str, Any]]:
    """The status of one ComputePool: its cluster as a platform's, plus admission and MIG. ``inputs``:
    the pool's ``resource_inputs`` (its ``observedRevision`` moves only when they change)."""
    phase, doc = platform_status(
        pool.cluster,
        revision=revision,
        inputs=inputs,
        outcome=outcome,
        previous=previous,
        now=now,
        unhealthy=unhealthy,
    )
    doc["kind"] = "ComputePool"
    status = doc["status"]
    status["mode"] = pool.mode
    status["capacity"] = {
        family: {"total": c.total, "admitted": c.admitted, "free": c.free}
        for family, c in sorted(pool.capacity.items())
    }
    status["admitted"] = [f"{ns}/{name}" for ns, name in sorted(pool.admitted)]
    status["mig"] = {host: [dict(g) for g in gpus] for host, gpus in sorted(pool.mig.items())}
    status["migConfig"] = dict(pool.mig_config) if pool.mig_config is not None else None
    if pool.mig_usage is not None:
        usage = pool.mig_usage
        status["migSlices"] = {"used": usage.used, "free": usage.free, "stranded": usage.stranded}
    if pool.machine_pools:
        status["machinePools"] = [
            {"name": mp.config, "labels": mp.labels, "hosts": list(mp.hosts)} for mp in pool.machine_pools
        ]
    status["scaling"] = pool.scaling.to_json()
    own = pool.own_profiles
    before = (previous or {}).get("status")
    if outcome is not None and not outcome.ok and isinstance(before, Mapping) and "profiles" in before:
        own = before["profiles"]  # the update failed: the cluster has what it had
    if own is not None:
        status["profiles"] = list(own)
    if pool.provisioned_for is not None:
        status["provisionedFor"] = pool.provisioned_for  # the AIWorkload it was provisioned for
    return phase, doc


def workload_document(
    w: WorkloadPlan,
    *,
    revision: str | None,
    inputs: str,
    outcome: WorkloadOutcome | None,
    attached: tuple[str, ...],
    previous: Mapping[str, Any] | None,
    now: str,
) -> tuple[Phase, dict[str, Any]]:
    """The status of one workload (an AIWorkload, or a shared MLPlatform) in its pool. ``attached``: the
    profile uids attached for it after this pass."""
    phase, reason, message = workload_phase(w, outcome)
    why = str(reason) if reason is not None else str(phase)
    status: dict[str, Any] = {
        **observed_fields(revision, inputs, previous),
        "phase": str(phase),
        "conditions": [ready_condition(phase, why, message, previous, now)],
        "pool": w.pool,
    }
    if w.environment is not None:  # placed through an Environment (docs/environments.md)
        status["environment"] = w.environment
    if w.gpus or w.mig:
        replica_of = w.gpu_replicas if len(w.gpu_replicas) == len(w.gpus) else (0,) * len(w.gpus)
        status["allocation"] = {
            "replicas": w.replicas,
            "gpus": w.gpu_counts(),
            "bound": [
                {"host": u.host_uid, "hostName": u.host_name, "gpu": u.index, "replica": r}
                for u, r in zip(w.gpus, replica_of, strict=True)
            ],
            "mig": [
                {
                    "host": m.host_uid,
                    "gpu": m.gpu,
                    "profile": m.profile,
                    "start": m.start,
                    "replica": m.replica,
                }
                for m in sorted(w.mig)
            ],
        }
    if attached:
        status["attachedProfiles"] = sorted(attached)
    doc = {
        "apiVersion": API_VERSION,
        "kind": w.kind,
        "metadata": {"namespace": w.namespace, "name": w.name},
        "status": status,
    }
    return phase, doc


def unreachable_document(
    kind: str,
    namespace: str,
    name: str,
    *,
    previous: Mapping[str, Any] | None,
    reason: Reason,
    message: str,
    now: str,
) -> tuple[Phase, dict[str, Any]]:
    """A pool or workload whose Palette could not be read: every fact last reported is kept (admission,
    MIG layout, attached profiles), Ready is ``Unknown`` and ``PaletteReachable=False`` says why."""
    phase, doc = unreachable_status(
        namespace, name, previous=previous, reason=reason, message=message, now=now
    )
    doc["kind"] = kind
    before = (previous or {}).get("status") or {}
    for key, value in before.items():
        doc["status"].setdefault(key, value)
    return phase, doc
