"""Desired allocations vs existing clusters -> the actions of one pass (pure; DESIGN.md section 8).

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
  the whole pass, and its message gives that one count.
- A shard (``run --namespaces``) plans only its namespaces (:func:`select_namespaces`, and the
  ``namespaces`` argument of :func:`plan_targets`): a managed cluster of a namespace it does not own is
  not planned, never an orphan, and not counted by its prune guard.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Protocol

from reconciler.allocate import DELETING_STATE, Allocation, Decision, Rejection, allocate
from reconciler.inventory import Inventory, Machine, Role
from reconciler.model.conditions import Reason
from reconciler.model.desired import DesiredState, PlatformKey
from reconciler.model.diagnostics import UNKNOWN_GPU_FAMILY, Diagnostic
from reconciler.model.gpu import GpuFamily, canonical_family
from reconciler.model.observed import ClusterState, ManagedCluster
from reconciler.model.resources import MLPlatform
from reconciler.profiles import reject_unbuildable
from reconciler.resolve import EVERY_NAMESPACE, NamespaceSelector, Routing, Target


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


@dataclass(frozen=True, slots=True)
class Plan:
    revision: str | None
    platforms: list[PlatformPlan]
    diagnostics: list[Diagnostic]
    # The machines the plan was made from: the applier sends their names and addresses (plan = apply).
    machines: Mapping[str, Machine] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Exactly the ``plan --format json`` object of DESIGN.md section 8."""
        return {
            "revision": self.revision,
            "platforms": [p.to_json() for p in sorted(self.platforms, key=lambda p: p.key)],
            "diagnostics": [d.to_json() for d in self.diagnostics],
        }

    @property
    def placeable(self) -> bool:
        """True when no platform is rejected or invalid (``plan`` exits 0)."""
        return not any(p.action in (Action.REJECTED, Action.INVALID) for p in self.platforms)

    def get(self, namespace: str, name: str) -> PlatformPlan | None:
        return next((p for p in self.platforms if p.key == (namespace, name)), None)


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
        msg = f"cluster {cluster.name} is being deleted; the platform is placed again once it is gone"
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
    as used: deletions free their hosts only once Palette has released them)."""
    used: set[str] = set()
    for p in plan.platforms:
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


def _entries(
    desired: DesiredState, inventory: Inventory, clusters: Sequence[ManagedCluster]
) -> dict[PlatformKey, PlatformPlan]:
    """Every platform of the desired state and every managed cluster gets one entry; a cluster whose
    platform is gone is a ``delete`` here (the prune guard, over the whole pass, comes after)."""
    desired = reject_unbuildable(desired)  # no cluster profile: invalid, InvalidSpec (DESIGN.md section 3)
    machines = inventory.by_uid()
    cluster_of: dict[PlatformKey, ManagedCluster] = {}
    for c in sorted(clusters, key=lambda c: (c.namespace, c.platform, c.name, c.uid)):
        cluster_of.setdefault(c.key, c)
    decisions = allocate(desired, inventory, clusters)
    entries: dict[PlatformKey, PlatformPlan] = {}

    for p in desired.platforms():
        key = (p.metadata.namespace, p.metadata.name)
        cluster = cluster_of.get(key)
        if p.spec.suspend:
            msg = f"suspended; cluster {cluster.name} left as it is" if cluster else "suspended; no cluster"
            entries[key] = _kept(key, Action.SUSPENDED, Reason.SUSPENDED, msg, cluster, machines)
        else:
            entries[key] = _decided(key, decisions[key], cluster, machines)

    for kind, ns, name in sorted(desired.invalid):
        key = (ns, name)
        if kind != "MLPlatform" or key in entries:
            continue
        problems = desired.invalid[(kind, ns, name)]
        reason = Reason.REFERENCE_NOT_FOUND if _is_reference_problem(problems) else Reason.INVALID_SPEC
        first = sorted(problems, key=Diagnostic.sort_key)[0].message if problems else "invalid manifest"
        cluster = cluster_of.get(key)
        suffix = f"; cluster {cluster.name} kept" if cluster else ""
        entries[key] = _kept(key, Action.INVALID, reason, first + suffix, cluster, machines)

    for key in sorted(k for k in cluster_of if k not in entries):
        cluster = cluster_of[key]
        if cluster.known_state is DELETING_STATE:
            # Already on its way out (an earlier pass deleted it): not a new deletion for the guard.
            msg = f"platform removed from the repository; cluster {cluster.name} is being deleted"
            entries[key] = _kept(key, Action.UNCHANGED, Reason.DELETING, msg, cluster, machines)
        else:
            msg = f"platform removed from the repository; delete cluster {cluster.name}"
            entries[key] = _kept(key, Action.DELETE, Reason.DELETING, msg, cluster, machines)
    return entries


def _prune_guard(entries: Sequence[PlatformPlan], complete: bool, max_deletions: int) -> str:
    """Why no deletion of this pass may happen ("" when they may): counted over the whole pass."""
    deletions = len({p.key for p in entries if p.action is Action.DELETE})
    if deletions and not complete:
        return (
            f"would delete {deletions} platform cluster(s), but some documents of this revision could "
            "not be read; nothing is deleted"
        )
    if deletions > max_deletions:
        return (
            f"would delete {deletions} platform clusters, more than --max-deletions {max_deletions}; "
            "nothing is deleted"
        )
    return ""


def _blocked(entry: PlatformPlan, message: str) -> PlatformPlan:
    if not message or entry.action is not Action.DELETE:
        return entry
    return replace(entry, action=Action.UNCHANGED, reason=Reason.PRUNE_BLOCKED, message=message)


def make_plan(
    desired: DesiredState,
    inventory: Inventory,
    clusters: Sequence[ManagedCluster],
    *,
    max_deletions: int = 1,
) -> Plan:
    """Plan one pass against one inventory: every platform and every managed cluster gets one entry."""
    entries = _entries(desired, inventory, clusters)
    blocked = _prune_guard(list(entries.values()), desired.complete, max_deletions)
    families = {m.gpu_family for m in inventory.machines if m.gpu_family}
    return Plan(
        revision=desired.revision,
        platforms=[_blocked(entries[k], blocked) for k in sorted(entries)],
        diagnostics=plan_diagnostics(desired, families),
        machines=inventory.by_uid(),
    )


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


def restrict(desired: DesiredState, platforms: set[PlatformKey]) -> DesiredState:
    """The desired state with only ``platforms`` among the MLPlatforms (valid or invalid); every other
    resource, the diagnostics and completeness are kept whole."""

    def keep(identity: tuple[str, str, str]) -> bool:
        return identity[0] != "MLPlatform" or (identity[1], identity[2]) in platforms

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


def plan_targets(
    desired: DesiredState,
    routing: Routing,
    observed: Mapping[Target, Observation],
    *,
    max_deletions: int = 1,
    namespaces: NamespaceSelector = EVERY_NAMESPACE,
) -> dict[Target, Plan]:
    """Plan a pass over every observed Palette target, as ``run`` does and ``plan`` shows.

    Each target plans the platforms routed to it against its own inventory; a cluster of a platform
    routed elsewhere is left alone, one whose platform is gone from the desired state everywhere is an
    orphan of the target that holds it. The prune guard counts the deletions of the whole pass.
    Only ``namespaces`` are planned: platforms and clusters of other namespaces belong to another
    shard and appear in no entry.
    """
    everyone = {k for k in routing.all_platforms() if namespaces.owns(k[0])}
    entries: dict[Target, dict[PlatformKey, PlatformPlan]] = {}
    for target in sorted(observed, key=lambda t: (t.url, t.project_uid or "")):
        seen = observed[target]
        mine = {k for k in routing.platforms.get(target, set()) if namespaces.owns(k[0])}
        clusters = [
            c
            for c in seen.clusters
            if namespaces.owns(c.namespace) and (c.key in mine or c.key not in everyone)
        ]
        entries[target] = _entries(restrict(desired, mine), seen.inventory, clusters)
    every = [p for found in entries.values() for p in found.values()]
    blocked = _prune_guard(every, desired.complete, max_deletions)
    families = {m.gpu_family for seen in observed.values() for m in seen.inventory.machines if m.gpu_family}
    diagnostics = plan_diagnostics(desired, families)
    return {
        target: Plan(
            desired.revision,
            [_blocked(found[k], blocked) for k in sorted(found)],
            diagnostics,
            machines=observed[target].inventory.by_uid(),
        )
        for target, found in entries.items()
    }


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
    for target in sorted(plans, key=lambda t: (t.url, t.project_uid or "")):
        for p in plans[target].platforms:
            entries.setdefault(p.key, p)
    return Plan(revision, [entries[k] for k in sorted(entries)], sorted(diagnostics, key=Diagnostic.sort_key))
