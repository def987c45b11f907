"""Write-ahead for scaling actions (reconciler/scaling/record.py ``Intent``, reconciler/status/intents.py):
an action recorded as intended before its Palette write is read back, by a successor, as done: the pool's
size is the intent's ``to``, the cooldown runs from the intent, and the pass's own status commit
replaces the intent with the action's record."""

from __future__ import annotations

from typing import Any

import yaml

from reconciler.scaling import Direction, Metric, PoolView, Samples, ScalingReason, decide
from reconciler.scaling.pools import ScalingSubject
from reconciler.scaling.record import current_size, settle
from reconciler.scaling.record_types import RecordedAction, ScalingStatus, with_intent
from reconciler.scaling.record_yaml import parse, parse_recorded, render
from reconciler.scaling.stage import decide_subject
from reconciler.status.intents import intent_message, intent_tree
from reconciler.status.records import read_records
from reconciler.status.render import dump
from tests._scaling_support import A100, NOW, gpu_host, series, spec

POLICY = spec()  # A100: up > 80 for 5m, down < 30 for 15m, bounds 8..64, cooldown 15m
KEY = ("project-a", "shared-a100")
PATH = "project-a/computepools/shared-a100.yaml"
EARLIER = RecordedAction(Direction.UP, A100, ("a100-2",), 8, at=NOW - 7200, completed_at=NOW - 7000)
UP = RecordedAction(Direction.UP, A100, ("a100-3",), 8, at=NOW, message="scaled up shared-a100 by 1 host")


def recorded_intent(at: float = NOW - 60) -> ScalingStatus:
    """A block as a pass left it when it died after recording its intent (16 -> 24 GPUs)."""
    before = ScalingStatus("gpu-autoscale", size={A100: 16}, last_action=EARLIER)
    return with_intent(before, "gpu-autoscale", UP, {A100: 16}, {A100: 24}, at)


def through_yaml(block: dict[str, Any]) -> Any:
    return yaml.safe_load(yaml.safe_dump({"scaling": block}, sort_keys=False))["scaling"]


def test_an_intent_round_trips_and_is_rendered_with_its_sizes_and_time() -> None:
    status = recorded_intent()
    block = render(status)
    assert block["intent"]["action"] == "up" and block["intent"]["hosts"] == ["a100-3"]
    assert block["intent"]["from"] == {A100: 16} and block["intent"]["to"] == {A100: 24}
    assert block["intent"]["at"] == "2027-01-15T07:59:00.000Z"
    assert block["lastAction"]["hosts"] == ["a100-2"]  # the record before it is kept as it was
    assert parse_recorded(through_yaml(block)) == status


def test_a_successor_reads_the_intent_as_the_last_action_at_its_size() -> None:
    adopted = parse(through_yaml(render(recorded_intent())))
    assert adopted.intent is None
    last = adopted.last_action
    assert last is not None and last.hosts == ("a100-3",) and last.at == NOW - 60
    assert adopted.earlier == {A100: 8}  # the action before it folds into the earlier ones
    assert current_size({A100: 8}, POLICY, adopted) == {A100: 24}  # the intent's "to", not 16


def test_a_successor_neither_undoes_nor_repeats_the_action_within_the_cooldown() -> None:
    adopted = parse(through_yaml(render(recorded_intent())))
    workers = (gpu_host("a100-1", 8), gpu_host("a100-2", 8), gpu_host("a100-3", 8))
    pool = PoolView("shared-a100", "project-a-shared-a100", workers, (gpu_host("free-1", 8),), {A100: 0})
    settled = settle(adopted, [h.name for h in workers], True, NOW)  # its host has joined
    for status, why in ((adopted, ScalingReason.IN_PROGRESS), (settled, ScalingReason.COOLDOWN)):
        for value in (10.0, 95.0):  # idle (would scale down) and busy (would scale up again)
            d = decide(POLICY, Samples(gpu=series(Metric.GPU, value)), pool, status.last(), [], NOW)
            assert not d.acts and d.reason is why


def test_the_intent_tree_changes_only_the_pools_scaling_block() -> None:
    doc = {
        "apiVersion": "palette.ai/v1alpha1",
        "kind": "ComputePool",
        "metadata": {"namespace": "project-a", "name": "shared-a100"},
        "status": {"phase": "Running", "scaling": render(ScalingStatus("p", last_action=EARLIER))},
    }
    files = {PATH: dump(doc), "reconciler.yaml": b"branch: main\n", "project-a/other.yaml": b"x: 1\n"}
    records = read_records(files)
    blocks = {KEY: recorded_intent()}
    tree = intent_tree(records.files, records.docs, blocks)
    assert {p: d for p, d in tree.items() if p != PATH} == {p: d for p, d in files.items() if p != PATH}
    written = yaml.safe_load(tree[PATH])
    assert written["status"]["phase"] == "Running"
    assert written["status"]["scaling"]["intent"]["to"] == {A100: 24}
    again = read_records(tree).scaling[KEY]
    assert again is not None and again.last_action is not None and again.last_action.hosts == ("a100-3",)
    assert "project-a/shared-a100: scaled up shared-a100 by 1 host" in intent_message(blocks)


def test_the_status_record_after_the_write_replaces_the_intent() -> None:
    workers = (gpu_host("a100-1", 8), gpu_host("a100-2", 8))
    view = PoolView("shared-a100", "project-a-shared-a100", workers, (gpu_host("free-1", 8),), {A100: 0})
    subject = ScalingSubject(KEY, "project-a-shared-a100", "gpu-autoscale", POLICY, {A100: 16}, view)
    outcome = decide_subject(subject, Samples(gpu=series(Metric.GPU, 95.0)), None, NOW)
    assert outcome.acts
    ahead = outcome.intent(NOW)
    assert ahead is not None and ahead.intent is not None and ahead.last_action is None
    assert (ahead.intent.before, ahead.intent.after) == ({A100: 16}, {A100: 24})
    done = render(outcome.written(NOW + 5))
    assert "intent" not in done and done["lastAction"]["hosts"] == ["free-1"]
    assert current_size({A100: 16}, POLICY, parse(through_yaml(render(ahead)))) == {A100: 24}
    assert "intent" not in render(outcome.unwritten())  # a failed write drops the intent too
