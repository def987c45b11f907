"""validate's streaming load: compact records, the same verdict as the desired state, texts read again only
where a position is needed."""

from __future__ import annotations

from reconciler.manifests import ParsedFile, build_desired, parse_file
from reconciler.manifests.loader import validate_files
from reconciler.manifests.record import examine
from reconciler.model.resources import ComputeProfile
from tests._manifests_support import namespace_yaml

NAMESPACE = (
    namespace_yaml("a", vip="10.0.0.1", gpu_limits={"NVIDIA-H100": 4}, tenant="acme")
    + """\
---
apiVersion: spectrocloud.com/v1alpha1
kind: ComputePool
metadata: {name: pool, namespace: a}
spec:
  mode: dedicated
  computeProfileRef: {name: prof}
  gpus: [{family: NVIDIA-H100, count: 8}]
  edge: {vip: 10.0.0.9}
"""
)


def _platform(name: str, spec: str) -> str:
    header = "apiVersion: palette.ai/v1alpha1\nkind: MLPlatform\n"
    return f"{header}metadata: {{name: {name}, namespace: a}}\nspec: {spec}\n"


def _workload(name: str, spec: str) -> str:
    header = "apiVersion: spectrocloud.com/v1alpha1\nkind: AIWorkload\n"
    return f"{header}metadata: {{name: {name}, namespace: a}}\nspec: {spec}\n"


FILES = {
    "ns.yaml": NAMESPACE,
    # Takes the profile's VIP; computeProfileRef with an override only is still "there".
    "first.yaml": _platform("first", "{computeProfileRef: {override: {minWorkerNodes: 1}}}"),
    "second.yaml": _platform("second", "{computeProfileRef: {override: {minWorkerNodes: 2}}}"),
    "big.yaml": _platform("big", "{edge: {vip: 10.0.0.2}, gpus: [{family: NVIDIA-H100, count: 8}]}"),
    "odd.yaml": _platform("odd", "{edge: {vip: 10.0.0.3}, gpus: [{family: NVIDIA-H1OO, count: 1}]}"),
    "tenant.yaml": _platform("tenant", "{mode: shared, computePoolRef: {name: pool}, edge: {vip: 10.0.0.4}}"),
    "w1.yaml": _workload(
        "w1", "{computePoolRef: {name: pool}, priority: 5, gpus: [{family: NVIDIA-H100, count: 1}]}"
    ),
    "w2.yaml": _workload(
        "w2", "{computePoolRef: {name: pool}, gpus: [{family: NVIDIA-H100, mig: 1g.10gb, count: 1}]}"
    ),
    "lost.yaml": _workload("lost", "{computePoolRef: {name: nowhere}}"),
    "broken.yaml": _platform(
        "broken", "{gpus: [{family: NVIDIA-H100, count: -1}], workloadProfileRef: {name: nope}}"
    ),
}


def _parsed() -> list[ParsedFile]:
    return [parse_file(path, text.encode()) for path, text in sorted(FILES.items())]


def test_validate_reports_exactly_what_the_desired_state_reports() -> None:
    state = build_desired(_parsed(), None)
    verdict = validate_files(iter(_parsed()))
    assert verdict.diagnostics == state.diagnostics
    assert verdict.resources == len(state.resources) + len(state.invalid)
    assert verdict.complete == state.complete
    # Every kind of cross-resource problem and warning of the tree is there, with its position.
    messages = [(d.file, d.line, d.field, d.severity.value) for d in verdict.diagnostics]
    assert ("second.yaml", 4, "spec.computeProfileRef", "error") in messages  # the profile's VIP, taken
    assert any(d.file == "big.yaml" and "GPULimitExceeded" in d.message for d in verdict.diagnostics)
    assert any(d.file == "odd.yaml" and "not a known GPU family" in d.message for d in verdict.diagnostics)
    assert any(d.file == "tenant.yaml" and d.field == "spec.edge" for d in verdict.diagnostics)
    assert any(d.file == "w2.yaml" and "MIGUnsupported" in d.message for d in verdict.diagnostics)
    assert any(d.file == "w2.yaml" and "PoolDedicated" in d.message for d in verdict.diagnostics)
    assert any(d.file == "lost.yaml" and "ReferenceNotFound" in d.message for d in verdict.diagnostics)
    broken = [d for d in verdict.diagnostics if d.file == "broken.yaml"]
    assert {d.field for d in broken} >= {"spec.gpus[0].count", "spec.workloadProfileRef.name"}


def test_texts_are_read_again_only_for_the_files_with_something_to_point_at() -> None:
    asked: list[str] = []

    def text_of(path: str) -> str:
        asked.append(path)
        return FILES[path]

    with_texts = validate_files(iter(_parsed()))
    reread = validate_files(iter(_parsed()), text_of)
    assert reread.diagnostics == with_texts.diagnostics
    assert sorted(asked) == sorted({d.file for d in reread.diagnostics if d.field})
    assert "first.yaml" not in asked and "ns.yaml" not in asked


def test_platform_records_drop_the_resource_unless_asked_to_keep_it() -> None:
    [platform_doc] = parse_file("big.yaml", FILES["big.yaml"].encode()).documents
    dropped, kept = examine("big.yaml", platform_doc, False), examine("big.yaml", platform_doc, True)
    assert dropped.resource is None and dropped.facts is not None and dropped.valid
    assert dropped.facts.gpus == (("NVIDIA-H100", 8),) and dropped.facts.vip == "10.0.0.2"
    assert kept.resource is not None and kept.facts == dropped.facts
    profile_doc = parse_file("ns.yaml", NAMESPACE.encode()).documents[2]
    assert isinstance(examine("ns.yaml", profile_doc, False).resource, ComputeProfile)  # referred to: kept
