"""The bad-input corpus (tests/data/manifests/): each file must be reported with the right message,
field path and line, and nothing else may be wrong with it."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.manifests import load_files
from reconciler.model.diagnostics import Diagnostic
from reconciler.profiles import NO_CLUSTER_PROFILE

CORPUS = Path(__file__).parent / "data" / "manifests"

# file, line, column, field path, part of the message
CASES: list[tuple[str, int, int, str | None, str]] = [
    ("api-version-wrong.yaml", 1, 13, "apiVersion", "must be 'palette.ai/v1alpha1' for kind Compute"),
    ("control-plane-defaults-missing.yaml", 4, 1, "spec.controlPlaneDefaults", "required field is missing"),
    ("document-list.yaml", 1, 1, None, "document is a list; expected a mapping"),
    ("document-scalar.yaml", 1, 1, None, "document is a str scalar; expected a mapping"),
    ("duplicate-key.yaml", 8, 3, "spec.settingsRef", "duplicate key 'settingsRef'; YAML keeps only the last"),
    ("empty.yaml", 1, 1, None, "file is empty"),
    ("gpu-count-negative.yaml", 21, 14, "spec.gpus[0].count", "must be >= 0; got -2"),
    ("gpu-count-string.yaml", 21, 14, "spec.gpus[0].count", "must be an integer; got '8'"),
    ("gpu-family-invalid.yaml", 20, 15, "spec.gpus[0].family", "'H100!' is not a GPU family name"),
    ("gpu-family-missing.yaml", 20, 7, "spec.gpus[0].family", "required field is missing"),
    ("gpu-limit-family-invalid.yaml", 7, 5, "spec.gpuLimits.NVIDIA/H100", "is not a GPU family"),
    ("gpu-limit-family-twice.yaml", 8, 5, "spec.gpuLimits.nvidia h100", "NVIDIA-H100 is listed twice"),
    ("gpu-limit-negative.yaml", 8, 18, "spec.gpuLimits.NVIDIA-H100", "must be >= 0; got -1"),
    ("kind-missing.yaml", 1, 1, "kind", "kind: required field is missing; known kinds: AIWorkload"),
    ("kind-unknown.yaml", 2, 7, "kind", "unknown kind 'MLPlatfrom' (apiVersion 'palette.ai/v1alpha1')"),
    ("metadata-unknown-field.yaml", 6, 3, "metadata.label", "unknown field 'label'; allowed"),
    ("min-nodes-not-integer.yaml", 7, 27, "metadata.labels.palette.ai/min-nodes", "a positive integer"),
    ("min-nodes-zero.yaml", 7, 27, "metadata.labels.palette.ai/min-nodes", "such as '3'; got '0'"),
    ("mode-unknown.yaml", 19, 9, "spec.mode", "must be 'dedicated' or 'shared'; got 'exclusive'"),
    ("name-too-long.yaml", 4, 9, "metadata.name", "must be a DNS-1123 label"),
    ("name-uppercase.yaml", 4, 9, "metadata.name", "at most 63 characters; got 'Edge_Compute'"),
    ("namespace-missing.yaml", 3, 1, "metadata.namespace", "required field is missing"),
    ("nodecount-2-not-two-node.yaml", 8, 16, "spec.controlPlaneDefaults.nodeCount", "2 is allowed only when"),
    ("nodecount-4.yaml", 6, 16, "spec.controlPlaneDefaults.nodeCount", "must be 1, 3 or 5"),
    ("override-gpulimits.yaml", 22, 7, "spec.computeProfileRef.override.gpuLimits", "here: minWorker"),
    ("ref-compute-profile-missing.yaml", 20, 11, "spec.computeProfileRef.name", "ReferenceNotFound"),
    ("ref-no-project-fallback.yaml", 7, 3, "spec", "ReferenceNotFound: spec.computeProfileRef: not set"),
    ("ref-project-settings-missing.yaml", 6, 23, "spec.settingsRef.name", "Settings 'palette' not found"),
    ("ref-workload-profile-missing.yaml", 20, 11, "spec.workloadProfileRef.name", "not found"),
    ("resource-group-not-string.yaml", 20, 19, "spec.resourceGroups.network-pool", "must be a string"),
    ("settings-env-not-a-name.yaml", 9, 12, "spec.palette.apiKeySecretRef.env", "environment variable name"),
    ("settings-host-url-not-http.yaml", 6, 14, "spec.palette.hostUrl", "must be an http(s) URL"),
    ("settings-inline-api-key.yaml", 8, 5, "spec.palette.apiKey", "use apiKeySecretRef"),
    ("settings-secret-ref-both.yaml", 9, 7, "spec.palette.apiKeySecretRef", "has both of env and file"),
    ("settings-secret-ref-neither.yaml", 8, 22, "spec.palette.apiKeySecretRef", "has neither"),
    ("settings-secret-ref-string.yaml", 8, 22, "spec.palette.apiKeySecretRef", "must be a mapping"),
    ("spec-is-list.yaml", 5, 3, "spec", "must be a mapping"),
    ("suspend-not-bool.yaml", 19, 12, "spec.suspend", "must be true or false"),
    ("syntax-error.yaml", 5, 12, None, "YAML syntax error"),
    ("tab-indent.yaml", 4, 1, None, "tab character in indentation"),
    ("taint-effect-invalid.yaml", 9, 17, "spec.controlPlaneDefaults.taints[0].effect", "got 'NoRun'"),
    ("two-node-count-3.yaml", 8, 16, "spec.controlPlaneDefaults.nodeCount", "must be 2 when"),
    ("two-projects.yaml", 15, 18, "metadata.name", "already has Project 'ns'"),
    ("typo-minworkernode.yaml", 6, 3, "spec.minWorkerNode", "unknown field 'minWorkerNode'; allowed fields"),
    ("vip-clash-explicit.yaml", 17, 15, "spec.edge.vip", "VIP 10.0.0.9 (from spec.edge.vip)"),
    ("vip-clash-profile.yaml", 18, 22, "spec.computeProfileRef", "already used by MLPlatform ns/alpha"),
    ("workload-replicas-zero.yaml", 24, 13, "spec.replicas", "must be >= 1; got 0"),
]


def _load(name: str) -> list[Diagnostic]:
    path = CORPUS / name
    return load_files([(name, path.read_bytes())]).diagnostics


def test_corpus_is_large_and_fully_covered() -> None:
    files = {p.name for p in CORPUS.glob("*.yaml")}
    covered = {c[0] for c in CASES} | {
        "duplicate-identity.yaml",
        "ref-profile-invalid.yaml",
        "several-errors-one-document.yaml",
    }
    assert len(files) >= 30
    assert files == covered


@pytest.mark.parametrize(("name", "line", "column", "field", "message"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_reported_where_it_is(
    name: str, line: int, column: int, field: str | None, message: str
) -> None:
    # The corpus has no Settings: a valid platform there is also warned it has no cluster profile.
    diagnostics = [d for d in _load(name) if NO_CLUSTER_PROFILE not in d.message]
    assert len(diagnostics) == 1, diagnostics
    diag = diagnostics[0]
    assert (diag.file, diag.line, diag.column, diag.field) == (name, line, column, field)
    assert message in diag.message
    if field is not None:
        assert diag.message.startswith(f"{field}:") or diag.message.startswith("ReferenceNotFound: ")


def test_duplicate_identity_reports_both_documents() -> None:
    diagnostics = _load("duplicate-identity.yaml")
    assert [(d.line, d.field) for d in diagnostics] == [(3, "metadata.name"), (7, "metadata.name")]
    assert "also defined at duplicate-identity.yaml:5" in diagnostics[0].message
    assert "also defined at duplicate-identity.yaml:1" in diagnostics[1].message


def test_platform_on_an_invalid_profile_is_invalid_too() -> None:
    state = load_files([("f.yaml", (CORPUS / "ref-profile-invalid.yaml").read_bytes())])
    assert set(state.invalid) == {("ComputeProfile", "ns", "prof"), ("MLPlatform", "ns", "demo")}
    platform_diag = state.invalid[("MLPlatform", "ns", "demo")][0]
    assert (platform_diag.line, platform_diag.field) == (13, "spec.computeProfileRef.name")
    assert "ComputeProfile ns/prof is invalid" in platform_diag.message
    assert not state.resources


def test_schema_and_rule_errors_of_one_document_are_reported_together() -> None:
    diagnostics = _load("several-errors-one-document.yaml")
    assert [(d.line, d.column, d.field) for d in diagnostics] == [
        (4, 9, "metadata.name"),
        (8, 15, "spec.gpus[0].family"),
        (9, 14, "spec.gpus[0].count"),
    ]


SECRET_CASES = [
    "settings-inline-api-key.yaml",
    "settings-secret-ref-string.yaml",
    "settings-env-not-a-name.yaml",
]


@pytest.mark.parametrize("name", SECRET_CASES)
def test_inline_secret_value_is_never_echoed(name: str) -> None:
    for diag in _load(name):
        assert "DO-NOT-ECHO" not in str(diag.to_json())
        assert "DO-NOT-ECHO" not in repr(diag)


@pytest.mark.parametrize(
    ("name", "complete"),
    [
        ("syntax-error.yaml", False),
        ("document-list.yaml", False),
        ("kind-unknown.yaml", False),
        ("namespace-missing.yaml", False),
        ("tab-indent.yaml", False),
        ("nodecount-4.yaml", True),
        ("duplicate-identity.yaml", True),
    ],
)
def test_unidentifiable_documents_make_the_state_incomplete(name: str, complete: bool) -> None:
    state = load_files([(name, (CORPUS / name).read_bytes())])
    assert state.complete is complete
