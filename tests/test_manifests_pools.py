"""Validation of ComputePools, AIWorkloads and shared MLPlatforms (docs/validation.md)."""

from __future__ import annotations

from reconciler.manifests import load_files
from reconciler.manifests.pool_rules import pool_mode_change
from reconciler.model.desired import DesiredState
from reconciler.model.diagnostics import Severity
from reconciler.model.pools import tenants_by_pool
from reconciler.model.resources import AIWorkload, ComputePool, MLPlatform
from tests._manifests_support import namespace_yaml

BASE = (
    namespace_yaml("project-a", vip="10.0.0.1", gpu_limits={"NVIDIA-A100": 4})
    + """\
---
apiVersion: mural.spectrocloud.com/v1alpha1
kind: WorkloadProfile
metadata: {name: vllm, namespace: project-a}
spec: {}
"""
)


def pool(name: str = "shared-a100", mode: str = "shared", extra: str = "", vip: str = "10.0.0.40") -> str:
    return f"""\
apiVersion: spectrocloud.com/v1alpha1
kind: ComputePool
metadata: {{name: {name}, namespace: project-a}}
spec:
  mode: {mode}
  gpus: [{{family: NVIDIA-A100, count: 16}}]
  edge: {{vip: {vip}}}
{extra}"""


def workload(
    name: str,
    gpus: str = "[{family: NVIDIA-A100, count: 2}]",
    pool_name: str = "shared-a100",
    extra: str = "",
) -> str:
    return f"""\
apiVersion: spectrocloud.com/v1alpha1
kind: AIWorkload
metadata: {{name: {name}, namespace: project-a}}
spec:
  computePoolRef: {{name: {pool_name}}}
  gpus: {gpus}
{extra}"""


def platform(name: str, spec: str) -> str:
    return f"""\
apiVersion: palette.ai/v1alpha1
kind: MLPlatform
metadata: {{name: {name}, namespace: project-a}}
spec: {spec}
"""


def load(*docs: str) -> DesiredState:
    return load_files([("repo.yaml", "---\n".join([BASE, *docs]).encode())])


def errors(state: DesiredState) -> list[str]:
    return [d.message for d in state.diagnostics if d.severity is Severity.ERROR]


def warnings(state: DesiredState) -> list[str]:
    return [d.message for d in state.diagnostics if d.severity is Severity.WARNING]


def test_a_pool_and_its_workloads_as_the_design_shows_them_are_valid() -> None:
    state = load(
        pool(extra="  minWorkerNodes: 2\n  mig: {strategy: mixed}\n  workloadProfileRef: {name: vllm}\n"),
        workload(
            "llm-serving",
            "[{family: NVIDIA-A100, count: 2}, {family: NVIDIA-A100, mig: 3g.40gb, count: 1}]",
            extra="  priority: 10\n  workloadProfileRef: {name: vllm}\n",
        ),
    )
    assert state.diagnostics == []
    found = state.get(AIWorkload, "project-a", "llm-serving")
    assert found is not None and found.spec.priority == 10 and found.spec.gpus[1].mig == "3g.40gb"
    assert state.get(ComputePool, "project-a", "shared-a100") is not None


def test_a_workload_whose_pool_does_not_exist_is_invalid_with_reference_not_found() -> None:
    state = load(workload("orphan", pool_name="nowhere"))
    assert ("AIWorkload", "project-a", "orphan") in state.invalid
    assert any("ReferenceNotFound" in m and "ComputePool 'nowhere'" in m for m in errors(state))


def test_pool_references_resolve_in_the_namespace() -> None:
    extra = "  workloadProfileRef: {name: missing-stack}\n  computeProfileRef: {name: missing-prof}\n"
    state = load(pool(extra=extra))
    messages = errors(state)
    assert any("WorkloadProfile 'missing-stack' not found in namespace project-a" in m for m in messages)
    assert any("ComputeProfile 'missing-prof' not found" in m for m in messages)


def test_a_pool_scaling_policy_reference_must_resolve() -> None:
    state = load(pool(extra="  scalingPolicyRef: {name: gpu-autoscale}\n"))
    assert any("ScalingPolicy 'gpu-autoscale' not found" in m for m in errors(state))


def test_a_workload_of_an_invalid_pool_is_invalid_and_says_why() -> None:
    state = load(pool(extra="  workloadProfileRef: {name: missing}\n"), workload("w"))
    assert ("AIWorkload", "project-a", "w") in state.invalid
    assert any("ComputePool project-a/shared-a100 is invalid" in m for m in errors(state))


def test_shared_platform_needs_a_pool_and_a_dedicated_one_must_not_name_one() -> None:
    state = load(
        pool(),
        platform("tenant", "{mode: shared}"),
        platform("owner", "{computePoolRef: {name: shared-a100}, edge: {vip: 10.0.0.9}}"),
    )
    messages = errors(state)
    assert any("spec.computePoolRef: required with mode shared" in m for m in messages)
    assert any("spec.computePoolRef: only with mode shared" in m for m in messages)


def test_a_shared_platform_is_a_tenant_and_needs_no_vip_of_its_own() -> None:
    spec = "{mode: shared, computePoolRef: {name: shared-a100}, gpus: [{family: NVIDIA-A100, count: 1}]}"
    state = load(pool(), platform("tenant-1", spec), platform("tenant-2", spec))
    assert errors(state) == []
    assert ("MLPlatform", "project-a", "tenant-2") in state.resources


def test_a_platform_and_a_pool_with_one_name_are_both_errors_naming_each_other() -> None:
    state = load(pool(name="gpu"), platform("gpu", "{edge: {vip: 10.0.0.9}}"))
    clash = [d for d in state.diagnostics if "share a name" in d.message]
    assert {d.kind for d in clash} == {"MLPlatform", "ComputePool"}
    for d in clash:
        assert "MLPlatform project-a/gpu (repo.yaml:" in d.message
        assert "ComputePool project-a/gpu (repo.yaml:" in d.message
        assert d.line > 1 and d.file == "repo.yaml"


def test_every_family_of_a_workload_needs_at_least_one_gpu() -> None:
    state = load(pool(), workload("w", "[{family: NVIDIA-A100, count: 0}]"))
    assert any("spec.gpus[0].count: a workload needs at least 1 GPU" in m for m in errors(state))


def test_a_workload_lists_a_family_and_mig_profile_once() -> None:
    gpus = "[{family: NVIDIA-A100, count: 1}, {family: nvidia a100, count: 2}]"
    state = load(pool(), workload("w", gpus))
    assert any("GPU family NVIDIA-A100 is listed twice" in m for m in errors(state))


def test_a_bad_mig_profile_name_is_a_schema_error() -> None:
    state = load(pool(), workload("w", "[{family: NVIDIA-A100, mig: huge, count: 1}]"))
    assert any("spec.gpus[0].mig" in m for m in errors(state))


def test_mig_entries_on_a_pool_without_mixed_strategy_warn_mig_unsupported() -> None:
    state = load(pool(), workload("w", "[{family: NVIDIA-A100, mig: 1g.10gb, count: 2}]"))
    assert errors(state) == []
    assert any("MIGUnsupported" in m and "mig.strategy none" in m for m in warnings(state))


def test_a_request_above_the_pool_profile_limits_warns_gpu_limit_exceeded() -> None:
    # 4 whole + 7 x 3g (21 slices = 3 GPUs) = 7 > 4
    gpus = "[{family: NVIDIA-A100, count: 4}, {family: NVIDIA-A100, mig: 3g.40gb, count: 7}]"
    state = load(pool(extra="  mig: {strategy: mixed}\n"), workload("w", gpus))
    assert any("7 NVIDIA-A100 GPUs" in m and "GPULimitExceeded" in m for m in warnings(state))


def test_a_second_tenant_of_a_dedicated_pool_warns_pool_dedicated() -> None:
    state = load(pool(mode="dedicated"), workload("a"), workload("b", extra="  priority: 5\n"))
    flagged = [d for d in state.diagnostics if "PoolDedicated" in d.message]
    assert [d.name for d in flagged] == ["a"]  # b comes first: higher priority


def test_a_pool_may_not_take_a_vip_a_platform_uses() -> None:
    state = load(pool(vip="10.0.0.9"), platform("p", "{edge: {vip: 10.0.0.9}}"))
    assert any("VIP 10.0.0.9" in m and "MLPlatform project-a/p" in m for m in errors(state))
    assert ("MLPlatform", "project-a", "p") in state.resources


def test_a_pool_mode_change_is_refused_only_once_its_cluster_exists() -> None:
    state = load(pool(mode="dedicated"))
    found = state.get(ComputePool, "project-a", "shared-a100")
    assert found is not None
    assert pool_mode_change(found, "dedicated", cluster_exists=True) is None
    assert pool_mode_change(found, "shared", cluster_exists=False) is None
    assert pool_mode_change(found, None, cluster_exists=True) is None
    message = pool_mode_change(found, "shared", cluster_exists=True)
    assert message is not None
    assert "cannot change from shared to dedicated" in message and "project-a-shared-a100" in message


def test_tenants_are_grouped_by_pool_with_their_requests_in_canonical_families() -> None:
    spec = "{mode: shared, computePoolRef: {name: shared-a100}, gpus: [{family: nvidia a100, count: 3}]}"
    state = load(
        pool(),
        workload("w", "[{family: nvidia_a100, count: 2}, {family: NVIDIA-A100, mig: 1g.10gb, count: 3}]"),
        platform("tenant", spec),
        platform("own", "{edge: {vip: 10.0.0.9}}"),
    )
    groups = tenants_by_pool([*state.of_kind(AIWorkload), *state.of_kind(MLPlatform)])
    assert list(groups) == [("project-a", "shared-a100")]
    requests = {r.key[1]: r for r in groups[("project-a", "shared-a100")]}
    assert dict(requests["tenant"].whole) == {"NVIDIA-A100": 3} and requests["tenant"].kind == "MLPlatform"
    assert dict(requests["w"].whole) == {"NVIDIA-A100": 2}
    assert [(m.family, m.profile, m.count) for m in requests["w"].mig] == [("NVIDIA-A100", "1g.10gb", 3)]
    assert requests["w"].limit_counts() == {"NVIDIA-A100": 3}  # 2 whole + 3 x 1g = 3/7 -> 1


def test_a_missing_pool_is_reported_at_the_reference() -> None:
    state = load(workload("orphan", pool_name="nowhere"))
    (diag,) = [d for d in state.diagnostics if d.name == "orphan"]
    assert diag.field == "spec.computePoolRef.name"
    text = "---\n".join([BASE, workload("orphan", pool_name="nowhere")]).splitlines()
    assert text[diag.line - 1].strip().startswith("computePoolRef: {name: nowhere}")
