"""Environments and GPU quotas through the one plan (docs/environments.md): make_plan end to end."""

from __future__ import annotations

from typing import Any

from reconciler.inventory import HostState
from reconciler.model.conditions import Reason
from reconciler.model.environment import Environment
from reconciler.model.resources import AIWorkload, Project
from reconciler.placement.admission_types import PreviousAdmission, WorkloadAction
from reconciler.placement.units import GpuRef
from reconciler.plan import Action, Plan, make_plan
from tests._allocate_support import (
    NS,
    cps,
    desired,
    gpu_requests,
    inventory,
    machine,
    platform,
    pool,
    pool_cluster,
    resource,
)

A100 = "NVIDIA-A100"
USED_STATE = HostState.IN_USE


def environment(name: str = "a100-east", *pools: str, order: str = "listed", **spec: Any) -> Environment:
    body: dict[str, Any] = {"order": order, **spec}
    if not spec:
        body["pools"] = [{"name": p} for p in pools]
    return resource(Environment, "spectrocloud.com/v1beta1", name, body)


def env_workload(name: str, gpus: int, env: str = "a100-east", priority: int = 0) -> AIWorkload:
    spec = {"environmentRef": {"name": env}, "gpus": gpu_requests({A100: gpus}), "priority": priority}
    return resource(AIWorkload, "spectrocloud.com/v1alpha1", name, spec)


def held_of(plan: Plan) -> dict[tuple[str, str], list[PreviousAdmission]]:
    """What the status branch records after ``plan``: per pool, what each workload holds."""
    out: dict[tuple[str, str], list[PreviousAdmission]] = {}
    for w in plan.workloads:
        if w.pool is not None and w.gpus and w.action is not WorkloadAction.REMOVE:
            out.setdefault((w.namespace, w.pool), []).append(
                PreviousAdmission(w.key, tuple(GpuRef(u.host_uid, u.index) for u in w.gpus))
            )
    return out


def two_pools() -> list[Any]:
    return [pool("shared-a100-1", {A100: 8}), pool("shared-a100-2", {A100: 8})]


def hosts(used: bool = False) -> list[Any]:
    kw = {"state": USED_STATE} if used else {}
    return [*cps(2, **kw), machine("gpu-1", 8, A100, **kw), machine("gpu-2", 8, A100, **kw)]


def running_pools() -> list[Any]:
    return [
        pool_cluster("shared-a100-1", ["cp-0"], ["gpu-1"]),
        pool_cluster("shared-a100-2", ["cp-1"], ["gpu-2"]),
    ]


def test_a_workload_lands_in_the_first_pool_that_can_hold_it() -> None:
    state = desired(
        *two_pools(),
        environment("a100-east", "shared-a100-1", "shared-a100-2"),
        env_workload("a", 6),
        env_workload("b", 4),
    )
    plan = make_plan(state, inventory(hosts()), [])
    by_name = {w.name: w for w in plan.workloads}
    assert (by_name["a"].pool, by_name["a"].action) == ("shared-a100-1", WorkloadAction.ADMIT)
    assert (by_name["b"].pool, by_name["b"].action) == ("shared-a100-2", WorkloadAction.ADMIT)
    doc = {w["name"]: w for w in plan.to_json()["workloads"]}
    assert doc["b"]["environment"] == "a100-east"
    assert [(c["pool"], c["reason"]) for c in doc["b"]["candidates"]] == [
        ("shared-a100-1", "PoolCapacityExceeded"),
        ("shared-a100-2", "Admitted"),
    ]


def test_pending_in_no_pool_with_every_candidate_named() -> None:
    state = desired(
        *two_pools(),
        environment("a100-east", "shared-a100-1", "shared-a100-2"),
        env_workload("a", 8),
        env_workload("b", 4),
        env_workload("c", 8),
    )
    plan = make_plan(state, inventory(hosts()), [])
    c = next(w for w in plan.workloads if w.name == "c")
    assert (c.pool, c.action, c.reason) == (None, WorkloadAction.PENDING, Reason.POOL_CAPACITY_EXCEEDED)
    assert c.message == "shared-a100-1: needs 8 NVIDIA-A100 GPUs, 0 free; shared-a100-2: needs 8, 4 free"
    assert c.to_json()["pool"] is None and c.position == 1


def test_once_admitted_it_stays_even_when_the_environment_changes() -> None:
    first = make_plan(
        desired(
            *two_pools(), environment("a100-east", "shared-a100-1", "shared-a100-2"), env_workload("a", 4)
        ),
        inventory(hosts()),
        [],
    )
    assert next(w for w in first.workloads if w.name == "a").pool == "shared-a100-1"
    # The Environment now lists the other pool first, which has room: nothing moves.
    reordered = desired(
        *two_pools(), environment("a100-east", "shared-a100-2", "shared-a100-1"), env_workload("a", 4)
    )
    again = make_plan(reordered, inventory(hosts(used=True)), running_pools(), previous=held_of(first))
    entries = [w for w in again.workloads if w.name == "a"]
    assert [(w.pool, w.action) for w in entries] == [("shared-a100-1", WorkloadAction.ADMITTED)]
    assert entries[0].environment == "a100-east"


def test_no_candidate_is_pending_reference_not_found() -> None:
    state = desired(
        *two_pools(),
        environment("east", poolSelector={"matchLabels": {"region": "east"}}),
        env_workload("a", 2, env="east"),
    )
    plan = make_plan(state, inventory(hosts()), [])
    a = next(w for w in plan.workloads if w.name == "a")
    assert (a.pool, a.action, a.reason) == (None, WorkloadAction.PENDING, Reason.REFERENCE_NOT_FOUND)


def quota(n: int) -> Project:
    return Project.model_validate(
        {
            "apiVersion": "mural.sh/v1alpha1",
            "kind": "Project",
            "metadata": {"name": NS, "namespace": NS},
            "spec": {
                "computeProfileRef": {"name": "edge-compute-profile"},
                "settingsRef": {"name": "palette"},
                "gpuQuota": {A100: n},
            },
        }
    )


def test_a_create_over_quota_is_rejected_and_the_plan_lists_the_quota() -> None:
    state = desired(quota(12), platform("a", {A100: 8}), pool("p", {A100: 8}))
    plan = make_plan(state, inventory(hosts()), [])
    refused = plan.get_pool(NS, "p")
    assert refused is not None and (refused.action, refused.reason) == (
        Action.REJECTED,
        Reason.QUOTA_EXCEEDED,
    )
    assert refused.message == f"needs 8 {A100} GPUs; {NS} uses 8 of 12"
    assert plan.to_json()["quotas"] == [{"namespace": NS, "family": A100, "used": 8, "quota": 12}]
    assert not plan.placeable


def test_a_grow_over_quota_is_held_and_kept_by_changes_only() -> None:
    from reconciler.plan_report import changes_only

    state = desired(quota(12), pool("p", {A100: 16}))
    machines = [
        *cps(1, state=USED_STATE),
        machine("gpu-1", 8, A100, state=USED_STATE),
        machine("gpu-2", 8, A100),
    ]
    plan = make_plan(state, inventory(machines), [pool_cluster("p", ["cp-0"], ["gpu-1"])])
    entry = plan.get_pool(NS, "p")
    assert entry is not None and (entry.action, entry.reason) == (Action.UNCHANGED, Reason.QUOTA_EXCEEDED)
    assert entry.cluster.workers == ("gpu-1",)
    assert (
        entry.message
        == f"needs 8 {A100} GPUs; {NS} uses 8 of 12; scale held: cluster project-a-p keeps its size"
    )
    assert not plan.placeable  # held is not unchanged: plan exits 1
    assert [p["name"] for p in changes_only(plan.to_json())["pools"]] == ["p"]


def test_an_invalid_environment_keeps_what_its_workloads_hold() -> None:
    from reconciler.model.diagnostics import Diagnostic

    first = make_plan(
        desired(
            *two_pools(), environment("a100-east", "shared-a100-1", "shared-a100-2"), env_workload("a", 4)
        ),
        inventory(hosts()),
        [],
    )
    # The Environment stops validating: the workload that names it is invalid too, and keeps its GPUs.
    state = desired(*two_pools())
    problem = "spec.environmentRef.name: Environment project-a/a100-east is invalid (see its errors)"
    state.invalid[("Environment", NS, "a100-east")] = [Diagnostic("env.yaml", 1, 1, "spec: bad")]
    state.invalid[("AIWorkload", NS, "a")] = [Diagnostic("a.yaml", 5, 3, problem)]
    again = make_plan(state, inventory(hosts(used=True)), running_pools(), previous=held_of(first))
    (entry,) = [w for w in again.workloads if w.name == "a"]
    assert (entry.action, entry.pool, len(entry.gpus)) == (WorkloadAction.INVALID, "shared-a100-1", 4)


def test_what_if_says_which_pool_a_new_workload_lands_in(tmp_path: Any) -> None:
    import json

    from tests._contract_support import run_cli
    from tests._manifests_support import SAMPLE_REPO

    new = tmp_path / "embed.yaml"
    new.write_text(
        "apiVersion: spectrocloud.com/v1alpha1\nkind: AIWorkload\n"
        "metadata: {name: embed, namespace: project-b}\n"
        "spec: {environmentRef: {name: team-gpus}, gpus: [{family: NVIDIA-A100, count: 1}]}\n"
    )
    result = run_cli(
        "plan", "--repo", str(SAMPLE_REPO), "--inventory", str(SAMPLE_REPO / "inventory.json"),
        "--what-if", str(new), "--format", "json",
    )  # fmt: skip
    (embed,) = [w for w in json.loads(result.stdout)["workloads"] if w["name"] == "embed"]
    assert (embed["pool"], embed["action"], embed["environment"]) == ("shared-a100", "admit", "team-gpus")
    assert [c["pool"] for c in embed["candidates"]] == ["finetune-l40s", "shared-a100"]


def test_a_workload_pending_in_no_pool_scales_one_candidate_the_first_that_may_grow() -> None:
    """Pending through its Environment with every candidate full: the first candidate whose policy may
    scale it (Running, a demand reason) counts it as its pending demand; no other pool grows for it."""
    from reconciler.model.scaling import ScalingPolicy
    from reconciler.scaling.pools import environment_demand, scaling_subjects

    grow = ScalingPolicy.model_validate(
        {
            "apiVersion": "spectrocloud.com/v1alpha1",
            "kind": "ScalingPolicy",
            "metadata": {"name": "grow", "namespace": NS},
            "spec": {
                "gpu": [{"family": A100, "scaleUpThreshold": 80, "scaleDownThreshold": 30}],
                "gpuResourceBounds": [{"family": A100, "minGPUCount": 8, "maxGPUCount": 32}],
            },
        }
    )
    pools = [
        pool("shared-a100-1", {A100: 8}),  # no policy: it cannot grow for the workload
        pool("shared-a100-2", {A100: 8}, scaling_policy="grow"),
        pool("shared-a100-3", {A100: 8}, scaling_policy="grow"),
    ]
    state = desired(
        *pools,
        grow,
        environment("a100-east", "shared-a100-1", "shared-a100-2", "shared-a100-3"),
        env_workload("full-1", 8),
        env_workload("full-2", 8),
        env_workload("full-3", 8),
        env_workload("late", 8, priority=-1),
    )
    machines = [
        *cps(3, state=USED_STATE),
        *(machine(f"gpu-{i}", 8, A100, state=USED_STATE) for i in (1, 2, 3)),
    ]
    machines.append(machine("gpu-free", 8, A100))
    clusters = [pool_cluster(f"shared-a100-{i}", [f"cp-{i - 1}"], [f"gpu-{i}"]) for i in (1, 2, 3)]
    plan = make_plan(state, inventory(machines), clusters)
    late = next(w for w in plan.workloads if w.name == "late")
    assert (late.pool, late.action) == (None, WorkloadAction.PENDING), late
    scalable = {(NS, "shared-a100-2"), (NS, "shared-a100-3")}
    assert environment_demand(plan, scalable) == {(NS, "late"): (NS, "shared-a100-2")}
    subjects = {s.key[1]: s for s in scaling_subjects(state, plan, {}, 0.0)}
    assert set(subjects) == {"shared-a100-2", "shared-a100-3"}
    assert [p.workload for p in subjects["shared-a100-2"].pending] == [f"{NS}/late"]
    assert subjects["shared-a100-3"].pending == ()
