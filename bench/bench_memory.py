#!/usr/bin/env python3
"""Peak memory (and time) of the reconciler's commands at fleet scale, each in its own process.

    python bench/bench_memory.py [--hosts 10000] [--platforms 1000] [--files 10000] [--only NAME ...]

Measures, each as a separate child process (peak RSS from ``wait4``, wall time around it):
- ``run``'s first pass and then an idle pass of the same process (the emulator runs as another process;
  the idle pass's peak is the high-water mark after ``/proc/self/clear_refs`` reset it, so it is that
  pass's own peak);
- ``plan --inventory`` of ``--platforms`` platforms on ``--hosts`` hosts (whole process);
- ``inventory show --inventory`` of ``--hosts`` hosts (whole process);
- ``validate`` of ``--files`` files, next to a bare CSafeLoader parse of the same files (whole process,
  same interpreter start-up).

Prints peak RSS in MiB, and per 10,000 hosts (or files) above the interpreter's own footprint (a
``python -c 'import reconciler.cli'`` child), so figures taken at a smaller scale can be extrapolated.
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
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

import gen_config_tree  # noqa: E402
import gen_inventory  # noqa: E402

GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@localhost",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@localhost",
}
CLI = [sys.executable, "-m", "reconciler.cli"]
EMULATOR_TIMES = ["--provision-seconds", "1", "--delete-seconds", "1"]


def git(*args: str) -> None:
    subprocess.run(["git", *args], check=True, capture_output=True, env=GIT_ENV)


def measure(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float, int, str]:
    """(peak RSS MiB, wall seconds, exit code, stdout) of one child process."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
    out = proc.stdout.read().decode() if proc.stdout else ""
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_maxrss / 1024, time.perf_counter() - started, proc.returncode, out


def config_repo(work: Path, platforms: int, namespaces: int = 20) -> Path:
    tree = work / "config"
    support = len(gen_config_tree.SUPPORT) * namespaces
    gen_config_tree.generate(tree, documents=platforms + support, namespaces=namespaces)
    for profile in tree.glob("*/computeprofile.yaml"):  # one control-plane node: more platforms fit
        profile.write_text(profile.read_text().replace("nodeCount: 3", "nodeCount: 1"))
    git("init", "-q", "-b", "main", str(tree))
    git("-C", str(tree), "add", "-A")
    git("-C", str(tree), "commit", "-q", "-m", "bench config")
    return tree


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- the child that runs passes ------------------------------------------------------------------


def _hwm_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def child_run(repo: str, url: str, cache: str) -> None:
    """First pass, passes until one finds nothing to do, then one idle pass measured on its own."""
    from reconciler.controller import Controller, ControllerOptions
    from reconciler.logging import configure_logging
    from reconciler.metrics import PassOutcome

    configure_logging("error")
    ctl = Controller(
        ControllerOptions(repo=repo, palette_url=url, cache_dir=Path(cache), apply_concurrency=8)
    )
    base = _hwm_mib()
    t0 = time.perf_counter()
    first = ctl.reconcile_once()
    first_s = time.perf_counter() - t0
    first_peak = _hwm_mib()
    for _ in range(30):
        time.sleep(1.0)
        if ctl.reconcile_once().outcome is PassOutcome.SKIPPED:
            break
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM: the idle pass's own peak
    t0 = time.perf_counter()
    idle = ctl.reconcile_once()
    idle_s = time.perf_counter() - t0
    print(
        json.dumps(
            {
                "imports": base,
                "first_peak": first_peak,
                "first_s": first_s,
                "first": str(first.outcome),
                "idle_peak": _hwm_mib(),
                "idle_s": idle_s,
                "idle": str(idle.outcome),
            }
        )
    )
    ctl.close()


def child_parse(root: str) -> None:
    """A bare CSafeLoader parse of every YAML file under ``root``: the floor ``validate`` compares with."""
    import yaml

    count = 0
    for path in sorted(Path(root).rglob("*.yaml")):
        for _doc in yaml.load_all(path.read_bytes(), Loader=yaml.CSafeLoader):
            count += 1
    print(count)


# -- measurements --------------------------------------------------------------------------------


def run_passes(work: Path, hosts: int, platforms: int, inventory: Path) -> dict[str, float]:
    tree = config_repo(work / "run", platforms)
    bare = work / "run" / "remote.git"
    git("clone", "-q", "--bare", str(tree), str(bare))
    key = secrets.token_urlsafe(16)
    port = free_port()
    env = {**os.environ, "PALETTE_API_KEY": key}
    emulator = subprocess.Popen(
        [*CLI, "emulator", "--inventory", str(inventory), "--port", str(port), *EMULATOR_TIMES],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
    )
    try:
        import httpx

        deadline = time.monotonic() + 120
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/__emulator/stats", timeout=1)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        argv = [
            sys.executable,
            __file__,
            "--child-run",
            str(bare),
            f"http://127.0.0.1:{port}",
            str(work / "cache"),
        ]
        peak, _wall, code, out = measure(argv, env)
        if code != 0:
            raise SystemExit(f"run child failed ({code})")
        found: dict[str, float] = json.loads(out.strip().splitlines()[-1])
        found["process_peak"] = peak
        return found
    finally:
        emulator.terminate()
        emulator.wait(30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--platforms", type=int, default=1_000)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--only", nargs="*", default=["run", "plan", "show", "validate"])
    parser.add_argument("--child-run", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--child-parse", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_run:
        child_run(*args.child_run)
        return 0
    if args.child_parse:
        child_parse(args.child_parse)
        return 0

    work = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    inventory = work / "inventory.json"
    inventory.write_text(json.dumps(gen_inventory.generate(args.hosts, seed=1)))
    per_hosts = 10_000 / max(args.hosts, 1)
    floor, _w, _c, _o = measure([sys.executable, "-c", "import reconciler.cli, reconciler.controller"])
    print(f"interpreter + imports: {floor:.0f} MiB; {args.hosts:,} hosts, {args.platforms:,} platforms")

    def show(name: str, peak: float, wall: float, per: float, unit: str) -> None:
        scaled = (peak - floor) * per
        print(f"{name:28} peak {peak:7.0f} MiB  {wall:6.2f} s  ({scaled:6.0f} MiB per 10,000 {unit})")

    steps: dict[str, Callable[[], None]] = {}

    def run() -> None:
        found = run_passes(work, args.hosts, args.platforms, inventory)
        show(f"run: first pass ({found['first']})", found["first_peak"], found["first_s"], per_hosts, "hosts")
        show(f"run: idle pass ({found['idle']})", found["idle_peak"], found["idle_s"], per_hosts, "hosts")

    def plan() -> None:
        tree = config_repo(work / "plan", args.platforms)
        argv = [
            sys.executable,
            "-m",
            "reconciler.cli",
            "plan",
            "--repo",
            str(tree),
            "--inventory",
            str(inventory),
        ]
        peak, wall, _code, _out = measure([*argv, "--format", "json"])
        show("plan --inventory", peak, wall, per_hosts, "hosts")

    def show_inventory() -> None:
        argv = [*CLI, "inventory", "show", "--inventory", str(inventory)]
        peak, wall, _code, _out = measure(argv)
        show("inventory show", peak, wall, per_hosts, "hosts")

    def validate() -> None:
        tree = work / "validate"
        gen_config_tree.generate(tree, documents=args.files)
        per_files = 10_000 / max(args.files, 1)
        peak, wall, _c, _o = measure([*CLI, "validate", str(tree)])
        bare_peak, bare_wall, _c, _o = measure([sys.executable, __file__, "--child-parse", str(tree)])
        show("validate", peak, wall, per_files, "files")
        show("bare CSafeLoader parse", bare_peak, bare_wall, per_files, "files")
        print(f"validate / bare parse: {wall / bare_wall:.2f}x time, {peak / bare_peak:.2f}x peak RSS")

    steps = {"run": run, "plan": plan, "show": show_inventory, "validate": validate}
    for name in args.only:
        steps[name]()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
