"""Demand-driven scale-up with replicas: NoFittingLayout and capacity shortfalls grow a pool by a host
that holds the pending replica; a workload rejected by a limit never does; the pending workload's
message says when the policy's window ends."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from reconciler.inventory import HostState
from reconciler.model.conditions import Reason
from reconciler.model.gpu import canonical_family
from reconciler.model.scaling import ScalingPolicy
from reconciler.placement.admission_types import WorkloadAction
from reconciler.plan import make_plan
from reconciler.scaling import Direction, Samples, decide
from reconciler.scaling.hosts import ScalingHost, gpu_host_to_add
from reconciler.scaling.pools import scaling_entry, scaling_subjects
from tests._allocate_support import NS, ai_workload, cps, desired, inventory, machine, pool, pool_cluster
from tests._scaling_support import NOW

H100 = canonical_family("NVIDIA-H100")
USED = HostState.IN_USE


def policy(max_gpus: int = 64) -> ScalingPolicy:
    return ScalingPolicy.model_validate(
        {
            "apiVersion": "spectrocloud.com/v1alpha1",
            "kind": "ScalingPolicy",
            "metadata": {"name": "gpu-autoscale", "namespace": NS},
            "spec": {
                "gpu": [
                    {
                        "family": "NVIDIA-H100",
                        "scaleUpThreshold": 80,
                        "scaleDownThreshold": 30,
                        "scaleUpDuration": "5m",
                    }
                ],
                "gpuResourceBounds": [{"family": "NVIDIA-H100", "minGPUCount": 4, "maxGPUCount": max_gpus}],
            },
        }
    )


def small_hosts(*workloads: Any, free: tuple[tuple[str, int], ...] = (("e", 4), ("f", 6)), n: int = 4) -> Any:
    """A Running pool of ``n`` hosts a, b, ... (4 H100 each) and free hosts e (4) and f (6)."""
    names = "abcd"[:n]
    machines = [
        *cps(1, state=USED),
        *(machine(h, 4, state=USED) for h in names),
        *(machine(h, g) for h, g in free),
    ]
    clusters = [pool_cluster("shared", ["cp-0"], list(names))]
    state = desired(pool("shared", {H100: 4 * n}, scaling_policy="gpu-autoscale"), policy(), *workloads)
    return state, make_plan(state, inventory(machines), clusters)


def test_a_pool_of_small_hosts_says_at_plan_time_it_cannot_hold_an_eight_gpu_replica() -> None:
    _, plan = small_hosts(ai_workload("serve", "shared", {H100: 8}), free=())
    (w,) = plan.workloads
    assert (w.action, w.reason, w.position) == (WorkloadAction.PENDING, Reason.NO_FITTING_LAYOUT, 1)
    assert w.message == (
        "needs 8 NVIDIA-H100 GPUs on one host per replica; 16 free in pool shared, at most 4 on one host "
        "(a); no host of pool shared has 8 NVIDIA-H100 GPUs (the largest has 4: a): frees when the pool "
        "grows by a host with 8"
    )


def test_no_fitting_layout_grows_the_pool_by_a_host_that_holds_the_replica_and_the_message_says_when() -> (
    None
):
    state, plan = small_hosts(ai_workload("serve", "shared", {H100: 6}), n=3)
    assert plan.pools[0].cluster.workers == ("a", "b", "c")
    (subject,) = scaling_subjects(state, plan, {}, NOW, pending_since={(NS, "serve"): NOW - 60})
    assert [(p.workload, p.gpus, p.per_host) for p in subject.pending] == [("project-a/serve", 6, 6)]
    early = decide(subject.policy, Samples(), subject.view, None, subject.pending, NOW)
    assert early.direction is Direction.NONE
    message = plan.with_scaling({subject.key: scaling_entry("gpu-autoscale", early)}).workloads[0].message
    ends = datetime.fromtimestamp(NOW + 240, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert message.endswith(
        "; a scale-up of pool shared is on its way: ScalingPolicy gpu-autoscale adds host f if it is "
        f"still pending when its 5m0s window ends at {ends}"
    )
    due = decide(subject.policy, Samples(), subject.view, None, subject.pending, NOW + 300)
    assert (due.direction, due.host and due.host.name) == (Direction.UP, "f")  # not e: 4 cannot hold 6
    grows = plan.with_scaling({subject.key: scaling_entry("gpu-autoscale", due)}).workloads[0].message
    assert grows.endswith("; pool shared grows by host f for it (ScalingPolicy gpu-autoscale)")


def test_a_workload_rejected_by_a_limit_never_scales_a_pool() -> None:
    state, plan = small_hosts(ai_workload("greedy", "shared", {H100: 4}, replicas=5), free=(("e", 4),))
    (w,) = plan.workloads
    assert w.reason is Reason.POOL_CAPACITY_EXCEEDED  # 20 > 16: demand, a host of 4 holds a replica
    (subject,) = scaling_subjects(state, plan, {}, NOW, pending_since={(NS, "greedy"): NOW - 600})
    assert [(p.gpus, p.per_host) for p in subject.pending] == [(4, 4)]
    profile = next(r.resource for r in state.resources.values() if r.resource.kind == "ComputeProfile")
    profile.spec.gpu_limits["NVIDIA-H100"] = 8
    machines = [*cps(1, state=USED), *(machine(h, 4, state=USED) for h in "abcd"), machine("e", 4)]
    limited = make_plan(state, inventory(machines), [pool_cluster("shared", ["cp-0"], list("abcd"))])
    (w,) = limited.workloads
    assert (w.action, w.reason) == (WorkloadAction.REJECTED, Reason.GPU_LIMIT_EXCEEDED)
    (subject,) = scaling_subjects(state, limited, {}, NOW, pending_since={(NS, "greedy"): NOW - 600})
    assert subject.pending == ()


def test_the_host_added_for_demand_holds_a_replica_and_is_mig_capable_for_mig() -> None:
    free = [
        ScalingHost("small", H100, 2, 32),
        ScalingHost("b-plain", H100, 8, 64),
        ScalingHost("c-mig", H100, 8, 64, mig_capable=True),
    ]
    assert gpu_host_to_add(H100, free, 64, shortfall=1, per_host=4) == free[1]
    assert gpu_host_to_add(H100, free, 64, shortfall=1, per_host=4, mig=True) == free[2]
    assert gpu_host_to_add(H100, free, 64, shortfall=1, per_host=16) is None
