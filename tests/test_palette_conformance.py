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

import pytest

from reconciler.emulator import FaultRule
from reconciler.model.observed import managed_labels
from reconciler.palette import ClientError, PaletteClient, RateLimitedError, UnauthorizedError
from reconciler.palette.entities import cluster_create_entity, machine_pool_entity
from tests._palette_support import (
    HTTP,
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
    recorder = Recorder()
    with running(hosts) as server:
        palette = PaletteClient(server.url, KEY, transport=recorder, retry=fast_retry(max_attempts=1))
        with palette:
            palette.search_edge_hosts()  # two pages, empty filter
            palette.search_edge_hosts({"palette.ai": "true", "palette.ai/worker": "true"})
            entity = cluster_create_entity(
                name="project-a-clearml",
                labels=managed_labels("project-a", "clearml"),
                profile=PROFILE,
                workload=WORKLOAD,
                vip="10.10.189.30",
                arch="amd64",
                control_plane=["edge-000"],
                workers=["edge-001", "edge-003"],
            )
            uid = palette.create_edge_native_cluster(entity)
            with pytest.raises(ClientError):  # host in use: 409
                palette.create_edge_native_cluster({**entity, "metadata": {"name": "other", "labels": {}}})
            cluster = palette.get_cluster(uid)
            assert cluster is not None
            config_uid = cluster["spec"]["cloudConfigRef"]["uid"]
            palette.search_clusters(managed_labels("project-a", "clearml"))
            palette.get_cloud_config(config_uid)
            pool = machine_pool_entity("worker-pool", False, ["edge-001", "edge-007"], PROFILE, "amd64")
            palette.update_machine_pool(config_uid, "worker-pool", pool)
            extra = machine_pool_entity("gpu-pool-2", False, ["edge-009"], PROFILE, "amd64")
            palette.create_machine_pool(config_uid, extra)
            palette.get_cloud_config(config_uid)
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
        ("POST", "/v1/spectroclusters/edge-native", 409),
        ("GET", "/v1/spectroclusters/{uid}", 200),
        ("GET", "/v1/spectroclusters/{uid}", 404),
        ("DELETE", "/v1/spectroclusters/{uid}", 204),
        ("GET", "/v1/cloudconfigs/edge-native/{configUid}", 200),
        ("PUT", "/v1/cloudconfigs/edge-native/{configUid}/machinePools/{machinePoolName}", 204),
        ("POST", "/v1/cloudconfigs/edge-native/{configUid}/machinePools", 201),
    }
    assert expected <= seen


def test_snapshot_documents_of_the_emulator_match_the_definitions() -> None:
    with running() as server, PaletteClient(server.url, KEY) as palette:
        palette.create_edge_native_cluster(
            cluster_create_entity(
                name="c",
                labels={},
                profile=PROFILE,
                workload=None,
                vip=None,
                arch="amd64",
                control_plane=["edge-cp-1"],
                workers=["edge-h100-1"],
            )
        )
        state = admin(server, "GET", "state")
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
