"""The models: the seed's examples validate as published, and every kind round-trips through YAML."""

from __future__ import annotations

import yaml

from reconciler.manifests import load_files
from reconciler.model.resources import KINDS, ComputeProfile, WorkloadProfile
from tests._manifests_support import SEED_COMPUTE_PROFILE, SEED_WORKLOAD_PROFILE, sample_files


def test_seed_compute_profile_validates_as_published() -> None:
    state = load_files([("cp.yaml", SEED_COMPUTE_PROFILE.encode())])
    assert state.diagnostics == []
    profile = state.get(ComputeProfile, "project-a", "edge-compute-profile")
    assert profile is not None
    assert profile.spec.control_plane_defaults.node_count == 3
    assert profile.spec.gpu_limits == {"NVIDIA-H100": 6, "NVIDIA-A100": 6}
    assert profile.spec.min_worker_nodes == 2
    assert profile.spec.edge is not None and profile.spec.edge.vip == "10.10.189.24"


def test_seed_workload_profile_validates_as_published() -> None:
    state = load_files([("wp.yaml", SEED_WORKLOAD_PROFILE.encode())])
    assert state.diagnostics == []
    profile = state.get(WorkloadProfile, "project-a", "clearml-workload-profile")
    assert profile is not None
    assert profile.metadata.labels["palette.ai/min-nodes"] == "3"
    assert profile.spec is None


def test_sample_repository_has_every_kind() -> None:
    state = load_files(sample_files())
    assert state.diagnostics == []
    assert {kind for kind, _ns, _name in state.resources} == set(KINDS)


def test_every_kind_round_trips_through_yaml_by_alias() -> None:
    state = load_files(sample_files())
    dumped = [loaded.resource.model_dump(mode="json", by_alias=True) for loaded in state.resources.values()]
    text = yaml.safe_dump_all(dumped, sort_keys=False)
    again = load_files([("again.yaml", text.encode())])
    assert again.diagnostics == []
    assert {k: v.resource for k, v in again.resources.items()} == {
        k: v.resource for k, v in state.resources.items()
    }
    assert {kind for kind, _ns, _name in again.resources} == set(KINDS)


def test_snake_case_field_names_are_not_accepted() -> None:
    text = SEED_COMPUTE_PROFILE.replace("minWorkerNodes:", "min_worker_nodes:")
    state = load_files([("cp.yaml", text.encode())])
    assert [d.field for d in state.diagnostics] == ["spec.min_worker_nodes"]
