"""A pending MIG workload grows its pool (demand, no metrics needed) and is then admitted; a workload
rejected by a limit never causes a scale-up. The in-process controller against the emulator (the sample's
A100 hosts reported MIG-capable) and a real git remote; Prometheus answers no data."""

from __future__ import annotations

import time
from pathlib import Path

import yaml

from reconciler.emulator import EmulatorServer
from tests._git_support import RemoteRepo
from tests._loop_support import status_files
from tests._prometheus_support import FakePrometheus
from tests._scaling_support import pool_workload
from tests.test_e2e_scaling import (
    WINDOW,
    gpu_hosts,
    last_action,
    passes_until,
    pool_manifest,
    repo,
    running,
    start,
    status_log,
)


def document(name: str, spec: dict[str, object]) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "spectrocloud.com/v1alpha1",
            "kind": "AIWorkload",
            "metadata": {"name": name, "namespace": "project-b"},
            "spec": {"computePoolRef": {"name": "shared-a100"}, **spec},
        }
    )


def test_a_pending_mig_workload_grows_its_pool_and_a_limit_rejected_one_does_not(
    a100_mig_emulator: EmulatorServer, tmp_path: Path
) -> None:
    emulator = a100_mig_emulator
    remote: RemoteRepo = repo(tmp_path)
    pool = yaml.safe_load(pool_manifest())
    pool["spec"]["mig"] = {"strategy": "mixed"}
    remote.commit(
        {
            "project-b/pools/shared-a100.yaml": yaml.safe_dump(pool),
            "project-b/workloads/holder.yaml": pool_workload("holder", 8),
        },
        "a MIG pool, full",
    )
    with FakePrometheus() as fake:  # no data: only demand can scale
        ctl = start(remote, emulator, fake.url, tmp_path / "cache")
        try:
            running(ctl, remote)
            first = gpu_hosts(emulator)
            greedy = {"replicas": 3, "gpus": [{"family": "NVIDIA-A100", "count": 6}]}  # 18 > gpuLimits 16
            serve = {"gpus": [{"family": "NVIDIA-A100", "mig": "3g.40gb", "count": 2}]}
            remote.commit(
                {
                    "project-b/workloads/a-greedy.yaml": document("a-greedy", greedy),
                    "project-b/workloads/mig-serve.yaml": document("mig-serve", serve),
                },
                "a workload over the limit and a MIG workload that does not fit",
            )
            ctl.reconcile_once()
            files = status_files(remote)
            rejected = files["project-b/aiworkloads/a-greedy.yaml"]["status"]
            assert (rejected["phase"], rejected["conditions"][0]["reason"]) == (
                "Rejected",
                "GPULimitExceeded",
            )
            pending = files["project-b/aiworkloads/mig-serve.yaml"]["status"]
            assert pending["phase"] == "Pending"
            assert pending["conditions"][0]["reason"] == "PoolCapacityExceeded"  # no GPU free to switch
            since = time.time()
            up = passes_until(ctl, remote, lambda s: last_action(s) is not None, 120, "a demand scale-up")
            assert time.time() - since >= WINDOW - 1
            action = last_action(up)
            assert action is not None and action["trigger"] == "PendingDemand"
            assert action["inputs"]["pending"]["workload"] == "project-b/mig-serve"  # never a-greedy
            assert action["inputs"]["pending"]["mig"] is True
            added = gpu_hosts(emulator) - first
            assert len(added) == 1

            def serving(_status: object) -> bool:
                return (
                    status_files(remote)["project-b/aiworkloads/mig-serve.yaml"]["status"]["phase"]
                    == "Running"
                )

            admitted = passes_until(ctl, remote, serving, 120, "the MIG workload admitted")
            assert admitted["scaling"]["size"] == {"NVIDIA-A100": 16}
            allocation = status_files(remote)["project-b/aiworkloads/mig-serve.yaml"]["status"]["allocation"]
            assert [(m["profile"], m["replica"]) for m in allocation["mig"]] == [
                ("3g.40gb", 0),
                ("3g.40gb", 0),
            ]
            assert len({m["host"] for m in allocation["mig"]}) == 1
        finally:
            ctl.close()
    assert "project-b/mig-serve pending for" in status_log(remote)
