"""The fallback and precedence rules of reconciler.resolve, and the slips they fixed (validation side)."""

from __future__ import annotations

import pytest

from reconciler import resolve
from reconciler.allocate import Rejection, requirements
from reconciler.manifests import load_files
from reconciler.model.conditions import Reason
from reconciler.model.diagnostics import UNKNOWN_GPU_FAMILY, Severity
from reconciler.plan import make_plan
from tests._allocate_support import cps, desired, inventory, machine, platform, profile, project, workload

PROFILE = """apiVersion: palette.ai/v1alpha1
kind: ComputeProfile
metadata: {{name: main, namespace: team}}
spec:
  controlPlaneDefaults: {{nodeCount: 1}}
  edge: {{vip: {vip}}}
"""
PLATFORM = """apiVersion: palette.ai/v1alpha1
kind: MLPlatform
metadata: {{name: p, namespace: team}}
spec:
  computeProfileRef: {{name: main}}
  gpus:
    - {{family: {family}, count: 8}}
  edge: {{vip: {vip}}}
"""


def test_min_workers_precedence_label_then_override_then_profile() -> None:
    prof = profile(min_workers=2)
    assert resolve.min_workers(platform("p"), prof, None) == 2
    assert resolve.min_workers(platform("p", override_min=4), prof, None) == 4
    assert resolve.min_workers(platform("p", override_min=4), prof, workload(min_nodes="3")) == 3
    assert resolve.min_workers(platform("p"), profile(), None) == 0


@pytest.mark.parametrize("label", ["0", "-1", "three", "", " 3x"])
def test_min_nodes_label_has_one_validity_rule_in_validation_and_allocation(label: str) -> None:
    """'0' was refused by validation but accepted by allocation: one parser now, both refuse it."""
    assert resolve.parse_min_nodes(label) is None
    state = desired(platform("p", workload_name="wp"), workload("wp", min_nodes=label))
    decision = requirements(state, platform("p", workload_name="wp"))
    assert isinstance(decision, Rejection) and decision.reason is Reason.INVALID_SPEC
    text = f"""apiVersion: mural.spectrocloud.com/v1alpha1
kind: WorkloadProfile
metadata: {{name: wp, namespace: team, labels: {{palette.ai/min-nodes: "{label}"}}}}
"""
    loaded = load_files([("wp.yaml", text.encode())])
    assert ("WorkloadProfile", "team", "wp") in loaded.invalid


def test_compute_profile_falls_back_to_the_project() -> None:
    p = platform("p")
    assert resolve.compute_profile_name(p, project(profile_name="fallback")) == "fallback"
    assert resolve.compute_profile_name(platform("p", profile_name="own"), project()) == "own"
    assert resolve.compute_profile_name(p, None) is None


def test_vip_of_the_platform_wins_over_the_profile() -> None:
    files = [
        ("profile.yaml", PROFILE.format(vip="10.0.0.1").encode()),
        ("platform.yaml", PLATFORM.format(family="NVIDIA-H100", vip="10.0.0.2").encode()),
    ]
    state = load_files(files)
    (p,) = state.platforms()
    found = resolve.vip(p, resolve.compute_profile(state, p))
    assert found == resolve.Vip("10.0.0.2", True)


def test_vip_that_is_not_an_ip_is_an_error_with_file_and_line() -> None:
    files = [
        ("team/profile.yaml", PROFILE.format(vip="not-an-ip").encode()),
        ("team/platform.yaml", PLATFORM.format(family="NVIDIA-H100", vip="10.0.0.300").encode()),
    ]
    state = load_files(files)
    errors = [(d.file, d.line, d.field) for d in state.diagnostics if d.severity is Severity.ERROR]
    assert errors == [("team/platform.yaml", 8, "spec.edge.vip"), ("team/profile.yaml", 6, "spec.edge.vip")]
    messages = " ".join(d.message for d in state.diagnostics)
    assert "'not-an-ip' is not an IP address" in messages and "'10.0.0.300' is not an IP address" in messages


def test_unknown_gpu_family_is_a_warning_that_suggests_the_known_one() -> None:
    files = [
        ("profile.yaml", PROFILE.format(vip="10.0.0.1").encode()),
        ("platform.yaml", PLATFORM.format(family="NVIDIA-H1OO", vip="10.0.0.2").encode()),
    ]
    state = load_files(files)
    (warning,) = [d for d in state.diagnostics if d.reason == UNKNOWN_GPU_FAMILY]
    assert warning.severity is Severity.WARNING and (warning.file, warning.line) == ("platform.yaml", 7)
    assert "NVIDIA-H1OO is not a known GPU family (did you mean NVIDIA-H100?)" in warning.message
    assert state.platforms(), "a warning, not an error: the platform stays valid"
    # No host has it either: plan keeps the warning. A host tagged with the family silences it.
    assert any(d.reason == UNKNOWN_GPU_FAMILY for d in make_plan(state, inventory(cps(1)), []).diagnostics)
    tagged = [*cps(1), machine("odd", 8, "NVIDIA-H1OO")]
    assert not any(
        d.reason == UNKNOWN_GPU_FAMILY for d in make_plan(state, inventory(tagged), []).diagnostics
    )


def test_known_gpu_family_gives_no_warning() -> None:
    files = [
        ("profile.yaml", PROFILE.format(vip="10.0.0.1").encode()),
        ("platform.yaml", PLATFORM.format(family="nvidia h100", vip="10.0.0.2").encode()),
    ]
    assert [d for d in load_files(files).diagnostics if d.reason == UNKNOWN_GPU_FAMILY] == []


def test_missing_reference_diagnostics_carry_the_reason() -> None:
    state = load_files([("platform.yaml", PLATFORM.format(family="NVIDIA-H100", vip="10.0.0.2").encode())])
    (diag,) = state.diagnostics
    assert diag.reason == Reason.REFERENCE_NOT_FOUND


def test_gpu_limits_add_up_requests_of_one_family_and_compare_canonically() -> None:
    prof = profile(limits={"nvidia h100": 12})
    p = platform("p", {"NVIDIA-H100": 8, "nvidia_h100": 8})
    (breach,) = resolve.limit_breaches(p, prof)
    assert (breach.family, breach.count, breach.limit) == ("NVIDIA-H100", 16, 12)
