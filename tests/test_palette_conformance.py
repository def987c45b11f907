"""Both sides of the wire against Palette's own swagger definitions (tests/data/palette/, see SOURCE.md).

Every request body the client sends and every response body the emulator returns, on every path the
reconciler uses, is validated against the definition the spec names for it. The definitions are made
strict first (``additionalProperties: false`` wherever the spec lists properties and says nothing else),
so a field the real API does not have - a typo or an invented one - fails the test too.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import httpx
import pytest

from reconciler.emulator import FaultRule
from reconciler.inventory import discover
from reconciler.model.base import ClusterProfileRef
from reconciler.model.observed import managed_labels
from reconciler.model.resources import ComputeProfile
from reconciler.palette import ClientError, PaletteClient, RateLimitedError, UnauthorizedError
from reconciler.palette.entities import (
    PoolHost,
    cluster_create_entity,
    cluster_profile_entities,
    machine_pool_entity,
    pool_hosts,
)
from tests._palette_support import (
    ADDON_UID,
    CATALOGUE,
    HTTP,
    INFRA_UID,
    KEY,
    PROFILE,
    SPEC,
    WORKLOAD,
    Recorder,
    admin,
    assert_valid,
    fast_retry,
    host,
    running,
    validator,
)

INFRA = ClusterProfileRef(uid=INFRA_UID)
PROFILES = (INFRA, *(WORKLOAD.spec.cluster_profiles if WORKLOAD.spec else []))


def _operation(method: str, path: str) -> tuple[str, dict[str, Any]]:
    for template, item in SPEC["paths"].items():
        pattern = "^" + re.sub(r"\{[^}]+\}", "[^/]+", template) + "$"
        if re.match(pattern, path) and method.lower() in item:
            return template, item[method.lower()]
    raise AssertionError(f"{method} {path} is not in the spec subset")


def _body_definition(operation: dict[str, Any]) -> str | None:
    for parameter in operation.get("parameters", []):
        if parameter.get("in") == "body":
            return str(parameter["schema"]["$ref"]).rsplit("/", 1)[-1]
    return None


def check_exchange(method: str, path: str, sent: Any, status: int, received: Any) -> str:
    """Validate one request/response pair; returns the path template it belongs to."""
    template, operation = _operation(method, path)
    body_definition = _body_definition(operation)
    if body_definition is not None:
        assert_valid(body_definition, sent, f"request {method} {template}")
    else:
        assert sent is None, f"{method} {template} takes no body"
    if status >= 400:
        assert_valid("V1Error", received, f"error {status} of {method} {template}")
        return template
    response = operation["responses"].get(str(status))
    assert response is not None, f"{method} {template} answered {status}, which the spec does not declare"
    schema = response.get("schema")
    if schema is None:
        assert received is None, f"{method} {template} {status} must have no body"
    else:
        assert_valid(schema["$ref"].rsplit("/", 1)[-1], received, f"response {status} of {method} {template}")
    return template


def _scenario() -> list[tuple[str, str, Any, int, Any]]:
    """Drive every path the reconciler uses, success and error answers, through a recording transport."""
    hosts = [host(f"edge-{i:03d}", gpus=8 if i % 2 else 0) for i in range(60)]
    hosts[5]["status"]["health"]["state"] = "unhealthy"
    machines = discover(hosts).by_uid()
    recorder = Recorder()
    with running(hosts, profiles=CATALOGUE, provision_seconds=0.0) as server:
        palette = PaletteClient(server.url, KEY, transport=recorder, retry=fast_retry(max_attempts=1))
        raw = httpx.Client(base_url=server.url, headers={"ApiKey": KEY}, transport=recorder)
        with palette, raw:
            palette.search_edge_hosts()  # two pages, empty filter
            palette.search_edge_hosts({"palette.ai": "true", "palette.ai/worker": "true"})
            entity = cluster_create_entity(
                name="project-a-clearml",
                labels=managed_labels("project-a", "clearml"),
                profile=PROFILE,
                cluster_profiles=PROFILES,
                vip="10.10.189.30",
                arch="amd64",
                control_plane=pool_hosts(["edge-000"], machines),
                workers=pool_hosts(["edge-001", "edge-003"], machines),
            )
            uid = palette.create_edge_native_cluster(entity)
            with pytest.raises(ClientError):  # host in use: 409
                palette.create_edge_native_cluster({**entity, "metadata": {"name": "other", "labels": {}}})
            free = {**entity, "metadata": {"name": "other", "labels": {}}}
            free["spec"] = {**entity["spec"], "machinepoolconfig": [_pool(["edge-010"], machines)]}
            with pytest.raises(ClientError):  # unknown profile uid: 400
                palette.create_edge_native_cluster(
                    _with_profiles(free, [{"uid": "66a1b2c3d4e5f6a7b8c9ffff"}])
                )
            with pytest.raises(ClientError):  # add-on profiles only: 400
                palette.create_edge_native_cluster(_with_profiles(free, [{"uid": ADDON_UID}]))
            cluster = palette.get_cluster(uid)
            assert cluster is not None
            config_uid = cluster["spec"]["cloudConfigRef"]["uid"]
            palette.search_clusters(managed_labels("project-a", "clearml"))
            palette.get_cloud_config(config_uid)
            pool = _pool(["edge-001", "edge-007"], machines, cp=False)
            palette.update_machine_pool(config_uid, "worker-pool", pool)
            extra = machine_pool_entity(
                "gpu-pool-2", False, pool_hosts(["edge-009"], machines), PROFILE, "amd64"
            )
            palette.create_machine_pool(config_uid, extra)
            palette.get_cloud_config(config_uid)
            machines_path = f"/v1/cloudconfigs/edge-native/{config_uid}/machinePools/worker-pool/machines"
            listed = raw.get(machines_path).json()
            raw.get(f"{machines_path}/{listed['items'][0]['metadata']['uid']}")
            raw.get(f"{machines_path}/000000000000000000000000")  # 404
            raw.get(f"/v1/dashboard/spectroclusters/{uid}/overview")
            palette.get_cluster_profiles(uid)
            palette.attach_profiles(uid, [{"uid": "66a1b2c3d4e5f6a7b8c9d0e2"}])
            with pytest.raises(ClientError):  # unknown profile: 400
                palette.attach_profiles(uid, [{"uid": "66a1b2c3d4e5f6a7b8c9ffff"}])
            palette.detach_profiles(uid, ["66a1b2c3d4e5f6a7b8c9d0e2"])
            assert palette.get_cluster_profile(INFRA_UID) is not None  # the catalogue's answer
            assert palette.get_cluster_profile("66a1b2c3d4e5f6a7b8c9ffff") is None  # 404
            with pytest.raises(ClientError):  # the cluster's only infrastructure profile: 400
                palette.detach_profiles(uid, [INFRA_UID])
            palette.get_cluster_profiles(uid)
            palette.delete_cluster(uid)
            palette.get_cluster(uid)
            palette.get_cluster("c10000000000000000000999")  # 404
            admin(server, "POST", "faults", {"path": "spectroclusters/search", "burst_429": 1})
            with pytest.raises(RateLimitedError):
                palette.search_clusters()
        with (
            PaletteClient(server.url, "not-the-key", transport=recorder, retry=fast_retry()) as stranger,
            pytest.raises(UnauthorizedError),
        ):
            stranger.search_edge_hosts()
        recorder.exchanges.append(_raw(server.url, "POST", "/v1/dashboard/edgehosts/search?limit=51", {}))
    return recorder.exchanges


def _pool(uids: list[str], machines: Any, *, cp: bool = True) -> dict[str, Any]:
    name = "control-plane-pool" if cp else "worker-pool"
    return machine_pool_entity(name, cp, pool_hosts(uids, machines), PROFILE, "amd64")


def _with_profiles(entity: dict[str, Any], profiles: list[dict[str, Any]]) -> dict[str, Any]:
    return {**entity, "spec": {**entity["spec"], "profiles": profiles}}


def _raw(url: str, method: str, path: str, body: Any) -> tuple[str, str, Any, int, Any]:
    response = HTTP.request(method, url + path, json=body, headers={"ApiKey": KEY})
    return (
        method,
        path.split("?")[0],
        body,
        response.status_code,
        response.json() if response.content else None,
    )


@pytest.fixture(scope="module")
def exchanges() -> list[tuple[str, str, Any, int, Any]]:
    return _scenario()


def test_every_request_and_response_matches_the_swagger_definitions(
    exchanges: list[tuple[str, str, Any, int, Any]],
) -> None:
    for method, path, sent, status, received in exchanges:
        check_exchange(method, path, sent, status, received)


def test_the_scenario_covers_every_path_and_the_error_answers(
    exchanges: list[tuple[str, str, Any, int, Any]],
) -> None:
    seen = {(m, _operation(m, p)[0], s) for m, p, _, s, _ in exchanges}
    expected = {
        ("POST", "/v1/dashboard/edgehosts/search", 200),
        ("POST", "/v1/dashboard/edgehosts/search", 400),
        ("POST", "/v1/dashboard/edgehosts/search", 401),
        ("POST", "/v1/dashboard/spectroclusters/search", 200),
        ("POST", "/v1/dashboard/spectroclusters/search", 429),
        ("POST", "/v1/spectroclusters/edge-native", 201),
        ("POST", "/v1/spectroclusters/edge-native", 400),
        ("POST", "/v1/spectroclusters/edge-native", 409),
        ("GET", "/v1/spectroclusters/{uid}", 200),
        ("GET", "/v1/spectroclusters/{uid}", 404),
        ("DELETE", "/v1/spectroclusters/{uid}", 204),
        ("GET", "/v1/cloudconfigs/edge-native/{configUid}", 200),
        ("PUT", "/v1/cloudconfigs/edge-native/{configUid}/machinePools/{machinePoolName}", 204),
        ("POST", "/v1/cloudconfigs/edge-native/{configUid}/machinePools", 201),
        ("GET", "/v1/cloudconfigs/edge-native/{configUid}/machinePools/{machinePoolName}/machines", 200),
        (
            "GET",
            "/v1/cloudconfigs/edge-native/{configUid}/machinePools/{machinePoolName}/machines/{machineUid}",
            200,
        ),
        (
            "GET",
            "/v1/cloudconfigs/edge-native/{configUid}/machinePools/{machinePoolName}/machines/{machineUid}",
            404,
        ),
        ("GET", "/v1/dashboard/spectroclusters/{uid}/overview", 200),
        ("GET", "/v1/spectroclusters/{uid}/profiles", 200),
        ("PATCH", "/v1/spectroclusters/{uid}/profiles", 204),
        ("PATCH", "/v1/spectroclusters/{uid}/profiles", 400),
        ("DELETE", "/v1/spectroclusters/{uid}/profiles", 204),
        ("DELETE", "/v1/spectroclusters/{uid}/profiles", 400),
        ("GET", "/v1/clusterprofiles/{uid}", 200),
        ("GET", "/v1/clusterprofiles/{uid}", 404),
    }
    assert expected <= seen


def test_snapshot_documents_of_the_emulator_match_the_definitions() -> None:
    with running(profiles=CATALOGUE) as server, PaletteClient(server.url, KEY) as palette:
        palette.create_edge_native_cluster(
            cluster_create_entity(
                name="c",
                labels={},
                profile=PROFILE,
                cluster_profiles=PROFILES,
                vip=None,
                arch="amd64",
                control_plane=[PoolHost("edge-cp-1", "edge-cp-1")],
                workers=[PoolHost("edge-h100-1", "edge-h100-1")],
            )
        )
        state = admin(server, "GET", "state")
    assert [t["uid"] for t in state["clusters"][0]["spec"]["clusterProfileTemplates"]] == [
        INFRA_UID,
        ADDON_UID,
    ]
    for item in state["edgeHosts"]:
        assert_valid("v1EdgeHostsMetadata", item, "snapshot edge host")
    for cluster in state["clusters"]:
        assert_valid("v1SpectroCluster", cluster, "snapshot cluster")


def test_the_notes_example_create_body_is_accepted_by_the_checker_and_the_emulator() -> None:
    """The checker itself: Palette's documented example passes; drifted copies of it fail."""
    example = {
        "metadata": {
            "name": "edge-gpu-01",
            "labels": {"owner": "ml-team"},
            "annotations": {"description": "x"},
        },
        "spec": {
            "cloudConfig": {
                "controlPlaneEndpoint": {"host": "10.10.1.50", "type": "VIP"},
                "ntpServers": ["time.google.com"],
                "overlayNetworkConfiguration": {"cidr": "", "enable": False},
                "sshKeys": ["ssh-ed25519 AAAA... user@host"],
                "isTwoNodeCluster": False,
            },
            "machinepoolconfig": [
                {
                    "cloudConfig": {"edgeHosts": [{"hostUid": "edge-cp-1", "hostName": "cp-1"}]},
                    "poolConfig": {
                        "name": "cp-pool",
                        "isControlPlane": True,
                        "useControlPlaneAsWorker": True,
                        "labels": ["control-plane"],
                        "size": 1,
                        "taints": [],
                        "additionalLabels": {},
                        "updateStrategy": {"type": "RollingUpdateScaleOut"},
                        "machinePoolProperties": {"archType": "amd64"},
                    },
                }
            ],
            "profiles": [{"uid": "66a1b2c3d4e5f6a7b8c9d0e1", "packValues": [], "variables": []}],
        },
    }
    assert_valid("v1SpectroEdgeNativeClusterEntity", example, "example")
    typo = copy.deepcopy(example)
    typo["spec"]["cloudConfig"]["ntpServer"] = ["time.google.com"]
    assert not validator("v1SpectroEdgeNativeClusterEntity").is_valid(typo)
    wrong_type = copy.deepcopy(example)
    wrong_type["spec"]["machinepoolconfig"][0]["poolConfig"]["size"] = "1"
    assert not validator("v1SpectroEdgeNativeClusterEntity").is_valid(wrong_type)
    missing = copy.deepcopy(example)
    del missing["spec"]["machinepoolconfig"][0]["poolConfig"]["labels"]
    assert not validator("v1SpectroEdgeNativeClusterEntity").is_valid(missing)
    with running() as server, PaletteClient(server.url, KEY) as palette:
        assert palette.get_cluster(palette.create_edge_native_cluster(example)) is not None
        camel = copy.deepcopy(example)
        camel["metadata"]["name"] = "camel"
        camel["spec"]["machinePoolConfig"] = camel["spec"].pop("machinepoolconfig")
        camel["spec"]["machinePoolConfig"][0]["cloudConfig"]["edgeHosts"] = [{"hostUid": "edge-cp-2"}]
        assert palette.get_cluster(palette.create_edge_native_cluster(camel)) is not None


def test_a_missing_required_field_in_a_response_is_drift() -> None:
    assert not validator("v1EdgeHostsSearchSummary").is_valid({"listmeta": {"continue": ""}})
    assert not validator("v1EdgeNativeCloudConfig").is_valid(
        {"spec": {"clusterConfig": {}, "machinePoolConfig": [{"name": "p", "hosts": [{"hostUid": "h"}]}]}}
    )


def test_fault_answers_use_the_error_shape() -> None:
    with running(faults=[FaultRule(error_next=1, error_status=502)]) as server:
        method, path, _sent, status, received = _raw(server.url, "POST", "/v1/dashboard/edgehosts/search", {})
    assert status == 502
    check_exchange(method, path, {}, status, received)


# --- the fields Palette's own client sends -----------------------------------------------------------
# Read in spectrocloud/terraform-provider-spectrocloud@0b65bb131f64d883c5e29ac275c01bacf84b9df8
# (docs/palette-requests.md). Paths are dotted; ``[]`` is every item of a list; ``[cp]``/``[worker]``
# are the control-plane/worker machine pools. Each entry: the fields the provider sets, and where.

PROVIDER_CREATE = {
    # resource_cluster_edge_native.go toEdgeNativeCluster; cluster_common_metadata.go getClusterMetadata
    "metadata.name",
    "metadata.labels",
    # toEdgeNativeCluster: CloudConfig; toOverlayNetworkConfigAndVip
    "spec.cloudConfig.ntpServers",
    "spec.cloudConfig.sshKeys",
    "spec.cloudConfig.isTwoNodeCluster",
    "spec.cloudConfig.overlayNetworkConfiguration.cidr",
    "spec.cloudConfig.overlayNetworkConfiguration.enable",
    "spec.cloudConfig.controlPlaneEndpoint.host",
    "spec.cloudConfig.controlPlaneEndpoint.type",
    # cluster_common_profiles.go toProfilesCommon: one entity per profile
    "spec.profiles[].uid",
    "spec.profiles[].packValues[].name",
    # toMachinePoolEdgeNative (every pool) and toEdgeHosts
    "spec.machinepoolconfig[].cloudConfig.edgeHosts[].hostUid",
    "spec.machinepoolconfig[].cloudConfig.edgeHosts[].hostName",
    "spec.machinepoolconfig[].poolConfig.name",
    "spec.machinepoolconfig[].poolConfig.size",
    "spec.machinepoolconfig[].poolConfig.labels",
    "spec.machinepoolconfig[].poolConfig.isControlPlane",
    "spec.machinepoolconfig[].poolConfig.additionalLabels",
    "spec.machinepoolconfig[].poolConfig.additionalAnnotations",
    "spec.machinepoolconfig[].poolConfig.taints",
    "spec.machinepoolconfig[].poolConfig.updateStrategy.type",
    "spec.machinepoolconfig[].poolConfig.machinePoolProperties.archType",
    # toMachinePoolEdgeNative: control plane only / worker pools only
    "spec.machinepoolconfig[cp].poolConfig.useControlPlaneAsWorker",
    "spec.machinepoolconfig[worker].poolConfig.nodeRepaveInterval",
    "spec.machinepoolconfig[worker].poolConfig.skipK8sUpgrade",
}
# toEdgeHosts: a host's address goes in ``nic`` (``staticIP`` is deprecated there: "Hubble deprecated it")
PROVIDER_STATIC_HOST = {"hostUid", "hostName", "nic.ip", "nic.nicName", "nic.subnet", "nic.gateway"}
# toEdgeHosts: ``two_node_role`` -> twoNodeCandidatePriority, one primary and one secondary
PROVIDER_TWO_NODE_HOST = {"hostUid", "hostName", "twoNodeCandidatePriority"}
# toMachinePoolEdgeNative, sent by CreateMachinePoolEdgeNative and UpdateMachinePoolEdgeNative
PROVIDER_POOL = {
    p.removeprefix("spec.machinepoolconfig[].").removeprefix("spec.machinepoolconfig[worker].")
    for p in PROVIDER_CREATE
    if p.startswith(("spec.machinepoolconfig[].", "spec.machinepoolconfig[worker]."))
}
# cluster_common_profiles.go updateProfiles / resource_cluster_attachment.go toAddonDeployment:
# V1SpectroClusterProfiles{Profiles} by PATCH; cluster_common_attachment.go resourceAddonDeploymentDelete
# and updateProfiles: V1SpectroClusterProfilesDeleteEntity{ProfileUids} by DELETE
PROVIDER_PROFILES_PATCH = {"profiles[].uid"}
PROVIDER_PROFILES_DELETE = {"profileUids"}


def _paths(document: Any, prefix: str = "") -> set[str]:
    """Every field path of a JSON document, lists written ``[]`` (a leaf list or map counts itself)."""
    out: set[str] = set()
    if isinstance(document, dict):
        for key, value in document.items():
            path = f"{prefix}.{key}" if prefix else key
            out.add(path)
            out |= _paths(value, path)
    elif isinstance(document, list):
        for item in document:
            out |= _paths(item, prefix + "[]")
    return out


def _pool_paths(entity: dict[str, Any]) -> set[str]:
    """:func:`_paths` of a create, with each pool also listed as ``[cp]`` or ``[worker]``."""
    out = _paths(entity)
    for pool in entity["spec"]["machinepoolconfig"]:
        tag = "cp" if pool["poolConfig"]["isControlPlane"] else "worker"
        out |= {f"spec.machinepoolconfig[{tag}].{p}" for p in _paths(pool)}
    return out


def _sent(exchanges: list[tuple[str, str, Any, int, Any]], method: str, template: str) -> list[Any]:
    return [sent for m, p, sent, status, _ in exchanges if m == method and _operation(m, p)[0] == template]


def test_the_create_carries_every_field_the_terraform_provider_sends(
    exchanges: list[tuple[str, str, Any, int, Any]],
) -> None:
    creates = _sent(exchanges, "POST", "/v1/spectroclusters/edge-native")
    first = creates[0]
    missing = PROVIDER_CREATE - _pool_paths(first)
    assert not missing, f"the create lacks fields the provider sends: {sorted(missing)}"
    assert first["spec"]["profiles"], "a create always names its cluster profiles"
    assert (
        first["spec"]["cloudConfig"]["staticIp"] is True
    )  # PROFILE asks for it and every host has an address
    for pool in first["spec"]["machinepoolconfig"]:
        for edge_host in pool["cloudConfig"]["edgeHosts"]:
            assert _paths(edge_host) >= PROVIDER_STATIC_HOST


def test_machine_pool_bodies_carry_every_field_the_terraform_provider_sends(
    exchanges: list[tuple[str, str, Any, int, Any]],
) -> None:
    bodies = _sent(
        exchanges, "PUT", "/v1/cloudconfigs/edge-native/{configUid}/machinePools/{machinePoolName}"
    )
    bodies += _sent(exchanges, "POST", "/v1/cloudconfigs/edge-native/{configUid}/machinePools")
    assert len(bodies) == 2
    for body in bodies:
        missing = PROVIDER_POOL - _paths(body)
        assert not missing, f"the machine pool lacks fields the provider sends: {sorted(missing)}"


def test_profile_attach_and_detach_bodies_carry_the_provider_fields(
    exchanges: list[tuple[str, str, Any, int, Any]],
) -> None:
    patches = _sent(exchanges, "PATCH", "/v1/spectroclusters/{uid}/profiles")
    deletes = _sent(exchanges, "DELETE", "/v1/spectroclusters/{uid}/profiles")
    assert patches and deletes
    assert all(_paths(b) >= PROVIDER_PROFILES_PATCH for b in patches)
    assert all(_paths(b) >= PROVIDER_PROFILES_DELETE and b["profileUids"] for b in deletes)


def test_a_two_node_create_marks_both_hosts_and_palette_takes_it() -> None:
    two_node = ComputeProfile.model_validate(
        {
            **PROFILE.model_dump(by_alias=True),
            "spec": {
                **PROFILE.spec.model_dump(by_alias=True, exclude_none=True),
                "edge": {"isTwoNode": True, "networkOverlayConfig": {"staticIp": True}},
                "controlPlaneDefaults": {"nodeCount": 2},
            },
        }
    )
    hosts = [host("edge-cp-a"), host("edge-cp-b"), host("edge-gpu", gpus=8, nic=False)]
    machines = discover(hosts).by_uid()
    entity = cluster_create_entity(
        name="two",
        labels={},
        profile=two_node,
        cluster_profiles=PROFILES,
        vip="10.0.0.99",
        arch="amd64",
        control_plane=pool_hosts(["edge-cp-b", "edge-cp-a"], machines),
        workers=pool_hosts(["edge-gpu"], machines),
    )
    assert_valid("v1SpectroEdgeNativeClusterEntity", entity, "two-node create")
    assert "staticIp" not in entity["spec"]["cloudConfig"]  # the GPU host reports no address
    cp_hosts = entity["spec"]["machinepoolconfig"][0]["cloudConfig"]["edgeHosts"]
    assert all(_paths(h) >= PROVIDER_TWO_NODE_HOST for h in cp_hosts)
    assert sorted(h["twoNodeCandidatePriority"] for h in cp_hosts) == ["primary", "secondary"]
    with running(hosts, profiles=CATALOGUE) as server, PaletteClient(server.url, KEY) as palette:
        uid = palette.create_edge_native_cluster(entity)
        config = palette.get_cloud_config(palette.get_cluster(uid)["spec"]["cloudConfigRef"]["uid"])  # type: ignore[index]
    kept = config["spec"]["machinePoolConfig"][0]["hosts"]
    assert {(h["hostUid"], h["twoNodeCandidatePriority"]) for h in kept} == {
        (h["hostUid"], h["twoNodeCandidatePriority"]) for h in cp_hosts
    }


def test_profile_entities_leave_out_pack_values_that_are_not_given() -> None:
    assert cluster_profile_entities([INFRA]) == [{"uid": INFRA_UID}]
