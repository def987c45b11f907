"""The Compute status aggregation: the seed's example reproduced exactly, grouping and ordering rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from reconciler.compute_status import compute_status, summary
from reconciler.inventory import discover
from tests._inventory_support import edge_host, gpu

DATA = Path(__file__).parent / "data" / "inventory"


def load(name: str) -> Any:
    return yaml.load((DATA / name).read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)


def test_the_seeds_compute_status_example_is_reproduced_exactly_from_a_snapshot() -> None:
    snapshot = load("seed-compute.yaml")
    expected = load("seed-compute-status.yaml")
    status = compute_status(discover(snapshot["edgeHosts"]))
    assert status == {**expected, "excludedMachines": []}
    # Key order too: the status file is rendered in this order.
    assert list(status) == ["availableControlPlaneCompute", "availableWorkerCompute", "excludedMachines"]
    assert list(status["availableWorkerCompute"][1]) == [
        "architecture",
        "available",
        "family",
        "gpuCount",
        "instances",
        "machines",
        "resourceGroups",
    ]


def test_in_use_unhealthy_unpaired_and_foreign_hosts_of_the_seed_snapshot_are_not_available() -> None:
    inventory = discover(load("seed-compute.yaml")["edgeHosts"])
    assert dict(summary(inventory)) == {"available": 12, "in-use": 1, "unavailable": 2, "excluded": 0}


def test_hosts_group_by_architecture_count_and_resource_groups() -> None:
    hosts = [
        edge_host("edge-1", cores=4),
        edge_host("edge-2", cores=4, arch="arm64"),
        edge_host("edge-3", cores=8),
        edge_host("edge-4", cores=4, labels={"palette.ai.rg/rack": "a"}),
        edge_host("edge-5", gpus=[gpu("GH100 [H100 PCIe]", 4)]),
        edge_host("edge-6", gpus=[gpu("GH100 [H100 PCIe]", 8)]),
        edge_host("edge-7", gpus=[gpu("GH100 [H100 PCIe]", 8)]),
    ]
    status = compute_status(discover(hosts))
    control_plane = [
        (e["architecture"], e["cpuCount"], e.get("resourceGroups"), e["machines"])
        for e in status["availableControlPlaneCompute"]
    ]
    assert control_plane == [
        ("AMD64", 4, None, ["edge-1"]),
        ("AMD64", 8, None, ["edge-3"]),
        ("AMD64", 4, {"rack": "a"}, ["edge-4"]),
        ("ARM64", 4, None, ["edge-2"]),
    ]
    workers = [
        (e["family"], e["gpuCount"], e["instances"], e["machines"]) for e in status["availableWorkerCompute"]
    ]
    assert workers == [("NVIDIA H100", 4, 1, ["edge-5"]), ("NVIDIA H100", 8, 2, ["edge-6", "edge-7"])]


def test_worker_tagged_cpu_hosts_are_listed_as_workers_without_a_family() -> None:
    hosts = [
        edge_host("edge-cpu", cores=16, labels={"palette.ai/worker": "true"}),
        edge_host("edge-gpu", gpus=[gpu("TU104GL [Tesla T4]", 1)]),
    ]
    status = compute_status(discover(hosts))
    assert status["availableControlPlaneCompute"] == []
    assert status["availableWorkerCompute"] == [
        {
            "architecture": "AMD64",
            "available": True,
            "family": "NVIDIA T4",
            "gpuCount": 1,
            "instances": 1,
            "machines": ["edge-gpu"],
        },
        {
            "architecture": "AMD64",
            "available": True,
            "cpuCount": 16,
            "gpuCount": 0,
            "instances": 1,
            "machines": ["edge-cpu"],
        },
    ]


def test_control_plane_tagged_gpu_hosts_are_listed_as_control_plane_compute() -> None:
    host = edge_host(
        "edge-a", cores=32, gpus=[gpu("GH100 [H100 PCIe]", 8)], labels={"palette.ai/control-plane": "true"}
    )
    status = compute_status(discover([host]))
    assert [e["machines"] for e in status["availableControlPlaneCompute"]] == [["edge-a"]]
    assert status["availableWorkerCompute"] == []


def test_excluded_hosts_are_listed_with_their_reason() -> None:
    status = compute_status(discover([edge_host("edge-b", name="bad", labels={"gpu-memory": "lots"})]))
    [excluded] = status["excludedMachines"]
    assert (excluded["name"], excluded["uid"]) == ("bad", "edge-b")
    assert "tag gpu-memory: 'lots'" in excluded["reason"]


def test_machines_within_an_entry_follow_host_names_then_uids() -> None:
    hosts = [edge_host("edge-c", name="b"), edge_host("edge-a", name="c"), edge_host("edge-b", name="a")]
    [entry] = compute_status(discover(hosts))["availableControlPlaneCompute"]
    assert entry["machines"] == ["edge-b", "edge-c", "edge-a"]


def test_the_status_is_the_same_whatever_order_palette_returns_hosts_in() -> None:
    hosts = load("seed-compute.yaml")["edgeHosts"]
    assert compute_status(discover(hosts)) == compute_status(discover(list(reversed(hosts))))
