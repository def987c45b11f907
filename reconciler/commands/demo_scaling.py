"""``reconciler demo``'s scaling scene: one scale-up of the sample pool ``project-b/shared-a100`` from the
GPU utilisation a real Prometheus reads from the emulator (docs/scaling.md, docs/demo.md).

It runs only when a ``prometheus`` binary is on the PATH; otherwise one line says how to see it. In its
own corner of the demo's workspace (so the sample's platforms keep their hosts): project b's settings
and profiles, the sample pool with ``resourceGroups: {network-pool: "3"}`` (so the free A100 hosts of
network pool 3 may join) and a ScalingPolicy of short windows (3 s at a 1 s step), a fresh emulator,
Prometheus on loopback scraping the emulator every second, and the controller in process with
``--prometheus``. Once the pool is Running its utilisation is set to 95% on the emulator (what its
``PATCH /__emulator/clusters/{uid}/utilization`` does); the pass that scales it up is shown with its
status commit.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from reconciler.emulator import EmulatorServer
from reconciler.emulator.utilization import METRICS_PATH
from reconciler.model.pools import KIND_LABEL, POOL_KIND
from reconciler.runtime import wiring
from reconciler.runtime.options import ControllerOptions
from reconciler.snapshots import load_snapshot
from reconciler.source import GitError
from reconciler.source.status_reader import StatusBranch
from reconciler.status.view import load_yaml

HINT = (
    "scaling: install Prometheus (apt-get install prometheus) and run the demo again to see a pool "
    "scale up from GPU utilisation (docs/scaling.md)"
)
POOL_FILE = "project-b/pools/shared-a100.yaml"
POOL_STATUS = "project-b/computepools/shared-a100.yaml"
SCENE_TIMEOUT_SECONDS = 60.0
POLICY = {
    "apiVersion": "spectrocloud.com/v1alpha1",
    "kind": "ScalingPolicy",
    "metadata": {"name": "demo-autoscale", "namespace": "project-b"},
    "spec": {
        "gpu": [
            {
                "family": "NVIDIA-A100",
                "scaleUpThreshold": 80,
                "scaleDownThreshold": 30,
                "scaleUpDuration": "3s",
                "scaleDownDuration": "3s",
            }
        ],
        "gpuResourceBounds": [{"family": "NVIDIA-A100", "minGPUCount": 8, "maxGPUCount": 24}],
        "cooldownDuration": "1m",
        "metrics": {"step": "1s"},
    },
}


def scene(
    sample: Path,
    workspace: Path,
    api_key: str,
    say: Callable[[str], None],
    make_remote: Callable[[Path, Path], Path],
) -> bool:
    """Show one scale-up; True when it happened. Never raises for a scene that did not work out: the
    demo goes on (one line says what went wrong)."""
    binary = shutil.which("prometheus")
    if binary is None:
        say(HINT)
        return False
    root = workspace / "scaling"
    try:
        return _scene(binary, sample, root, api_key, say, make_remote)
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        say(f"scaling: the scene did not run: {exc}")
        return False


def _config(sample: Path, root: Path) -> Path:
    """Project b without its platforms, workloads and Environment, the pool with the demo policy."""
    config = root / "sample"
    shutil.copytree(
        sample / "project-b",
        config / "project-b",
        ignore=shutil.ignore_patterns("platforms", "workloads", "finetune-l40s.yaml", "environment-*.yaml"),
    )
    pool = yaml.safe_load((sample / POOL_FILE).read_text(encoding="utf-8"))
    pool["spec"]["resourceGroups"] = {"network-pool": "3"}
    pool["spec"]["scalingPolicyRef"] = {"name": POLICY["metadata"]["name"]}  # type: ignore[index]
    (config / POOL_FILE).write_text(yaml.safe_dump(pool, sort_keys=False), encoding="utf-8")
    (config / "project-b/scalingpolicy-demo.yaml").write_text(yaml.safe_dump(POLICY, sort_keys=False))
    return config


def _scene(
    binary: str,
    sample: Path,
    root: Path,
    api_key: str,
    say: Callable[[str], None],
    make_remote: Callable[[Path, Path], Path],
) -> bool:
    remote = make_remote(_config(sample, root), root)
    snapshot = load_snapshot(sample / "inventory.json")
    deadline = time.monotonic() + SCENE_TIMEOUT_SECONDS
    with (
        EmulatorServer.from_snapshot(
            snapshot, api_key, provision_seconds=0.5, delete_seconds=0.2
        ) as emulator,
        _prometheus(binary, root, emulator.url.removeprefix("http://")) as prometheus,
    ):
        say(
            f"\nscaling: pool project-b/shared-a100 with ScalingPolicy demo-autoscale (GPU > 80% for 3s at a "
            f"1s step), Prometheus {prometheus} scraping a fresh emulator {emulator.url}"
        )
        options = ControllerOptions(
            repo=str(remote), palette_url=emulator.url, cache_dir=root / "cache", prometheus_url=prometheus
        )
        controller = wiring.build(options, environ={"PALETTE_API_KEY": api_key})
        try:
            while _phase(remote) != "Running":
                if time.monotonic() > deadline:
                    say("scaling: the pool did not reach Running in time")
                    return False
                controller.reconcile_once()
                time.sleep(0.3)
            cluster = _pool_cluster(emulator)
            emulator.app.utilization.set(cluster.uid, {"gpu": 0.95})
            say(
                f"scaling: GPU utilisation of cluster {cluster.name} set to 95% on the emulator "
                f"(as PATCH /__emulator/clusters/{cluster.uid}/utilization does), {_hosts(emulator)}"
            )
            passes = 0
            while True:
                result = controller.reconcile_once()
                passes += 1
                action = _last_action(remote)
                if action is not None:
                    break
                if time.monotonic() > deadline:
                    say("scaling: no scale-up in time (Prometheus needs a few scrapes first)")
                    return False
                time.sleep(0.5)
        finally:
            controller.close()
        body = _commit_body(remote, result.commit)
        say(f"scaling: {passes} passes later: {action.get('message')}; now {_hosts(emulator)}")
        say("\n".join(f"  {line}" if line else "" for line in body))
        say(f"read it again: git --git-dir {remote} log reconciler/status")
        return True


def _phase(remote: Path) -> str | None:
    status = _pool_status(remote)
    return str(status.get("phase")) if status else None


def _pool_status(remote: Path) -> dict[str, Any]:
    try:
        data = StatusBranch(str(remote)).files().get(POOL_STATUS)
    except GitError:  # no status branch yet
        return {}
    doc = load_yaml(data) if data is not None else None
    status = doc.get("status") if isinstance(doc, dict) else None
    return status if isinstance(status, dict) else {}


def _last_action(remote: Path) -> dict[str, Any] | None:
    scaling = _pool_status(remote).get("scaling")
    action = scaling.get("lastAction") if isinstance(scaling, dict) else None
    return action if isinstance(action, dict) else None


def _pool_cluster(emulator: EmulatorServer) -> Any:
    return next(c for c in emulator.state.clusters.values() if c.labels.get(KIND_LABEL) == POOL_KIND)


def _hosts(emulator: EmulatorServer) -> str:
    cluster = _pool_cluster(emulator)
    names = sorted(
        str(emulator.state.hosts[uid]["metadata"]["name"])
        for uid in cluster.host_uids()
        if uid in emulator.state.hosts
    )
    return f"the pool's hosts: {', '.join(names)}"


def _commit_body(remote: Path, commit: str | None) -> list[str]:
    """The status commit's message without its trailers."""
    ref = commit or "reconciler/status"
    text = subprocess.run(
        ["git", "--git-dir", str(remote), "log", "-1", "--format=%B", ref],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line for line in text.rstrip().splitlines() if not line.startswith("Source-")]


@contextmanager
def _prometheus(binary: str, root: Path, target: str) -> Iterator[str]:
    """``prometheus`` on loopback scraping ``target``'s ``/metrics/clusters`` every second."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    config = root / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, scrape_timeout: 1s}\n"
        "scrape_configs:\n"
        "  - job_name: emulator\n"
        "    honor_labels: true\n"
        f"    metrics_path: {METRICS_PATH}\n"
        f"    static_configs: [{{targets: ['{target}']}}]\n",
        encoding="utf-8",
    )
    url = f"http://127.0.0.1:{port}"
    with (root / "prometheus.log").open("wb") as log:
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={root / 'prometheus-data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"prometheus exited (see {root / 'prometheus.log'})")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
                break  # listening: the controller's passes tolerate the first empty answers
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("prometheus did not become ready in 30 s")
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
