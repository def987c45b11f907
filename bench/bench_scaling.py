"""Benchmark of scaling decisions: 1,000 pools per pass, and the Prometheus queries a pass makes.

Each pool has a policy with a CPU rule and one or two GPU families (default step 15s, windows up to
15m, so up to 61 samples per metric), 2-12 workers, a few free hosts, random utilisation series (some
with gaps, some stale, some unreachable), pending demand and last actions. Prints the decision time
per pool (target: under 10 ms) and how many decisions acted. Then one observation pass against a real
Prometheus (when the ``prometheus`` binary is installed; started on loopback with a temp dir) and the
number of range queries sent (target: at most one per pool and metric).

    python bench/bench_scaling.py [--pools 1000] [--passes 5] [--seed 7] [--no-prometheus]
"""

from __future__ import annotations

import argparse
import math
import random
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
from _support import free_port

from reconciler.model.gpu import canonical_family
from reconciler.model.scaling import ScalingPolicySpec
from reconciler.prometheus import PrometheusClient, observe_pool
from reconciler.scaling import (
    Direction,
    LastAction,
    Metric,
    PendingDemand,
    PoolView,
    Samples,
    ScalingHost,
    Series,
    decide,
)
from reconciler.scaling.queries import range_queries

NOW = 1_800_000_000.0
FAMILIES = ["NVIDIA-A100", "NVIDIA-H100", "NVIDIA-L40S"]


def make_policy(rnd: random.Random) -> ScalingPolicySpec:
    families = rnd.sample(FAMILIES, rnd.choice([1, 2]))
    return ScalingPolicySpec.model_validate(
        {
            "cpu": {"scaleUpThreshold": 80, "scaleDownThreshold": 20},
            "cpuResourceBounds": {"minCPUCount": 16, "maxCPUCount": 2048},
            "gpu": [
                {"family": f, "scaleUpThreshold": 80, "scaleDownThreshold": 30, "scaleDownDuration": "15m"}
                for f in families
            ],
            "gpuResourceBounds": [{"family": f, "minGPUCount": 4, "maxGPUCount": 96} for f in families],
        },
        by_alias=True,
        by_name=False,
    )


def make_series(metric: Metric, rnd: random.Random) -> Series:
    step, count = 15.0, 60
    kind = rnd.random()
    if kind < 0.03:
        return Series(metric, "q", NOW - count * step, NOW, step, error="connection refused")
    level = rnd.choice([5.0, 10.0, 50.0, 85.0, 95.0])
    end = NOW - (120.0 if kind < 0.06 else 0.0)  # a few stale
    points = tuple(
        (end - k * step, level + rnd.uniform(-3, 3))
        for k in range(count, -1, -1)
        if not (kind > 0.95 and k == 7)  # a few with a gap
    )
    return Series(metric, "q", NOW - count * step, NOW, step, points)


def make_pool(i: int, policy: ScalingPolicySpec, rnd: random.Random) -> PoolView:
    families = [canonical_family(r.family) for r in policy.gpu]
    workers = tuple(
        ScalingHost(
            f"p{i}-w{j}", rnd.choice(families), rnd.choice([2, 4, 8]), 64, bound_gpus=rnd.choice([0, 0, 1])
        )
        for j in range(rnd.randint(2, 12))
    )
    free = tuple(ScalingHost(f"p{i}-f{j}", rnd.choice(families), rnd.choice([2, 4, 8]), 64) for j in range(4))
    return PoolView(f"pool-{i}", f"ns-pool-{i}", workers, free, {families[0]: rnd.randint(0, 8)}, 1)


def bench_decisions(pools: int, passes: int, seed: int) -> None:
    rnd = random.Random(seed)
    cases = []
    for i in range(pools):
        policy = make_policy(rnd)
        pool = make_pool(i, policy, rnd)
        samples = Samples(gpu=make_series(Metric.GPU, rnd), cpu=make_series(Metric.CPU, rnd))
        last = None
        if rnd.random() < 0.3:
            last = LastAction(
                Direction.UP, pool.workers[0].family or "cpu", "x", NOW - rnd.choice([60, 1200, 3600])
            )
            last = LastAction(
                last.direction, last.resource, last.host, last.written_at, completed_at=NOW - 30
            )
        pending = []
        if rnd.random() < 0.2:
            family = canonical_family(policy.gpu[0].family)
            pending = [PendingDemand(f"ns/w{i}", family, rnd.randint(1, 16), NOW - 600)]
        cases.append((policy, samples, pool, last, pending))
    timings: list[float] = []
    acted = 0
    for _ in range(passes):
        start = time.perf_counter()
        for policy, samples, pool, last, pending in cases:
            d = decide(policy, samples, pool, last, pending, NOW, lambda _h: True)
            acted += d.acts
        timings.append(time.perf_counter() - start)
    best, worst = min(timings), max(timings)
    print(f"decisions: {pools} pools x {passes} passes")
    print(f"  per pass: best {best * 1000:.1f} ms, worst {worst * 1000:.1f} ms")
    print(f"  per pool: {best / pools * 1000:.3f} ms (target < 10 ms)")
    print(f"  acted: {acted / passes:.0f} of {pools} per pass")
    queries = sum(len(range_queries(p, pool.cluster, NOW)) for p, _s, pool, _l, _d in cases)
    metrics = sum((1 if p.cpu else 0) + (1 if p.gpu else 0) for p, *_ in cases)
    print(f"  range queries planned per pass: {queries} for {metrics} (pool, metric) pairs")


def bench_prometheus(pools: int, seed: int) -> None:
    binary = shutil.which("prometheus")
    if binary is None:
        print("prometheus: binary not installed, observation pass skipped")
        return
    rnd = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        config = Path(tmp) / "prometheus.yml"
        config.write_text("global: {scrape_interval: 1s}\nscrape_configs: []\n")
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp}/data",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=error",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            for _ in range(150):
                try:
                    if httpx.get(f"{url}/-/ready", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.2)
            policies = [make_policy(rnd) for _ in range(pools)]
            now = math.floor(time.time())
            with PrometheusClient(url) as client:
                start = time.perf_counter()
                for i, policy in enumerate(policies):
                    observe_pool(client, policy, f"ns-pool-{i}", now)
                elapsed = time.perf_counter() - start
                print(f"prometheus: one observation pass over {pools} pools")
                print(
                    f"  range queries sent: {client.queries} ({client.queries / pools:.1f} per pool, "
                    f"at most one per pool and metric: {client.queries <= 2 * pools})"
                )
                print(f"  wall time: {elapsed:.2f} s ({elapsed / client.queries * 1000:.2f} ms per query)")
        finally:
            process.terminate()
            process.wait(timeout=15)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pools", type=int, default=1000)
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-prometheus", action="store_true")
    args = parser.parse_args()
    bench_decisions(args.pools, args.passes, args.seed)
    if not args.no_prometheus:
        bench_prometheus(args.pools, args.seed)


if __name__ == "__main__":
    main()
