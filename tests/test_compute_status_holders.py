"""The Compute status file says which platform or pool holds each host in use (the compute-pools
issue), beside PaletteAI's available-compute shape; against the emulator and a real status branch."""

from __future__ import annotations

import time
from pathlib import Path

from reconciler.emulator import EmulatorServer
from tests._e2e_support import controller, status_doc
from tests._git_support import RemoteRepo


def test_compute_status_names_the_pool_and_the_platforms_holding_hosts(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path
) -> None:
    ctl = controller(remote, emulator, tmp_path)
    try:
        for _ in range(4):
            ctl.reconcile_once()
            time.sleep(0.3)
    finally:
        ctl.close()
    status = status_doc(remote, "project-b/computes/edge-compute.yaml")["status"]
    assert isinstance(status, dict)
    assert {"availableControlPlaneCompute", "availableWorkerCompute"} <= set(status)
    held = {
        (h["heldBy"]["kind"], h["heldBy"]["namespace"], h["heldBy"]["name"])
        for h in status["inUseMachines"]
        if "heldBy" in h
    }
    assert ("ComputePool", "project-b", "shared-a100") in held
    assert ("MLPlatform", "project-b", "training") in held
    pool_hosts = [h for h in status["inUseMachines"] if h.get("heldBy", {}).get("name") == "shared-a100"]
    assert pool_hosts and all(h["cluster"] == "project-b-shared-a100" for h in pool_hosts)
