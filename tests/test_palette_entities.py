"""Request bodies built from resources (pure): the create entity, machine pools, profile attach/detach."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.edgehost import Nic
from reconciler.inventory import discover
from reconciler.model.base import ClusterProfileRef
from reconciler.model.observed import managed_labels
from reconciler.model.resources import ComputeProfile
from reconciler.palette.entities import (
    PoolHost,
    attach_profiles_entity,
    cluster_create_entity,
    detach_profiles_entity,
    machine_pool_entity,
    pool_hosts,
)
from tests._allocate_support import machine
from tests._palette_support import PROFILE, WORKLOAD, assert_valid, host

INFRA = ClusterProfileRef(uid="6651a2b3c4d5e6f708192a3b")
PROFILES = (INFRA, *(WORKLOAD.spec.cluster_profiles if WORKLOAD.spec else []))


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


def _host(uid: str, n: int, *, address: bool = True) -> PoolHost:
    nic = Nic("ens160", f"10.0.0.{n}", "255.255.255.0", "10.0.0.1", ("10.0.0.2",)) if address else None
    return PoolHost(uid, f"name-{uid}", nic)


def _entity(**overrides: object) -> dict[str, Any]:
    args: dict[str, Any] = {
        "name": "project-a-clearml",
        "labels": managed_labels("project-a", "clearml"),
        "profile": PROFILE,
        "cluster_profiles": PROFILES,
        "vip": None,
        "arch": "amd64",
        "control_plane": [_host("cp-1", 11), _host("cp-2", 12), _host("cp-3", 13)],
        "workers": [_host("gpu-1", 21)],
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
        "overlayNetworkConfiguration": {"enable": False, "cidr": ""},
        "sshKeys": ["ssh-rsa AAAAB3Nza... test-user@test-machine"],
        "isTwoNodeCluster": False,
        "staticIp": True,
    }
    assert_valid("v1SpectroEdgeNativeClusterEntity", entity, "create entity")


def test_static_ip_is_sent_only_when_every_host_carries_its_address() -> None:
    with_addresses = _entity()
    for pool in with_addresses["spec"]["machinepoolconfig"]:
        for edge_host in pool["cloudConfig"]["edgeHosts"]:
            assert edge_host["nic"]["ip"].startswith("10.0.0.")
            assert edge_host["nic"]["nicName"] == "ens160"
    one_missing = _entity(workers=[_host("gpu-1", 21, address=False)])
    assert "staticIp" not in one_missing["spec"]["cloudConfig"]
    for pool in one_missing["spec"]["machinepoolconfig"]:
        assert all("nic" not in h for h in pool["cloudConfig"]["edgeHosts"])
    dhcp = _entity(profile=_profile())
    assert "staticIp" not in dhcp["spec"]["cloudConfig"]
    assert all(
        "nic" not in h for p in dhcp["spec"]["machinepoolconfig"] for h in p["cloudConfig"]["edgeHosts"]
    )
    assert_valid("v1SpectroEdgeNativeClusterEntity", one_missing, "create entity")


def test_edge_hosts_carry_uid_and_name() -> None:
    cp = _entity()["spec"]["machinepoolconfig"][0]
    assert [(h["hostUid"], h["hostName"]) for h in cp["cloudConfig"]["edgeHosts"]] == [
        ("cp-1", "name-cp-1"),
        ("cp-2", "name-cp-2"),
        ("cp-3", "name-cp-3"),
    ]


def test_pool_hosts_take_name_and_address_from_discovery_else_from_palette() -> None:
    known = machine("cp-1")
    hosts = pool_hosts(["cp-1", "gone"], {"cp-1": known}, {"gone": "old-name"})
    assert hosts == [PoolHost("cp-1", "cp-1", None), PoolHost("gone", "old-name", None)]
    assert pool_hosts(["x"], {}) == [PoolHost("x", None, None)]
    pool = machine_pool_entity("worker-pool", False, pool_hosts(["x"], {}), _profile(), "amd64")
    assert pool["cloudConfig"]["edgeHosts"] == [{"hostUid": "x"}]  # no name known: none invented


def test_a_two_node_cluster_marks_primary_and_secondary() -> None:
    profile = _profile(edge={"isTwoNode": True}, controlPlaneDefaults={"nodeCount": 2})
    entity = _entity(profile=profile, control_plane=[_host("cp-2", 2), _host("cp-1", 1)], workers=[])
    assert entity["spec"]["cloudConfig"]["isTwoNodeCluster"] is True
    hosts = entity["spec"]["machinepoolconfig"][0]["cloudConfig"]["edgeHosts"]
    assert [(h["hostUid"], h["twoNodeCandidatePriority"]) for h in hosts] == [
        ("cp-1", "primary"),
        ("cp-2", "secondary"),
    ]
    assert_valid("v1SpectroEdgeNativeClusterEntity", entity, "two-node create")
    normal = _entity()["spec"]["machinepoolconfig"][0]["cloudConfig"]["edgeHosts"]
    assert all("twoNodeCandidatePriority" not in h for h in normal)


def test_vip_is_the_resolved_one_then_the_overlay_and_is_left_out_without_one() -> None:
    # The platform-over-profile VIP rule is resolve.vip's; the entity takes its answer.
    config = _entity(vip="10.10.189.24")["spec"]["cloudConfig"]
    assert config["controlPlaneEndpoint"]["host"] == "10.10.189.24"
    assert "controlPlaneEndpoint" not in _entity(profile=_profile())["spec"]["cloudConfig"]
    overlay = _profile(edge={"networkOverlayConfig": {"enabled": True, "cidr": "100.64.192.0/24"}})
    config = _entity(profile=overlay)["spec"]["cloudConfig"]
    assert config["overlayNetworkConfiguration"] == {"enable": True, "cidr": "100.64.192.0/24"}
    assert config["controlPlaneEndpoint"] == {"host": "100.64.192.1", "type": "VIP"}


def test_pools_take_the_profile_defaults() -> None:
    cp, workers = _entity()["spec"]["machinepoolconfig"]
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
    assert workers["poolConfig"]["nodeRepaveInterval"] == 0
    assert workers["poolConfig"]["skipK8sUpgrade"] == "disabled"
    assert workers["poolConfig"]["taints"] == [
        {"key": "worker-taint", "value": "true", "effect": "NoSchedule"}
    ]
    assert workers["poolConfig"]["size"] == 1


def test_worker_node_eligible_makes_the_control_plane_schedulable() -> None:
    profile = _profile(controlPlaneDefaults={"nodeCount": 1, "workerNodeEligible": True})
    (cp,) = _entity(profile=profile, workers=[], control_plane=[_host("cp-1", 1)])["spec"][
        "machinepoolconfig"
    ]
    assert cp["poolConfig"]["useControlPlaneAsWorker"] is True


def test_no_workers_means_no_worker_pool() -> None:
    pools = _entity(workers=[])["spec"]["machinepoolconfig"]
    assert [p["poolConfig"]["name"] for p in pools] == ["control-plane-pool"]


def test_the_create_names_its_profiles_in_order_with_their_pack_values() -> None:
    assert _entity()["spec"]["profiles"] == [
        {"uid": "6651a2b3c4d5e6f708192a3b"},
        {"uid": "66a1b2c3d4e5f6a7b8c9d0e1", "packValues": [{"name": "clearml"}]},
    ]


def test_a_create_without_cluster_profiles_is_refused_before_palette() -> None:
    with pytest.raises(ValueError, match="no cluster profile"):
        _entity(cluster_profiles=())


def test_machine_pool_entity_for_updates() -> None:
    pool = machine_pool_entity(
        "worker-pool", False, [PoolHost("a", "host-a"), PoolHost("b")], _profile(), "arm64"
    )
    assert pool == {
        "cloudConfig": {"edgeHosts": [{"hostUid": "b"}, {"hostUid": "a", "hostName": "host-a"}]},
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
            "nodeRepaveInterval": 0,
            "skipK8sUpgrade": "disabled",
        },
    }
    assert_valid("v1EdgeNativeMachinePoolConfigEntity", pool, "pool")


def test_attach_and_detach_bodies_have_palettes_shapes() -> None:
    attach = attach_profiles_entity(PROFILES)
    assert attach == {"profiles": _entity()["spec"]["profiles"]}
    assert_valid("v1SpectroClusterProfiles", attach, "attach")
    detach = detach_profiles_entity(["b", "a", "b"])
    assert detach == {"profileUids": ["a", "b"]}
    assert_valid("v1SpectroClusterProfilesDeleteEntity", detach, "detach")


def test_discovery_reads_the_agents_default_interface_as_the_hosts_address() -> None:
    def item(uid: str, nics: Any) -> dict[str, Any]:
        entry = host(uid, nic=False)
        entry["spec"]["device"]["nics"] = nics
        return entry

    other = {"nicName": "ens192", "ip": "192.168.0.5"}
    default = {
        "nicName": "ens160",
        "ip": "10.0.0.7",
        "subnet": "255.255.255.0",
        "dns": ["10.0.0.2"],
        "isDefault": True,
    }
    on_address = {"nicName": "eth1"}  # host("edge-b") has hostAddress 10.0.0.6 (10.0.0.<len(uid)>)
    machines = discover(
        [
            item("edge-a", [other, default]),
            item("edge-b", [other, {**on_address, "ip": "10.0.0.6"}]),
            item("edge-c", [{"nicName": "eth0"}]),
            item("edge-d", "not a list"),
            host("edge-e", nic=False),
        ]
    ).by_uid()
    assert machines["edge-a"].nic == Nic("ens160", "10.0.0.7", "255.255.255.0", None, True, ("10.0.0.2",))
    assert machines["edge-b"].nic == Nic("eth1", "10.0.0.6")
    assert (
        machines["edge-c"].nic is None and machines["edge-d"].nic is None and machines["edge-e"].nic is None
    )
