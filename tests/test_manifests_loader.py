"""Cross-resource behaviour of build_desired: positions, fallbacks, dependency invalidity, VIPs."""

from __future__ import annotations

from reconciler.manifests import build_desired, load_files, parse_file
from reconciler.model.diagnostics import Diagnostic
from reconciler.model.resources import MLPlatform
from reconciler.profiles import NO_CLUSTER_PROFILE


def _others(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """Diagnostics other than the no-cluster-profile warning (these namespaces have no Settings)."""
    return [d for d in diagnostics if NO_CLUSTER_PROFILE not in d.message]


def _ns(ns: str, vip: str | None = "10.0.0.1", project_ok: bool = True) -> str:
    edge = f"\n  edge: {{vip: {vip}}}" if vip else ""
    ref = "prof" if project_ok else "Not_A_Name"
    return f"""\
apiVersion: mural.sh/v1alpha1
kind: Project
metadata: {{name: {ns}, namespace: {ns}}}
spec:
  computeProfileRef: {{name: {ref}}}
---
apiVersion: palette.ai/v1alpha1
kind: ComputeProfile
metadata: {{name: prof, namespace: {ns}}}
spec:{edge}
  controlPlaneDefaults: {{nodeCount: 1}}
"""


def _platform(ns: str, name: str, vip: str | None = None) -> str:
    spec = f"{{edge: {{vip: {vip}}}}}" if vip else "{}"
    return f"""\
apiVersion: palette.ai/v1alpha1
kind: MLPlatform
metadata: {{name: {name}, namespace: {ns}}}
spec: {spec}
"""


def test_resources_keep_the_position_of_their_document() -> None:
    state = load_files([("dir/a.yaml", (_ns("a", vip=None) + "---\n" + _platform("a", "p")).encode())])
    assert _others(state.diagnostics) == []
    sources = {ident[0]: loaded.source for ident, loaded in state.resources.items()}
    project = sources["Project"]
    assert (project.file, project.line, project.column) == ("dir/a.yaml", 1, 1)
    assert sources["ComputeProfile"].line == 7
    assert sources["MLPlatform"].line == 13


def test_platforms_on_the_project_fallback_share_the_profile_vip_and_clash() -> None:
    files = [
        ("ns.yaml", _ns("a")),
        ("p1.yaml", _platform("a", "first")),
        ("p2.yaml", _platform("a", "second")),
    ]
    state = load_files((f, t.encode()) for f, t in files)
    assert [p.metadata.name for p in state.platforms()] == ["first"]
    [diag] = state.invalid[("MLPlatform", "a", "second")]
    assert diag.file == "p2.yaml" and diag.field == "spec"
    assert "VIP 10.0.0.1 (from the ComputeProfile's spec.edge.vip) is already used by MLPlatform a/first" in (
        diag.message
    )


def test_own_vips_avoid_the_clash() -> None:
    files = [
        ("ns.yaml", _ns("a")),
        ("p1.yaml", _platform("a", "first", "10.0.0.2")),
        ("p2.yaml", _platform("a", "second", "10.0.0.3")),
    ]
    state = load_files((f, t.encode()) for f, t in files)
    assert _others(state.diagnostics) == [] and len(state.platforms()) == 2


def test_vip_clashes_are_found_across_namespaces_in_namespace_name_order() -> None:
    files = [
        ("a.yaml", _ns("a", vip=None) + "---\n" + _platform("a", "zeta", "10.9.9.9")),
        ("b.yaml", _ns("b", vip=None) + "---\n" + _platform("b", "alpha", "10.9.9.9")),
    ]
    state = load_files((f, t.encode()) for f, t in files)
    assert list(state.invalid) == [("MLPlatform", "b", "alpha")]
    [diag] = state.invalid[("MLPlatform", "b", "alpha")]
    assert "already used by MLPlatform a/zeta (a.yaml:13)" in diag.message


def test_platform_relying_on_an_invalid_project_is_invalid_not_absent() -> None:
    files = [("ns.yaml", _ns("a", project_ok=False)), ("p.yaml", _platform("a", "p"))]
    state = load_files((f, t.encode()) for f, t in files)
    assert ("Project", "a", "a") in state.invalid
    [diag] = state.invalid[("MLPlatform", "a", "p")]
    assert "the Project of namespace a is invalid" in diag.message
    assert state.complete


def test_suspended_platforms_still_hold_their_vip() -> None:
    suspended = _platform("a", "first", "10.0.0.7").replace("spec: {edge:", "spec: {suspend: true, edge:")
    files = [("ns.yaml", _ns("a")), ("p1.yaml", suspended), ("p2.yaml", _platform("a", "second", "10.0.0.7"))]
    state = load_files((f, t.encode()) for f, t in files)
    platform = state.get(MLPlatform, "a", "first")
    assert platform is not None and platform.spec.suspend
    assert ("MLPlatform", "a", "second") in state.invalid


def test_diagnostics_carry_the_resource_and_are_sorted() -> None:
    bad = _platform("a", "p").replace("spec: {}", "spec: {gpus: [{family: H100, count: -1}], mode: x}")
    state = load_files([("z.yaml", _ns("a").encode()), ("b.yaml", bad.encode())])
    assert [(d.file, d.line, d.kind, d.namespace, d.name) for d in state.diagnostics] == [
        ("b.yaml", 4, "MLPlatform", "a", "p"),
        ("b.yaml", 4, "MLPlatform", "a", "p"),
    ]
    assert [d.field for d in state.diagnostics] == ["spec.gpus[0].count", "spec.mode"]


def test_build_desired_reuses_parsed_files() -> None:
    parsed = [
        parse_file("ns.yaml", _ns("a").encode()),
        parse_file("p.yaml", _platform("a", "p", "10.1.1.1").encode()),
    ]
    first = build_desired(parsed, "rev1")
    second = build_desired(parsed, "rev2")
    assert first.resources == second.resources
    assert (first.revision, second.revision) == ("rev1", "rev2")


def test_an_invalid_platform_still_holds_the_vip_it_states() -> None:
    broken = _platform("a", "first", "10.0.0.8").replace("spec: {edge:", "spec: {mode: nope, edge:")
    files = [("ns.yaml", _ns("a")), ("p1.yaml", broken), ("p2.yaml", _platform("a", "second", "10.0.0.8"))]
    state = load_files((f, t.encode()) for f, t in files)
    assert set(state.invalid) == {("MLPlatform", "a", "first"), ("MLPlatform", "a", "second")}
    [diag] = state.invalid[("MLPlatform", "a", "second")]
    assert "already used by MLPlatform a/first (invalid, but its cluster is kept)" in diag.message


def test_shared_platform_above_its_pool_limits_gets_a_warning_and_stays_valid() -> None:
    limits = "controlPlaneDefaults: {nodeCount: 1}\n  gpuLimits: {nvidia h100: 4}"
    profile = _ns("a", vip=None).replace("controlPlaneDefaults: {nodeCount: 1}", limits)
    platform = _platform("a", "big").replace(
        "spec: {}",
        "spec:\n  mode: shared\n  computePoolRef: {name: pool}\n"
        "  gpus:\n    - {family: NVIDIA-H100, count: 8}\n",
    )
    pool = (
        "apiVersion: spectrocloud.com/v1alpha1\nkind: ComputePool\nmetadata: {name: pool, namespace: a}\n"
        "spec: {gpus: [{family: NVIDIA-H100, count: 16}]}\n"
    )
    files = [("ns.yaml", profile.encode()), ("p.yaml", platform.encode()), ("pool.yaml", pool.encode())]
    state = load_files(files)
    assert state.get(MLPlatform, "a", "big") is not None
    assert not state.has_errors and not state.invalid
    diagnostics = _others(state.diagnostics)
    assert [(d.severity, d.line, d.field) for d in diagnostics] == [("warning", 8, "spec.gpus")]
    assert "8 NVIDIA-H100 GPUs exceed the limit of 4 in ComputeProfile a/prof" in diagnostics[0].message
    assert "GPULimitExceeded" in diagnostics[0].message
    assert not any("UnsupportedMode" in d.message for d in state.diagnostics)


def test_a_dedicated_platform_above_its_limits_gets_a_warning_at_the_count() -> None:
    limits = "controlPlaneDefaults: {nodeCount: 1}\n  gpuLimits: {nvidia h100: 4}"
    profile = _ns("a", vip=None).replace("controlPlaneDefaults: {nodeCount: 1}", limits)
    platform = _platform("a", "big").replace(
        "spec: {}", "spec:\n  gpus:\n    - {family: NVIDIA-H100, count: 8}\n"
    )
    state = load_files([("ns.yaml", profile.encode()), ("p.yaml", platform.encode())])
    diagnostics = _others(state.diagnostics)
    assert [(d.severity, d.line, d.field) for d in diagnostics] == [("warning", 6, "spec.gpus[0].count")]
    assert "8 NVIDIA-H100 GPUs exceed the limit of 4 in ComputeProfile a/prof" in diagnostics[0].message
