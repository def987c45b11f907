"""A status branch that claims one GPU twice (a bad merge or a hand edit) never stops a pass, end to end:
the controller against the emulator and a real git remote. The earlier admission keeps the GPU, the
other workload is placed again, the repaired files are written and the status commit says so;
``plan --from-status`` on the edited branch plans too."""

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
from tests.test_e2e_invalid_keeps import _bindings, _running
from tests.test_e2e_scaling import hand_commit

pytestmark = pytest.mark.e2e

WHOLE = "project-b/aiworkloads/a-whole.yaml"
SLICED = "project-b/aiworkloads/b-sliced.yaml"
SMALL = "project-b/aiworkloads/c-small.yaml"


def test_a_gpu_claimed_twice_on_the_status_branch_is_repaired_and_every_pass_proceeds(
    mig_emulator: EmulatorServer, tmp_path: Path
) -> None:
    _files, remote, ctl = _running(mig_emulator, tmp_path)
    try:
        bound = _bindings(remote)
        files = status_files(remote)
        sliced, small = files[SLICED], files[SMALL]
        # b-sliced also claims a-whole's GPUs; c-small claims b-sliced's MIG instance. Both admitted later.
        sliced["status"]["allocation"]["bound"] = files[WHOLE]["status"]["allocation"]["bound"]
        small["status"]["allocation"]["mig"] = [
            *small["status"]["allocation"]["mig"],
            *sliced["status"]["allocation"]["mig"],
        ]
        for doc in (sliced, small):
            doc["status"]["conditions"][0]["lastTransitionTime"] = "2099-01-01T00:00:00Z"
        hand_commit(remote, {SLICED: yaml.safe_dump(sliced).encode(), SMALL: yaml.safe_dump(small).encode()})

        planned = run_cli(
            "plan", "--repo", str(remote.bare), "--from-status", "--format", "json", timeout=300
        )
        assert planned.returncode == 0, planned.stderr
        entries = {w["name"]: w for w in json.loads(planned.stdout)["workloads"]}
        assert entries["a-whole"]["action"] == "admitted", entries

        result = ctl.reconcile_once()
        assert result.outcome is PassOutcome.SUCCESS, result.error
        assert _bindings(remote) == bound  # each kept what it really holds
        message = git("log", "-1", "--format=%B", "reconciler/status", cwd=remote.bare)
        assert "recorded state repaired: project-b/b-sliced claimed GPU" in message
        assert "which project-b/a-whole (admitted earlier) holds" in message
        assert "recorded state repaired: project-b/c-small claimed MIG instance" in message
        # The workload placed again says so in its own status, for that pass.
        ready = status_files(remote)[SLICED]["status"]["conditions"][0]
        assert "recorded state repaired: project-b/b-sliced claimed GPU" in ready["message"]
        ctl.reconcile_once()  # repaired: nothing to repair any more (the note leaves the message)
        assert "recorded state repaired" not in str(status_files(remote)[SLICED]["status"])
        tip = git("rev-parse", "reconciler/status", cwd=remote.bare)
        ctl.reconcile_once()
        assert git("rev-parse", "reconciler/status", cwd=remote.bare) == tip
    finally:
        ctl.close()


POOL = "project-b/computepools/shared-a100.yaml"


def _writes(emulator: EmulatorServer) -> int:
    return sum(emulator.stats.count(method) for method in ("PUT", "PATCH", "DELETE"))


def test_a_recorded_mig_layout_that_leaves_out_a_held_instance_is_repaired_and_nothing_moves(
    mig_emulator: EmulatorServer, tmp_path: Path
) -> None:
    _files, remote, ctl = _running(mig_emulator, tmp_path)
    try:
        bound, pool = _bindings(remote), status_files(remote)[POOL]
        layout = json.loads(json.dumps(pool["status"]["mig"]))
        (host, gpus), *_ = layout.items()
        gpu = next(g for g in gpus if any(i["workload"] == "project-b/c-small" for i in g["instances"]))
        held = next(i for i in gpu["instances"] if i["workload"] == "project-b/c-small")
        gpu["instances"] = [i for i in gpu["instances"] if i is not held]  # a hand edit drops it
        edited = json.loads(json.dumps(pool))
        edited["status"]["mig"] = {host: gpus, **{h: g for h, g in layout.items() if h != host}}
        hand_commit(remote, {POOL: yaml.safe_dump(edited).encode()})
        writes = _writes(mig_emulator)

        result = ctl.reconcile_once()
        assert result.outcome is PassOutcome.SUCCESS, result.error
        assert _bindings(remote) == bound  # c-small keeps its instances
        assert status_files(remote)[POOL]["status"]["mig"] == pool["status"]["mig"]  # the layout as it was
        assert _writes(mig_emulator) == writes  # the host's MIG machine pool is not touched
        message = git("log", "-1", "--format=%B", "reconciler/status", cwd=remote.bare)
        note = (
            f"left out {held['profile']}@{held['start']}, which project-b/c-small holds; the layout keeps it"
        )
        assert "recorded state repaired: the MIG layout of GPU" in message and note in message
        ctl.reconcile_once()  # repaired: nothing to repair any more
        assert "recorded state repaired" not in str(status_files(remote)[POOL]["status"])
        assert _writes(mig_emulator) == writes and _bindings(remote) == bound
    finally:
        ctl.close()
