"""Validation of Environments, workloads placed through them and Project GPU quotas
(docs/environments.md): every rule violation names file, line and field."""

from __future__ import annotations

from reconciler.manifests import load_files
from reconciler.model.diagnostics import Severity
from reconciler.model.environment import Environment
from reconciler.model.resources import AIWorkload, Project
from tests.test_manifests_pools import BASE, pool

ENV_HEAD = """\
apiVersion: spectrocloud.com/v1beta1
kind: Environment
metadata: {name: a100-east, namespace: project-a}
"""


def environment(spec: str) -> str:
    return ENV_HEAD + spec


def env_workload(name: str = "serve", refs: str = "environmentRef: {name: a100-east}") -> str:
    return f"""\
apiVersion: spectrocloud.com/v1alpha1
kind: AIWorkload
metadata: {{name: {name}, namespace: project-a}}
spec:
  {refs}
  gpus: [{{family: NVIDIA-A100, count: 2}}]
"""


def load(*docs: str) -> tuple[object, list[tuple[str, int, str, Severity]]]:
    text = "\n---\n".join([BASE, *docs])
    state = load_files([("repo.yaml", text.encode())])
    found = [(d.file, d.line, d.message, d.severity) for d in state.diagnostics]
    return state, found


def errors(*docs: str) -> list[tuple[str, int, str]]:
    _, found = load(*docs)
    return [(f, line, m) for f, line, m, s in found if s is Severity.ERROR]


def test_an_environment_with_listed_pools_is_valid() -> None:
    state, found = load(
        pool("shared-a100-1", vip="10.0.0.41"),
        pool("shared-a100-2", vip="10.0.0.42"),
        environment("spec:\n  pools: [{name: shared-a100-1}, {name: shared-a100-2}]\n  order: mostFree\n"),
        env_workload(),
    )
    assert found == []
    env = state.get(Environment, "project-a", "a100-east")  # type: ignore[attr-defined]
    assert env is not None and [p.name for p in env.spec.pools] == ["shared-a100-1", "shared-a100-2"]
    assert env.spec.order == "mostFree"
    workload = state.get(AIWorkload, "project-a", "serve")  # type: ignore[attr-defined]
    assert workload.spec.environment_ref.name == "a100-east" and workload.spec.compute_pool_ref is None


def test_an_environment_names_pools_by_list_or_selector_not_both() -> None:
    spec = "spec:\n  pools: [{name: a}]\n  poolSelector: {matchLabels: {region: east}}\n"
    found = errors(environment(spec))
    assert len(found) == 1
    file, line, message = found[0]
    assert (
        file == "repo.yaml" and "spec.poolSelector: an Environment names its pools by spec.pools" in message
    )
    assert line == BASE.count("\n") + 8  # the poolSelector key: after a blank line, "---" and 5 lines


def test_an_environment_without_pools_or_selector_is_an_error() -> None:
    found = errors(environment("spec: {order: listed}\n"))
    assert any("spec: an Environment needs spec.pools" in m for _, _, m in found)


def test_an_environment_lists_a_pool_once_and_at_least_one() -> None:
    twice = errors(pool(), environment("spec:\n  pools: [{name: shared-a100}, {name: shared-a100}]\n"))
    assert any("spec.pools[1].name: ComputePool shared-a100 is listed twice" in m for _, _, m in twice)
    empty = errors(environment("spec:\n  pools: []\n"))
    assert any("spec.pools: lists no pool" in m for _, _, m in empty)


def test_an_unknown_order_is_a_schema_error() -> None:
    found = errors(pool(), environment("spec:\n  pools: [{name: shared-a100}]\n  order: random\n"))
    assert any("spec.order" in m for _, _, m in found)


def test_a_listed_pool_that_does_not_exist_is_a_warning() -> None:
    _, found = load(environment("spec:\n  pools: [{name: nowhere}]\n"))
    assert [(m, s) for _, _, m, s in found] == [
        (
            "spec.pools[0].name: ComputePool 'nowhere' not found in namespace project-a; this candidate is "
            "skipped (ReferenceNotFound) until it exists",
            Severity.WARNING,
        )
    ]


def test_a_workload_names_its_pool_or_its_environment_not_both() -> None:
    both = "computePoolRef: {name: shared-a100}\n  environmentRef: {name: a100-east}"
    found = errors(pool(), environment("spec:\n  pools: [{name: shared-a100}]\n"), env_workload(refs=both))
    assert any("spec.environmentRef: a workload names its ComputePool" in m for _, _, m in found)
    neither = errors(env_workload(refs="priority: 1"))
    assert any("spec: a workload needs spec.computePoolRef" in m for _, _, m in neither)


def test_a_missing_environment_is_reference_not_found() -> None:
    state, found = load(env_workload())
    assert any(
        "ReferenceNotFound: spec.environmentRef.name: Environment 'a100-east' not found" in m
        for _, _, m, _s in found
    )
    assert ("AIWorkload", "project-a", "serve") in state.invalid  # type: ignore[attr-defined]


def test_a_workload_of_an_invalid_environment_is_kept_as_it_is() -> None:
    state, found = load(environment("spec: {}\n"), env_workload())
    assert any("Environment project-a/a100-east is invalid" in m for _, _, m, _s in found)
    assert ("AIWorkload", "project-a", "serve") in state.invalid  # type: ignore[attr-defined]


def test_gpu_quota_families_parse_and_are_listed_once() -> None:
    project = BASE.replace(
        "  settingsRef: {name: palette}\n",
        "  settingsRef: {name: palette}\n  gpuQuota: {NVIDIA-A100: 20, nvidia a100: 4, '!!': 1}\n",
        1,
    )
    state = load_files([("repo.yaml", project.encode())])
    messages = [d.message for d in state.diagnostics]
    assert any("spec.gpuQuota.nvidia a100: GPU family NVIDIA-A100 is listed twice" in m for m in messages)
    assert any("spec.gpuQuota.!!: '!!' is not a GPU family name" in m for m in messages)


def test_a_gpu_quota_is_read() -> None:
    project = BASE.replace(
        "  settingsRef: {name: palette}\n",
        "  settingsRef: {name: palette}\n  gpuQuota: {NVIDIA-A100: 20}\n",
        1,
    )
    state = load_files([("repo.yaml", project.encode())])
    assert state.diagnostics == []
    found = state.get(Project, "project-a", "project-a")
    assert found is not None and found.spec.gpu_quota == {"NVIDIA-A100": 20}


def test_a_misspelt_environment_field_gets_a_did_you_mean() -> None:
    found = errors(pool(), environment("spec:\n  pools: [{name: shared-a100}]\n  oder: listed\n"))
    assert any("did you mean order?" in m for _, _, m in found)
    found = errors(env_workload(refs="environmentRf: {name: a100-east}"))
    assert any("did you mean environmentRef?" in m for _, _, m in found)
