"""``reconciler status`` beyond platforms: Computes, pools (capacity, admitted, MIG, scaling), what needs
attention, and the history of a resource whose status file is gone. The status branch is written by
hand (a real git repository), so each case says exactly what the branch holds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from reconciler.commands import status as status_command
from tests._git_support import RemoteRepo

BRANCH = "reconciler/status"
SOURCE = "c0ffee" * 6 + "abcd"


def _doc(kind: str, ns: str, name: str, status: dict[str, object]) -> str:
    return yaml.safe_dump({"apiVersion": "palette.ai/v1alpha1", "kind": kind,
                           "metadata": {"namespace": ns, "name": name}, "status": status})  # fmt: skip


def _ready(phase: str, reason: str, message: str) -> dict[str, object]:
    status = "True" if phase == "Running" else "False"
    return {"phase": phase, "conditions": [{"type": "Ready", "status": status, "reason": reason,
            "message": message, "lastTransitionTime": "2026-01-01T00:00:00Z"}]}  # fmt: skip


POOL = {
    **_ready("Running", "Provisioned", "cluster team-a-pool is Running"),
    "cluster": {"uid": "c1", "name": "team-a-pool", "state": "Running"},
    "allocation": {"controlPlane": ["edge-cp"], "workers": ["edge-a100"], "gpus": {"NVIDIA-A100": 8}},
    "mode": "shared",
    "capacity": {"NVIDIA-A100": {"total": 8, "admitted": 3, "free": 5}},
    "admitted": ["team-a/serve"],
    "mig": {"edge-a100": [{"gpu": 0, "instances": [
        {"profile": "3g.40gb", "start": 0, "workload": "team-a/serve"},
        {"profile": "3g.40gb", "start": 4, "workload": None}]}]},
    "migSlices": {"used": 4, "free": 4, "stranded": 0},
    "scaling": {"policy": "grow", "decision": "hold", "reason": "ScalingLimited",
                "message": "at maxGPUs 8"},
}  # fmt: skip
PENDING = {
    **_ready("Pending", "PoolCapacityExceeded", "needs 16 NVIDIA-A100 GPUs, 5 free in pool pool"),
    "pool": "pool",
}
COMPUTE = {
    "availableControlPlaneCompute": [],
    "availableWorkerCompute": [{"family": "NVIDIA A100", "gpuCount": 8, "instances": 1,
                                "machines": ["edge-free"]}],
    "inUseMachines": [{"name": "cp", "uid": "edge-cp"}],
    "excludedMachines": [],
}  # fmt: skip


def _commit(repo: RemoteRepo, files: dict[str, str | None], subject: str) -> str:
    message = f"{subject}\n\nSource-Revision: {SOURCE}\nSource-Subject: merge #1\nSource-Author: A <a@x>"
    return repo.commit({k: v.encode() if v is not None else None for k, v in files.items()}, message)


@pytest.fixture
def branch(tmp_path: Path) -> RemoteRepo:
    repo = RemoteRepo(tmp_path, branch=BRANCH)
    _commit(repo, {
        "reconciler.yaml": yaml.safe_dump({"branch": "main", "revision": SOURCE, "targets": []}),
        "team-a/computepools/pool.yaml": _doc("ComputePool", "team-a", "pool", POOL),
        "team-a/aiworkloads/train.yaml": _doc("AIWorkload", "team-a", "train", PENDING),
        "team-a/computes/edge.yaml": _doc("Compute", "team-a", "edge", COMPUTE),
        "team-a/mlplatforms/old.yaml": _doc("MLPlatform", "team-a", "old",
                                            {**_ready("Running", "Provisioned", "ok"),
                                             "cluster": {"name": "team-a-old"}}),
    }, "5 created")  # fmt: skip
    _commit(repo, {"team-a/mlplatforms/old.yaml": None}, "team-a/old: Deleting -> removed")
    return repo


def _status(repo: RemoteRepo, capsys: pytest.CaptureFixture[str], *args: str, fmt: str = "text") -> str:
    history = "--history" in args
    resource = next((a for a in args if a != "--history"), None)
    code = status_command.run(str(repo.bare), BRANCH, resource, history, fmt, None)
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_a_compute_is_listed_and_shown_alone(branch: RemoteRepo, capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(_status(branch, capsys, fmt="json"))
    compute = next(r for r in doc["resources"] if r["kind"] == "Compute")
    assert compute["hosts"] == ["edge-free"] and compute["gpus"] == {"NVIDIA-A100": 8}
    assert doc["revision"] == SOURCE
    one = _status(branch, capsys, "team-a/edge")
    assert "Compute" in one and "1 hosts available, 1 in use, 0 excluded" in one
    assert "team-a/edge" in _status(branch, capsys, "team-a/computes/edge")


def test_the_table_has_pools_by_family_and_what_waits_with_its_reason(
    branch: RemoteRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _status(branch, capsys)
    pool_line = next(line for line in out.splitlines() if line.startswith("team-a/pool "))
    assert pool_line.split()[:6] == ["team-a/pool", "shared", "NVIDIA-A100", "8", "3", "5"]
    assert "1 admitted, 1 waiting" in pool_line and "4 used, 4 free, 0 stranded" in pool_line
    assert "hold (ScalingLimited)" in pool_line
    waits = next(line for line in out.splitlines() if line.startswith("AIWorkload  team-a/train"))
    assert "PoolCapacityExceeded: needs 16 NVIDIA-A100 GPUs" in waits


def test_one_pool_lists_its_mig_layout_admitted_waiting_and_scaling(
    branch: RemoteRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _status(branch, capsys, "team-a/pool")
    assert "NVIDIA-A100: 8 total, 3 admitted, 5 free" in out
    assert "admitted: team-a/serve" in out
    assert "waiting: team-a/train Pending (PoolCapacityExceeded)" in out
    assert "edge-a100 GPU 0: 3g.40gb@0 team-a/serve, 3g.40gb@4 free" in out
    assert "scaling: hold (ScalingLimited), grow: at maxGPUs 8" in out


def test_history_of_a_deleted_resource_walks_the_log_of_its_gone_file(
    branch: RemoteRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = json.loads(_status(branch, capsys, "team-a/old", "--history", fmt="json"))
    assert doc["resource"]["phase"] == "Deleted" and doc["resource"]["cluster"] == "team-a-old"
    assert [h["phase"] for h in doc["history"]] == ["Deleted", "Running"]
    assert all(h["sourceRevision"] == SOURCE and h["sourceSubject"] == "merge #1" for h in doc["history"])
    code = status_command.run(str(branch.bare), BRANCH, "team-a/old", False, "text", None)
    assert code == 2 and "see --history" in capsys.readouterr().err


def test_an_unknown_resource_or_kind_exits_2(branch: RemoteRepo, capsys: pytest.CaptureFixture[str]) -> None:
    assert status_command.run(str(branch.bare), BRANCH, "team-a/nothing", True, "text", None) == 2
    assert status_command.run(str(branch.bare), BRANCH, "team-a/widgets/x", False, "text", None) == 2
    assert "unknown kind" in capsys.readouterr().err


def test_a_pools_mig_layout_names_its_hosts_when_the_inventory_does() -> None:
    from reconciler.status.details import details
    from reconciler.status.view import row_of

    row = row_of("team-a/computepools/pool.yaml", _doc("ComputePool", "team-a", "pool", POOL).encode())
    assert row is not None
    lines = details(row, [row], {"edge-a100": "gpu-a100-01"})
    assert "    gpu-a100-01 (edge-a100) GPU 0: 3g.40gb@0 team-a/serve, 3g.40gb@4 free" in lines
