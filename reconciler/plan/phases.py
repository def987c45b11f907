"""Phase and Ready reason of a resource, decided in one place (pure).

Every rule that turns a plan entry (and what applying it did) into a status phase and reason lives
here: the reason of a cluster kept as it is (:func:`cluster_reason`, used by the plan's decisions), a
platform's or pool's phase (:func:`platform_phase`), a workload's (:func:`workload_phase`), the phase
kept while Palette cannot be read (:func:`recorded_phase`) and which phases are Ready
(:func:`ready_of`). The status renderers call these; they decide nothing of their own.
"""

from __future__ import annotations

from collections.abc import Sequence

from reconciler.model.conditions import Phase, Reason
from reconciler.model.observed import ClusterState, ManagedCluster
from reconciler.model.outcomes import Outcome, WorkloadOutcome
from reconciler.placement.admission_types import WorkloadAction
from reconciler.plan.entries import Action, PlatformPlan, WorkloadPlan

READY_PHASES = frozenset({Phase.RUNNING})


def ready_of(phase: object) -> str:
    """The Ready condition's status of a resource in ``phase`` (a Phase or its recorded text)."""
    return "True" if phase in READY_PHASES else "False"


def cluster_reason(cluster: ManagedCluster) -> Reason:
    """The reason of a cluster left as it is: ``Provisioned`` once Palette reports it Running."""
    return Reason.PROVISIONED if cluster.known_state is ClusterState.RUNNING else Reason.PROVISIONING


def recorded_phase(text: object) -> Phase:
    """The phase a previous status recorded (kept while Palette cannot be read); ``Pending`` without one."""
    try:
        return Phase(str(text))
    except ValueError:
        return Phase.PENDING


def platform_phase(
    p: PlatformPlan, outcome: Outcome | None, unavailable: str | None, unhealthy: Sequence[str]
) -> tuple[Phase, Reason, str]:
    """Phase, reason and message of an MLPlatform or ComputePool from its plan entry, what applying it
    did (``outcome``), why its Palette was unavailable, and its cluster's unhealthy hosts."""
    if unavailable is not None:
        return Phase.PENDING, Reason.PALETTE_UNAVAILABLE, unavailable
    if outcome is not None and not outcome.ok:
        phase = Phase.DEGRADED if p.existing is not None else Phase.PENDING
        return phase, Reason.PALETTE_UNAVAILABLE, outcome.error or "the Palette request failed"
    reason = p.reason or Reason.PROVISIONING
    match p.action:
        case Action.CREATE | Action.REPLACE:
            return Phase.PROVISIONING, Reason.PROVISIONING, p.message
        case Action.SCALE:
            return Phase.PROVISIONING, Reason.SCALING, p.message
        case Action.DELETE:
            return Phase.DELETING, Reason.DELETING, p.message
        case Action.INVALID:
            return Phase.INVALID, reason, p.message
        case Action.SUSPENDED:
            return Phase.SUSPENDED, Reason.SUSPENDED, p.message
        case Action.REJECTED:
            return (Phase.DEGRADED if p.existing is not None else Phase.REJECTED), reason, p.message
        case _:
            return _kept_phase(p, reason, unhealthy)


def _kept_phase(p: PlatformPlan, reason: Reason, unhealthy: Sequence[str]) -> tuple[Phase, Reason, str]:
    """An entry that changes nothing (unchanged, update): its phase follows its cluster's state."""
    state = p.existing.state if p.existing is not None else None
    if reason is Reason.PRUNE_BLOCKED:
        return Phase.DEGRADED, reason, p.message
    if state == "Failed":
        return Phase.DEGRADED, Reason.PROVISIONING, f"{p.message}: Palette reports the cluster Failed"
    if state == "Running" and unhealthy:
        hosts = ", ".join(sorted(unhealthy))
        # Running, but not all of its compute is: the reason says so (not "Provisioned").
        return (
            Phase.DEGRADED,
            Reason.INSUFFICIENT_COMPUTE,
            f"the cluster runs, but its hosts {hosts} are unhealthy (kept: nothing is moved); {p.message}",
        )
    if state == "Running":
        return Phase.RUNNING, Reason.PROVISIONED, p.message
    if state in ("Deleting", "Deleted"):
        return Phase.DELETING, Reason.DELETING, p.message
    return Phase.PROVISIONING, Reason.PROVISIONING, p.message


_WORKLOAD_PHASES = {
    WorkloadAction.PENDING: Phase.PENDING,
    WorkloadAction.REJECTED: Phase.REJECTED,
    WorkloadAction.INVALID: Phase.INVALID,
    WorkloadAction.SUSPENDED: Phase.SUSPENDED,
    WorkloadAction.REMOVE: Phase.DELETING,
}


def workload_phase(w: WorkloadPlan, outcome: WorkloadOutcome | None) -> tuple[Phase, Reason | None, str]:
    """Phase, reason (None: the phase is the reason) and message of a workload in its pool: an admitted
    one runs once its pool's cluster is Running and its profiles are attached."""
    if outcome is not None and not outcome.ok:
        why = outcome.error or "the Palette request failed"
        if w.action in (WorkloadAction.ADMIT, WorkloadAction.ADMITTED):
            return Phase.PENDING, Reason.PALETTE_UNAVAILABLE, f"{w.message}; profiles not attached: {why}"
        return Phase.DELETING, Reason.PALETTE_UNAVAILABLE, f"{w.message}; profiles not detached: {why}"
    if w.action in (WorkloadAction.ADMIT, WorkloadAction.ADMITTED):
        if not w.pool_running:
            pool = w.pool or "?"
            return Phase.PENDING, Reason.POOL_NOT_READY, f"{w.message}; waits for the cluster of pool {pool}"
        return Phase.RUNNING, w.reason or Reason.ADMITTED, w.message
    return _WORKLOAD_PHASES[w.action], w.reason, w.message
