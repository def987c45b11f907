"""The Prometheus metrics: names, labels and values as ``/metrics`` exposes them."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from reconciler.metrics import SCALING_DIRECTIONS, Metrics, PassOutcome
from reconciler.model.conditions import Phase


def samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Parse the rendered text back, keyed by (sample name, sorted labels)."""
    parsed: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(metrics.render().decode("utf-8")):
        for sample in family.samples:
            parsed[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return parsed


def test_no_created_series_are_exported() -> None:
    metrics = Metrics()
    metrics.observe_pass("success", 0.5)
    text = metrics.render().decode("utf-8")
    assert "reconciler_passes_total" in text and "_created" not in text


def test_every_documented_metric_is_exposed_before_anything_happens() -> None:
    text = Metrics().render().decode("utf-8")
    for name in (
        "reconciler_pass_duration_seconds",
        "reconciler_passes_total",
        "reconciler_platforms",
        "reconciler_palette_requests_total",
        "reconciler_git_fetches_total",
        "reconciler_git_fetch_duration_seconds",
        "reconciler_last_successful_pass_timestamp_seconds",
        "reconciler_webhooks_total",
    ):
        assert f"# HELP {name}" in text or f"# HELP {name.removesuffix('_total')}" in text, name
    values = samples(Metrics())
    for outcome in ("success", "error", "invalid", "skipped"):
        assert values[("reconciler_passes_total", (("outcome", outcome),))] == 0.0
    assert values[("reconciler_platforms", (("phase", "Running"),))] == 0.0


def test_two_instances_have_independent_registries() -> None:
    first, second = Metrics(), Metrics()
    first.observe_pass(PassOutcome.ERROR, 0.2)
    assert samples(first)[("reconciler_passes_total", (("outcome", "error"),))] == 1.0
    assert samples(second)[("reconciler_passes_total", (("outcome", "error"),))] == 0.0


def test_successful_pass_is_counted_timed_and_stamped() -> None:
    metrics = Metrics()
    metrics.observe_pass(PassOutcome.SUCCESS, 1.5, ended_at=1_700_000_000.0)
    metrics.observe_pass("invalid", 0.1, ended_at=1_800_000_000.0)
    values = samples(metrics)
    assert values[("reconciler_passes_total", (("outcome", "success"),))] == 1.0
    assert values[("reconciler_passes_total", (("outcome", "invalid"),))] == 1.0
    assert values[("reconciler_pass_duration_seconds_count", ())] == 2.0
    assert values[("reconciler_pass_duration_seconds_sum", ())] == pytest.approx(1.6)
    assert values[("reconciler_pass_duration_seconds_bucket", (("le", "0.25"),))] == 1.0
    # Only a successful pass moves the timestamp: the invalid one after it does not.
    assert values[("reconciler_last_successful_pass_timestamp_seconds", ())] == 1_700_000_000.0
    # A skipped pass (git and Palette read, nothing to do) is an idle writer's success; a standby's is not.
    metrics.observe_pass(PassOutcome.SKIPPED, 0.1, ended_at=1_900_000_000.0)
    metrics.observe_pass(PassOutcome.STANDBY, 0.0, ended_at=2_000_000_000.0)
    assert samples(metrics)[("reconciler_last_successful_pass_timestamp_seconds", ())] == 1_900_000_000.0


def test_platform_phases_are_replaced_as_a_whole() -> None:
    metrics = Metrics()
    metrics.set_platform_phases({Phase.PROVISIONING: 2, Phase.RUNNING: 1})
    metrics.set_platform_phases({"Running": 3})
    values = samples(metrics)
    assert values[("reconciler_platforms", (("phase", "Running"),))] == 3.0
    # A phase missing from the latest counts drops to zero instead of keeping its old value.
    assert values[("reconciler_platforms", (("phase", "Provisioning"),))] == 0.0
    assert {labels[0][1] for (name, labels) in values if name == "reconciler_platforms"} == {
        p.value for p in Phase
    }


def test_palette_requests_are_counted_by_method_path_template_and_status() -> None:
    metrics = Metrics()
    metrics.on_palette_request("post", "/v1/dashboard/edgehosts/search", 200)
    metrics.on_palette_request("POST", "/v1/dashboard/edgehosts/search", 200)
    metrics.on_palette_request("GET", "/v1/spectroclusters/{uid}", 429)
    metrics.on_palette_request("DELETE", "/v1/spectroclusters/{uid}", 0)
    values = samples(metrics)
    key = "reconciler_palette_requests_total"
    assert (
        values[(key, (("method", "POST"), ("path", "/v1/dashboard/edgehosts/search"), ("status", "200")))]
        == 2
    )
    assert values[(key, (("method", "GET"), ("path", "/v1/spectroclusters/{uid}"), ("status", "429")))] == 1
    assert values[(key, (("method", "DELETE"), ("path", "/v1/spectroclusters/{uid}"), ("status", "0")))] == 1


def test_git_fetches_are_counted_by_outcome_and_timed() -> None:
    metrics = Metrics()
    metrics.observe_git_fetch(0.03)
    with metrics.time_git_fetch():
        pass
    with pytest.raises(OSError), metrics.time_git_fetch():
        raise OSError("remote hung up")
    values = samples(metrics)
    assert values[("reconciler_git_fetches_total", (("outcome", "success"),))] == 2.0
    assert values[("reconciler_git_fetches_total", (("outcome", "error"),))] == 1.0
    assert values[("reconciler_git_fetch_duration_seconds_count", ())] == 3.0
    assert values[("reconciler_git_fetch_duration_seconds_bucket", (("le", "0.05"),))] == 3.0


# --- pools and workloads -------------------------------------------------------------------------

T0 = 1_800_000_000.0


def _workload(
    name: str, pool: str | None, phase: str, reason: str, since: str, kind: str = "AIWorkload"
) -> Any:
    status: dict[str, Any] = {
        "phase": phase,
        "conditions": [{"type": "Ready", "status": "False", "reason": reason, "lastTransitionTime": since}],
    }
    if pool is not None:
        status["pool"] = pool
    return {"kind": kind, "metadata": {"namespace": "team-a", "name": name}, "status": status}


def _pool(name: str, capacity: dict[str, dict[str, int]]) -> Any:
    return {
        "kind": "ComputePool",
        "metadata": {"namespace": "team-a", "name": name},
        "status": {"capacity": capacity},
    }


STATUS = [
    _pool(
        "gpus",
        {
            "NVIDIA-A100": {"total": 8, "admitted": 6, "free": 2},
            "NVIDIA-H100": {"total": 4, "admitted": 0, "free": 4},
        },
    ),
    _pool("idle", {"NVIDIA-L40S": {"total": 2, "admitted": 0, "free": 2}}),
    _workload("train", "gpus", "Running", "Admitted", "2027-01-15T08:00:00Z"),
    _workload("serve", "gpus", "Running", "Admitted", "2027-01-15T08:00:00Z"),
    _workload("big", "gpus", "Pending", "PoolCapacityExceeded", "2027-01-15T07:00:00Z"),
    _workload("bigger", "gpus", "Pending", "PoolCapacityExceeded", "2027-01-15T07:30:00Z"),
    _workload("tenant", "gpus", "Pending", "PoolNotReady", "2027-01-15T07:45:00Z", kind="MLPlatform"),
    _workload("lost", "nowhere", "Pending", "PoolNotFound", "2027-01-15T07:50:00Z"),
    _workload("dedicated-platform", None, "Running", "Running", "2027-01-15T07:00:00Z", kind="MLPlatform"),
    {"kind": "Compute", "metadata": {"namespace": "team-a", "name": "edge"}, "status": {}},
    "not a document",
]


def test_pool_figures_count_workloads_by_pool_phase_and_reason_and_find_the_oldest_pending() -> None:
    from reconciler.metrics import pool_figures

    figures = pool_figures(STATUS)
    assert figures.workloads == {
        ("team-a", "gpus", "Running", "Admitted"): 2,
        ("team-a", "gpus", "Pending", "PoolCapacityExceeded"): 2,
        ("team-a", "gpus", "Pending", "PoolNotReady"): 1,
        ("team-a", "nowhere", "Pending", "PoolNotFound"): 1,
    }  # the dedicated MLPlatform is no pool's workload, the Compute no workload at all
    assert figures.pending == {("team-a", "gpus"): 3, ("team-a", "idle"): 0, ("team-a", "nowhere"): 1}
    oldest = datetime(2027, 1, 15, 7, 0, tzinfo=UTC).timestamp()
    assert figures.oldest_pending[("team-a", "gpus")] == oldest
    assert ("team-a", "idle") not in figures.oldest_pending
    assert figures.gpus[("team-a", "gpus", "NVIDIA-A100")] == (8, 6, 2)
    assert figures.gpus[("team-a", "idle", "NVIDIA-L40S")] == (2, 0, 2)


def test_pool_gauges_are_replaced_as_a_whole_and_the_pending_age_grows_between_passes() -> None:
    from reconciler.metrics import pool_figures

    now = [datetime(2027, 1, 15, 8, 0, tzinfo=UTC).timestamp()]
    metrics = Metrics(clock=lambda: now[0])
    metrics.set_pools(pool_figures(STATUS))
    values = samples(metrics)
    pool = (("namespace", "team-a"), ("pool", "gpus"))
    assert values[("reconciler_pool_pending_workloads", pool)] == 3
    assert values[("reconciler_pool_oldest_pending_workload_age_seconds", pool)] == 3600
    idle = (("namespace", "team-a"), ("pool", "idle"))
    assert values[("reconciler_pool_oldest_pending_workload_age_seconds", idle)] == 0
    key = "reconciler_workloads"
    assert (
        values[(key, (*pool[:1], ("phase", "Pending"), ("pool", "gpus"), ("reason", "PoolCapacityExceeded")))]
        == 2
    )
    gpu = (("family", "NVIDIA-A100"), ("namespace", "team-a"), ("pool", "gpus"))
    assert values[("reconciler_pool_capacity_gpus", gpu)] == 8
    assert [values[("reconciler_pool_gpus", (*gpu, ("state", s)))] for s in ("admitted", "free")] == [6, 2]
    assert ("reconciler_pool_gpus", (*gpu, ("state", "total"))) not in values, (
        "parts only: sum() is the total"
    )
    now[0] += 600  # no pass in between: the wait is ten minutes longer when scraped
    assert samples(metrics)[("reconciler_pool_oldest_pending_workload_age_seconds", pool)] == 4200
    # The next pass: the pending ones were admitted, the idle pool is gone: no stale series remain.
    metrics.set_pools(pool_figures([STATUS[0], STATUS[2]]))
    values = samples(metrics)
    assert values[("reconciler_pool_pending_workloads", pool)] == 0
    assert values[("reconciler_pool_oldest_pending_workload_age_seconds", pool)] == 0
    assert not [k for k in values if ("pool", "idle") in k[1] or ("reason", "PoolCapacityExceeded") in k[1]]


def test_observe_pools_reads_the_status_files_and_counts_scaling_decisions_by_direction() -> None:
    metrics = Metrics()
    files = {f"f{i}.yaml": yaml.safe_dump(doc).encode() for i, doc in enumerate(STATUS)}
    metrics.observe_pools(files, ["up", "none", "none"])
    metrics.observe_pools(files, ["down", "hold"])
    values = samples(metrics)
    assert {
        d: values[("reconciler_scaling_decisions_total", (("direction", d),))] for d in SCALING_DIRECTIONS
    } == {
        "up": 1,
        "down": 1,
        "hold": 1,
        "none": 2,
    }
    assert values[("reconciler_pool_pending_workloads", (("namespace", "team-a"), ("pool", "gpus")))] == 3
    assert samples(Metrics())[("reconciler_scaling_decisions_total", (("direction", "up"),))] == 0


def test_a_pass_of_the_controller_exports_its_pools_and_workloads(emulator: Any, tmp_path: Path) -> None:
    """End to end: one pass over a pool of 8 A100s and three workloads (4 + 2 admitted, 4 waiting)."""
    from tests._e2e_support import controller
    from tests.test_e2e_pools import repo_with, three_workloads

    ctl = controller(repo_with(tmp_path, three_workloads()), emulator, tmp_path)
    try:
        ctl.reconcile_once()
        values = samples(ctl.metrics)
    finally:
        ctl.close()
    pool = (("namespace", "project-b"), ("pool", "shared-a100"))
    gpu = (("family", "NVIDIA-A100"), *pool)
    assert values[("reconciler_pool_capacity_gpus", gpu)] == 8
    assert [values[("reconciler_pool_gpus", (*gpu, ("state", s)))] for s in ("admitted", "free")] == [6, 2]
    assert ("reconciler_pool_gpus", (*gpu, ("state", "total"))) not in values, (
        "parts only: sum() is the total"
    )
    assert values[("reconciler_pool_pending_workloads", pool)] == 3  # two wait for the cluster, one for GPUs
    waiting = (pool[0], ("phase", "Pending"), pool[1], ("reason", "PoolCapacityExceeded"))
    assert values[("reconciler_workloads", waiting)] == 1
    assert ("reconciler_pool_oldest_pending_workload_age_seconds", pool) in values


def test_a_writer_that_loses_the_lease_drops_its_pool_figures() -> None:
    from reconciler.metrics import pool_figures

    metrics = Metrics()
    metrics.set_lease_held(False)
    metrics.set_pools(pool_figures(STATUS))  # a dry run (never held) keeps what its passes report
    assert ("reconciler_pool_pending_workloads", (("namespace", "team-a"), ("pool", "gpus"))) in samples(
        metrics
    )
    metrics.set_lease_held(True)
    metrics.set_lease_held(False)
    assert not [k for k in samples(metrics) if k[0].startswith(("reconciler_pool_", "reconciler_workloads"))]
    assert samples(metrics)[("reconciler_lease_held", ())] == 0
