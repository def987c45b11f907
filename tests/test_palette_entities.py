"""Request bodies built from resources (pure): the create entity and machine pools."""

from __future__ import annotations

from reconciler.model.observed import managed_labels
from reconciler.model.resources import ComputeProfile, WorkloadProfile
from reconciler.palette.entities import cluster_create_entity, machine_pool_entity
from tests._palette_support import PROFILE, WORKLOAD, assert_valid


def _profile(**spec: object) -> ComputeProfile:
    base: dict[str, object] = {"controlPlaneDefaults": {"nodeCount": 1}}
    base.update(spec)
    return ComputeProfile.model_validate(
        {
            "apiVersion": "palette.ai/v1alpha1",
            "kind": "ComputeProfile",
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": base,
        }
    )


def _entity(**overrides: object) -> dict:
    args: dict = {
        "name": "project-a-clearml",
        "labels": managed_labels("project-a", "clearml"),
        "profile": PROFILE,
        "workload": WORKLOAD,
        "vip": None,
        "arch": "amd64",
        "control_plane": ["cp-1", "cp-2", "cp-3"],
        "workers": ["gpu-1"],
    }
    args.update(overrides)
    return cluster_create_entity(**args)


def test_create_entity_carries_name_labels_and_edge_settings() -> None:
    entity = _entity(vip="10.10.189.30")
    assert entity["metadata"] == {
        "name": "project-a-clearml",
        "labels": managed_labels("project-a", "clearml"),
    }
    assert entity["spec"]["cloudConfig"] == {
        "controlPlaneEndpoint": {"host": "10.10.189.30", "type": "VIP"},
        "ntpServers": ["time.google.com"],
        "overlayNetworkConfiguration": {"enable": False, "cidr": "192.168.1.0/24"},
        "sshKeys": ["ssh-rsa AAAAB3Nza... test-user@test-machine"],
        "isTwoNodeCluster": False,
        "staticIp": True,
    }
    assert_valid("v1SpectroEdgeNativeClusterEntity", entity, "create entity")


def test_vip_falls_back_to_the_profile_and_is_left_out_without_one() -> None:
    assert _entity()["spec"]["cloudConfig"]["controlPlaneEndpoint"]["host"] == "10.10.189.24"
    assert "controlPlaneEndpoint" not in _entity(profile=_profile())["spec"]["cloudConfig"]


def test_pools_take_the_profile_defaults() -> None:
    cp, workers = _entity()["spec"]["machinepoolconfig"]
    assert cp["cloudConfig"]["edgeHosts"] == [{"hostUid": "cp-1"}, {"hostUid": "cp-2"}, {"hostUid": "cp-3"}]
    assert cp["poolConfig"] == {
        "name": "control-plane-pool",
        "isControlPlane": True,
        "useControlPlaneAsWorker": False,
        "labels": ["control-plane"],
        "size": 3,
        "additionalLabels": {"palette.ai": "true"},
        "additionalAnnotations": {"kubernetes.io/description": "Control plane node"},
        "taints": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}],
        "updateStrategy": {"type": "RollingUpdateScaleOut"},
        "machinePoolProperties": {"archType": "amd64"},
    }
    assert workers["poolConfig"]["name"] == "worker-pool"
    assert workers["poolConfig"]["isControlPlane"] is False
    assert "useControlPlaneAsWorker" not in workers["poolConfig"]
    assert workers["poolConfig"]["taints"] == [
        {"key": "worker-taint", "value": "true", "effect": "NoSchedule"}
    ]
    assert workers["poolConfig"]["size"] == 1


def test_worker_node_eligible_makes_the_control_plane_schedulable() -> None:
    profile = _profile(controlPlaneDefaults={"nodeCount": 1, "workerNodeEligible": True})
    (cp,) = _entity(profile=profile, workers=[], control_plane=["cp-1"])["spec"]["machinepoolconfig"]
    assert cp["poolConfig"]["useControlPlaneAsWorker"] is True


def test_no_workers_means_no_worker_pool() -> None:
    pools = _entity(workers=[])["spec"]["machinepoolconfig"]
    assert [p["poolConfig"]["name"] for p in pools] == ["control-plane-pool"]


def test_cluster_profiles_come_from_the_workload_profile() -> None:
    assert _entity()["spec"]["profiles"] == [
        {"uid": "66a1b2c3d4e5f6a7b8c9d0e1", "packValues": [{"name": "clearml"}]}
    ]
    empty = WorkloadProfile.model_validate(
        {
            "apiVersion": "mural.spectrocloud.com/v1alpha1",
            "kind": "WorkloadProfile",
            "metadata": {"name": "w", "namespace": "ns"},
            "spec": None,
        }
    )
    assert _entity(workload=empty)["spec"]["profiles"] == []
    assert _entity(workload=None)["spec"]["profiles"] == []


def test_machine_pool_entity_for_updates() -> None:
    pool = machine_pool_entity("worker-pool", False, ["a", "b"], _profile(), "arm64")
    assert pool == {
        "cloudConfig": {"edgeHosts": [{"hostUid": "a"}, {"hostUid": "b"}]},
        "poolConfig": {
            "name": "worker-pool",
            "isControlPlane": False,
            "labels": ["worker"],
            "size": 2,
            "additionalLabels": {},
            "additionalAnnotations": {},
            "taints": [],
            "updateStrategy": {"type": "RollingUpdateScaleOut"},
            "machinePoolProperties": {"archType": "arm64"},
        },
    }
    assert_valid("v1EdgeNativeMachinePoolConfigEntity", pool, "pool")
