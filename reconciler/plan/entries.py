"""The plan's types and their JSON (``plan --format json``, docs/planning.md); pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from reconciler.inventory import Machine
from reconciler.model.base import ClusterProfileRef
from reconciler.model.conditions import Reason
from reconciler.model.desired import PlatformKey
from reconciler.model.diagnostics import Diagnostic
from reconciler.model.observed import ManagedCluster
from reconciler.model.pools import PLATFORM_KIND, PoolKey, WorkloadKey, pool_cluster_labels
from reconciler.model.resources import ComputePool
from reconciler.placement.admission_types import FamilyCapacity, WorkloadAction, replica_bindings
from reconciler.placement.environment import Candidate
from reconciler.placement.mig import MigUsage
from reconciler.placement.mig_layouts import GpuLayout
from reconciler.placement.mig_outcome import MigMachinePool
from reconciler.placement.quota import QuotaUse
from reconciler.placement.units import GpuUnit, MigInstance

PreviousLayouts = Mapping[PoolKey, Sequence[GpuLayout]]
"""Per pool, the GPUs in MIG mode its status file recorded (``mig_admission.parse_mig_layouts``)."""


class Action(StrEnum):
    CREATE = "create"
    SCALE = "scale"
    REPLACE = "replace"
    DELETE = "delete"
    UNCHANGED = "unchanged"
    REJECTED = "rejected"
    INVALID = "invalid"
    SUSPENDED = "suspended"
    UPDATE = "update"  # a bundle-built pool's add-on profiles attached or detached in place


# The actions the applier carries out; every other action leaves Palette as it is.
MUTATING = frozenset({Action.CREATE, Action.SCALE, Action.REPLACE, Action.DELETE, Action.UPDATE})

# How a log line or a summary says an action happened ("3 created, 1 scaled").
DONE: dict[Action, str] = {
    Action.CREATE: "created",
    Action.SCALE: "scaled",
    Action.UPDATE: "updated",
    Action.REPLACE: "replaced",
    Action.DELETE: "deleted",
    Action.REJECTED: "rejected",
    Action.INVALID: "invalid",
    Action.SUSPENDED: "suspended",
}


@dataclass(frozen=True, slots=True)
class PlatformPlan:
    """What one pass does about one platform, with everything the applier needs to do it."""

    namespace: str
    name: str
    action: Action
    reason: Reason | None
    message: str
    control_plane: tuple[str, ...] = ()
    workers: tuple[str, ...] = ()
    gpus: dict[str, int] = field(default_factory=dict)
    existing: ManagedCluster | None = None
    arch: str | None = None
    add_workers: tuple[str, ...] = ()
    remove_workers: tuple[str, ...] = ()
    add_control_plane: tuple[str, ...] = ()
    remove_control_plane: tuple[str, ...] = ()
    # The known machines of control_plane + workers (names, addresses for staticIp, GPU devices), so the
    # applier never reads Palette's host JSON itself. Not part of the JSON output.
    machines: Mapping[str, Machine] = field(default_factory=dict)
    # MLPlatform, or ComputePool for the cluster entry of a pool (PoolPlan.cluster)
    kind: str = PLATFORM_KIND
    # A bundle-built pool's own profiles attached and detached in place (action update, docs/bundles.md).
    attach_profiles: tuple[ClusterProfileRef, ...] = ()
    detach_profiles: tuple[str, ...] = ()

    @property
    def key(self) -> PlatformKey:
        return (self.namespace, self.name)

    @property
    def mutating(self) -> bool:
        return self.action in MUTATING

    def to_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "action": str(self.action),
            "reason": str(self.reason) if self.reason is not None else None,
            "message": self.message,
            "controlPlane": sorted(self.control_plane),
            "workers": sorted(self.workers),
            "gpus": dict(sorted(self.gpus.items())),
            **(
                {
                    "profiles": {
                        "attach": [r.uid for r in self.attach_profiles],
                        "detach": list(self.detach_profiles),
                    }
                }
                if self.action is Action.UPDATE
                else {}
            ),
        }


class ScalingDecision(StrEnum):
    NONE = "none"
    UP = "up"
    DOWN = "down"
    HOLD = "hold"


@dataclass(frozen=True, slots=True)
class ScalingPlan:
    """A pool's scaling entry. The plan itself reads no utilisation: the scaling stage's decision is put
    in with :meth:`Plan.with_scaling`; without one the decision is ``none`` and the reason says why
    (``NoPolicy`` or ``NotEvaluated``)."""

    policy: str | None
    decision: ScalingDecision = ScalingDecision.NONE
    reason: str = "NoPolicy"
    message: str = "no scaling policy: the pool keeps the size of its spec.gpus"
    # namespace/name of a pending workload -> what its message adds about a demand scale-up for it
    waiting: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "decision": str(self.decision),
            "reason": self.reason,
            "message": self.message,
        }


def _scaling(pool: ComputePool | None) -> ScalingPlan:
    ref = pool.spec.scaling_policy_ref if pool is not None else None
    if ref is None:
        return ScalingPlan(None)
    return ScalingPlan(
        ref.name,
        reason="NotEvaluated",
        message=f"ScalingPolicy {ref.name} is not evaluated in this pass (its pool is not Running): "
        "it keeps its size",
    )


@dataclass(frozen=True, slots=True)
class PoolPlan:
    """What one pass does about one pool: its cluster (exactly as a platform's entry, for the applier),
    and the outcome of admission on it (capacity, MIG layout, who is admitted)."""

    cluster: PlatformPlan
    mode: str | None  # shared | dedicated; None when the pool is gone or invalid and its cluster says none
    capacity: Mapping[str, FamilyCapacity] = field(default_factory=dict)
    # host uid -> GPUs in MIG mode with their instances (docs/planning.md); empty without MIG
    mig: Mapping[str, Sequence[Mapping[str, Any]]] = field(default_factory=dict)
    mig_config: Mapping[str, Any] | None = None
    scaling: ScalingPlan = field(default_factory=lambda: ScalingPlan(None))
    admitted: tuple[WorkloadKey, ...] = ()  # workloads holding GPUs of the pool after this pass
    # Hosts by MIG layout: one worker machine pool each, labelled nvidia.com/mig.config (section 10);
    # hosts not listed stay in worker-pool. ``mig_usage``: memory slices used/free/stranded.
    machine_pools: tuple[MigMachinePool, ...] = ()
    mig_usage: MigUsage | None = None
    mig_notes: tuple[str, ...] = ()  # recorded layouts that were dropped, and why
    # A bundle-built pool's own cluster profile uids once this pass is carried out (its status records
    # them, so that a change of its bundle is seen); None for other pools.
    own_profiles: tuple[str, ...] | None = None
    # The workload a pool was provisioned for (docs/bundles.md): its name, which is the pool's; else None.
    provisioned_for: str | None = None

    @property
    def namespace(self) -> str:
        return self.cluster.namespace

    @property
    def name(self) -> str:
        return self.cluster.name

    @property
    def key(self) -> PoolKey:
        return self.cluster.key

    @property
    def action(self) -> Action:
        return self.cluster.action

    @property
    def reason(self) -> Reason | None:
        return self.cluster.reason

    @property
    def message(self) -> str:
        return self.cluster.message

    @property
    def mutating(self) -> bool:
        return self.cluster.mutating

    @property
    def labels(self) -> dict[str, str]:
        """The labels its cluster is created with (kind ComputePool, the mode it is made for and, for a
        provisioned pool, the kind of what it is provisioned for)."""
        provisioned = "AIWorkload" if self.provisioned_for is not None else None
        return pool_cluster_labels(self.namespace, self.name, self.mode or "shared", provisioned)

    def to_json(self) -> dict[str, Any]:
        cluster = self.cluster.to_json()
        return {
            "namespace": self.namespace,
            "name": self.name,
            "mode": self.mode,
            "action": cluster["action"],
            "reason": cluster["reason"],
            "message": cluster["message"],
            "controlPlane": cluster["controlPlane"],
            "workers": cluster["workers"],
            "gpus": cluster["gpus"],
            "capacity": {
                family: {"total": c.total, "admitted": c.admitted, "free": c.free}
                for family, c in sorted(self.capacity.items())
            },
            "mig": {host: [dict(g) for g in gpus] for host, gpus in sorted(self.mig.items())},
            "migConfig": dict(self.mig_config) if self.mig_config is not None else None,
            "scaling": self.scaling.to_json(),
            **({"profiles": cluster["profiles"]} if "profiles" in cluster else {}),
            **({"provisionedFor": self.provisioned_for} if self.provisioned_for is not None else {}),
        }


@dataclass(frozen=True, slots=True)
class WorkloadPlan:
    """What one pass does about one workload (an AIWorkload or a shared-mode MLPlatform) in one pool.

    ``gpus`` and ``mig`` are what it holds after this pass. ``pool_running``: its pool's cluster is
    Running and kept by this plan, so its profiles can be attached now (else an admitted workload's
    phase is Pending, PoolNotReady). ``cluster_profiles``: its WorkloadProfile's, to attach while it is
    admitted (empty when the plan cannot read them, e.g. it was removed: the status branch knows).
    """

    namespace: str
    name: str
    kind: str
    pool: str | None
    action: WorkloadAction
    reason: Reason | None
    message: str
    gpus: tuple[GpuUnit, ...] = ()
    mig: tuple[MigInstance, ...] = ()
    pool_running: bool = False
    cluster_profiles: tuple[ClusterProfileRef, ...] = ()
    replicas: int = 1
    gpu_replicas: tuple[int, ...] = ()  # the replica of each of ``gpus`` (empty: all replica 0)
    position: int | None = None  # 1-based place among its pool's pending workloads
    # Placed through an Environment (docs/environments.md): its name and what each candidate said.
    environment: str | None = None
    candidates: tuple[Candidate, ...] = ()

    @property
    def key(self) -> WorkloadKey:
        return (self.namespace, self.name)

    @property
    def sort_key(self) -> tuple[str, str, int, str]:
        # A workload that moved is listed twice: leaving its old pool first.
        return (self.namespace, self.name, 0 if self.action is WorkloadAction.REMOVE else 1, self.pool or "")

    def gpu_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for unit in self.gpus:
            counts[unit.family] = counts.get(unit.family, 0) + 1
        return dict(sorted(counts.items()))

    def to_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "pool": self.pool,
            "action": str(self.action),
            "reason": str(self.reason) if self.reason is not None else None,
            "message": self.message,
            "replicas": self.replicas,
            "gpus": self.gpu_counts(),
            "mig": [
                {
                    "host": m.host_uid,
                    "gpu": m.gpu,
                    "profile": m.profile,
                    "start": m.start,
                    "replica": m.replica,
                }
                for m in sorted(self.mig, key=lambda m: (m.replica, m.host_uid, m.gpu, m.start))
            ]
            if self.mig
            else [],
            "bound": [b.to_json() for b in replica_bindings(self.gpus, self.gpu_replicas)]
            if self.gpus
            else [],
            "position": self.position,
            "environment": self.environment,
            "candidates": [c.to_json() for c in self.candidates],
        }


# Workload actions that make ``plan`` exit 1 (as rejected and invalid platforms do). A pending workload
# waits for capacity or for its pool: that is not an error of the repository.
_NOT_PLACEABLE = frozenset({WorkloadAction.REJECTED, WorkloadAction.INVALID})


@dataclass(frozen=True, slots=True)
class Plan:
    revision: str | None
    platforms: list[PlatformPlan]
    diagnostics: list[Diagnostic]
    # The machines the plan was made from: the applier sends their names and addresses (plan = apply).
    machines: Mapping[str, Machine] = field(default_factory=dict)
    pools: list[PoolPlan] = field(default_factory=list)
    workloads: list[WorkloadPlan] = field(default_factory=list)
    # The deletion guard's sentence for the status commit when the revision approves deletions
    # (``Reconciler-Allow-Deletions``); "" otherwise. The same for every target of a pass.
    deletions_note: str = ""
    # Each namespace's GPU quota per family as the plan leaves it (docs/environments.md).
    quotas: tuple[QuotaUse, ...] = ()

    def to_json(self, scaling: Mapping[PoolKey, ScalingPlan] | None = None) -> dict[str, Any]:
        """Exactly the ``plan --format json`` object of docs/planning.md; ``scaling``: the scaling
        entries of pools to show instead of the plan's own (see :meth:`with_scaling`)."""
        plan = self.with_scaling(scaling) if scaling else self
        return {
            "revision": plan.revision,
            "platforms": [p.to_json() for p in sorted(plan.platforms, key=lambda p: p.key)],
            "pools": [p.to_json() for p in sorted(plan.pools, key=lambda p: p.key)],
            "workloads": [w.to_json() for w in sorted(plan.workloads, key=lambda w: w.sort_key)],
            "quotas": [q.to_json() for q in sorted(plan.quotas, key=lambda q: (q.namespace, q.family))],
            "diagnostics": [d.to_json() for d in plan.diagnostics],
        }

    def with_scaling(self, scaling: Mapping[PoolKey, ScalingPlan]) -> Plan:
        """The plan with these pools' scaling entries (the scaling stage's decisions); others keep theirs.
        A pending workload for which a demand scale-up is on its way says so in its message."""
        pools = [replace(p, scaling=scaling[p.key]) if p.key in scaling else p for p in self.pools]
        notes = {w: note for e in scaling.values() for w, note in e.waiting.items()}
        workloads = [
            replace(w, message=f"{w.message}; {notes[f'{w.namespace}/{w.name}']}")
            if w.action is WorkloadAction.PENDING
            and f"{w.namespace}/{w.name}" in notes
            and notes[f"{w.namespace}/{w.name}"] not in w.message
            else w
            for w in self.workloads
        ]
        return replace(self, pools=pools, workloads=workloads)

    @property
    def placeable(self) -> bool:
        """True when no platform, pool or workload is rejected or invalid, and no grow is held by a GPU
        quota (``plan`` exits 0)."""
        clusters = [*self.platforms, *(p.cluster for p in self.pools)]
        held = any(p.reason is Reason.QUOTA_EXCEEDED for p in clusters)  # a grow its quota holds back
        return (
            not held
            and not any(p.action in (Action.REJECTED, Action.INVALID) for p in clusters)
            and not any(w.action in _NOT_PLACEABLE for w in self.workloads)
        )

    def get(self, namespace: str, name: str) -> PlatformPlan | None:
        return next((p for p in self.platforms if p.key == (namespace, name)), None)

    def get_pool(self, namespace: str, name: str) -> PoolPlan | None:
        return next((p for p in self.pools if p.key == (namespace, name)), None)

    def get_workloads(self, namespace: str, name: str) -> list[WorkloadPlan]:
        """A workload's entries: one, or two when it moves between pools (``remove`` first)."""
        return sorted((w for w in self.workloads if w.key == (namespace, name)), key=lambda w: w.sort_key)


def gpus_of(hosts: Sequence[str], machines: Mapping[str, Machine]) -> dict[str, int]:
    """GPUs per canonical family on the given hosts (hosts unknown to the inventory count none)."""
    totals: dict[str, int] = {}
    for uid in hosts:
        m = machines.get(uid)
        if m is not None and m.gpu_family is not None and m.gpu_count > 0:
            totals[m.gpu_family] = totals.get(m.gpu_family, 0) + m.gpu_count
    return dict(sorted(totals.items()))


@dataclass(frozen=True, slots=True)
class _Invalid:
    """A workload whose document is invalid: its kind and why (its admission, if any, is kept)."""

    kind: str
    reason: Reason
    message: str
