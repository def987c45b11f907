"""One test per allocation rule of docs/allocation.md and the seed's worked examples."""

from __future__ import annotations

from reconciler.allocate import Allocation, Decision, Rejection, allocate, optimal_count_vectors
from reconciler.inventory import HostState, Machine, Role
from reconciler.model.conditions import Reason
from reconciler.model.desired import DesiredState
from reconciler.model.observed import ManagedCluster
from tests._allocate_support import (
    NS,
    cluster,
    cps,
    desired,
    inventory,
    machine,
    platform,
    profile,
    workload,
)

H100 = "NVIDIA-H100"
A100 = "NVIDIA-A100"


def one(
    state: DesiredState,
    machines: list[Machine],
    clusters: list[ManagedCluster] | None = None,
    name: str = "p",
) -> Decision:
    return allocate(state, inventory(machines), clusters or [])[(NS, name)]


def placed(decision: Decision) -> Allocation:
    assert isinstance(decision, Allocation), decision
    return decision


def rejected(decision: Decision, reason: Reason) -> Rejection:
    assert isinstance(decision, Rejection), decision
    assert decision.reason is reason, decision
    return decision


# --- limits and modes ----------------------------------------------------------------------------


def test_gpu_limit_exceeded_rejects_in_canonical_form() -> None:
    state = desired(platform("p", {"nvidia h100": 8}), profile(limits={"NVIDIA_H100": 6}))
    r = rejected(one(state, [*cps(1), machine("g", 8)]), Reason.GPU_LIMIT_EXCEEDED)
    assert "8 NVIDIA-H100" in r.message and "at most 6" in r.message


def test_gpu_limit_equal_to_request_is_allowed() -> None:
    state = desired(platform("p", {H100: 6}), profile(limits={"nvidia-h100": 6}))
    assert placed(one(state, [*cps(1), machine("g", 8)])).gpus == {H100: 8}


def test_family_absent_from_gpu_limits_has_no_limit() -> None:
    state = desired(platform("p", {A100: 16}), profile(limits={H100: 1}))
    machines = [*cps(1), machine("a1", 8, A100), machine("a2", 8, A100)]
    assert placed(one(state, machines)).gpus == {A100: 16}


def test_shared_mode_platform_is_a_tenant_and_gets_no_cluster() -> None:
    state = desired(platform("p", {H100: 1}, mode="shared"))
    assert allocate(state, inventory([*cps(1), machine("g", 8)]), []) == {}


# --- control plane -------------------------------------------------------------------------------


def test_control_plane_count_comes_from_profile() -> None:
    state = desired(platform("p"), profile(node_count=3))
    alloc = placed(one(state, cps(5)))
    assert alloc.control_plane == ("cp-0", "cp-1", "cp-2")
    assert alloc.workers == ()


def test_control_plane_prefers_hosts_without_gpus() -> None:
    gpu_cp = machine("a-gpu-cp", 4, role=Role.CONTROL_PLANE)
    state = desired(platform("p"), profile(node_count=1))
    assert placed(one(state, [gpu_cp, *cps(1)])).control_plane == ("cp-0",)


def test_control_plane_shortage_is_insufficient_compute() -> None:
    state = desired(platform("p"), profile(node_count=3))
    r = rejected(one(state, cps(2)), Reason.INSUFFICIENT_COMPUTE)
    assert r.message == "needs 3 control-plane hosts, 2 available"


def test_gpu_workers_never_become_control_plane() -> None:
    state = desired(platform("p"), profile(node_count=1))
    rejected(one(state, [machine("g", 8)]), Reason.INSUFFICIENT_COMPUTE)


def test_unavailable_and_in_use_hosts_are_never_placed() -> None:
    state = desired(platform("p", {H100: 8}))
    machines = [
        *cps(1),
        machine("bad", 8, state=HostState.UNAVAILABLE),
        machine("used", 8, state=HostState.IN_USE),
    ]
    r = rejected(one(state, machines), Reason.INSUFFICIENT_COMPUTE)
    assert r.message == "needs 8 NVIDIA-H100 GPUs, 0 available"


# --- GPU workers ---------------------------------------------------------------------------------


def test_gpu_workers_request_12_takes_8_and_4() -> None:
    state = desired(platform("p", {H100: 12}))
    alloc = placed(one(state, [*cps(1), machine("a", 8), machine("b", 8), machine("c", 4)]))
    assert alloc.workers == ("a", "c")
    assert alloc.gpus == {H100: 12}


def test_gpu_workers_request_4_takes_the_4_not_an_8() -> None:
    state = desired(platform("p", {H100: 4}))
    alloc = placed(one(state, [*cps(1), machine("a", 8), machine("b", 8), machine("c", 4)]))
    assert alloc.workers == ("c",)


def test_gpu_workers_fewest_surplus_beats_fewest_hosts() -> None:
    state = desired(platform("p", {H100: 6}))
    alloc = placed(one(state, [*cps(1), machine("big", 8), machine("t1", 3), machine("t2", 3)]))
    assert alloc.workers == ("t1", "t2")


def test_gpu_workers_fewest_hosts_on_equal_surplus() -> None:
    state = desired(platform("p", {H100: 8}))
    machines = [*cps(1), machine("a", 2), machine("b", 2), machine("c", 2), machine("d", 2), machine("z", 8)]
    assert placed(one(state, machines)).workers == ("z",)


def test_gpu_workers_ties_break_by_host_name() -> None:
    state = desired(platform("p", {H100: 8}))
    machines = [*cps(1), machine("n3", 8), machine("n1", 8), machine("n2", 8)]
    assert placed(one(state, machines)).workers == ("n1",)


def test_gpu_workers_tie_between_count_mixes_breaks_by_sorted_names() -> None:
    # 12 = 8+4 = 6+6, both two hosts: the sorted names (a8, z4) beat (m6, n6).
    state = desired(platform("p", {H100: 12}))
    machines = [*cps(1), machine("a8", 8), machine("z4", 4), machine("m6", 6), machine("n6", 6)]
    assert placed(one(state, machines)).workers == ("a8", "z4")


def test_gpu_workers_only_of_the_requested_family() -> None:
    state = desired(platform("p", {H100: 8}))
    r = rejected(one(state, [*cps(1), machine("a", 8, A100)]), Reason.INSUFFICIENT_COMPUTE)
    assert r.message == "needs 8 NVIDIA-H100 GPUs, 0 available"


def test_gpu_workers_per_family_for_two_families() -> None:
    state = desired(platform("p", {H100: 4, A100: 8}))
    machines = [*cps(1), machine("h", 4), machine("h8", 8), machine("a", 8, A100)]
    alloc = placed(one(state, machines))
    assert alloc.workers == ("a", "h")
    assert alloc.gpus == {A100: 8, H100: 4}


def test_optimal_count_vectors_enumerates_every_tie() -> None:
    vectors = optimal_count_vectors({8: 2, 4: 1, 6: 2}, 12)
    assert sorted(sorted(v.items()) for v in vectors) == [[(4, 1), (8, 1)], [(6, 2)]]
    assert optimal_count_vectors({8: 1}, 9) == []
    assert optimal_count_vectors({8: 3}, 0) == [{}]


# --- minimum workers -----------------------------------------------------------------------------


def test_min_workers_precedence_workload_label_beats_override_and_profile() -> None:
    state = desired(
        platform("p", {H100: 1}, workload_name="wp", override_min=2),
        workload("wp", min_nodes="3"),
        profile(min_workers=1),
    )
    machines = cps(1) + [machine(f"g{i}", 1) for i in range(5)]
    assert len(placed(one(state, machines)).workers) == 3


def test_min_workers_precedence_override_beats_profile() -> None:
    state = desired(platform("p", {H100: 1}, override_min=2), profile(min_workers=4))
    machines = cps(1) + [machine(f"g{i}", 1) for i in range(5)]
    assert len(placed(one(state, machines)).workers) == 2


def test_min_workers_precedence_profile_when_nothing_else() -> None:
    state = desired(platform("p", {H100: 1}, workload_name="wp"), workload("wp"), profile(min_workers=4))
    machines = cps(1) + [machine(f"g{i}", 1) for i in range(5)]
    assert len(placed(one(state, machines)).workers) == 4


def test_min_workers_none_when_unset() -> None:
    state = desired(platform("p", {H100: 1}))
    machines = cps(1) + [machine(f"g{i}", 1) for i in range(5)]
    assert placed(one(state, machines)).workers == ("g0",)


def test_min_workers_override_zero_is_honoured_over_profile() -> None:
    state = desired(platform("p", {H100: 1}, override_min=0), profile(min_workers=3))
    machines = cps(1) + [machine(f"g{i}", 1) for i in range(5)]
    assert len(placed(one(state, machines)).workers) == 1


def test_min_workers_bad_label_is_invalid_spec() -> None:
    state = desired(platform("p", workload_name="wp"), workload("wp", min_nodes="three"))
    rejected(one(state, cps(1)), Reason.INVALID_SPEC)


def _seed(extra: list[Machine]) -> Decision:
    """The seed's scenario: four 8-GPU workers, minWorkerNodes 3, 8 GPUs dedicated."""
    state = desired(platform("p", {H100: 8}), profile(min_workers=3))
    gpu_nodes = [machine(f"gpu-node-{i}", 8) for i in range(1, 5)]
    return one(state, cps(1) + gpu_nodes + extra)


def test_seed_min_workers_prefer_worker_tagged_hosts() -> None:
    extra = [machine("cpu-node-1", 0, None, tagged=True), machine("cpu-node-2", 0, None, tagged=True)]
    alloc = placed(_seed([*extra, machine("a100-1", 1, A100)]))
    assert alloc.workers == ("cpu-node-1", "cpu-node-2", "gpu-node-1")
    assert alloc.gpus == {H100: 8}


def test_seed_min_workers_only_same_family_gpu_hosts() -> None:
    alloc = placed(_seed([]))
    assert alloc.workers == ("gpu-node-1", "gpu-node-2", "gpu-node-3")
    assert alloc.gpus == {H100: 24}


def test_seed_min_workers_only_other_families() -> None:
    # Three 8-GPU H100 hosts are not free: only one is, plus A100 hosts of 4 and 2 GPUs.
    state = desired(platform("p", {H100: 8}), profile(min_workers=3))
    machines = [*cps(1), machine("gpu-node-1", 8), machine("a100-4", 4, A100), machine("a100-2", 2, A100)]
    alloc = placed(one(state, machines))
    assert alloc.workers == ("a100-2", "a100-4", "gpu-node-1")
    assert alloc.gpus == {A100: 6, H100: 8}


def test_min_workers_requested_family_before_other_families_lowest_count_first() -> None:
    state = desired(platform("p", {H100: 8}), profile(min_workers=3))
    machines = [*cps(1), machine("h8", 8), machine("h4", 4), machine("h2", 2), machine("a1", 1, A100)]
    assert placed(one(state, machines)).workers == ("h2", "h4", "h8")


def test_min_workers_worker_tagged_fewest_gpus_first() -> None:
    state = desired(platform("p"), profile(min_workers=2))
    machines = [
        *cps(1),
        machine("t-gpu", 2, tagged=True),
        machine("t-zz", 0, None, tagged=True),
        machine("t-aa", 0, None, tagged=True),
    ]
    assert placed(one(state, machines)).workers == ("t-aa", "t-zz")


def test_min_workers_shortage_is_insufficient_compute() -> None:
    state = desired(platform("p", {H100: 8}), profile(min_workers=3))
    r = rejected(one(state, [*cps(1), machine("g", 8)]), Reason.INSUFFICIENT_COMPUTE)
    assert r.message == "needs 3 worker hosts, 1 available"


# --- architecture and resource groups -------------------------------------------------------------


def test_one_architecture_per_cluster() -> None:
    state = desired(platform("p", {H100: 8}))
    machines = [*cps(1, arch="arm64"), machine("g", 8, arch="amd64")]
    r = rejected(one(state, machines), Reason.INSUFFICIENT_COMPUTE)
    assert "on amd64" in r.message and "on arm64" in r.message


def test_architecture_with_least_surplus_wins() -> None:
    state = desired(platform("p", {H100: 4}))
    machines = [
        *cps(1, "x", arch="amd64"),
        machine("amd-8", 8, arch="amd64"),
        *cps(1, "y", arch="arm64"),
        machine("arm-4", 4, arch="arm64"),
    ]
    alloc = placed(one(state, machines))
    assert alloc.arch == "arm64"
    assert alloc.workers == ("arm-4",)


def test_architecture_tie_prefers_amd64() -> None:
    state = desired(platform("p", {H100: 8}))
    machines = [
        *cps(1, "y", arch="arm64"),
        machine("arm-8", 8, arch="arm64"),
        *cps(1, "x", arch="amd64"),
        machine("zz-amd-8", 8, arch="amd64"),
    ]
    assert placed(one(state, machines)).arch == "amd64"


def test_resource_groups_every_host_matches() -> None:
    state = desired(platform("p", {H100: 12}, groups={"network-pool": "3"}))
    pool3 = {"network-pool": "3", "storage-tier": "fast"}
    machines = [
        *cps(1, "a"),
        *cps(1, "b", groups=pool3),
        machine("g-out", 8),
        machine("g-in", 8, groups=pool3),
    ]
    r = rejected(one(state, machines), Reason.INSUFFICIENT_COMPUTE)
    assert r.message == "needs 12 NVIDIA-H100 GPUs in network-pool=3, 8 available"
    machines.append(machine("g-in-2", 4, groups=pool3))
    alloc = placed(one(state, machines))
    assert alloc.control_plane == ("b-0",)
    assert alloc.workers == ("g-in", "g-in-2")


def test_insufficient_compute_allocates_nothing() -> None:
    # p1 cannot get its minimum; nothing of it is taken, so p2 gets the host p1 would have used.
    state = desired(
        platform("p1", {H100: 8}, override_min=5),
        platform("p2", {H100: 8}),
    )
    decisions = allocate(state, inventory([*cps(2), machine("g", 8)]), [])
    rejected(decisions[(NS, "p1")], Reason.INSUFFICIENT_COMPUTE)
    assert placed(decisions[(NS, "p2")]).workers == ("g",)


# --- across platforms ----------------------------------------------------------------------------


def test_new_platforms_placed_in_namespace_then_name_order() -> None:
    state = desired(
        platform("b", {H100: 8}, ns="ns-1"),
        platform("a", {H100: 8}, ns="ns-2"),
        platform("a", {H100: 8}, ns="ns-1"),
    )
    machines = [*cps(3), machine("g1", 8), machine("g2", 8)]
    decisions = allocate(state, inventory(machines), [])
    assert placed(decisions[("ns-1", "a")]).workers == ("g1",)
    assert placed(decisions[("ns-1", "b")]).workers == ("g2",)
    rejected(decisions[("ns-2", "a")], Reason.INSUFFICIENT_COMPUTE)


def test_existing_allocation_is_sticky_and_never_preempted() -> None:
    # "zz" already owns the only 4-GPU host; new "aa" (first by name) must not take it.
    state = desired(platform("aa", {H100: 4}), platform("zz", {H100: 4}))
    machines = [*cps(2), machine("g4", 4, state=HostState.IN_USE), machine("g8", 8)]
    existing = cluster("zz", ["cp-1"], ["g4"])
    decisions = allocate(state, inventory(machines), [existing])
    assert placed(decisions[(NS, "zz")]).workers == ("g4",)
    assert placed(decisions[(NS, "aa")]).workers == ("g8",)


def test_existing_cluster_unchanged_when_spec_unchanged() -> None:
    state = desired(platform("p", {H100: 8}), profile(min_workers=3))
    machines = (
        cps(1)
        + [machine(f"g{i}", 8, state=HostState.IN_USE) for i in range(3)]
        + [
            machine("t", 0, None, tagged=True),
        ]
    )
    existing = cluster("p", ["cp-0"], ["g0", "g1", "g2"])
    alloc = placed(one(state, machines, [existing]))
    assert alloc.workers == ("g0", "g1", "g2")


def test_scale_up_in_place_keeps_existing_hosts_and_adds_fewest() -> None:
    state = desired(platform("p", {H100: 12}))
    machines = [*cps(1), machine("g8", 8, state=HostState.IN_USE), machine("f8", 8), machine("f4", 4)]
    existing = cluster("p", ["cp-0"], ["g8"])
    alloc = placed(one(state, machines, [existing]))
    assert alloc.workers == ("f4", "g8")
    assert not alloc.replaces


def test_scale_down_removes_hosts_leaving_least_surplus() -> None:
    state = desired(platform("p", {H100: 4}))
    used = HostState.IN_USE
    machines = [
        *cps(1),
        machine("a8", 8, state=used),
        machine("b4", 4, state=used),
        machine("c2", 2, state=used),
    ]
    existing = cluster("p", ["cp-0"], ["a8", "b4", "c2"])
    assert placed(one(state, machines, [existing])).workers == ("b4",)


def test_scale_down_keeps_existing_hosts_for_the_minimum() -> None:
    state = desired(platform("p", {H100: 4}), profile(min_workers=2))
    used = HostState.IN_USE
    machines = [
        *cps(1),
        machine("a8", 8, state=used),
        machine("b4", 4, state=used),
        machine("t", 0, None, tagged=True),
    ]
    existing = cluster("p", ["cp-0"], ["a8", "b4"])
    # The free worker-tagged host is not swapped in: existing hosts that still serve are kept.
    assert placed(one(state, machines, [existing])).workers == ("a8", "b4")


def test_replace_needs_allow_replace_annotation() -> None:
    state = desired(platform("p", {A100: 8}))
    machines = [
        *cps(1, "x", state=HostState.IN_USE),
        machine("h8", 8, state=HostState.IN_USE),
        *cps(1, "y", arch="arm64"),
        machine("arm-a100", 8, A100, arch="arm64"),
    ]
    existing = cluster("p", ["x-0"], ["h8"], arch="amd64")
    r = rejected(one(state, machines, [existing]), Reason.REPLACE_BLOCKED)
    assert "palette.ai/allow-replace" in r.message and "arm64" in r.message


def test_replace_with_allow_replace_annotation() -> None:
    state = desired(platform("p", {A100: 8}, annotations={"palette.ai/allow-replace": "true"}))
    machines = [
        *cps(1, "x", state=HostState.IN_USE),
        machine("h8", 8, state=HostState.IN_USE),
        *cps(1, "y", arch="arm64"),
        machine("arm-a100", 8, A100, arch="arm64"),
    ]
    existing = cluster("p", ["x-0"], ["h8"], arch="amd64")
    alloc = placed(one(state, machines, [existing]))
    assert alloc.replaces and alloc.arch == "arm64"
    assert alloc.hosts == ("arm-a100", "y-0")


def test_suspended_and_invalid_platforms_keep_their_hosts() -> None:
    state = desired(platform("sus", {H100: 8}, suspend=True), platform("new", {H100: 8}))
    state.invalid[("MLPlatform", NS, "bad")] = []
    machines = [*cps(3), machine("g1", 8, state=HostState.IN_USE), machine("g2", 8, state=HostState.IN_USE)]
    clusters = [cluster("sus", ["cp-0"], ["g1"]), cluster("bad", ["cp-1"], ["g2"])]
    decisions = allocate(state, inventory(machines), clusters)
    assert set(decisions) == {(NS, "new")}
    rejected(decisions[(NS, "new")], Reason.INSUFFICIENT_COMPUTE)


def test_same_inputs_in_any_order_give_the_same_result() -> None:
    resources = [platform("b", {H100: 8}), platform("a", {H100: 12}), profile(min_workers=2)]
    machines = (
        cps(3)
        + [machine(f"g{i}", 4 * (1 + i % 3)) for i in range(8)]
        + [
            machine("t", 0, None, tagged=True),
        ]
    )
    first = allocate(desired(*resources), inventory(machines), [])
    second = allocate(desired(*reversed(resources)), inventory(list(reversed(machines))), [])
    assert first == second


def test_min_workers_fill_runs_after_the_exact_gpu_choice() -> None:
    # The documented order: the request first (the 8), then the minimum (the 2, then a 4).
    state = desired(platform("p", {H100: 8}), profile(min_workers=3))
    machines = [*cps(1), machine("h8", 8), machine("h4a", 4), machine("h4b", 4), machine("h2", 2)]
    alloc = placed(one(state, machines))
    assert alloc.workers == ("h2", "h4a", "h8")
    assert alloc.gpus == {H100: 14}
