"""Scaling in the plan: a pool with a policy requests its current size (``sizes=``), its ``scaling`` block
comes from the stage's decision (``scaling=``), and the plan gives the decision its inputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from reconciler.inventory import HostState
from reconciler.model.conditions import Reason
from reconciler.model.gpu import canonical_family
from reconciler.model.scaling import ScalingPolicy
from reconciler.placement.admission_types import WorkloadAction
from reconciler.plan import Action, Observed, make_plan, plan_targets
from reconciler.resolve import route
from reconciler.scaling import Direction, Metric, Samples, decide
from reconciler.scaling.pools import pool_sizes, scaling_entry, scaling_subjects
from reconciler.scaling.record_types import RecordedAction, ScalingStatus
from tests._allocate_support import NS, ai_workload, cps, desired, inventory, machine, pool, pool_cluster
from tests._scaling_support import NOW, series

H100 = canonical_family("NVIDIA-H100")
USED = HostState.IN_USE
KEY = (NS, "shared")


def policy(min_gpus: int = 8, max_gpus: int = 32, **extra: Any) -> ScalingPolicy:
    return ScalingPolicy.model_validate(
        {
            "apiVersion": "spectrocloud.com/v1alpha1",
            "kind": "ScalingPolicy",
            "metadata": {"name": "gpu-autoscale", "namespace": NS},
            "spec": {
                "gpu": [{"family": "NVIDIA-H100", "scaleUpThreshold": 80, "scaleDownThreshold": 30, **extra}],
                "gpuResourceBounds": [
                    {"family": "NVIDIA-H100", "minGPUCount": min_gpus, "maxGPUCount": max_gpus}
                ],
            },
        }
    )


def running_pool() -> tuple[list[Any], list[Any]]:
    """A Running pool cluster on a (8 GPUs) with b (8) and c (4) free."""
    machines = [*cps(1, state=USED), machine("a", 8, state=USED), machine("b", 8), machine("c", 4)]
    return machines, [pool_cluster("shared", ["cp-0"], ["a"])]


def test_pool_requests_its_current_size_instead_of_spec_gpus() -> None:
    machines, clusters = running_pool()
    state = desired(pool("shared", {H100: 8}, scaling_policy="gpu-autoscale"), policy())
    as_spec = make_plan(state, inventory(machines), clusters).get_pool(*KEY)
    assert as_spec is not None and as_spec.action is Action.UNCHANGED
    grown = make_plan(state, inventory(machines), clusters, sizes={KEY: {H100: 16}}).get_pool(*KEY)
    assert grown is not None and (grown.action, grown.cluster.add_workers) == (Action.SCALE, ("b",))
    assert grown.cluster.gpus == {H100: 16}


def test_recorded_actions_size_the_pool_in_plan_targets() -> None:
    machines, clusters = running_pool()
    state = desired(pool("shared", {H100: 8}, scaling_policy="gpu-autoscale"), policy())
    up = RecordedAction(Direction.UP, H100, ("b",), 8, at=NOW - 600, completed_at=NOW - 300)
    sizes = pool_sizes(state, {KEY: ScalingStatus("gpu-autoscale", last_action=up)})
    assert sizes == {KEY: {H100: 16}}
    routing = route(state, "http://palette")
    observed = {t: Observed(inventory(machines), clusters) for t in routing.targets}
    (plan,) = plan_targets(state, routing, observed, sizes=sizes).values()
    entry = plan.get_pool(*KEY)
    assert entry is not None and entry.cluster.workers == ("a", "b")


def test_pool_without_policy_is_not_sized() -> None:
    state = desired(pool("shared", {H100: 8}), policy())
    assert pool_sizes(state, {}) == {}


def test_plan_json_scaling_block_comes_from_the_decision() -> None:
    machines, clusters = running_pool()
    state = desired(pool("shared", {H100: 8}, scaling_policy="gpu-autoscale"), policy(min_gpus=0))
    plan = make_plan(state, inventory(machines), clusters)
    default = plan.to_json()["pools"][0]["scaling"]
    assert (default["policy"], default["decision"], default["reason"]) == (
        "gpu-autoscale",
        "none",
        "NotEvaluated",
    )
    (subject,) = scaling_subjects(state, plan, {}, NOW)
    hot = Samples(gpu=series(Metric.GPU, 95.0))
    up = decide(subject.policy, hot, subject.view, None, [], NOW)
    cold = decide(subject.policy, Samples(gpu=series(Metric.GPU, 50.0)), subject.view, None, [], NOW)
    shown = plan.to_json(scaling={KEY: scaling_entry("gpu-autoscale", up)})["pools"][0]["scaling"]
    assert shown == {
        "policy": "gpu-autoscale",
        "decision": "up",
        "reason": "ScaledUp",
        "message": "scaled up shared by 1 NVIDIA-H100 host (4 GPUs): GPU utilisation 95% > 80% over 5m0s, "
        "21 samples",
    }
    held = make_plan(
        state, inventory(machines), clusters, scaling={KEY: scaling_entry("gpu-autoscale", cold)}
    )
    block = held.to_json()["pools"][0]["scaling"]
    assert (block["decision"], block["reason"], block["message"]) == ("hold", "Steady", "steady")
    none = desired(pool("shared", {H100: 8}))
    assert (
        make_plan(none, inventory(machines), clusters).to_json()["pools"][0]["scaling"]["decision"] == "none"
    )
    assert scaling_entry(None, up).to_json()["decision"] == "none"


def test_plan_targets_fill_scaling_entries_per_pool() -> None:
    machines, clusters = running_pool()
    state = desired(pool("shared", {H100: 8}, scaling_policy="gpu-autoscale"), policy())
    routing = route(state, "http://palette")
    observed = {t: Observed(inventory(machines), clusters) for t in routing.targets}
    (plain,) = plan_targets(state, routing, observed).values()
    (subject,) = scaling_subjects(state, plain, {}, NOW)
    d = decide(subject.policy, Samples(gpu=series(Metric.GPU, 95.0)), subject.view, None, [], NOW)
    (plan,) = plan_targets(
        state, routing, observed, scaling={KEY: scaling_entry("gpu-autoscale", d)}
    ).values()
    assert plan.to_json()["pools"][0]["scaling"]["decision"] == "up"


def test_subjects_describe_the_pool_as_the_decision_needs_it() -> None:
    machines = [
        *cps(1, state=USED),
        machine("a", 8, state=USED),
        machine("d", 4, state=USED),
        machine("b", 8),
        machine("c", 4),
        machine("x", 8, arch="arm64"),
    ]
    clusters = [pool_cluster("shared", ["cp-0"], ["a", "d"])]
    state = desired(
        pool("shared", {H100: 12}, scaling_policy="gpu-autoscale"),
        policy(),
        ai_workload("small", "shared", {H100: 6}),
        ai_workload("big", "shared", {H100: 8}),
    )
    plan = make_plan(state, inventory(machines), clusters)
    actions = {w.name: (w.action, w.reason) for w in plan.workloads}
    assert actions["big"][0] is WorkloadAction.ADMIT  # first by name, 8 of 12 on host a
    assert actions["small"] == (WorkloadAction.PENDING, Reason.POOL_CAPACITY_EXCEEDED)
    (subject,) = scaling_subjects(state, plan, {}, NOW, pending_since={(NS, "small"): NOW - 600})
    assert subject.cluster == "project-a-shared" and subject.policy_name == "gpu-autoscale"
    assert [h.name for h in subject.view.workers] == ["a", "d"]
    assert [h.name for h in subject.view.free] == ["b", "c"]  # not x: another architecture
    assert subject.view.admitted == {H100: 8}
    bound = {h.name: h.bound_gpus for h in subject.view.workers}
    assert sum(bound.values()) == 8
    # 6 needed on one host, 4 free on d: a new host must bring all 6, since it started pending
    pending = [(p.workload, p.gpus, p.since, p.per_host) for p in subject.pending]
    assert pending == [("project-a/small", 6, NOW - 600, 6)]
    fits = subject.fits_without
    assert fits is not None
    assert [fits(h) for h in ("a", "d")] == [bound["a"] == 0, bound["d"] == 0]
    d = decide(
        subject.policy, Samples(gpu=series(Metric.GPU, 50.0)), subject.view, None, subject.pending, NOW
    )
    # c (4 GPUs) would cover the 2 short but cannot hold the 6-GPU replica: b
    assert (d.direction, d.host and d.host.name) == (Direction.UP, "b")


def test_pool_being_created_or_without_policy_has_no_subject() -> None:
    machines = [*cps(1), machine("a", 8)]
    state = desired(pool("shared", {H100: 8}, scaling_policy="gpu-autoscale"), policy())
    plan = make_plan(state, inventory(machines), [])
    assert plan.get_pool(*KEY) is not None and scaling_subjects(state, plan, {}, NOW) == []


def test_plan_with_prometheus_shows_this_moments_decision() -> None:
    import time

    from reconciler.prometheus.stage import ScalingStage
    from reconciler.runtime.preview import PreviewOptions, preview
    from tests._preview_support import FixedObserver
    from tests._prometheus_support import FakePrometheus

    machines, clusters = running_pool()
    state = desired(pool("shared", {H100: 8}, scaling_policy="gpu-autoscale"), policy())
    routing = route(state, "http://palette")
    observer = FixedObserver(
        "http://palette", {t: Observed(inventory(machines), clusters) for t in routing.targets}
    )
    unmeasured = preview(state, observer).plan.to_json()["pools"][0]["scaling"]
    # Without utilisation the pool is decided as run decides it while Prometheus does not answer.
    assert (unmeasured["decision"], unmeasured["reason"]) == ("hold", "Steady"), unmeasured
    assert "no scale-down" in unmeasured["message"] and "without --prometheus" in unmeasured["message"]
    with FakePrometheus() as prometheus, ScalingStage(prometheus.url) as samples:
        prometheus.answers.values = {"DCGM_FI_PROF_GR_ENGINE_ACTIVE": 97.0}
        options = PreviewOptions(now=time.time(), samples=samples)
        block = preview(state, observer, options=options).plan.to_json()["pools"][0]["scaling"]
        assert len(prometheus.answers.requests) == 1  # one pool, one metric
    assert (block["policy"], block["decision"], block["reason"]) == ("gpu-autoscale", "up", "ScaledUp")
    assert "GPU utilisation 97% > 80%" in block["message"]


def test_plan_command_accepts_prometheus(tmp_path: Any) -> None:
    from typer.testing import CliRunner

    from reconciler.cli_app import app
    from tests._git_support import free_port

    sample = Path(__file__).resolve().parent.parent / "sample-repo"
    args = ["plan", "--repo", str(sample), "--inventory", str(sample / "inventory.json"), "--format", "json"]
    result = CliRunner().invoke(app, [*args, "--prometheus", f"http://127.0.0.1:{free_port()}"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["pools"] == json.loads(CliRunner().invoke(app, args).stdout)["pools"]


def shrink_outcome(held_on: str) -> tuple[Any, Any, Any]:
    """An idle pool of a, b, c (8 GPUs each) whose one workload holds 8 GPUs of ``held_on``: the stage
    decides a scale-down, the plan for the smaller size is made, and the outcome is confirmed against it."""
    from reconciler.placement.admission_types import PreviousAdmission
    from reconciler.placement.units import GpuRef
    from reconciler.prometheus.stage import ScalingStage
    from reconciler.scaling.stage import evaluate
    from tests._prometheus_support import FakePrometheus

    machines = [*cps(1, state=USED), *(machine(n, 8, state=USED) for n in "abc")]
    clusters = [pool_cluster("shared", ["cp-0"], ["a", "b", "c"])]
    state = desired(
        pool("shared", {H100: 24}, scaling_policy="gpu-autoscale"),
        policy(scaleDownDuration="5m"),
        ai_workload("w", "shared", {H100: 8}),
    )
    previous = {KEY: [PreviousAdmission((NS, "w"), tuple(GpuRef(held_on, i) for i in range(8)))]}
    before = make_plan(state, inventory(machines), clusters, previous=previous)
    with FakePrometheus() as prometheus, ScalingStage(prometheus.url) as stage:
        prometheus.answers.values = {"DCGM": 5.0}
        (outcome,) = evaluate(stage, state, [before], NOW).values()
    assert outcome.decision.direction is Direction.DOWN
    after = make_plan(state, inventory(machines), clusters, previous=previous, sizes={KEY: outcome.target})
    return outcome, outcome.confirm(before, after), after


def test_confirmed_scale_down_records_the_host_the_plan_removes() -> None:
    outcome, confirmed, after = shrink_outcome("a")
    entry = after.get_pool(*KEY)
    assert entry is not None and entry.cluster.remove_workers == ("c",)
    assert outcome.decision.host is not None and outcome.decision.host.name == "b"  # the decision's choice
    assert confirmed.acts and confirmed.status.last_action is not None
    assert confirmed.status.last_action.hosts == ("c",)  # the equal, unbound host the plan removes


def test_scale_down_that_would_remove_bound_gpus_is_withdrawn() -> None:
    outcome, confirmed, after = shrink_outcome("c")
    entry = after.get_pool(*KEY)
    assert entry is not None and entry.cluster.remove_workers == ("c",)  # c holds w's GPUs
    assert outcome.acts and outcome.decision.host is not None and outcome.decision.host.name == "a"
    assert not confirmed.acts and confirmed.withdrawn and confirmed.commit is None
    assert confirmed.target == confirmed.size == {H100: 24}
    assert confirmed.status.last_action is None and confirmed.status.reason == "ScalingWithdrawn"
    assert "holds admitted workloads' GPUs: c" in confirmed.status.message
    block = confirmed.entry.to_json()
    assert (block["decision"], block["reason"]) == ("hold", "ScalingWithdrawn")


def test_confirm_over_plan_targets_records_host_names_per_target() -> None:
    from reconciler.prometheus.stage import ScalingStage
    from reconciler.scaling.stage import confirm, evaluate
    from tests._prometheus_support import FakePrometheus

    machines, clusters = running_pool()
    state = desired(pool("shared", {H100: 8}, scaling_policy="gpu-autoscale"), policy(min_gpus=0))
    routing = route(state, "http://palette")
    observed = {t: Observed(inventory(machines), clusters) for t in routing.targets}
    first = plan_targets(state, routing, observed)
    with FakePrometheus() as prometheus, ScalingStage(prometheus.url) as stage:
        prometheus.answers.values = {"DCGM": 99.0}
        outcomes = evaluate(stage, state, first.values(), NOW)
    acting = {k: dict(o.target) for k, o in outcomes.items() if o.acts}
    assert acting == {KEY: {H100: 12}}  # the smallest free host: c (4 GPUs)
    second = plan_targets(state, routing, observed, sizes=acting)
    (confirmed,) = confirm(outcomes, first, second).values()
    assert confirmed.acts and confirmed.status.last_action is not None
    assert confirmed.status.last_action.hosts == ("c",)
