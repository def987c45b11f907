"""The Palette client against the emulator: paging, filters, the cluster lifecycle, scope and auth."""

from __future__ import annotations

import pytest

from reconciler.model.observed import managed_labels
from reconciler.palette import ClientError, NotFoundError, PaletteClient, ServerError, UnauthorizedError
from reconciler.snapshots import managed_clusters
from tests._palette_support import INFRA_UID, KEY, PROJECT_A, PROJECT_B, FakeClock, client, host, running


def _entity(
    name: str, control_plane: list[str], workers: list[str], labels: dict[str, str] | None = None
) -> dict:
    pools = [
        {
            "cloudConfig": {"edgeHosts": [{"hostUid": u} for u in control_plane]},
            "poolConfig": {
                "name": "control-plane-pool",
                "isControlPlane": True,
                "labels": ["control-plane"],
                "size": len(control_plane),
            },
        }
    ]
    if workers:
        pools.append(
            {
                "cloudConfig": {"edgeHosts": [{"hostUid": u} for u in workers]},
                "poolConfig": {
                    "name": "worker-pool",
                    "isControlPlane": False,
                    "labels": ["worker"],
                    "size": len(workers),
                },
            }
        )
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"cloudConfig": {}, "machinepoolconfig": pools, "profiles": [{"uid": INFRA_UID}]},
    }


def test_thousand_hosts_are_read_completely_through_twenty_pages() -> None:
    hosts = [host(f"edge-{i:04d}") for i in range(1000)]
    with running(hosts) as server, client(server) as palette:
        found = palette.search_edge_hosts()
        assert len(found) == 1000
        assert len({h["metadata"]["uid"] for h in found}) == 1000
        assert server.stats.count("POST", "/v1/dashboard/edgehosts/search", 200) == 20


def test_search_by_tags_requires_every_tag() -> None:
    with running() as server, client(server) as palette:
        uids = {
            h["metadata"]["uid"]
            for h in palette.search_edge_hosts({"palette.ai": "true", "palette.ai/worker": "true"})
        }
        assert uids == {"edge-worker-1"}
        assert len(palette.search_edge_hosts({"palette.ai": "true"})) == 9
        assert palette.search_edge_hosts({"palette.ai": "false"}) == []


def test_search_returns_items_as_the_api_sends_them() -> None:
    hosts = [host("edge-x")]
    hosts[0]["spec"]["futureField"] = {"added": "by a newer Palette"}
    with running(hosts) as server, client(server) as palette:
        (item,) = palette.search_edge_hosts()
        assert item["spec"]["futureField"] == {"added": "by a newer Palette"}


def test_cluster_lifecycle_create_get_search_delete() -> None:
    clock = FakeClock()
    labels = managed_labels("project-a", "clearml-prod")
    with running(clock=clock, provision_seconds=3, delete_seconds=2) as server, client(server) as palette:
        uid = palette.create_edge_native_cluster(
            _entity("project-a-clearml-prod", ["edge-cp-1"], ["edge-h100-1"], labels)
        )
        cluster = palette.get_cluster(uid)
        assert cluster is not None and cluster["status"]["state"] == "Pending"
        clock.advance(1.5)
        assert palette.get_cluster(uid)["status"]["state"] == "Provisioning"  # type: ignore[index]
        clock.advance(2)
        assert palette.get_cluster(uid)["status"]["state"] == "Running"  # type: ignore[index]

        summaries = palette.search_clusters(labels)
        assert [s["metadata"]["uid"] for s in summaries] == [uid]
        assert palette.search_clusters({"palette.ai/name": "other"}) == []
        hosts = palette.search_edge_hosts()
        (managed,) = managed_clusters(summaries, hosts)
        assert (managed.control_plane, managed.workers) == (("edge-cp-1",), ("edge-h100-1",))
        assert managed.cloud_config_uid == cluster["spec"]["cloudConfigRef"]["uid"]

        palette.delete_cluster(uid)
        assert palette.get_cluster(uid)["status"]["state"] == "Deleting"  # type: ignore[index]
        clock.advance(2)
        assert palette.get_cluster(uid) is None
        assert palette.search_clusters(labels) == []
        palette.delete_cluster(uid)  # already gone: fine
        states = {h["metadata"]["uid"]: h["status"]["state"] for h in palette.search_edge_hosts()}
        assert states["edge-cp-1"] == states["edge-h100-1"] == "ready"


def test_a_host_given_to_two_clusters_is_refused() -> None:
    with running() as server, client(server) as palette:
        palette.create_edge_native_cluster(_entity("one", ["edge-cp-1"], []))
        with pytest.raises(ClientError) as caught:
            palette.create_edge_native_cluster(_entity("two", ["edge-cp-1"], []))
        assert caught.value.status == 409 and caught.value.code == "EdgeHostInUse"
        assert server.stats.count("POST", "/v1/spectroclusters/edge-native") == 2


def test_machine_pool_update_moves_hosts_in_and_out() -> None:
    with running() as server, client(server) as palette:
        uid = palette.create_edge_native_cluster(_entity("c", ["edge-cp-1"], ["edge-h100-1"]))
        config_uid = palette.get_cluster(uid)["spec"]["cloudConfigRef"]["uid"]  # type: ignore[index]
        pool = {
            "cloudConfig": {"edgeHosts": [{"hostUid": "edge-h100-2"}]},
            "poolConfig": {"name": "worker-pool", "labels": ["worker"], "size": 1},
        }
        palette.update_machine_pool(config_uid, "worker-pool", pool)
        pools = {p["name"]: p for p in palette.get_cloud_config(config_uid)["spec"]["machinePoolConfig"]}
        assert [h["hostUid"] for h in pools["worker-pool"]["hosts"]] == ["edge-h100-2"]
        states = {h["metadata"]["uid"]: h["status"] for h in palette.search_edge_hosts()}
        assert states["edge-h100-1"]["state"] == "ready" and states["edge-h100-1"]["inUseClustersRef"] == []
        assert states["edge-h100-2"]["inUseClustersRef"] == [{"name": "c", "uid": uid}]
        with pytest.raises(NotFoundError):
            palette.update_machine_pool(
                config_uid,
                "no-such-pool",
                {**pool, "poolConfig": {**pool["poolConfig"], "name": "no-such-pool"}},
            )


def test_first_worker_pool_can_be_added_later() -> None:
    with running() as server, client(server) as palette:
        uid = palette.create_edge_native_cluster(_entity("c", ["edge-cp-1"], []))
        config_uid = palette.get_cluster(uid)["spec"]["cloudConfigRef"]["uid"]  # type: ignore[index]
        palette.create_machine_pool(
            config_uid,
            {
                "cloudConfig": {"edgeHosts": [{"hostUid": "edge-h100-1"}]},
                "poolConfig": {"name": "worker-pool", "labels": ["worker"], "size": 1},
            },
        )
        names = [p["name"] for p in palette.get_cloud_config(config_uid)["spec"]["machinePoolConfig"]]
        assert names == ["control-plane-pool", "worker-pool"]


def test_get_cluster_of_unknown_uid_is_none() -> None:
    with running() as server, client(server) as palette:
        assert palette.get_cluster("c100000000000000000000ff") is None
        with pytest.raises(NotFoundError):
            palette.get_cloud_config("nope")


def test_project_scope_limits_what_a_client_sees() -> None:
    hosts = [host("edge-a", project=PROJECT_A), host("edge-b", project=PROJECT_B)]
    with running(hosts) as server:
        with client(server, project_uid=PROJECT_A) as a:
            assert [h["metadata"]["uid"] for h in a.search_edge_hosts()] == ["edge-a"]
            with pytest.raises(ClientError) as caught:
                a.create_edge_native_cluster(_entity("x", ["edge-b"], []))
            assert caught.value.code == "EdgeHostNotFound"
            uid = a.create_edge_native_cluster(_entity("x", ["edge-a"], []))
        with client(server, project_uid=PROJECT_B) as b:
            assert b.get_cluster(uid) is None
            assert b.search_clusters() == []
        with client(server) as tenant:
            assert len(tenant.search_edge_hosts()) == 2
            assert [c["metadata"]["uid"] for c in tenant.search_clusters()] == [uid]


@pytest.mark.parametrize("key", ["wrong-key", KEY.upper()])
def test_wrong_key_is_unauthorized(key: str) -> None:
    with running() as server, client(server, api_key=key) as palette:
        with pytest.raises(UnauthorizedError) as caught:
            palette.search_edge_hosts()
        assert caught.value.status == 401
        assert server.stats.count(status=401) == 1  # not retried


def test_on_request_reports_path_templates_and_statuses() -> None:
    seen: list[tuple[str, str, int]] = []
    with running() as server, client(server, on_request=lambda m, p, s: seen.append((m, p, s))) as palette:
        uid = palette.create_edge_native_cluster(_entity("c", ["edge-cp-1"], []))
        palette.get_cluster(uid)
        palette.get_cluster("missing")
        palette.delete_cluster(uid)
    assert seen == [
        ("POST", "/v1/spectroclusters/edge-native", 201),
        ("GET", "/v1/spectroclusters/{uid}", 200),
        ("GET", "/v1/spectroclusters/{uid}", 404),
        ("DELETE", "/v1/spectroclusters/{uid}", 204),
    ]


def test_client_sends_api_key_and_project_headers() -> None:
    import httpx

    captured: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        captured.append(request)
        return httpx.Response(200, json={"items": [], "listmeta": {"continue": ""}})

    with PaletteClient(
        "http://palette.test", KEY, PROJECT_A, transport=httpx.MockTransport(handler)
    ) as palette:
        palette.search_edge_hosts()
    (request,) = captured
    assert request.headers["ApiKey"] == KEY
    assert request.headers["ProjectUid"] == PROJECT_A
    assert request.url.params["limit"] == "50"


def test_a_host_repeated_across_pages_is_returned_once() -> None:
    import httpx

    pages = {
        "": {"items": [host("edge-a"), host("edge-b")], "listmeta": {"continue": "p2", "count": 3}},
        "p2": {"items": [host("edge-b"), host("edge-c")], "listmeta": {"continue": ""}},
    }

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=pages[request.url.params.get("continue", "")])

    with PaletteClient("http://palette.test", KEY, transport=httpx.MockTransport(handler)) as palette:
        assert [h["metadata"]["uid"] for h in palette.search_edge_hosts()] == ["edge-a", "edge-b", "edge-c"]


def test_a_server_that_repeats_its_continue_token_is_an_error() -> None:
    import httpx

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"items": [], "listmeta": {"continue": "same"}})

    with (
        PaletteClient("http://palette.test", KEY, transport=httpx.MockTransport(handler)) as palette,
        pytest.raises(ServerError, match="continue token repeated"),
    ):
        palette.search_edge_hosts()
