"""``inventory show --palette`` and ``inventory export`` end to end against the Palette emulator."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.commands import inventory as cmd
from reconciler.compute_status import compute_status, unavailable_machines
from reconciler.emulator import EmulatorServer
from reconciler.inventory import discover
from reconciler.palette import PaletteClient
from reconciler.retry import RetryPolicy
from reconciler.snapshots import Snapshot, load_snapshot
from tests._inventory_support import edge_host, gpu

SEED = Path(__file__).parent / "data" / "inventory" / "seed-compute.yaml"
API_KEY = "emulator-key-0123456789"
RUNNING_CLUSTER = {
    "metadata": {"uid": "67f0c0ffee0000000000abcd", "name": "project-a-clearml-prod", "labels": {}},
    "spec": {"cloudType": "edge-native", "cloudConfigRef": {"uid": "cc-67f0"}},
    "status": {"state": "Running"},
}


def seed_status() -> dict[str, Any]:
    """What ``inventory show`` prints: the Compute status plus the unavailable hosts and why, and the
    hosts in use with their cluster (an unmanaged one here: no ``heldBy``)."""
    found = discover(load_snapshot(SEED).edge_hosts)
    in_use = [
        {"name": m.name, "uid": m.uid, "cluster": "project-a-clearml-prod"}
        for m in found.machines
        if m.state.value == "in-use"
    ]
    return {
        **compute_status(found),
        "unavailableMachines": unavailable_machines(found),
        "inUseMachines": in_use,
    }


@pytest.fixture
def emulator(monkeypatch: pytest.MonkeyPatch) -> Iterator[EmulatorServer]:
    seed = load_snapshot(SEED)
    monkeypatch.setenv("PALETTE_API_KEY", API_KEY)
    with EmulatorServer.from_snapshot(Snapshot(seed.edge_hosts, [RUNNING_CLUSTER]), API_KEY) as server:
        yield server


def test_show_against_the_emulator_prints_the_seeds_compute_status(
    emulator: EmulatorServer, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cmd.show(emulator.url, None, None, "yaml") == 0
    assert yaml.safe_load(capsys.readouterr().out) == seed_status()


def test_export_from_the_emulator_round_trips_through_a_snapshot_file(
    emulator: EmulatorServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "exported.yaml"
    assert cmd.export(emulator.url, None, out) == 0
    exported = load_snapshot(out)
    assert sorted(h["metadata"]["uid"] for h in exported.edge_hosts) == sorted(
        h["metadata"]["uid"] for h in load_snapshot(SEED).edge_hosts
    )
    assert [c["metadata"]["uid"] for c in exported.clusters] == ["67f0c0ffee0000000000abcd"]
    assert exported.clusters[0]["status"]["state"] == "Running"
    capsys.readouterr()
    assert cmd.show(None, out, None, "json") == 0
    assert json.loads(capsys.readouterr().out) == seed_status()
    # The exported file seeds a new emulator that answers the same.
    with EmulatorServer.from_snapshot(exported, API_KEY) as again:
        assert cmd.show(again.url, None, None, "json") == 0
    assert json.loads(capsys.readouterr().out) == seed_status()


def test_a_wrong_api_key_is_refused_without_echoing_it(
    emulator: EmulatorServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PALETTE_API_KEY", "not-the-key-987654")
    assert cmd.export(emulator.url, None, None) == 2
    captured = capsys.readouterr()
    assert "401" in captured.err
    assert "not-the-key-987654" not in captured.err + captured.out


def test_an_unreachable_palette_is_an_error_not_a_crash(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PALETTE_API_KEY", API_KEY)
    with EmulatorServer.from_snapshot(Snapshot([], []), API_KEY) as server:
        url = server.url  # the port is free again once the server stops
    monkeypatch.setattr(cmd, "PaletteClient", _fast_failing_client)
    assert cmd.show(url, None, None, "table") == 2
    assert capsys.readouterr().err.startswith("error: Palette:")


def _fast_failing_client(base_url: str, api_key: str, project_uid: str | None = None) -> PaletteClient:
    return PaletteClient(base_url, api_key, project_uid, timeout=2.0, retry=RetryPolicy(max_attempts=1))


def test_project_uid_scopes_online_and_offline_alike(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def in_project(uid: str, project: str | None) -> dict[str, Any]:
        host = edge_host(uid, gpus=[gpu("GH100 [H100 PCIe]", 8)])
        if project:
            host["spec"]["projectMeta"] = {"name": project, "uid": project}
        return host

    hosts = [in_project("edge-a1", "proj-a"), in_project("edge-b1", "proj-b"), in_project("edge-any", None)]
    path = tmp_path / "two-projects.json"
    path.write_text(json.dumps({"edgeHosts": hosts}), encoding="utf-8")
    monkeypatch.setenv("PALETTE_API_KEY", API_KEY)
    with EmulatorServer.from_snapshot(load_snapshot(path), API_KEY) as server:
        assert cmd.show(server.url, None, "proj-a", "json") == 0
    online = json.loads(capsys.readouterr().out)
    assert cmd.show(None, path, "proj-a", "json") == 0
    offline = json.loads(capsys.readouterr().out)
    assert online == offline
    assert online["availableWorkerCompute"][0]["machines"] == ["edge-a1", "edge-any"]


def test_a_thousand_hosts_are_read_through_every_page(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    hosts = [edge_host(f"edge-{i:04d}", cores=4) for i in range(1000)]
    monkeypatch.setenv("PALETTE_API_KEY", API_KEY)
    with EmulatorServer.from_snapshot(Snapshot(hosts, []), API_KEY) as server:
        assert cmd.show(server.url, None, None, "json") == 0
    [entry] = json.loads(capsys.readouterr().out)["availableControlPlaneCompute"]
    assert entry["instances"] == 1000
