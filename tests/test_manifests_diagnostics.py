"""What ``validate`` tells a person fixing a document: every error of a document at once (schema and
rules together), "did you mean" for misspelt kinds and fields, and warnings for what would never act."""

from __future__ import annotations

from reconciler.manifests import load_files
from reconciler.model.diagnostics import Severity
from tests.test_manifests_pools import BASE, pool

POLICY = """\
apiVersion: spectrocloud.com/v1alpha1
kind: ScalingPolicy
metadata: {name: grow, namespace: project-a}
spec:
"""


def diagnostics(text: str) -> list[tuple[int, int, str, Severity]]:
    state = load_files([("repo.yaml", text.encode())])
    return [(d.line, d.column, d.message, d.severity) for d in state.diagnostics]


def test_a_policy_with_a_wrong_field_also_gets_its_rule_errors_in_the_same_run() -> None:
    found = diagnostics(
        POLICY + "  gpu: [{family: NVIDIA-A100, scaleUpThreshold: 80, scaleDownThreshold: 30}]\n"
        "  cooldown: 5m\n"
        "  cpuResourceBounds: {minCPUCount: 1, maxCPUCount: 2}\n"
        "  metrics: {step: 6m}\n"
    )
    messages = [m for _, _, m, _ in found]
    assert any(
        "unknown field 'cooldown'; allowed" in m and m.endswith("; did you mean cooldownDuration?")
        for m in messages
    )
    assert any(
        "gpuResourceBounds: required with gpu rules; no bound for GPU family NVIDIA-A100" in m
        for m in messages
    )
    assert any("cpuResourceBounds: is set but there is no cpu rule" in m for m in messages)
    lines = {line for line, *_ in found}
    assert {6, 7} <= lines, "each error at its own line"


def test_a_policy_with_only_a_wrong_field_has_no_invented_rule_errors() -> None:
    found = diagnostics(
        POLICY + "  cpu: {scaleUpThreshold: 80, scaleDownThreshold: 20}\n"
        "  cpuResourceBounds: {minCPUCount: 1, maxCPUCount: 2}\n"
        "  abortDuraton: 30m\n"
    )
    assert [(line, m) for line, _, m, _ in found] == [
        (
            7,
            "spec.abortDuraton: unknown field 'abortDuraton'; allowed fields here: cpu, cpuResourceBounds, "
            "gpu, gpuResourceBounds, cooldownDuration, abortDuration, metrics; did you mean abortDuration?",
        )
    ]


def test_a_misspelt_kind_names_the_kind_it_resembles() -> None:
    [(line, column, message, _)] = diagnostics(
        "apiVersion: palette.ai/v1alpha1\nkind: MLPlatfrom\nmetadata: {name: a, namespace: b}\nspec: {}\n"
    )
    assert (line, column) == (2, 7)
    assert message.startswith(
        "kind: unknown kind 'MLPlatfrom' (apiVersion 'palette.ai/v1alpha1'); did you mean MLPlatform?"
    )
    [(_, _, far, _)] = diagnostics("apiVersion: x/v1\nkind: Banana\nmetadata: {name: a}\n")
    assert "did you mean" not in far


def test_a_pool_whose_policy_does_not_scale_its_family_is_warned() -> None:
    cpu_only = (
        POLICY + "  cpu: {scaleUpThreshold: 80, scaleDownThreshold: 20}\n"
        "  cpuResourceBounds: {minCPUCount: 1, maxCPUCount: 64}\n"
    )
    text = BASE + "---\n" + pool(extra="  scalingPolicyRef: {name: grow}\n") + "---\n" + cpu_only
    found = diagnostics(text)
    warnings = [m for _, _, m, severity in found if severity is Severity.WARNING]
    assert [m for _, _, m, severity in found if severity is Severity.ERROR] == []
    assert any(
        "ScalingPolicy project-a/grow has no gpu rule for NVIDIA-A100" in m and "never scaled" in m
        for m in warnings
    ), found
    scaled = cpu_only + (
        "  gpu: [{family: nvidia a100, scaleUpThreshold: 80, scaleDownThreshold: 30}]\n"
        "  gpuResourceBounds: [{family: NVIDIA-A100, minGPUCount: 8, maxGPUCount: 32}]\n"
    )
    text = BASE + "---\n" + pool(extra="  scalingPolicyRef: {name: grow}\n") + "---\n" + scaled
    assert not any("no gpu rule" in m for _, _, m, _ in diagnostics(text))


def test_a_document_the_schema_refuses_still_gets_its_references_checked() -> None:
    platform = (
        "apiVersion: palette.ai/v1alpha1\nkind: MLPlatform\nmetadata: {name: p, namespace: project-a}\n"
        "spec:\n  computeProfileRef: {name: nowhere}\n  gpus: [{family: NVIDIA-A100, count: 1}]\n"
        "  suspnd: true\n"
    )
    found = diagnostics(BASE + "---\n" + platform)
    lines = {(line, message.split(":")[0]) for line, _, message, _ in found}
    assert any("unknown field 'suspnd'" in m and m.endswith("did you mean suspend?") for _, _, m, _ in found)
    assert any(
        "ReferenceNotFound: spec.computeProfileRef.name: ComputeProfile 'nowhere'" in m
        for _, _, m, _ in found
    )
    assert len({line for line, _ in lines}) == 2, "each error at its own line"
