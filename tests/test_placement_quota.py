"""Project GPU quotas (docs/environments.md#project-gpu-quota): pure, against real allocation."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.allocate import Allocation, Rejection, place
from reconciler.inventory import Machine
from reconciler.model.conditions import Reason
from reconciler.model.desired import DesiredState
from reconciler.model.observed import ManagedCluster
from reconciler.model.resources import Project, Resource
from reconciler.placement.quota import QuotaPlacement, place_within_quota
from tests._allocate_support import (
    NS,
    cluster,
    cps,
    desired,
    inventory,
    machine,
    platform,
    pool,
    pool_cluster,
    resource,
)

A100 = "NVIDIA-A100"


def quota_project(quota: dict[str, int], ns: str = NS) -> Project:
    spec = {"computeProfileRef": {"name": "edge-compute-profile"}, "gpuQuota": quota}
    return resource(Project, "mural.sh/v1alpha1", ns, spec, ns=ns)


def within(
    machines: Sequence[Machine], resources: Sequence[Resource], clusters: Sequence[ManagedCluster] = ()
) -> QuotaPlacement:
    inv = inventory(machines)
    state: DesiredState = desired(*resources)
    by_uid = inv.by_uid()
    return place_within_quota(state, clusters, by_uid, lambda d: place(d, inv, clusters, machines=by_uid))


def a100s(n: int, size: int = 8) -> list[Machine]:
    return [machine(f"gpu-{i}", size, A100) for i in range(n)]


def test_a_create_above_the_quota_is_rejected_quota_exceeded() -> None:
    result = within(
        [*cps(3), *a100s(3)],
        [
            quota_project({A100: 20}),
            platform("a", {A100: 8}),
            platform("b", {A100: 8}),
            platform("c", {A100: 8}),
        ],
    )
    decisions = result.placement.platforms
    assert isinstance(decisions[(NS, "a")], Allocation) and isinstance(decisions[(NS, "b")], Allocation)
    refused = decisions[(NS, "c")]
    assert refused == Rejection(Reason.QUOTA_EXCEEDED, f"needs 8 {A100} GPUs; {NS} uses 16 of 20")
    assert [(u.family, u.used, u.quota, u.free) for u in result.uses] == [(A100, 16, 20, 4)]


def test_creations_are_taken_in_allocation_order_priority_first() -> None:
    high = platform("z-high", {A100: 8})
    high = high.model_copy(update={"spec": high.spec.model_copy(update={"priority": 5})})
    result = within([*cps(2), *a100s(2)], [quota_project({A100: 8}), platform("a-low", {A100: 8}), high])
    assert isinstance(result.placement.platforms[(NS, "z-high")], Allocation)
    assert result.placement.platforms[(NS, "a-low")].reason is Reason.QUOTA_EXCEEDED  # type: ignore[union-attr]


def test_pools_count_and_are_refused_like_platforms() -> None:
    result = within(
        [*cps(2), *a100s(2)], [quota_project({A100: 12}), platform("a", {A100: 8}), pool("p", {A100: 8})]
    )
    assert result.placement.pools[(NS, "p")] == Rejection(
        Reason.QUOTA_EXCEEDED, f"needs 8 {A100} GPUs; {NS} uses 8 of 12"
    )


def test_a_refused_create_frees_its_hosts_for_the_others() -> None:
    # a (16 A100) would take both 8-GPU hosts; refused by the quota, b (8) gets one of them.
    big = platform("a", {A100: 16})
    result = within([*cps(2), *a100s(2)], [quota_project({A100: 8}), big, platform("b", {A100: 8})])
    assert result.placement.platforms[(NS, "a")].reason is Reason.QUOTA_EXCEEDED  # type: ignore[union-attr]
    assert isinstance(result.placement.platforms[(NS, "b")], Allocation)


def test_a_grow_above_the_quota_is_held_at_its_size() -> None:
    running = cluster("a", ["cp-0"], ["gpu-0"])
    result = within([*cps(1), *a100s(2)], [quota_project({A100: 12}), platform("a", {A100: 16})], [running])
    decision = result.placement.platforms[(NS, "a")]
    assert isinstance(decision, Allocation) and decision.workers == ("gpu-0",)
    assert result.held == {("MLPlatform", NS, "a"): f"needs 8 {A100} GPUs; {NS} uses 8 of 12"}


def test_nothing_running_shrinks_for_a_lowered_quota() -> None:
    running = [cluster("a", ["cp-0"], ["gpu-0"]), pool_cluster("p", ["cp-1"], ["gpu-1"])]
    resources = [quota_project({A100: 4}), platform("a", {A100: 8}), pool("p", {A100: 8})]
    result = within([*cps(2), *a100s(2)], resources, running)
    assert result.placement.platforms[(NS, "a")] == Allocation(("cp-0",), ("gpu-0",), {A100: 8}, "amd64")
    assert isinstance(result.placement.pools[(NS, "p")], Allocation)
    assert [(u.used, u.quota, u.free) for u in result.uses] == [(16, 4, 0)]


def test_other_namespaces_and_unnamed_families_are_not_limited() -> None:
    other = platform("b", {A100: 8}, ns="project-b")
    h100 = platform("h", {"NVIDIA-H100": 8})
    machines = [*cps(3), *a100s(1), machine("gpu-h", 8, "NVIDIA-H100")]
    machines.append(machine("gpu-b", 8, A100))
    result = within(machines, [quota_project({A100: 0}), other, h100])
    assert isinstance(result.placement.platforms[("project-b", "b")], Allocation)
    assert isinstance(result.placement.platforms[(NS, "h")], Allocation)


@settings(max_examples=60, deadline=None)
@given(
    quota=st.integers(0, 40),
    asks=st.lists(st.sampled_from([4, 8, 12, 16]), min_size=1, max_size=5),
    running=st.integers(0, 2),
)
def test_the_quota_is_never_exceeded_by_a_create_or_a_grow(quota: int, asks: list[int], running: int) -> None:
    """Whatever is asked, the GPUs of what is created or grown never take used above the quota; what was
    running before counts as it was (it may be above a lowered quota, never grown past it)."""
    machines = [*cps(6), *a100s(4), *[machine(f"gpu-s{i}", 4, A100) for i in range(4)]]
    resources: list[Resource] = [quota_project({A100: quota})]
    clusters = []
    for i, n in enumerate(asks):
        resources.append(platform(f"p{i}", {A100: n}))
        if i < running:
            clusters.append(cluster(f"p{i}", [f"cp-{i}"], [f"gpu-{i}"]))
    result = within(machines, resources, clusters)
    before = 8 * min(running, len(asks))
    used = 0
    for decision in result.placement.platforms.values():
        if isinstance(decision, Allocation):
            used += decision.gpus.get(A100, 0)
    assert used <= max(quota, before)
    assert result.uses[0].used == used
