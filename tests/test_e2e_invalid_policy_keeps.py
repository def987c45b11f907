"""An invalid ScalingPolicy keeps a scaled pool's size and scaling record, end to end: the controller
against the emulator and a real git remote. A pool scaled up by demand (a workload that needed a
second host) keeps both hosts and its record while its policy does not validate; the revert finds
everything where it was and moves nothing (no host, no bound GPU)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.emulator import EmulatorServer
from tests._git_support import RemoteRepo
from tests._loop_support import status_files
from tests._prometheus_support import FakePrometheus
from tests._scaling_support import pool_workload
from tests.test_e2e_scaling import (
    POLICY,
    gpu_hosts,
    last_action,
    passes_until,
    pool_status,
    repo,
    start,
)

pytestmark = pytest.mark.e2e

BIG = "project-b/aiworkloads/big.yaml"


def _bound(remote: RemoteRepo) -> dict[str, Any]:
    out = {}
    for path, doc in status_files(remote).items():
        if "/aiworkloads/" in path:
            status = doc["status"]
            bound = (status.get("allocation") or {}).get("bound", [])
            out[path] = (status["phase"], sorted((b["host"], b["gpu"]) for b in bound))
    return out


def test_an_invalid_policy_keeps_the_scaled_size_and_record_and_the_revert_moves_nothing(
    emulator: EmulatorServer, tmp_path: Path
) -> None:
    remote = repo(tmp_path)
    with FakePrometheus() as fake:  # no data: only demand scales the pool
        ctl = start(remote, emulator, fake.url, tmp_path / "cache")
        try:
            passes_until(ctl, remote, lambda s: s["phase"] == "Running", 120, "the pool Running")
            remote.commit({"project-b/workloads/big.yaml": pool_workload("big", 8)}, "needs another host")
            passes_until(ctl, remote, lambda s: last_action(s) is not None, 120, "a demand scale-up")
            passes_until(
                ctl,
                remote,
                lambda s: s["phase"] == "Running" and _bound(remote)[BIG][0] == "Running",
                120,
                "the big workload admitted on the added host",
            )
            hosts, bound = gpu_hosts(emulator), _bound(remote)
            record = pool_status(remote)["scaling"]
            assert len(hosts) == 2 and record["size"] == {"NVIDIA-A100": 16}

            broken = dict(POLICY, spec=dict(POLICY["spec"], cooldownDuration="soon"))
            remote.commit({"project-b/scalingpolicy.yaml": yaml.safe_dump(broken)}, "a policy typo")
            for _ in range(2):
                ctl.reconcile_once()
                assert gpu_hosts(emulator) == hosts
                kept = pool_status(remote)["scaling"]
                assert (kept.get("size"), kept.get("lastAction")) == (record["size"], record["lastAction"])
                assert kept["policy"] == record["policy"]
                assert [p for p, (_, b) in _bound(remote).items() if b != bound[p][1]] == []

            remote.commit({"project-b/scalingpolicy.yaml": yaml.safe_dump(POLICY)}, "revert the typo")
            for _ in range(2):
                ctl.reconcile_once()
                assert gpu_hosts(emulator) == hosts
                assert _bound(remote) == bound
            assert pool_status(remote)["scaling"]["size"] == {"NVIDIA-A100": 16}
        finally:
            ctl.close()
