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
import os
import secrets
import statistics
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _support import emulator_process, fleet, git

from reconciler.logging import configure_logging
from reconciler.metrics import PassOutcome
from reconciler.palette.client import PaletteClient
from reconciler.runtime import wiring
from reconciler.runtime.options import ControllerOptions
from reconciler.runtime.pipeline import Pipeline


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


def first_pass(ctl: Pipeline, url: str, hosts: int) -> None:
    """The first full pass: its time, actions and Palette calls by kind."""
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
    print(f"  host listing: {host_pages} pages for {hosts} hosts (pages of 50: {-(-hosts // 50)})")


def noop_against_baseline(ctl: Pipeline, url: str, key: str, bare: Path, repeat: int) -> None:
    """No-op passes and the baseline (``git ls-remote`` + one full inventory listing), alternated."""
    tip = git("-C", str(bare), "rev-parse", "refs/heads/reconciler/status")
    noop: list[float] = []
    base: list[float] = []
    httpx.post(f"{url}/__emulator/reset-stats", timeout=10)
    outcomes = set()
    with PaletteClient(url, key) as client:
        for _ in range(repeat):
            t0 = time.perf_counter()
            outcomes.add(str(ctl.reconcile_once().outcome))
            noop.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            git("ls-remote", str(bare), "refs/heads/main")
            client.search_edge_hosts()
            base.append(time.perf_counter() - t0)
    noop_writes = writes(stats(url))
    same_tip = git("-C", str(bare), "rev-parse", "refs/heads/reconciler/status") == tip
    n, b = statistics.median(noop), statistics.median(base)
    print(f"no-op pass:  median {n * 1000:.0f} ms over {repeat} (outcomes {sorted(outcomes)})")
    print(f"baseline (git ls-remote + full inventory listing): median {b * 1000:.0f} ms")
    print(f"ratio no-op / baseline: {n / b:.2f}x (target <= 1.5x)")
    print(f"no-op Palette writes: {noop_writes}; status commit unchanged: {same_tip}")


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
    repo = fleet(work, platforms=args.platforms, namespaces=args.namespaces, hosts=args.hosts)
    key = secrets.token_urlsafe(16)
    times = ("--provision-seconds", "1", "--delete-seconds", "1")
    with emulator_process(repo.inventory, key, *times) as url:
        os.environ["PALETTE_API_KEY"] = key
        options = ControllerOptions(
            repo=str(repo.bare), palette_url=url, cache_dir=work / "cache", apply_concurrency=8
        )
        with closing(wiring.build(options)) as ctl:
            first_pass(ctl, url, args.hosts)
            # Let every cluster finish provisioning, then until a pass finds nothing to do.
            for _ in range(30):
                time.sleep(1.0)
                if ctl.reconcile_once().outcome is PassOutcome.SKIPPED:
                    break
            noop_against_baseline(ctl, url, key, repo.bare, args.repeat)
            if args.profile:
                import cProfile
                import pstats

                profiler = cProfile.Profile()
                profiler.runcall(ctl.reconcile_once)
                pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
