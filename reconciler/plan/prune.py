"""The prune guard over a whole pass: what is deleted or removed, and whether the deletion guard lets
it (pure; :mod:`reconciler.deletions`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from reconciler.deletions import DeletionGuard
from reconciler.model.conditions import Reason
from reconciler.model.pools import PROVISIONED_LABEL, WorkloadKey
from reconciler.placement.admission_types import PreviousAdmissions
from reconciler.plan.decisions import _Entries
from reconciler.plan.entries import Action, PlatformPlan, _Invalid


def _leaving(
    found: _Entries, previous: PreviousAdmissions, invalid: Mapping[WorkloadKey, _Invalid]
) -> set[WorkloadKey]:
    """Admitted workloads (holding GPUs or MIG instances in a pool of ``found``) that this pass would
    remove: gone from the repository, not invalid (an invalid one keeps what it holds), not moved."""
    present = found.tenants
    return {
        a.key
        for key in found.pools
        for a in previous.get(key, ())
        if (a.gpus or a.mig) and a.key not in present and a.key not in invalid
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
    # A workload removed with the pool provisioned for it is one deletion: its pool's cluster.
    provisioned = {p.key for p in entries if p.action is Action.DELETE and _provisioned(p)}
    counted = len(leaving - provisioned)
    blocked = guard.blocked(kinds, counted, complete)
    held_back = frozenset(leaving) if blocked else frozenset()
    return _Guarded(blocked, held_back, guard.note(kinds, counted, blocked) or "")


def _provisioned(entry: PlatformPlan) -> bool:
    return entry.existing is not None and bool(entry.existing.labels.get(PROVISIONED_LABEL))


def _blocked(entry: PlatformPlan, message: str) -> PlatformPlan:
    if not message or entry.action is not Action.DELETE:
        return entry
    return replace(entry, action=Action.UNCHANGED, reason=Reason.PRUNE_BLOCKED, message=message)
