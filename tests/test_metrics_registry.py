"""The Prometheus metrics: names, labels and values as ``/metrics`` exposes them."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from reconciler.metrics import Metrics, PassOutcome
from reconciler.model.conditions import Phase


def samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Parse the rendered text back, keyed by (sample name, sorted labels)."""
    parsed: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(metrics.render().decode("utf-8")):
        for sample in family.samples:
            parsed[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return parsed


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
