"""Desired allocations vs existing clusters -> the actions of one pass (pure; docs/planning.md).

Decisions the design leaves open, written down here:

- Action reasons: ``create`` and ``replace`` carry ``Provisioning``, ``scale`` carries ``Scaling``,
  ``delete`` carries ``Deleting``, ``unchanged`` carries ``Provisioned`` when its cluster is Running and
  ``Provisioning`` otherwise, and ``Deleting`` while its cluster is being deleted (after a replace, or
  removed by hand): the platform is created again once that cluster is gone.
- Prune guard: when the desired state is incomplete, or more platforms' clusters would be deleted than
  ``max_deletions`` allows, none is deleted; each such platform is reported with action ``unchanged``,
  reason ``PruneBlocked`` and a message saying how many would be deleted and the limit. A cluster already
  ``Deleting`` (deleted by an earlier pass) is reported ``unchanged`` with reason ``Deleting``: nothing
  is left to do, and it does not count towards the limit. The applier only
  acts on create, scale, replace and delete, so a blocked prune is a no-op by construction.
- A rejected or suspended platform that has a cluster is reported with that cluster's hosts: they stay.
- An invalid platform is reported with reason ``ReferenceNotFound`` when one of its diagnostics has that
  reason (a referenced resource was not found), else ``InvalidSpec``.
- A pass spans several Palette targets (:func:`plan_targets`); the prune guard counts the deletions of
  the whole pass, and its message gives that one count. Pools' clusters count like platforms'.
- A shard (``run --namespaces``) plans only its namespaces (:func:`select_namespaces`, and the
  ``namespaces`` argument of :func:`plan_targets`): a managed cluster of a namespace it does not own is
  not planned, never an orphan, and not counted by its prune guard.

Pools and workloads (docs/pools.md):

- A ComputePool gets a cluster entry exactly as a dedicated platform does (:attr:`PoolPlan.cluster`,
  ``kind`` ComputePool), placed by :func:`reconciler.allocate.place` in one (namespace, name) order with
  the platforms. Then, per pool, admission (:func:`reconciler.placement.admission.admit_pool`) runs on
  the GPUs of the hosts *as planned* with the previous admissions the caller read from the status branch,
  so a pool being created already admits its workloads in the same plan.
- A workload admitted to a pool whose cluster is not Running yet is ``admit`` here (its message says the
  profiles are attached once the pool cluster is Running); its status phase is Pending, reason
  PoolNotReady, decided by status from :attr:`WorkloadPlan.pool_running`.
- A pool that is invalid, rejected, suspended or removed admits nobody new (``pending``, PoolNotReady);
  workloads it admitted before keep their GPUs while its hosts stay.
- Invalid is not absent: what holds something and is hidden by the revision is carried as invalid
  (:func:`reconciler.manifests.carry.carry_held`, the carried platforms and pools stay in the target of
  their cluster); a pool the plan cannot read keeps the MIG strategy its records show; an invalid
  workload asks for exactly the GPUs and MIG instances it holds, so it keeps them.
- An invalid workload that held GPUs keeps them (reported ``invalid``, its GPUs listed); an invalid
  workload never admitted is ``invalid`` with no pool when the plan cannot read it (``pool`` null).
  An invalid MLPlatform is listed under ``platforms`` unless a previous admission shows it was a tenant.
- A workload that moved to another pool has two entries: ``remove`` in the pool it leaves, and its
  decision in the new one.
- A valid workload whose pool is not planned in this pass (its pool has no Palette target) is ``pending``
  PoolNotReady with the routing's reason; it, or an invalid one, that holds GPUs there keeps them (named
  with that pool), so nothing it holds is forgotten.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Protocol

from reconciler.allocate import DELETING_STATE, Allocation, Decision, Rejection, place, split_clusters
from reconciler.deletions import DeletionGuard
from reconciler.inventory import Inventory, Machine, Role
from reconciler.manifests.carry import carry_held
from reconciler.model.conditions import Reason
from reconciler.model.desired import DesiredState, PlatformKey
from reconciler.model.diagnostics import UNKNOWN_GPU_FAMILY, Diagnostic
from reconciler.model.gpu import GpuFamily, canonical_family
from reconciler.model.observed import ClusterState, ManagedCluster
from reconciler.model.pools import (
    PLATFORM_KIND,
    POOL_KIND,
    POOL_MODE_LABEL,
    MigRequest,
    PoolKey,
    WorkloadKey,
    WorkloadRequest,
    canonical_limits,
    cluster_kind,
    pool_cluster_labels,
    pool_ref_of,
    tenants_by_pool,
)
from reconciler.model.resources import (
    AIWorkload,
    ClusterProfileRef,
    ComputePool,
    GpuRequest,
    MLPlatform,
    WorkloadProfile,
)
from reconciler.placement.admission import (
    FamilyCapacity,
    GpuRef,
    GpuUnit,
    MigInstance,
    PoolState,
    PreviousAdmission,
    PreviousAdmissions,
    WorkloadAction,
    WorkloadAdmission,
    admit_pool,
    gpu_units,
    replica_bindings,
)
from reconciler.placement.mig import MigUsage
from reconciler.placement.mig_admission import GpuLayout, MigMachinePool, PoolMigPlanner, relayout_summary
from reconciler.profiles import cluster_profiles, reject_unbuildable
from reconciler.resolve import (
    EVERY_NAMESPACE,
    NamespaceSelector,
    Routing,
    Target,
    compute_profile,
    is_tenant,
)

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


# The actions the applier carries out; every other action leaves Palette as it is.
MUTATING = frozenset({Action.CREATE, Action.SCALE, Action.REPLACE, Action.DELETE})

# How a log line or a summary says an action happened ("3 created, 1 scaled").
DONE: dict[Action, str] = {
    Action.CREATE: "created",
    Action.SCALE: "scaled",
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
        message=f"ScalingPolicy {ref.name} is evaluated by run from utilisation; plan keeps spec.gpus",
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
        """The labels its cluster is created with (kind ComputePool and the mode it is made for)."""
        return pool_cluster_labels(self.namespace, self.name, self.mode or "shared")

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
            ],
            "bound": [b.to_json() for b in replica_bindings(self.gpus, self.gpu_replicas)],
            "position": self.position,
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

    def to_json(self, scaling: Mapping[PoolKey, ScalingPlan] | None = None) -> dict[str, Any]:
        """Exactly the ``plan --format json`` object of docs/planning.md; ``scaling``: the scaling
        entries of pools to show instead of the plan's own (see :meth:`with_scaling`)."""
        plan = self.with_scaling(scaling) if scaling else self
        return {
            "revision": plan.revision,
            "platforms": [p.to_json() for p in sorted(plan.platforms, key=lambda p: p.key)],
            "pools": [p.to_json() for p in sorted(plan.pools, key=lambda p: p.key)],
            "workloads": [w.to_json() for w in sorted(plan.workloads, key=lambda w: w.sort_key)],
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
        """True when no platform, pool or workload is rejected or invalid (``plan`` exits 0)."""
        clusters = [*self.platforms, *(p.cluster for p in self.pools)]
        return not any(p.action in (Action.REJECTED, Action.INVALID) for p in clusters) and not any(
            w.action in _NOT_PLACEABLE for w in self.workloads
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


def _is_reference_problem(diagnostics: Sequence[Diagnostic]) -> bool:
    return any(d.reason == Reason.REFERENCE_NOT_FOUND for d in diagnostics)


def _machines_of(hosts: Sequence[str], machines: Mapping[str, Machine]) -> dict[str, Machine]:
    return {uid: machines[uid] for uid in sorted(hosts) if uid in machines}


def _kept(
    key: PlatformKey,
    action: Action,
    reason: Reason,
    message: str,
    cluster: ManagedCluster | None,
    machines: Mapping[str, Machine],
) -> PlatformPlan:
    """A platform whose cluster (if any) is left exactly as it is."""
    if cluster is None:
        return PlatformPlan(key[0], key[1], action, reason, message)
    return PlatformPlan(
        key[0],
        key[1],
        action,
        reason,
        message,
        control_plane=cluster.control_plane,
        workers=cluster.workers,
        gpus=gpus_of(cluster.workers, machines),
        existing=cluster,
        arch=cluster.arch,
        machines=_machines_of(cluster.hosts, machines),
    )


def _decided(
    key: PlatformKey, decision: Decision, cluster: ManagedCluster | None, machines: Mapping[str, Machine]
) -> PlatformPlan:
    if cluster is not None and cluster.held is not None:  # its membership is in doubt: leave it as it is
        state = Reason.PROVISIONED if cluster.known_state is ClusterState.RUNNING else Reason.PROVISIONING
        return _kept(key, Action.UNCHANGED, state, cluster.held, cluster, machines)
    if isinstance(decision, Rejection):
        return _kept(key, Action.REJECTED, decision.reason, decision.message, cluster, machines)
    alloc: Allocation = decision
    common: dict[str, Any] = {
        "control_plane": alloc.control_plane,
        "workers": alloc.workers,
        "gpus": alloc.gpus,
        "existing": cluster,
        "arch": alloc.arch,
        "machines": _machines_of(alloc.control_plane + alloc.workers, machines),
    }
    hosts = len(alloc.control_plane) + len(alloc.workers)
    if cluster is None:
        msg = f"create cluster on {hosts} {alloc.arch} hosts"
        return PlatformPlan(
            *key,
            Action.CREATE,
            Reason.PROVISIONING,
            msg,
            add_workers=alloc.workers,
            add_control_plane=alloc.control_plane,
            **common,
        )
    if alloc.replaces:
        msg = f"replace the {cluster.arch or 'existing'} cluster {cluster.name} by a new {alloc.arch} cluster"
        return PlatformPlan(
            *key,
            Action.REPLACE,
            Reason.PROVISIONING,
            msg,
            add_workers=alloc.workers,
            add_control_plane=alloc.control_plane,
            remove_workers=cluster.workers,
            remove_control_plane=cluster.control_plane,
            **common,
        )
    add_w = tuple(sorted(set(alloc.workers) - set(cluster.workers)))
    rem_w = tuple(sorted(set(cluster.workers) - set(alloc.workers)))
    add_cp = tuple(sorted(set(alloc.control_plane) - set(cluster.control_plane)))
    rem_cp = tuple(sorted(set(cluster.control_plane) - set(alloc.control_plane)))
    if cluster.known_state is DELETING_STATE:
        msg = f"cluster {cluster.name} is being deleted; it is placed again once it is gone"
        return PlatformPlan(*key, Action.UNCHANGED, Reason.DELETING, msg, **common)
    if not (add_w or rem_w or add_cp or rem_cp):
        reason = Reason.PROVISIONED if cluster.known_state is ClusterState.RUNNING else Reason.PROVISIONING
        return PlatformPlan(
            *key, Action.UNCHANGED, reason, f"cluster {cluster.name} is {cluster.state}", **common
        )
    parts = []
    if add_w or rem_w:
        parts.append(f"workers +{len(add_w)} -{len(rem_w)}")
    if add_cp or rem_cp:
        parts.append(f"control plane +{len(add_cp)} -{len(rem_cp)}")
    return PlatformPlan(
        *key,
        Action.SCALE,
        Reason.SCALING,
        f"scale {cluster.name} in place: " + ", ".join(parts),
        add_workers=add_w,
        remove_workers=rem_w,
        add_control_plane=add_cp,
        remove_control_plane=rem_cp,
        **common,
    )


@dataclass(frozen=True, slots=True)
class Capacity:
    """Free hosts of one kind after a plan: GPU workers per family, CPU workers, control-plane candidates."""

    kind: str  # a canonical GPU family, "cpu-worker" or "control-plane"
    hosts: int
    gpus: int


def free_capacity(plan: Plan, inventory: Inventory) -> list[Capacity]:
    """What stays free once the plan is carried out (hosts of kept, rejected and deleted clusters count
    as used: deletions free their hosts only once Palette has released them). Pools' hosts count too."""
    used: set[str] = set()
    for p in [*plan.platforms, *(pool.cluster for pool in plan.pools)]:
        used.update(p.control_plane, p.workers)
        if p.existing is not None:
            used.update(p.existing.hosts)
    totals: dict[str, list[int]] = {}
    for m in inventory.machines:
        if not m.available or m.uid in used:
            continue
        if m.role is Role.CONTROL_PLANE:
            kind = "control-plane"
        elif m.gpu_family is not None and m.gpu_count > 0:
            kind = m.gpu_family
        else:
            kind = "cpu-worker"
        entry = totals.setdefault(kind, [0, 0])
        entry[0] += 1
        entry[1] += m.gpu_count if kind != "control-plane" else 0
    order = {"control-plane": 1, "cpu-worker": 0}
    return [
        Capacity(kind, hosts, gpus)
        for kind, (hosts, gpus) in sorted(totals.items(), key=lambda kv: (order.get(kv[0], -1), kv[0]))
    ]


@dataclass(frozen=True, slots=True)
class _Entries:
    """The cluster entries of one target before the prune guard: platforms and pools, by key."""

    desired: DesiredState  # with unbuildable platforms and pools moved to invalid
    platforms: dict[PlatformKey, PlatformPlan]
    pools: dict[PoolKey, PlatformPlan]
    machines: Mapping[str, Machine]

    def all(self) -> list[PlatformPlan]:
        return [*self.platforms.values(), *self.pools.values()]


def _invalid_entry(
    key: PlatformKey,
    problems: Sequence[Diagnostic],
    cluster: ManagedCluster | None,
    machines: Mapping[str, Machine],
) -> PlatformPlan:
    reason = Reason.REFERENCE_NOT_FOUND if _is_reference_problem(problems) else Reason.INVALID_SPEC
    first = sorted(problems, key=Diagnostic.sort_key)[0].message if problems else "invalid manifest"
    suffix = f"; cluster {cluster.name} kept" if cluster else ""
    return _kept(key, Action.INVALID, reason, first + suffix, cluster, machines)


def _orphan_entry(
    key: PlatformKey, what: str, cluster: ManagedCluster, machines: Mapping[str, Machine]
) -> PlatformPlan:
    if cluster.known_state is DELETING_STATE:
        # Already on its way out (an earlier pass deleted it): not a new deletion for the guard.
        msg = f"{what} removed from the repository; cluster {cluster.name} is being deleted"
        return _kept(key, Action.UNCHANGED, Reason.DELETING, msg, cluster, machines)
    msg = f"{what} removed from the repository; delete cluster {cluster.name}"
    return _kept(key, Action.DELETE, Reason.DELETING, msg, cluster, machines)


def with_pool_sizes(
    desired: DesiredState, sizes: Mapping[PoolKey, Mapping[GpuFamily, int]] | None
) -> DesiredState:
    """The desired state with each sized pool requesting its current size (GPUs per family) instead of
    its ``spec.gpus``: a pool with a scaling policy (docs/pools.md, the size computed by
    :func:`reconciler.scaling.current_size`). Pools not in ``sizes`` keep their ``spec.gpus``."""
    if not sizes:
        return desired
    resources = dict(desired.resources)
    for key, size in sizes.items():
        identity = (POOL_KIND, *key)
        loaded = resources.get(identity)
        pool = loaded.resource if loaded is not None else None
        if loaded is None or not isinstance(pool, ComputePool):
            continue
        gpus = [GpuRequest(family=f, count=n) for f, n in sorted(size.items()) if n > 0]
        resized = pool.model_copy(update={"spec": pool.spec.model_copy(update={"gpus": gpus})})
        resources[identity] = replace(loaded, resource=resized)
    return replace(desired, resources=resources)


def _entries(
    desired: DesiredState,
    inventory: Inventory,
    clusters: Sequence[ManagedCluster],
    pool_modes: Mapping[PoolKey, str] | None = None,
    tenants: Mapping[WorkloadKey, _Invalid] | None = None,
) -> _Entries:
    """Every dedicated platform and pool of the desired state and every managed cluster gets one entry;
    a cluster whose platform or pool is gone is a ``delete`` here (the prune guard, over the whole pass,
    comes after). ``tenants``: invalid workloads, among them invalid MLPlatforms known to be tenants,
    which are workload entries, not platform entries (unless they have a platform cluster)."""
    desired = reject_unbuildable(desired)  # no cluster profile: invalid, InvalidSpec (docs/validation.md)
    machines = inventory.by_uid()
    platform_clusters, pool_clusters = split_clusters(clusters)
    decisions = place(desired, inventory, clusters, pool_modes, machines=machines)

    platforms: dict[PlatformKey, PlatformPlan] = {}
    for p in desired.platforms():
        if is_tenant(p):
            continue  # a tenant of a pool: a workload entry, never a cluster
        key = (p.metadata.namespace, p.metadata.name)
        cluster = platform_clusters.get(key)
        if p.spec.suspend:
            msg = f"suspended; cluster {cluster.name} left as it is" if cluster else "suspended; no cluster"
            platforms[key] = _kept(key, Action.SUSPENDED, Reason.SUSPENDED, msg, cluster, machines)
        else:
            platforms[key] = _decided(key, decisions.platforms[key], cluster, machines)

    pools: dict[PoolKey, PlatformPlan] = {}
    for pool in desired.of_kind(ComputePool):
        key = (pool.metadata.namespace, pool.metadata.name)
        cluster = pool_clusters.get(key)
        if pool.spec.suspend:
            msg = f"suspended; cluster {cluster.name} left as it is" if cluster else "suspended; no cluster"
            pools[key] = _kept(key, Action.SUSPENDED, Reason.SUSPENDED, msg, cluster, machines)
        else:
            pools[key] = _decided(key, decisions.pools[key], cluster, machines)

    for (kind, ns, name), problems in sorted(desired.invalid.items()):
        key = (ns, name)
        if kind == PLATFORM_KIND and key not in platforms:
            if key in (tenants or {}) and key not in platform_clusters:
                continue  # a tenant that held GPUs in a pool: listed under workloads
            platforms[key] = _invalid_entry(key, problems, platform_clusters.get(key), machines)
        elif kind == POOL_KIND and key not in pools:
            pools[key] = _invalid_entry(key, problems, pool_clusters.get(key), machines)

    for key in sorted(k for k in platform_clusters if k not in platforms):
        platforms[key] = _orphan_entry(key, "platform", platform_clusters[key], machines)
    for key in sorted(k for k in pool_clusters if k not in pools):
        pools[key] = _orphan_entry(key, "pool", pool_clusters[key], machines)
    return _Entries(
        desired,
        dict(sorted(platforms.items())),
        {k: replace(e, kind=POOL_KIND) for k, e in sorted(pools.items())},
        machines,
    )


def _leaving(
    found: _Entries, previous: PreviousAdmissions, invalid: Mapping[WorkloadKey, _Invalid]
) -> set[WorkloadKey]:
    """Admitted workloads (holding GPUs or MIG instances in a pool of ``found``) that this pass would
    remove: gone from the repository, not invalid (an invalid one keeps what it holds), not moved."""
    present = {(t.metadata.namespace, t.metadata.name) for t in _tenants(found.desired)} | set(invalid)
    return {
        a.key
        for key in found.pools
        for a in previous.get(key, ())
        if (a.gpus or a.mig) and a.key not in present
    }


@dataclass(frozen=True, slots=True)
class _Guarded:
    """The deletion guard's verdict over a whole pass: why nothing is removed ("" when it may be), the
    workloads it holds back, and the sentence for the status commit."""

    blocked: str
    held_back: frozenset[WorkloadKey]
    note: str


def _prune_guard(
    entries: Sequence[PlatformPlan], leaving: set[WorkloadKey], complete: bool, guard: DeletionGuard
) -> _Guarded:
    """Counted over the whole pass: clusters of platforms and pools, and admitted workloads removed."""
    deleted = {(p.kind, p.key) for p in entries if p.action is Action.DELETE}
    kinds = [kind for kind, _ in sorted(deleted)]
    blocked = guard.blocked(kinds, len(leaving), complete)
    held_back = frozenset(leaving) if blocked else frozenset()
    return _Guarded(blocked, held_back, guard.note(kinds, len(leaving), blocked) or "")


def _blocked(entry: PlatformPlan, message: str) -> PlatformPlan:
    if not message or entry.action is not Action.DELETE:
        return entry
    return replace(entry, action=Action.UNCHANGED, reason=Reason.PRUNE_BLOCKED, message=message)


# --- admission into pools --------------------------------------------------------------------------


def _tenants(desired: DesiredState) -> list[AIWorkload | MLPlatform]:
    """Valid AIWorkloads and shared-mode MLPlatforms."""
    return [*desired.of_kind(AIWorkload), *(p for p in desired.platforms() if is_tenant(p))]


def _workload_profiles(
    desired: DesiredState, resource: AIWorkload | MLPlatform
) -> tuple[ClusterProfileRef, ...]:
    ref = resource.spec.workload_profile_ref
    found = desired.get(WorkloadProfile, resource.metadata.namespace, ref.name) if ref is not None else None
    return cluster_profiles(None, found)


@dataclass(frozen=True, slots=True)
class _Invalid:
    """A workload whose document is invalid: its kind and why (its admission, if any, is kept)."""

    kind: str
    reason: Reason
    message: str


def _invalid_workloads(desired: DesiredState, previous: PreviousAdmissions) -> dict[WorkloadKey, _Invalid]:
    """Invalid AIWorkloads, and invalid MLPlatforms that a previous admission shows were tenants."""
    tenants_before = {a.key for admissions in previous.values() for a in admissions}
    out: dict[WorkloadKey, _Invalid] = {}
    for (kind, ns, name), problems in sorted(desired.invalid.items()):
        if kind == "AIWorkload" or (kind == PLATFORM_KIND and (ns, name) in tenants_before):
            reason = Reason.REFERENCE_NOT_FOUND if _is_reference_problem(problems) else Reason.INVALID_SPEC
            first = sorted(problems, key=Diagnostic.sort_key)[0].message if problems else "invalid manifest"
            out[(ns, name)] = _Invalid(kind, reason, first)
    return out


def _kept_request(
    key: WorkloadKey, kind: str, held: PreviousAdmission, units: Sequence[GpuUnit]
) -> WorkloadRequest:
    """An invalid workload asks for exactly what it holds, whole GPUs and MIG instances, so that
    admission keeps it on them (never more): as many replicas as it holds, each the shape of its
    replica 0."""
    by_ref = {u.ref: u for u in units}
    replica_of = held.replica_of()
    whole: dict[GpuFamily, int] = {}
    for ref in held.gpus:
        unit = by_ref.get(ref)
        if unit is not None and replica_of.get(ref, 0) == 0:
            whole[unit.family] = whole.get(unit.family, 0) + 1
    mig: dict[tuple[GpuFamily, str], int] = {}
    for instance in held.mig:
        gpu = by_ref.get(GpuRef(instance.host_uid, instance.gpu))
        if gpu is not None and instance.replica == 0:
            mig[(gpu.family, instance.profile)] = mig.get((gpu.family, instance.profile), 0) + 1
    replicas = len(set(replica_of.values()) | {i.replica for i in held.mig}) or 1
    return WorkloadRequest(
        key=key,
        kind=kind,
        whole=dict(sorted(whole.items())),
        mig=tuple(MigRequest(f, p, n) for (f, p), n in sorted(mig.items())),
        replicas=replicas,
    )


def _mig_strategy(
    pool: ComputePool | None, layouts: Sequence[GpuLayout], held: Sequence[PreviousAdmission]
) -> str:
    """The pool's ``mig.strategy``; for a pool the plan cannot read (invalid, or hidden by an incomplete
    revision), the one its records show: ``mixed`` while it has MIG layouts or instances held, so that
    nothing it holds is lost (invalid is not absent)."""
    if pool is not None:
        return pool.spec.mig.strategy if pool.spec.mig is not None else "none"
    return "mixed" if layouts or any(a.mig for a in held) else "none"


def _not_ready(
    key: PoolKey, pool: ComputePool | None, entry: PlatformPlan, desired: DesiredState
) -> str | None:
    """Why the pool takes no new workload this pass, or None."""
    name = key[1]
    if pool is None:
        if (POOL_KIND, *key) in desired.invalid:
            return f"pool {name} is invalid (see its errors)"
        return f"pool {name} is removed from the repository"
    if entry.action is Action.REJECTED:
        return f"pool {name} is rejected ({entry.reason}): {entry.message}"
    if entry.action is Action.SUSPENDED:
        return f"pool {name} is suspended"
    if entry.reason is Reason.DELETING:
        return f"pool {name}: {entry.message}"
    return None


def _pool_running(entry: PlatformPlan) -> bool:
    cluster = entry.existing
    return (
        cluster is not None
        and cluster.known_state is ClusterState.RUNNING
        and entry.action
        in (Action.UNCHANGED, Action.SCALE, Action.SUSPENDED, Action.REJECTED, Action.INVALID)
        and entry.reason is not Reason.DELETING
    )


def _workload_entry(
    decision: WorkloadAdmission,
    kind: str,
    running: bool,
    invalid: _Invalid | None,
    profiles: tuple[ClusterProfileRef, ...],
) -> WorkloadPlan:
    action, reason, message = decision.action, decision.reason, decision.message
    if invalid is not None and action is not WorkloadAction.REMOVE:
        held = f"; keeps its {len(decision.gpus)} GPU(s) in pool {decision.pool[1]}" if decision.gpus else ""
        action, reason, message = WorkloadAction.INVALID, invalid.reason, invalid.message + held
    elif action is WorkloadAction.ADMIT and not running:
        message += f"; its profiles are attached once the cluster of pool {decision.pool[1]} is Running"
    return WorkloadPlan(
        decision.key[0],
        decision.key[1],
        kind,
        decision.pool[1],
        action,
        reason,
        message,
        gpus=decision.gpus,
        mig=decision.mig,
        pool_running=running,
        cluster_profiles=profiles if action in (WorkloadAction.ADMIT, WorkloadAction.ADMITTED) else (),
        replicas=decision.replicas,
        gpu_replicas=decision.gpu_replicas,
        position=decision.position if action is WorkloadAction.PENDING else None,
    )


def _admit(
    found: _Entries,
    pool_entries: Mapping[PoolKey, PlatformPlan],
    previous: PreviousAdmissions,
    invalid: Mapping[WorkloadKey, _Invalid],
    layouts: PreviousLayouts,
    guarded: _Guarded | None = None,
) -> tuple[list[PoolPlan], list[WorkloadPlan]]:
    """Admission into every pool of one target, on the hosts as planned (after the prune guard).
    ``invalid``: the invalid workloads of the whole desired state (not only of this target);
    ``layouts``: the MIG layouts each pool's status recorded (``parse_mig_layouts``); ``guarded``: the
    deletion guard's verdict (a held-back workload asks for exactly what it holds and keeps it)."""
    held_back = guarded.held_back if guarded is not None else frozenset()
    desired = found.desired
    tenants = {(t.metadata.namespace, t.metadata.name): t for t in _tenants(desired)}
    by_pool = tenants_by_pool(tenants.values())
    pools: list[PoolPlan] = []
    workloads: list[WorkloadPlan] = []
    for key, entry in sorted(pool_entries.items()):
        pool = desired.get(ComputePool, *key)
        profile = compute_profile(desired, pool) if pool is not None else None
        units = gpu_units(found.machines[u] for u in sorted(entry.workers) if u in found.machines)
        held = list(previous.get(key, ()))
        requests = list(by_pool.get(key, []))
        requests += [_kept_request(a.key, invalid[a.key].kind, a, units) for a in held if a.key in invalid]
        requests += [_kept_request(a.key, a.kind, a, units) for a in held if a.key in held_back]
        mode: str | None = pool.spec.mode if pool is not None else None
        if mode is None and entry.existing is not None:
            mode = entry.existing.labels.get(POOL_MODE_LABEL)
        state = PoolState(
            key,
            mode=mode or "shared",
            gpus=units,
            gpu_limits=canonical_limits(profile.spec.gpu_limits) if profile is not None else {},
            profile=profile.metadata.name if profile is not None else None,
            mig_strategy=_mig_strategy(pool, layouts.get(key, ()), held),
            not_ready=_not_ready(key, pool, entry, desired),
        )
        planner = (
            PoolMigPlanner(state, layouts.get(key, ()), held, requests)
            if state.mig_strategy == "mixed"
            else None
        )
        result = admit_pool(state, requests, held, planner)
        outcome = planner.finish(result) if planner is not None else None
        running = _pool_running(entry)
        kinds = {a.key: a.kind for a in held} | {r.key: r.kind for r in requests}
        for wkey, decision in result.workloads.items():
            tenant = tenants.get(wkey)
            bad = invalid.get(wkey)
            kind = kinds.get(wkey, "AIWorkload")
            profiles = _workload_profiles(desired, tenant) if tenant is not None else ()
            entry_plan = _workload_entry(decision, kind, running, bad, profiles)
            if wkey in held_back and guarded is not None and decision.action is WorkloadAction.ADMITTED:
                entry_plan = replace(entry_plan, reason=Reason.PRUNE_BLOCKED, message=guarded.blocked)
            workloads.append(entry_plan)
        admitted = tuple(
            k
            for k, d in result.workloads.items()
            if (d.gpus or d.mig) and d.action is not WorkloadAction.REMOVE
        )
        mig_fields: dict[str, Any] = {}
        if outcome is not None:
            mig_fields = {
                "mig": outcome.mig,
                "mig_config": outcome.mig_config,
                "machine_pools": outcome.machine_pools,
                "mig_usage": outcome.usage,
                "mig_notes": outcome.notes,
            }
            if outcome.relayout:  # which GPUs of a host are re-laid out: in the message, for the report
                entry = replace(entry, message=f"{entry.message}; {relayout_summary(outcome.relayout)}")
        pools.append(
            PoolPlan(entry, mode, result.capacity, scaling=_scaling(pool), admitted=admitted, **mig_fields)
        )
    return pools, workloads


def _strays(
    desired: DesiredState,
    planned: set[WorkloadKey],
    invalid: Mapping[WorkloadKey, _Invalid],
    unplanned_pools: Mapping[PoolKey, str],
    previous: PreviousAdmissions,
    machines: Mapping[str, Machine],
) -> list[WorkloadPlan]:
    """Workloads no pool of the pass decided: invalid ones, and tenants of a pool that is not planned (it
    has no Palette target). One that holds GPUs in a pool not planned keeps them, named with its pool
    (invalid is not absent; nothing is detached from a pool this pass does not touch)."""
    held = {a.key: (key, a) for key, admissions in sorted(previous.items()) for a in admissions}

    def entry(
        wkey: WorkloadKey, kind: str, pool: str | None, action: WorkloadAction, reason: Reason, msg: str
    ) -> WorkloadPlan:
        where = held.get(wkey)
        if where is None or (pool is not None and where[0] != (wkey[0], pool)):
            return WorkloadPlan(*wkey, kind, pool, action, reason, msg)
        (_, name), admission = where
        units = _held_units(admission, machines)
        msg += f"; keeps its {len(units)} GPU(s) and {len(admission.mig)} MIG instance(s) in pool {name}"
        return WorkloadPlan(*wkey, kind, name, action, reason, msg, gpus=units, mig=admission.mig)

    out: list[WorkloadPlan] = []
    for wkey, bad in invalid.items():
        if wkey not in planned:
            out.append(entry(wkey, bad.kind, None, WorkloadAction.INVALID, bad.reason, bad.message))
    for tenant in _tenants(desired):
        wkey = (tenant.metadata.namespace, tenant.metadata.name)
        pool = pool_ref_of(tenant)
        if wkey in planned or pool is None:
            continue
        why = unplanned_pools.get((wkey[0], pool), "it is not planned in this pass")
        msg = f"pool {pool} cannot be planned: {why}"
        out.append(entry(wkey, tenant.kind, pool, WorkloadAction.PENDING, Reason.POOL_NOT_READY, msg))
    return out


def _held_units(admission: PreviousAdmission, machines: Mapping[str, Machine]) -> tuple[GpuUnit, ...]:
    """The GPUs a previous admission names, as units of the machines that still have them."""
    refs = set(admission.gpus)
    hosts = sorted({r.host_uid for r in refs})
    units = gpu_units(machines[h] for h in hosts if h in machines)
    return tuple(sorted((u for u in units if u.ref in refs), key=lambda u: u.order))


def _carried(
    desired: DesiredState, clusters: Sequence[ManagedCluster], previous: PreviousAdmissions
) -> DesiredState:
    """The desired state with what holds something but is hidden by this revision carried as invalid
    (:func:`reconciler.manifests.carry.carry_held`): clusters of platforms and pools, admitted workloads."""
    held = [(cluster_kind(c.labels), c.namespace, c.platform) for c in clusters]
    admitted = [(a.kind, a.key[0], a.key[1]) for admissions in previous.values() for a in admissions]
    return carry_held(desired, held, admitted)


def make_plan(
    desired: DesiredState,
    inventory: Inventory,
    clusters: Sequence[ManagedCluster],
    *,
    max_deletions: int = 1,
    previous: PreviousAdmissions | None = None,
    pool_modes: Mapping[PoolKey, str] | None = None,
    sizes: Mapping[PoolKey, Mapping[GpuFamily, int]] | None = None,
    scaling: Mapping[PoolKey, ScalingPlan] | None = None,
    previous_layouts: PreviousLayouts | None = None,
    approved_deletions: int | None = None,
) -> Plan:
    """Plan one pass against one inventory: every platform, pool and workload and every managed cluster
    gets an entry. ``previous``: the admissions the status branch recorded, per pool; ``pool_modes``: the
    mode the status branch last reported per pool (used when a pool's cluster lacks its mode label);
    ``sizes``: pools' current sizes (GPUs per family) instead of their ``spec.gpus``; ``scaling``: pools'
    scaling entries (the scaling stage's decisions) instead of ``NotEvaluated``; ``approved_deletions``:
    the revision's ``Reconciler-Allow-Deletions`` trailer (:mod:`reconciler.deletions`)."""
    desired = _carried(with_pool_sizes(desired, sizes), clusters, previous or {})
    invalid = _invalid_workloads(desired, previous or {})
    found = _entries(desired, inventory, clusters, pool_modes, invalid)
    guard = DeletionGuard(max_deletions, approved_deletions, desired.revision)
    guarded = _prune_guard(found.all(), _leaving(found, previous or {}, invalid), desired.complete, guard)
    blocked = guarded.blocked
    pool_entries = {k: _blocked(e, blocked) for k, e in found.pools.items()}
    pools, workloads = _admit(found, pool_entries, previous or {}, invalid, previous_layouts or {}, guarded)
    workloads += _strays(desired, {w.key for w in workloads}, invalid, {}, previous or {}, found.machines)
    families = {m.gpu_family for m in inventory.machines if m.gpu_family}
    plan = Plan(
        revision=desired.revision,
        platforms=[_blocked(found.platforms[k], blocked) for k in sorted(found.platforms)],
        diagnostics=plan_diagnostics(desired, families),
        machines=found.machines,
        pools=pools,
        workloads=sorted(workloads, key=lambda w: w.sort_key),
        deletions_note=guarded.note,
    )
    return plan.with_scaling(scaling) if scaling else plan


class Observation(Protocol):
    """What one Palette target shows: its machines and the managed clusters in it."""

    @property
    def inventory(self) -> Inventory: ...

    @property
    def clusters(self) -> Sequence[ManagedCluster]: ...


@dataclass(frozen=True, slots=True)
class Observed:
    inventory: Inventory
    clusters: Sequence[ManagedCluster]


def restrict(
    desired: DesiredState, platforms: set[PlatformKey], pools: set[PoolKey] | None = None
) -> DesiredState:
    """The desired state with only ``platforms`` among the dedicated MLPlatforms (valid or invalid) and,
    when given, only ``pools`` among the ComputePools; tenants (shared MLPlatforms, AIWorkloads), every
    other resource, the diagnostics and completeness are kept whole."""

    def keep(identity: tuple[str, str, str]) -> bool:
        kind, ns, name = identity
        if kind == PLATFORM_KIND:
            loaded = desired.resources.get(identity)
            tenant = (
                loaded is not None and isinstance(loaded.resource, MLPlatform) and is_tenant(loaded.resource)
            )
            return tenant or (ns, name) in platforms
        if kind == POOL_KIND and pools is not None:
            return (ns, name) in pools
        return True

    return DesiredState(
        revision=desired.revision,
        resources={k: v for k, v in desired.resources.items() if keep(k)},
        invalid={k: v for k, v in desired.invalid.items() if keep(k)},
        diagnostics=list(desired.diagnostics),
        complete=desired.complete,
    )


def select_namespaces(desired: DesiredState, namespaces: NamespaceSelector) -> DesiredState:
    """The desired state of the namespaces a shard owns: their resources (valid or invalid) and
    diagnostics, plus the diagnostics that name no namespace. Completeness is kept: a document no
    shard could identify might be any shard's, so none prunes."""
    if namespaces.everything:
        return desired
    return DesiredState(
        revision=desired.revision,
        resources={k: v for k, v in desired.resources.items() if namespaces.owns(k[1])},
        invalid={k: v for k, v in desired.invalid.items() if namespaces.owns(k[1])},
        diagnostics=[d for d in desired.diagnostics if d.namespace is None or namespaces.owns(d.namespace)],
        complete=desired.complete,
    )


def _target_entries(
    desired: DesiredState,
    routing: Routing,
    target: Target,
    observed: Mapping[Target, Observation],
    namespaces: NamespaceSelector,
    hidden: set[tuple[str, PlatformKey]],
    pool_modes: Mapping[PoolKey, str] | None,
    invalid: Mapping[WorkloadKey, _Invalid],
) -> _Entries:
    """The cluster entries of one target: what is routed to it, what is carried (``hidden``: platforms
    and pools hidden by this revision) where its cluster is, and the orphans it holds."""
    # A platform or pool that is in the desired state but has no target this pass (its namespace lost its
    # Settings, say) is not gone: its cluster, wherever it is, is never an orphan.
    everyone = {k for k in routing.all_platforms() | set(routing.unavailable) if namespaces.owns(k[0])}
    everyone |= {k for kind, k in hidden if kind == PLATFORM_KIND}
    every_pool = {k for k in routing.all_pools() | set(routing.pool_unavailable) if namespaces.owns(k[0])}
    every_pool |= {k for kind, k in hidden if kind == POOL_KIND}
    seen = observed[target]
    mine = {k for k in routing.platforms.get(target, set()) if namespaces.owns(k[0])}
    mine_pools = {k for k in routing.pools.get(target, set()) if namespaces.owns(k[0])}
    for c in seen.clusters:
        if (cluster_kind(c.labels), c.key) in hidden:
            (mine_pools if cluster_kind(c.labels) == POOL_KIND else mine).add(c.key)
    clusters = [
        c
        for c in seen.clusters
        if namespaces.owns(c.namespace)
        and (
            (c.key in mine_pools or c.key not in every_pool)
            if cluster_kind(c.labels) == POOL_KIND
            else (c.key in mine or c.key not in everyone)
        )
    ]
    return _entries(restrict(desired, mine, mine_pools), seen.inventory, clusters, pool_modes, invalid)


def plan_targets(
    desired: DesiredState,
    routing: Routing,
    observed: Mapping[Target, Observation],
    *,
    max_deletions: int = 1,
    previous: PreviousAdmissions | None = None,
    pool_modes: Mapping[PoolKey, str] | None = None,
    namespaces: NamespaceSelector = EVERY_NAMESPACE,
    sizes: Mapping[PoolKey, Mapping[GpuFamily, int]] | None = None,
    scaling: Mapping[PoolKey, ScalingPlan] | None = None,
    previous_layouts: PreviousLayouts | None = None,
    approved_deletions: int | None = None,
) -> dict[Target, Plan]:
    """Plan a pass over every observed Palette target, as ``run`` does and ``plan`` shows.

    Each target plans the platforms and pools routed to it against its own inventory; a cluster of a
    platform or pool routed elsewhere is left alone, one whose platform or pool is gone from the desired
    state everywhere is an orphan of the target that holds it. The prune guard counts the deletions of the
    whole pass. Workloads are planned in the target of their pool; the workloads no pool decided (invalid
    ones holding nothing, tenants of an unroutable pool) go to the first target (by url, project).
    Only ``namespaces`` are planned: resources, clusters and admissions of other namespaces belong to
    another shard and appear in no entry (nor in the prune guard's count). ``sizes`` and ``scaling`` are
    as for :func:`make_plan` (a pool with a scaling policy requests its current size; its scaling entry is
    the stage's decision). The deletion guard (:mod:`reconciler.deletions`) counts the removals of the
    whole pass against ``max_deletions``, raised to ``approved_deletions`` (the revision's trailer).
    """
    desired = with_pool_sizes(select_namespaces(desired, namespaces), sizes)
    previous = {k: v for k, v in (previous or {}).items() if namespaces.owns(k[0])}
    seen_clusters = [c for seen in observed.values() for c in seen.clusters if namespaces.owns(c.namespace)]
    carried = _carried(desired, seen_clusters, previous)
    # What is carried (a platform or pool hidden by this revision) stays with the cluster it has.
    hidden = {(kind, (ns, name)) for kind, ns, name in set(carried.invalid) - set(desired.invalid)}
    desired = carried
    invalid = _invalid_workloads(desired, previous)
    order = sorted(observed, key=lambda t: (t.url, t.project_uid or ""))
    found = {
        target: _target_entries(desired, routing, target, observed, namespaces, hidden, pool_modes, invalid)
        for target in order
    }
    every = [p for f in found.values() for p in f.all()]
    leaving = {k for f in found.values() for k in _leaving(f, previous, invalid)}
    guard = DeletionGuard(max_deletions, approved_deletions, desired.revision)
    guarded = _prune_guard(every, leaving, desired.complete, guard)
    blocked = guarded.blocked
    families = {m.gpu_family for seen in observed.values() for m in seen.inventory.machines if m.gpu_family}
    diagnostics = plan_diagnostics(desired, families)
    plans: dict[Target, Plan] = {}
    planned: set[WorkloadKey] = set()
    for target in order:
        f = found[target]
        pool_entries = {k: _blocked(e, blocked) for k, e in f.pools.items()}
        pools, workloads = _admit(f, pool_entries, previous or {}, invalid, previous_layouts or {}, guarded)
        planned |= {w.key for w in workloads}
        plans[target] = Plan(
            desired.revision,
            [_blocked(f.platforms[k], blocked) for k in sorted(f.platforms)],
            diagnostics,
            machines=f.machines,
            pools=pools,
            workloads=workloads,
            deletions_note=guarded.note,
        ).with_scaling(scaling or {})
    if order:
        every_machine = found[order[0]].machines  # the same map when there is one target
        if len(order) > 1:
            every_machine = {u: m for t in observed for u, m in found[t].machines.items()}
        strays = _strays(desired, planned, invalid, routing.pool_unavailable, previous, every_machine)
        first = plans[order[0]]
        plans[order[0]] = replace(
            first, workloads=sorted([*first.workloads, *strays], key=lambda w: w.sort_key)
        )
    return plans


def plan_diagnostics(desired: DesiredState, host_families: set[GpuFamily]) -> list[Diagnostic]:
    """The revision's diagnostics, less the unknown-family warnings about a family some host has:
    validation cannot see hosts, the plan can (a family no host and no known model has is a typo)."""

    def moot(d: Diagnostic) -> bool:
        if d.reason != UNKNOWN_GPU_FAMILY or d.namespace is None or d.name is None or d.field is None:
            return False
        platform = desired.get(MLPlatform, d.namespace, d.name)
        index = d.field.removeprefix("spec.gpus[").split("]", 1)[0]
        if platform is None or not index.isdigit() or int(index) >= len(platform.spec.gpus):
            return False
        try:
            return canonical_family(platform.spec.gpus[int(index)].family) in host_families
        except ValueError:
            return False

    return sorted((d for d in desired.diagnostics if not moot(d)), key=Diagnostic.sort_key)


def merge(revision: str | None, plans: Mapping[Target, Plan], diagnostics: Sequence[Diagnostic]) -> Plan:
    """One plan of a whole pass (what ``plan`` prints): every target's entries, by (namespace, name)."""
    entries: dict[PlatformKey, PlatformPlan] = {}
    pools: dict[PoolKey, PoolPlan] = {}
    workloads: dict[tuple[str, str, int, str], WorkloadPlan] = {}
    for target in sorted(plans, key=lambda t: (t.url, t.project_uid or "")):
        for p in plans[target].platforms:
            entries.setdefault(p.key, p)
        for pool in plans[target].pools:
            pools.setdefault(pool.key, pool)
        for w in plans[target].workloads:
            workloads.setdefault(w.sort_key, w)
    return Plan(
        revision,
        [entries[k] for k in sorted(entries)],
        sorted(diagnostics, key=Diagnostic.sort_key),
        pools=[pools[k] for k in sorted(pools)],
        workloads=[workloads[k] for k in sorted(workloads)],
        deletions_note=next((p.deletions_note for p in plans.values() if p.deletions_note), ""),
    )
