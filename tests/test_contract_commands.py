"""Contract of ``emulator``, ``inventory show|export``, ``schemas`` and ``demo`` (docs/validation.md)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import jsonschema
import pytest
import yaml

from tests._contract_support import (
    API_KEY,
    SAMPLE_INVENTORY,
    SAMPLE_REPO,
    Emulator,
    load_json,
    run_cli,
    running_emulator,
    with_key,
)

KINDS = [
    "Compute",
    "ComputeProfile",
    "MLPlatform",
    "Project",
    "Settings",
    "WorkloadProfile",
    "ComputePool",
    "AIWorkload",
    "ScalingPolicy",
    "Environment",
    "ProfileBundle",
]
SEARCH = "/v1/dashboard/edgehosts/search"


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    with running_emulator(tmp_path_factory.mktemp("contract-emulator")) as running:
        yield running


def test_emulator_refuses_requests_without_a_valid_key(emulator: Emulator) -> None:
    for headers in ({}, {"ApiKey": "not-the-key"}):
        response = httpx.post(emulator.url + SEARCH, json={}, headers=headers)
        assert response.status_code == 401
        assert set(response.json()) == {"code", "message", "details", "ref"}
        assert API_KEY not in response.text
    missing = httpx.get(emulator.url + "/v1/spectroclusters/no-such-uid", headers={"ApiKey": API_KEY})
    assert missing.status_code == 404
    assert set(missing.json()) == {"code", "message", "details", "ref"}


def test_emulator_pages_edge_hosts_at_most_fifty_at_a_time(emulator: Emulator) -> None:
    expected = len(load_json(SAMPLE_INVENTORY.read_text())["edgeHosts"])
    seen: list[str] = []
    token = ""
    while True:
        params = {"limit": "7", **({"continue": token} if token else {})}
        page = httpx.post(emulator.url + SEARCH, params=params, json={}, headers={"ApiKey": API_KEY})
        assert page.status_code == 200
        body = page.json()
        assert len(body["items"]) <= 7
        seen += [item["metadata"]["uid"] for item in body["items"]]
        token = body.get("listmeta", {}).get("continue") or ""
        if not token:
            break
    assert len(seen) == len(set(seen)) == expected
    too_many = httpx.post(emulator.url + SEARCH, params={"limit": "51"}, json={}, headers={"ApiKey": API_KEY})
    assert too_many.status_code == 400


def test_emulator_takes_the_key_from_the_api_key_flag(tmp_path: Path) -> None:
    with running_emulator(tmp_path, key_by_flag=True) as flagged:
        assert httpx.post(flagged.url + SEARCH, json={}).status_code == 401
        assert httpx.post(flagged.url + SEARCH, json={}, headers={"ApiKey": API_KEY}).status_code == 200


def test_inventory_show_json_and_yaml_are_the_same_compute_view() -> None:
    as_json = run_cli("inventory", "show", "--inventory", str(SAMPLE_INVENTORY), "--format", "json")
    as_yaml = run_cli("inventory", "show", "--inventory", str(SAMPLE_INVENTORY), "--format", "yaml")
    assert as_json.returncode == as_yaml.returncode == 0
    view = load_json(as_json.stdout)
    assert yaml.safe_load(as_yaml.stdout) == view
    assert view["availableControlPlaneCompute"] and view["availableWorkerCompute"]
    for entry in view["availableControlPlaneCompute"] + view["availableWorkerCompute"]:
        assert entry["instances"] == len(entry["machines"])
    excluded = view["excludedMachines"]
    assert excluded and all(item["reason"] for item in excluded)  # a bad tag excludes, with why
    table = run_cli("inventory", "show", "--inventory", str(SAMPLE_INVENTORY))
    assert table.returncode == 0 and table.stdout.strip()


def test_inventory_show_online_matches_the_snapshot(emulator: Emulator) -> None:
    offline = run_cli("inventory", "show", "--inventory", str(SAMPLE_INVENTORY), "--format", "json")
    online = run_cli("inventory", "show", "--palette", emulator.url, "--format", "json", env=with_key())
    assert online.returncode == 0
    assert load_json(online.stdout) == load_json(offline.stdout)


def test_inventory_export_writes_a_snapshot_of_every_host(emulator: Emulator, tmp_path: Path) -> None:
    """Offline plan on an exported snapshot (with clusters) is checked in test_contract_status."""
    exported = run_cli("inventory", "export", "--palette", emulator.url, env=with_key())
    assert exported.returncode == 0
    snapshot = yaml.safe_load(exported.stdout)
    original = load_json(SAMPLE_INVENTORY.read_text())
    assert sorted(h["metadata"]["uid"] for h in snapshot["edgeHosts"]) == sorted(
        h["metadata"]["uid"] for h in original["edgeHosts"]
    )
    assert snapshot.get("clusters", []) == []
    out = tmp_path / "snapshot.yaml"
    assert (
        run_cli(
            "inventory", "export", "--palette", emulator.url, "--out", str(out), env=with_key()
        ).returncode
        == 0
    )
    assert yaml.safe_load(out.read_text()) == snapshot


def test_schemas_writes_one_draft_2020_12_schema_per_kind_that_accepts_the_sample(tmp_path: Path) -> None:
    assert run_cli("schemas", "--out", str(tmp_path)).returncode == 0
    schemas = {path.stem: load_json(path.read_text()) for path in tmp_path.glob("*.json")}
    assert sorted(schemas) == sorted(kind.lower() for kind in KINDS)
    for schema in schemas.values():
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        jsonschema.Draft202012Validator.check_schema(schema)
    checked = set()
    for manifest in SAMPLE_REPO.rglob("*.yaml"):
        for doc in yaml.safe_load_all(manifest.read_text()):
            schema = schemas[doc["kind"].lower()]
            jsonschema.Draft202012Validator(schema).validate(doc)
            checked.add(doc["kind"])
            bad = {**doc, "unexpectedTopLevelField": 1}
            assert not jsonschema.Draft202012Validator(schema).is_valid(bad)
    assert checked == set(KINDS)


def test_demo_runs_the_whole_loop_and_exits_zero(tmp_path: Path) -> None:
    # With the canary key in its environment, run_cli also checks that the demo never prints a key.
    result = run_cli("demo", env=with_key({"TMPDIR": str(tmp_path)}), timeout=280)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "Running" in result.stdout


def test_schemas_into_an_unwritable_place_is_an_error_not_a_crash(tmp_path: Path) -> None:
    occupied = tmp_path / "a-file"
    occupied.write_text("")
    result = run_cli("schemas", "--out", str(occupied))
    assert result.returncode == 2
    assert "error" in result.stderr


def test_online_plan_against_the_emulator_matches_the_offline_plan(emulator: Emulator) -> None:
    offline = run_cli(
        "plan", "--repo", str(SAMPLE_REPO), "--inventory", str(SAMPLE_INVENTORY), "--format", "json"
    )
    online = run_cli(
        "plan", "--repo", str(SAMPLE_REPO), "--palette", emulator.url, "--format", "json", env=with_key()
    )
    assert online.returncode == offline.returncode == 0
    online_plan, offline_plan = load_json(online.stdout), load_json(offline.stdout)
    assert (online_plan.pop("basis")["observation"], offline_plan.pop("basis")["observation"]) == (
        "palette",
        "inventory",
    )
    assert online_plan == offline_plan
    no_key = run_cli("plan", "--repo", str(SAMPLE_REPO), "--palette", emulator.url, "--format", "json")
    assert no_key.returncode == 2
    wrong = run_cli("inventory", "show", "--palette", emulator.url, env={"PALETTE_API_KEY": "wrong"})
    assert wrong.returncode == 2
