"""Environments and project GPU quotas end to end: the controller against the emulator and a real git
remote (docs/environments.md), then ``plan --from-status`` against what the passes recorded."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import yaml

from reconciler.emulator import EmulatorServer
from reconciler.runtime.pipeline import Pipeline
from tests._contract_support import run_cli
from tests._e2e_support import SAMPLE, controller
from tests._git_support import RemoteRepo
from tests._loop_support import status_files
from tests.test_e2e_pools import repo_with

ENV_FILE = "project-b/environment-team-gpus.yaml"


def env_workload(name: str, gpus: int, priority: int = 0) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "spectrocloud.com/v1alpha1",
            "kind": "AIWorkload",
            "metadata": {"name": name, "namespace": "project-b"},
            "spec": {
                "environmentRef": {"name": "team-gpus"},
                "gpus": [{"family": "NVIDIA-A100", "count": gpus}],
                "priority": priority,
            },
        }
    )


def environment(*pools: str) -> str:
    doc = yaml.safe_load((SAMPLE / ENV_FILE).read_text())
    doc["spec"]["pools"] = [{"name": p} for p in pools]
    return yaml.safe_dump(doc)


def project(quota: dict[str, int]) -> str:
    doc = yaml.safe_load((SAMPLE / "project-b/project.yaml").read_text())
    doc["spec"]["gpuQuota"] = quota
    return yaml.safe_dump(doc)


def status(remote: RemoteRepo, kind: str, name: str) -> dict[str, Any]:
    found = status_files(remote)[f"project-b/{kind}/{name}.yaml"]["status"]
    assert isinstance(found, dict)
    return found


def until_settled(ctl: Pipeline, remote: RemoteRepo, passes: int = 25) -> None:
    for _ in range(passes):
        ctl.reconcile_once()
        files = status_files(remote)
        pools = [f for p, f in files.items() if "/computepools/" in p]
        a = files.get("project-b/aiworkloads/a-serve.yaml")
        if (
            pools
            and all(p["status"]["phase"] == "Running" for p in pools)
            and a
            and a["status"]["phase"] == "Running"
        ):
            return
        time.sleep(0.3)
    raise AssertionError("the pools and the workloads placed through the Environment did not settle")


def test_workloads_land_through_their_environment_stay_put_and_the_quota_never_shrinks_anything(
    emulator: EmulatorServer, tmp_path: Path
) -> None:
    remote = repo_with(
        tmp_path,
        {
            "project-b/pools/shared-a100.yaml": (SAMPLE / "project-b/pools/shared-a100.yaml").read_bytes(),
            "project-b/pools/finetune-l40s.yaml": (
                SAMPLE / "project-b/pools/finetune-l40s.yaml"
            ).read_bytes(),
            "project-b/workloads/a-serve.yaml": env_workload("a-serve", 4),
            "project-b/workloads/b-train.yaml": env_workload("b-train", 4),
            "project-b/workloads/c-sweep.yaml": env_workload("c-sweep", 2, priority=-1),
        },
    )
    ctl = controller(remote, emulator, tmp_path)
    until_settled(ctl, remote)

    # finetune-l40s (L40S only) cannot take A100 workloads: both land in shared-a100, the third waits in
    # no pool, and its message names every candidate and why.
    a, b, c = (status(remote, "aiworkloads", n) for n in ("a-serve", "b-train", "c-sweep"))
    assert (a["pool"], a["environment"], a["phase"]) == ("shared-a100", "team-gpus", "Running")
    assert (b["pool"], b["phase"]) == ("shared-a100", "Running")
    assert c["pool"] is None and c["phase"] == "Pending" and c["environment"] == "team-gpus"
    assert c["conditions"][0]["reason"] == "PoolCapacityExceeded"
    assert c["conditions"][0]["message"] == (
        "finetune-l40s: needs 2 NVIDIA-A100 GPUs, 0 free; shared-a100: needs 2, 0 free"
    )
    env = status(remote, "environments", "team-gpus")
    assert env["candidates"] == ["finetune-l40s", "shared-a100"]
    assert env["workloads"] == {"a-serve": "shared-a100", "b-train": "shared-a100", "c-sweep": None}
    quota = status(remote, "projects", "project-b")["gpuQuota"]
    assert quota["NVIDIA-A100"] == {"quota": 32, "used": 24, "free": 8}

    # The Environment changes its order and the quota drops below what runs: nothing moves or shrinks.
    bound = {n: status(remote, "aiworkloads", n)["allocation"] for n in ("a-serve", "b-train")}
    writes = emulator.stats.writes()
    remote.commit(
        {
            ENV_FILE: environment("shared-a100", "finetune-l40s"),
            "project-b/project.yaml": project({"NVIDIA-A100": 20}),
        },
        "reorder team-gpus, lower the A100 quota",
    )
    assert ctl.reconcile_once().error is None
    ctl.close()
    assert emulator.stats.writes() == writes
    assert {n: status(remote, "aiworkloads", n)["allocation"] for n in ("a-serve", "b-train")} == bound
    project_status = status(remote, "projects", "project-b")
    assert project_status["gpuQuota"]["NVIDIA-A100"] == {"quota": 20, "used": 24, "free": 0}
    assert "uses 24 of 20" in project_status["overQuota"]["NVIDIA-A100"]

    # The plan of the settled branch lists nothing to change, and names the quota as the pass left it.
    result = run_cli(
        "plan", "--repo", str(remote.bare), "--from-status", "--changes-only", "--format", "json"
    )
    plan = json.loads(result.stdout)
    assert [w["name"] for w in plan["workloads"]] == ["c-sweep"]  # pending is not unchanged
    assert plan["platforms"] == [] and plan["pools"] == []
    assert {"namespace": "project-b", "family": "NVIDIA-A100", "used": 24, "quota": 20} in plan["quotas"]

    # status shows the Quota table; --format json adds "quotas".
    text = run_cli("status", "--repo", str(remote.bare)).stdout
    assert "Quota" in text and "NVIDIA-A100" in text and "24/20" in text
    shown = json.loads(run_cli("status", "--repo", str(remote.bare), "--format", "json").stdout)
    assert {"namespace": "project-b", "family": "NVIDIA-A100", "used": 24, "quota": 20} in shown["quotas"]
