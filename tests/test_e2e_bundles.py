"""Profile Bundles end to end: the controller against the emulator and a real git remote
(docs/bundles.md). A pool built from its bundle's profiles; a workload's bundle attached once admitted
on the Running pool and detached when it leaves; a bundle naming a uid Palette does not know is refused
by the emulator as Palette refuses it, and rejected at plan time when the observation has the catalogue."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from reconciler.emulator import EmulatorServer
from reconciler.emulator.faults import FaultRule
from reconciler.palette.client import PaletteClient
from reconciler.palette.endpoints import CLUSTER_CREATE
from reconciler.resolve import Target
from reconciler.runtime import wiring
from reconciler.runtime.options import ControllerOptions
from reconciler.runtime.pipeline import Pipeline
from tests._e2e_support import SAMPLE, controller
from tests._git_support import RemoteRepo
from tests._loop_support import status_files
from tests._palette_support import fast_retry
from tests.test_e2e_pools import pool_cluster, repo_with

INFRA = "6651a2b3c4d5e6f708192a3c"  # edge-ubuntu-k8s-gpu-infra
DCGM = "66f1a2b3c4d5e6f7a8b9c0f1"  # dcgm-exporter (add-on)
TRITON = "66f1a2b3c4d5e6f7a8b9c0e1"  # triton-inference-profile's add-on
POOL_FILE = "project-b/pools/shared-a100.yaml"


def doc(kind: str, name: str, spec: dict[str, Any], api: str = "spectrocloud.com/v1beta1") -> str:
    return yaml.safe_dump(
        {"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": "project-b"}, "spec": spec}
    )


def bundled_pool(bundle: str, allow_replace: bool = False) -> str:
    pool = yaml.safe_load((SAMPLE / POOL_FILE).read_text())
    pool["spec"].pop("workloadProfileRef", None)
    pool["spec"]["profileBundleRef"] = {"name": bundle}
    if allow_replace:
        pool["metadata"]["annotations"] = {"palette.ai/allow-replace": "true"}
    return yaml.safe_dump(pool)


def files(
    pool_uids: list[str], with_workload: bool, allow_replace: bool = False
) -> dict[str, str | bytes | None]:
    out: dict[str, str | bytes | None] = {
        "project-b/bundles/a100-stack.yaml": doc(
            "ProfileBundle",
            "a100-stack",
            {"type": "Infrastructure", "clusterProfiles": [{"uid": u} for u in pool_uids]},
        ),
        "project-b/bundles/serving.yaml": doc(
            "ProfileBundle",
            "serving",
            {"type": "Application", "workloadProfiles": [{"name": "triton-inference-profile"}]},
        ),
        POOL_FILE: bundled_pool("a100-stack", allow_replace),
    }
    workload = doc(
        "AIWorkload",
        "llm",
        {
            "computePoolRef": {"name": "shared-a100"},
            "profileBundleRef": {"name": "serving"},
            "gpus": [{"family": "NVIDIA-A100", "count": 2}],
        },
        api="spectrocloud.com/v1alpha1",
    )
    if with_workload:
        out["project-b/workloads/llm.yaml"] = workload
    return out


def attached(emulator: EmulatorServer) -> set[str]:
    return {str(p["uid"]) for p in pool_cluster(emulator).profiles}


def until(ctl: Pipeline, check: Any, passes: int = 25) -> None:
    for _ in range(passes):
        ctl.reconcile_once()
        if check():
            return
        time.sleep(0.3)
    raise AssertionError("not reached")


def test_a_bundle_built_pool_and_a_workload_bundle_attached_and_detached(
    emulator: EmulatorServer,
    tmp_path: Path,
) -> None:
    remote = repo_with(tmp_path, files([INFRA, DCGM], with_workload=True))
    ctl = controller(remote, emulator, tmp_path)
    ctl.reconcile_once()
    # The pool's cluster is built from its bundle's profiles alone, in their order.
    assert [str(p["uid"]) for p in pool_cluster(emulator).profiles] == [INFRA, DCGM]

    def llm_running() -> bool:
        status = status_files(remote).get("project-b/aiworkloads/llm.yaml")
        return bool(status) and status["status"]["phase"] == "Running"

    until(ctl, llm_running)
    assert attached(emulator) == {INFRA, DCGM, TRITON}
    status = status_files(remote)["project-b/aiworkloads/llm.yaml"]["status"]
    assert status["attachedProfiles"] == [TRITON]

    # The workload leaves: its bundle's add-on is detached, the pool's own profiles stay.
    remote.commit(
        {**files([INFRA, DCGM], with_workload=False), "project-b/workloads/llm.yaml": None}, "llm leaves"
    )
    until(ctl, lambda: attached(emulator) == {INFRA, DCGM})


def test_a_uid_unknown_to_palette_is_rejected_by_the_pass_and_its_plan_not_when_the_read_fails(
    emulator: EmulatorServer,
    tmp_path: Path,
) -> None:
    unknown = "66aa01b2c3d4e5f607182930"
    remote = repo_with(tmp_path, files([INFRA, unknown], with_workload=False))
    ctl = controller(remote, emulator, tmp_path)
    ctl.reconcile_once()
    # The pass asks Palette about the bundle's uids (GET /v1/clusterprofiles/{uid}); the 404 rejects the
    # pool itself, InvalidSpec, naming the bundle and the uid, and no create is sent.
    emulator.state.sweep()
    assert not [c for c in emulator.state.clusters.values() if c.name == "project-b-shared-a100"]
    assert emulator.stats.count("POST", CLUSTER_CREATE, 400) == 0  # the pool's create was never sent
    assert emulator.stats.count("GET", "/v1/clusterprofiles/{uid}", 404) == 1
    ctl.reconcile_once()  # a type read within the hour is not asked again; the 404 is
    assert emulator.stats.count("GET", "/v1/clusterprofiles/{uid}", 200) == 2  # INFRA and DCGM, once each
    assert emulator.stats.count("GET", "/v1/clusterprofiles/{uid}", 404) == 2
    status = status_files(remote)["project-b/computepools/shared-a100.yaml"]["status"]
    rejection = f"profile bundle a100-stack: cluster profile {unknown} unknown to Palette"
    assert status["conditions"][0]["reason"] == "InvalidSpec"
    assert status["conditions"][0]["message"].startswith(rejection)
    # The plan of the status branch shows the same: Palette's answers are recorded with the inventory.
    (pool,) = [p for p in plan_from_status(remote)["pools"] if p["name"] == "shared-a100"]
    assert (pool["action"], pool["reason"]) == ("rejected", "InvalidSpec")
    assert pool["message"].startswith(rejection)

    # A failed read is never "unknown to Palette": the bundle is not checked, and Palette's own answer
    # to the create (400, naming the uid) is what the pool reports.
    emulator.faults.add([FaultRule(path=r"^/v1/clusterprofiles/", error_rate=1.0, error_status=503)])

    def client(target: Target, key: str) -> PaletteClient:
        return PaletteClient(target.url, key, target.project_uid, retry=fast_retry(max_attempts=2))

    options = ControllerOptions(repo=str(remote.bare), palette_url=emulator.url, cache_dir=tmp_path / "c2")
    wiring.build(options, client_factory=client).reconcile_once()
    status = status_files(remote)["project-b/computepools/shared-a100.yaml"]["status"]
    assert status["conditions"][0]["reason"] != "InvalidSpec"
    assert unknown in json.dumps(status)  # Palette's 400 names the uid


def plan_from_status(remote: RemoteRepo, *flags: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "reconciler.cli", "plan", "--repo", str(remote.bare), "--from-status",
         "--format", "json", *flags],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode in (0, 1), out.stderr
    found = json.loads(out.stdout)
    assert isinstance(found, dict)
    return found


def test_add_ons_of_a_running_pools_bundle_are_attached_and_detached_in_place_and_an_infra_change_held(
    emulator: EmulatorServer,
    tmp_path: Path,
) -> None:
    remote = repo_with(tmp_path, files([INFRA], with_workload=False))
    ctl = controller(remote, emulator, tmp_path)

    def pool_running() -> bool:
        status = status_files(remote).get("project-b/computepools/shared-a100.yaml")
        return bool(status) and status["status"]["phase"] == "Running"

    until(ctl, pool_running)
    hosts = sorted(pool_cluster(emulator).host_uids())
    uid = pool_cluster(emulator).uid
    assert attached(emulator) == {INFRA}
    assert status_files(remote)["project-b/computepools/shared-a100.yaml"]["status"]["profiles"] == [INFRA]

    # An add-on joins the bundle: the pull request's plan says update, attach it; the pass does exactly that.
    remote.commit(files([INFRA, DCGM], with_workload=False), "dcgm add-on")
    (pool,) = [p for p in plan_from_status(remote)["pools"] if p["name"] == "shared-a100"]
    assert (pool["action"], pool["profiles"]) == ("update", {"attach": [DCGM], "detach": []})
    ctl.reconcile_once()
    assert attached(emulator) == {INFRA, DCGM} and pool_cluster(emulator).uid == uid
    assert sorted(pool_cluster(emulator).host_uids()) == hosts  # no host moved
    settled = plan_from_status(remote, "--changes-only")
    assert [p["name"] for p in settled["pools"]] == []

    # ... and leaves it again: detached in place.
    remote.commit(files([INFRA], with_workload=False), "no dcgm")
    ctl.reconcile_once()
    assert attached(emulator) == {INFRA} and pool_cluster(emulator).uid == uid

    # Its infrastructure profile changes: never sent; held with ReplaceBlocked, the cluster as it is.
    other = "6651a2b3c4d5e6f708192a3b"
    remote.commit(files([other], with_workload=False), "other infra")
    (held,) = [p for p in plan_from_status(remote, "--changes-only")["pools"] if p["name"] == "shared-a100"]
    assert (held["action"], held["reason"]) == ("rejected", "ReplaceBlocked")
    assert held["message"] == (
        f"infrastructure profile of running pool changes from {INFRA} to {other}: needs a new cluster "
        "(palette.ai/allow-replace)"
    )
    ctl.reconcile_once()
    assert attached(emulator) == {INFRA} and pool_cluster(emulator).uid == uid
    status = status_files(remote)["project-b/computepools/shared-a100.yaml"]["status"]
    assert status["conditions"][0]["reason"] == "ReplaceBlocked" and status["profiles"] == [INFRA]


def test_with_allow_replace_an_infra_change_replaces_the_running_pools_cluster(
    emulator: EmulatorServer,
    tmp_path: Path,
) -> None:
    remote = repo_with(tmp_path, files([INFRA], with_workload=False))
    ctl = controller(remote, emulator, tmp_path)
    pool_file = "project-b/computepools/shared-a100.yaml"

    def phase() -> str | None:
        status = status_files(remote).get(pool_file)
        return status["status"]["phase"] if status else None

    until(ctl, lambda: phase() == "Running")
    old = pool_cluster(emulator).uid

    # The infrastructure profile changes and the pool allows a replace: the plan says replace, and the
    # pass deletes the cluster; once it is gone the pool's cluster is created from the new bundle.
    other = "6651a2b3c4d5e6f708192a3b"
    remote.commit(files([other, DCGM], with_workload=False, allow_replace=True), "other infra, replace")
    (entry,) = [p for p in plan_from_status(remote)["pools"] if p["name"] == "shared-a100"]
    assert (entry["action"], entry["reason"]) == ("replace", "Provisioning")
    assert f"infrastructure profile changes from {INFRA} to {other}" in entry["message"]
    ctl.reconcile_once()
    assert emulator.state.clusters[old].deleting_since is not None

    def replaced() -> bool:
        emulator.state.sweep()
        return old not in emulator.state.clusters and phase() == "Running"

    until(ctl, replaced)
    cluster = pool_cluster(emulator)
    assert cluster.uid != old
    assert [str(p["uid"]) for p in cluster.profiles] == [other, DCGM]
    assert status_files(remote)[pool_file]["status"]["profiles"] == [other, DCGM]


def own_pool_files(with_workload: bool) -> dict[str, str | bytes | None]:
    out: dict[str, str | bytes | None] = {
        "project-b/bundles/chat-stack.yaml": doc(
            "ProfileBundle",
            "chat-stack",
            {
                "type": "Fullstack",
                "clusterProfiles": [{"uid": INFRA}, {"uid": DCGM}],
                "workloadProfiles": [{"name": "triton-inference-profile"}],
            },
        ),
        "project-b/workloads/chat.yaml": doc(
            "AIWorkload",
            "chat",
            {"profileBundleRef": {"name": "chat-stack"}, "gpus": [{"family": "NVIDIA-A100", "count": 2}]},
            api="spectrocloud.com/v1alpha1",
        ),
    }
    if not with_workload:
        out["project-b/workloads/chat.yaml"] = None
    return out


def test_a_fullstack_workload_without_a_pool_gets_its_own_removed_with_it_as_one_deletion(
    emulator: EmulatorServer,
    tmp_path: Path,
) -> None:
    remote = repo_with(tmp_path, {k: v for k, v in own_pool_files(True).items() if v is not None})
    ctl = controller(remote, emulator, tmp_path, max_deletions=1)
    ctl.reconcile_once()
    (entry,) = [p for p in plan_from_status(remote)["pools"] if p["name"] == "chat"]
    assert (entry["mode"], entry["provisionedFor"]) == ("dedicated", "chat")

    def chat_running() -> bool:
        status = status_files(remote).get("project-b/aiworkloads/chat.yaml")
        return bool(status) and status["status"]["phase"] == "Running"

    until(ctl, chat_running)
    cluster = pool_cluster(emulator)
    assert cluster.name == "project-b-chat"
    assert cluster.labels["palette.ai/kind"] == "ComputePool"
    assert cluster.labels["palette.ai/provisioned-for"] == "AIWorkload"
    assert [str(p["uid"]) for p in cluster.profiles][:2] == [INFRA, DCGM]  # built from the bundle
    pool_status = status_files(remote)["project-b/computepools/chat.yaml"]["status"]
    assert pool_status["phase"] == "Running" and pool_status["provisionedFor"] == "chat"
    assert status_files(remote)["project-b/aiworkloads/chat.yaml"]["status"]["pool"] == "chat"

    # The workload leaves: its pool's cluster goes with it, one deletion within --max-deletions 1.
    remote.commit(own_pool_files(False), "chat leaves")
    (gone,) = [p for p in plan_from_status(remote)["pools"] if p["name"] == "chat"]
    assert (gone["action"], gone["provisionedFor"]) == ("delete", "chat")

    def cluster_gone() -> bool:
        emulator.state.sweep()
        return not [c for c in emulator.state.clusters.values() if c.name == "project-b-chat"]

    until(ctl, cluster_gone)
