"""Compute pools and workloads end to end: the controller against the emulator and a real git remote
(docs/pools.md): pool cluster, admission, profiles attached and detached, status files."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.commands import inventory as inventory_command
from reconciler.emulator import EmulatorServer
from reconciler.emulator.faults import FaultRule
from reconciler.model.pools import KIND_LABEL, POOL_KIND
from reconciler.palette.pacing import RateLimits
from reconciler.runtime.pipeline import Pipeline
from tests._e2e_support import SAMPLE, controller, sample_files
from tests._git_support import RemoteRepo
from tests._loop_support import fast_controller, status_files

TRAINING = {"66f1a2b3c4d5e6f7a8b9c0d1", "66f1a2b3c4d5e6f7a8b9c0d2"}  # pytorch-training-profile
TRITON = {"66f1a2b3c4d5e6f7a8b9c0e1"}  # triton-inference-profile
POOL_FILE = "project-b/pools/shared-a100.yaml"


def workload(name: str, gpus: list[dict[str, Any]], profile: str | None = None) -> str:
    spec: dict[str, Any] = {"computePoolRef": {"name": "shared-a100"}, "gpus": gpus}
    if profile is not None:
        spec["workloadProfileRef"] = {"name": profile}
    return yaml.safe_dump(
        {
            "apiVersion": "spectrocloud.com/v1alpha1",
            "kind": "AIWorkload",
            "metadata": {"name": name, "namespace": "project-b"},
            "spec": spec,
        }
    )


def repo_with(tmp_path: Path, extra: dict[str, str | bytes]) -> RemoteRepo:
    """The sample's platforms and profiles, without its pools and workloads, plus ``extra``."""
    files: dict[str, bytes | str | None] = {
        p: d for p, d in sample_files().items() if "/pools/" not in p and "/workloads/" not in p
    }
    files.update(extra)
    (tmp_path / "git").mkdir()
    repo = RemoteRepo(tmp_path / "git")
    repo.commit(files, "platforms")
    return repo


def three_workloads() -> dict[str, str | bytes]:
    return {
        POOL_FILE: (SAMPLE / POOL_FILE).read_bytes(),  # 8 NVIDIA-A100 GPUs on one host
        "project-b/workloads/a-first.yaml": workload(
            "a-first", [{"family": "NVIDIA-A100", "count": 4}], "pytorch-training-profile"
        ),
        "project-b/workloads/b-second.yaml": workload(
            "b-second", [{"family": "NVIDIA-A100", "count": 2}], "triton-inference-profile"
        ),
        "project-b/workloads/c-third.yaml": workload("c-third", [{"family": "NVIDIA-A100", "count": 4}]),
    }


def pool_cluster(emulator: EmulatorServer) -> Any:
    emulator.state.sweep()
    found = [c for c in emulator.state.clusters.values() if c.labels.get(KIND_LABEL) == POOL_KIND]
    assert len(found) == 1, [c.name for c in found]
    return found[0]


def attached(emulator: EmulatorServer) -> set[str]:
    return {str(p["uid"]) for p in pool_cluster(emulator).profiles}


def workload_status(remote: RemoteRepo, name: str) -> dict[str, Any]:
    status = status_files(remote)[f"project-b/aiworkloads/{name}.yaml"]["status"]
    assert isinstance(status, dict)
    return status


def until_pool_running(ctl: Pipeline, remote: RemoteRepo, passes: int = 20) -> None:
    for _ in range(passes):
        ctl.reconcile_once()
        pool = status_files(remote).get("project-b/computepools/shared-a100.yaml")
        if pool and pool["status"]["phase"] == "Running":
            first = workload_status(remote, "a-first")
            if first["phase"] == "Running":
                return
        time.sleep(0.3)
    raise AssertionError("the pool and its workloads did not reach Running")


def test_a_pool_admits_attaches_once_running_and_frees_a_removed_workloads_gpus_in_the_same_pass(
    emulator: EmulatorServer, tmp_path: Path
) -> None:
    remote = repo_with(tmp_path, three_workloads())
    ctl = controller(remote, emulator, tmp_path)
    ctl.reconcile_once()

    # One cluster for the pool, labelled as a pool's; admission happens in the same pass, but the
    # profiles wait for the cluster: Pending, PoolNotReady.
    cluster = pool_cluster(emulator)
    assert cluster.name == "project-b-shared-a100"
    assert cluster.labels["palette.ai/pool-mode"] == "shared"
    own = attached(emulator)
    assert not own & (TRAINING | TRITON)
    first = workload_status(remote, "a-first")
    assert (first["phase"], first["conditions"][0]["reason"]) == ("Pending", "PoolNotReady")
    assert first["pool"] == "shared-a100" and first["allocation"]["gpus"] == {"NVIDIA-A100": 4}

    until_pool_running(ctl, remote)
    assert attached(emulator) == own | TRAINING | TRITON
    first, second, third = (workload_status(remote, n) for n in ("a-first", "b-second", "c-third"))
    assert first["phase"] == second["phase"] == "Running"
    assert set(first["attachedProfiles"]) == TRAINING and set(second["attachedProfiles"]) == TRITON
    assert third["phase"] == "Pending"
    assert third["conditions"][0]["reason"] == "PoolCapacityExceeded"
    assert third["conditions"][0]["message"].startswith(
        "needs 4 NVIDIA-A100 GPUs, 2 free in pool shared-a100 (8 total, 6 admitted)"
    )
    assert (
        "frees when project-b/b-second is removed, or the pool grows by 2"
        in third["conditions"][0]["message"]
    )
    pool = status_files(remote)["project-b/computepools/shared-a100.yaml"]["status"]
    assert pool["capacity"] == {"NVIDIA-A100": {"total": 8, "admitted": 6, "free": 2}}
    assert pool["admitted"] == ["project-b/a-first", "project-b/b-second"]
    assert pool["mode"] == "shared" and pool["cluster"]["name"] == "project-b-shared-a100"

    # A restart (fresh controller, fresh cache, same status branch): admissions are sticky, nothing is
    # attached twice.
    bound_before = {n: workload_status(remote, n).get("allocation") for n in ("a-first", "b-second")}
    ctl.close()
    writes = emulator.stats.writes()
    fresh = controller(remote, emulator, tmp_path / "restart")
    fresh.reconcile_once()
    assert {n: workload_status(remote, n).get("allocation") for n in ("a-first", "b-second")} == bound_before
    assert emulator.stats.writes() == writes
    assert attached(emulator) == own | TRAINING | TRITON

    # Removing the first: its profiles are detached (not the pool's, not the second's) and the third
    # takes its GPUs in the same pass.
    remote.commit({"project-b/workloads/a-first.yaml": None}, "retire a-first")
    result = fresh.reconcile_once()
    fresh.close()
    assert result.error is None
    assert attached(emulator) == own | TRITON
    files = status_files(remote)
    assert "project-b/aiworkloads/a-first.yaml" not in files
    third = workload_status(remote, "c-third")
    assert third["phase"] == "Running" and third["allocation"]["gpus"] == {"NVIDIA-A100": 4}
    second = workload_status(remote, "b-second")
    assert second["allocation"] == bound_before["b-second"]  # the second is not moved
    taken = {(b["host"], b["gpu"]) for b in second["allocation"]["bound"]}
    assert not taken & {(b["host"], b["gpu"]) for b in third["allocation"]["bound"]}
    assert pool_cluster(emulator).uid == cluster.uid  # removing a workload is not a cluster deletion


def test_a_mig_pool_renders_layouts_config_machine_pools_and_the_workloads_instances(
    mig_emulator: EmulatorServer, tmp_path: Path
) -> None:
    pool = yaml.safe_load((SAMPLE / POOL_FILE).read_text())
    pool["spec"]["mig"] = {"strategy": "mixed"}
    remote = repo_with(
        tmp_path,
        {
            POOL_FILE: yaml.safe_dump(pool),
            "project-b/workloads/a-first.yaml": workload(
                "a-first",
                [
                    {"family": "NVIDIA-A100", "count": 2},
                    {"family": "NVIDIA-A100", "mig": "3g.40gb", "count": 1},
                ],
            ),
            "project-b/workloads/b-second.yaml": workload(
                "b-second", [{"family": "NVIDIA-A100", "mig": "1g.10gb", "count": 2}]
            ),
        },
    )
    ctl = controller(remote, mig_emulator, tmp_path)
    until_pool_running(ctl, remote)
    ctl.close()
    metrics = ctl.metrics.render().decode()

    files = status_files(remote)
    status = files["project-b/computepools/shared-a100.yaml"]["status"]
    host = pool_cluster(mig_emulator).host_uids()
    (mig_host,) = status["mig"]
    assert mig_host in host
    gpus = status["mig"][mig_host]
    assert len(gpus) == 1  # both workloads' instances share one GPU switched to MIG
    profiles = sorted(i["profile"] for i in gpus[0]["instances"] if i["workload"] is not None)
    assert profiles == ["1g.10gb", "1g.10gb", "3g.40gb"]
    assert status["migConfig"]["version"] == "v1"
    (config,) = [name for name in status["migConfig"]["mig-configs"] if name != "all-disabled"]
    assert status["machinePools"] == [
        {"name": config, "labels": {"nvidia.com/mig.config": config}, "hosts": [mig_host]}
    ]
    assert status["migSlices"]["used"] == 6 and status["migSlices"]["stranded"] >= 0
    assert status["capacity"]["NVIDIA-A100"]["admitted"] == 3  # 2 whole + 1 in MIG mode
    labels = 'namespace="project-b",pool="shared-a100"'
    assert f"reconciler_pool_mig_instances_in_use{{{labels}}} 3.0" in metrics
    assert (
        f"reconciler_pool_mig_stranded_slices{{{labels}}} {float(status['migSlices']['stranded'])}" in metrics
    )

    first = files["project-b/aiworkloads/a-first.yaml"]["status"]
    assert first["allocation"]["gpus"] == {"NVIDIA-A100": 2}
    assert [(m["host"], m["profile"]) for m in first["allocation"]["mig"]] == [(mig_host, "3g.40gb")]
    second = files["project-b/aiworkloads/b-second.yaml"]["status"]
    assert [m["profile"] for m in second["allocation"]["mig"]] == ["1g.10gb", "1g.10gb"]
    assert second["phase"] == "Running"

    # The host with a layout sits in a machine pool labelled with its mig-parted config.
    cluster = pool_cluster(mig_emulator)
    by_name = {p.name: p for p in cluster.pools}
    assert by_name[config].hosts == [mig_host]
    assert by_name[config].config["additionalLabels"]["nvidia.com/mig.config"] == config
    assert "worker-pool" not in by_name or mig_host not in by_name["worker-pool"].hosts

    # A restart reads the layout and the instances back: nothing moves, nothing is written.
    writes = mig_emulator.stats.writes()
    fresh = controller(remote, mig_emulator, tmp_path / "restart")
    fresh.reconcile_once()
    fresh.close()
    again = status_files(remote)
    assert again["project-b/computepools/shared-a100.yaml"]["status"]["mig"] == status["mig"]
    assert again["project-b/aiworkloads/b-second.yaml"]["status"]["allocation"] == second["allocation"]
    assert mig_emulator.stats.writes() == writes


def test_inventory_show_names_the_pool_or_platform_that_holds_each_host(
    emulator: EmulatorServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    remote = repo_with(tmp_path, three_workloads())
    ctl = controller(remote, emulator, tmp_path)
    ctl.reconcile_once()
    ctl.close()
    assert inventory_command.show(emulator.url, None, None, "json") == 0
    held = {h["name"]: h for h in json.loads(capsys.readouterr().out)["inUseMachines"]}
    pool_hosts = {n for n, h in held.items() if h.get("heldBy", {}).get("kind") == POOL_KIND}
    assert pool_hosts == {"gpu-a100-03", "cp-12"}
    assert {held[n]["heldBy"]["name"] for n in pool_hosts} == {"shared-a100"}
    assert {held[n]["cluster"] for n in pool_hosts} == {"project-b-shared-a100"}
    inference = held["gpu-l40s-01"]["heldBy"]
    assert inference == {"kind": "MLPlatform", "namespace": "project-b", "name": "inference"}


def test_an_outage_keeps_the_last_facts_of_pools_and_workloads_with_palette_unreachable(
    emulator: EmulatorServer, tmp_path: Path
) -> None:
    remote = repo_with(tmp_path, three_workloads())
    ctl = fast_controller(remote, emulator.url, tmp_path / "cache", palette_rate_limits=RateLimits.off())
    until_pool_running(ctl, remote)
    before = status_files(remote)
    emulator.faults.add([FaultRule(path=r"^/v1/", error_rate=1.0, error_status=503)])
    ctl.reconcile_once()
    ctl.close()
    after = status_files(remote)
    for path in ("project-b/computepools/shared-a100.yaml", "project-b/aiworkloads/a-first.yaml"):
        kept, was = after[path]["status"], before[path]["status"]
        conditions = {c["type"]: c for c in kept["conditions"]}
        assert conditions["PaletteReachable"]["status"] == "False", path
        assert conditions["PaletteReachable"]["reason"] == "PaletteUnavailable"
        assert conditions["Ready"]["status"] == "Unknown"
        assert kept["phase"] == was["phase"] == "Running"
        for key in ("allocation", "cluster", "capacity", "admitted", "attachedProfiles", "pool"):
            assert kept.get(key) == was.get(key), (path, key)
    assert "project-b/aiworkloads/c-third.yaml" in after  # the pending one keeps its file too


def test_a_host_that_switches_to_mig_moves_from_worker_pool_to_its_config_machine_pool(
    mig_emulator: EmulatorServer, tmp_path: Path
) -> None:
    pool = yaml.safe_load((SAMPLE / POOL_FILE).read_text())
    pool["spec"]["mig"] = {"strategy": "mixed"}
    remote = repo_with(tmp_path, {POOL_FILE: yaml.safe_dump(pool)})
    ctl = controller(remote, mig_emulator, tmp_path)
    for _ in range(20):
        ctl.reconcile_once()
        pool_status = status_files(remote)["project-b/computepools/shared-a100.yaml"]["status"]
        if pool_status["phase"] == "Running":
            break
        time.sleep(0.3)
    cluster = pool_cluster(mig_emulator)
    (host,) = [h for p in cluster.pools if p.name == "worker-pool" for h in p.hosts]  # all GPUs whole

    remote.commit(
        {
            "project-b/workloads/a-first.yaml": workload(
                "a-first", [{"family": "NVIDIA-A100", "mig": "1g.10gb", "count": 1}]
            )
        },
        "a MIG workload",
    )
    ctl.reconcile_once()
    ctl.close()
    status = status_files(remote)["project-b/computepools/shared-a100.yaml"]["status"]
    (machine_pool,) = status["machinePools"]
    assert machine_pool["hosts"] == [host]
    pools = {p.name: p.hosts for p in pool_cluster(mig_emulator).pools}
    assert pools[machine_pool["name"]] == [host] and pools["worker-pool"] == []
    assert pool_cluster(mig_emulator).uid == cluster.uid  # the same cluster: hosts moved, nothing replaced
    first = status_files(remote)["project-b/aiworkloads/a-first.yaml"]["status"]
    assert first["phase"] == "Running" and [m["profile"] for m in first["allocation"]["mig"]] == ["1g.10gb"]
