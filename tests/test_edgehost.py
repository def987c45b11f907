"""Palette's edge host JSON -> typed facts (reconciler.edgehost), and what discovery builds from them."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.edgehost import canonical_arch, read_host
from reconciler.inventory import HostState, discover
from reconciler.snapshots import managed_clusters


def item(**device: Any) -> dict[str, Any]:
    return {
        "metadata": {"uid": "edge-1", "name": "rack1-node1", "labels": {"palette.ai": True, "gpus": 8}},
        "spec": {
            "device": device,
            "host": {"hostAddress": "10.10.135.182"},
            "projectMeta": {"name": "east", "uid": "p-east"},
        },
        "status": {
            "state": "in-use",
            "health": {"state": "Healthy"},
            "inUseClustersRef": [{"uid": "c1", "name": "team-train"}],
        },
    }


@pytest.mark.parametrize(
    ("text", "arch"),
    [("amd64", "amd64"), ("x86_64", "amd64"), ("X86_64", "amd64"), ("aarch64", "arm64"), ("arm64", "arm64")],
)
def test_architecture_names_are_canonical(text: str, arch: str) -> None:
    assert canonical_arch(text) == arch
    facts = read_host(item(archType=text))
    assert facts is not None and facts.arch == arch


def test_every_fact_is_read_typed() -> None:
    facts = read_host(
        item(
            archType="x86_64",
            cpu={"cores": 64},
            gpus=[
                {
                    "vendor": "NVIDIA",
                    "model": "GA100 [A100 SXM4 80GB]",
                    "gpuCount": 8,
                    "memory": "80 GB",
                    "migCapable": True,
                    "migStrategy": "mixed",
                }
            ],
            nics=[
                {"nicName": "ens2", "ip": "192.168.1.20"},
                {"nicName": "ens1", "ip": "192.168.1.10", "isDefault": True, "subnet": "255.255.255.0"},
            ],
        )
    )
    assert facts is not None
    assert (facts.uid, facts.name, facts.arch, facts.cpu_cores) == ("edge-1", "rack1-node1", "amd64", 64)
    (gpu,) = facts.gpus
    assert (gpu.vendor, gpu.count, gpu.memory, gpu.mig_capable, gpu.mig_strategy) == (
        "NVIDIA",
        8,
        "80 GB",
        True,
        "mixed",
    )
    assert facts.tags == {"palette.ai": "true", "gpus": "8"}
    assert (facts.project_uid, facts.state, facts.health, facts.cluster_uid) == (
        "p-east",
        "in-use",
        "healthy",
        "c1",
    )
    assert facts.addresses == ("192.168.1.10", "192.168.1.20", "10.10.135.182")


def test_odd_values_read_as_absent_never_raise() -> None:
    facts = read_host({"metadata": {"uid": 7}, "spec": {"device": {"cpu": {"cores": "many"}, "gpus": "x"}}})
    assert facts is not None
    assert (facts.uid, facts.cpu_cores, facts.gpus, facts.arch, facts.cluster_uid) == (
        "",
        None,
        (),
        "amd64",
        None,
    )
    assert read_host(["not", "a", "host"]) is None


def test_machines_carry_the_facts_apply_and_mig_need() -> None:
    found = discover(
        [item(archType="aarch64", gpus=[{"model": "GH100 [H100 PCIe]", "gpuCount": 2, "migCapable": True}])]
    )
    (m,) = found.machines
    assert (m.arch, m.project_uid, m.addresses, m.state) == (
        "arm64",
        "p-east",
        ("10.10.135.182",),
        HostState.IN_USE,
    )
    assert m.gpu_devices[0].mig_capable and m.gpu_count == 2


def test_cluster_architecture_is_canonical_so_it_matches_its_machines() -> None:
    """archType x86_64 once made a cluster 'x86_64' while its machines were 'amd64': no scale possible."""
    host = item(archType="x86_64", gpus=[{"model": "GH100 [H100 PCIe]", "gpuCount": 8}])
    labels = {
        "palette.ai/managed-by": "reconciler",
        "palette.ai/namespace": "team",
        "palette.ai/name": "train",
    }
    cluster = {
        "metadata": {"uid": "c1", "name": "team-train", "labels": labels},
        "status": {"state": "Running"},
    }
    (managed,) = managed_clusters([cluster], [host])
    assert managed.arch == "amd64" and managed.workers == ("edge-1",) and managed.project_uid == "p-east"


def test_plan_entries_carry_host_names_and_addresses_for_the_applier() -> None:
    from reconciler.plan import make_plan
    from tests._allocate_support import desired, platform

    cp = item(archType="amd64")
    cp["metadata"].update(uid="edge-cp", name="rack1-cp", labels={"palette.ai": "true"})
    cp["status"] = {"state": "ready", "health": {"state": "healthy"}}
    entry = make_plan(desired(platform("p")), discover([cp]), []).platforms[0]
    assert entry.control_plane == ("edge-cp",)
    assert entry.machines["edge-cp"].name == "rack1-cp"
    assert entry.machines["edge-cp"].addresses == ("10.10.135.182",)
