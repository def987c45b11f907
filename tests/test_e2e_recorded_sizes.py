"""A pool's recorded size is checked against Palette's machine pools, end to end: the controller
against the emulator, a fake Prometheus and a real git remote. A demand-scaled pool at 16 GPUs whose
scaling record is edited by hand (a bad merge, say) to imply 8 or 24 GPUs keeps the hosts its cluster
has; the record is repaired to that size, the status commit and the pool's message say so, and the
next pass has nothing to repair."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from reconciler.emulator import EmulatorServer
from reconciler.metrics import PassOutcome
from tests._contract_support import run_cli
from tests._git_support import git
from tests._loop_support import status_files
from tests._prometheus_support import FakePrometheus
from tests._scaling_support import pool_workload
from tests.test_e2e_invalid_policy_keeps import BIG, _bound
from tests.test_e2e_scaling import (
    POOL,
    gpu_hosts,
    hand_commit,
    last_action,
    passes_until,
    pool_status,
    repo,
    start,
)

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("edit", [-8, 8])
def test_a_hand_edited_pool_size_is_repaired_to_what_palette_holds_and_nothing_moves(
    emulator: EmulatorServer, tmp_path: Path, edit: int
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
                lambda s: (
                    s["phase"] == "Running"
                    and (last_action(s) or {}).get("completedAt") is not None
                    and _bound(remote)[BIG][0] == "Running"
                ),
                120,
                "the scale-up settled and the big workload admitted on the added host",
            )
            hosts, bound = gpu_hosts(emulator), _bound(remote)
            record = pool_status(remote)["scaling"]
            assert len(hosts) == 2 and record["size"] == {"NVIDIA-A100": 16}

            doc = status_files(remote)[POOL]
            earlier = dict(doc["status"]["scaling"].get("earlierActions") or {})
            earlier["NVIDIA-A100"] = earlier.get("NVIDIA-A100", 0) + edit
            doc["status"]["scaling"]["earlierActions"] = earlier
            hand_commit(remote, {POOL: yaml.safe_dump(doc).encode()})
            planned = run_cli(
                "plan", "--repo", str(remote.bare), "--from-status", "--format", "json", timeout=300
            )
            assert planned.returncode == 0, planned.stderr
            (entry,) = [p for p in json.loads(planned.stdout)["pools"] if p["name"] == "shared-a100"]
            assert entry["action"] == "unchanged", entry  # the pull request's plan sees the same repair
            assert "warning: recorded state repaired: the scaling record of pool project-b/shared-a100" in (
                planned.stderr
            )  # and says so, as the pass logs it

            result = ctl.reconcile_once()
            assert result.outcome is PassOutcome.SUCCESS, result.error
            assert gpu_hosts(emulator) == hosts and _bound(remote) == bound  # nothing moved
            repaired = pool_status(remote)
            assert repaired["scaling"]["size"] == {"NVIDIA-A100": 16}
            assert repaired["scaling"].get("earlierActions") == record.get("earlierActions")
            message = git("log", "-1", "--format=%B", "reconciler/status", cwd=remote.bare)
            note = "recorded state repaired: the scaling record of pool project-b/shared-a100 makes it"
            assert note in message and "Palette's machine pools hold 16 NVIDIA-A100" in message
            assert note in repaired["conditions"][0]["message"]

            ctl.reconcile_once()  # repaired: nothing to repair any more
            assert "recorded state repaired" not in str(pool_status(remote))
            assert gpu_hosts(emulator) == hosts and _bound(remote) == bound
        finally:
            ctl.close()
