"""Benchmark of the allocation engine and planner at scale, against a naive largest-first greedy.

10,000 machines and 1,000 MLPlatforms over 20 namespaces, generated directly as ``Machine`` objects
and models from a fixed seed. Prints the plan time (cold: every platform new; warm: every platform
already has its cluster), the peak memory (tracemalloc during the plan, and the process's ru_maxrss),
and the total surplus GPUs of the exact engine next to a naive greedy that takes the largest GPU hosts
first. Targets: a full plan under 2 s and 300 MiB, strictly less surplus than the greedy.

    python bench/bench_allocate.py [--hosts 10000] [--platforms 1000] [--namespaces 20] [--seed 7]
"""

from __future__ import annotations

import argparse
import itertools
import random
import resource
import time
import tracemalloc
from collections.abc import Sequence
from dataclasses import dataclass, replace

from reconciler.allocate import Requirements, requirements
from reconciler.inventory import HostState, Inventory, Machine, Role
from reconciler.model.desired import DesiredState, Loaded, SourceRef
from reconciler.model.gpu import GpuFamily
from reconciler.model.observed import ManagedCluster, cluster_name
from reconciler.model.resources import ComputeProfile, MLPlatform, Project, Resource, Settings
from reconciler.plan import Action, make_plan

FAMILIES = {  # family -> (architectures, GPU counts on offer with weights)
    "NVIDIA-H100": (("amd64",), ((8, 4), (4, 3), (2, 1))),
    "NVIDIA-A100": (("amd64",), ((8, 3), (4, 3), (2, 1))),
    "NVIDIA-L40S": (("amd64",), ((4, 2), (2, 3))),
    "NVIDIA-L4": (("amd64", "arm64"), ((4, 1), (2, 2), (1, 2))),
    "NVIDIA-GH200": (("arm64",), ((4, 2), (2, 2), (1, 1))),
}
REQUESTS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24)


def make_machines(n: int, rnd: random.Random) -> list[Machine]:
    machines = []
    families = list(FAMILIES)
    for i in range(n):
        pool = {"network-pool": str(rnd.randint(1, 3))} if rnd.random() < 0.3 else {}
        state = HostState.UNAVAILABLE if rnd.random() < 0.03 else HostState.AVAILABLE
        kind = rnd.random()
        name = f"edge-{i:05d}-{rnd.randrange(16**6):06x}"
        if kind < 0.2:
            arch = "arm64" if rnd.random() < 0.15 else "amd64"
            role, tagged, family, count = Role.CONTROL_PLANE, False, None, 0
        elif kind < 0.3:
            arch = "arm64" if rnd.random() < 0.15 else "amd64"
            role, tagged, family, count = Role.WORKER, True, None, 0
        else:
            fam = rnd.choice(families)
            arches, counts = FAMILIES[fam]
            arch = rnd.choice(arches)
            count = rnd.choices([c for c, _ in counts], weights=[w for _, w in counts])[0]
            role, tagged, family = Role.WORKER, False, GpuFamily(fam)
        machines.append(
            Machine(
                uid=name,
                name=name,
                arch=arch,
                cpus=32,
                gpu_family=family,
                gpu_count=count,
                gpu_memory_bytes=None,
                role=role,
                worker_tagged=tagged,
                resource_groups=pool,
                state=state,
            )
        )
    return machines


def make_desired(platforms: int, namespaces: int, rnd: random.Random) -> DesiredState:
    resources: list[Resource] = []
    for n in range(namespaces):
        ns = f"team-{n:02d}"
        resources.append(
            Project.model_validate(
                {
                    "apiVersion": "mural.sh/v1alpha1",
                    "kind": "Project",
                    "metadata": {"name": ns, "namespace": ns},
                    "spec": {"computeProfileRef": {"name": "profile"}, "settingsRef": {"name": "palette"}},
                }
            )
        )
        resources.append(
            Settings.model_validate(
                {
                    "apiVersion": "mural.sh/v1alpha1",
                    "kind": "Settings",
                    "metadata": {"name": "palette", "namespace": ns},
                    "spec": {
                        "palette": {
                            "hostUrl": "https://api.spectrocloud.com",
                            "defaultProjectID": "6514216503b1d1cd4f1bdc44",
                            "apiKeySecretRef": {"env": "PALETTE_API_KEY"},
                            "clusterProfiles": [{"uid": "6651a2b3c4d5e6f708192a3b"}],
                        }
                    },
                }
            )
        )
        spec = {
            "controlPlaneDefaults": {"nodeCount": 3 if n % 5 == 0 else 1},
            "minWorkerNodes": rnd.choice([0, 1, 2, 3]),
            "gpuLimits": {"NVIDIA-H100": 16, "nvidia a100": 24},
        }
        resources.append(
            ComputeProfile.model_validate(
                {
                    "apiVersion": "palette.ai/v1alpha1",
                    "kind": "ComputeProfile",
                    "metadata": {"name": "profile", "namespace": ns},
                    "spec": spec,
                }
            )
        )
    for i in range(platforms):
        ns = f"team-{i % namespaces:02d}"
        fams = rnd.sample(
            ["NVIDIA-H100", "NVIDIA-A100", "NVIDIA-L40S", "NVIDIA-L4"], rnd.choice([1, 1, 1, 2])
        )
        if rnd.random() < 0.05:
            fams = ["NVIDIA-GH200"]
        gpus = [{"family": f, "count": rnd.choice(REQUESTS)} for f in fams]
        spec: dict[str, object] = {"gpus": gpus}
        if rnd.random() < 0.1:
            spec["resourceGroups"] = {"network-pool": str(rnd.randint(1, 3))}
        if rnd.random() < 0.2:
            spec["computeProfileRef"] = {"override": {"minWorkerNodes": rnd.choice([1, 2, 4])}}
        resources.append(
            MLPlatform.model_validate(
                {
                    "apiVersion": "palette.ai/v1alpha1",
                    "kind": "MLPlatform",
                    "metadata": {"name": f"platform-{i:04d}", "namespace": ns},
                    "spec": spec,
                }
            )
        )
    state = DesiredState(revision="bench")
    for i, r in enumerate(resources):
        key = (r.kind, r.metadata.namespace, r.metadata.name)
        state.resources[key] = Loaded(r, SourceRef(f"{r.metadata.namespace}/{r.metadata.name}.yaml", i, 1))
    return state


# --- the naive greedy, for comparison --------------------------------------------------------------


@dataclass
class GreedyResult:
    placed: int
    surplus: int


def greedy(
    desired: DesiredState, machines: Sequence[Machine]
) -> tuple[GreedyResult, dict[tuple[str, str], int]]:
    """Largest-first: per family, the free hosts with the most GPUs until the request is met; the same
    control-plane choice and minimum-worker fill order as the engine, so only the GPU choice differs."""
    free = [m for m in machines if m.available]
    by_family: dict[tuple[str, str | None], list[Machine]] = {}
    for m in free:
        if m.role is Role.WORKER and m.gpu_family is not None:
            by_family.setdefault((m.arch, m.gpu_family), []).append(m)
    for hosts in by_family.values():
        hosts.sort(key=lambda m: (-m.gpu_count, m.name))
    cps: dict[str, list[Machine]] = {}
    workers: dict[str, list[Machine]] = {}
    for m in sorted(free, key=lambda m: (m.gpu_count, m.name)):
        (cps if m.role is Role.CONTROL_PLANE else workers).setdefault(m.arch, []).append(m)
    taken: set[str] = set()
    placed, surplus = 0, 0
    per_platform: dict[tuple[str, str], int] = {}
    for p in desired.platforms():
        req = requirements(desired, p)
        if not isinstance(req, Requirements):
            continue
        best: tuple[int, str, list[str]] | None = None
        for arch in ("amd64", "arm64"):
            result = _greedy_one(req, arch, by_family, cps.get(arch, []), workers.get(arch, []), taken)
            if result is not None and (best is None or result[0] < best[0]):
                best = (result[0], arch, result[1])
        if best is None:
            continue
        taken.update(best[2])
        placed += 1
        surplus += best[0]
        per_platform[(p.metadata.namespace, p.metadata.name)] = best[0]
    return GreedyResult(placed, surplus), per_platform


def _greedy_one(
    req: Requirements,
    arch: str,
    by_family: dict[tuple[str, str | None], list[Machine]],
    cps: list[Machine],
    all_workers: list[Machine],
    taken: set[str],
) -> tuple[int, list[str]] | None:
    def usable(m: Machine) -> bool:
        return m.uid not in taken and m.in_groups(req.groups)

    chosen = [m.uid for m in itertools.islice((m for m in cps if usable(m)), req.control_plane)]
    if len(chosen) < req.control_plane:
        return None
    workers: list[Machine] = []
    for family, count in req.gpus.items():
        got = 0
        for m in by_family.get((arch, family), []):
            if got >= count:
                break
            if usable(m):
                workers.append(m)
                got += m.gpu_count
        if got < count:
            return None
    missing = max(req.min_workers - len(workers), 0)
    if missing:
        used = {m.uid for m in workers}

        def stage(m: Machine) -> int:
            return 0 if m.worker_tagged else (1 if m.gpu_family in req.gpus else 2)

        rest = [m for m in all_workers if m.uid not in used and usable(m)]
        rest.sort(key=lambda m: (stage(m), m.gpu_count, m.name))
        if len(rest) < missing:
            return None
        workers += rest[:missing]
    total = sum(m.gpu_count for m in workers)
    return total - req.requested_gpus, chosen + [m.uid for m in workers]


# --- measurement -----------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--platforms", type=int, default=1_000)
    parser.add_argument("--namespaces", type=int, default=20)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    rnd = random.Random(args.seed)
    machines = make_machines(args.hosts, rnd)
    desired = make_desired(args.platforms, args.namespaces, rnd)
    inventory = Inventory(tuple(machines))

    start = time.perf_counter()
    plan = make_plan(desired, inventory, [])
    cold = time.perf_counter() - start

    tracemalloc.start()
    make_plan(desired, inventory, [])
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    # Warm: every created platform now has its cluster; the plan must be all "unchanged".
    clusters = [
        ManagedCluster(
            uid=f"uid-{e.namespace}-{e.name}",
            name=cluster_name(e.namespace, e.name),
            namespace=e.namespace,
            platform=e.name,
            state="Running",
            control_plane=e.control_plane,
            workers=e.workers,
            arch=e.arch,
        )
        for e in plan.platforms
        if e.action is Action.CREATE
    ]
    used = {u for c in clusters for u in c.hosts}
    after = Inventory(tuple(replace(m, state=HostState.IN_USE) if m.uid in used else m for m in machines))
    start = time.perf_counter()
    warm_plan = make_plan(desired, after, clusters)
    warm = time.perf_counter() - start
    unchanged = sum(1 for e in warm_plan.platforms if e.action is Action.UNCHANGED)

    created = [e for e in plan.platforms if e.action is Action.CREATE]
    requested = {
        (p.metadata.namespace, p.metadata.name): sum(g.count for g in p.spec.gpus)
        for p in desired.platforms()
    }
    exact = {e.key: sum(e.gpus.values()) - requested[e.key] for e in created}
    start = time.perf_counter()
    naive, naive_per = greedy(desired, machines)
    greedy_time = time.perf_counter() - start
    both = set(exact) & set(naive_per)
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    total_gpus = sum(m.gpu_count for m in machines if m.available)
    print(
        f"input: {len(machines)} hosts ({total_gpus} available GPUs), {len(requested)} platforms "
        f"over {args.namespaces} namespaces, seed {args.seed}"
    )
    print(
        f"plan time, cold (all new):           {cold:8.3f} s   ({len(created)} create, "
        f"{len(plan.platforms) - len(created)} other)"
    )
    reasons: dict[str, int] = {}
    for e in plan.platforms:
        if e.action is not Action.CREATE:
            reasons[f"{e.action} {e.reason}"] = reasons.get(f"{e.action} {e.reason}", 0) + 1
    print("  not created:", ", ".join(f"{n} {r}" for r, n in sorted(reasons.items())) or "none")
    print(f"plan time, warm (all have clusters):  {warm:8.3f} s   ({unchanged} unchanged)")
    print(f"peak memory during plan (tracemalloc): {peak / 2**20:7.1f} MiB")
    print(f"process max RSS (ru_maxrss):           {rss_mib:7.1f} MiB")
    print()
    print(f"{'':34}{'exact engine':>14}{'largest-first':>16}")
    print(f"{'platforms placed':34}{len(exact):>14}{naive.placed:>16}")
    print(f"{'total surplus GPUs':34}{sum(exact.values()):>14}{naive.surplus:>16}")
    print(
        f"{'surplus on platforms both placed':34}{sum(exact[k] for k in both):>14}"
        f"{sum(naive_per[k] for k in both):>16}"
    )
    print(f"{'time':34}{cold:>13.3f}s{greedy_time:>15.3f}s")
    ok = cold < 2 and rss_mib < 300 and sum(exact.values()) < naive.surplus and len(exact) >= naive.placed
    print()
    print("targets (< 2 s, < 300 MiB, strictly less surplus, no fewer placed):", "met" if ok else "NOT met")


if __name__ == "__main__":
    main()
