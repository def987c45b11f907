"""``reconciler inventory show`` / ``export``: offline from a snapshot, online through the real client.

Online tests run the real :class:`PaletteClient` over an in-process fake Palette (httpx.MockTransport) that
pages like Palette does; the end-to-end tests against the emulator live in test_inventory_emulator.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from reconciler.cli_app import app
from reconciler.commands import inventory as cmd
from reconciler.compute_status import compute_status, unavailable_machines
from reconciler.inventory import discover
from reconciler.palette import PaletteClient
from tests._inventory_support import edge_host, gpu

SEED = Path(__file__).parent / "data" / "inventory" / "seed-compute.yaml"
API_KEY = "sekrit-key-0123456789"


def seed_status(cluster: str | None = None) -> dict[str, Any]:
    """The Compute status of the seed, plus the unavailable hosts and the hosts in use ``show`` also
    lists (the seed's one host in use belongs to a cluster the snapshot does not describe)."""
    hosts = yaml.load(SEED.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)["edgeHosts"]
    found = discover(hosts)
    in_use = [
        {"name": m.name, "uid": m.uid, "cluster": cluster or m.cluster_uid}
        for m in found.machines
        if m.state.value == "in-use"
    ]
    return {
        **compute_status(found),
        "unavailableMachines": unavailable_machines(found),
        "inUseMachines": in_use,
    }


# --- offline ------------------------------------------------------------------------------------


def test_show_yaml_prints_the_compute_status_of_a_snapshot(capsys: pytest.CaptureFixture[str]) -> None:
    assert cmd.show(None, SEED, None, "yaml") == 0
    assert yaml.safe_load(capsys.readouterr().out) == seed_status()


def test_show_json_prints_the_compute_status_of_a_snapshot(capsys: pytest.CaptureFixture[str]) -> None:
    assert cmd.show(None, SEED, None, "json") == 0
    assert json.loads(capsys.readouterr().out) == seed_status()


def test_show_table_lists_compute_excluded_hosts_and_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = tmp_path / "inv.json"
    hosts = [
        edge_host("edge-cp", cores=4),
        edge_host("edge-gpu", gpus=[gpu("GH100 [H100 PCIe]", 8)], labels={"palette.ai.rg/network-pool": "3"}),
        edge_host("edge-bad", name="broken-host", labels={"gpus": "eight"}),
        edge_host("edge-mixed", gpus=[gpu("GH100 [H100 PCIe]", 8), gpu("TU104GL [Tesla T4]", 1)]),
    ]
    snapshot.write_text(json.dumps({"edgeHosts": hosts}), encoding="utf-8")
    assert cmd.show(None, snapshot, None, "table") == 0
    out = capsys.readouterr().out
    for text in ("edge-cp", "edge-gpu", "8 x NVIDIA H100", "network-pool=3", "Excluded hosts", "broken-host"):
        assert text in out
    assert "tag gpus: 'eight'" in out
    assert "mixed GPU families" in out
    assert "3 machines: 3 available, 0 in use, 0 unavailable; 1 excluded" in out


def test_show_lists_unavailable_hosts_and_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Unavailable hosts were counted but never listed: now each is named with its reason."""
    snapshot = tmp_path / "inv.json"
    sick, unpaired = edge_host("edge-sick", cores=4), edge_host("edge-new", cores=4)
    sick["status"]["health"]["state"] = "unhealthy"
    unpaired["status"]["state"] = "unpaired"
    snapshot.write_text(json.dumps({"edgeHosts": [edge_host("edge-ok", cores=4), sick, unpaired]}))
    assert cmd.show(None, snapshot, None, "table") == 0
    out = capsys.readouterr().out
    assert "Unavailable hosts" in out
    assert "edge-sick" in out and "health is unhealthy" in out
    assert "edge-new" in out and "state is unpaired (not ready)" in out
    assert cmd.show(None, snapshot, None, "json") == 0
    listed = json.loads(capsys.readouterr().out)["unavailableMachines"]
    assert [(h["uid"], h["reason"]) for h in listed] == [
        ("edge-new", "state is unpaired (not ready)"),
        ("edge-sick", "health is unhealthy"),
    ]


def test_the_cli_wires_inventory_show_with_its_format_option() -> None:
    result = CliRunner().invoke(app, ["inventory", "show", "--inventory", str(SEED), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == seed_status()


@pytest.mark.parametrize(("palette", "inventory"), [(None, None), ("http://127.0.0.1:1", SEED)])
def test_show_needs_exactly_one_source(
    palette: str | None, inventory: Path | None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cmd.show(palette, inventory, None, "table") == 2
    assert "exactly one of --palette URL or --inventory FILE" in capsys.readouterr().err


def test_show_reports_a_missing_snapshot_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cmd.show(None, tmp_path / "nope.yaml", None, "yaml") == 2
    assert "cannot read inventory" in capsys.readouterr().err


@pytest.mark.parametrize("text", ["edgeHosts: {a: 1}\n", "- just a list\n", "edgeHosts: [\n"])
def test_show_reports_a_malformed_snapshot(
    tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    assert cmd.show(None, path, None, "yaml") == 2
    assert capsys.readouterr().err.startswith(f"error: inventory {path}:")


# --- online, through the real client ------------------------------------------------------------


class FakePalette:
    """Answers the two searches and cluster GETs like Palette: ApiKey checked, pages of ``limit``."""

    def __init__(self, hosts: list[dict[str, Any]], clusters: list[dict[str, Any]], page: int = 2) -> None:
        self.hosts, self.clusters, self.page = hosts, clusters, page
        self.requests: list[httpx.Request] = []

    def _page(self, items: list[dict[str, Any]], request: httpx.Request) -> httpx.Response:
        offset = int(request.url.params.get("continue") or 0)
        limit = min(int(request.url.params.get("limit") or 50), self.page)
        rest = offset + limit
        token = str(rest) if rest < len(items) else ""
        listmeta = {"continue": token, "count": len(items), "limit": limit, "offset": offset}
        return httpx.Response(200, json={"items": items[offset:rest], "listmeta": listmeta})

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.headers.get("ApiKey") != API_KEY:
            return httpx.Response(401, json={"code": "Unauthorized", "message": "invalid key", "details": {}})
        path = request.url.path
        if path == "/v1/dashboard/edgehosts/search":
            return self._page(self.hosts, request)
        if path == "/v1/dashboard/spectroclusters/search":
            summaries = [{"metadata": c["metadata"], "status": c["status"]} for c in self.clusters]
            return self._page(summaries, request)
        for cluster in self.clusters:
            if path == f"/v1/spectroclusters/{cluster['metadata']['uid']}":
                return httpx.Response(200, json=cluster)
        return httpx.Response(404, json={"code": "ResourceNotFound", "message": path, "details": {}})


@pytest.fixture
def fake_palette(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakePalette]:
    hosts = yaml.load(SEED.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)["edgeHosts"]
    cluster = {
        "metadata": {"uid": "67f0c0ffee0000000000abcd", "name": "project-a-clearml-prod", "labels": {}},
        "spec": {
            "cloudType": "edge-native",
            "cloudConfigRef": {"kind": "EdgeNativeCloudConfig", "uid": "cc-1"},
        },
        "status": {"state": "Running"},
    }
    fake = FakePalette(hosts, [cluster])
    transport = httpx.MockTransport(fake)

    def client(base_url: str, api_key: str, project_uid: str | None = None) -> PaletteClient:
        return PaletteClient(base_url, api_key, project_uid, transport=transport)

    monkeypatch.setattr(cmd, "PaletteClient", client)
    monkeypatch.setenv("PALETTE_API_KEY", API_KEY)
    yield fake


def test_show_online_reads_every_page_and_prints_the_compute_status(
    fake_palette: FakePalette, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cmd.show("https://palette.example", None, "project-1", "json") == 0
    shown = json.loads(capsys.readouterr().out)
    expected = seed_status()
    # Online, the cluster search names the cluster that holds the host in use (it is not a managed one).
    assert [(h["cluster"], "heldBy" in h) for h in shown.pop("inUseMachines")] == [
        ("project-a-clearml-prod", False)
    ]
    expected.pop("inUseMachines")
    assert shown == expected
    searches = [r for r in fake_palette.requests if r.url.path == "/v1/dashboard/edgehosts/search"]
    assert len(searches) == 8  # 16 hosts, pages of 2
    assert all(r.headers["ProjectUid"] == "project-1" for r in searches)


def test_export_writes_a_snapshot_that_show_reads_back(
    fake_palette: FakePalette, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "snapshot.yaml"
    assert cmd.export("https://palette.example", None, out) == 0
    assert "16 edge hosts, 1 clusters" in capsys.readouterr().err
    written = yaml.safe_load(out.read_text(encoding="utf-8"))
    assert written["edgeHosts"] == fake_palette.hosts
    assert written["clusters"] == fake_palette.clusters
    assert cmd.show(None, out, None, "json") == 0
    assert json.loads(capsys.readouterr().out) == seed_status("project-a-clearml-prod")


def test_export_writes_json_for_a_json_path_and_yaml_to_stdout(
    fake_palette: FakePalette, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "snapshot.json"
    assert cmd.export("https://palette.example", None, out) == 0
    assert len(json.loads(out.read_text(encoding="utf-8"))["edgeHosts"]) == 16
    capsys.readouterr()
    assert cmd.export("https://palette.example", None, None) == 0
    assert len(yaml.safe_load(capsys.readouterr().out)["edgeHosts"]) == 16


@pytest.mark.parametrize("command", ["show", "export"])
def test_a_missing_api_key_is_a_clear_error(
    command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("PALETTE_API_KEY", raising=False)
    code = (
        cmd.show("http://127.0.0.1:1", None, None, "yaml")
        if command == "show"
        else cmd.export("http://x", None, None)
    )
    assert code == 2
    assert "PALETTE_API_KEY" in capsys.readouterr().err


def test_a_rejected_api_key_is_an_error_that_never_shows_the_key(
    fake_palette: FakePalette, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PALETTE_API_KEY", "wrong-key-abcdef")
    assert cmd.show("https://palette.example", None, None, "table") == 2
    captured = capsys.readouterr()
    assert "401" in captured.err
    assert "wrong-key-abcdef" not in captured.err + captured.out
