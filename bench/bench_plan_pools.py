"""Benchmark of a whole plan with pools: platforms and pools placed together, admission in the plan.

The inventory and platforms of ``bench_allocate.py`` (10,000 hosts, 1,000 platforms over 20 namespaces)
plus 100 ComputePools (16-64 GPUs of one family, every tenth dedicated) and 5,000 AIWorkloads (1-8
GPUs, priorities 0..3), from a fixed seed. Two passes, as the loop would run them:

1. cold: nothing exists; every pool admits on its hosts as planned;
2. warm: every created platform and pool has its Running cluster and every admission is recorded
   (``previous``): all must be ``unchanged`` and ``admitted``.

Prints each pass's wall and CPU time (and what it waited on besides the CPU: context switches, disk
page faults, collections, threads, child processes), the process's peak RSS and the actions
(``--traced``: also the tracemalloc peak of a third, cold plan). Target: each pass under 3 s.
``bench_compare.py --only pools`` runs the same two passes against a previous version, side by side.

    python bench/bench_plan_pools.py [--hosts 10000] [--platforms 1000] [--pools 100] [--workloads 5000]
"""

from __future__ import annotations

import argparse
import gc
import random
import resource
import sys
import threading
import time
import tracemalloc
from collections import Counter
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_allocate import make_desired, make_machines

from reconciler.inventory import HostState, Inventory
from reconciler.model.desired import DesiredState, Loaded, SourceRef
from reconciler.model.observed import ManagedCluster, cluster_name, managed_labels
from reconciler.model.pools import pool_cluster_labels, workload_request
from reconciler.model.resources import AIWorkload, ComputePool, Resource
from reconciler.placement.admission_types import PreviousAdmission, WorkloadAction
from reconciler.placement.units import GpuRef
from reconciler.plan import Action, Plan, PlatformPlan, make_plan

POOL_FAMILIES = ("NVIDIA-H100", "NVIDIA-A100", "NVIDIA-L40S", "NVIDIA-L4")


def add_pools(state: DesiredState, pools: int, workloads: int, namespaces: int, rnd: random.Random) -> None:
    resources: list[Resource] = []
    names: list[tuple[str, str, str]] = []
    for i in range(pools):
        ns = f"team-{i % namespaces:02d}"
        family = rnd.choice(POOL_FAMILIES)
        name = f"pool-{i:03d}"
        mode = "dedicated" if i % 10 == 0 else "shared"
        spec = {"mode": mode, "gpus": [{"family": family, "count": rnd.choice([16, 24, 32, 64])}]}
        resources.append(
            ComputePool.model_validate(
                {
                    "apiVersion": "spectrocloud.com/v1alpha1",
                    "kind": "ComputePool",
                    "metadata": {"name": name, "namespace": ns},
                    "spec": spec,
                }
            )
        )
        names.append((ns, name, family))
    for j in range(workloads):
        ns, pool, family = rnd.choice(names)
        resources.append(
            AIWorkload.model_validate(
                {
                    "apiVersion": "spectrocloud.com/v1alpha1",
                    "kind": "AIWorkload",
                    "metadata": {"name": f"wl-{j:05d}", "namespace": ns},
                    "spec": {
                        "computePoolRef": {"name": pool},
                        "gpus": [{"family": family, "count": rnd.choice([1, 1, 2, 4, 8])}],
                        "priority": rnd.choice([0, 0, 1, 3]),
                    },
                }
            )
        )
    for i, r in enumerate(resources):
        key = (r.kind, r.metadata.namespace, r.metadata.name)
        source = SourceRef(f"{r.metadata.namespace}/{r.metadata.name}.yaml", i, 1)
        # A loaded workload carries the request its document's check read, as the loader's do.
        request = workload_request(r) if isinstance(r, AIWorkload) else None
        state.resources[key] = Loaded(r, source, request)


def running(entry: PlatformPlan, labels: dict[str, str]) -> ManagedCluster:
    return ManagedCluster(
        uid=f"uid-{entry.kind}-{entry.namespace}-{entry.name}",
        name=cluster_name(entry.namespace, entry.name),
        namespace=entry.namespace,
        platform=entry.name,
        state="Running",
        control_plane=entry.control_plane,
        workers=entry.workers,
        arch=entry.arch,
        labels=labels,
    )


def summary(plan: Plan) -> str:
    clusters = Counter(str(e.action) for e in [*plan.platforms, *(p.cluster for p in plan.pools)])
    workloads = Counter(str(w.action) for w in plan.workloads)
    return (
        "clusters "
        + ", ".join(f"{n} {a}" for a, n in sorted(clusters.items()))
        + "; workloads "
        + ", ".join(f"{n} {a}" for a, n in sorted(workloads.items()))
    )


class Waits:
    """What a pass waited on besides the CPU: the process's context switches (voluntary: it waited for
    I/O or a lock; involuntary: the scheduler gave its core to another process), page faults that read
    the disk, collections of the cyclic collector, and the threads and child processes it ran."""

    def __init__(self) -> None:
        self.collections: list[tuple[int, float]] = []  # (generation, CPU seconds) of each
        self.started = 0.0
        gc.callbacks.append(self._collected)
        self.before = resource.getrusage(resource.RUSAGE_SELF)

    def _collected(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self.started = time.process_time()
        else:
            self.collections.append((info["generation"], time.process_time() - self.started))

    def done(self) -> str:
        gc.callbacks.remove(self._collected)
        after = resource.getrusage(resource.RUSAGE_SELF)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        child_cpu = children.ru_utime + children.ru_stime
        return (
            f"{after.ru_nvcsw - self.before.ru_nvcsw} voluntary and "
            f"{after.ru_nivcsw - self.before.ru_nivcsw} involuntary context switches, "
            f"{after.ru_majflt - self.before.ru_majflt} page faults from disk, "
            f"collections {[f'gen {g} {t:.2f} s' for g, t in self.collections]}, "
            f"{threading.active_count()} thread(s), "
            f"child processes' CPU {child_cpu:.2f} s"
        )


def passes(
    hosts: int,
    platforms: int,
    pools: int,
    workloads: int,
    namespaces: int = 20,
    seed: int = 7,
    waits: list[str] | None = None,
) -> tuple[Plan, Plan, list[float], list[float]]:
    """The cold and the warm plan, with their CPU and wall seconds ([cold, warm] each); ``waits``, if
    given, gets each pass's :class:`Waits`."""
    rnd = random.Random(seed)
    machines = make_machines(hosts, rnd)
    desired = make_desired(platforms, namespaces, rnd)
    add_pools(desired, pools, workloads, namespaces, rnd)
    inventory = Inventory(tuple(machines))

    watch = Waits()
    cpu, started = time.process_time(), time.perf_counter()
    cold = make_plan(desired, inventory, [])
    cpu_s, wall_s = [time.process_time() - cpu], [time.perf_counter() - started]
    if waits is not None:
        waits.append(watch.done())

    clusters = [
        running(e, managed_labels(e.namespace, e.name)) for e in cold.platforms if e.action is Action.CREATE
    ]
    clusters += [
        running(p.cluster, pool_cluster_labels(p.namespace, p.name, p.mode or "shared"))
        for p in cold.pools
        if p.action is Action.CREATE
    ]
    used = {u for c in clusters for u in c.hosts}
    after = Inventory(tuple(replace(m, state=HostState.IN_USE) if m.uid in used else m for m in machines))
    previous: dict[tuple[str, str], list[PreviousAdmission]] = {}
    for w in cold.workloads:
        if w.gpus and w.pool is not None:
            refs = tuple(GpuRef(u.host_uid, u.index) for u in w.gpus)
            previous.setdefault((w.namespace, w.pool), []).append(PreviousAdmission(w.key, refs))
    watch = Waits()
    cpu, started = time.process_time(), time.perf_counter()
    warm = make_plan(desired, after, clusters, previous=previous)
    cpu_s.append(time.process_time() - cpu)
    wall_s.append(time.perf_counter() - started)
    if waits is not None:
        waits.append(watch.done())
    return cold, warm, cpu_s, wall_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--platforms", type=int, default=1_000)
    parser.add_argument("--pools", type=int, default=100)
    parser.add_argument("--workloads", type=int, default=5_000)
    parser.add_argument("--namespaces", type=int, default=20)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--traced", action="store_true", help="also the tracemalloc peak of a cold plan")
    args = parser.parse_args()

    waits: list[str] = []
    cold, warm, cpu, wall = passes(
        args.hosts, args.platforms, args.pools, args.workloads, args.namespaces, args.seed, waits
    )
    admitted_cold = sum(1 for w in cold.workloads if w.action is WorkloadAction.ADMIT)
    admitted_warm = sum(1 for w in warm.workloads if w.action is WorkloadAction.ADMITTED)
    print(
        f"input: {args.hosts} hosts, {args.platforms} platforms, {args.pools} pools, "
        f"{args.workloads} workloads, seed {args.seed}"
    )
    print(f"plan time, cold:  {wall[0]:7.3f} s wall, {cpu[0]:7.3f} s CPU   {summary(cold)}")
    print(f"plan time, warm:  {wall[1]:7.3f} s wall, {cpu[1]:7.3f} s CPU   {summary(warm)}")
    for name, what in zip(("cold", "warm"), waits, strict=True):
        print(f"  {name} pass (and just after it), besides the CPU: {what}")
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of the process (inputs, both plans): {peak_rss:.0f} MiB")
    if args.traced:  # tracemalloc slows the plan severalfold and its own records add to the RSS
        rnd = random.Random(args.seed)
        machines = make_machines(args.hosts, rnd)
        desired = make_desired(args.platforms, args.namespaces, rnd)
        add_pools(desired, args.pools, args.workloads, args.namespaces, rnd)
        tracemalloc.start()
        make_plan(desired, Inventory(tuple(machines)), [])
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(f"peak memory during the cold plan (tracemalloc): {peak / 2**20:.1f} MiB")
    ok = cpu[0] < 3 and cpu[1] < 3 and admitted_cold == admitted_warm
    print("targets (< 3 s CPU per pass, every cold admission kept warm):", "met" if ok else "NOT met")


if __name__ == "__main__":
    main()
