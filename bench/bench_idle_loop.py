#!/usr/bin/env python3
"""The loop against Palette's rate limits at fleet scale: every pass, its memory, and how fast a merge
gets applied.

    python bench/bench_idle_loop.py [--hosts 10000] [--platforms 100] [--settle 20] [--idle 660]
                                    [--interval 60] [--merge-new 5] [--merge-changed 5]

Runs the emulator as a separate process with Palette's limits on (``--rate-limits palette``: 10
requests/s on ``/v1/dashboard``), a real bare repository, and ``Pipeline.run_forever`` in a child
process of its own (git every ``--interval`` s, no webhook), so that the child's ``VmHWM`` is the
loop's own peak RSS. The child writes one JSON line per pass; this process reads them. Prints:
- the first pass: its time, its ``/v1/dashboard`` requests, and the paced minimum (those requests, less
  the burst of 5, at 10/s); target within 1.2x;
- the idle loop over ``--idle`` seconds: passes, ``/v1/dashboard`` requests per idle pass, the share of
  the 10 requests/s budget used (target <= 25%), and 429 answers;
- a merge (``--merge-new`` platforms added, ``--merge-changed`` platforms given one GPU more, pushed
  to the bare config repository): the time until a pass applied it (target within 2 git intervals);
- over the whole run: passes, passes that failed (outcome ``error``), passes that wrote to Palette or
  changed status and committed, status commits on the branch, 429 answers, and the loop's peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

import gen_config_tree  # noqa: E402

DASHBOARD_RATE = 10.0
OTHER_RATE = 50.0
BURST = 5
STATUS_BRANCH = "reconciler/status"
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
    rows = httpx.get(f"{url}/__emulator/stats", timeout=60).json()["requests"]
    dashboard = sum(r["count"] for r in rows if r["path"].startswith("/v1/dashboard"))
    other = sum(r["count"] for r in rows if not r["path"].startswith("/v1/dashboard"))
    refused = sum(r["count"] for r in rows if r["status"] == 429)
    return dashboard, other, refused


def _hwm_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


# -- the child: the loop -------------------------------------------------------------------------


def child_loop(repo: str, url: str, cache: str, interval: float, out: str) -> None:
    """``run_forever`` until SIGTERM; one JSON line per pass (monotonic time, outcome, writes, commit,
    error, VmHWM so far) appended to ``out``."""
    from reconciler.logging import configure_logging
    from reconciler.palette.pacing import RateLimits
    from reconciler.runtime import wiring
    from reconciler.runtime.options import ControllerOptions
    from reconciler.runtime.outcome import PassResult

    configure_logging("error")
    options = ControllerOptions(
        repo=repo,
        palette_url=url,
        cache_dir=Path(cache),
        interval=interval,
        palette_rate_limits=RateLimits.palette(),
    )
    ctl = wiring.build(options)
    signal.signal(signal.SIGTERM, lambda *_: ctl.stop())
    with open(out, "a", encoding="utf-8") as sink:

        def on_pass(result: PassResult) -> None:
            row = {
                "t": time.monotonic(),
                "outcome": str(result.outcome),
                "revision": result.revision,
                "writes": result.writes,
                "commit": result.commit,
                "error": result.error,
                "seconds": result.duration,
                "hwm": _hwm_mib(),
            }
            sink.write(json.dumps(row) + "\n")
            sink.flush()

        sink.write(json.dumps({"start": time.monotonic(), "hwm": _hwm_mib()}) + "\n")
        sink.flush()
        ctl.run_forever(on_pass=on_pass)
        ctl.close()
        sink.write(json.dumps({"final": time.monotonic(), "hwm": _hwm_mib()}) + "\n")


# -- the parent ----------------------------------------------------------------------------------


class Passes:
    """The child's JSON lines, read as they arrive."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows: list[dict[str, Any]] = []
        self.marks: list[dict[str, Any]] = []
        self._offset = 0

    def poll(self) -> list[dict[str, Any]]:
        if self.path.exists():
            with self.path.open(encoding="utf-8") as f:
                f.seek(self._offset)
                text = f.read()
            complete = text[: text.rfind("\n") + 1]
            self._offset += len(complete.encode())
            for line in complete.splitlines():
                row = json.loads(line)
                (self.rows if "outcome" in row else self.marks).append(row)
        return self.rows

    def wait(self, count: int, child: subprocess.Popen[bytes], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(self.poll()) < count:
            if child.poll() is not None:
                raise SystemExit(f"the loop exited with {child.returncode}")
            if time.monotonic() > deadline:
                raise SystemExit(f"no pass {count} within {timeout:.0f} s")
            time.sleep(0.5)


def merge(tree: Path, platforms: int, new: int, changed: int) -> str:
    """Add ``new`` platforms and give ``changed`` existing ones one GPU more; commit; return the sha."""
    files = sorted(tree.glob("*/platforms/*.yaml"))
    for path in files[:: max(1, len(files) // max(changed, 1))][:changed]:
        text = path.read_text()
        path.write_text(re.sub(r"count: (\d+)", lambda m: f"count: {int(m.group(1)) + 1}", text, count=1))
    for k in range(new):
        i = platforms + 1 + k
        ns = f"team-{k % 10:02d}"
        vip = f"10.200.{k // 250}.{k % 250 + 1}"
        text = gen_config_tree.PLATFORM.format(i=i, ns=ns, family="NVIDIA-H100", count=1, vip=vip)
        (tree / ns / "platforms" / f"platform-{i:05d}.yaml").write_text(text)
    git("-C", str(tree), "add", "-A")
    git("-C", str(tree), "commit", "-q", "-m", f"merge: {new} platforms added, {changed} changed")
    return git("-C", str(tree), "rev-parse", "HEAD").strip()


def prepare(work: Path, args: argparse.Namespace) -> tuple[Path, Path, Path]:
    inventory = work / "inventory.json"
    generator = [sys.executable, str(HERE / "gen_inventory.py"), "--hosts", str(args.hosts), "--seed", "1"]
    subprocess.run([*generator, "--out", str(inventory)], check=True, capture_output=True)
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
    return inventory, tree, bare


def start_emulator(inventory: Path, key: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {**os.environ, "PALETTE_API_KEY": key}
    command = [sys.executable, "-m", "reconciler.cli", "emulator", "--inventory", str(inventory)]
    command += ["--port", str(port), "--provision-seconds", "1", "--delete-seconds", "1"]
    command += ["--rate-limits", "palette"]
    emulator = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 1200
    while True:
        try:
            httpx.get(f"{url}/__emulator/stats", timeout=5)
            return emulator, url
        except httpx.HTTPError:
            if emulator.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def report_first(args: argparse.Namespace, url: str, seconds: float, first: dict[str, Any]) -> None:
    dashboard, other, refused = counts(url)
    # Observe (searches, 10/s) and apply (creates, 50/s) run one after the other.
    paced = max(dashboard - BURST, 0) / DASHBOARD_RATE
    paced_all = paced + max(other - BURST, 0) / OTHER_RATE
    print(f"hosts {args.hosts}, platforms {args.platforms}, git interval {args.interval:g} s", flush=True)
    print(
        f"first pass: {seconds:.1f} s, outcome {first['outcome']}, {dashboard} /v1/dashboard requests "
        f"({-(-args.hosts // 50)} host pages), {other} others (creates), 429s {refused}, "
        f"peak RSS so far {first['hwm']:.0f} MiB",
        flush=True,
    )
    print(
        f"  paced minimum, searches only: {paced:.1f} s, ratio {seconds / paced:.2f}x; "
        f"with the creates at 50/s: {paced_all:.1f} s, ratio {seconds / paced_all:.2f}x "
        f"(target <= 1.2x)",
        flush=True,
    )


def idle_window(args: argparse.Namespace, url: str, passes: Passes) -> None:
    settled = len(passes.poll())
    base_dashboard, _, base_429 = counts(url)
    window_start = time.monotonic()
    time.sleep(args.idle)
    window = time.monotonic() - window_start
    dashboard, _, refused = counts(url)
    idle_passes = len(passes.poll()) - settled
    used = dashboard - base_dashboard
    share = used / window / DASHBOARD_RATE
    per_pass = used / idle_passes if idle_passes else float("nan")
    print(
        f"idle loop: {window:.0f} s, {idle_passes} passes, {used} /v1/dashboard requests "
        f"({per_pass:.1f} per idle pass), {share:.1%} of the 10/s budget (target <= 25%), "
        f"429s {refused - base_429}",
        flush=True,
    )


def time_merge(args: argparse.Namespace, tree: Path, passes: Passes) -> None:
    head = merge(tree, args.platforms, args.merge_new, args.merge_changed)
    before = len(passes.poll())
    pushed = time.monotonic()
    git("-C", str(tree), "push", "-q", "origin", "main")
    while time.monotonic() - pushed < 6 * args.interval:
        later = passes.poll()[before:]
        hit = next((r for r in later if r["revision"] == head and r["writes"] > 0), None)
        if hit is not None:
            applied = hit["t"] - pushed
            print(
                f"merge to apply ({args.merge_new} new, {args.merge_changed} changed): {applied:.1f} s = "
                f"{applied / args.interval:.2f} git intervals (target <= 2); that pass {hit['writes']} "
                f"writes, {hit['seconds']:.1f} s, commit {'yes' if hit['commit'] else 'no'}",
                flush=True,
            )
            return
        time.sleep(0.5)
    print(f"merge: not applied within {6 * args.interval:.0f} s", flush=True)


def summarise(url: str, bare: Path, passes: Passes) -> None:
    rows = passes.poll()
    failed = [r for r in rows if r["outcome"] == "error"]
    committed = sum(1 for r in rows if r["commit"])
    wrote = [r for r in rows if r["writes"] > 0]
    uncommitted = sum(1 for r in wrote if not r["commit"])
    outcomes: dict[str, int] = {}
    for r in rows:
        outcomes[r["outcome"]] = outcomes.get(r["outcome"], 0) + 1
    on_branch = int(git("-C", str(bare), "rev-list", "--count", STATUS_BRANCH).strip())
    peak = max([r["hwm"] for r in rows] + [m["hwm"] for m in passes.marks], default=0.0)
    _, _, refused = counts(url)
    print(
        f"whole run: {len(rows)} passes {outcomes}, {len(failed)} failed, {committed} committed status "
        f"({len(wrote)} wrote to Palette, {uncommitted} of them without a commit), {on_branch} commits "
        f"on {STATUS_BRANCH}, 429s {refused}, loop peak RSS (VmHWM) {peak:.0f} MiB",
        flush=True,
    )
    for r in failed[:5]:
        print(f"  failed pass: {r['error']}", flush=True)


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
    parser.add_argument("--merge-new", type=int, default=5, help="platforms the merge adds")
    parser.add_argument("--merge-changed", type=int, default=5, help="platforms the merge changes")
    parser.add_argument("--after", type=float, default=10.0, help="seconds of loop after the merge")
    parser.add_argument("--child-loop", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_loop:
        repo, url, cache, interval, out = args.child_loop
        child_loop(repo, url, cache, float(interval), out)
        return 0

    work = Path(tempfile.mkdtemp(prefix="bench-idle-"))
    print(f"work directory {work}", flush=True)
    inventory, tree, bare = prepare(work, args)
    key = secrets.token_urlsafe(16)
    emulator, url = start_emulator(inventory, key)
    child: subprocess.Popen[bytes] | None = None
    try:
        passes = Passes(work / "passes.jsonl")
        httpx.post(f"{url}/__emulator/reset-stats", timeout=60)
        argv = [sys.executable, __file__, "--child-loop", str(bare), url, str(work / "cache")]
        argv += [str(args.interval), str(passes.path)]
        started = time.monotonic()
        child = subprocess.Popen(argv, env={**os.environ, "PALETTE_API_KEY": key}, cwd=ROOT)
        passes.wait(1, child, 3600)
        first = passes.rows[0]
        report_first(args, url, first["t"] - started, first)
        time.sleep(max(0.0, first["t"] + args.settle - time.monotonic()))
        idle_window(args, url, passes)
        time_merge(args, tree, passes)
        time.sleep(args.after)
    finally:
        if child is not None:
            child.send_signal(signal.SIGTERM)
            child.wait(120)
        if child is not None:
            summarise(url, bare, passes)
        emulator.terminate()
        emulator.wait(30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
