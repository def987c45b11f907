"""Scaling policies in the loop: the in-process controller against the emulator, a real git remote and a
real Prometheus scraping the emulator's ``/metrics/clusters`` (docs/scaling.md, docs/scaling.md).

One pool (``project-b/shared-a100``, 8 NVIDIA-A100 GPUs, network-pool 3: three free 8-GPU A100 hosts
may join) with a policy of short windows (3 s at a 1 s step, 10 s cooldown) and one workload holding 4
of its GPUs. Utilisation set high on the emulator -> one host added and recorded; nothing more during
the cooldown, also across a restart; Prometheus stopped -> no scale-down, ``PrometheusAvailable=False``;
Prometheus back with low utilisation -> one host removed, never the one holding the workload's GPUs.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from structlog.testing import capture_logs

from reconciler.emulator import EmulatorServer
from reconciler.emulator.utilization import METRICS_PATH
from reconciler.model.pools import KIND_LABEL, POOL_KIND
from reconciler.palette.pacing import RateLimits
from reconciler.runtime.pipeline import Pipeline
from tests._e2e_support import SAMPLE, sample_files
from tests._git_support import RemoteRepo, git
from tests._loop_support import fast_controller, status_files
from tests._prometheus_support import BINARY, FakePrometheus, PrometheusServer
from tests._scaling_support import policy_document, pool_workload

# CI installs Prometheus (.ci/run): there a missing binary is a failure, not a skip.
needs_prometheus = pytest.mark.skipif(
    BINARY is None and not os.environ.get("CI"),
    reason="the prometheus binary is not installed (apt-get install prometheus)",
)
pytestmark = pytest.mark.e2e

POOL = "project-b/computepools/shared-a100.yaml"
COOLDOWN = 10.0
WINDOW = 3

POLICY = policy_document(window=f"{WINDOW}s", cooldown=f"{COOLDOWN:g}s", abort="5m", step="1s")


def pool_manifest(policy: bool = True) -> str:
    pool = yaml.safe_load((SAMPLE / "project-b/pools/shared-a100.yaml").read_text())
    pool["spec"]["resourceGroups"] = {"network-pool": "3"}  # gpu-a100-01..03 may all join
    if policy:
        pool["spec"]["scalingPolicyRef"] = {"name": "gpu-autoscale"}
    return yaml.safe_dump(pool)


def repo(tmp_path: Path, policy: bool = True) -> RemoteRepo:
    """Project b's settings and profiles, no platforms, the pool (with its policy) and one workload."""
    files: dict[str, bytes | str | None] = {
        p: d
        for p, d in sample_files().items()
        if p.startswith("project-b/") and not any(s in p for s in ("/pools/", "/workloads/", "/platforms/"))
    }
    files["project-b/pools/shared-a100.yaml"] = pool_manifest(policy)
    files["project-b/scalingpolicy.yaml"] = yaml.safe_dump(POLICY)
    files["project-b/workloads/holder.yaml"] = pool_workload("holder", 4)
    (tmp_path / "git").mkdir()
    remote = RemoteRepo(tmp_path / "git")
    remote.commit(files, "a pool with a scaling policy")
    return remote


@pytest.fixture
def remote(tmp_path: Path) -> RemoteRepo:
    return repo(tmp_path)


@pytest.fixture
def prometheus(emulator: EmulatorServer, tmp_path: Path) -> Iterator[PrometheusServer]:
    with PrometheusServer(
        tmp_path / "prometheus", emulator.url.removeprefix("http://"), METRICS_PATH
    ) as server:
        yield server


def start(
    remote: RemoteRepo, emulator: EmulatorServer, prometheus: str, cache: Path, **options: Any
) -> Pipeline:
    return fast_controller(
        remote,
        emulator.url,
        cache,
        prometheus_url=prometheus,
        palette_rate_limits=RateLimits.off(),
        **options,
    )


def pool_cluster(emulator: EmulatorServer) -> Any:
    emulator.state.sweep()
    found = [c for c in emulator.state.clusters.values() if c.labels.get(KIND_LABEL) == POOL_KIND]
    assert len(found) == 1
    return found[0]


def gpu_hosts(emulator: EmulatorServer) -> set[str]:
    """Names of the pool cluster's GPU hosts, as the emulator holds them."""
    cluster = pool_cluster(emulator)
    names = set()
    for uid in cluster.host_uids():
        host = emulator.state.hosts[uid]
        name = str(host["metadata"]["name"])
        if name.startswith("gpu-"):
            names.add(name)
    return names


def pool_status(remote: RemoteRepo) -> dict[str, Any]:
    status = status_files(remote)[POOL]["status"]
    assert isinstance(status, dict)
    return status


def set_utilisation(emulator: EmulatorServer, gpu: float) -> None:
    uid = pool_cluster(emulator).uid
    response = httpx.patch(f"{emulator.url}/__emulator/clusters/{uid}/utilization", json={"gpu": gpu})
    assert response.status_code == 200, response.text


def passes_until(ctl: Pipeline, remote: RemoteRepo, done: Any, timeout: float, what: str) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        ctl.reconcile_once()
        status = pool_status(remote)
        if done(status):
            return status
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not within {timeout} s; scaling: {status.get('scaling')}")
        time.sleep(0.3)


def last_action(status: dict[str, Any]) -> dict[str, Any] | None:
    scaling = status.get("scaling") or {}
    action = scaling.get("lastAction")
    return action if isinstance(action, dict) else None


def hand_commit(remote: RemoteRepo, files: dict[str, bytes]) -> None:
    """Someone edits the status branch with plain git."""
    git("fetch", "--quiet", "origin", "reconciler/status", cwd=remote.work)
    git("checkout", "--quiet", "-B", "hand", "FETCH_HEAD", cwd=remote.work)
    for path, data in files.items():
        (remote.work / path).write_bytes(data)
        git("add", path, cwd=remote.work)
    git("commit", "--quiet", "-m", "hand edit", cwd=remote.work)
    git("push", "--quiet", "origin", "HEAD:refs/heads/reconciler/status", cwd=remote.work)


def status_log(remote: RemoteRepo) -> str:
    return git("log", "--format=%B%x00", "reconciler/status", cwd=remote.bare)


@needs_prometheus
def test_pool_scales_up_on_high_utilisation_keeps_its_cooldown_and_scales_down_a_free_host(
    emulator: EmulatorServer, remote: RemoteRepo, prometheus: PrometheusServer, tmp_path: Path
) -> None:
    ctl = start(remote, emulator, prometheus.url, tmp_path / "cache")
    try:
        passes_until(ctl, remote, lambda s: s["phase"] == "Running", 120, "the pool Running")
        first = gpu_hosts(emulator)
        assert len(first) == 1
        holder = status_files(remote)["project-b/aiworkloads/holder.yaml"]["status"]
        held = {b["hostName"] for b in holder["allocation"]["bound"]}
        assert held == first

        # Busy: one host added once the window is full, recorded in the pool's status and the commit.
        set_utilisation(emulator, 0.95)
        up = passes_until(ctl, remote, lambda s: last_action(s) is not None, 120, "a scale-up")
        scaled_at = time.time()
        action = last_action(up)
        assert action is not None
        assert (action["direction"], action["family"], action["gpus"]) == ("up", "NVIDIA-A100", 8)
        assert action["trigger"] == "UtilisationHigh" and action["inputs"]["samples"] == WINDOW + 1
        assert up["scaling"]["size"] == {"NVIDIA-A100": 16}
        added = set(action["hosts"])
        assert len(added) == 1 and not added & first
        assert gpu_hosts(emulator) == first | added
        log = status_log(remote)
        assert "scaled up shared-a100 by 1 NVIDIA-A100 host (8 GPUs): GPU utilisation" in log
        assert "policy: project-b/gpu-autoscale" in log
        at = action["at"]

        # Still busy, within the cooldown: nothing more.
        for _ in range(4):
            ctl.reconcile_once()
            time.sleep(0.3)
        assert gpu_hosts(emulator) == first | added
    finally:
        ctl.close()

    # A restart (a fresh controller, the same status branch) keeps the cooldown.
    ctl = start(remote, emulator, prometheus.url, tmp_path / "cache-2")
    try:
        ctl.reconcile_once()
        status = pool_status(remote)
        action = last_action(status)
        assert action is not None and action["at"] == at and action["direction"] == "up"
        assert status["scaling"]["decision"]["reason"] in ("Cooldown", "ScalingInProgress")
        assert gpu_hosts(emulator) == first | added

        # Idle, still within the cooldown: nothing happens. Prometheus keeps the last scraped (idle)
        # samples across its restart below (its 5 min lookback fills the steps it did not scrape).
        set_utilisation(emulator, 0.05)
        for _ in range(6):
            ctl.reconcile_once()
            time.sleep(0.3)
        assert last_action(pool_status(remote)) == action
        assert gpu_hosts(emulator) == first | added

        # Idle, but Prometheus is gone: no scale-down, PrometheusAvailable=False, past the cooldown.
        prometheus.stop()
        blind = passes_until(
            ctl,
            remote,
            lambda s: (
                s["scaling"]["prometheusAvailable"]["status"] == "False"
                and time.time() > scaled_at + COOLDOWN + WINDOW
            ),
            COOLDOWN + WINDOW + 120,
            "PrometheusAvailable=False past the cooldown",
        )
        assert blind["scaling"]["prometheusAvailable"]["reason"] == "PrometheusUnavailable"
        assert last_action(blind) == action
        assert gpu_hosts(emulator) == first | added

        # Prometheus back, still idle: one host removed, not the one holding the workload's GPUs.
        prometheus.start()
        down = passes_until(
            ctl,
            remote,
            lambda s: (a := last_action(s)) is not None and a["direction"] == "down",
            120,
            "a scale-down",
        )
        removed = last_action(down)
        assert removed is not None and removed["trigger"] == "UtilisationLow"
        assert set(removed["hosts"]) == added and not set(removed["hosts"]) & held
        assert gpu_hosts(emulator) == first == held
        assert down["scaling"]["size"] == {"NVIDIA-A100": 8}
        assert "scaled down shared-a100 by 1 NVIDIA-A100 host (8 GPUs)" in status_log(remote)
    finally:
        ctl.close()


# --- the wiring's other rules, against an in-process server answering Prometheus's range API ----------


def running(ctl: Pipeline, remote: RemoteRepo) -> None:
    passes_until(ctl, remote, lambda s: s["phase"] == "Running", 120, "the pool Running")


def test_a_pool_without_a_policy_sends_no_query(emulator: EmulatorServer, tmp_path: Path) -> None:
    remote = repo(tmp_path, policy=False)
    with FakePrometheus() as fake:
        fake.answers.values = {"DCGM_FI_PROF_GR_ENGINE_ACTIVE": 95}
        ctl = start(remote, emulator, fake.url, tmp_path / "cache")
        try:
            running(ctl, remote)
            ctl.reconcile_once()
        finally:
            ctl.close()
        assert fake.answers.requests == []
    scaling = pool_status(remote)["scaling"]
    assert (scaling["policy"], scaling["decision"], scaling["reason"]) == (None, "none", "NoPolicy")
    assert len(gpu_hosts(emulator)) == 1


def test_an_unreadable_scaling_record_keeps_the_pools_size_and_decides_nothing(
    emulator: EmulatorServer, remote: RemoteRepo, tmp_path: Path
) -> None:
    with FakePrometheus() as fake:  # no data at first: nothing to decide on
        ctl = start(remote, emulator, fake.url, tmp_path / "cache")
        try:
            running(ctl, remote)
            hosts = gpu_hosts(emulator)
            doc = status_files(remote)[POOL]
            assert doc["status"]["scaling"]["prometheusAvailable"]["reason"] == "PrometheusUnavailable"
            doc["status"]["scaling"]["size"] = {"NVIDIA-A100": "many"}
            hand_commit(remote, {POOL: yaml.safe_dump(doc).encode()})
            fake.answers.values = {"DCGM_FI_PROF_GR_ENGINE_ACTIVE": 95}
            sent = len(fake.answers.requests)
            with capture_logs() as logs:
                for _ in range(3):
                    ctl.reconcile_once()
        finally:
            ctl.close()
        assert len(fake.answers.requests) == sent  # not decided: no query
    warned = [e["error"] for e in logs if e["log_level"] == "warning" and "scaling status" in e["event"]]
    assert warned and warned[0].startswith(f"{POOL}: status.scaling.size")
    assert gpu_hosts(emulator) == hosts
    assert pool_status(remote)["scaling"]["size"] == {"NVIDIA-A100": "many"}  # kept as it was


def test_dry_run_logs_the_decision_and_records_nothing(
    emulator: EmulatorServer, remote: RemoteRepo, tmp_path: Path
) -> None:
    with FakePrometheus() as fake:
        ctl = start(remote, emulator, fake.url, tmp_path / "cache")
        try:
            running(ctl, remote)
        finally:
            ctl.close()
        hosts, tip = gpu_hosts(emulator), git("rev-parse", "reconciler/status", cwd=remote.bare)
        fake.answers.values = {"DCGM_FI_PROF_GR_ENGINE_ACTIVE": 95}
        ctl = start(remote, emulator, fake.url, tmp_path / "dry", dry_run=True)
        try:
            with capture_logs() as logs:
                ctl.reconcile_once()
        finally:
            ctl.close()
    decided = [e["message"] for e in logs if e["event"] == "dry run: scaling decision"]
    assert decided and decided[0].startswith("scaled up shared-a100 by 1 NVIDIA-A100 host (8 GPUs)")
    assert gpu_hosts(emulator) == hosts
    assert git("rev-parse", "reconciler/status", cwd=remote.bare) == tip


def test_a_workload_pending_for_capacity_scales_the_pool_up_without_metrics(
    emulator: EmulatorServer, remote: RemoteRepo, tmp_path: Path
) -> None:
    with FakePrometheus() as fake:  # answers no data: utilisation is unavailable, demand still counts
        ctl = start(remote, emulator, fake.url, tmp_path / "cache")
        try:
            running(ctl, remote)
            first = gpu_hosts(emulator)
            remote.commit(
                {"project-b/workloads/big.yaml": pool_workload("big", 8)}, "a workload that does not fit"
            )
            ctl.reconcile_once()
            big = status_files(remote)["project-b/aiworkloads/big.yaml"]["status"]
            assert (big["phase"], big["conditions"][0]["reason"]) == ("Pending", "PoolCapacityExceeded")
            since = time.time()
            up = passes_until(ctl, remote, lambda s: last_action(s) is not None, 120, "a demand scale-up")
            waited = time.time() - since
            action = last_action(up)
            assert action is not None and action["trigger"] == "PendingDemand"
            assert action["inputs"]["pending"]["workload"] == "project-b/big"
            # 8 needed on one host, 4 free on the pool's host: the new host brings all 8
            assert action["inputs"]["pending"]["gpus"] == 8
            assert waited >= WINDOW - 1  # it waited the family's scaleUpDuration (status times are whole s)
            assert up["scaling"]["prometheusAvailable"]["status"] == "False"
            assert len(gpu_hosts(emulator) - first) == 1
            admitted = passes_until(
                ctl,
                remote,
                lambda _s: (
                    status_files(remote)["project-b/aiworkloads/big.yaml"]["status"]["phase"] == "Running"
                ),
                120,
                "the pending workload admitted",
            )
            assert admitted["scaling"]["size"] == {"NVIDIA-A100": 16}
        finally:
            ctl.close()
    assert "project-b/big pending for" in status_log(remote)
