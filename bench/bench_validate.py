"""Time ``reconciler validate`` against check-jsonschema and bare PyYAML parsing, side by side.

All three run as fresh processes on the same generated tree (10,000 small MLPlatform files plus each
namespace's Project, Settings, ComputeProfile and WorkloadProfile), so interpreter start-up and imports
count for every contender. check-jsonschema gets the committed schemas, one invocation per kind.
``validate`` and the bare parse alternate round by round (best CPU time of each).
Usage: ``python bench/bench_validate.py [--documents 10000] [--repeat 3]``.

``--memory`` measures peak RSS instead (each process's own, from ``wait4``), of ``validate`` and of a
bare parse that streams (one file at a time, nothing kept), at 10,000 and 100,000 files
(``--sizes``), for several tree shapes (``--shapes``): ``platforms`` (the tree above), ``workloads``
(AIWorkloads on shared ComputePools, as ``bench_what_if.py``), ``multi`` (the platforms ten to a file:
the size counts documents, not files) and ``wide`` (platforms over 1,000 namespaces, so 4,000 of the
files are Projects, Settings and profiles). It prints MiB per 10,000 files (the growth between the two
sizes) and the peak against the 200 MiB target at 100,000 files. ``--trees DIR`` keeps the trees there
for the next run (writing and removing 100,000 files can take minutes).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_config_tree import PLATFORM, SUPPORT, generate

REPO = Path(__file__).resolve().parent.parent
SCHEMAS = REPO / "schemas"

BARE_PARSE = """
import os, sys, yaml
n = 0
for d, dirs, files in os.walk(sys.argv[1]):
    dirs[:] = [x for x in dirs if x != ".git"]
    for f in files:
        if f.endswith((".yaml", ".yml")):
            with open(os.path.join(d, f), "rb") as h:
                n += sum(1 for _ in yaml.load_all(h.read(), Loader=yaml.CSafeLoader))
print(n, "documents")
"""


class Timing:
    """Best wall time and best CPU time (user + system of the child) over several runs.

    CPU time is the steadier figure on a shared machine: other load stretches wall time, not CPU time.
    """

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0

    def add(self, other: Timing) -> None:
        self.wall += other.wall
        self.cpu += other.cpu


def timed(cmd: list[str], repeat: int, best: Timing | None = None) -> Timing:
    if best is None:
        best = Timing()
        best.wall = best.cpu = float("inf")
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        result = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if result.returncode != 0:
            output = result.stdout[-2000:] + result.stderr[-2000:]
            raise SystemExit(f"{cmd[0]} failed ({result.returncode}):\n{output}")
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        best.wall = min(best.wall, wall)
        best.cpu = min(best.cpu, cpu)
    return best


def alternating(cmds: list[list[str]], repeat: int) -> list[Timing]:
    """Best times of each command, run in alternating order round by round (load falls on all alike)."""
    bests = [Timing() for _ in cmds]
    for t in bests:
        t.wall = t.cpu = float("inf")
    for round_ in range(repeat):
        order = list(range(len(cmds))) if round_ % 2 == 0 else list(reversed(range(len(cmds))))
        for i in order:
            timed(cmds[i], 1, bests[i])
    return bests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--documents", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--check-jsonschema-repeat", type=int, default=1)
    parser.add_argument("--skip-check-jsonschema", action="store_true")
    parser.add_argument("--memory", action="store_true", help="peak RSS at --sizes, per tree shape")
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--trees", type=Path, help="write the --memory trees here and keep them for reuse")
    parser.add_argument("--write-tree", nargs=3, metavar=("SHAPE", "FILES", "ROOT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write_tree:
        shape, files, root = args.write_tree
        SHAPES[shape](Path(root), int(files))
        return
    if args.memory:
        sizes = [int(x) for x in args.sizes.split(",")]
        memory(sizes, args.shapes.split(","), args.trees)
        return
    check = None if args.skip_check_jsonschema else shutil.which("check-jsonschema")
    reconciler = shutil.which("reconciler")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "tree"
        groups = generate(root, args.documents)
        total = sum(map(len, groups.values()))
        print(f"tree: {total} files, {len(groups['mlplatform'])} of them MLPlatforms")
        validate_cmd = [reconciler or "reconciler", "validate", str(root)]
        bare_cmd = [sys.executable, "-c", BARE_PARSE, str(root)]
        t_validate, t_bare = alternating([validate_cmd, bare_cmd], args.repeat)
        t_check = Timing()
        if check:
            for kind, files in sorted(groups.items()):
                cmd = [check, "--schemafile", str(SCHEMAS / f"{kind}.json"), *map(str, files)]
                t_check.add(timed(cmd, args.check_jsonschema_repeat))
    rows = [("reconciler validate", t_validate), ("PyYAML CSafeLoader, parse only", t_bare)]
    if check:
        rows.append(("check-jsonschema (same schemas, same files)", t_check))
    print()
    print(f"{'contender':<46}{'wall s':>9}{'CPU s':>9}")
    for label, t in rows:
        print(f"{label:<46}{t.wall:>9.2f}{t.cpu:>9.2f}")
    print()
    print(f"{'ratio':<46}{'wall':>9}{'CPU':>9}")
    if check:
        label = "check-jsonschema / validate (target >= 5x)"
        print(f"{label:<46}{t_check.wall / t_validate.wall:>8.1f}x{t_check.cpu / t_validate.cpu:>8.1f}x")
    label = "validate / bare parse (target <= 1.2x)"
    print(f"{label:<46}{t_validate.wall / t_bare.wall:>8.2f}x{t_validate.cpu / t_bare.cpu:>8.2f}x")


# A bare parse that keeps nothing: the floor of what reading the tree needs in memory.
STREAMING_PARSE = """
import os, sys, yaml
n = 0
for d, dirs, files in os.walk(sys.argv[1]):
    dirs[:] = [x for x in dirs if not x.startswith(".")]
    for f in files:
        if f.endswith((".yaml", ".yml")):
            with open(os.path.join(d, f), "rb") as h:
                for _ in yaml.load_all(h.read(), Loader=yaml.CSafeLoader):
                    n += 1
print(n, "documents")
"""


def _platforms(root: Path, files: int) -> None:
    generate(root, files)


def _wide(root: Path, files: int) -> None:
    generate(root, files, namespaces=1_000)


def _multi(root: Path, documents: int, per_file: int = 10) -> None:
    """``documents`` documents: each namespace's four files, then platforms ``per_file`` to a file."""
    namespaces = 10
    for n in range(namespaces):
        ns = f"team-{n:02d}"
        (root / ns / "platforms").mkdir(parents=True, exist_ok=True)
        for name, template in SUPPORT.items():
            (root / ns / name).write_text(template.format(ns=ns))
    families = ("NVIDIA-H100", "NVIDIA-A100", "NVIDIA-L40S")
    for f in range((documents - len(SUPPORT) * namespaces) // per_file):
        ns = f"team-{f % namespaces:02d}"
        docs = []
        for k in range(per_file):
            i = f * per_file + k
            vip = f"10.{100 + i // 62500}.{i // 250 % 250}.{i % 250 + 1}"
            docs.append(PLATFORM.format(i=i, ns=ns, family=families[i % 3], count=1 + i % 8, vip=vip))
        (root / ns / "platforms" / f"platforms-{f:06d}.yaml").write_text("---\n".join(docs))


def _workloads(root: Path, files: int) -> None:
    from bench_what_if import NAMESPACES, POOLS_PER_NAMESPACE, write_tree

    write_tree(root, files - NAMESPACES * POOLS_PER_NAMESPACE - len(SUPPORT) * NAMESPACES, width=6)


SHAPES = {"platforms": _platforms, "workloads": _workloads, "multi": _multi, "wide": _wide}


def peak_mib(cmd: list[str]) -> tuple[float, float]:
    """(peak RSS in MiB, CPU seconds) of one process: its own figures, from ``wait4``."""
    child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode not in (0, 1):  # 1: the tree has errors, still a measurement
        raise SystemExit(f"{cmd[:3]} failed ({child.returncode})")
    return usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def memory(sizes: list[int], shapes: list[str], trees: Path | None) -> None:
    reconciler = shutil.which("reconciler") or "reconciler"
    header = f"{'shape':<10}{'files':>9}{'validate MiB':>14}{'CPU s':>8}{'bare MiB':>10}{'CPU s':>8}"
    print(f"{header}{'ratio':>8}")
    for shape in shapes:
        peaks: dict[int, float] = {}
        for size in sizes:
            with contextlib.ExitStack() as stack:
                base = trees or Path(stack.enter_context(tempfile.TemporaryDirectory()))
                root = base / f"{shape}-{size}"
                if not root.exists():  # kept under --trees: writing and removing 100,000 files takes long
                    root.mkdir(parents=True)
                    # Written by a child: a peak inherited from a large parent would count in the figures.
                    cmd = [sys.executable, __file__, "--write-tree", shape, str(size), str(root)]
                    subprocess.run(cmd, check=True)
                peak, cpu = peak_mib([reconciler, "validate", str(root)])
                bare, bare_cpu = peak_mib([sys.executable, "-c", STREAMING_PARSE, str(root)])
            peaks[size] = peak
            row = f"{shape:<10}{size:>9,}{peak:>14.1f}{cpu:>8.2f}{bare:>10.1f}{bare_cpu:>8.2f}"
            print(f"{row}{peak / bare:>7.1f}x", flush=True)
        if len(sizes) >= 2:
            low, high = min(sizes), max(sizes)
            slope = (peaks[high] - peaks[low]) / ((high - low) / 10_000)
            verdict = "met" if high < 100_000 or peaks[high] < 200 else "NOT met"
            at = f"{peaks[high]:.0f} MiB at {high:,} (< 200: {verdict})"
            print(f"{'':<10}{slope:.1f} MiB per 10,000 files; {at}")


if __name__ == "__main__":
    main()
