"""The pool status's ``scaling`` block (reconciler/scaling/record.py): the size it implies, its
transitions, and its YAML round trip."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from reconciler.scaling import Direction, Metric, PendingDemand, PoolView, Samples, ScalingReason, decide
from reconciler.scaling.record import after_decision, current_size, not_written, settle
from reconciler.scaling.record_types import ActionInputs, RecordedAction, ScalingStatus, ScalingStatusError
from reconciler.scaling.record_yaml import parse, render
from tests._scaling_support import A100, H100, NOW, gpu_host, series, spec

NOW_ISO = "2027-01-15T08:00:00.000Z"
POLICY = spec()  # A100: scale up > 80 for 5m, down < 30 for 15m, bounds 8..64, cooldown 15m, abort 30m


def action(direction: str = "up", gpus: int = 8, **kw: Any) -> RecordedAction:
    return RecordedAction(Direction(direction), A100, ("a100-9",), gpus, at=NOW - 3600, **kw)


def test_size_is_spec_gpus_plus_counted_actions() -> None:
    recorded = ScalingStatus("gpu-autoscale", earlier={A100: 8}, last_action=action(completed_at=NOW - 3000))
    assert current_size({A100: 16}, POLICY, recorded) == {A100: 32}
    assert current_size({A100: 16}, POLICY, None) == {A100: 16}
    down = ScalingStatus("gpu-autoscale", earlier={A100: 8}, last_action=action("down", 4))
    assert current_size({A100: 16}, POLICY, down) == {A100: 20}


def test_action_in_progress_counts_its_host_already_written_to_palette() -> None:
    recorded = ScalingStatus("gpu-autoscale", last_action=action())
    assert recorded.last_action is not None and recorded.last_action.completed_at is None
    assert current_size({A100: 16}, POLICY, recorded) == {A100: 24}


def test_failed_action_is_not_counted() -> None:
    failed = ScalingStatus("p", earlier={A100: 8}, last_action=action(failed_at=NOW - 1000))
    assert current_size({A100: 16}, POLICY, failed) == {A100: 24}


def test_size_is_clamped_to_the_policys_bounds() -> None:
    grown = ScalingStatus("p", earlier={A100: 48}, last_action=action())
    assert current_size({A100: 16}, POLICY, grown) == {A100: 64}  # 16 + 48 + 8 = 72 > max 64
    assert current_size({A100: 2}, POLICY, None) == {A100: 8}  # below min 8
    # a family the policy does not bound is left as the spec says
    assert current_size({A100: 16, H100: 4}, POLICY, None) == {A100: 16, H100: 4}


def test_cpu_action_changes_the_gpu_size_only_by_its_hosts_gpus() -> None:
    cpu = RecordedAction(Direction.UP, "cpu", ("cpu-1",), 0, at=NOW - 60, cpus=64)
    assert current_size({A100: 16}, POLICY, ScalingStatus("p", last_action=cpu)) == {A100: 16}
    gpu_host_for_cpu = RecordedAction(Direction.UP, "cpu", ("a-4",), 4, at=NOW - 60, cpus=64, gpu_family=A100)
    status = ScalingStatus("p", last_action=gpu_host_for_cpu)
    assert current_size({A100: 16}, POLICY, status) == {A100: 20}
    assert parse(yaml.safe_load(yaml.safe_dump(render(status)))) == status


def test_cpu_scale_up_onto_a_gpu_host_is_recorded_with_its_gpu_family() -> None:
    cpu_policy = spec(
        gpu=[],
        gpuResourceBounds=[],
        cpu={"scaleUpThreshold": 80, "scaleDownThreshold": 20},
        cpuResourceBounds={"minCPUCount": 0, "maxCPUCount": 1024},
    )
    pool = PoolView("p", "c", (gpu_host("a1", 8),), (gpu_host("a4", 4),))
    d = decide(cpu_policy, Samples(cpu=series(Metric.CPU, 95.0)), pool, None, [], NOW)
    assert d.direction is Direction.UP and d.resource == "cpu"
    last = after_decision(None, "p", d, {A100: 8}, NOW).last_action
    assert last is not None and (last.family, last.gpu_family, last.gpus) == ("cpu", A100, 4)
    assert last.delta() == {A100: 4}


def hot_pool() -> tuple[PoolView, Samples]:
    pool = PoolView(
        "shared-a100",
        "project-a-shared-a100",
        (gpu_host("a1", 8), gpu_host("a2", 8)),
        (gpu_host("free-1", 8),),
        {A100: 4},
    )
    return pool, Samples(gpu=series(Metric.GPU, 91.0, query="q-gpu"))


def test_acting_decision_records_the_action_with_its_inputs_and_grows_the_size() -> None:
    pool, samples = hot_pool()
    d = decide(POLICY, samples, pool, None, [], NOW)
    assert d.direction is Direction.UP
    status = after_decision(None, "gpu-autoscale", d, {A100: 16}, NOW, POLICY.cooldown_duration)
    last = status.last_action
    assert last is not None and (last.direction, last.family, last.hosts, last.gpus) == (
        Direction.UP,
        A100,
        ("free-1",),
        8,
    )
    assert last.at == NOW and last.trigger == "UtilisationHigh" and last.message == d.message
    assert last.inputs is not None and last.inputs.query == "q-gpu"
    assert last.inputs.samples == 21 and last.inputs.values == (91.0,) * 21
    assert status.size == {A100: 24} and status.decision == "up" and status.reason == "ScaledUp"
    assert current_size({A100: 16}, POLICY, status) == {A100: 24}


def test_next_action_folds_the_previous_one_into_earlier_actions() -> None:
    pool, samples = hot_pool()
    before = ScalingStatus("gpu-autoscale", last_action=action(completed_at=NOW - 3000))
    d = decide(POLICY, samples, pool, before.last(), [], NOW)
    status = after_decision(before, "gpu-autoscale", d, {A100: 24}, NOW)
    assert status.earlier == {A100: 8} and status.last_action is not None and status.last_action.at == NOW
    assert current_size({A100: 16}, POLICY, status) == {A100: 32}


def test_abort_records_the_open_action_failed_and_it_stops_counting() -> None:
    pool, samples = hot_pool()
    open_action = ScalingStatus("gpu-autoscale", last_action=action())  # written an hour ago, abort 30m
    assert current_size({A100: 16}, POLICY, open_action) == {A100: 24}
    d = decide(POLICY, samples, pool, open_action.last(), [], NOW)
    assert d.reason is ScalingReason.FAILED and d.abort is not None
    status = after_decision(open_action, "gpu-autoscale", d, {A100: 24}, NOW)
    assert status.last_action is not None and status.last_action.failed_at == NOW
    assert "not complete" in status.last_action.failed_message
    assert status.size == {A100: 16} and current_size({A100: 16}, POLICY, status) == {A100: 16}
    # Failed: the cooldown runs from the failure; the failed host is not tried again upwards.
    again = decide(POLICY, samples, pool, status.last(), [], NOW + 60)
    assert again.reason is ScalingReason.COOLDOWN


def test_settle_completes_an_action_once_its_host_joined_a_running_cluster() -> None:
    recorded = ScalingStatus("p", last_action=action())
    assert settle(recorded, ["a1"], True, NOW) == recorded
    assert settle(recorded, ["a1", "a100-9"], False, NOW) == recorded
    done = settle(recorded, ["a1", "a100-9"], True, NOW)
    assert done is not None and done.last_action is not None and done.last_action.completed_at == NOW
    leaving = ScalingStatus("p", last_action=action("down"))
    gone = settle(leaving, ["a1"], True, NOW)
    assert gone is not None and gone.last_action is not None and gone.last_action.completed_at == NOW


def test_cooldown_message_is_stable_from_pass_to_pass() -> None:
    pool, samples = hot_pool()
    recorded = ScalingStatus("p", last_action=action(completed_at=NOW - 3500))
    recent = replace(recorded, last_action=replace(action(completed_at=NOW - 50), at=NOW - 60))
    first = decide(POLICY, samples, pool, recent.last(), [], NOW)
    second = decide(POLICY, samples, pool, recent.last(), [], NOW + 15)
    assert first.message != second.message  # "cooldown: 14m0s left" vs "13m45s left"
    a = after_decision(recent, "p", first, {A100: 24}, NOW, POLICY.cooldown_duration)
    b = after_decision(recent, "p", second, {A100: 24}, NOW + 15, POLICY.cooldown_duration)
    assert a == b and a.message == "cooldown until 2027-01-15T08:14:00.000Z"


def test_unavailable_prometheus_is_recorded_without_the_sample_age() -> None:
    pool, _ = hot_pool()
    stale = Samples(gpu=series(Metric.GPU, 10.0, now=NOW - 120))
    a = decide(POLICY, stale, pool, None, [], NOW)
    b = decide(POLICY, stale, pool, None, [], NOW + 15)
    ra, rb = (after_decision(None, "p", d, {A100: 16}, t) for d, t in ((a, NOW), (b, NOW + 15)))
    assert ra == rb and not ra.prometheus_available and ra.prometheus_reason == "PrometheusUnavailable"
    assert ra.decision == "hold" and "stale" in ra.message


def test_unwritten_action_keeps_the_previous_record() -> None:
    pool, samples = hot_pool()
    before = ScalingStatus("p", last_action=action(completed_at=NOW - 3000))
    d = decide(POLICY, samples, pool, before.last(), [], NOW)
    proposed = after_decision(before, "p", d, {A100: 24}, NOW)
    kept = not_written(before, proposed)
    assert kept.last_action == before.last_action and kept.reason == "ScalingNotWritten"
    assert current_size({A100: 16}, POLICY, kept) == current_size({A100: 16}, POLICY, before)


# --- the YAML shape ------------------------------------------------------------------------------


def full_status() -> ScalingStatus:
    pool, samples = hot_pool()
    d = decide(POLICY, samples, pool, None, [], NOW)
    return after_decision(
        ScalingStatus("gpu-autoscale", earlier={A100: 8}), "gpu-autoscale", d, {A100: 24}, NOW
    )


def test_status_block_round_trips_through_yaml() -> None:
    for status in (
        full_status(),
        ScalingStatus("p"),
        ScalingStatus("p", last_action=action(failed_at=NOW, failed_message="not complete")),
        ScalingStatus(
            "p",
            last_action=action(
                completed_at=NOW,
                trigger="PendingDemand",
                inputs=ActionInputs(pending=PendingDemand("project-a/batch-7", A100, 4, NOW - 300)),
            ),
        ),
    ):
        text = yaml.safe_dump({"scaling": render(status)}, sort_keys=False)
        assert parse(yaml.safe_load(text)["scaling"]) == status


def test_rendered_block_names_what_the_decision_used() -> None:
    block = render(full_status())
    last = block["lastAction"]
    assert (last["direction"], last["family"], last["hosts"], last["gpus"]) == ("up", A100, ["free-1"], 8)
    assert last["at"] == "2027-01-15T08:00:00.000Z" and "completedAt" not in last and "failed" not in last
    assert last["inputs"]["query"] == "q-gpu" and last["inputs"]["samples"] == 21
    assert last["inputs"]["window"] == {
        "start": "2027-01-15T07:55:00.000Z",
        "end": "2027-01-15T08:00:00.000Z",
        "step": "15s",
    }
    assert last["inputs"]["values"] == [91] * 21
    assert block["size"] == {A100: 32} and block["earlierActions"] == {A100: 8}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda b: b.pop("policy"), "status.scaling.policy"),
        (lambda b: b["lastAction"].update(direction="sideways"), "status.scaling.lastAction.direction"),
        (lambda b: b["lastAction"].update(at="yesterday"), "status.scaling.lastAction.at"),
        (lambda b: b["lastAction"].update(hosts=[]), "status.scaling.lastAction.hosts"),
        (lambda b: b["lastAction"].update(gpus=-1), "status.scaling.lastAction.gpus"),
        (lambda b: b["lastAction"].update(family="not a family!"), "status.scaling.lastAction.family"),
        (
            lambda b: b["lastAction"].update(failed={"at": NOW_ISO}, completedAt=NOW_ISO),
            "status.scaling.lastAction",
        ),
        (lambda b: b["lastAction"]["inputs"].update(values=["x"]), "status.scaling.lastAction.inputs.values"),
        (
            lambda b: b["lastAction"]["inputs"]["window"].update(step="soon"),
            "status.scaling.lastAction.inputs.window.step",
        ),
        (lambda b: b.update(size={A100: "many"}), f"status.scaling.size.{A100}"),
        (lambda b: b.update(decision={"decision": "maybe"}), "status.scaling.decision.decision"),
        (
            lambda b: b.update(prometheusAvailable={"status": "yes"}),
            "status.scaling.prometheusAvailable.status",
        ),
    ],
)
def test_bad_status_block_is_a_clear_error_naming_the_field(change: Any, field: str) -> None:
    block = render(full_status())
    change(block)
    with pytest.raises(ScalingStatusError) as error:
        parse(block)
    assert str(error.value).startswith(f"{field}:")


def test_error_names_the_status_file_when_given() -> None:
    with pytest.raises(ScalingStatusError, match=r"^project-a/computepools/x.yaml: status.scaling: must be"):
        parse([], "project-a/computepools/x.yaml: status.scaling")


@given(
    earlier=st.integers(-64, 64),
    gpus=st.integers(0, 16),
    spec_gpus=st.integers(0, 80),
    outcome=st.sampled_from(["open", "completed", "failed"]),
    direction=st.sampled_from(["up", "down"]),
)
def test_size_stays_within_bounds_and_ignores_failed_actions(
    earlier: int, gpus: int, spec_gpus: int, outcome: str, direction: str
) -> None:
    extra: dict[str, Any] = {"completed": {"completed_at": NOW}, "failed": {"failed_at": NOW}}.get(
        outcome, {}
    )
    status = ScalingStatus("p", earlier={A100: earlier}, last_action=action(direction, gpus, **extra))
    size = current_size({A100: spec_gpus}, POLICY, status)[A100]
    assert 8 <= size <= 64
    without = current_size({A100: spec_gpus}, POLICY, replace(status, last_action=None))[A100]
    if outcome == "failed":
        assert size == without
    assert parse(yaml.safe_load(yaml.safe_dump(render(status)))) == status


def test_an_invalid_pool_with_a_record_keeps_its_policy_in_the_plan_and_a_valid_one_gets_nothing() -> None:
    from types import SimpleNamespace

    from reconciler.scaling.pools import kept_entries
    from reconciler.scaling.record_types import ScalingStatus

    desired: Any = SimpleNamespace(invalid={("ComputePool", "project-b", "shared"): ()})
    recorded = {
        ("project-b", "shared"): ScalingStatus("grow", size={"NVIDIA-A100": 16}),
        ("project-b", "valid"): ScalingStatus("grow", size={"NVIDIA-A100": 8}),
        ("project-b", "unrecorded"): None,
    }
    kept = kept_entries(desired, recorded)
    assert list(kept) == [("project-b", "shared")]
    entry = kept[("project-b", "shared")].to_json()
    assert (entry["policy"], entry["decision"], entry["reason"]) == ("grow", "none", "NotEvaluated")
    assert "keeps its recorded size (16 NVIDIA-A100)" in entry["message"]
