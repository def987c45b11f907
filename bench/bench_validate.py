"""Time ``reconciler validate`` against check-jsonschema and bare PyYAML parsing, side by side.

All three run as fresh processes on the same generated tree (10,000 small MLPlatform files plus each
namespace's Project, Settings, ComputeProfile and WorkloadProfile), so interpreter start-up and imports
count for every contender. check-jsonschema gets the committed schemas, one invocation per kind.
Usage: ``python bench/bench_validate.py [--documents 10000] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_config_tree import generate

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


def timed(cmd: list[str], repeat: int) -> Timing:
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--documents", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--check-jsonschema-repeat", type=int, default=1)
    parser.add_argument("--skip-check-jsonschema", action="store_true")
    args = parser.parse_args()
    check = None if args.skip_check_jsonschema else shutil.which("check-jsonschema")
    reconciler = shutil.which("reconciler")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "tree"
        groups = generate(root, args.documents)
        total = sum(map(len, groups.values()))
        print(f"tree: {total} files, {len(groups['mlplatform'])} of them MLPlatforms")
        validate_cmd = [reconciler or "reconciler", "validate", str(root)]
        t_validate = timed(validate_cmd, args.repeat)
        t_bare = timed([sys.executable, "-c", BARE_PARSE, str(root)], args.repeat)
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
    label = "validate / bare parse (target <= 2x)"
    print(f"{label:<46}{t_validate.wall / t_bare.wall:>8.2f}x{t_validate.cpu / t_bare.cpu:>8.2f}x")


if __name__ == "__main__":
    main()
