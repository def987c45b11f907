"""This tree against a previous release, side by side in one run: the hot paths, with ratios.

    python bench/bench_compare.py [--base REV ...] [--repeat 5] [--only validate,plan,discover,mig]
                                  [--plan-size 1000x10000 ...]

The previous version is checked out once with ``git worktree add --detach`` into
``/tmp/reconciler-base-<rev>`` (outside the repository; reused by later runs) and run from the same
virtualenv with ``PYTHONPATH`` pointing at it; this tree runs with ``PYTHONPATH`` pointing here, so an
editable install elsewhere cannot stand in for either; both are byte-compiled first, as an installed
package is. Default base: the newest release tag, else the previous round's main (7b2d525) and this
round's start (f74aa01). Every round runs each contender once, the order alternating between rounds, so
load on a shared machine falls on both alike.

Measures (the inputs come from the generators in ``bench/``, the same for every contender):
- ``validate`` of 10,000 files, whole process, next to a bare CSafeLoader parse of the same files;
- ``plan --inventory`` of 1,000 platforms on 10,000 hosts, whole process (``--plan-size`` adds others,
  e.g. 10000x100000), with the cache of checked documents warmed by one run first (whose pack, written
  in a child after the output, is waited for);
- ``plan --from-status --what-if FILE`` on ``bench_what_if.py``'s git repository of 10,000 AIWorkloads
  (``--only what-if``; ``--what-if-workloads``; ``--what-if-terminal`` adds a warm run with standard output
  on a pseudo-terminal, as at a prompt): with the cache of checked documents warm (the run before
  filled it) and cold (emptied before each run); a version without that cache does the same work both ways;
  a version that writes the cache in a child after its output is waited for before the warm run (the
  child's CPU time, pickling the checked files, is not counted in the command's);
- discovery (``reconciler.inventory.discover``) of 10,000 search items, in process, best of 5 per run;
- ``--only pools``: the cold and warm plan of ``bench_plan_pools.py`` (platforms, pools and workloads
  placed and admitted together; ``--pools-size``, e.g. 100000x10000x1000x50000), in process, and the
  process's peak RSS;
- MIG admission of one pool of 128 A100 GPUs with 150 workloads (cold and warm pass, as
  ``bench_mig_admission.py``), in process; only for versions that have it.

The config tree keeps the cluster profile in the WorkloadProfile (not in Settings), a form every
compared version accepts, so both plan and validate the same valid tree. Figures: CPU seconds (user +
system of the child; steadier on a loaded machine) and wall seconds, best and median over the rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))

import bench_what_if  # noqa: E402
import gen_config_tree  # noqa: E402
import gen_inventory  # noqa: E402
from _support import base_tree  # noqa: E402
from bench_validate import BARE_PARSE  # noqa: E402

DEFAULT_BASES = ("7b2d525", "f74aa01")
NAMESPACES = 10
PROFILE_UID = "6651a2b3c4d5e6f708192a3b"

# Runs inside the measured version; prints {"file": ..., "cpu": [...], "wall": [...]} for one measure.
CHILD = """
import json, sys, time
import reconciler
what, arg = sys.argv[1], sys.argv[2]
cpu, wall = [], []
if what == "discover":
    from reconciler.inventory import discover
    with open(arg) as f:
        hosts = json.load(f)["edgeHosts"]
    for _ in range(5):
        start, started = time.process_time(), time.perf_counter()
        discover(hosts)
        cpu.append(time.process_time() - start)
        wall.append(time.perf_counter() - started)
elif what == "pools":
    sys.path.append(sys.argv[3])
    import resource
    from bench_plan_pools import passes
    hosts, platforms, pools, workloads = (int(x) for x in arg.split("x"))
    _, _, cpu, wall = passes(hosts, platforms, pools, workloads)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    cpu, wall = cpu + [rss], wall + [rss]
else:
    sys.path.append(sys.argv[3])
    import random
    from bench_mig_admission import A100, GpuUnit, PoolState, one_pass, previous_of, workload
    hosts, count = (int(x) for x in arg.split("x"))
    units = tuple(
        GpuUnit(f"uid-{h:04}", f"gpu-{h:04}", i, A100, mig_capable=True, memory_bytes=80 * 10**9)
        for h in range(hosts) for i in range(8)
    )
    pool = PoolState(("bench", "pool"), gpus=units, mig_strategy="mixed")
    rng = random.Random(7)
    workloads = [workload(rng, f"w{n:04}") for n in range(count)]
    start = time.process_time()
    cold, cold_out, cold_wall = one_pass(pool, workloads, [], None)
    middle = time.process_time()
    _, _, warm_wall = one_pass(pool, workloads, previous_of(cold), json.loads(json.dumps(cold_out.mig)))
    cpu, wall = [middle - start, time.process_time() - middle], [cold_wall, warm_wall]
print(json.dumps({"file": reconciler.__file__, "cpu": cpu, "wall": wall}))
"""


@dataclass
class Contender:
    label: str
    root: Path

    cache: Path | None = None  # RECONCILER_CACHE_DIR: the cache of checked documents (per contender)

    def env(self) -> dict[str, str]:
        cache = {"RECONCILER_CACHE_DIR": str(self.cache)} if self.cache is not None else {}
        return {**os.environ, "PYTHONPATH": str(self.root), **cache}


@dataclass
class Samples:
    cpu: list[float] = field(default_factory=list)
    wall: list[float] = field(default_factory=list)


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], check=True, capture_output=True, text=True).stdout


def default_bases() -> list[str]:
    tags = git("tag", "--sort=-creatordate").split()
    return [tags[0]] if tags else list(DEFAULT_BASES)


def write_tree(root: Path, documents: int) -> None:
    """The generated tree, with the cluster profile moved to the WorkloadProfile (see the module doc)."""
    gen_config_tree.generate(root, documents, NAMESPACES)
    for ns in root.iterdir():
        settings = ns / "settings.yaml"
        lines = settings.read_text().splitlines(True)
        settings.write_text("".join(x for x in lines if "clusterProfiles" not in x))
        profile = ns / "workloadprofile.yaml"
        text = profile.read_text().replace("spec: {}", f"spec: {{clusterProfiles: [{{uid: {PROFILE_UID}}}]}}")
        profile.write_text(text)


def run_process(cmd: list[str], env: dict[str, str], ok: tuple[int, ...] = (0,)) -> tuple[float, float, str]:
    """CPU and wall seconds of one child process, and its standard output."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tempfile.gettempdir())
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode not in ok:
        raise RuntimeError(f"{' '.join(cmd[:4])} exited {result.returncode}:\n{result.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, result.stdout


def run_on_terminal(cmd: list[str], env: dict[str, str], ok: tuple[int, ...] = (0,)) -> tuple[float, float]:
    """CPU and wall seconds of one child process whose standard output is a terminal (a pseudo-terminal
    in raw mode, read to its end), as when a person runs the command at a prompt."""
    import pty
    import tty

    leader, follower = pty.openpty()
    tty.setraw(follower)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with subprocess.Popen(
        cmd, stdout=follower, stderr=subprocess.DEVNULL, env=env, cwd=tempfile.gettempdir()
    ) as child:
        os.close(follower)
        while True:
            try:
                if not os.read(leader, 1 << 16):
                    break
            except OSError:  # EIO: the child closed the terminal
                break
        os.close(leader)
        code = child.wait()
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if code not in ok:
        raise RuntimeError(f"{' '.join(cmd[:4])} exited {code} on a terminal")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def in_process(contender: Contender, what: str, arg: str) -> tuple[list[float], list[float]]:
    """CPU and wall seconds measured inside the contender's own process (imports not counted)."""
    cmd = [sys.executable, "-c", CHILD, what, arg, str(BENCH)]
    _, _, out = run_process(cmd, contender.env())
    answer = json.loads(out.strip().splitlines()[-1])
    if not Path(answer["file"]).resolve().is_relative_to(contender.root.resolve()):
        raise RuntimeError(f"{contender.label} imported {answer['file']}, not its own tree")
    return [float(s) for s in answer["cpu"]], [float(s) for s in answer["wall"]]


Measure = Callable[[Contender], list[tuple[str, float, float]]]


def alternate(contenders: list[Contender], rounds: int, measure: Measure) -> dict[str, dict[str, Samples]]:
    """``measure`` run ``rounds`` times per contender, the order reversed every other round."""
    results: dict[str, dict[str, Samples]] = {}
    missing: set[str] = set()
    for n in range(rounds):
        for contender in contenders if n % 2 == 0 else contenders[::-1]:
            if contender.label in missing:
                continue
            try:
                rows = measure(contender)
            except RuntimeError as exc:  # a version without the measured code: n/a in the table
                print(f"  {contender.label}: n/a ({str(exc).splitlines()[-1][:120]})", file=sys.stderr)
                missing.add(contender.label)
                continue
            for row, cpu, wall in rows:
                samples = results.setdefault(row, {}).setdefault(contender.label, Samples())
                samples.cpu.append(cpu)
                samples.wall.append(wall)
    return results


def print_table(title: str, results: dict[str, dict[str, Samples]], labels: list[str]) -> None:
    this = labels[-1]
    print(f"\n{title}")
    head = "".join(f"{label:>22}" for label in labels)
    ratios = "".join(f"{'/ ' + label:>16}" for label in labels[:-1])
    print(f"{'':34}{head}{ratios}")
    for row, by in results.items():
        for kind in ("cpu", "wall"):
            cells, best = "", {}
            for label in labels:
                values = getattr(by[label], kind) if label in by else []
                if values:
                    best[label] = min(values)
                    cells += f"{min(values):.3f} ({statistics.median(values):.3f})".rjust(22)
                else:
                    cells += f"{'n/a':>22}"
            ratio = "".join(
                f"{best[this] / best[label]:>15.2f}x" if this in best and label in best else f"{'':>16}"
                for label in labels[:-1]
            )
            print(f"{row + ' ' + kind:<34}{cells}{ratio}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", action="append", help="revision to compare with (repeatable)")
    parser.add_argument("--repeat", type=int, default=5, help="rounds (each contender once per round)")
    parser.add_argument("--only", default="validate,plan,discover,mig")
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--plan-size", action="append", help="PLATFORMSxHOSTS (default 1000x10000)")
    parser.add_argument("--discover-hosts", type=int, default=10_000)
    parser.add_argument(
        "--pools-size",
        action="append",
        help="HOSTSxPLATFORMSxPOOLSxWORKLOADS (--only pools; default 10000x1000x100x5000)",
    )
    parser.add_argument("--mig", default="16x150", help="HOSTSxWORKLOADS of the MIG pool (8 GPUs a host)")
    parser.add_argument("--what-if-workloads", type=int, default=10_000)
    parser.add_argument(
        "--what-if-terminal",
        action="store_true",
        help="also the warm what-if with standard output on a terminal (a pseudo-terminal)",
    )
    args = parser.parse_args()
    only = set(args.only.split(","))
    bases = args.base or default_bases()
    python = sys.executable
    contenders = [Contender(rev, base_tree(rev)[1]) for rev in bases] + [Contender("this tree", REPO)]
    for c in contenders:  # as installed: bytecode compiled (PYTHONDONTWRITEBYTECODE would recompile)
        subprocess.run([python, "-m", "compileall", "-q", str(c.root / "reconciler")], check=True)
    labels = [c.label for c in contenders]
    print(f"contenders: {', '.join(f'{c.label} ({c.root})' for c in contenders)}; {args.repeat} rounds")
    print("cells: best (median) seconds; ratio = this tree's best / the other's best")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for c in contenders:  # the document cache of each version in the run's directory, not ~/.cache
            c.cache = work / f"cache-{c.label.replace(' ', '-')}"
        if "what-if" in only:
            what_if(contenders, labels, work, args.what_if_workloads, args.repeat, args.what_if_terminal)
        if "validate" in only:
            tree = work / "validate-tree"
            write_tree(tree, args.files)
            bare = Contender("bare parse", REPO)

            def validate(c: Contender) -> list[tuple[str, float, float]]:
                cmd = [python, "-m", "reconciler.cli", "validate", str(tree)]
                if c is bare:
                    cmd = [python, "-c", BARE_PARSE, str(tree)]
                cpu, wall, _ = run_process(cmd, c.env())
                return [(f"validate {args.files:,} files", cpu, wall)]

            results = alternate([bare, *contenders], args.repeat, validate)
            title = "validate (whole process), bare CSafeLoader parse first"
            print_table(title, results, ["bare parse", *labels])
        for size in (args.plan_size or ["1000x10000"]) if "plan" in only else []:
            platforms, hosts = (int(x) for x in size.split("x"))
            tree, inventory = work / f"plan-{size}", work / f"inventory-{hosts}.json"
            write_tree(tree, platforms + len(gen_config_tree.SUPPORT) * NAMESPACES)
            if not inventory.exists():
                inventory.write_text(json.dumps(gen_inventory.generate(hosts, seed=1)))

            row = f"plan {platforms:,} x {hosts:,}"
            cmd = [python, "-m", "reconciler.cli", "plan", "--repo", str(tree), "--inventory", str(inventory)]

            def plan(c: Contender, cmd: list[str] = cmd, row: str = row) -> list[tuple[str, float, float]]:
                cpu, wall, _ = run_process(cmd, c.env(), ok=(0, 1))
                return [(row, cpu, wall)]

            for c in contenders:  # the cache warm first (its pack is written after the output, in a
                run_process(cmd, c.env(), ok=(0, 1))  # child that would share the cores with the next run)
                if c.cache is not None:
                    wait_for_pack(c.cache)
            title = "plan --inventory (whole process, cache of checked documents warm)"
            print_table(title, alternate(contenders, args.repeat, plan), labels)
        if "discover" in only:
            inventory = work / f"discover-{args.discover_hosts}.json"
            inventory.write_text(json.dumps(gen_inventory.generate(args.discover_hosts, seed=1)))

            def discover(c: Contender) -> list[tuple[str, float, float]]:
                cpu, wall = in_process(c, "discover", str(inventory))
                return [(f"discover {args.discover_hosts:,} hosts", min(cpu), min(wall))]

            results = alternate(contenders, args.repeat, discover)
            print_table("discovery (in process, best of 5 per run)", results, labels)
        for size in (args.pools_size or ["10000x1000x100x5000"]) if "pools" in only else []:
            rss: dict[str, list[float]] = {}

            def pools(
                c: Contender, size: str = size, rss: dict[str, list[float]] = rss
            ) -> list[tuple[str, float, float]]:
                cpu, wall = in_process(c, "pools", size)
                rss.setdefault(c.label, []).append(cpu[2])
                return [(f"pools {size} cold", cpu[0], wall[0]), (f"pools {size} warm", cpu[1], wall[1])]

            title = f"plan with pools, HOSTSxPLATFORMSxPOOLSxWORKLOADS {size} (in process, make_plan)"
            print_table(title, alternate(contenders, args.repeat, pools), labels)
            print(
                "peak RSS MiB (best, inputs and both plans): "
                + ", ".join(f"{k} {min(v):.0f}" for k, v in rss.items())
            )
        if "mig" in only:

            def mig(c: Contender) -> list[tuple[str, float, float]]:
                cpu, wall = in_process(c, "mig", args.mig)
                return [("MIG admission cold", cpu[0], wall[0]), ("MIG admission warm", cpu[1], wall[1])]

            hosts_, workloads_ = args.mig.split("x")
            title = f"MIG admission, {int(hosts_) * 8} GPUs, {workloads_} workloads (in process)"
            print_table(title, alternate(contenders, args.repeat, mig), labels)


def wait_for_pack(cache: Path, patience: float = 60.0, *, observations: bool = False) -> None:
    """Until the cache holds a finished pack (and, with ``observations``, a recorded observation: a
    version that keeps them writes one after the pack) and no file is being written (a version without
    the cache: gives up after ``patience`` seconds)."""
    started = time.perf_counter()
    while time.perf_counter() - started < patience:
        names = [p.name for p in cache.glob("documents/*/*")]
        kept = [p.name for p in cache.glob("observations/*/*")]
        if (
            any(n.endswith(".pack") for n in names)
            and (not observations or any(n.endswith(".pickle") for n in kept))
            and not any(n.endswith(".tmp") for n in names + kept)
        ):
            return
        time.sleep(0.05)


def what_if(
    contenders: list[Contender], labels: list[str], work: Path, workloads: int, rounds: int, terminal: bool
) -> None:
    import shutil

    repo = work / "what-if" / "config"
    bench_what_if.write_repository(repo, workloads, 5_000)
    extra = work / "what-if" / "my-workload.yaml"
    family = bench_what_if.family_of(3)
    extra.write_text(
        bench_what_if.WORKLOAD.format(
            name="my-workload", ns="team-03", p=3, priority=3, family=family, count=2
        )
    )
    cmd = [sys.executable, "-m", "reconciler.cli", "plan", "--repo", str(repo), "--from-status"]
    cmd += ["--format", "json", "--what-if", str(extra)]
    row = f"what-if, {workloads:,} workloads"

    def measure(c: Contender) -> list[tuple[str, float, float]]:
        assert c.cache is not None
        shutil.rmtree(c.cache, ignore_errors=True)
        cold_cpu, cold_wall, _ = run_process(cmd, c.env(), ok=(0, 1))
        # a version that writes the cache after its output does so in a child
        wait_for_pack(c.cache, observations=(c.root / "reconciler/runtime/observation_cache.py").exists())
        warm_cpu, warm_wall, _ = run_process(cmd, c.env(), ok=(0, 1))  # the cold run filled the cache
        rows = [(f"{row}, warm cache", warm_cpu, warm_wall), (f"{row}, cold cache", cold_cpu, cold_wall)]
        if terminal:
            rows.append((f"{row}, warm, terminal", *run_on_terminal(cmd, c.env(), ok=(0, 1))))
        return rows

    print_table(
        "plan --from-status --what-if (whole process)", alternate(contenders, rounds, measure), labels
    )


if __name__ == "__main__":
    main()
