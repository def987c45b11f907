"""``plan --from-status --what-if`` on a repository of 10,000 AIWorkloads: how long a person waits for
"if I submit this workload, is it admitted, and if not, why and where in the queue?".

The repository (git): 10 namespaces, each with the Project, Settings, ComputeProfile and WorkloadProfile
of ``gen_config_tree.py``, 10 shared ComputePools of 16 GPUs (H100 or A100) and 1,000 AIWorkloads of 1-2
GPUs (100 per pool), one file each; a status branch records ``gen_inventory.py``'s hosts as the last
observed inventory. Measured, wall clock, best of ``--repeat``:

1. ``overlay`` alone (the what-if files merged into the revision's 10,000+ files), in process;
2. the command without ``--what-if`` and with one what-if workload (a fresh process each time, as a
   person or CI runs it: start-up, reading git, parsing, validation, admission, rendering), wall clock
   and CPU time (user + system: what a loaded machine does not inflate).

    python bench/bench_what_if.py [--workloads 10000] [--hosts 5000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _support import git
from gen_config_tree import SUPPORT
from gen_inventory import generate as generate_inventory

from reconciler.source.overlay import overlay
from reconciler.source.revision import read_revision
from reconciler.status.snapshot import render_snapshot, target_file

URL = "https://api.spectrocloud.com"
PROJECT = "6514216503b1d1cd4f1bdc44"  # gen_config_tree's Settings, gen_inventory's first project
NAMESPACES = 10
POOLS_PER_NAMESPACE = 10

POOL = """\
apiVersion: spectrocloud.com/v1alpha1
kind: ComputePool
metadata: {{name: pool-{p:03d}, namespace: {ns}}}
spec:
  mode: shared
  computeProfileRef: {{name: edge-profile}}
  gpus: [{{family: {family}, count: 16}}]
  edge: {{vip: 10.200.{a}.{b}}}
"""

WORKLOAD = """\
apiVersion: spectrocloud.com/v1alpha1
kind: AIWorkload
metadata: {{name: {name}, namespace: {ns}}}
spec:
  computePoolRef: {{name: pool-{p:03d}}}
  workloadProfileRef: {{name: training}}
  priority: {priority}
  gpus: [{{family: {family}, count: {count}}}]
"""


def family_of(pool: int) -> str:
    return ("NVIDIA-H100", "NVIDIA-A100")[pool % 2]


def write_tree(root: Path, workloads: int, width: int = 5) -> None:
    """The configuration files: per namespace the support documents, the pools, then ``workloads``
    AIWorkloads spread over the pools (names numbered with ``width`` digits)."""
    pools = NAMESPACES * POOLS_PER_NAMESPACE
    for n in range(NAMESPACES):
        ns = f"team-{n:02d}"
        (root / ns / "pools").mkdir(parents=True)
        (root / ns / "workloads").mkdir()
        for name, template in SUPPORT.items():
            (root / ns / name).write_text(template.format(ns=ns))
    for p in range(pools):
        ns = f"team-{p % NAMESPACES:02d}"
        text = POOL.format(p=p, ns=ns, family=family_of(p), a=p // 250, b=p % 250 + 1)
        (root / ns / "pools" / f"pool-{p:03d}.yaml").write_text(text)
    for i in range(workloads):
        p = i % pools
        ns = f"team-{p % NAMESPACES:02d}"
        name = f"workload-{i:0{width}d}"
        text = WORKLOAD.format(name=name, ns=ns, p=p, priority=i % 4, family=family_of(p), count=1 + i % 2)
        (root / ns / "workloads" / f"{name}.yaml").write_text(text)


def write_repository(root: Path, workloads: int, hosts: int) -> None:
    """The config branch ``main`` and the status branch, in the git work tree ``root``."""
    root.mkdir(parents=True)
    write_tree(root, workloads)
    git("init", "-q", "-b", "main", cwd=root)
    git("add", "-A", ".", cwd=root)
    git("commit", "-q", "-m", "config", cwd=root)
    main = git("rev-parse", "HEAD", cwd=root)
    snapshot = generate_inventory(hosts, seed=1)
    git("checkout", "-q", "--orphan", "reconciler/status", cwd=root)
    git("rm", "-rq", "--cached", ".", cwd=root)
    status = root.parent / "status"
    (status / "inventory").mkdir(parents=True)
    (status / target_file(URL, PROJECT)).write_bytes(render_snapshot(snapshot["edgeHosts"], []))
    (status / "reconciler.yaml").write_text(
        f"branch: main\nrevision: {main}\ntargets:\n  - {{url: '{URL}', projectUid: '{PROJECT}'}}\n"
    )
    git("--work-tree", str(status), "add", "-A", ".", cwd=root)
    git("commit", "-q", "-m", "observed", cwd=root)
    git("checkout", "-q", "-f", "main", cwd=root)


def best(seconds: list[float]) -> str:
    return f"{min(seconds):.2f} s (of {', '.join(f'{s:.2f}' for s in seconds)})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", type=int, default=10_000)
    parser.add_argument("--hosts", type=int, default=5_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-what-if-") as tmp:
        repo = Path(tmp) / "config"
        write_repository(repo, args.workloads, args.hosts)
        extra = Path(tmp) / "my-workload.yaml"
        extra.write_text(
            WORKLOAD.format(name="my-workload", ns="team-03", p=3, priority=3, family=family_of(3), count=2)
        )
        _sha, files = read_revision(str(repo))
        merged: list[float] = []
        for _ in range(max(args.repeat, 5)):
            started = time.perf_counter()
            overlay(files, [("my-workload.yaml", extra.read_bytes())])
            merged.append(time.perf_counter() - started)
        print(f"{len(files)} files, {args.workloads} workloads, {args.hosts} hosts")
        print(f"  overlay of one what-if file      {min(merged) * 1000:.1f} ms")
        command = [
            sys.executable,
            "-m",
            "reconciler.cli",
            "plan",
            "--repo",
            str(repo),
            "--from-status",
            "--format",
            "json",
        ]
        for label, extra_args in (
            ("plan --from-status", []),
            ("  ... --what-if FILE", ["--what-if", str(extra)]),
        ):
            times: list[float] = []
            cpu: list[float] = []
            for _ in range(args.repeat):
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                started = time.perf_counter()
                done = subprocess.run([*command, *extra_args], capture_output=True, text=True, check=False)
                times.append(time.perf_counter() - started)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
                if done.returncode not in (0, 1):
                    print(done.stderr, file=sys.stderr)
                    return 1
            print(f"  {label:<32} wall {best(times)}; CPU {best(cpu)}")
            if extra_args:
                entry = next(w for w in json.loads(done.stdout)["workloads"] if w["name"] == "my-workload")
                print(
                    f"  my-workload: {entry['action']} ({entry['reason']}) position {entry.get('position')}"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
