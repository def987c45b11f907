"""The sample repository is valid and every platform fits its inventory snapshot as its comments say."""

from __future__ import annotations

import json
import re

from reconciler.allocate import Allocation, allocate
from reconciler.inventory import discover
from reconciler.source.directory import load_directory
from tests._manifests_support import SAMPLE_REPO

# What each platform file's comment says it should get (host names of sample-repo/inventory.json).
EXPECTED = {
    ("project-a", "clearml-prod"): (
        ["cp-01", "cp-02", "cp-03"],
        ["cpu-worker-01", "gpu-h100-04", "gpu-h100-06"],
    ),
    ("project-a", "cpu-sandbox"): (["cp-04", "cp-05", "cp-06"], ["cpu-worker-02"]),
    ("project-a", "notebooks"): (["cp-07", "cp-08", "cp-09"], ["cpu-worker-03", "gpu-h100-05"]),
    ("project-b", "inference"): (["cp-10"], ["gpu-l40s-01"]),
    ("project-b", "training"): (["cp-11"], ["gpu-a100-01", "gpu-a100-02"]),
}


def test_sample_repo_is_complete_and_valid() -> None:
    state = load_directory(SAMPLE_REPO)
    assert state.diagnostics == [] and state.complete
    assert len(state.platforms()) == 5


def test_every_sample_platform_is_placed_as_its_comment_says() -> None:
    state = load_directory(SAMPLE_REPO)
    inventory = discover(json.loads((SAMPLE_REPO / "inventory.json").read_text())["edgeHosts"])
    names = {m.uid: m.name for m in inventory.machines}
    decisions = allocate(state, inventory, [])
    placed = {}
    for key, decision in decisions.items():
        assert isinstance(decision, Allocation), (key, decision)
        control_plane = sorted(names[u] for u in decision.control_plane)
        placed[key] = (control_plane, sorted(names[u] for u in decision.workers))
    assert placed == EXPECTED


def test_platform_comments_name_the_expected_hosts() -> None:
    for (namespace, name), (control_plane, workers) in EXPECTED.items():
        text = (SAMPLE_REPO / namespace / "platforms" / f"{name}.yaml").read_text()
        comments = "\n".join(line for line in text.splitlines() if line.startswith("#"))
        for host in control_plane + workers:
            assert re.search(rf"\b{re.escape(host)}\b", comments), (name, host)


def test_inventory_snapshot_has_the_seed_hosts_and_the_search_shape() -> None:
    hosts = json.loads((SAMPLE_REPO / "inventory.json").read_text())["edgeHosts"]
    uids = {h["metadata"]["uid"] for h in hosts}
    assert {
        "edge-5db0384219cfa0fa4ef97d53bf291b2e",
        "edge-e078384256765be6e92fc1118aa9f283",
        "edge-9baf38425dacad857c70ccdbabb48028",
    } <= uids
    for host in hosts:
        assert re.fullmatch(r"edge-[0-9a-f]{32}", host["metadata"]["uid"])
        assert host["metadata"]["labels"]["palette.ai"] == "true"
        assert host["spec"]["type"] == "edge-native"
        assert host["spec"]["device"]["archType"] == "amd64"
        assert set(host["status"]) >= {"state", "health", "inUseClustersRef"}
    excluded = discover(hosts).excluded
    assert [h.name for h in excluded] == ["gpu-t4-01"]
