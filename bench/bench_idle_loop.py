#!/usr/bin/env python3
"""The loop against Palette's rate limits: what an idle loop costs and how fast a merge gets applied.

    python bench/bench_idle_loop.py [--hosts 10000] [--platforms 100] [--settle 20] [--idle 660]
                                    [--interval 60]

Runs the emulator as a separate process with Palette's limits on (``--rate-limits palette``: 10
requests/s on ``/v1/dashboard``), a real bare repository, and ``Controller.run_forever`` in a thread of
this process (git every ``--interval`` s, no webhook). Prints:
- the first pass: its time, its ``/v1/dashboard`` requests, and the paced minimum (those requests, less
  the burst of 5, at 10/s); target within 1.2x;
- the idle loop over ``--idle`` seconds: passes, ``/v1/dashboard`` requests per idle pass, the share of
  the 10 requests/s budget used (target <= 25%), and 429 answers;
- a merge (a new platform pushed to the bare config repository): the time until a pass applied it
  (target within 2 git intervals).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gen_config_tree
import gen_inventory

from reconciler.controller import Controller, ControllerOptions, PassResult
from reconciler.logging import configure_logging
from reconciler.palette.pacing import RateLimits

DASHBOARD_RATE = 10.0
OTHER_RATE = 50.0
BURST = 5
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


def counts(url: str) -> tuple[int, int, int]:
    """(/v1/dashboard requests, other requests, 429 answers) so far."""
    rows = httpx.get(f"{url}/__emulator/stats", timeout=30).json()["requests"]
    dashboard = sum(r["count"] for r in rows if r["path"].startswith("/v1/dashboard"))
    other = sum(r["count"] for r in rows if not r["path"].startswith("/v1/dashboard"))
    refused = sum(r["count"] for r in rows if r["status"] == 429)
    return dashboard, other, refused


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--platforms", type=int, default=100)
    parser.add_argument("--namespaces", type=int, default=10)
    parser.add_argument("--idle", type=float, default=660.0, help="seconds of idle loop to measure")
    parser.add_argument(
        "--settle",
        type=float,
        default=20.0,
        help="seconds after the first pass before the idle window (the first full sweep is due 600 s "
        "after the first listing: the default window of 660 s includes one)",
    )
    parser.add_argument("--interval", type=float, default=60.0, help="git poll interval (s)")
    args = parser.parse_args()
    configure_logging("error")

    work = Path(tempfile.mkdtemp(prefix="bench-idle-"))
    inventory = work / "inventory.json"
    inventory.write_text(json.dumps(gen_inventory.generate(args.hosts, seed=1)))
    tree = work / "config"
    support = len(gen_config_tree.SUPPORT) * args.namespaces
    gen_config_tree.generate(tree, documents=args.platforms + support, namespaces=args.namespaces)
    for profile in tree.glob("*/computeprofile.yaml"):
        profile.write_text(profile.read_text().replace("nodeCount: 3", "nodeCount: 1"))
    git("init", "-q", "-b", "main", str(tree))
    git("-C", str(tree), "add", "-A")
    git("-C", str(tree), "commit", "-q", "-m", "bench config")
    bare = work / "remote.git"
    git("clone", "-q", "--bare", str(tree), str(bare))
    git("-C", str(tree), "remote", "add", "origin", str(bare))

    key = secrets.token_urlsafe(16)
    port = free_port()
    env = {**os.environ, "PALETTE_API_KEY": key}
    command = [sys.executable, "-m", "reconciler.cli", "emulator", "--inventory", str(inventory)]
    command += ["--port", str(port), "--provision-seconds", "1", "--delete-seconds", "1"]
    command += ["--rate-limits", "palette"]
    emulator = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    ctl: Controller | None = None
    loop: threading.Thread | None = None
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                httpx.get(f"{url}/__emulator/stats", timeout=1)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        os.environ["PALETTE_API_KEY"] = key
        options = ControllerOptions(
            repo=str(bare),
            palette_url=url,
            cache_dir=work / "cache",
            interval=args.interval,
            palette_rate_limits=RateLimits.palette(),
        )
        ctl = Controller(options)
        passes: list[tuple[float, PassResult]] = []
        lock = threading.Lock()

        def on_pass(result: PassResult) -> None:
            with lock:
                passes.append((time.monotonic(), result))

        httpx.post(f"{url}/__emulator/reset-stats", timeout=30)
        started = time.monotonic()
        loop = threading.Thread(target=ctl.run_forever, kwargs={"on_pass": on_pass}, daemon=True)
        loop.start()
        while not passes:
            time.sleep(0.05)
        first_end, first = passes[0]
        first_seconds = first_end - started
        first_dashboard, first_other, first_429 = counts(url)
        # Observe (searches, 10/s) and apply (creates, 50/s) run one after the other.
        paced = max(first_dashboard - BURST, 0) / DASHBOARD_RATE
        paced_all = paced + max(first_other - BURST, 0) / OTHER_RATE
        print(f"hosts {args.hosts}, platforms {args.platforms}, git interval {args.interval:g} s")
        print(
            f"first pass: {first_seconds:.1f} s, outcome {first.outcome}, {first_dashboard} /v1/dashboard "
            f"requests ({-(-args.hosts // 50)} host pages), {first_other} others (creates), "
            f"429s {first_429}"
        )
        print(
            f"  paced minimum, searches only: {paced:.1f} s, ratio {first_seconds / paced:.2f}x; "
            f"with the creates at 50/s: {paced_all:.1f} s, ratio {first_seconds / paced_all:.2f}x "
            f"(target <= 1.2x)"
        )

        # Settle: clusters provision; then measure an idle window.
        settle_until = first_end + args.settle
        while time.monotonic() < settle_until:
            time.sleep(0.5)
        with lock:
            settled = len(passes)
        base_dashboard, _, base_429 = counts(url)
        window_start = time.monotonic()
        time.sleep(args.idle)
        window = time.monotonic() - window_start
        dashboard, _, refused = counts(url)
        with lock:
            idle_passes = len(passes) - settled
        used = dashboard - base_dashboard
        share = used / window / DASHBOARD_RATE
        per_pass = used / idle_passes if idle_passes else float("nan")
        print(
            f"idle loop: {window:.0f} s, {idle_passes} passes, {used} /v1/dashboard requests "
            f"({per_pass:.1f} per idle pass), {share:.1%} of the 10/s budget (target <= 25%), "
            f"429s {refused - base_429}"
        )

        # A merge: a new platform pushed to the bare repository, applied by the next git poll.
        i = args.platforms + 1
        ns = "team-00"
        text = gen_config_tree.PLATFORM.format(i=i, ns=ns, family="NVIDIA-H100", count=1, vip="10.200.0.1")
        (tree / ns / "platforms" / f"platform-{i:05d}.yaml").write_text(text)
        git("-C", str(tree), "add", "-A")
        git("-C", str(tree), "commit", "-q", "-m", "merge: one more platform")
        head = git("-C", str(tree), "rev-parse", "HEAD").strip()
        with lock:
            before = len(passes)
        pushed = time.monotonic()
        git("-C", str(tree), "push", "-q", "origin", "main")
        applied = None
        while time.monotonic() - pushed < 6 * args.interval:
            with lock:
                later = passes[before:]
            hit = next((t for t, r in later if r.revision == head and r.writes > 0), None)
            if hit is not None:
                applied = hit - pushed
                break
            time.sleep(0.2)
        if applied is None:
            print(f"merge: not applied within {6 * args.interval:.0f} s")
        else:
            print(
                f"merge to apply: {applied:.1f} s = {applied / args.interval:.2f} git intervals (target <= 2)"
            )
    finally:
        if ctl is not None:
            ctl.stop()
        if loop is not None:
            loop.join(60)
        if ctl is not None:
            ctl.close()
        emulator.terminate()
        emulator.wait(10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
