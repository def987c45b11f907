#!/usr/bin/env python3
"""Graceful stop of a ``reconciler run`` process in the middle of a large first pass.

    python bench/bench_stop.py [--platforms 1000] [--hosts 10000] [--latency 0.25] [--after 50]

The emulator runs in this process with ``--latency`` seconds added to every create; the reconciler is a
real ``reconciler run`` process. Once ``--after`` creates have arrived, SIGTERM is sent. Prints: the
creates before the signal, creates that arrived after it (in flight, then none), the time to exit, the
exit code and whether every created cluster is in the committed status.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _support import fleet, git

from reconciler.emulator import EmulatorServer, FaultRule
from reconciler.snapshots import load_snapshot

CREATE = "/v1/spectroclusters/edge-native"


def reported_clusters(bare: Path) -> set[str]:
    """The cluster uids the committed status of the platforms names."""
    names = git("-C", str(bare), "ls-tree", "-r", "--name-only", "reconciler/status").split()
    reported = set()
    for name in names:
        if "/mlplatforms/" in name:
            doc = yaml.safe_load(git("-C", str(bare), "show", f"reconciler/status:{name}"))
            uid = (doc["status"].get("cluster") or {}).get("uid")
            if uid:
                reported.add(uid)
    return reported


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--platforms", type=int, default=1000)
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--namespaces", type=int, default=10)
    parser.add_argument("--latency", type=float, default=0.25)
    parser.add_argument("--after", type=int, default=50)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-stop-"))
    repo = fleet(work, platforms=args.platforms, namespaces=args.namespaces, hosts=args.hosts)

    key = "bench-stop-key-0123456789"
    arrivals: list[float] = []
    lock = threading.Lock()
    rule = FaultRule(path=f"^{CREATE}$", methods=("POST",), latency=args.latency)
    with EmulatorServer.from_snapshot(load_snapshot(repo.inventory), key, faults=[rule]) as emulator:
        decide = emulator.faults.decide

        def record(method: str, path: str):  # type: ignore[no-untyped-def]
            if method == "POST" and path == CREATE:
                with lock:
                    arrivals.append(time.monotonic())
            return decide(method, path)

        emulator.faults.decide = record  # type: ignore[method-assign]
        command = [
            sys.executable,
            "-m",
            "reconciler.cli",
            "run",
            "--repo",
            str(repo.bare),
            "--palette",
            emulator.url,
            "--cache-dir",
            str(work / "cache"),
            "--listen",
            "127.0.0.1:0",
            "--interval",
            "3600",
            "--log-level",
            "warning",
        ]
        proc = subprocess.Popen(
            command,
            env={**os.environ, "PALETTE_API_KEY": key},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        while len(arrivals) < args.after:
            time.sleep(0.01)
        signalled = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
        took = time.monotonic() - signalled
        with lock:
            before = sum(1 for t in arrivals if t <= signalled)
            late = sorted(t - signalled for t in arrivals if t > signalled)
        clusters = {c.uid for c in emulator.state.clusters.values()}
    reported = reported_clusters(repo.bare)
    print(f"platforms {args.platforms}, hosts {args.hosts}, create latency {args.latency} s")
    print(f"creates before SIGTERM: {before}")
    print(
        f"creates arriving after it: {len(late)} (last {late[-1] * 1000:.0f} ms after)"
        if late
        else "creates arriving after it: 0"
    )
    print(f"exit code {code} after {took:.2f} s")
    print(f"clusters created {len(clusters)}, in the committed status {len(reported & clusters)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
