"""Planning ComputePools and their workloads (docs/allocation.md): placement beside the
platforms, admission on the planned hosts, and the plan's JSON."""

from __future__ import annotations

import json

from reconciler.inventory import HostState
from reconciler.manifests import load_files
from reconciler.model.conditions import Reason
from reconciler.model.diagnostics import Diagnostic
from reconciler.model.pools import KIND_LABEL, POOL_KIND, POOL_MODE_LABEL
from reconciler.placement.admission_types import PreviousAdmission, WorkloadAction
from reconciler.placement.units import GpuRef
from reconciler.plan import Action, Observed, make_plan, plan_targets
from reconciler.resolve import route
from tests._allocate_support import (
    NS,
    ai_workload,
    cluster,
    cps,
    desired,
    inventory,
    machine,
    platform,
    pool,
    pool_cluster,
    profile,
    workload,
)
from tests._manifests_support import namespace_yaml

H100 = "NVIDIA-H100"
USED = HostState.IN_USE


def held(name: str, host: str, n: int, ns: str = NS) -> PreviousAdmission:
    """What the status branch recorded: workload ``name`` held GPUs 0..n-1 of ``host``."""
    return PreviousAdmission((ns, name), tuple(GpuRef(host, i) for i in range(n)))


# --- placement ------------------------------------------------------------------------------------


def test_pool_is_placed_like_a_dedicated_platform_requesting_its_gpus() -> None:
    machines = [*cps(1), machine("g8", 8), machine("h8", 8), machine("f4", 4)]
    plan = make_plan(desired(pool("shared", {H100: 12})), inventory(machines), [])
    entry = plan.get_pool(NS, "shared")
    assert entry is not None and plan.platforms == []
    assert (entry.action, entry.reason) == (Action.CREATE, Reason.PROVISIONING)
    assert entry.cluster.kind == POOL_KIND and entry.mode == "shared"
    # Fewest surplus GPUs, then fewest hosts, then host names: 8 + 4, not 8 + 8.
    assert entry.cluster.workers == ("f4", "g8") and entry.cluster.gpus == {H100: 12}
    assert entry.cluster.control_plane == ("cp-0",)
    assert entry.labels[KIND_LABEL] == POOL_KIND and entry.labels[POOL_MODE_LABEL] == "shared"


def test_pool_gpus_are_not_limited_by_its_compute_profile() -> None:
    machines = [*cps(1), machine("g", 8)]
    plan = make_plan(desired(pool("shared", {H100: 8}), profile(limits={H100: 2})), inventory(machines), [])
    entry = plan.get_pool(NS, "shared")
    assert entry is not None and entry.action is Action.CREATE and entry.cluster.gpus == {H100: 8}


def test_pool_minimum_workers_come_from_its_workload_profile_then_the_pool_then_the_profile() -> None:
    machines = [*cps(1), machine("g", 8), *(machine(f"w{i}", 0, None, tagged=True) for i in range(4))]
    cases = [
        (pool("p", {H100: 8}, min_workers=2, workload_name="wp"), [workload("wp", min_nodes="4")], 4),
        (pool("p", {H100: 8}, min_workers=2, workload_name="wp"), [workload("wp")], 2),
        (pool("p", {H100: 8}), [], 3),
    ]
    for resource, extra, expected in cases:
        state = desired(resource, profile(min_workers=3), *extra)
        entry = make_plan(state, inventory(machines), []).get_pool(NS, "p")
        assert entry is not None and len(entry.cluster.workers) == expected, (expected, entry)


def test_pools_and_platforms_share_one_inventory_in_namespace_then_name_order() -> None:
    machines = [*cps(2), machine("g", 8)]
    first = make_plan(desired(pool("a", {H100: 8}), platform("b", {H100: 8})), inventory(machines), [])
    pool_a, platform_b = first.get_pool(NS, "a"), first.get(NS, "b")
    assert pool_a is not None and platform_b is not None
    assert pool_a.action is Action.CREATE and platform_b.action is Action.REJECTED
    second = make_plan(desired(platform("b", {H100: 8}), pool("c", {H100: 8})), inventory(machines), [])
    pool_c, platform_b = second.get_pool(NS, "c"), second.get(NS, "b")
    assert pool_c is not None and platform_b is not None
    assert platform_b.action is Action.CREATE and pool_c.action is Action.REJECTED
    assert pool_c.reason is Reason.INSUFFICIENT_COMPUTE
    # The namespace comes first, whatever the kind.
    third = make_plan(
        desired(platform("a", {H100: 8}, ns="zzz"), pool("z", {H100: 8}, ns="aaa")), inventory(machines), []
    )
    pool_z, platform_a = third.get_pool("aaa", "z"), third.get("zzz", "a")
    assert pool_z is not None and platform_a is not None
    assert (pool_z.action, platform_a.action) == (Action.CREATE, Action.REJECTED)


def test_existing_pool_cluster_is_sticky_and_scales_in_one_step() -> None:
    machines = [
        *cps(1, state=USED),
        machine("a", 8, state=USED),
        machine("b", 4, state=USED),
        machine("c", 8),
    ]
    existing = pool_cluster("shared", ["cp-0"], ["a", "b"])
    plan = make_plan(desired(pool("shared", {H100: 16})), inventory(machines), [existing])
    entry = plan.get_pool(NS, "shared")
    assert entry is not None and (entry.action, entry.reason) == (Action.SCALE, Reason.SCALING)
    assert entry.cluster.add_workers == ("c",) and entry.cluster.remove_workers == ("b",)
    assert entry.cluster.existing == existing


def test_pool_mode_change_once_its_cluster_exists_is_rejected_and_its_cluster_kept() -> None:
    machines = [*cps(1, state=USED), machine("g", 8, state=USED)]
    labelled = pool_cluster("shared", ["cp-0"], ["g"], mode="shared")
    unlabelled = pool_cluster("shared", ["cp-0"], ["g"], mode=None)
    state = desired(pool("shared", {H100: 8}, mode="dedicated"))
    for clusters, modes in (([labelled], None), ([unlabelled], {(NS, "shared"): "shared"})):
        entry = make_plan(state, inventory(machines), clusters, pool_modes=modes).get_pool(NS, "shared")
        assert entry is not None and (entry.action, entry.reason) == (Action.REJECTED, Reason.INVALID_SPEC)
        assert "cannot change from shared to dedicated" in entry.message
        assert entry.cluster.workers == ("g",) and entry.cluster.control_plane == ("cp-0",)
    # Without the label and without the caller's record, the previous mode is unknown: no refusal.
    entry = make_plan(state, inventory(machines), [unlabelled]).get_pool(NS, "shared")
    assert entry is not None and entry.action is Action.UNCHANGED


def test_removed_pool_cluster_is_deleted_and_counted_by_the_prune_guard_like_a_platform() -> None:
    machines = [*cps(2, state=USED), machine("g", 8, state=USED)]
    clusters = [pool_cluster("old-pool", ["cp-0"], ["g"]), cluster("old-platform", ["cp-1"], [])]
    one = make_plan(desired(), inventory(machines), clusters[:1])
    gone = one.get_pool(NS, "old-pool")
    assert gone is not None and (gone.action, gone.reason) == (Action.DELETE, Reason.DELETING)
    both = make_plan(desired(), inventory(machines), clusters, max_deletions=1)
    blocked = both.get_pool(NS, "old-pool")
    assert blocked is not None and (blocked.action, blocked.reason) == (
        Action.UNCHANGED,
        Reason.PRUNE_BLOCKED,
    )
    assert "would delete 2 platform or pool clusters" in blocked.message
    kept = both.get(NS, "old-platform")
    assert kept is not None and kept.reason is Reason.PRUNE_BLOCKED


def test_a_cluster_without_the_kind_label_is_a_platforms_not_a_pools() -> None:
    machines = [*cps(1, state=USED), machine("g", 8, state=USED)]
    # A platform's cluster whose name matches a pool of the repository is not taken for the pool's.
    existing = cluster("p", ["cp-0"], ["g"])
    plan = make_plan(desired(pool("p", {H100: 8})), inventory(machines), [existing], max_deletions=5)
    entry = plan.get_pool(NS, "p")
    assert entry is not None and entry.action is Action.REJECTED and entry.cluster.existing is None
    orphan = plan.get(NS, "p")
    assert orphan is not None and orphan.action is Action.DELETE


def test_pool_routes_like_a_platform_through_its_profile_settings() -> None:
    state = desired(pool("shared", {H100: 8}), ai_workload("w", "shared", {H100: 2}))
    routing = route(state, "inventory:x")
    assert routing.all_pools() == {(NS, "shared")} and routing.all_platforms() == set()
    target = routing.target_of_pool((NS, "shared"))
    assert target is not None and target in routing.targets
    seen = Observed(inventory([*cps(1), machine("g", 8)]), [])
    plans = plan_targets(state, routing, {target: seen})
    assert [w.action for w in plans[target].workloads] == [WorkloadAction.ADMIT]


# --- admission ------------------------------------------------------------------------------------


def test_shared_platform_is_admitted_like_an_ai_workload_and_listed_only_under_workloads() -> None:
    state = desired(
        pool("shared", {H100: 8}),
        platform("tenant", {H100: 2}, mode="shared", pool_name="shared"),
        ai_workload("job", "shared", {H100: 2}),
    )
    plan = make_plan(state, inventory([*cps(1), machine("g", 8)]), [])
    assert plan.platforms == []
    by_name = {w.name: w for w in plan.workloads}
    assert {n: (w.kind, w.action, w.gpu_counts()) for n, w in by_name.items()} == {
        "job": ("AIWorkload", WorkloadAction.ADMIT, {H100: 2}),
        "tenant": ("MLPlatform", WorkloadAction.ADMIT, {H100: 2}),
    }
    doc = plan.to_json()
    assert doc["platforms"] == [] and [w["name"] for w in doc["workloads"]] == ["job", "tenant"]


def test_workload_on_a_pool_being_created_is_admitted_and_says_its_profiles_wait_for_the_pool() -> None:
    state = desired(pool("shared", {H100: 8}), ai_workload("w", "shared", {H100: 2}))
    plan = make_plan(state, inventory([*cps(1), machine("g", 8)]), [])
    (entry,) = plan.workloads
    assert (entry.action, entry.reason, entry.pool_running) == (WorkloadAction.ADMIT, Reason.ADMITTED, False)
    assert "its profiles are attached once the cluster of pool shared is Running" in entry.message
    # Once the pool's cluster is Running, the same admission is kept as it is.
    running = pool_cluster("shared", ["cp-0"], ["g"])
    machines = [*cps(1, state=USED), machine("g", 8, state=USED)]
    again = make_plan(state, inventory(machines), [running], previous={(NS, "shared"): [held("w", "g", 2)]})
    (kept,) = again.workloads
    assert (kept.action, kept.pool_running) == (WorkloadAction.ADMITTED, True)
    assert [(u.host_uid, u.index) for u in kept.gpus] == [("g", 0), ("g", 1)]


def test_pending_workload_says_what_is_short_and_what_would_free_it() -> None:
    state = desired(
        pool("shared", {H100: 8}),
        ai_workload("big", "shared", {H100: 6}, priority=5),
        ai_workload("late", "shared", {H100: 4}),
    )
    plan = make_plan(state, inventory([*cps(1), machine("g", 8)]), [])
    late = next(w for w in plan.workloads if w.name == "late")
    assert (late.action, late.reason) == (WorkloadAction.PENDING, Reason.POOL_CAPACITY_EXCEEDED)
    assert late.message == (
        f"needs 4 {H100} GPUs, 2 free in pool shared (8 total, 6 admitted); "
        f"frees when {NS}/big is removed, or the pool grows by 2"
    )
    assert plan.placeable  # waiting for capacity is not an error of the repository


def test_removed_workload_frees_its_gpus_for_another_in_the_same_plan() -> None:
    machines = [*cps(1, state=USED), machine("g", 8, state=USED)]
    running = pool_cluster("shared", ["cp-0"], ["g"])
    state = desired(pool("shared", {H100: 8}), ai_workload("next", "shared", {H100: 8}))
    previous = {(NS, "shared"): [held("gone", "g", 8)]}
    plan = make_plan(state, inventory(machines), [running], previous=previous)
    actions = {w.name: w.action for w in plan.workloads}
    assert actions == {"gone": WorkloadAction.REMOVE, "next": WorkloadAction.ADMIT}
    pool_entry = plan.get_pool(NS, "shared")
    assert pool_entry is not None and pool_entry.admitted == ((NS, "next"),)
    assert pool_entry.capacity[H100].admitted == 8


def test_suspended_pool_keeps_its_admitted_workloads_and_admits_nobody_new() -> None:
    machines = [*cps(1, state=USED), machine("g", 8, state=USED)]
    running = pool_cluster("shared", ["cp-0"], ["g"])
    state = desired(
        pool("shared", {H100: 8}, suspend=True),
        ai_workload("old", "shared", {H100: 2}),
        ai_workload("new", "shared", {H100: 2}),
    )
    plan = make_plan(state, inventory(machines), [running], previous={(NS, "shared"): [held("old", "g", 2)]})
    by_name = {w.name: w for w in plan.workloads}
    assert by_name["old"].action is WorkloadAction.ADMITTED
    assert (by_name["new"].action, by_name["new"].reason) == (WorkloadAction.PENDING, Reason.POOL_NOT_READY)
    assert "pool shared is suspended" in by_name["new"].message


def test_workload_above_the_pool_profile_limits_is_rejected_and_the_plan_not_placeable() -> None:
    state = desired(
        pool("shared", {H100: 8}), profile(limits={H100: 2}), ai_workload("w", "shared", {H100: 4})
    )
    plan = make_plan(state, inventory([*cps(1), machine("g", 8)]), [])
    (entry,) = plan.workloads
    assert (entry.action, entry.reason) == (WorkloadAction.REJECTED, Reason.GPU_LIMIT_EXCEEDED)
    assert not plan.placeable


POOL_REPO = (
    namespace_yaml("a", project_id=None)
    + """\
---
apiVersion: spectrocloud.com/v1alpha1
kind: AIWorkload
metadata: {name: lost, namespace: a}
spec: {computePoolRef: {name: nowhere}, gpus: [{family: NVIDIA-H100, count: 1}]}
"""
)


def test_workload_whose_pool_does_not_exist_is_invalid_reference_not_found() -> None:
    state = load_files([("repo.yaml", POOL_REPO.encode())])
    plan = make_plan(state, inventory(cps(1)), [])
    (entry,) = plan.workloads
    assert (entry.action, entry.reason) == (WorkloadAction.INVALID, Reason.REFERENCE_NOT_FOUND)
    assert "nowhere" in entry.message and entry.pool is None
    assert not plan.placeable


# --- the JSON ---------------------------------------------------------------------------------------


def test_plan_json_has_pools_and_workloads_in_the_section_8_shape() -> None:
    state = desired(
        pool("shared", {H100: 8}, scaling_policy="gpu-autoscale"),
        ai_workload("serve", "shared", {H100: 2}),
        ai_workload("sweep", "shared", {H100: 8}),
        revision="f00d",
    )
    doc = json.loads(json.dumps(make_plan(state, inventory([*cps(1), machine("g", 8)]), []).to_json()))
    assert doc["platforms"] == []
    assert doc["pools"] == [
        {
            "namespace": NS,
            "name": "shared",
            "mode": "shared",
            "action": "create",
            "reason": "Provisioning",
            "message": "create cluster on 2 amd64 hosts",
            "controlPlane": ["cp-0"],
            "workers": ["g"],
            "gpus": {H100: 8},
            "capacity": {H100: {"total": 8, "admitted": 2, "free": 6}},
            "mig": {},
            "migConfig": None,
            "scaling": {
                "policy": "gpu-autoscale",
                "decision": "none",
                "reason": "NotEvaluated",
                "message": doc["pools"][0]["scaling"]["message"],
            },
        }
    ]
    serve, sweep = doc["workloads"]
    assert serve == {
        "namespace": NS,
        "name": "serve",
        "pool": "shared",
        "action": "admit",
        "reason": "Admitted",
        "message": serve["message"],
        "replicas": 1,
        "gpus": {H100: 2},
        "mig": [],
        "bound": [{"replica": 0, "host": "g", "gpus": [0, 1]}],
        "position": None,
        "environment": None,
        "candidates": [],
    }
    assert (sweep["action"], sweep["reason"], sweep["gpus"]) == ("pending", "PoolCapacityExceeded", {})
    assert (sweep["bound"], sweep["position"]) == ([], 1)


def test_plan_json_has_empty_pool_and_workload_lists_without_pools() -> None:
    doc = make_plan(desired(platform("p", {H100: 8})), inventory([*cps(1), machine("g", 8)]), []).to_json()
    assert doc["pools"] == [] and doc["workloads"] == []
    assert list(doc) == ["revision", "platforms", "pools", "workloads", "quotas", "diagnostics"]


def _broken(state_kind: str, name: str) -> Diagnostic:
    return Diagnostic(f"{name}.yaml", 3, 1, "spec.gpus: bad", kind=state_kind, namespace=NS, name=name)


def test_invalid_workload_keeps_the_gpus_it_held_and_is_reported_invalid() -> None:
    machines = [*cps(1, state=USED), machine("g", 8, state=USED)]
    running = pool_cluster("shared", ["cp-0"], ["g"])
    state = desired(pool("shared", {H100: 8}), ai_workload("newcomer", "shared", {H100: 8}))
    state.invalid[("AIWorkload", NS, "broken")] = [_broken("AIWorkload", "broken")]
    previous = {(NS, "shared"): [held("broken", "g", 2)]}
    plan = make_plan(state, inventory(machines), [running], previous=previous)
    by_name = {w.name: w for w in plan.workloads}
    broken = by_name["broken"]
    assert (broken.action, broken.reason, broken.pool) == (
        WorkloadAction.INVALID,
        Reason.INVALID_SPEC,
        "shared",
    )
    assert broken.gpu_counts() == {H100: 2} and "keeps its 2 GPU(s) in pool shared" in broken.message
    # Its GPUs are not handed to anyone else while it is invalid.
    assert by_name["newcomer"].action is WorkloadAction.PENDING
    assert not plan.placeable


def test_invalid_platform_that_was_a_tenant_is_listed_as_a_workload_not_a_platform() -> None:
    machines = [*cps(1, state=USED), machine("g", 8, state=USED)]
    running = pool_cluster("shared", ["cp-0"], ["g"])
    state = desired(pool("shared", {H100: 8}))
    state.invalid[("MLPlatform", NS, "tenant")] = [_broken("MLPlatform", "tenant")]
    previous = {(NS, "shared"): [PreviousAdmission((NS, "tenant"), (GpuRef("g", 0),), kind="MLPlatform")]}
    plan = make_plan(state, inventory(machines), [running], previous=previous)
    assert plan.get(NS, "tenant") is None
    (entry,) = plan.get_workloads(NS, "tenant")
    assert (entry.kind, entry.action, entry.gpu_counts()) == ("MLPlatform", WorkloadAction.INVALID, {H100: 1})


def test_workload_moving_to_another_pool_leaves_the_old_one_in_the_same_plan() -> None:
    machines = [*cps(2, state=USED), machine("g", 8, state=USED), machine("h", 8, state=USED)]
    clusters = [pool_cluster("one", ["cp-0"], ["g"]), pool_cluster("two", ["cp-1"], ["h"])]
    state = desired(pool("one", {H100: 8}), pool("two", {H100: 8}), ai_workload("w", "two", {H100: 8}))
    plan = make_plan(state, inventory(machines), clusters, previous={(NS, "one"): [held("w", "g", 8)]})
    leave, join = plan.get_workloads(NS, "w")
    assert (leave.pool, leave.action) == ("one", WorkloadAction.REMOVE)
    assert (join.pool, join.action, join.gpu_counts()) == ("two", WorkloadAction.ADMIT, {H100: 8})
    assert [w["action"] for w in plan.to_json()["workloads"]] == ["remove", "admit"]


def test_removed_shared_platform_keeps_its_kind_from_the_status_record() -> None:
    machines = [*cps(1, state=USED), machine("g", 8, state=USED)]
    running = pool_cluster("shared", ["cp-0"], ["g"])
    previous = {(NS, "shared"): [PreviousAdmission((NS, "gone"), (GpuRef("g", 0),), kind="MLPlatform")]}
    plan = make_plan(desired(pool("shared", {H100: 8})), inventory(machines), [running], previous=previous)
    (entry,) = plan.workloads
    assert (entry.kind, entry.action, entry.gpus) == ("MLPlatform", WorkloadAction.REMOVE, ())
