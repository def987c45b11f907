"""Deliberate removals pass, accidental ones do not (pure): the deletion guard counts clusters and
admitted workloads over a pass; a ``Reconciler-Allow-Deletions: N`` trailer raises the limit for its
revision only."""

from __future__ import annotations

import pytest

from reconciler.deletions import DeletionGuard, approved_deletions
from reconciler.model.conditions import Reason
from reconciler.placement.admission_types import WorkloadAction
from reconciler.plan import Action
from tests._chain_support import NS, World, a100_mig_hosts, load, mig_pool_files


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("Remove the old pool\n\nReconciler-Allow-Deletions: 3\n", 3),
        ("Remove\n\nWhy we do it.\n\nSigned-off-by: A <a@b>\nreconciler-allow-deletions:  12", 12),
        ("Remove\n\nReconciler-Allow-Deletions: 2\nReconciler-Allow-Deletions: 5", 5),
        ("Reconciler-Allow-Deletions: 3", None),  # a subject alone is no trailer
        ("Remove\n\nReconciler-Allow-Deletions: 3\n\nA paragraph after it", None),
        ("Remove\n\nReconciler-Allow-Deletions: many", None),
        ("Remove\n\nReconciler-Allow-Deletions: -1", None),
        (None, None),
    ],
)
def test_the_trailer_is_read_from_the_last_paragraph(message: str | None, expected: int | None) -> None:
    assert approved_deletions(message) == expected


def test_the_guard_counts_clusters_and_workloads_and_an_approval_only_raises_the_limit() -> None:
    guard = DeletionGuard(max_deletions=2, approved=1, revision="0123456789")
    assert guard.limit == 2
    assert guard.blocked(["MLPlatform"], 1, True) == ""
    msg = guard.blocked(["ComputePool"], 2, True)
    assert msg == (
        "would delete 1 platform or pool clusters and remove 2 admitted workloads, more than "
        "--max-deletions 2; nothing is deleted"
        " (approve with the commit trailer Reconciler-Allow-Deletions: 3, or split the change)"
    )
    assert "could not be read" in guard.blocked([], 1, False)
    approved = DeletionGuard(1, 4, "0123456789")
    assert approved.blocked(["MLPlatform"] * 2, 2, True) == ""
    note = approved.note(["MLPlatform"] * 2, 2, "")
    assert note == (
        "deletions approved by Reconciler-Allow-Deletions: 4 in 0123456: deletes 2 platform clusters and "
        "removes 2 admitted workloads"
    )
    assert "more than the 4 approved by Reconciler-Allow-Deletions" in approved.blocked([], 5, True)
    assert approved.note([], 0, "") is None  # nothing removed: nothing to name
    assert approved.note(["MLPlatform"], 0, "") == (
        "Reconciler-Allow-Deletions: 4 in 0123456 (not needed: 1 within --max-deletions 1)"
    )


def _settled() -> tuple[World, dict[str, object]]:
    files = mig_pool_files()
    world = World(tuple(a100_mig_hosts(3)))
    for _ in range(3):
        _, world = world.step(load(files))
    return world, files


def test_removing_two_admitted_workloads_over_the_limit_removes_none() -> None:
    world, files = _settled()
    plan0 = world.plan(load(files))
    bound = world.bindings(plan0)
    del files["project-a/workloads/sliced.yaml"], files["project-a/workloads/whole.yaml"]
    plan, after = world.step(load(files), max_deletions=1)
    held = [w for w in plan.workloads if w.name in ("sliced", "whole")]
    assert [w.action for w in held] == [WorkloadAction.ADMITTED] * 2
    assert all(w.reason is Reason.PRUNE_BLOCKED for w in held)
    assert all("remove 2 admitted workloads, more than --max-deletions 1" in w.message for w in held)
    assert world.bindings(plan) == bound  # GPUs, MIG instances and attached profiles all kept
    assert plan.deletions_note == ""
    # The operator approves the removals in the next commit: both leave, and the note names it.
    plan, _ = after.step(load(files), max_deletions=1, approved=2)
    assert {w.name: w.action for w in plan.workloads if w.name in ("sliced", "whole")} == {
        "sliced": WorkloadAction.REMOVE,
        "whole": WorkloadAction.REMOVE,
    }
    assert plan.deletions_note.startswith("deletions approved by Reconciler-Allow-Deletions: 2 in r")


def test_a_platform_and_a_workload_count_together() -> None:
    world, files = _settled()
    files["project-a/platforms/p.yaml"] = {
        "apiVersion": "palette.ai/v1alpha1",
        "kind": "MLPlatform",
        "metadata": {"name": "p", "namespace": NS},
        "spec": {"mode": "dedicated", "gpus": [{"family": "NVIDIA-A100", "count": 8}]},
    }
    _, world = world.step(load(files))
    _, world = world.step(load(files))
    del files["project-a/platforms/p.yaml"], files["project-a/workloads/tenant.yaml"]
    plan = world.plan(load(files), max_deletions=1)
    platform = plan.get(NS, "p")
    assert platform is not None and (platform.action, platform.reason) == (
        Action.UNCHANGED,
        Reason.PRUNE_BLOCKED,
    )
    assert platform.message == (
        "would delete 1 platform clusters and remove 1 admitted workload, more than --max-deletions 1; "
        "nothing is deleted (approve with the commit trailer Reconciler-Allow-Deletions: 2, or split the "
        "change)"
    )
    (tenant,) = plan.get_workloads(NS, "tenant")
    assert (tenant.action, tenant.reason) == (WorkloadAction.ADMITTED, Reason.PRUNE_BLOCKED) and tenant.gpus
    allowed = world.plan(load(files), max_deletions=2)
    assert allowed.get(NS, "p").action is Action.DELETE  # type: ignore[union-attr]
    assert [w.action for w in allowed.get_workloads(NS, "tenant")] == [WorkloadAction.REMOVE]


def test_one_removal_within_the_limit_passes() -> None:
    world, files = _settled()
    del files["project-a/workloads/sliced.yaml"]
    plan = world.plan(load(files), max_deletions=1)
    assert [w.action for w in plan.get_workloads(NS, "sliced")] == [WorkloadAction.REMOVE]
    assert all(w.reason is not Reason.PRUNE_BLOCKED for w in plan.workloads)
