"""The emulator holds requests to Palette's rules (docs/palette.md), and the client's profile calls.

Cluster profiles: a create must name at least one known infrastructure or full profile; attached profiles
are listed, attached and detached one by one. Addressing: ``staticIp`` needs every host's ``nic.ip``, a
two-node cluster its primary and secondary. Machines and the overview answer as Palette's do.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from reconciler.apply import apply_plan
from reconciler.inventory import discover
from reconciler.palette import ClientError, PaletteClient
from reconciler.plan import Action, make_plan
from reconciler.snapshots import dump_snapshot, load_snapshot, managed_clusters, parse_snapshot
from tests._allocate_support import desired, platform, profile, settings
from tests._palette_support import ADDON_UID, CATALOGUE, HTTP, INFRA_UID, KEY, admin, fleet, running

FULL_UID = "66a1b2c3d4e5f6a7b8c9d0f0"
MONITORING_UID = "66a1b2c3d4e5f6a7b8c9d0e2"


def _body(
    name: str = "c",
    profiles: list[dict[str, Any]] | None = None,
    cp: list[dict[str, Any]] | None = None,
    cloud: dict[str, Any] | None = None,
) -> dict[str, Any]:
    hosts = cp if cp is not None else [{"hostUid": "edge-cp-1", "hostName": "edge-cp-1"}]
    return {
        "metadata": {"name": name, "labels": {}},
        "spec": {
            "cloudConfig": cloud or {},
            "machinepoolconfig": [
                {
                    "cloudConfig": {"edgeHosts": hosts},
                    "poolConfig": {
                        "name": "control-plane-pool",
                        "isControlPlane": True,
                        "labels": ["control-plane"],
                        "size": len(hosts),
                    },
                }
            ],
            "profiles": [{"uid": INFRA_UID}] if profiles is None else profiles,
        },
    }


def _create(server: Any, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    response = HTTP.post(server.url + "/v1/spectroclusters/edge-native", json=body, headers={"ApiKey": KEY})
    return response.status_code, response.json()


@pytest.mark.parametrize(
    ("profiles", "code"),
    [
        ([], "InvalidRequest"),
        ([{"uid": "66a1b2c3d4e5f6a7b8c9ffff"}], "ClusterProfileNotFound"),
        ([{"uid": ADDON_UID}], "InvalidClusterProfiles"),
        ([{"uid": INFRA_UID}, {"uid": INFRA_UID}], "InvalidRequest"),
        ([{"packValues": []}], "InvalidRequest"),
    ],
)
def test_a_create_without_a_known_infrastructure_profile_gets_400(profiles: list[Any], code: str) -> None:
    with running(profiles=CATALOGUE) as server:
        status, body = _create(server, _body(profiles=profiles))
        assert (status, body["code"]) == (400, code)
        assert admin(server, "GET", "state")["clusters"] == []  # nothing half-created, no host taken
        assert all(h["status"]["state"] != "in-use" for h in admin(server, "GET", "state")["edgeHosts"])


@pytest.mark.parametrize("uids", [[INFRA_UID], [FULL_UID], [INFRA_UID, ADDON_UID, MONITORING_UID]])
def test_an_infrastructure_or_full_profile_builds_a_cluster(uids: list[str]) -> None:
    with running(profiles=CATALOGUE) as server:
        status, _ = _create(server, _body(profiles=[{"uid": u} for u in uids]))
        assert status == 201


def test_without_a_catalogue_any_uid_is_infrastructure_but_an_empty_list_is_refused() -> None:
    with running() as server:
        assert _create(server, _body(profiles=[{"uid": "anything"}]))[0] == 201
        status, body = _create(server, _body(name="d", profiles=[], cp=[{"hostUid": "edge-cp-2"}]))
        assert (status, body["code"]) == (400, "InvalidRequest")
        assert "cluster profile" in body["message"]


def test_the_catalogue_answers_each_profile_with_palettes_type_and_the_client_reads_it() -> None:
    with running(profiles=CATALOGUE) as server:
        client = PaletteClient(server.url, KEY)
        try:
            full = client.get_cluster_profile(FULL_UID)
            assert full is not None and full["spec"]["published"]["type"] == "cluster"  # Palette's "full"
            addon = client.get_cluster_profile(ADDON_UID)
            assert addon is not None and addon["spec"]["published"]["type"] == "add-on"
            assert client.get_cluster_profile("66a1b2c3d4e5f6a7b8c9ffff") is None  # 404
        finally:
            client.close()
    with running() as server:  # no catalogue: it cannot say what a profile is
        client = PaletteClient(server.url, KEY)
        try:
            answer = client.get_cluster_profile("anything")
            assert answer is not None and "type" not in answer["spec"]["published"]
        finally:
            client.close()


def test_host_name_and_nic_are_kept_and_static_ip_needs_every_address() -> None:
    nic = {"nicName": "ens160", "ip": "10.0.0.9", "subnet": "255.255.255.0", "gateway": "10.0.0.1"}
    hosts = [{"hostUid": "edge-cp-1", "hostName": "cp-one", "nic": nic}, {"hostUid": "edge-cp-2"}]
    with running() as server, PaletteClient(server.url, KEY) as palette:
        status, body = _create(server, _body(cp=hosts, cloud={"staticIp": True}))
        assert (status, body["code"]) == (400, "InvalidRequest") and "edge-cp-2" in body["message"]
        uid = palette.create_edge_native_cluster(_body(cp=hosts[:1], cloud={"staticIp": True}))
        cluster = palette.get_cluster(uid)
        assert cluster is not None
        config_uid = cluster["spec"]["cloudConfigRef"]["uid"]
        pool = _body(cp=hosts)["spec"]["machinepoolconfig"][0]
        with pytest.raises(ClientError) as refused:  # a static cluster's new host needs its address too
            palette.update_machine_pool(config_uid, "control-plane-pool", pool)
        assert "edge-cp-2" in str(refused.value)
        config = palette.get_cloud_config(config_uid)
    [kept] = config["spec"]["machinePoolConfig"][0]["hosts"]
    assert kept["hostName"] == "cp-one" and kept["nic"] == nic


def test_a_two_node_cluster_needs_a_primary_and_a_secondary() -> None:
    cp = [{"hostUid": "edge-cp-1"}, {"hostUid": "edge-cp-2"}]
    marked = [
        {**cp[0], "twoNodeCandidatePriority": "primary"},
        {**cp[1], "twoNodeCandidatePriority": "secondary"},
    ]
    with running() as server:
        status, body = _create(server, _body(cp=cp, cloud={"isTwoNodeCluster": True}))
        assert (status, body["code"]) == (400, "InvalidRequest") and "twoNodeCandidatePriority" in body[
            "message"
        ]
        twice = [{**h, "twoNodeCandidatePriority": "primary"} for h in cp]
        assert _create(server, _body(cp=twice, cloud={"isTwoNodeCluster": True}))[0] == 400
        assert _create(server, _body(cp=marked, cloud={"isTwoNodeCluster": True}))[0] == 201


def test_attach_and_detach_touch_only_the_named_profiles() -> None:
    with running(profiles=CATALOGUE) as server, PaletteClient(server.url, KEY) as palette:
        uid = palette.create_edge_native_cluster(_body(profiles=[{"uid": INFRA_UID}, {"uid": ADDON_UID}]))
        palette.attach_profiles(uid, [{"uid": MONITORING_UID, "packValues": [{"name": "prometheus"}]}])
        listed = palette.get_cluster_profiles(uid)
        assert [(p["metadata"]["uid"], p["spec"]["type"]) for p in listed] == [
            (INFRA_UID, "infra"),
            (ADDON_UID, "add-on"),
            (MONITORING_UID, "add-on"),
        ]
        palette.attach_profiles(uid, [{"uid": MONITORING_UID}])  # attached again: not a second copy
        assert len(palette.get_cluster_profiles(uid)) == 3
        palette.detach_profiles(uid, [ADDON_UID, "66a1b2c3d4e5f6a7b8c9dddd"])  # not attached: ignored
        assert [p["metadata"]["uid"] for p in palette.get_cluster_profiles(uid)] == [
            INFRA_UID,
            MONITORING_UID,
        ]
        state = admin(server, "GET", "state")
        [cluster] = state["clusters"]
        assert [t["uid"] for t in cluster["spec"]["clusterProfileTemplates"]] == [INFRA_UID, MONITORING_UID]
        assert state["clusterProfiles"] == CATALOGUE  # the admin state is a snapshot again
        with pytest.raises(ClientError) as refused:
            palette.detach_profiles(uid, [INFRA_UID])
        assert refused.value.code == "InvalidClusterProfiles"
        with pytest.raises(ClientError) as unknown:
            palette.attach_profiles(uid, [{"uid": "66a1b2c3d4e5f6a7b8c9eeee"}])
        assert unknown.value.code == "ClusterProfileNotFound"
        with pytest.raises(ValueError):
            palette.detach_profiles(uid, [])


def test_a_replacing_profile_takes_the_place_of_the_one_it_names() -> None:
    with running(profiles=CATALOGUE) as server, PaletteClient(server.url, KEY) as palette:
        uid = palette.create_edge_native_cluster(_body(profiles=[{"uid": INFRA_UID}]))
        palette.attach_profiles(uid, [{"uid": FULL_UID, "replaceWithProfile": INFRA_UID}])
        assert [p["metadata"]["uid"] for p in palette.get_cluster_profiles(uid)] == [FULL_UID]


def test_machines_are_named_as_their_hosts_and_the_overview_reports_health() -> None:
    with (
        running(profiles=CATALOGUE, provision_seconds=0.0) as server,
        PaletteClient(server.url, KEY) as palette,
    ):
        uid = palette.create_edge_native_cluster(_body())
        config_uid = palette.get_cluster(uid)["spec"]["cloudConfigRef"]["uid"]  # type: ignore[index]
        base = (
            f"{server.url}/v1/cloudconfigs/edge-native/{config_uid}/machinePools/control-plane-pool/machines"
        )
        [machine] = HTTP.get(base, headers={"ApiKey": KEY}).json()["items"]
        assert machine["metadata"]["name"] == "edge-cp-1" and machine["spec"]["edgeHostUid"] == "edge-cp-1"
        assert machine["status"]["instanceState"] == "Running"
        single = HTTP.get(f"{base}/{machine['metadata']['uid']}", headers={"ApiKey": KEY})
        assert single.json() == machine
        overview = HTTP.get(
            f"{server.url}/v1/dashboard/spectroclusters/{uid}/overview", headers={"ApiKey": KEY}
        )
        assert overview.json()["status"]["health"]["state"] == "Healthy"
        assert [t["uid"] for t in overview.json()["spec"]["clusterProfileTemplates"]] == [INFRA_UID]


def test_applying_a_plan_sends_names_addresses_and_profiles_palette_accepts() -> None:
    """plan = apply: the plan's machines give the create its host names and addresses."""
    hosts = fleet()
    inventory = discover(hosts)
    static = profile(min_workers=1, edge={"networkOverlayConfig": {"staticIp": True}})
    state = desired(platform("p", {"NVIDIA-H100": 8}), static, settings(cluster_profiles=[INFRA_UID]))
    plan = make_plan(state, inventory, [])
    assert [e.action for e in plan.platforms] == [Action.CREATE]
    with running(hosts, profiles=CATALOGUE) as server, PaletteClient(server.url, KEY) as palette:
        outcomes = apply_plan(palette, state, plan)
        assert all(o.ok for o in outcomes.values()), outcomes
        snapshot = admin(server, "GET", "state")
        [cluster] = managed_clusters(snapshot["clusters"], snapshot["edgeHosts"], inventory.by_uid())
        config = palette.get_cloud_config(cluster.cloud_config_uid or "")
    sent = {h["hostUid"]: h for pool in config["spec"]["machinePoolConfig"] for h in pool["hosts"]}
    machines = inventory.by_uid()
    assert set(sent) == set(plan.platforms[0].control_plane + plan.platforms[0].workers)
    for uid, item in sent.items():
        assert item["hostName"] == machines[uid].name
        assert item["nic"]["ip"] == machines[uid].nic.ip  # type: ignore[union-attr]
    assert [t["uid"] for t in snapshot["clusters"][0]["spec"]["clusterProfileTemplates"]] == [INFRA_UID]


def test_a_snapshot_catalogue_is_read_checked_and_written_back(tmp_path: Any) -> None:
    text = json.dumps({"edgeHosts": [], "clusterProfiles": CATALOGUE})
    snapshot = parse_snapshot(text, json_first=True)
    assert snapshot.cluster_profiles == CATALOGUE
    assert parse_snapshot('{"edgeHosts": []}', json_first=True).cluster_profiles is None
    for bad, words in (
        ([{"uid": "x", "type": "cluster"}], "clusterProfiles[0].type"),
        ([{"name": "no-uid"}], "clusterProfiles[0] has no uid"),
        ({"uid": "x"}, "must be a list"),
    ):
        with pytest.raises(ValueError, match=re.escape(words)):
            parse_snapshot(json.dumps({"clusterProfiles": bad}), json_first=True)
    for name in ("s.json", "s.yaml"):
        dump_snapshot(snapshot, tmp_path / name)
        assert load_snapshot(tmp_path / name).cluster_profiles == CATALOGUE
