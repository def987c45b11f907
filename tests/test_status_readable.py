"""What a person reads in ``reconciler status`` and in status commits: decisions in words (never a
mapping's repr), only Pending workloads counted as waiting, host names beside uids (pure)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.commands import inventory as inventory_cmd
from reconciler.status.changes import commit_message
from reconciler.status.details import details, pools_section, scaling_text
from reconciler.status.view import ResourceRow, host_label, host_names
from tests._inventory_support import edge_host, gpu

RECORDED_SCALING = {
    "policy": "gpu-autoscale",
    "size": {"NVIDIA-A100": 24},
    "earlierActions": {},
    "decision": {"decision": "hold", "reason": "ScalingLimited", "message": "at its maximum of 24 GPUs"},
    "prometheusAvailable": {"status": "True", "reason": "Available", "message": "ok"},
}


def _pool(status: dict[str, Any]) -> ResourceRow:
    base = {"mode": "shared", "capacity": {"NVIDIA-A100": {"total": 24, "admitted": 8, "free": 16}}}
    return ResourceRow("ComputePool", "ns", "pool", "Running", "Provisioned", "ok", "ns-pool",
                       status={**base, **status})  # fmt: skip


def _workload(name: str, phase: str, reason: str) -> ResourceRow:
    return ResourceRow("AIWorkload", "ns", name, phase, reason, "m", None, status={"pool": "pool"})


def test_a_recorded_scaling_block_reads_as_its_decision_and_reason_not_a_mapping() -> None:
    pool = _pool({"scaling": RECORDED_SCALING})
    assert scaling_text(pool) == "hold (ScalingLimited)"
    section = pools_section([pool])
    assert "{" not in section and "hold (ScalingLimited)" in section
    lines = details(pool, [pool])
    scaling = next(line for line in lines if line.startswith("scaling:"))
    assert scaling == "scaling: hold (ScalingLimited), gpu-autoscale: at its maximum of 24 GPUs"
    assert "    size: NVIDIA-A100=24" in lines
    assert not any("{'" in line for line in lines)


def test_the_plan_entry_shape_of_scaling_reads_the_same() -> None:
    pool = _pool({"scaling": {"policy": None, "decision": "none", "reason": "NoPolicy", "message": "-"}})
    assert scaling_text(pool) == "none (NoPolicy)"


def test_only_pending_workloads_are_counted_as_waiting() -> None:
    pool = _pool({"admitted": ["ns/a"]})
    found = [
        pool,
        _workload("a", "Running", "Admitted"),
        _workload("b", "Pending", "PoolCapacityExceeded"),
        _workload("c", "Invalid", "InvalidSpec"),
        _workload("d", "Rejected", "GPULimitExceeded"),
        _workload("e", "Suspended", "Suspended"),
    ]
    assert "1 admitted, 1 waiting" in pools_section(found)
    waiting = [line for line in details(pool, found) if line.startswith("waiting:")]
    assert waiting == ["waiting: ns/b Pending (PoolCapacityExceeded): m"]


def test_mig_and_binding_lines_name_hosts_beside_uids() -> None:
    mig = {"edge-1": [{"gpu": 0, "instances": [{"profile": "3g.40gb", "start": 0, "workload": "ns/a"}]}]}
    pool = _pool({"mig": mig, "migSlices": {"used": 4, "free": 4, "stranded": 0}})
    assert "    gpu-a100-01 (edge-1) GPU 0: 3g.40gb@0 ns/a" in details(
        pool, [pool], {"edge-1": "gpu-a100-01"}
    )
    allocation = {"bound": [{"host": "edge-2", "gpu": 1}], "mig": [{"host": "edge-1", "gpu": 0,
                  "profile": "3g.40gb", "start": 0}]}  # fmt: skip
    workload = ResourceRow("AIWorkload", "ns", "a", "Running", "Admitted", "m", None,
                           status={"pool": "pool", "allocation": allocation})  # fmt: skip
    lines = details(workload, [workload], {"edge-1": "gpu-a100-01", "edge-2": "gpu-a100-02"})
    assert "whole GPUs: gpu-a100-02 (edge-2) GPU 1" in lines
    assert "MIG instance: gpu-a100-01 (edge-1) GPU 0 3g.40gb@0" in lines
    assert host_label("edge-9", {}) == "edge-9"


def _snapshot(*hosts: tuple[str, str]) -> bytes:
    return json.dumps({"edgeHosts": [{"metadata": {"uid": u, "name": n}} for u, n in hosts]}).encode()


def _platform(hosts: list[str]) -> bytes:
    status = {"phase": "Running", "conditions": [{"type": "Ready", "reason": "Provisioned", "message": "m"}],
              "allocation": {"controlPlane": hosts[:1], "workers": hosts[1:], "gpus": {}}}  # fmt: skip
    return yaml.safe_dump({"kind": "MLPlatform", "metadata": {}, "status": status}).encode()


def test_status_commit_bodies_name_hosts_beside_uids() -> None:
    inventory = {"inventory/p-tenant.json": _snapshot(("edge-1", "cp-01"), ("edge-2", "gpu-01"))}
    assert host_names({**inventory, "inventory/bad.json": b"{"}) == {"edge-1": "cp-01", "edge-2": "gpu-01"}
    before = {**inventory, "ns/mlplatforms/a.yaml": _platform(["edge-1"])}
    after = {**inventory, "ns/mlplatforms/a.yaml": _platform(["edge-1", "edge-2"])}
    body = commit_message(before, after).split("\n\n")[-1]
    assert "hosts +gpu-01 (edge-2)" in body
    relaid = {"mig": {"edge-2": [{"gpu": 0, "instances": []}]}, "phase": "Running"}
    pool_before = {
        **inventory,
        "ns/computepools/p.yaml": yaml.safe_dump({"status": {"phase": "Running"}}).encode(),
    }
    pool_after = {**inventory, "ns/computepools/p.yaml": yaml.safe_dump({"status": relaid}).encode()}
    assert "MIG layout changed on gpu-01 (edge-2)" in commit_message(pool_before, pool_after)


def test_inventory_show_names_each_available_machine_beside_its_uid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    snapshot = tmp_path / "inv.json"
    hosts = [edge_host("edge-cp", name="cp-01", cores=4), edge_host("edge-gpu", name="gpu-01",
             gpus=[gpu("GH100 [H100 PCIe]", 8)])]  # fmt: skip
    snapshot.write_text(json.dumps({"edgeHosts": hosts}), encoding="utf-8")
    assert inventory_cmd.show(None, snapshot, None, "table") == 0
    out = capsys.readouterr().out
    assert "cp-01 (edge-cp)" in out and "gpu-01 (edge-gpu)" in out
