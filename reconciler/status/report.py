"""The status branch after a pass, assembled from what the pass did (pure: facts in, files out).

:func:`status_tree` takes the pass's facts (its plans, what apply did, what could and could not be
observed) and the records the pass started from, and returns every file of the branch: one per
platform, Compute, pool and workload, the inventory snapshot of each target and ``reconciler.yaml``.
The report stage only writes what it returns, and only when :meth:`StatusTree.changed`.

Rules kept here (docs/status-branch.md): a resource whose Palette could not be read keeps its last reported
facts with ``PaletteReachable=False``; an entry a stop request kept from being applied keeps its file as
it was; a target leaves ``reconciler.yaml`` only when it holds no managed cluster any more; a scaling
action is recorded once its Palette write succeeded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from reconciler.compute_status import compute_status, holders, in_use_machines
from reconciler.inventory import Machine
from reconciler.model.conditions import Phase, Reason
from reconciler.model.desired import PlatformKey
from reconciler.model.resources import Compute
from reconciler.resolve import Routing, Target
from reconciler.status.creates import CreateIntent, read_creates, render_creates, resolved
from reconciler.status.environments import environment_files
from reconciler.status.pool_report import cut_off_workload_files, pool_cut_off, pool_files, workload_files
from reconciler.status.records import Records
from reconciler.status.render import (
    RECONCILER_FILE,
    compute_document,
    dump,
    platform_status,
    reconciler_document,
    resource_inputs,
    status_path,
    unreachable_status,
)
from reconciler.status.report_facts import Cut, ReportFacts, unhealthy
from reconciler.status.snapshot import target_file

__all__ = ["StatusTree", "resource_files", "status_tree", "unreachable_platforms"]


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
    creates: tuple[CreateIntent, ...] = ()  # reconciler.yaml's open create intents

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
            or read_creates(before) != self.creates
        )


def status_tree(facts: ReportFacts, records: Records) -> StatusTree:
    """The status branch after this pass: facts and the records it started from in, files out."""
    machines = {uid: m for o in facts.observed.values() for uid, m in o.inventory.by_uid().items()}
    files, phases = _platform_files(facts, records, machines)
    files.update(_compute_files(facts, records))
    commits: list[str] = []
    cut = pool_cut_off(facts)
    files.update(pool_files(facts, records, machines, cut, commits))
    files.update(workload_files(facts, records, cut))
    files.update(cut_off_workload_files(facts, records, cut, files))
    files.update(
        environment_files(facts.desired, facts.plans.values(), facts.revision, records.files, records.docs)
    )
    # A target leaves reconciler.yaml only when it holds no managed cluster any more.
    keep = set(facts.routing.targets) | set(facts.failed) | set(facts.stalled)
    keep |= {t for t, o in facts.observed.items() if o.clusters}
    targets = tuple((t.url, t.project_uid) for t in keep)
    record = reconciler_document(facts.branch, facts.revision, targets, palette=facts.palette)
    creates = _creates(facts, records)
    record = render_creates(record, creates)
    return StatusTree(
        files=files,
        inventory=_inventory_files(facts, records, keep),
        targets=targets,
        keep=frozenset(keep),
        record=dump(record),
        phases=phases,
        commits=tuple(commits),
        creates=creates,
    )


def _creates(facts: ReportFacts, records: Records) -> tuple[CreateIntent, ...]:
    """The create intents still open after the pass: the apply stage's, or the recorded ones; either
    way without those a target observed now lists (``status/creates.py``)."""
    intents = facts.creates if facts.creates is not None else read_creates(records.files)
    listed = {(t.url, t.project_uid): [c.name for c in o.clusters] for t, o in facts.observed.items()}
    return tuple(resolved(intents, listed))


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
            unhealthy=unhealthy(p.existing.hosts if p.existing is not None else (), machines),
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


def _inventory_files(facts: ReportFacts, records: Records, keep: set[Target]) -> dict[str, bytes]:
    """The last observed inventory of each target, what ``plan --from-status`` plans against; a target
    not read this pass keeps its file."""
    inventory = {target_file(t.url, t.project_uid): o.snapshot() for t, o in facts.observed.items()}
    for t in keep:
        path = target_file(t.url, t.project_uid)
        if path not in inventory and path in records.files:
            inventory[path] = records.files[path]
    return inventory
