"""Status files of pools and workloads after a pass (pure; ``status/report.py`` assembles the tree).

A pool or workload whose Palette could not be read keeps its last facts with ``PaletteReachable=False``;
a pool entry a stop request kept from being applied keeps its file; a scaling action is recorded once
its Palette write succeeded (its commit text goes in the status commit's body).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.inventory import Machine
from reconciler.model.conditions import Reason
from reconciler.model.pools import PoolKey, WorkloadKey
from reconciler.placement.admission_types import WorkloadAction
from reconciler.plan import Action, PoolPlan, WorkloadPlan
from reconciler.scaling import render as render_scaling
from reconciler.status.pools import pool_document, unreachable_document, workload_document
from reconciler.status.records import Records
from reconciler.status.render import dump, resource_inputs, status_path
from reconciler.status.report_facts import Cut, ReportFacts, unhealthy

# The pool entries whose scaling record is kept though the plan cannot read their policy.
HELD = frozenset({Action.INVALID, Action.REJECTED})


def pool_cut_off(facts: ReportFacts) -> dict[PoolKey, Cut]:
    routing = facts.routing
    cut: dict[PoolKey, Cut] = {
        k: (Reason.PALETTE_UNAVAILABLE, why) for k, why in routing.pool_unavailable.items()
    }
    for target, why in facts.failed.items():
        cut.update(dict.fromkeys(routing.pools.get(target, ()), (Reason.PALETTE_UNAVAILABLE, why)))
    for target, why in facts.stalled.items():
        cut.update(dict.fromkeys(routing.pools.get(target, ()), (Reason.PALETTE_UNAUTHORIZED, why)))
    return cut


def pool_files(
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
                unhealthy=tuple(unhealthy(hosts, machines)),
            )
            block, commit = scaling_record(pool, previous, facts, records)
            if block is not None:
                doc["status"]["scaling"] = block
            with_note(doc, records.repaired_pools.get(pool.key))
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
    as it is). So does a pool that is invalid or rejected this revision (it, its ScalingPolicy or
    anything else it resolves does not validate): the plan cannot read its policy, but invalid is not
    absent, and the revert plans from the size and last action recorded here."""
    o = facts.scaling.get(pool.key)
    if o is None:
        before = (previous or {}).get("status") or {}
        kept = before.get("scaling") if isinstance(before, Mapping) else None
        if kept is None or (pool.scaling.policy is None and pool.action not in HELD):
            return None, None
        if pool.key in records.unreadable:
            return kept, None  # as it is, until someone fixes it
        repaired = records.scaling.get(pool.key)
        if pool.key in records.resized and repaired is not None:
            return render_scaling(repaired), None  # what Palette's machine pools hold (palette_check)
        recorded = isinstance(kept, Mapping) and isinstance(kept.get("decision"), Mapping)
        return (dict(kept) if recorded else None), None
    status = o.status
    if o.acts:
        written = facts.pools.get(pool.key)
        if written is None or not written.ok or facts.applied_at is None:
            return render_scaling(o.unwritten()), None
        status = o.written(facts.applied_at)
    return render_scaling(status), o.commit


def workload_files(facts: ReportFacts, records: Records, cut: Mapping[PoolKey, Cut]) -> dict[str, bytes]:
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
            with_note(doc, records.repaired.get(key))
        files[path] = dump(doc)
    return files


def with_note(doc: dict[str, Any], repaired: str | None) -> None:
    """A repaired resource's status says why, in its Ready message, for the pass that repaired it."""
    if repaired is None:
        return
    ready = (doc.get("status") or {}).get("conditions") or [{}]
    ready[0]["message"] = f"{ready[0].get('message', '')}; {repaired}".lstrip("; ")


def cut_off_workload_files(
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
