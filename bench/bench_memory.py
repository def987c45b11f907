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
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, os.environ.get("BENCH_SOURCE") or str(ROOT))  # the tree measured (see --baseline)

import gen_config_tree  # noqa: E402

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


def measure(
    argv: list[str], env: dict[str, str] | None = None, source: Path = ROOT
) -> tuple[float, float, int, str]:
    """(peak RSS MiB, CPU seconds (user + system), exit code, stdout) of one child process importing
    ``source``. CPU, not wall time: on a shared machine wall time says more about the neighbours."""
    env = {**(env or os.environ), "PYTHONPATH": str(source), "BENCH_SOURCE": str(source)}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=source)
    out = proc.stdout.read().decode() if proc.stdout else ""
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime, proc.returncode, out


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
    from reconciler.logging import configure_logging
    from reconciler.metrics import PassOutcome
    from reconciler.runtime import wiring
    from reconciler.runtime.options import ControllerOptions

    configure_logging("error")
    ctl = wiring.build(
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


def run_passes(work: Path, platforms: int, inventory: Path, source: Path) -> dict[str, float]:
    tree = config_repo(work, platforms)
    bare = work / "remote.git"
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
        peak, _wall, code, out = measure(argv, env, source)
        if code != 0:
            raise SystemExit(f"run child failed ({code})")
        found: dict[str, float] = json.loads(out.strip().splitlines()[-1])
        found["process_peak"] = peak
        return found
    finally:
        emulator.terminate()
        emulator.wait(30)


def export(rev: str, work: Path) -> Path:
    """The source tree of ``rev`` of this repository (``git archive``): the "before" of a comparison."""
    target = work / f"source-{rev.replace('/', '_')}"
    target.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target


class Bench:
    """One set of measurements, run for each source tree (this one, and ``--baseline`` when given)."""

    def __init__(self, args: argparse.Namespace, work: Path, sources: dict[str, Path]) -> None:
        self.args = args
        self.work = work
        self.sources = sources
        self.inventory = work / "inventory.json"
        # Generated by a child: a forked child's peak RSS counts the parent's pages until it execs, so
        # this process must stay small for the figures of the others to be theirs.
        script = str(HERE / "gen_inventory.py")
        generator = [sys.executable, script, "--hosts", str(args.hosts), "--seed", "1"]
        subprocess.run([*generator, "--out", str(self.inventory)], check=True, capture_output=True)
        self.per_hosts = 10_000 / max(args.hosts, 1)
        self.per_files = 10_000 / max(args.files, 1)
        imports = [sys.executable, "-c", "import reconciler.cli, reconciler.runtime.wiring"]
        self.floor = measure(imports, source=sources["now"])[0]
        print(
            f"interpreter + imports: {self.floor:.0f} MiB; {args.hosts:,} hosts, {args.platforms:,} platforms"
        )

    def show(
        self, name: str, found: dict[str, tuple[float, float]], per: float, unit: str, clock: str = "CPU"
    ) -> None:
        """One line per source: peak, time (``clock``), MiB per 10,000; then the ratio now / before."""
        for label, (peak, wall) in found.items():
            scaled = (peak - self.floor) * per
            figures = f"peak {peak:6.0f} MiB {wall:7.2f} s {clock:4} ({scaled:5.0f} MiB per 10,000 {unit})"
            print(f"{name:24} {label:6} {figures}")
        if len(found) == 2:
            (now_peak, now_wall), (old_peak, old_wall) = found["now"], found["before"]
            print(f"{'':24} now/before: peak {now_peak / old_peak:.2f}x, time {now_wall / old_wall:.2f}x")

    def each(self, argv: list[str]) -> dict[str, tuple[float, float]]:
        found = {}
        for label, source in self.sources.items():
            peak, wall, code, _out = measure(argv, source=source)
            if code not in (0, 1):
                raise SystemExit(f"{' '.join(argv[:4])} failed with {code} ({label})")
            found[label] = (peak, wall)
        return found

    def run(self) -> None:
        first: dict[str, tuple[float, float]] = {}
        idle: dict[str, tuple[float, float]] = {}
        whole: dict[str, tuple[float, float]] = {}
        for label, source in self.sources.items():
            found = run_passes(self.work / label, self.args.platforms, self.inventory, source)
            first[label] = (found["first_peak"], found["first_s"])
            idle[label] = (found["idle_peak"], found["idle_s"])
            whole[label] = (found["process_peak"], found["first_s"])
        self.show("run: first pass", first, self.per_hosts, "hosts", "wall")
        self.show("run: idle pass", idle, self.per_hosts, "hosts", "wall")
        print("(the whole run process, first pass to idle pass, peak RSS; time: the first pass's)")
        self.show("run: every pass", whole, self.per_hosts, "hosts", "wall")

    def plan(self) -> None:
        tree = config_repo(self.work / "plan", self.args.platforms)
        argv = [*CLI, "plan", "--repo", str(tree), "--inventory", str(self.inventory), "--format", "json"]
        self.show("plan --inventory", self.each(argv), self.per_hosts, "hosts")

    def inventory_show(self) -> None:
        argv = [*CLI, "inventory", "show", "--inventory", str(self.inventory)]
        self.show("inventory show", self.each(argv), self.per_hosts, "hosts")

    def validate(self) -> None:
        tree = self.work / "validate"
        gen_config_tree.generate(tree, documents=self.args.files)
        found = self.each([*CLI, "validate", str(tree)])
        bare = measure([sys.executable, __file__, "--child-parse", str(tree)], source=self.sources["now"])
        self.show("validate", found, self.per_files, "files")
        self.show("bare CSafeLoader parse", {"-": bare[:2]}, self.per_files, "files")
        for label, (peak, wall) in found.items():
            ratios = f"{wall / bare[1]:.2f}x time, {peak / bare[0]:.2f}x peak"
            print(f"{'':24} validate ({label}) / bare parse: {ratios}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--platforms", type=int, default=1_000)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--only", nargs="*", default=["run", "plan", "show", "validate"])
    parser.add_argument("--baseline", help="a revision of this repository to compare with (e.g. main)")
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
    sources = {"now": ROOT}
    if args.baseline:
        sources["before"] = export(args.baseline, work)
    bench = Bench(args, work, sources)
    steps = {"run": bench.run, "plan": bench.plan, "show": bench.inventory_show, "validate": bench.validate}
    for name in args.only:
        steps[name]()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
