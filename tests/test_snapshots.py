"""Observed managed clusters from both cluster shapes, and snapshot files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reconciler.model.observed import managed_labels
from reconciler.snapshots import (
    Snapshot,
    dump_snapshot,
    load_snapshot,
    managed_clusters,
    read_snapshot_of,
    scoped,
    scoped_read,
)
from tests._palette_support import host


def _in_use(h: dict[str, Any], uid: str) -> dict[str, Any]:
    h["status"].update(state="in-use", inUseClustersRef=[{"name": "x", "uid": uid}])
    return h


def _get_shape(uid: str, labels: dict[str, str], state: str = "Running") -> dict[str, Any]:
    return {
        "metadata": {"uid": uid, "name": "project-a-p", "labels": labels},
        "spec": {"cloudType": "edge-native", "cloudConfigRef": {"uid": f"cc-{uid}"}},
        "status": {"state": state},
    }


def _summary_shape(uid: str, labels: dict[str, str], state: str = "Running") -> dict[str, Any]:
    return {
        "metadata": {"uid": uid, "name": "project-a-p", "labels": labels},
        "specSummary": {"cloudConfig": {"uid": f"cc-{uid}"}},
        "status": {"state": state},
    }


HOSTS = [
    _in_use(host("cp-b"), "c1"),
    _in_use(host("cp-a"), "c1"),
    _in_use(host("gpu-1", gpus=8), "c1"),
    _in_use(
        host("tagged-worker", labels={"palette.ai/worker": "true", "palette.ai/control-plane": "true"}), "c1"
    ),
    _in_use(host("tagged-cp", gpus=4, labels={"palette.ai/control-plane": "true"}), "c1"),
    _in_use(host("tag-gpus", labels={"gpus": "2"}), "c1"),
    host("free"),
]


@pytest.mark.parametrize("shape", [_get_shape, _summary_shape])
def test_membership_and_roles_from_hosts(shape: Any) -> None:
    (cluster,) = managed_clusters([shape("c1", managed_labels("project-a", "p"))], HOSTS)
    assert (cluster.namespace, cluster.platform, cluster.state) == ("project-a", "p", "Running")
    assert cluster.cloud_config_uid == "cc-c1"
    assert cluster.control_plane == ("cp-a", "cp-b", "tagged-cp")
    assert cluster.workers == ("gpu-1", "tag-gpus", "tagged-worker")
    assert cluster.arch == "amd64"


def test_unmanaged_deleted_and_unlabelled_clusters_are_ignored() -> None:
    clusters = [
        _get_shape("c1", {"owner": "someone"}),
        _get_shape("c2", managed_labels("ns", "gone"), state="Deleted"),
        _get_shape("c3", {"palette.ai/managed-by": "reconciler"}),
        _summary_shape("c4", managed_labels("ns", "b")),
        _summary_shape("c5", managed_labels("ns", "a"), state="Deleting"),
    ]
    result = managed_clusters(clusters, [])
    assert [(c.uid, c.state, c.arch, c.hosts) for c in result] == [
        ("c5", "Deleting", None, ()),
        ("c4", "Running", None, ()),
    ]


def test_snapshot_round_trips_in_yaml_and_json(tmp_path: Path) -> None:
    snapshot = Snapshot(edge_hosts=HOSTS, clusters=[_get_shape("c1", managed_labels("a", "b"))])
    for name in ("inv.yaml", "inv.json"):
        dump_snapshot(snapshot, tmp_path / name)
        assert load_snapshot(tmp_path / name) == snapshot


def test_yaml_snapshot_without_clusters(tmp_path: Path) -> None:
    path = tmp_path / "inv.yml"
    path.write_text("edgeHosts:\n  - metadata: {uid: e1, name: e1}\n")
    loaded = load_snapshot(path)
    assert loaded.clusters == [] and loaded.edge_hosts[0]["metadata"]["uid"] == "e1"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1, 2]", "mapping"),
        ("edgeHosts: {a: 1}", "list of objects"),
        ("edgeHosts:\n  - metadata: {name: x}\n", "metadata.uid"),
        ("edgeHosts: [\n", "not a valid snapshot"),
        ("edgeHosts: !!python/object:os.system {}", "not a valid snapshot"),
    ],
)
def test_bad_snapshots_are_reported(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        load_snapshot(path)


def test_sample_repo_inventory_loads_if_present() -> None:
    path = Path(__file__).parent.parent / "sample-repo" / "inventory.json"
    if not path.exists():
        pytest.skip("no sample inventory yet")
    snapshot = load_snapshot(path)
    assert snapshot.edge_hosts
    json.dumps(snapshot.edge_hosts)


def test_a_snapshots_hosts_are_read_once_for_scope_discovery_and_membership(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What ``plan --inventory`` does with a snapshot: scope it per project, discover each part and
    the whole, and find the clusters' members; every host's JSON is read once for all of it."""
    from reconciler.edgehost import HostFacts
    from reconciler.resolve import Target
    from reconciler.runtime.stages.plan import snapshot_observation

    labels = managed_labels("team-a", "p")
    hosts = [
        _in_use(host("a-1", gpus=8, project="pa"), "c1"),
        host("a-2", project="pa"),
        host("b-1", gpus=4, project="pb"),
        host("nowhere"),
    ]
    snapshot = Snapshot(edge_hosts=hosts, clusters=[_get_shape("c1", labels)])
    reads: list[str] = []
    original = HostFacts.__init__

    def counted(self: HostFacts, *args: Any) -> None:
        reads.append(args[0])
        original(self, *args)

    monkeypatch.setattr(HostFacts, "__init__", counted)
    read = read_snapshot_of(snapshot)
    whole = snapshot_observation(read)
    parts = {p: snapshot_observation(scoped_read(read, Target("inventory:x", p))) for p in ("pa", "pb")}
    assert sorted(reads) == ["a-1", "a-2", "b-1", "nowhere"]
    # scoped() of the snapshot itself (``inventory show --project``) takes the same facts
    project_a = scoped(snapshot, Target("inventory:x", "pa"))
    assert [f.uid for f in project_a.host_facts] == ["a-1", "a-2", "nowhere"]
    assert sorted(reads) == ["a-1", "a-2", "b-1", "nowhere"]
    assert [m.uid for m in whole.inventory.machines] == ["a-1", "a-2", "b-1", "nowhere"]
    # A project sees its own hosts and those that name none, as Palette scopes a ProjectUid.
    assert [m.uid for m in parts["pa"].inventory.machines] == ["a-1", "a-2", "nowhere"]
    assert [c.workers for c in parts["pa"].clusters] == [("a-1",)]
    assert [m.uid for m in parts["pb"].inventory.machines] == ["b-1", "nowhere"]
    assert parts["pb"].clusters == []
