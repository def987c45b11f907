"""The emulator's HTTP behaviour: filters, paging, cluster rules and lifecycle, scope, auth, faults, admin."""

from __future__ import annotations

import socket
from typing import Any

import httpx
import pytest

from reconciler.emulator import FaultRule, Faults
from tests._palette_support import HTTP, KEY, PROJECT_A, PROJECT_B, FakeClock, admin, host, running

SEARCH = "/v1/dashboard/edgehosts/search"


def _post(
    server: Any, path: str, body: Any, headers: dict[str, str] | None = None, **params: Any
) -> httpx.Response:
    return HTTP.post(server.url + path, json=body, headers={"ApiKey": KEY, **(headers or {})}, params=params)


def _filter(prop: str, values: list[str], **condition: Any) -> dict[str, Any]:
    string = {"operator": "eq", "match": {"conjunction": "or", "values": values}, **condition}
    return {"property": prop, "type": "string", "condition": {"string": string}}


def _search(server: Any, *filters: dict[str, Any], group_conjunction: str = "and") -> list[str]:
    body = {
        "filter": {
            "conjunction": "and",
            "filterGroups": [{"conjunction": group_conjunction, "filters": list(filters)}],
        }
    }
    response = _post(server, SEARCH, body)
    assert response.status_code == 200, response.text
    return sorted(item["metadata"]["uid"] for item in response.json()["items"])


def _create(server: Any, name: str, cp: list[str], workers: list[str] = (), **headers: str) -> httpx.Response:  # type: ignore[assignment]
    pools = [
        {
            "cloudConfig": {"edgeHosts": [{"hostUid": u} for u in cp]},
            "poolConfig": {
                "name": "cp",
                "isControlPlane": True,
                "labels": ["control-plane"],
                "size": len(cp),
            },
        }
    ]
    if workers:
        pools.append(
            {
                "cloudConfig": {"edgeHosts": [{"hostUid": u} for u in workers]},
                "poolConfig": {"name": "w", "labels": ["worker"], "size": len(workers)},
            }
        )
    body = {
        "metadata": {"name": name, "labels": {}},
        "spec": {"machinepoolconfig": pools, "profiles": [{"uid": "6651a2b3c4d5e6f708192a3b"}]},
    }
    return _post(server, "/v1/spectroclusters/edge-native", body, headers)


def _hosts(server: Any) -> dict[str, dict[str, Any]]:
    return {h["metadata"]["uid"]: h for h in admin(server, "GET", "state")["edgeHosts"]}


# --- search ----------------------------------------------------------------------------------------


def test_tag_filter_matches_key_value_and_bare_tags() -> None:
    with running() as server:
        assert _search(server, _filter("tags", ["palette.ai/worker:true"])) == ["edge-worker-1"]
        assert _search(server, _filter("tags", ["site"])) == ["edge-arm-1"]
        assert _search(server, _filter("tags", ["site:spectro__tag"])) == ["edge-arm-1"]
        either = _filter("tags", ["palette.ai/worker:true", "site"])
        assert _search(server, either) == ["edge-arm-1", "edge-worker-1"]


def test_state_health_name_and_architecture_filters() -> None:
    with running() as server:
        assert _search(server, _filter("healthState", ["unhealthy"])) == ["edge-sick-1"]
        assert _search(server, _filter("state", ["unpaired"])) == ["edge-new-1"]
        assert _search(server, _filter("architecture", ["arm64"])) == ["edge-arm-1"]
        assert _search(server, _filter("name", ["h100"], operator="contains")) == [
            "edge-h100-1",
            "edge-h100-2",
        ]
        assert _search(server, _filter("name", ["EDGE-CP"], operator="beginsWith", ignoreCase=True)) == [
            "edge-cp-1",
            "edge-cp-2",
            "edge-cp-3",
        ]
        assert _search(server, _filter("name", ["EDGE-CP"], operator="beginsWith")) == []


def test_negation_and_conjunctions() -> None:
    with running() as server:
        healthy_ready = [_filter("state", ["ready"]), _filter("healthState", ["healthy"])]
        not_cp = _filter("name", ["edge-cp"], operator="beginsWith", negation=True)
        assert _search(server, *healthy_ready, not_cp) == [
            "edge-arm-1",
            "edge-h100-1",
            "edge-h100-2",
            "edge-worker-1",
        ]
        assert _search(
            server,
            _filter("state", ["unpaired"]),
            _filter("healthState", ["unhealthy"]),
            group_conjunction="or",
        ) == ["edge-new-1", "edge-sick-1"]
        both_tags = _filter("tags", ["palette.ai:true", "site"])
        both_tags["condition"]["string"]["match"]["conjunction"] = "and"
        assert _search(server, both_tags) == ["edge-arm-1"]


def test_unknown_filter_property_is_a_bad_request() -> None:
    with running() as server:
        response = _post(
            server, SEARCH, {"filter": {"filterGroups": [{"filters": [_filter("colour", ["red"])]}]}}
        )
        assert response.status_code == 400
        assert response.json()["code"] == "InvalidFilter"


def test_paging_has_listmeta_and_continue_tokens() -> None:
    hosts = [host(f"edge-{i:03d}") for i in range(120)]
    with running(hosts) as server:
        first = _post(server, SEARCH, {}, limit=50).json()
        assert first["listmeta"]["count"] == 120 and first["listmeta"]["limit"] == 50
        assert first["listmeta"]["offset"] == 50 and first["listmeta"]["continue"]
        second = _post(server, SEARCH, {}, limit=50, **{"continue": first["listmeta"]["continue"]}).json()
        third = _post(server, SEARCH, {}, limit=50, **{"continue": second["listmeta"]["continue"]}).json()
        assert len(third["items"]) == 20 and third["listmeta"]["continue"] == ""
        names = [i["metadata"]["name"] for page in (first, second, third) for i in page["items"]]
        assert names == sorted(names) and len(set(names)) == 120


@pytest.mark.parametrize("params", [{"limit": 51}, {"limit": "x"}, {"continue": "not-a-token"}])
def test_bad_paging_parameters_are_rejected(params: dict[str, Any]) -> None:
    with running() as server:
        response = _post(server, SEARCH, {}, **params)
        assert response.status_code == 400
        assert set(response.json()) == {"code", "message", "details", "ref"}


# --- clusters --------------------------------------------------------------------------------------


def test_create_answers_201_with_uid_and_audit_header_and_hosts_go_in_use() -> None:
    with running() as server:
        response = _create(server, "c1", ["edge-cp-1"], ["edge-h100-1"])
        assert response.status_code == 201
        uid = response.json()["uid"]
        assert response.headers["AuditUid"]
        hosts = _hosts(server)
        for h in ("edge-cp-1", "edge-h100-1"):
            assert hosts[h]["status"]["state"] == "in-use"
            assert hosts[h]["status"]["inUseClustersRef"] == [{"name": "c1", "uid": uid}]


@pytest.mark.parametrize(
    ("hosts", "status", "code"),
    [
        (["edge-sick-1"], 400, "EdgeHostUnhealthy"),
        (["edge-new-1"], 400, "EdgeHostNotReady"),
        (["edge-nowhere"], 400, "EdgeHostNotFound"),
        (["edge-cp-1", "edge-cp-1"], 400, "InvalidRequest"),
    ],
)
def test_create_refuses_unusable_hosts(hosts: list[str], status: int, code: str) -> None:
    with running() as server:
        response = _create(server, "c1", hosts)
        assert (response.status_code, response.json()["code"]) == (status, code)
        assert admin(server, "GET", "state")["clusters"] == []


def test_create_refuses_a_host_already_in_use_and_a_duplicate_name() -> None:
    with running() as server:
        assert _create(server, "c1", ["edge-cp-1"]).status_code == 201
        taken = _create(server, "c2", ["edge-cp-2"], ["edge-cp-1"])
        assert (taken.status_code, taken.json()["code"]) == (409, "EdgeHostInUse")
        assert _hosts(server)["edge-cp-2"]["status"]["state"] == "ready"  # nothing half-done
        again = _create(server, "c1", ["edge-cp-3"])
        assert (again.status_code, again.json()["code"]) == (409, "ClusterNameExists")


def test_create_needs_a_control_plane_pool() -> None:
    with running() as server:
        body = {
            "metadata": {"name": "x"},
            "spec": {
                "machinepoolconfig": [
                    {
                        "cloudConfig": {"edgeHosts": [{"hostUid": "edge-cp-1"}]},
                        "poolConfig": {"name": "w", "size": 1},
                    }
                ]
            },
        }
        response = _post(server, "/v1/spectroclusters/edge-native", body)
        assert response.status_code == 400


def test_lifecycle_follows_the_clock_and_hosts_return_to_ready() -> None:
    clock = FakeClock()
    with running(clock=clock, provision_seconds=6, delete_seconds=4) as server:
        uid = _create(server, "c1", ["edge-cp-1"]).json()["uid"]
        get = lambda: HTTP.get(f"{server.url}/v1/spectroclusters/{uid}", headers={"ApiKey": KEY})  # noqa: E731
        states = []
        for step in (0, 1.9, 0.2, 3.8, 0.2):
            clock.advance(step)
            states.append(get().json()["status"]["state"])
        assert states == ["Pending", "Pending", "Provisioning", "Provisioning", "Running"]
        assert (
            HTTP.delete(f"{server.url}/v1/spectroclusters/{uid}", headers={"ApiKey": KEY}).status_code == 204
        )
        assert get().json()["status"]["state"] == "Deleting"
        assert _hosts(server)["edge-cp-1"]["status"]["state"] == "in-use"
        clock.advance(4)
        assert get().status_code == 404
        assert _hosts(server)["edge-cp-1"]["status"] == {
            "state": "ready",
            "health": {"state": "healthy", "message": ""},
            "inUseClustersRef": [],
        }
        assert (
            HTTP.delete(f"{server.url}/v1/spectroclusters/{uid}", headers={"ApiKey": KEY}).status_code == 404
        )


def test_seeded_clusters_keep_their_hosts() -> None:
    hosts = [host("edge-cp-1"), host("edge-h100-1", gpus=8), host("edge-free")]
    for h in hosts[:2]:
        h["status"].update(state="in-use", inUseClustersRef=[{"name": "old", "uid": "c1"}])
    cluster = {
        "metadata": {"uid": "c1", "name": "old", "labels": {"palette.ai/managed-by": "reconciler"}},
        "spec": {"cloudConfigRef": {"uid": "cc1"}},
        "status": {"state": "Running"},
    }
    with running(hosts, clusters=[cluster]) as server:
        config = HTTP.get(f"{server.url}/v1/cloudconfigs/edge-native/cc1", headers={"ApiKey": KEY}).json()
        pools = {p["name"]: [h["hostUid"] for h in p["hosts"]] for p in config["spec"]["machinePoolConfig"]}
        assert pools == {"control-plane-pool": ["edge-cp-1"], "worker-pool": ["edge-h100-1"]}
        state = admin(server, "GET", "state")
        assert [(c["metadata"]["uid"], c["status"]["state"]) for c in state["clusters"]] == [
            ("c1", "Running")
        ]
        assert _create(server, "new", ["edge-h100-1"]).status_code == 409


# --- scope and auth --------------------------------------------------------------------------------


def test_project_header_scopes_hosts_and_clusters() -> None:
    hosts = [host("edge-a", project=PROJECT_A), host("edge-b", project=PROJECT_B), host("edge-any")]
    with running(hosts) as server:
        in_a = _post(server, SEARCH, {}, {"ProjectUid": PROJECT_A}).json()["items"]
        assert sorted(h["metadata"]["uid"] for h in in_a) == ["edge-a", "edge-any"]
        assert len(_post(server, SEARCH, {}).json()["items"]) == 3
        uid = _create(server, "c", ["edge-a"], ProjectUid=PROJECT_A).json()["uid"]
        seen_from_b = HTTP.get(
            f"{server.url}/v1/spectroclusters/{uid}", headers={"ApiKey": KEY, "ProjectUid": PROJECT_B}
        )
        assert seen_from_b.status_code == 404


@pytest.mark.parametrize(
    "headers",
    [{}, {"ApiKey": "wrong"}, {"ApiKey": ""}, {"X-Api-Key": KEY}],
)
def test_requests_without_the_key_get_401(headers: dict[str, str]) -> None:
    with running() as server:
        response = HTTP.post(server.url + SEARCH, json={}, headers=headers)
        assert response.status_code == 401
        assert response.json()["code"] == "Unauthorized"
        assert KEY not in response.text


@pytest.mark.parametrize("name", ["apikey", "APIKEY", "Authorization"])
def test_key_header_name_is_case_insensitive(name: str) -> None:
    with running() as server:
        assert HTTP.post(server.url + SEARCH, json={}, headers={name: KEY}).status_code == 200


# --- faults and admin ------------------------------------------------------------------------------


def test_seeded_error_rate_is_repeatable() -> None:
    def pattern(seed: int) -> list[bool]:
        faults = Faults([FaultRule(error_rate=0.5)], seed=seed)
        return [faults.decide("POST", SEARCH).status == 500 for _ in range(40)]

    assert pattern(3) == pattern(3)
    assert pattern(3) != pattern(4)
    assert 5 < sum(pattern(3)) < 35


def test_rules_apply_only_to_their_paths_and_methods() -> None:
    faults = Faults([FaultRule(path="^/v1/spectroclusters/", methods=("DELETE",), error_next=5)])
    assert faults.decide("GET", "/v1/spectroclusters/x").status == 0
    assert faults.decide("DELETE", "/v1/dashboard/spectroclusters/search").status == 0
    assert faults.decide("DELETE", "/v1/spectroclusters/x").status == 500


def test_latency_and_dropped_connections() -> None:
    with running(faults=[FaultRule(path="edgehosts", latency=0.2, drop_next=1)]) as server:
        with pytest.raises(httpx.RemoteProtocolError):
            _post(server, SEARCH, {})
        response = _post(server, SEARCH, {})
        assert response.status_code == 200 and response.elapsed.total_seconds() >= 0.2


def test_429_burst_carries_retry_after_and_palette_code() -> None:
    with running(faults=[FaultRule(burst_429=1, retry_after=2)]) as server:
        response = _post(server, SEARCH, {})
        assert response.status_code == 429
        assert response.headers["Retry-After"] == "2"
        assert response.json()["code"] == "TooManyRequests"
        assert _post(server, SEARCH, {}).status_code == 200


def test_admin_patch_host_changes_health_state_and_tags() -> None:
    with running() as server:
        admin(
            server,
            "PATCH",
            "hosts/edge-cp-1",
            {"healthState": "unhealthy", "tags": {"zone": "b", "palette.ai": None}},
        )
        changed = _hosts(server)["edge-cp-1"]
        assert changed["status"]["health"]["state"] == "unhealthy"
        assert changed["metadata"]["labels"] == {"zone": "b"}
        assert _create(server, "c", ["edge-cp-1"]).json()["code"] == "EdgeHostUnhealthy"
        bad = HTTP.patch(server.url + "/__emulator/hosts/edge-cp-1", json={"colour": "red"})
        assert bad.status_code == 400
        assert HTTP.patch(server.url + "/__emulator/hosts/nope", json={}).status_code == 404


def test_admin_faults_and_stats_endpoints() -> None:
    with running() as server:
        rules = admin(server, "POST", "faults", {"rules": [{"path": "search", "error_next": 1}], "seed": 9})
        assert rules["rules"][0]["path"] == "search"
        assert _post(server, SEARCH, {}).status_code == 500
        assert _post(server, SEARCH, {}).status_code == 200
        _create(server, "c", ["edge-cp-1"])
        stats = admin(server, "GET", "stats")
        assert stats["total"] == 3 and stats["writes"] == 1
        assert {"method": "POST", "path": SEARCH, "status": 500, "count": 1} in stats["requests"]
        admin(server, "POST", "reset-stats")
        assert admin(server, "GET", "stats")["total"] == 0
        admin(server, "DELETE", "faults")
        assert admin(server, "GET", "faults") == {"rules": []}
        assert HTTP.post(server.url + "/__emulator/faults", json={"bogus": 1}).status_code == 400


def test_unknown_paths_answer_in_the_error_shape() -> None:
    with running() as server:
        response = HTTP.get(server.url + "/v1/nothing-here", headers={"ApiKey": KEY})
        assert response.status_code == 404


def test_server_binds_a_free_port_and_stops() -> None:
    with running() as server:
        url = server.url
        port = int(url.rsplit(":", 1)[1])
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))  # released again
