"""The planner: one test per action rule of docs/planning.md and the prune guard."""

from __future__ import annotations

import json

from reconciler.inventory import HostState
from reconciler.model.conditions import Reason
from reconciler.model.diagnostics import Diagnostic
from reconciler.plan import Action, make_plan
from tests._allocate_support import NS, cluster, cps, desired, inventory, machine, platform, profile

H100 = "NVIDIA-H100"
USED = HostState.IN_USE


def test_new_platform_is_created() -> None:
    plan = make_plan(desired(platform("p", {H100: 8})), inventory([*cps(1), machine("g", 8)]), [])
    entry = plan.platforms[0]
    assert (entry.action, entry.reason) == (Action.CREATE, Reason.PROVISIONING)
    assert entry.add_workers == ("g",) and entry.add_control_plane == ("cp-0",)
    assert entry.existing is None and entry.arch == "amd64"


def test_matching_running_cluster_is_unchanged_provisioned() -> None:
    machines = [*cps(1, state=USED), machine("g", 8, state=USED)]
    existing = cluster("p", ["cp-0"], ["g"], state="Running")
    plan = make_plan(desired(platform("p", {H100: 8})), inventory(machines), [existing])
    entry = plan.platforms[0]
    assert (entry.action, entry.reason) == (Action.UNCHANGED, Reason.PROVISIONED)
    assert entry.existing == existing


def test_matching_provisioning_cluster_is_unchanged_provisioning() -> None:
    machines = [*cps(1, state=USED), machine("g", 8, state=USED)]
    existing = cluster("p", ["cp-0"], ["g"], state="Provisioning")
    plan = make_plan(desired(platform("p", {H100: 8})), inventory(machines), [existing])
    assert (plan.platforms[0].action, plan.platforms[0].reason) == (Action.UNCHANGED, Reason.PROVISIONING)


def test_changed_gpu_request_scales_in_place() -> None:
    machines = [*cps(1, state=USED), machine("g", 8, state=USED), machine("f", 4)]
    existing = cluster("p", ["cp-0"], ["g"])
    plan = make_plan(desired(platform("p", {H100: 12})), inventory(machines), [existing])
    entry = plan.platforms[0]
    assert (entry.action, entry.reason) == (Action.SCALE, Reason.SCALING)
    assert entry.add_workers == ("f",) and entry.remove_workers == ()
    assert entry.workers == ("f", "g") and entry.gpus == {H100: 12}


def test_scale_down_lists_removed_workers() -> None:
    machines = [*cps(1, state=USED), machine("a", 8, state=USED), machine("b", 4, state=USED)]
    existing = cluster("p", ["cp-0"], ["a", "b"])
    entry = make_plan(desired(platform("p", {H100: 4})), inventory(machines), [existing]).platforms[0]
    assert entry.action is Action.SCALE and entry.remove_workers == ("a",) and entry.workers == ("b",)


def test_architecture_change_is_replace_when_allowed() -> None:
    machines = [
        *cps(1, "x", state=USED),
        machine("h", 8, state=USED),
        *cps(1, "y", arch="arm64"),
        machine("arm", 8, "NVIDIA-GH200", arch="arm64"),
    ]
    existing = cluster("p", ["x-0"], ["h"], arch="amd64")
    allowed = platform("p", {"NVIDIA-GH200": 8}, annotations={"palette.ai/allow-replace": "true"})
    entry = make_plan(desired(allowed), inventory(machines), [existing]).platforms[0]
    assert entry.action is Action.REPLACE and entry.arch == "arm64"
    assert entry.remove_workers == ("h",) and entry.add_workers == ("arm",)
    blocked = make_plan(desired(platform("p", {"NVIDIA-GH200": 8})), inventory(machines), [existing])
    entry = blocked.platforms[0]
    assert (entry.action, entry.reason) == (Action.REJECTED, Reason.REPLACE_BLOCKED)
    assert entry.workers == ("h",)  # the old cluster is kept


def test_rejected_platform_keeps_existing_cluster_hosts() -> None:
    machines = [*cps(1, state=USED), machine("g", 8, state=USED)]
    existing = cluster("p", ["cp-0"], ["g"])
    entry = make_plan(desired(platform("p", {H100: 64})), inventory(machines), [existing]).platforms[0]
    assert (entry.action, entry.reason) == (Action.REJECTED, Reason.INSUFFICIENT_COMPUTE)
    assert entry.workers == ("g",) and entry.existing == existing and not entry.mutating


def test_gpu_limit_is_rejected() -> None:
    state = desired(platform("p", {H100: 8}), profile(limits={H100: 4}))
    entry = make_plan(state, inventory([*cps(1), machine("g", 8)]), []).platforms[0]
    assert (entry.action, entry.reason) == (Action.REJECTED, Reason.GPU_LIMIT_EXCEEDED)
    assert not make_plan(state, inventory([]), []).placeable


def test_suspended_platform_leaves_cluster_as_is() -> None:
    machines = [*cps(1, state=USED), machine("g", 8, state=USED)]
    existing = cluster("p", ["cp-0"], ["g"])
    state = desired(platform("p", {H100: 16}, suspend=True))
    entry = make_plan(state, inventory(machines), [existing]).platforms[0]
    assert (entry.action, entry.reason) == (Action.SUSPENDED, Reason.SUSPENDED)
    assert entry.workers == ("g",) and entry.gpus == {H100: 8}


def test_invalid_platform_keeps_cluster_and_is_never_deleted() -> None:
    existing = cluster("bad", ["cp-0"], ["g"])
    state = desired(platform("ok"))
    state.invalid[("MLPlatform", NS, "bad")] = [
        Diagnostic(
            "p.yaml", 3, 5, "spec.gpus[0].count: must be >= 0", kind="MLPlatform", namespace=NS, name="bad"
        )
    ]
    plan = make_plan(state, inventory([*cps(2), machine("g", 8, state=USED)]), [existing], max_deletions=5)
    entry = plan.get(NS, "bad")
    assert entry is not None
    assert (entry.action, entry.reason) == (Action.INVALID, Reason.INVALID_SPEC)
    assert entry.workers == ("g",) and not plan.placeable


def test_invalid_platform_with_missing_reference_without_cluster() -> None:
    state = desired(platform("ok"))
    state.invalid[("MLPlatform", NS, "bad")] = [
        Diagnostic("p.yaml", 1, 1, "ComputeProfile nope is missing", reason=Reason.REFERENCE_NOT_FOUND)
    ]
    entry = make_plan(state, inventory(cps(1)), []).get(NS, "bad")
    assert entry is not None
    assert (entry.action, entry.reason) == (Action.INVALID, Reason.REFERENCE_NOT_FOUND)
    assert entry.existing is None


def test_invalid_reason_comes_from_the_diagnostic_reason_not_its_wording() -> None:
    """A message that happens to say "not found" is no missing reference."""
    state = desired(platform("ok"))
    state.invalid[("MLPlatform", NS, "bad")] = [
        Diagnostic("p.yaml", 1, 1, "spec.edge.vip: host not found in DNS", reason=None)
    ]
    entry = make_plan(state, inventory(cps(1)), []).get(NS, "bad")
    assert entry is not None and entry.reason is Reason.INVALID_SPEC


def test_removed_platform_cluster_is_deleted() -> None:
    existing = cluster("gone", ["cp-0"], ["g"])
    plan = make_plan(desired(platform("ok")), inventory([*cps(2), machine("g", 8, state=USED)]), [existing])
    entry = plan.get(NS, "gone")
    assert entry is not None
    assert (entry.action, entry.reason) == (Action.DELETE, Reason.DELETING)
    assert entry.existing == existing and entry.mutating


def test_prune_blocked_over_max_deletions() -> None:
    clusters = [cluster("gone-1", ["a"], []), cluster("gone-2", ["b"], [])]
    plan = make_plan(desired(platform("ok")), inventory(cps(1)), clusters, max_deletions=1)
    entries = [plan.get(NS, "gone-1"), plan.get(NS, "gone-2")]
    for entry in entries:
        assert entry is not None
        assert (entry.action, entry.reason) == (Action.UNCHANGED, Reason.PRUNE_BLOCKED)
        assert "would delete 2" in entry.message and "--max-deletions 1" in entry.message
    raised = make_plan(desired(platform("ok")), inventory(cps(1)), clusters, max_deletions=2)
    assert [p.action for p in raised.platforms if p.name.startswith("gone")] == [Action.DELETE] * 2


def test_prune_blocked_when_desired_state_incomplete() -> None:
    existing = cluster("gone", ["a"], [])
    plan = make_plan(desired(platform("ok"), complete=False), inventory(cps(1)), [existing], max_deletions=9)
    entry = plan.get(NS, "gone")
    assert entry is not None and (entry.action, entry.reason) == (Action.UNCHANGED, Reason.PRUNE_BLOCKED)


def test_to_json_is_the_section_8_contract() -> None:
    state = desired(platform("b", {H100: 8}), platform("a", {H100: 8}, ns="aaa"), revision="f00d")
    state.diagnostics.append(
        Diagnostic("x.yaml", 2, 3, "unknown kind Foo", kind="Foo", namespace="n", name="m")
    )
    machines = [*cps(2), machine("g2", 8), machine("g1", 8)]
    doc = make_plan(state, inventory(machines), []).to_json()
    assert json.loads(json.dumps(doc)) == {
        "revision": "f00d",
        "platforms": [
            {
                "namespace": "aaa",
                "name": "a",
                "action": "create",
                "reason": "Provisioning",
                "message": doc["platforms"][0]["message"],
                "controlPlane": ["cp-0"],
                "workers": ["g1"],
                "gpus": {H100: 8},
            },
            {
                "namespace": NS,
                "name": "b",
                "action": "create",
                "reason": "Provisioning",
                "message": doc["platforms"][1]["message"],
                "controlPlane": ["cp-1"],
                "workers": ["g2"],
                "gpus": {H100: 8},
            },
        ],
        "pools": [],
        "workloads": [],
        "quotas": [],
        "diagnostics": [
            {
                "file": "x.yaml",
                "line": 2,
                "column": 3,
                "severity": "error",
                "kind": "Foo",
                "namespace": "n",
                "name": "m",
                "message": "unknown kind Foo",
            }
        ],
    }


def test_placeable_only_when_nothing_rejected_or_invalid() -> None:
    plan = make_plan(desired(platform("p", {H100: 8})), inventory([*cps(1), machine("g", 8)]), [])
    assert plan.placeable
    plan = make_plan(desired(platform("p", {H100: 8})), inventory(cps(1)), [])
    assert not plan.placeable


def test_cluster_being_deleted_is_held_until_gone() -> None:
    machines = [*cps(2, state=USED), machine("g", 8, state=USED), machine("f", 8)]
    existing = cluster("p", ["cp-0"], ["g"], state="Deleting")
    plan = make_plan(desired(platform("p", {H100: 16})), inventory(machines), [existing])
    entry = plan.platforms[0]
    assert (entry.action, entry.reason) == (Action.UNCHANGED, Reason.DELETING)
    assert entry.workers == ("g",) and not entry.mutating


def test_clusters_already_deleting_do_not_count_towards_max_deletions() -> None:
    clusters = [cluster("gone-1", ["a"], [], state="Deleting"), cluster("gone-2", ["b"], [])]
    plan = make_plan(desired(platform("ok")), inventory(cps(1)), clusters, max_deletions=1)
    assert [(p.name, p.action, p.reason) for p in plan.platforms if p.name.startswith("gone")] == [
        ("gone-1", Action.UNCHANGED, Reason.DELETING),
        ("gone-2", Action.DELETE, Reason.DELETING),
    ]


def test_a_held_cluster_is_planned_exactly_as_it_is() -> None:
    """Its membership is in doubt (an unreadable host answer): no scale, no replace, and the plan says why."""
    from dataclasses import replace

    machines = [*cps(1, state=USED), machine("g", 8, state=USED), machine("f", 4)]
    existing = replace(cluster("p", ["cp-0"], ["g"]), held="held as it is: host x is unreadable")
    entry = make_plan(desired(platform("p", {H100: 12})), inventory(machines), [existing]).platforms[0]
    assert (entry.action, entry.reason) == (Action.UNCHANGED, Reason.PROVISIONED)
    assert entry.workers == ("g",) and not entry.add_workers and entry.message.startswith("held as it is")
