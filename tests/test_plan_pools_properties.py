"""Property tests of planning with pools: platforms and pools share one inventory, admission binds real
GPUs, and the plan does not depend on the order of the documents."""

from __future__ import annotations

import json
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.inventory import Inventory, Machine
from reconciler.model.resources import Resource
from reconciler.placement.admission_types import WorkloadAction
from reconciler.placement.units import GpuRef
from reconciler.plan import make_plan
from tests._allocate_support import ai_workload, desired, plans_in_two_orders, platform, pool
from tests.test_allocate_properties import FAMILIES, machines_st, platforms_st

PROPS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NAMESPACES = ["project-a", "project-b"]


@st.composite
def with_pools_st(draw: st.DrawFn) -> list[Resource]:
    """Platforms (as the allocation properties draw them), one or two pools and their tenants."""
    resources = draw(platforms_st(max_size=2))
    pools: list[tuple[str, str]] = []
    for i in range(draw(st.integers(1, 2))):
        ns = draw(st.sampled_from(NAMESPACES))
        # Names interleave with the platforms' (p0, p1, ...) so that pools are placed between them.
        name = f"p{i}x"
        gpus = {draw(st.sampled_from(FAMILIES)): draw(st.sampled_from([1, 2, 4, 8]))}
        resources.append(
            pool(
                name,
                gpus,
                ns=ns,
                mode=draw(st.sampled_from(["shared", "shared", "dedicated"])),
                groups=draw(st.sampled_from([{}, {}, {}, {"pool": "2"}])),
                suspend=draw(st.sampled_from([False] * 7 + [True])),
            )
        )
        pools.append((ns, name))
    for j in range(draw(st.integers(0, 5))):
        ns, pool_name = draw(st.sampled_from(pools))
        gpus = {draw(st.sampled_from(FAMILIES)): draw(st.sampled_from([1, 1, 2, 4]))}
        if draw(st.booleans()):
            resources.append(
                ai_workload(
                    f"w{j}",
                    pool_name,
                    gpus,
                    ns=ns,
                    priority=draw(st.sampled_from([0, 0, 5])),
                    suspend=draw(st.sampled_from([False] * 5 + [True])),
                )
            )
        else:
            resources.append(platform(f"t{j}", gpus, ns=ns, mode="shared", pool_name=pool_name))
    return resources


@PROPS
@given(machines_st(max_size=24), with_pools_st(), st.randoms(use_true_random=False))
def test_property_plan_with_pools_does_not_depend_on_document_order(
    machines: list[Machine], resources: list[Resource], rnd: random.Random
) -> None:
    first, again = plans_in_two_orders(machines, resources, rnd)
    assert json.dumps(first.to_json(), sort_keys=True) == json.dumps(again.to_json(), sort_keys=True)


@PROPS
@given(machines_st(max_size=24), with_pools_st())
def test_property_no_host_in_two_clusters_and_no_gpu_bound_twice(
    machines: list[Machine], resources: list[Resource]
) -> None:
    plan = make_plan(desired(*resources), Inventory(tuple(machines)), [])
    by_uid = {m.uid: m for m in machines}
    seen: set[str] = set()
    for entry in [*plan.platforms, *(p.cluster for p in plan.pools)]:
        hosts = set(entry.control_plane) | set(entry.workers)
        assert not seen & hosts, f"a host in two clusters: {sorted(seen & hosts)}"
        seen |= hosts
    pools = {p.key: p for p in plan.pools}
    bound: set[GpuRef] = set()
    for w in plan.workloads:
        if w.action not in (WorkloadAction.ADMIT, WorkloadAction.ADMITTED):
            assert w.gpus == () or w.action is WorkloadAction.PENDING
            continue
        assert w.pool is not None
        entry = pools[(w.namespace, w.pool)]
        refs = {u.ref for u in w.gpus}
        assert not bound & refs, "a GPU bound to two workloads"
        bound |= refs
        assert all(u.host_uid in entry.cluster.workers for u in w.gpus), (
            "a workload on a host not in its pool"
        )
        assert all(u.index < by_uid[u.host_uid].gpu_count for u in w.gpus)
    for entry in plan.pools:
        for family, capacity in entry.capacity.items():
            on_hosts = sum(
                by_uid[u].gpu_count for u in entry.cluster.workers if by_uid[u].gpu_family == family
            )
            assert capacity.total == on_hosts and capacity.admitted + capacity.free == capacity.total
