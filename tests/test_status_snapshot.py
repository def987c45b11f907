"""The status branch's inventory snapshots (reconciler/status/snapshot.py): only what discovery and
planning read, sorted, so the bytes change exactly when a fact they read changes."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.edgehost import read_host
from reconciler.host_items import host_item
from reconciler.inventory import discover
from reconciler.snapshots import managed_clusters, parse_snapshot
from reconciler.status.render import RECONCILER_FILE, dump, parse_recorded, reconciler_document
from reconciler.status.snapshot import (
    SnapshotError,
    read_snapshot,
    read_snapshots,
    recorded_palette,
    render_snapshot,
    target_file,
)
from tests._inventory_support import edge_host, gpu

PROJECT = "6514216503b1d1cd4f1bdc44"


def _host(uid: str, **kwargs: Any) -> dict[str, Any]:
    item = edge_host(uid, **kwargs)
    item["metadata"]["lastModifiedTimestamp"] = "2026-01-10T10:05:00.000Z"
    item["spec"]["projectMeta"] = {"name": "east", "uid": PROJECT}
    item["spec"]["host"] = {"hostAddress": f"10.0.0.{len(uid)}"}
    item["status"]["health"]["lastHeartbeatTimestamp"] = "2026-01-10T10:06:00.000Z"
    item["status"]["health"]["agentVersion"] = "4.8.1"
    return item


def _cluster(uid: str, platform: str, state: str = "Running") -> dict[str, Any]:
    """A cluster as the controller's search returns it (``v1SpectroClusterSummary``)."""
    return {
        "metadata": {
            "uid": uid,
            "name": f"project-a-{platform}",
            "labels": {
                "palette.ai/managed-by": "reconciler",
                "palette.ai/namespace": "project-a",
                "palette.ai/name": platform,
            },
            "creationTimestamp": "2026-01-10T10:00:00.000Z",
        },
        "specSummary": {"cloudConfig": {"uid": f"cc-{uid}"}, "projectMeta": {"uid": PROJECT}},
        "status": {"state": state, "health": {"state": "Healthy", "lastHeartbeat": "10:07"}},
    }


def _inventory() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    in_use = [{"uid": "c-1", "name": "project-a-train"}]
    hosts = [
        _host("edge-gpu-2", gpus=[gpu("GH100 [H100 SXM5 80GB]", 8)], clusters=in_use),
        _host("edge-cp-1", labels={"palette.ai/control-plane": "true"}, clusters=in_use),
        _host("edge-gpu-1", gpus=[gpu("GH100 [H100 SXM5 80GB]", 4)]),
        _host("edge-arm", arch="aarch64", state="unpaired"),
    ]
    foreign = {"metadata": {"uid": "c-9", "name": "hand-made", "labels": {}}, "status": {"state": "Running"}}
    return hosts, [_cluster("c-1", "train"), foreign]


def test_target_file_names_host_port_and_project() -> None:
    assert (
        target_file("https://api.spectrocloud.com", PROJECT)
        == f"inventory/api.spectrocloud.com-{PROJECT}.json"
    )
    assert target_file("http://127.0.0.1:8080/", None) == "inventory/127.0.0.1_8080-tenant.json"
    assert (
        target_file("https://Palette.Example.com/api/", "p1") == "inventory/palette.example.com_api-p1.json"
    )


def test_snapshot_round_trips_to_the_same_observation() -> None:
    hosts, clusters = _inventory()
    data = render_snapshot(hosts, clusters)
    back = parse_snapshot(data.decode(), json_first=True)
    assert render_snapshot(back.edge_hosts, back.clusters) == data
    assert discover(back.edge_hosts) == discover(hosts)
    machines = discover(hosts).by_uid()
    assert managed_clusters(back.clusters, back.edge_hosts, machines) == managed_clusters(
        clusters, hosts, machines
    )


def test_reading_a_snapshot_back_parses_only_the_hosts_whose_text_changed_since_the_last_render() -> None:
    hosts, clusters = _inventory()
    data = render_snapshot(hosts, clusters)
    whole = parse_snapshot(data.decode(), json_first=True)
    head, back = read_snapshot(data)
    assert head.clusters == whole.clusters and head.edge_hosts == []
    assert not any(isinstance(h, dict) for h in back)  # every host is the facts last rendered
    assert discover(back) == discover(whole.edge_hosts)

    changed = copy.deepcopy(hosts)
    changed[2]["status"]["health"]["state"] = "unhealthy"  # edge-gpu-1: rendered again, not recorded
    render_snapshot(changed, clusters)
    _head, again = read_snapshot(data)  # the recorded bytes still hold the old edge-gpu-1
    parsed = [h for h in again if isinstance(h, dict)]
    assert [h["metadata"]["uid"] for h in parsed] == ["edge-gpu-1"]
    assert discover(again) == discover(whole.edge_hosts)


def test_a_snapshot_in_another_layout_is_read_whole() -> None:
    hosts, clusters = _inventory()
    data = json.dumps(json.loads(render_snapshot(hosts, clusters))).encode()  # one line
    head, back = read_snapshot(data)
    assert discover(back) == discover(hosts)
    assert [c["metadata"]["uid"] for c in head.clusters] == ["c-1"]
    with pytest.raises(SnapshotError):
        read_snapshot(b"{not json")


def test_snapshot_holds_only_managed_clusters_and_hosts_sorted_by_uid() -> None:
    hosts, clusters = _inventory()
    doc = json.loads(render_snapshot(hosts, clusters))
    assert [h["metadata"]["uid"] for h in doc["edgeHosts"]] == sorted(h["metadata"]["uid"] for h in hosts)
    assert [c["metadata"]["uid"] for c in doc["clusters"]] == ["c-1"]
    assert "clusterProfiles" not in doc


def test_fields_discovery_does_not_read_leave_the_bytes_alone() -> None:
    hosts, clusters = _inventory()
    before = render_snapshot(hosts, clusters)
    later = copy.deepcopy(hosts)
    for h in later:
        h["status"]["health"]["lastHeartbeatTimestamp"] = "2026-01-10T11:00:00.000Z"
        h["metadata"]["lastModifiedTimestamp"] = "2026-01-10T11:00:00.000Z"
        h["status"]["health"]["agentVersion"] = "4.9.0"
    moved = copy.deepcopy(clusters)
    moved[0]["status"]["health"]["lastHeartbeat"] = "11:00"
    assert render_snapshot(list(reversed(later)), moved) == before


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda h: h["spec"]["device"]["gpus"][0].update(gpuCount=2), id="gpu-count"),
        pytest.param(lambda h: h["metadata"]["labels"].update({"palette.ai": "false"}), id="label"),
        pytest.param(lambda h: h["status"].update(state="in-use"), id="state"),
        pytest.param(lambda h: h["status"]["health"].update(state="unhealthy"), id="health"),
        pytest.param(lambda h: h["spec"]["host"].update(hostAddress="10.9.9.9"), id="address"),
    ],
)
def test_a_field_discovery_reads_changes_the_bytes(change: Any) -> None:
    hosts, clusters = _inventory()
    before = render_snapshot(hosts, clusters)
    changed = copy.deepcopy(hosts)
    change(next(h for h in changed if h["metadata"]["uid"] == "edge-gpu-1"))
    assert render_snapshot(changed, clusters) != before


def test_a_cluster_state_change_changes_the_bytes() -> None:
    hosts, clusters = _inventory()
    provisioning = copy.deepcopy(clusters)
    provisioning[0]["status"]["state"] = "Provisioning"
    assert render_snapshot(hosts, provisioning) != render_snapshot(hosts, clusters)


def test_cluster_profile_catalogue_is_kept_as_uid_name_type() -> None:
    hosts, clusters = _inventory()
    profiles = [{"uid": "p2", "name": "add", "type": "add-on", "version": "1"}, {"uid": "p1", "name": "i"}]
    doc = json.loads(render_snapshot(hosts, clusters, profiles))
    assert doc["clusterProfiles"] == [
        {"uid": "p1", "name": "i", "type": "infra"},
        {"uid": "p2", "name": "add", "type": "add-on"},
    ]


_text = st.one_of(st.none(), st.text(max_size=8), st.integers(-2, 9), st.booleans())
_gpu_entries = st.lists(
    st.one_of(
        st.fixed_dictionaries(
            {},
            optional={
                "vendor": _text,
                "model": _text,
                "gpuCount": _text,
                "memory": _text,
                "migCapable": _text,
                "migStrategy": _text,
            },
        ),
        _text,
    ),
    max_size=3,
)
_nics = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "nicName": _text,
            "ip": _text,
            "subnet": _text,
            "gateway": _text,
            "isDefault": _text,
            "dns": st.lists(_text, max_size=2),
        },
    ),
    max_size=3,
)
_items = st.fixed_dictionaries(
    {"metadata": st.fixed_dictionaries({"uid": st.text(min_size=1, max_size=6)}, optional={"name": _text})},
    optional={
        "spec": st.fixed_dictionaries(
            {},
            optional={
                "device": st.fixed_dictionaries(
                    {},
                    optional={
                        "archType": _text,
                        "cpu": st.fixed_dictionaries({}, optional={"cores": _text}),
                        "gpus": _gpu_entries,
                        "nics": _nics,
                    },
                ),
                "projectMeta": st.fixed_dictionaries({}, optional={"uid": _text}),
                "host": st.fixed_dictionaries({}, optional={"hostAddress": _text}),
            },
        ),
        "status": st.fixed_dictionaries(
            {},
            optional={
                "state": _text,
                "health": st.fixed_dictionaries({}, optional={"state": _text}),
                "inUseClustersRef": st.lists(st.fixed_dictionaries({}, optional={"uid": _text}), max_size=2),
            },
        ),
    },
)


@settings(max_examples=300, deadline=None)
@given(item=_items, labels=st.dictionaries(st.text(max_size=5), _text, max_size=3))
def test_host_item_is_read_back_as_exactly_the_same_facts(
    item: dict[str, Any], labels: dict[str, Any]
) -> None:
    item["metadata"]["labels"] = labels
    facts = read_host(item)
    assert facts is not None
    assert read_host(host_item(facts)) == facts
    assert read_host(json.loads(json.dumps(host_item(facts)))) == facts


def _files(**extra: bytes) -> dict[str, bytes]:
    """A status tree whose ``reconciler.yaml`` is written as the controller writes it."""
    targets = [("https://api.spectrocloud.com", PROJECT), ("http://127.0.0.1:8080", None)]
    return {RECONCILER_FILE: dump(reconciler_document("main", "a" * 40, targets)), **extra}


def test_read_snapshots_maps_files_back_to_the_targets_of_reconciler_yaml() -> None:
    hosts, clusters = _inventory()
    data = render_snapshot(hosts, clusters)
    files = _files(**{target_file("https://api.spectrocloud.com", PROJECT): data})
    files["inventory/stale-tenant.json"] = b"not even json"  # a file no target names is not read
    found = read_snapshots(files)
    assert list(found) == [("https://api.spectrocloud.com", PROJECT)]
    assert render_snapshot(found[("https://api.spectrocloud.com", PROJECT)].edge_hosts, clusters) == data
    assert set(parse_recorded(files).targets) == {
        ("https://api.spectrocloud.com", PROJECT),
        ("http://127.0.0.1:8080", None),
    }


def test_unreadable_status_files_are_errors_naming_the_file() -> None:
    with pytest.raises(SnapshotError, match=r"reconciler\.yaml is missing"):
        read_snapshots({})
    path = target_file("http://127.0.0.1:8080", None)
    with pytest.raises(SnapshotError, match=re.escape(path)):
        read_snapshots(_files(**{path: b"{"}))


def test_the_palette_endpoint_run_used_is_read_when_recorded() -> None:
    assert recorded_palette(_files()) is None
    assert recorded_palette({RECONCILER_FILE: b"branch: main\npalette: http://127.0.0.1:8080/\n"}) == (
        "http://127.0.0.1:8080"
    )
    assert recorded_palette({RECONCILER_FILE: b"palette: [\n"}) is None


def test_snapshot_bytes_are_json_dumps_with_indent_one_and_only_changed_hosts_are_encoded_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import reconciler.status.snapshot as snapshot_module

    hosts, clusters = _inventory()
    profiles = [{"uid": "p-1", "name": "edge", "type": "infra"}]
    data = render_snapshot(hosts, clusters, profiles)
    doc = json.loads(data)
    assert data == (json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode()
    assert json.loads(render_snapshot([], [])) == {"clusters": [], "edgeHosts": []}
    assert (
        render_snapshot([], []) == (json.dumps({"clusters": [], "edgeHosts": []}, indent=1) + "\n").encode()
    )

    encoded: list[str] = []
    real = snapshot_module.host_item
    monkeypatch.setattr(snapshot_module, "host_item", lambda facts: encoded.append(facts.uid) or real(facts))
    facts = [read_host(h) for h in hosts]
    render_snapshot(facts, clusters, profiles)
    changed = copy.deepcopy(hosts)
    changed[0]["status"]["health"]["state"] = "unhealthy"
    encoded.clear()
    again = render_snapshot(changed, clusters, profiles)
    assert encoded == [hosts[0]["metadata"]["uid"]], "the unchanged hosts' text is reused"
    assert (
        again == (json.dumps(json.loads(again), indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode()
    )
