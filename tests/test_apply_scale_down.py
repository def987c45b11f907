"""Scale-down as the Terraform provider does it (``resourceClusterEdgeNativeUpdate``): the machines of
removed hosts are deleted first (found in the pool's machine list by name), then the pool is PUT with
the hosts that stay; the emulator answers as Palette does (the machine leaves, its host is free)."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.apply import apply_plan
from reconciler.inventory import discover
from reconciler.palette import ClientError, PaletteClient
from reconciler.plan import Action, make_plan
from reconciler.snapshots import managed_clusters
from tests._allocate_support import desired, platform, profile, settings
from tests._palette_support import CATALOGUE, HTTP, INFRA_UID, KEY, admin, fleet, running


class Recording:
    """The real client, with the machine-pool calls it makes recorded in order."""

    def __init__(self, client: PaletteClient) -> None:
        self.client, self.calls = client, []  # type: ignore[var-annotated]

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.client, name)
        if name not in ("list_pool_machines", "delete_pool_machine", "update_machine_pool"):
            return found

        def record(*args: Any) -> Any:
            self.calls.append((name, args[1], args[2] if name == "delete_pool_machine" else None))
            return found(*args)

        return record


def _state(gpus: int) -> Any:
    return desired(
        platform("p", {"NVIDIA-H100": gpus}), profile(min_workers=1), settings(cluster_profiles=[INFRA_UID])
    )


def test_a_removed_host_has_its_machine_deleted_before_the_pool_is_updated() -> None:
    hosts = fleet()
    inventory = discover(hosts)
    big = make_plan(_state(16), inventory, [])
    assert [e.action for e in big.platforms] == [Action.CREATE] and len(big.platforms[0].workers) >= 2
    with (
        running(hosts, profiles=CATALOGUE, provision_seconds=0.0) as server,
        PaletteClient(server.url, KEY) as palette,
    ):
        assert all(o.ok for o in apply_plan(palette, _state(16), big).values())
        snapshot = admin(server, "GET", "state")
        existing = managed_clusters(snapshot["clusters"], snapshot["edgeHosts"], inventory.by_uid())
        small = make_plan(_state(8), discover(snapshot["edgeHosts"]), existing)
        [entry] = small.platforms
        assert entry.action is Action.SCALE and entry.remove_workers, entry
        recording = Recording(palette)
        assert all(o.ok for o in apply_plan(recording, _state(8), small).values())  # type: ignore[arg-type]
        removed = set(entry.remove_workers)
        deletes = [c for c in recording.calls if c[0] == "delete_pool_machine"]
        assert len(deletes) == len(removed)
        assert (
            recording.calls[0][0] == "list_pool_machines" and recording.calls[-1][0] == "update_machine_pool"
        )
        assert max(recording.calls.index(d) for d in deletes) < recording.calls.index(recording.calls[-1])
        after = admin(server, "GET", "state")
        states = {h["metadata"]["uid"]: h["status"]["state"] for h in after["edgeHosts"]}
        assert all(states[uid] == "ready" for uid in removed), "the removed hosts are free again"
        [cluster] = managed_clusters(after["clusters"], after["edgeHosts"], inventory.by_uid())
        config = palette.get_cloud_config(cluster.cloud_config_uid or "")
        pooled = {h["hostUid"] for pool in config["spec"]["machinePoolConfig"] for h in pool["hosts"]}
        assert pooled == set(entry.control_plane + entry.workers) and not pooled & removed


def test_the_emulator_deletes_one_machine_as_palette_does() -> None:
    hosts = fleet()
    inventory = discover(hosts)
    plan = make_plan(_state(8), inventory, [])
    with (
        running(hosts, profiles=CATALOGUE, provision_seconds=0.0) as server,
        PaletteClient(server.url, KEY) as palette,
    ):
        assert all(o.ok for o in apply_plan(palette, _state(8), plan).values())
        snapshot = admin(server, "GET", "state")
        [cluster] = managed_clusters(snapshot["clusters"], snapshot["edgeHosts"], inventory.by_uid())
        config_uid = cluster.cloud_config_uid or ""
        [machine] = palette.list_pool_machines(config_uid, "control-plane-pool")
        with pytest.raises(ClientError) as last:
            palette.delete_pool_machine(config_uid, "control-plane-pool", machine["metadata"]["uid"])
        assert last.value.status == 400, "the last control-plane machine stays"
        [worker, *_] = palette.list_pool_machines(config_uid, "worker-pool")
        palette.delete_pool_machine(config_uid, "worker-pool", worker["metadata"]["uid"])
        palette.delete_pool_machine(config_uid, "worker-pool", worker["metadata"]["uid"])  # gone: fine
        left = [m["metadata"]["uid"] for m in palette.list_pool_machines(config_uid, "worker-pool")]
        assert worker["metadata"]["uid"] not in left
        url = f"{server.url}/v1/cloudconfigs/edge-native/{config_uid}/machinePools/worker-pool/machines/nope"
        assert HTTP.delete(url, headers={"ApiKey": KEY}).status_code == 404
