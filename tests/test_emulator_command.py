"""``reconciler emulator`` and the inventory generator used by the benchmarks."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import httpx
import pytest

from reconciler.commands import emulator as command
from reconciler.palette import PaletteClient
from reconciler.snapshots import load_snapshot
from tests._palette_support import KEY, assert_valid

ROOT = Path(__file__).parent.parent


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_inventory", ROOT / "bench" / "gen_inventory.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_refuses_to_start_without_a_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PALETTE_API_KEY", raising=False)
    snapshot = tmp_path / "inv.yaml"
    snapshot.write_text("edgeHosts: []\n")
    assert command.run(snapshot, "127.0.0.1", 0, None, 1.0, 1.0, None, 0) == 2
    assert "PALETTE_API_KEY" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("content", "faults", "message"),
    [
        ("edgeHosts: [", None, "cannot read"),
        ("edgeHosts: []", "{not json", "--faults"),
        ("edgeHosts: []", '{"speed": 1}', "unknown fault fields"),
    ],
)
def test_bad_input_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, faults: str | None, message: str
) -> None:
    snapshot = tmp_path / "inv.yaml"
    snapshot.write_text(content)
    assert command.run(snapshot, "127.0.0.1", 0, KEY, 1.0, 1.0, faults, 0) == 2
    err = capsys.readouterr().err
    assert message in err and KEY not in err


def test_serves_a_snapshot_from_the_command_line(tmp_path: Path) -> None:
    snapshot = tmp_path / "inv.json"
    snapshot.write_text(json.dumps(_generator().generate(120, seed=5)))
    env = {**os.environ, "PALETTE_API_KEY": KEY}
    code = "from reconciler.cli import main; main()"
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            code,
            "emulator",
            "--inventory",
            str(snapshot),
            "--port",
            "0",
            "--faults",
            '[{"path": "search", "burst_429": 1}]',
            "--seed",
            "3",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert "listening on http://127.0.0.1:" in line and "120 edge hosts" in line
        url = line.split("listening on ", 1)[1].split()[0]
        with PaletteClient(url, KEY) as palette:
            assert len(palette.search_edge_hosts()) == 120
        stats = httpx.get(url + "/__emulator/stats").json()
        assert stats["total"] == 4  # one 429, then three pages
    finally:
        process.terminate()
        process.wait(timeout=60)
    assert KEY not in (process.stderr.read() if process.stderr else "")


def test_generator_is_deterministic_and_mixed() -> None:
    gen = _generator()
    first, again, other = gen.generate(400, seed=1), gen.generate(400, seed=1), gen.generate(400, seed=2)
    assert first == again and first != other
    hosts = first["edgeHosts"]
    assert len({h["metadata"]["uid"] for h in hosts}) == 400
    models = {g["model"] for h in hosts for g in h["spec"]["device"].get("gpus", [])}
    assert {"GH100 [H100 SXM5 80GB]", "GA100 [A100 SXM4 80GB]", "AD102GL [L40S]", "AD104GL [L4]"} <= models
    counts = {g["gpuCount"] for h in hosts for g in h["spec"]["device"].get("gpus", [])}
    assert counts == {1, 2, 4, 8}
    labels = [h["metadata"]["labels"] for h in hosts]
    assert any(lab.get("palette.ai/worker") == "true" for lab in labels)
    assert any("gpu-family" in lab for lab in labels)
    assert any(k.startswith("palette.ai.rg/") for lab in labels for k in lab)
    assert any(h["status"]["health"]["state"] == "unhealthy" for h in hosts)
    for item in hosts[:50]:
        assert_valid("v1EdgeHostsMetadata", item, "generated host")


def test_generator_writes_yaml_that_loads(tmp_path: Path) -> None:
    out = tmp_path / "inv.yaml"
    assert _generator().main(["--hosts", "30", "--seed", "4", "--projects", "2", "--out", str(out)]) == 0
    snapshot = load_snapshot(out)
    assert len(snapshot.edge_hosts) == 30
    assert len({h["spec"]["projectMeta"]["uid"] for h in snapshot.edge_hosts}) == 2
