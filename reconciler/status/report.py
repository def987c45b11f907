"""The status branch after a pass, assembled from what the pass did (pure: facts in, files out).

:func:`status_tree` takes the pass's facts (its plans, what apply did, what could and could not be
observed) and the records the pass started from, and returns every file of the branch: one per
platform, Compute, pool and workload, the inventory snapshot of each target and ``reconciler.yaml``.
The report stage only writes what it returns, and only when :meth:`StatusTree.changed`.

Rules kept here (docs/status.md): a resource whose Palette could not be read keeps its last reported
facts with ``PaletteReachable=False``; an entry a stop request kept from being applied keeps its file as
it was; a target leaves ``reconciler.yaml`` only when it holds no managed cluster any more; a scaling
action is recorded once its Palette write succeeded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from reconciler.compute_status import compute_status, holders, in_use_machines
from reconciler.inventory import HostState, Inventory, Machine
from reconciler.model.conditions import Phase, Reason
from reconciler.model.desired import DesiredState, PlatformKey
from reconciler.model.observed import ManagedCluster
from reconciler.model.pools import PoolKey, WorkloadKey
from reconciler.model.resources import Compute
from reconciler.placement.admission import WorkloadAction
from reconciler.plan import Plan, PlatformPlan, PoolPlan, WorkloadPlan
from reconciler.resolve import Routing, Target
from reconciler.scaling import render as render_scaling
from reconciler.scaling.stage import ScalingOutcome
from reconciler.status.pools import WorkloadOutcome, pool_document, unreachable_document, workload_document
from reconciler.status.records import Records
from reconciler.status.render import (
    RECONCILER_FILE,
    Outcome,
    compute_document,
    dump,
    platform_status,
    reconciler_document,
    resource_inputs,
    status_path,
    unreachable_status,
)
from reconciler.status.snapshot import target_file

Cut = tuple[Reason, str]


class ObservedTarget(Protocol):
    """What the pass read of one Palette target."""

    @property
    def inventory(self) -> Inventory: ...

    @property
    def clusters(self) -> Sequence[ManagedCluster]: ...

    @property
    def raw_clusters(self) -> Sequence[Mapping[str, Any]]: ...

    def snapshot(self) -> bytes: ...


@dataclass(frozen=True)
class ReportFacts:
    """Everything one pass knows when it reports."""

    desired: DesiredState
    revision: str | None
    branch: str  # the config branch followed
    routing: Routing
    plans: Mapping[Target, Plan]
    observed: Mapping[Target, ObservedTarget]
    now: str  # the status timestamp of this pass (conditions that change now)
    failed: Mapping[Target, str] = field(default_factory=dict)  # transient: PaletteUnavailable
    stalled: Mapping[Target, str] = field(default_factory=dict)  # refused key: PaletteUnauthorized
    outcomes: Mapping[PlatformKey, Outcome] = field(default_factory=dict)  # platform writes
    pools: Mapping[PoolKey, Outcome] = field(default_factory=dict)  # pool cluster writes
    workloads: Mapping[WorkloadKey, WorkloadOutcome] | None = None  # None: profiles not touched
    scaling: Mapping[PoolKey, ScalingOutcome] = field(default_factory=dict)
    applied_at: float | None = None  # when the pool writes finished (a scaling cooldown runs from it)
    stopped: bool = False  # a stop request cut apply short: entries not started keep their files
    palette: str | None = None  # run --palette URL (recorded so that plan --from-status routes alike)

    @property
    def platforms(self) -> list[PlatformPlan]:
        return [p for plan in self.plans.values() for p in plan.platforms]


@dataclass(frozen=True)
class StatusTree:
    """The status branch after the pass."""

    files: dict[str, bytes]  # one per resource
    inventory: dict[str, bytes]  # inventory/<target>.json
    targets: tuple[tuple[str, str | None], ...]  # reconciler.yaml's targets
    keep: frozenset[Target]  # the targets still observed next pass
    record: bytes  # reconciler.yaml
    phases: dict[PlatformKey, Phase]
    commits: tuple[str, ...]  # scaling records, for the status commit's body

    @property
    def tree(self) -> dict[str, bytes]:
        return {**self.files, **self.inventory, RECONCILER_FILE: self.record}

    def changed(self, records: Records, branch: str) -> bool:
        """Whether anything differs from the branch as the pass read it (else nothing is committed)."""
        before = records.files
        return (
            self.files != resource_files(before)
            or self.inventory != {p: d for p, d in before.items() if p.startswith("inventory/")}
            or records.recorded.branch != branch
            or set(records.recorded.targets) != set(self.targets)
        )


def status_tree(facts: ReportFacts, records: Records) -> StatusTree:
    """The status branch after this pass: facts and the records it started from in, files out."""
    machines = {uid: m for o in facts.observed.values() for uid, m in o.inventory.by_uid().items()}
    files, phases = _platform_files(facts, records, machines)
    files.update(_compute_files(facts, records))
    commits: list[str] = []
    cut = _pool_cut_off(facts)
    files.update(_pool_files(facts, records, machines, cut, commits))
    files.update(_workload_files(facts, records, cut))
    files.update(_cut_off_workload_files(facts, records, cut, files))
    # A target leaves reconciler.yaml only when it holds no managed cluster any more.
    keep = set(facts.routing.targets) | set(facts.failed) | set(facts.stalled)
    keep |= {t for t, o in facts.observed.items() if o.clusters}
    targets = tuple((t.url, t.project_uid) for t in keep)
    record = reconciler_document(facts.branch, facts.revision, targets, palette=facts.palette)
    return StatusTree(
        files=files,
        inventory=_inventory_files(facts, records, keep),
        targets=targets,
        keep=frozenset(keep),
        record=dump(record),
        phases=phases,
        commits=tuple(commits),
    )


def unreachable_platforms(
    routing: Routing, failed: Mapping[Target, str], stalled: Mapping[Target, str]
) -> dict[PlatformKey, Cut]:
    """Platforms whose Palette could not be read this pass, with the reason their status gives."""
    out: dict[PlatformKey, Cut] = {
        key: (Reason.PALETTE_UNAVAILABLE, why) for key, why in routing.unavailable.items()
    }
    for target, why in failed.items():
        out.update(dict.fromkeys(routing.platforms.get(target, ()), (Reason.PALETTE_UNAVAILABLE, why)))
    for target, why in stalled.items():
        out.update(dict.fromkeys(routing.platforms.get(target, ()), (Reason.PALETTE_UNAUTHORIZED, why)))
    return out


def resource_files(files: Mapping[str, bytes]) -> dict[str, bytes]:
    """A status tree without its root files (``reconciler.yaml``, ``inventory/``)."""
    return {p: d for p, d in files.items() if p != RECONCILER_FILE and not p.startswith("inventory/")}


def _unhealthy(hosts: Sequence[str], machines: Mapping[str, Machine]) -> list[str]:
    return [h for h in hosts if h in machines and machines[h].state is HostState.UNAVAILABLE]


def _platform_files(
    facts: ReportFacts, records: Records, machines: Mapping[str, Machine]
) -> tuple[dict[str, bytes], dict[PlatformKey, Phase]]:
    before, previous = records.files, records.docs
    files: dict[str, bytes] = {}
    phases: dict[PlatformKey, Phase] = {}
    unreachable = unreachable_platforms(facts.routing, facts.failed, facts.stalled)
    for p in facts.platforms:
        path = status_path("MLPlatform", p.namespace, p.name)
        if p.key in unreachable:
            continue  # its target refused the key while applying: reported as unreachable below
        if facts.stopped and p.mutating and p.key not in facts.outcomes:
            if path in before:  # not started because of a stop request: as last reported
                files[path] = before[path]
            continue
        phase, doc = platform_status(
            p,
            revision=facts.revision,
            inputs=resource_inputs(facts.desired, "MLPlatform", p.namespace, p.name),
            outcome=facts.outcomes.get(p.key),
            previous=previous.get(path),
            now=facts.now,
            unhealthy=_unhealthy(p.existing.hosts if p.existing is not None else (), machines),
        )
        phases[p.key] = phase
        files[path] = dump(doc)
    for key, (reason, message) in sorted(unreachable.items()):  # they keep what was last reported
        path = status_path("MLPlatform", *key)
        if path in files:
            continue
        phase, doc = unreachable_status(
            key[0], key[1], previous=previous.get(path), reason=reason, message=message, now=facts.now
        )
        phases[key] = phase
        files[path] = dump(doc)
    if facts.failed or facts.stalled:
        # A platform removed from git whose target cannot be read may still have its cluster.
        for path, data in before.items():
            if path not in files and path.count("/") == 2 and path.split("/")[1] == "mlplatforms":
                files[path] = data
    return files, phases


def _compute_files(facts: ReportFacts, records: Records) -> dict[str, bytes]:
    """PaletteAI's shape (available compute, excluded hosts), plus which platform or pool holds each
    host in use; a Compute whose target was not read keeps its file."""
    files: dict[str, bytes] = {}
    for compute in facts.desired.of_kind(Compute):
        ns, name = compute.metadata.namespace, compute.metadata.name
        target = facts.routing.computes.get((ns, name))
        path = status_path("Compute", ns, name)
        if target is not None and target in facts.observed:
            observation = facts.observed[target]
            held = in_use_machines(observation.inventory, holders(observation.raw_clusters))
            doc = compute_document(
                ns,
                name,
                {**compute_status(observation.inventory), "inUseMachines": held},
                revision=facts.revision,
                inputs=resource_inputs(facts.desired, "Compute", ns, name),
                previous=records.docs.get(path),
            )
            files[path] = dump(doc)
        elif path in records.files:
            files[path] = records.files[path]
    return files


def _pool_cut_off(facts: ReportFacts) -> dict[PoolKey, Cut]:
    routing = facts.routing
    cut: dict[PoolKey, Cut] = {
        k: (Reason.PALETTE_UNAVAILABLE, why) for k, why in routing.pool_unavailable.items()
    }
    for target, why in facts.failed.items():
        cut.update(dict.fromkeys(routing.pools.get(target, ()), (Reason.PALETTE_UNAVAILABLE, why)))
    for target, why in facts.stalled.items():
        cut.update(dict.fromkeys(routing.pools.get(target, ()), (Reason.PALETTE_UNAUTHORIZED, why)))
    return cut


def _pool_files(
    facts: ReportFacts,
    records: Records,
    machines: Mapping[str, Machine],
    cut: Mapping[PoolKey, Cut],
    commits: list[str],
) -> dict[str, bytes]:
    """Status files of pools; a pool whose Palette could not be read keeps its last facts."""
    files: dict[str, bytes] = {}
    for plan in facts.plans.values():
        for pool in plan.pools:
            path = status_path("ComputePool", pool.namespace, pool.name)
            if facts.stopped and pool.mutating and pool.key not in facts.pools:
                if path in records.files:
                    files[path] = records.files[path]
                continue
            hosts = pool.cluster.existing.hosts if pool.cluster.existing is not None else ()
            previous = records.docs.get(path)
            _phase, doc = pool_document(
                pool,
                revision=facts.revision,
                inputs=resource_inputs(facts.desired, "ComputePool", pool.namespace, pool.name),
                outcome=facts.pools.get(pool.key),
                previous=previous,
                now=facts.now,
                unhealthy=tuple(_unhealthy(hosts, machines)),
            )
            block, commit = scaling_record(pool, previous, facts, records)
            if block is not None:
                doc["status"]["scaling"] = block
            if commit is not None:
                commits.append(commit)
            files[path] = dump(doc)
    for key, (reason, message) in sorted(cut.items()):
        path = status_path("ComputePool", *key)
        if path not in files and path in records.docs:
            _phase, doc = unreachable_document(
                "ComputePool",
                *key,
                previous=records.docs[path],
                reason=reason,
                message=message,
                now=facts.now,
            )
            files[path] = dump(doc)
    return files


def scaling_record(
    pool: PoolPlan, previous: Mapping[str, Any] | None, facts: ReportFacts, records: Records
) -> tuple[Any, str | None]:
    """``status.scaling`` of a pool with a policy after apply (None: the plan's entry stands), and the
    status commit's text for it. An action is recorded once its Palette write succeeded; a failed write
    records nothing done. A pool the stage did not decide keeps its recorded block (an unreadable one
    as it is)."""
    o = facts.scaling.get(pool.key)
    if o is None:
        before = (previous or {}).get("status") or {}
        kept = before.get("scaling") if isinstance(before, Mapping) else None
        if pool.scaling.policy is None or kept is None:
            return None, None
        if pool.key in records.unreadable:
            return kept, None  # as it is, until someone fixes it
        recorded = isinstance(kept, Mapping) and isinstance(kept.get("decision"), Mapping)
        return (dict(kept) if recorded else None), None
    status = o.status
    if o.acts:
        written = facts.pools.get(pool.key)
        if written is None or not written.ok or facts.applied_at is None:
            return render_scaling(o.unwritten()), None
        status = o.written(facts.applied_at)
    return render_scaling(status), o.commit


def _workload_files(facts: ReportFacts, records: Records, cut: Mapping[PoolKey, Cut]) -> dict[str, bytes]:
    """Status files of workloads (AIWorkloads and shared MLPlatforms) in the pools planned."""
    planned: dict[WorkloadKey, list[WorkloadPlan]] = {}
    for plan in facts.plans.values():
        for w in plan.workloads:
            planned.setdefault(w.key, []).append(w)
    files: dict[str, bytes] = {}
    for key, entries in sorted(planned.items()):
        w = next((e for e in entries if e.action is not WorkloadAction.REMOVE), entries[0])
        path = status_path(w.kind, *key)
        outcome = facts.workloads.get(key) if facts.workloads is not None else None
        attached = outcome.attached if outcome is not None else records.pools.attached.get(key, ("", ()))[1]
        lost = cut.get((key[0], w.pool)) if w.pool is not None else None
        previous = records.docs.get(path)
        if lost is not None and previous is not None:
            _phase, doc = unreachable_document(
                w.kind, *key, previous=previous, reason=lost[0], message=lost[1], now=facts.now
            )
        elif w.action is WorkloadAction.REMOVE and not attached:
            continue  # it left its pool and nothing of it is attached any more: no file
        else:
            _phase, doc = workload_document(
                w,
                revision=facts.revision,
                inputs=resource_inputs(facts.desired, w.kind, *key),
                outcome=outcome,
                attached=attached,
                previous=previous,
                now=facts.now,
            )
        files[path] = dump(doc)
    return files


def _cut_off_workload_files(
    facts: ReportFacts, records: Records, cut: Mapping[PoolKey, Cut], done: Mapping[str, bytes]
) -> dict[str, bytes]:
    """Workloads whose pool could not be read are not planned: they keep their last facts."""
    files: dict[str, bytes] = {}
    for path, held in records.docs.items():
        parts = path.split("/")
        if path in done or len(parts) != 3 or parts[1] not in ("aiworkloads", "mlplatforms"):
            continue
        status = held.get("status")
        pool = status.get("pool") if isinstance(status, Mapping) else None
        lost = cut.get((parts[0], str(pool))) if pool else None
        if lost is not None:
            kind = "AIWorkload" if parts[1] == "aiworkloads" else "MLPlatform"
            name = parts[2].removesuffix(".yaml")
            _phase, doc = unreachable_document(
                kind, parts[0], name, previous=held, reason=lost[0], message=lost[1], now=facts.now
            )
            files[path] = dump(doc)
    return files


def _inventory_files(facts: ReportFacts, records: Records, keep: set[Target]) -> dict[str, bytes]:
    """The last observed inventory of each target, what ``plan --from-status`` plans against; a target
    not read this pass keeps its file."""
    inventory = {target_file(t.url, t.project_uid): o.snapshot() for t, o in facts.observed.items()}
    for t in keep:
        path = target_file(t.url, t.project_uid)
        if path not in inventory and path in records.files:
            inventory[path] = records.files[path]
    return inventory
