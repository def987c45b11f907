#!/usr/bin/env python3
"""The reconcile loop at scale: 1,000 platforms over 20 namespaces, 10,000 edge hosts.

    python bench/bench_loop.py [--hosts 10000] [--platforms 1000] [--repeat 5]

Runs the emulator as a separate process (so it does not share this process's GIL), a real bare
repository, and the controller in this process. Prints:
- the first full pass: its time and the Palette calls it made, by kind (host listing must be pages of 50);
- the no-op pass (nothing changed) against the baseline of one ``git ls-remote`` plus one full inventory
  listing, measured side by side in the same run (medians of --repeat), with their ratio (target <= 1.5x),
  and that the no-op pass made no Palette write and no status commit.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gen_config_tree
import gen_inventory

from reconciler.controller import Controller, ControllerOptions
from reconciler.logging import configure_logging
from reconciler.metrics import PassOutcome
from reconciler.palette.client import PaletteClient

GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@localhost",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@localhost",
}


def git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True, env=GIT_ENV).stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stats(url: str) -> dict[tuple[str, str], int]:
    rows = httpx.get(f"{url}/__emulator/stats", timeout=10).json()
    out: dict[tuple[str, str], int] = {}
    for row in rows.get("requests", rows) if isinstance(rows, dict) else rows:
        key = (row["method"], row["path"])
        out[key] = out.get(key, 0) + int(row["count"])
    return out


def writes(counts: dict[tuple[str, str], int]) -> int:
    return sum(
        n
        for (m, p), n in counts.items()
        if m in ("PUT", "PATCH", "DELETE") or (m == "POST" and not p.endswith("/search"))
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--platforms", type=int, default=1_000)
    parser.add_argument("--namespaces", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="print a cProfile of one no-op pass")
    args = parser.parse_args()
    configure_logging("error")

    work = Path(tempfile.mkdtemp(prefix="bench-loop-"))
    inventory = work / "inventory.json"
    inventory.write_text(json.dumps(gen_inventory.generate(args.hosts, seed=1)))
    tree = work / "config"
    support = len(gen_config_tree.SUPPORT) * args.namespaces
    gen_config_tree.generate(tree, documents=args.platforms + support, namespaces=args.namespaces)
    for profile in tree.glob("*/computeprofile.yaml"):  # one control-plane node: more platforms fit
        profile.write_text(profile.read_text().replace("nodeCount: 3", "nodeCount: 1"))
    git("init", "-q", "-b", "main", str(tree))
    git("-C", str(tree), "add", "-A")
    git("-C", str(tree), "commit", "-q", "-m", "bench config")
    bare = work / "remote.git"
    git("clone", "-q", "--bare", str(tree), str(bare))

    key = secrets.token_urlsafe(16)
    port = free_port()
    env = {**os.environ, "PALETTE_API_KEY": key}
    emulator = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "reconciler.cli",
            "emulator",
            "--inventory",
            str(inventory),
            "--port",
            str(port),
            "--provision-seconds",
            "1",
            "--delete-seconds",
            "1",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{url}/__emulator/stats", timeout=1)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        os.environ["PALETTE_API_KEY"] = key
        ctl = Controller(
            ControllerOptions(repo=str(bare), palette_url=url, cache_dir=work / "cache", apply_concurrency=8)
        )

        httpx.post(f"{url}/__emulator/reset-stats", timeout=10)
        t0 = time.perf_counter()
        first = ctl.reconcile_once()
        first_seconds = time.perf_counter() - t0
        calls = stats(url)
        actions: dict[str, int] = {}
        for p in first.plan:
            actions[str(p.action)] = actions.get(str(p.action), 0) + 1
        print(f"first pass: {first_seconds:.2f} s, outcome {first.outcome}, actions {actions}")
        for (method, path), n in sorted(calls.items()):
            print(f"  {method:6} {path:60} {n:6}")
        host_pages = calls.get(("POST", "/v1/dashboard/edgehosts/search"), 0)
        print(
            f"  host listing: {host_pages} pages for {args.hosts} hosts (pages of 50: {-(-args.hosts // 50)})"
        )

        # Let every cluster finish provisioning, then until a pass finds nothing to do.
        for _ in range(30):
            time.sleep(1.0)
            if ctl.reconcile_once().outcome is PassOutcome.SKIPPED:
                break
        tip = git("-C", str(bare), "rev-parse", "refs/heads/reconciler/status").strip()

        noop: list[float] = []
        base: list[float] = []
        client = PaletteClient(url, key)
        httpx.post(f"{url}/__emulator/reset-stats", timeout=10)
        outcomes = set()
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            outcomes.add(str(ctl.reconcile_once().outcome))
            noop.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            git("ls-remote", str(bare), "refs/heads/main")
            client.search_edge_hosts()
            base.append(time.perf_counter() - t0)
        noop_writes = writes(stats(url))
        same_tip = git("-C", str(bare), "rev-parse", "refs/heads/reconciler/status").strip() == tip
        if args.profile:
            import cProfile
            import pstats

            profiler = cProfile.Profile()
            profiler.runcall(ctl.reconcile_once)
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
        n, b = statistics.median(noop), statistics.median(base)
        print(f"no-op pass:  median {n * 1000:.0f} ms over {args.repeat} (outcomes {sorted(outcomes)})")
        print(f"baseline (git ls-remote + full inventory listing): median {b * 1000:.0f} ms")
        print(f"ratio no-op / baseline: {n / b:.2f}x (target <= 1.5x)")
        print(f"no-op Palette writes: {noop_writes}; status commit unchanged: {same_tip}")
        client.close()
        ctl.close()
    finally:
        emulator.terminate()
        emulator.wait(10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
