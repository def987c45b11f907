"""The ScalingPolicy kind and Settings.prometheus: fields, defaults, durations and readable errors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.manifests import load_files
from reconciler.model.duration import format_duration, parse_duration
from reconciler.model.resources import KINDS, PLURALS, Settings
from reconciler.model.scaling import ScalingPolicy

HEAD = (
    "apiVersion: spectrocloud.com/v1alpha1\nkind: ScalingPolicy\nmetadata: {name: p, namespace: project-a}\n"
)


def errors(body: str) -> list[tuple[int, str]]:
    state = load_files([("policy.yaml", (HEAD + body).encode())])
    return [(d.line, d.message) for d in state.diagnostics]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30), ("5m", 300), ("1h30m", 5400), ("1.5h", 5400), ("300ms", 0.3), ("0", 0), ("2h0m0s", 7200)],
)
def test_go_durations_parse(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["5 min", "", "m", "5", "1d", "5m-3s", "1h 30m"])
def test_non_go_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="Go duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("seconds", "text"), [(300, "5m0s"), (5400, "1h30m0s"), (15, "15s"), (0.5, "500ms"), (0, "0s")]
)
def test_durations_format_as_go_does(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@given(st.integers(min_value=0, max_value=10**7))
def test_formatted_durations_parse_back(seconds: int) -> None:
    assert parse_duration(format_duration(seconds)) == seconds


def test_the_design_example_validates_and_is_registered() -> None:
    assert KINDS["ScalingPolicy"] == ("spectrocloud.com/v1alpha1", ScalingPolicy)
    assert PLURALS["ScalingPolicy"] == "scalingpolicies"
    assert (
        errors(
            "spec:\n"
            "  cpu: {scaleUpThreshold: 80, scaleDownThreshold: 20,\n"
            "        scaleUpDuration: 5m, scaleDownDuration: 10m}\n"
            "  cpuResourceBounds: {minCPUCount: 16, maxCPUCount: 512}\n"
            "  gpu:\n"
            "    - {family: NVIDIA-A100, scaleUpThreshold: 80, scaleDownThreshold: 30,\n"
            "       scaleUpDuration: 5m, scaleDownDuration: 15m}\n"
            "  gpuResourceBounds:\n"
            "    - {family: NVIDIA-A100, minGPUCount: 8, maxGPUCount: 64}\n"
            "  cooldownDuration: 15m\n"
            "  abortDuration: 30m\n"
            "  metrics:\n"
            '    gpuQuery: 100 * avg(DCGM_FI_PROF_GR_ENGINE_ACTIVE{cluster="$cluster"})\n'
            "    step: 30s\n"
        )
        == []
    )


GPU = "  gpu: [{family: NVIDIA-A100, scaleUpThreshold: 80, scaleDownThreshold: 30}]\n"
BOUND = "  gpuResourceBounds: [{family: NVIDIA-A100, minGPUCount: 8, maxGPUCount: 64}]\n"


@pytest.mark.parametrize(
    ("body", "line", "needle"),
    [
        ("spec: {}\n", 4, "spec: needs at least one of cpu and gpu"),
        ("spec:\n" + GPU, 5, "no bound for GPU family NVIDIA-A100"),
        ("spec:\n" + GPU + BOUND.replace("A100", "H100"), 6, "no bound for GPU family NVIDIA-A100"),
        ("spec:\n  cpu: {scaleUpThreshold: 80, scaleDownThreshold: 20}\n", 5, "cpuResourceBounds: required"),
        ("spec:\n" + GPU.replace("30}", "30, scaleUpDuration: 5 min}") + BOUND, 5, "must be a Go duration"),
        (
            "spec:\n" + GPU.replace("80", "180") + BOUND,
            5,
            "scaleUpThreshold: input should be less than or equal to 100",
        ),
        ("spec:\n" + GPU.replace("30}", "90}") + BOUND, 5, "must be below scaleUpThreshold (80)"),
        ("spec:\n" + GPU + BOUND.replace("64", "4"), 6, "maxGPUCount: must be at least minGPUCount (8)"),
        ("spec:\n" + GPU + BOUND + "  cooldownDuration: 0s\n", 7, "must be a positive duration"),
        (
            "spec:\n" + GPU + BOUND + "  metrics: {step: 6m}\n",
            5,
            "metrics.step 6m is longer than the window 5m",
        ),
        (
            "spec:\n"
            + GPU.replace("}]", "}, {family: nvidia a100, scaleUpThreshold: 70, scaleDownThreshold: 20}]")
            + BOUND,
            5,
            "appears twice",
        ),
        ("spec:\n" + GPU + BOUND + "  cooldown: 5m\n", 7, "unknown field 'cooldown'"),
    ],
)
def test_bad_policies_are_reported_with_line_and_field(body: str, line: int, needle: str) -> None:
    found = errors(body)
    assert any(needle in message and at == line for at, message in found), found


def test_settings_take_an_optional_prometheus_with_a_referenced_bearer_token() -> None:
    doc = {
        "apiVersion": "mural.sh/v1alpha1",
        "kind": "Settings",
        "metadata": {"name": "palette", "namespace": "project-a"},
        "spec": {
            "palette": {
                "hostUrl": "https://api.example",
                "defaultProjectID": "p",
                "apiKeySecretRef": {"env": "K"},
            },
            "prometheus": {"url": "http://prometheus:9090", "bearerTokenSecretRef": {"file": "/run/token"}},
        },
    }
    settings = Settings.model_validate(doc, by_alias=True, by_name=False)
    assert settings.spec.prometheus is not None
    assert settings.spec.prometheus.bearer_token_secret_ref is not None
    assert settings.spec.prometheus.bearer_token_secret_ref.file == "/run/token"
    doc["spec"]["prometheus"] = {"url": "prometheus:9090"}  # type: ignore[index]
    with pytest.raises(ValueError, match="url"):
        Settings.model_validate(doc, by_alias=True, by_name=False)
