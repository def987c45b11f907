"""Invalid is not absent, and deliberate removals pass, end to end: the controller against the emulator
and a real git remote. A profile typo, a ScalingPolicy error, a namespace typo and an unidentifiable
document each leave every admitted workload bound (GPUs, MIG instances) with its profiles attached; the
revert moves nothing. Removing two workloads at once is held back until a commit approves it."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from reconciler.emulator import EmulatorServer
from reconciler.runtime.pipeline import Pipeline
from tests._e2e_support import SAMPLE, controller
from tests._git_support import RemoteRepo, git
from tests._loop_support import status_files
from tests.test_e2e_pools import POOL_FILE, TRAINING, TRITON, attached, repo_with, workload

A100 = "NVIDIA-A100"
PROFILE_FILE = "project-b/computeprofile-a100.yaml"
POLICY_FILE = "project-b/scalingpolicy-a100.yaml"
WORKLOADS = ("a-whole", "b-sliced", "c-small")


def _policy() -> str:
    rule = {"family": A100, "scaleUpThreshold": 80, "scaleDownThreshold": 30}
    rule |= {"scaleUpDuration": "5m", "scaleDownDuration": "15m"}
    return yaml.safe_dump(
        {
            "apiVersion": "spectrocloud.com/v1alpha1",
            "kind": "ScalingPolicy",
            "metadata": {"name": "a100-autoscale", "namespace": "project-b"},
            "spec": {
                "gpu": [rule],
                "gpuResourceBounds": [{"family": A100, "minGPUCount": 8, "maxGPUCount": 8}],
            },
        }
    )


def _files() -> dict[str, str | bytes]:
    pool = yaml.safe_load((SAMPLE / POOL_FILE).read_text())
    pool["spec"]["mig"] = {"strategy": "mixed"}
    pool["spec"]["scalingPolicyRef"] = {"name": "a100-autoscale"}
    return {
        POOL_FILE: yaml.safe_dump(pool),
        POLICY_FILE: _policy(),
        "project-b/workloads/a-whole.yaml": workload(
            "a-whole", [{"family": A100, "count": 2}], "pytorch-training-profile"
        ),
        "project-b/workloads/b-sliced.yaml": workload(
            "b-sliced", [{"family": A100, "mig": "3g.40gb", "count": 1}], "triton-inference-profile"
        ),
        "project-b/workloads/c-small.yaml": workload(
            "c-small", [{"family": A100, "mig": "1g.10gb", "count": 2}]
        ),
    }


def _bindings(remote: RemoteRepo) -> dict[str, Any]:
    """Per workload: its pool, bound GPUs, MIG instances and attached profiles, as the status records."""
    files = status_files(remote)
    out: dict[str, Any] = {}
    for name in WORKLOADS:
        status = files[f"project-b/aiworkloads/{name}.yaml"]["status"]
        allocation = status.get("allocation") or {}
        out[name] = (
            status["pool"],
            sorted((b["host"], b["gpu"]) for b in allocation.get("bound", [])),
            sorted((m["host"], m["gpu"], m["profile"], m["start"]) for m in allocation.get("mig", [])),
            sorted(status.get("attachedProfiles", [])),
        )
    return out


def _phases(remote: RemoteRepo) -> dict[str, str]:
    files = status_files(remote)
    return {name: files[f"project-b/aiworkloads/{name}.yaml"]["status"]["phase"] for name in WORKLOADS}


def _settle(ctl: Pipeline, remote: RemoteRepo, ready: Callable[[], bool], passes: int = 30) -> None:
    for _ in range(passes):
        ctl.reconcile_once()
        if ready():
            return
        time.sleep(0.2)  # the emulator provisions in the background
    raise AssertionError("did not settle")


def _pool_layout(remote: RemoteRepo) -> Any:
    status = status_files(remote)["project-b/computepools/shared-a100.yaml"]["status"]
    return status["mig"], status["capacity"], status.get("machinePools")


def _running(emulator: EmulatorServer, tmp_path: Path) -> tuple[dict[str, str | bytes], RemoteRepo, Pipeline]:
    """The story's files in a remote and a controller that has run them all to Running."""
    files = _files()
    remote = repo_with(tmp_path, files)
    ctl = controller(remote, emulator, tmp_path)
    _settle(ctl, remote, lambda: set(_phases(remote).values()) == {"Running"})
    return files, remote, ctl


def test_a_broken_revision_keeps_every_admitted_workload_bound_and_the_revert_moves_nothing(
    mig_emulator: EmulatorServer, tmp_path: Path
) -> None:
    files, remote, ctl = _running(mig_emulator, tmp_path)
    bound = _bindings(remote)
    layout = _pool_layout(remote)
    profiles = attached(mig_emulator)
    assert profiles >= TRAINING | TRITON and any(b[2] for b in bound.values())

    profile = (SAMPLE / PROFILE_FILE).read_text()
    moved = yaml.safe_load(files["project-b/workloads/b-sliced.yaml"])
    moved["metadata"]["namespace"] = "project-bb"
    breaks: dict[str, dict[str, str | bytes | None]] = {
        "ComputeProfile typo": {PROFILE_FILE: profile.replace("minWorkerNodes:", "minWorkerNode:")},
        "ScalingPolicy error": {POLICY_FILE: str(files[POLICY_FILE]).replace("8", "eight")},
        "namespace typo": {"project-b/workloads/b-sliced.yaml": yaml.safe_dump(moved)},
        "unidentifiable document": {"project-b/workloads/b-sliced.yaml": "spec: {}\n---\n" + "kind: [\n"},
    }
    for name, change in breaks.items():
        remote.commit(change, name)
        ctl.reconcile_once()
        assert _bindings(remote) == bound, name
        assert attached(mig_emulator) == profiles, name
        assert _pool_layout(remote) == layout, name
        assert "Invalid" in _phases(remote).values(), name
        remote.commit({p: files[p] for p in change if p in files} | {PROFILE_FILE: profile}, f"revert {name}")
        ctl.reconcile_once()
        assert _bindings(remote) == bound, f"revert {name}"
        assert set(_phases(remote).values()) == {"Running"}, f"revert {name}"
        assert attached(mig_emulator) == profiles and _pool_layout(remote) == layout, f"revert {name}"
    ctl.close()


def test_removing_two_workloads_waits_for_a_commit_that_approves_it(
    mig_emulator: EmulatorServer, tmp_path: Path
) -> None:
    _, remote, ctl = _running(mig_emulator, tmp_path)
    bound = _bindings(remote)
    profiles = attached(mig_emulator)

    gone = {"project-b/workloads/a-whole.yaml": None, "project-b/workloads/b-sliced.yaml": None}
    remote.commit(gone, "retire two workloads")
    ctl.reconcile_once()
    status = status_files(remote)
    for name in ("a-whole", "b-sliced"):
        doc = status[f"project-b/aiworkloads/{name}.yaml"]["status"]
        assert (doc["phase"], doc["conditions"][0]["reason"]) == ("Running", "PruneBlocked")
        assert "remove 2 admitted workloads, more than --max-deletions 1" in doc["conditions"][0]["message"]
    assert _bindings(remote) == bound and attached(mig_emulator) == profiles

    approval = remote.commit(
        {"project-b/README.txt": "retired a-whole and b-sliced\n"},
        "Retire two workloads\n\nReconciler-Allow-Deletions: 2",
    )
    ctl.reconcile_once()
    status = status_files(remote)
    assert (
        "project-b/aiworkloads/a-whole.yaml" not in status
        or status["project-b/aiworkloads/a-whole.yaml"]["status"]["phase"] == "Deleting"
    )
    assert not attached(mig_emulator) & (TRAINING | TRITON)
    message = git("log", "-1", "--format=%B", "reconciler/status", cwd=remote.bare)
    assert f"deletions approved by Reconciler-Allow-Deletions: 2 in {approval[:7]}" in message
    assert "removes 2 admitted workloads" in message
    ctl.close()
