"""The sample repository's pools admit their workloads as the files' comments say (once the pool's hosts
are the ones the comments name)."""

from __future__ import annotations

import json

from reconciler.inventory import discover
from reconciler.model.environment import Environment
from reconciler.model.pools import canonical_limits, pool_ref_of, workload_request
from reconciler.model.resources import AIWorkload, ComputePool
from reconciler.placement.admission import admit_pool
from reconciler.placement.admission_types import PoolState
from reconciler.placement.environment import EnvRequest, candidates, route
from reconciler.placement.units import gpu_units
from reconciler.resolve import compute_profile
from reconciler.source.directory import load_directory
from tests._manifests_support import SAMPLE_REPO

POOL_HOSTS = {"shared-a100": ["gpu-a100-03"], "finetune-l40s": ["gpu-l40s-02"], "whisper": ["gpu-l40s-03"]}
EXPECTED = {
    "shared-a100": {"batch-train": "admit", "llm-serving": "admit", "notebook": "admit", "sweep": "pending"},
    "finetune-l40s": {"finetune": "admit"},
    "whisper": {"whisper": "admit"},  # the pool whisper provisions for itself (its Project's ComputeProfile)
}


def test_sample_pools_admit_their_workloads_as_their_comments_say() -> None:
    state = load_directory(SAMPLE_REPO)
    machines = {
        m.name: m
        for m in discover(json.loads((SAMPLE_REPO / "inventory.json").read_text())["edgeHosts"]).machines
    }
    workloads = list(state.of_kind(AIWorkload))
    states: dict[tuple[str, str], PoolState] = {}
    for pool in state.of_kind(ComputePool):
        name = pool.metadata.name
        profile = compute_profile(state, pool)
        assert profile is not None
        units = gpu_units(machines[h] for h in POOL_HOSTS[name])
        assert len(units) == sum(g.count for g in pool.spec.gpus)
        key = (pool.metadata.namespace, name)
        states[key] = PoolState(key, pool.spec.mode, units, canonical_limits(profile.spec.gpu_limits))
    assert {k[1] for k in states} == set(EXPECTED)
    fixed = {k: [workload_request(w) for w in workloads if pool_ref_of(w) == k[1]] for k in states}
    routed = []
    for w in workloads:
        if w.spec.environment_ref is not None:
            env = state.get(Environment, w.metadata.namespace, w.spec.environment_ref.name)
            assert env is not None
            names = candidates(env, list(state.of_kind(ComputePool)))
            routed.append(EnvRequest(workload_request(w), env.metadata.name, names, env.spec.order))
    routing = route(routed, fixed, lambda k, tenants: admit_pool(states[k], tenants) if k in states else None)
    for key, pool_state in states.items():
        name = key[1]
        result = admit_pool(pool_state, [*fixed[key], *routing.assigned.get(key, ())])
        assert {k[1]: str(d.action) for k, d in result.workloads.items()} == EXPECTED[name]
        if name == "shared-a100":
            sweep = result.workloads[("project-b", "sweep")].message
            text = (SAMPLE_REPO / "project-b" / "pools" / "shared-a100.yaml").read_text()
            assert sweep in " ".join(line.lstrip("# ") for line in text.splitlines()).replace('"', "")
