"""What ``reconciler demo --keep`` prints for a pass: a block when it did something, else a count."""

from __future__ import annotations

from reconciler.commands.demo_passes import PassView
from reconciler.metrics import PassOutcome
from reconciler.model.conditions import Phase
from reconciler.runtime.outcome import PassResult

REV = "a" * 40
RUNNING = {("project-a", "notebooks"): Phase.RUNNING}


def view(heartbeat: float = 10.0) -> PassView:
    v = PassView(lambda sha: f"subject of {sha[:4]}", heartbeat, now=0.0)
    v.seen(PassResult(PassOutcome.SUCCESS, revision=REV, phases=dict(RUNNING)))
    return v


def test_idle_passes_are_summed_in_one_heartbeat_line_at_most_every_period() -> None:
    v = view(heartbeat=10.0)
    beats = []
    for second in range(1, 31):
        assert v.block(PassResult(PassOutcome.SKIPPED, revision=REV, phases=dict(RUNNING)), second) == []
        beats.append(v.heartbeat(float(second)))
    lines = [b for b in beats if b is not None]
    assert len(lines) == 3
    assert all("idle: 10 passes in 10 s, nothing to do" in line and "1 Running" in line for line in lines)


def test_a_status_commit_makes_a_block_naming_the_revision_the_commit_and_their_subjects() -> None:
    v = view()
    lines = v.block(PassResult(PassOutcome.SUCCESS, revision=REV, phases=dict(RUNNING), commit="b" * 40), 1.0)
    assert lines[0].endswith(f'pass 2: success at revision {REV[:12]} "subject of aaaa" (0.0 s)')
    assert lines[-1] == f'  status commit {"b" * 12} "subject of bbbb"'
    assert v.heartbeat(100.0) is None  # nothing idle since


def test_a_repeated_error_is_shown_once_then_counted_as_idle() -> None:
    v = view(heartbeat=5.0)
    failed = PassResult(PassOutcome.ERROR, revision=REV, error="git unavailable: boom")
    first = v.block(failed, 1.0)
    assert "  error: git unavailable: boom" in first
    assert not any("phase" in line for line in first)  # an error pass says nothing of phases
    assert v.block(failed, 2.0) == []
    beat = v.heartbeat(7.0)
    assert beat is not None and "idle: 1 pass in 6 s, still failing: git unavailable: boom" in beat


def test_a_status_commit_block_lists_its_pool_and_workload_changes_with_their_reasons() -> None:
    why = ["AIWorkload project-b/sweep: Pending -> Running (Admitted: admitted to pool shared-a100)"]
    v = PassView(lambda sha: "s", 10.0, now=0.0, changes=lambda sha: why if sha == "c" * 40 else [])
    v.seen(PassResult(PassOutcome.SUCCESS, revision=REV, phases=dict(RUNNING)))
    lines = v.block(PassResult(PassOutcome.SUCCESS, revision=REV, phases=dict(RUNNING), commit="c" * 40), 1.0)
    assert lines[-2].startswith("  status commit cccccccccccc")
    assert lines[-1] == f"    {why[0]}"
