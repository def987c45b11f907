"""End-to-end fixtures: the sample repository in a real bare remote, the emulator on loopback."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from reconciler.emulator import EmulatorServer
from reconciler.model.pools import KIND_LABEL, POOL_KIND
from reconciler.palette.pacing import RateLimits
from reconciler.runtime import wiring
from reconciler.runtime.options import ControllerOptions
from reconciler.runtime.pipeline import Pipeline
from reconciler.snapshots import load_snapshot
from tests._git_support import RemoteRepo, git

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample-repo"
API_KEY = "e2e-secret-key-0123456789"


def sample_files() -> dict[str, bytes]:
    return {
        str(p.relative_to(SAMPLE)): p.read_bytes()
        for p in sorted(SAMPLE.rglob("*"))
        if p.is_file() and p.suffix in (".yaml", ".yml")
    }


@pytest.fixture
def remote(tmp_path: Path) -> RemoteRepo:
    (tmp_path / "git").mkdir()
    repo = RemoteRepo(tmp_path / "git")
    repo.commit(sample_files(), "sample configuration")
    return repo


@contextmanager
def sample_emulator(
    monkeypatch: pytest.MonkeyPatch, inventory: Path = SAMPLE / "inventory.json"
) -> Iterator[EmulatorServer]:
    """The emulator on loopback over ``inventory`` (default the sample's), its key in the environment."""
    monkeypatch.setenv("PALETTE_API_KEY", API_KEY)
    # Rate limits are tested on their own (test_palette_pacing.py); here they would only slow the loop.
    with EmulatorServer.from_snapshot(
        load_snapshot(inventory),
        API_KEY,
        provision_seconds=0.3,
        delete_seconds=0.2,
        rate_limits=RateLimits.off(),
    ) as server:
        yield server


def mig_capable(dest: Path, hosts: Callable[[str], bool]) -> Path:
    """The sample inventory, written to ``dest``, with the GPUs of the hosts whose names ``hosts``
    accepts MIG-capable."""
    raw = json.loads((SAMPLE / "inventory.json").read_text())
    for host in raw["edgeHosts"]:
        if hosts(host["metadata"]["name"]):
            for gpu in host["spec"]["device"]["gpus"]:
                gpu["migCapable"] = True
    dest.write_text(json.dumps(raw))
    return dest


@pytest.fixture
def emulator(monkeypatch: pytest.MonkeyPatch) -> Iterator[EmulatorServer]:
    with sample_emulator(monkeypatch) as server:
        yield server


class PinnedClock:
    """A clock that moves only when the test moves it (``at``): status timestamps, cooldowns and how
    long a workload has waited are what the test says, whatever second it runs in."""

    def __init__(self, at: float = 1_790_000_000.0) -> None:
        self.at = at

    def time(self) -> float:
        return self.at

    def monotonic(self) -> float:
        return self.at


def controller(
    remote: RemoteRepo,
    emulator: EmulatorServer,
    tmp_path: Path,
    *,
    clock: PinnedClock | None = None,
    **options: object,
) -> Pipeline:
    opts = ControllerOptions(
        repo=str(remote.bare),
        palette_url=emulator.url,
        cache_dir=tmp_path / "cache",
        palette_rate_limits=RateLimits.off(),
        **options,  # type: ignore[arg-type]
    )
    return wiring.build(opts, clock=clock)


def status_doc(remote: RemoteRepo, path: str) -> dict[str, object]:
    text = git("show", f"reconciler/status:{path}", cwd=remote.bare)
    doc = yaml.safe_load(text)
    assert isinstance(doc, dict)
    return doc


def status_tip(remote: RemoteRepo) -> str:
    return git("rev-parse", "refs/heads/reconciler/status", cwd=remote.bare).strip()


def clusters_by_name(emulator: EmulatorServer) -> dict[str, list[str]]:
    emulator.state.sweep()
    out: dict[str, list[str]] = {}
    for cluster in list(emulator.state.clusters.values()):
        out.setdefault(cluster.name, []).append(cluster.uid)
    return out


def copy_sample(dest: Path) -> Path:
    shutil.copytree(SAMPLE, dest)
    return dest


def platform_clusters(emulator: EmulatorServer) -> dict[str, list[str]]:
    """``clusters_by_name`` without the pools' clusters (``palette.ai/kind: ComputePool``)."""
    emulator.state.sweep()
    pools = {c.name for c in list(emulator.state.clusters.values()) if c.labels.get(KIND_LABEL) == POOL_KIND}
    return {name: uids for name, uids in clusters_by_name(emulator).items() if name not in pools}


@pytest.fixture
def mig_emulator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[EmulatorServer]:
    """The sample inventory with its pool host's A100 80GB GPUs MIG-capable."""
    inventory = mig_capable(tmp_path / "inventory-mig.json", lambda name: name == "gpu-a100-03")
    with sample_emulator(monkeypatch, inventory) as server:
        yield server


@pytest.fixture
def a100_mig_emulator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[EmulatorServer]:
    """The sample inventory with every A100 host's GPUs MIG-capable (a MIG pool may grow onto any)."""
    inventory = mig_capable(tmp_path / "inventory-mig.json", lambda name: name.startswith("gpu-a100-"))
    with sample_emulator(monkeypatch, inventory) as server:
        yield server
