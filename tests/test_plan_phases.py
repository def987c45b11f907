"""The phase and Ready reason rules (reconciler/plan/phases.py) as tables: a plan entry, what applying
it did, and the phase and reason a status file says (pure, no pass run)."""

from __future__ import annotations

import pytest

from reconciler.model.conditions import Phase, Reason
from reconciler.model.observed import ManagedCluster
from reconciler.model.outcomes import Outcome, WorkloadOutcome
from reconciler.placement.admission_types import WorkloadAction
from reconciler.plan.entries import Action, PlatformPlan, WorkloadPlan
from reconciler.plan.phases import (
    cluster_reason,
    platform_phase,
    ready_of,
    recorded_phase,
    workload_phase,
)


def cluster(state: str) -> ManagedCluster:
    return ManagedCluster(uid="c1", name="team-a-p", namespace="team-a", platform="p", state=state)


def entry(action: Action, reason: Reason | None = None, state: str | None = None) -> PlatformPlan:
    existing = cluster(state) if state is not None else None
    return PlatformPlan("team-a", "p", action, reason, "msg", existing=existing)


PLATFORMS = [
    (entry(Action.CREATE, Reason.PROVISIONING), Phase.PROVISIONING, Reason.PROVISIONING),
    (entry(Action.REPLACE, Reason.PROVISIONING, "Running"), Phase.PROVISIONING, Reason.PROVISIONING),
    (entry(Action.SCALE, Reason.PROVISIONING, "Running"), Phase.PROVISIONING, Reason.SCALING),
    (entry(Action.DELETE, None, "Running"), Phase.DELETING, Reason.DELETING),
    (entry(Action.INVALID, Reason.REFERENCE_NOT_FOUND), Phase.INVALID, Reason.REFERENCE_NOT_FOUND),
    (entry(Action.INVALID), Phase.INVALID, Reason.PROVISIONING),
    (entry(Action.SUSPENDED, None, "Running"), Phase.SUSPENDED, Reason.SUSPENDED),
    (entry(Action.REJECTED, Reason.INSUFFICIENT_COMPUTE), Phase.REJECTED, Reason.INSUFFICIENT_COMPUTE),
    (entry(Action.REJECTED, Reason.REPLACE_BLOCKED, "Running"), Phase.DEGRADED, Reason.REPLACE_BLOCKED),
    (entry(Action.UNCHANGED, Reason.PRUNE_BLOCKED, "Running"), Phase.DEGRADED, Reason.PRUNE_BLOCKED),
    (entry(Action.UNCHANGED, Reason.PROVISIONING, "Failed"), Phase.DEGRADED, Reason.PROVISIONING),
    (entry(Action.UNCHANGED, Reason.PROVISIONED, "Running"), Phase.RUNNING, Reason.PROVISIONED),
    (entry(Action.UPDATE, Reason.PROVISIONED, "Running"), Phase.RUNNING, Reason.PROVISIONED),
    (entry(Action.UNCHANGED, Reason.DELETING, "Deleting"), Phase.DELETING, Reason.DELETING),
    (entry(Action.UNCHANGED, Reason.PROVISIONING, "Provisioning"), Phase.PROVISIONING, Reason.PROVISIONING),
]


@pytest.mark.parametrize(("plan", "phase", "reason"), PLATFORMS)
def test_a_platform_phase_follows_its_action_and_cluster_state(
    plan: PlatformPlan, phase: Phase, reason: Reason
) -> None:
    assert platform_phase(plan, None, None, ())[:2] == (phase, reason)


def test_a_failed_cluster_says_so_and_unhealthy_hosts_degrade_a_running_one() -> None:
    failed = platform_phase(entry(Action.UNCHANGED, Reason.PROVISIONING, "Failed"), None, None, ())
    assert failed[2] == "msg: Palette reports the cluster Failed"
    running = platform_phase(entry(Action.UNCHANGED, Reason.PROVISIONED, "Running"), None, None, ("h2", "h1"))
    assert running[:2] == (Phase.DEGRADED, Reason.INSUFFICIENT_COMPUTE)
    assert "hosts h1, h2 are unhealthy" in running[2]


def test_palette_unavailable_or_a_failed_request_wins_over_the_action() -> None:
    kept = entry(Action.SCALE, Reason.PROVISIONING, "Running")
    new = entry(Action.CREATE, Reason.PROVISIONING)
    unavailable = (Phase.PENDING, Reason.PALETTE_UNAVAILABLE, "no route")
    assert platform_phase(kept, None, "no route", ()) == unavailable
    failed = Outcome(ok=False, error="500")
    assert platform_phase(kept, failed, None, ()) == (Phase.DEGRADED, Reason.PALETTE_UNAVAILABLE, "500")
    assert platform_phase(new, Outcome(ok=False), None, ())[:2] == (Phase.PENDING, Reason.PALETTE_UNAVAILABLE)
    assert platform_phase(new, Outcome(ok=False), None, ())[2] == "the Palette request failed"
    assert platform_phase(new, Outcome(ok=True, cluster_uid="c9"), None, ())[0] is Phase.PROVISIONING


def workload(action: WorkloadAction, *, running: bool = True, reason: Reason | None = None) -> WorkloadPlan:
    return WorkloadPlan("team-a", "w", "AIWorkload", "pool-a", action, reason, "msg", pool_running=running)


WORKLOADS = [
    (workload(WorkloadAction.ADMIT), None, Phase.RUNNING, Reason.ADMITTED),
    (workload(WorkloadAction.ADMITTED, reason=Reason.PROVISIONED), None, Phase.RUNNING, Reason.PROVISIONED),
    (workload(WorkloadAction.ADMIT, running=False), None, Phase.PENDING, Reason.POOL_NOT_READY),
    (workload(WorkloadAction.PENDING, reason=Reason.POOL_CAPACITY_EXCEEDED), None, Phase.PENDING,
     Reason.POOL_CAPACITY_EXCEEDED),
    (workload(WorkloadAction.REJECTED), None, Phase.REJECTED, None),
    (workload(WorkloadAction.INVALID), None, Phase.INVALID, None),
    (workload(WorkloadAction.SUSPENDED), None, Phase.SUSPENDED, None),
    (workload(WorkloadAction.REMOVE), None, Phase.DELETING, None),
    (workload(WorkloadAction.ADMIT), WorkloadOutcome(ok=False), Phase.PENDING, Reason.PALETTE_UNAVAILABLE),
    (workload(WorkloadAction.REMOVE), WorkloadOutcome(ok=False), Phase.DELETING, Reason.PALETTE_UNAVAILABLE),
]  # fmt: skip


@pytest.mark.parametrize(("plan", "outcome", "phase", "reason"), WORKLOADS)
def test_a_workload_phase_follows_its_admission_and_its_pool(
    plan: WorkloadPlan, outcome: WorkloadOutcome | None, phase: Phase, reason: Reason | None
) -> None:
    assert workload_phase(plan, outcome)[:2] == (phase, reason)


def test_a_workload_message_says_what_it_waits_for_or_what_failed() -> None:
    waiting = workload_phase(workload(WorkloadAction.ADMIT, running=False), None)
    assert waiting[2] == "msg; waits for the cluster of pool pool-a"
    failed = workload_phase(workload(WorkloadAction.REMOVE), WorkloadOutcome(ok=False, error="409"))
    assert failed[2] == "msg; profiles not detached: 409"


@pytest.mark.parametrize(
    ("state", "reason"),
    [("Running", Reason.PROVISIONED), ("running", Reason.PROVISIONED), ("Provisioning", Reason.PROVISIONING),
     ("Failed", Reason.PROVISIONING), ("Whatever", Reason.PROVISIONING)],
)  # fmt: skip
def test_a_kept_cluster_is_provisioned_only_once_running(state: str, reason: Reason) -> None:
    assert cluster_reason(cluster(state)) is reason


def test_only_running_is_ready_and_an_unknown_recorded_phase_reads_as_pending() -> None:
    assert [ready_of(p) for p in (Phase.RUNNING, "Running", Phase.DEGRADED, None)] == [
        "True",
        "True",
        "False",
        "False",
    ]
    assert recorded_phase("Degraded") is Phase.DEGRADED
    assert recorded_phase(None) is Phase.PENDING
    assert recorded_phase("Nonsense") is Phase.PENDING
