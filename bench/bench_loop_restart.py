#!/usr/bin/env python3
"""A restarted loop's first pass over ~10,000 files, with and without a warm cache of checked documents,
side by side with a previous version in one run (ratios).

    python bench/bench_loop_restart.py [--base REV ...] [--repeat 5] [--workloads 10000]

The repository is ``bench_what_if.py``'s (10 namespaces, 100 pools, 10,000 AIWorkloads: 10,140 files).
Each measurement is a fresh process, as a restarted ``reconciler run``: the pipeline's source built by
``runtime.wiring.open_source`` (its git mirror under the cache directory already there, as after a
restart), then what the first pass spends on the configuration: ``sync`` (one ``ls-remote``, no fetch)
and the load stage (reading, parsing and validating every file, the cross-resource rules). Observing
Palette, planning and reporting do not depend on the cache and are left out. "warm": the cache
directory kept from the run before; "cold": its ``documents/`` removed first (a version that writes a
pack in the loop writes it within the measured time). CPU (user + system) and wall seconds inside the
child, imports not counted. Contenders, checkouts and the table are ``bench_compare.py``'s.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import bench_what_if  # noqa: E402
from _support import git  # noqa: E402
from bench_compare import REPO, Contender, alternate, checkout, print_table, run_process  # noqa: E402

CHILD = r"""
import json, sys, time
from pathlib import Path
import reconciler
from reconciler.resolve import EVERY_NAMESPACE
from reconciler.runtime import wiring
from reconciler.runtime.options import ControllerOptions
from reconciler.runtime.stages import load
from reconciler.status.records import NO_RECORDS

options = ControllerOptions(repo=sys.argv[1], cache_dir=Path(sys.argv[2]))
cpu, wall = time.process_time(), time.perf_counter()
source, _history, _status, close = wiring.open_source(options)
head = source.sync()
desired = load.load(
    source, head, previous=None, records=NO_RECORDS, history=True, namespaces=EVERY_NAMESPACE, quiet=True
)
cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
close()
assert len(desired.resources) > 10_000 and not desired.invalid, (len(desired.resources), desired.invalid)
print(json.dumps({"file": reconciler.__file__, "cpu": cpu, "wall": wall}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--base", action="append", help="revision to compare with (default: where this branch left main)"
    )
    parser.add_argument("--repeat", type=int, default=5, help="rounds (each contender once per round)")
    parser.add_argument("--workloads", type=int, default=10_000)
    args = parser.parse_args()
    contenders = [
        Contender(rev, checkout(rev))
        for rev in args.base or [git("merge-base", "HEAD", "main", cwd=REPO)[:12]]
    ]
    contenders.append(Contender("this tree", REPO))
    for c in contenders:  # as installed: bytecode compiled
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(c.root / "reconciler")], check=True)
    labels = [c.label for c in contenders]
    print(f"contenders: {', '.join(f'{c.label} ({c.root})' for c in contenders)}; {args.repeat} rounds")
    print("cells: best (median) seconds; ratio = this tree's best / the other's best")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        repo = work / "config"
        bench_what_if.write_repository(repo, args.workloads, 1_000)
        files = len(git("ls-tree", "-r", "--name-only", "main", cwd=repo).split())
        row = f"restart, {files:,} files"

        def once(c: Contender) -> tuple[float, float]:
            import json

            assert c.cache is not None
            cmd = [sys.executable, "-c", CHILD, str(repo), str(c.cache)]
            _, _, out = run_process(cmd, c.env())
            answer = json.loads(out.strip().splitlines()[-1])
            if not Path(answer["file"]).resolve().is_relative_to(c.root.resolve()):
                raise RuntimeError(f"{c.label} imported {answer['file']}, not its own tree")
            return float(answer["cpu"]), float(answer["wall"])

        def measure(c: Contender) -> list[tuple[str, float, float]]:
            assert c.cache is not None
            shutil.rmtree(c.cache / "documents", ignore_errors=True)
            cold = once(c)  # the git mirror stays (made by the first round's untimed run)
            warm = once(c)
            return [(f"{row}, warm cache", *warm), (f"{row}, cold cache", *cold)]

        for c in contenders:
            c.cache = work / f"cache-{c.label.replace(' ', '-')}"
            once(c)  # the mirror, as a restarted loop finds it
        print_table(
            "restarted loop: sync + load of the first pass (in process)",
            alternate(contenders, args.repeat, measure),
            labels,
        )


if __name__ == "__main__":
    main()
