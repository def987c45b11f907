"""Invalid is not absent for pools and workloads (pure): whatever a revision breaks, every admitted
workload keeps its hosts, GPUs, MIG instances and profiles, the pool keeps its size and MIG layout, and
the revert moves nothing. Passes are chained through what the status branch records."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from reconciler.inventory import Inventory
from reconciler.placement.admission_types import WorkloadAction
from reconciler.plan import Action, Observed, merge, plan_targets
from reconciler.resolve import Target, route
from tests._chain_support import NS, PROJECT, World, a100_mig_hosts, hosts_of, load, mig_pool_files

Files = dict[str, Any]


def _spec(path: str, key: str, value: Any) -> Callable[[Files], None]:
    return lambda f: f[path]["spec"].__setitem__(key, value)


BREAKS: dict[str, Callable[[Files], None]] = {
    "ComputeProfile typo": _spec("project-a/computeprofile.yaml", "controlPlaneDefaultz", {"nodeCount": 1}),
    "WorkloadProfile typo": _spec("project-a/workloadprofile.yaml", "clusterProfilez", []),
    "ScalingPolicy error": _spec("project-a/scalingpolicy.yaml", "cooldownDuration", "soon"),
    "pool typo": _spec("project-a/pool.yaml", "gpu", []),
    "workload typo": _spec("project-a/workloads/sliced.yaml", "replica", 2),
    "shared platform typo": _spec("project-a/workloads/tenant.yaml", "gpu", []),
    "Project typo": _spec("project-a/project.yaml", "computeProfileRefs", {}),
    "Settings typo": _spec("project-a/settings.yaml", "palete", {}),
    "namespace typo": lambda f: f["project-a/workloads/sliced.yaml"]["metadata"].__setitem__(
        "namespace", "projet-a"
    ),
    "pool namespace typo": lambda f: f["project-a/pool.yaml"]["metadata"].__setitem__(
        "namespace", "projet-a"
    ),
    "unidentifiable document": lambda f: f["project-a/workloads/sliced.yaml"].pop("kind"),
    "YAML syntax error": lambda f: f.__setitem__("project-a/workloads/sliced.yaml", "kind: [\n"),
    "pool file unreadable": lambda f: f.__setitem__("project-a/pool.yaml", "kind: [\n"),
    "Settings file unreadable": lambda f: f.__setitem__("project-a/settings.yaml", "kind: [\n"),
    "WorkloadProfile unidentifiable": lambda f: f["project-a/workloadprofile.yaml"].pop("metadata"),
}


def _settled() -> tuple[World, Any]:
    world = World(tuple(a100_mig_hosts(3)))
    plan = None
    for _ in range(3):
        plan, world = world.step(load(mig_pool_files()))
    assert plan is not None
    return world, plan


@pytest.mark.parametrize("name", sorted(BREAKS))
def test_a_broken_revision_keeps_every_binding_and_the_revert_moves_nothing(name: str) -> None:
    world, before = _settled()
    bound = world.bindings(before)
    assert {k[1] for k in bound} == {"whole", "sliced", "tenant"}
    assert all(b.profiles for b in bound.values()) and any(b.mig for b in bound.values())
    files = mig_pool_files()
    broken = copy.deepcopy(files)
    BREAKS[name](broken)
    desired = load(broken)
    assert desired.has_errors
    plan, after = world.step(desired)
    assert world.bindings(plan) == bound
    assert hosts_of(plan) == hosts_of(before)
    pool = plan.get_pool(NS, "shared-a100")
    assert pool is not None and pool.mig == before.get_pool(NS, "shared-a100").mig
    assert not any(p.mutating for p in [*plan.platforms, *(q.cluster for q in plan.pools)])
    assert not any(w.action is WorkloadAction.REMOVE for w in plan.workloads)
    # The status of what could not be read says so (Invalid), or carries the error.
    changed = [w for w in plan.workloads if w.key[0] == NS and w.action is not WorkloadAction.ADMITTED]
    assert all(w.action is WorkloadAction.INVALID for w in changed)
    # The revert: every binding, host and layout as before; nothing new admitted, nothing moved.
    again, _ = after.step(load(files))
    assert after.bindings(again) == bound
    assert hosts_of(again) == hosts_of(before)
    assert {w.key: w.action for w in again.workloads} == {w.key: w.action for w in before.workloads}


def test_a_namespace_typo_reports_the_old_workload_invalid_naming_the_namespace() -> None:
    world, _ = _settled()
    broken = mig_pool_files()
    broken["project-a/workloads/sliced.yaml"]["metadata"]["namespace"] = "projet-a"
    plan, _ = world.step(load(broken))
    old = [w for w in plan.get_workloads(NS, "sliced") if w.pool == "shared-a100"]
    assert len(old) == 1 and old[0].action is WorkloadAction.INVALID and old[0].mig
    assert "moved to namespace projet-a, which does not exist" in old[0].message


def test_a_platform_moved_to_a_namespace_that_does_not_exist_keeps_its_cluster() -> None:
    files = mig_pool_files()
    files["project-a/platforms/p.yaml"] = {
        "apiVersion": "palette.ai/v1alpha1",
        "kind": "MLPlatform",
        "metadata": {"name": "p", "namespace": NS},
        "spec": {"mode": "dedicated", "gpus": [{"family": "NVIDIA-A100", "count": 8}]},
    }
    world = World(tuple(a100_mig_hosts(4)))
    for _ in range(2):
        plan, world = world.step(load(files))
    placed = plan.get(NS, "p")
    assert placed is not None and placed.workers
    files["project-a/platforms/p.yaml"]["metadata"]["namespace"] = "projet-a"
    plan, _ = world.step(load(files), max_deletions=5)
    kept = plan.get(NS, "p")
    assert kept is not None and kept.action is Action.INVALID and kept.workers == placed.workers


def test_a_workload_really_removed_in_a_complete_revision_leaves_its_pool() -> None:
    world, _ = _settled()
    files = mig_pool_files()
    del files["project-a/workloads/sliced.yaml"]
    plan, _ = world.step(load(files))
    assert [w.action for w in plan.get_workloads(NS, "sliced")] == [WorkloadAction.REMOVE]


def test_workloads_of_a_pool_that_cannot_be_routed_keep_what_they_hold() -> None:
    """Without ``--palette``, a namespace whose Settings cannot be read has no Palette target: its pool is
    not planned this pass, and its workloads (invalid or waiting) keep their GPUs and MIG instances,
    named with their pool, so the status branch keeps them and nothing is detached."""
    world, before = _settled()
    files = mig_pool_files()
    files["project-a/settings.yaml"] = "kind: [\n"
    desired = load(files)
    routing = route(desired)
    assert ("project-a", "shared-a100") in routing.pool_unavailable
    target = Target("https://api.spectrocloud.com", PROJECT)
    observed = {target: Observed(Inventory(world.machines), world.clusters)}
    plans = plan_targets(
        desired,
        routing,
        observed,
        previous=world.previous,
        pool_modes=world.modes,
        previous_layouts=world.layouts,
    )
    plan = merge(desired.revision, plans, desired.diagnostics)
    kept = {w.name: (w.pool, [u.ref for u in w.gpus], w.mig) for w in plan.workloads if w.gpus or w.mig}
    held = {w.name: (w.pool, [u.ref for u in w.gpus], w.mig) for w in before.workloads if w.gpus or w.mig}
    assert kept == held
    assert not plan.pools and not any(c.action is Action.DELETE for c in plan.platforms)
