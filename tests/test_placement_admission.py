"""Admission into one pool, rule by rule (docs/pools.md)."""

from __future__ import annotations

from reconciler.inventory import Machine, Role
from reconciler.model.conditions import Reason
from reconciler.model.gpu import GpuFamily
from reconciler.model.pools import MigRequest
from reconciler.placement.admission import admit_pool
from reconciler.placement.admission_types import PreviousAdmission, WorkloadAction
from reconciler.placement.units import GpuRef, gpu_units
from tests._admission_support import A100, H100, actions, bound, hosts, previous_of, shared, want


def test_sticky_an_admitted_workload_keeps_its_gpus_against_a_higher_priority_newcomer() -> None:
    pool = shared(hosts(8))
    first = admit_pool(pool, [want("steady", 6)])
    assert actions(first) == {"steady": "admit"}
    second = admit_pool(pool, [want("steady", 6), want("urgent", 4, priority=1000)], previous_of(first))
    assert actions(second) == {"steady": "admitted", "urgent": "pending"}
    assert bound(second, "steady") == bound(first, "steady")
    assert second.workloads[("project-a", "urgent")].reason is Reason.POOL_CAPACITY_EXCEEDED


def test_new_workloads_go_by_priority_then_namespace_then_name() -> None:
    pool = shared(hosts(4))
    result = admit_pool(
        pool,
        [want("zeta", 2), want("alpha", 2, ns="team-b"), want("low", 2, priority=-1), want("beta", 2)],
    )
    assert actions(result) == {"beta": "admit", "zeta": "admit", "alpha": "pending", "low": "pending"}


def test_a_later_workload_that_fits_is_admitted_past_a_pending_one() -> None:
    pool = shared(hosts(8))
    result = admit_pool(pool, [want("big", 12, priority=5), want("small", 3)])
    assert actions(result) == {"big": "pending", "small": "admit"}


def test_pending_message_names_the_shortfall_and_what_would_unblock_it() -> None:
    pool = shared(hosts(8, 8))
    first = admit_pool(pool, [want("batch-7", 6), want("serve", 8)])
    result = admit_pool(pool, [want("batch-7", 6), want("serve", 8), want("train", 4)], previous_of(first))
    assert result.workloads[("project-a", "train")].message == (
        "needs 4 NVIDIA-A100 GPUs, 2 free in pool shared-a100 (16 total, 14 admitted); "
        "frees when project-a/batch-7 is removed, or the pool grows by 2"
    )


def test_a_request_larger_than_the_pool_says_only_growth_unblocks_it() -> None:
    result = admit_pool(shared(hosts(4, 2)), [want("huge", 7)])
    message = result.workloads[("project-a", "huge")].message
    assert message == (
        "needs 7 NVIDIA-A100 GPUs, 6 free in pool shared-a100 (6 total, 0 admitted); "
        "no host of pool shared-a100 has 7 NVIDIA-A100 GPUs (the largest has 4: host-0): "
        "frees when the pool grows by a host with 7"
    )


def test_a_request_larger_than_the_pool_on_big_enough_hosts_says_by_how_much_it_grows() -> None:
    result = admit_pool(shared(hosts(8)), [want("huge", 6), want("a-small", 4)])
    message = result.workloads[("project-a", "huge")].message
    assert message == (
        "needs 6 NVIDIA-A100 GPUs, 4 free in pool shared-a100 (8 total, 4 admitted); "
        "frees when project-a/a-small is removed, or the pool grows by 2"
    )


def test_a_family_the_pool_does_not_have_leaves_the_workload_pending() -> None:
    result = admit_pool(shared(hosts(4)), [want("h", 1, family=H100)])
    decision = result.workloads[("project-a", "h")]
    assert decision.action is WorkloadAction.PENDING
    assert "pool shared-a100 has none" in decision.message


def test_a_replica_never_spans_hosts_enough_in_total_is_no_fitting_layout() -> None:
    pool = shared(hosts(4, 4, 4, 4))
    first = admit_pool(pool, [want("a", 2), want("b", 2)])
    result = admit_pool(pool, [want("a", 2), want("b", 2), want("wide", 8)], previous_of(first))
    decision = result.workloads[("project-a", "wide")]
    assert decision.action is WorkloadAction.PENDING and decision.reason is Reason.NO_FITTING_LAYOUT
    assert decision.message == (
        "needs 8 NVIDIA-A100 GPUs on one host per replica; 12 free in pool shared-a100, at most 4 on one "
        "host (host-1); no host of pool shared-a100 has 8 NVIDIA-A100 GPUs (the largest has 4: host-0): "
        "frees when the pool grows by a host with 8"
    )
    assert decision.gpus == () and decision.position == 1


def test_no_fitting_layout_names_the_largest_free_block_and_its_host() -> None:
    pool = shared(hosts(8, 8, 8, 4, prefix="gpu-a100"))
    held = [
        PreviousAdmission(("project-a", f"w{h}"), tuple(GpuRef(f"uid-gpu-a100-{h}", i) for i in range(used)))
        for h, used in ((0, 4), (1, 5), (2, 6), (3, 1))
    ]
    requests = [want(f"w{h}", used) for h, used in ((0, 4), (1, 5), (2, 6), (3, 1))] + [want("big", 8)]
    decision = admit_pool(pool, requests, held).workloads[("project-a", "big")]
    assert decision.reason is Reason.NO_FITTING_LAYOUT
    assert decision.message == (
        "needs 8 NVIDIA-A100 GPUs on one host per replica; 12 free in pool shared-a100, at most 4 on one "
        "host (gpu-a100-0)"
    )


def test_binding_takes_the_host_that_fits_best_then_by_host_name() -> None:
    pool = shared(hosts(8, 4, 4))
    result = admit_pool(pool, [want("four", 4), want("eight", 8)])
    assert bound(result, "four") == [("host-1", i) for i in range(4)]
    assert bound(result, "eight") == [("host-0", i) for i in range(8)]


def test_a_dedicated_pool_admits_the_first_in_order_and_rejects_the_rest() -> None:
    pool = shared(hosts(8), mode="dedicated")
    result = admit_pool(pool, [want("a", 1), want("b", 1, priority=3)])
    assert actions(result) == {"a": "rejected", "b": "admit"}
    rejected = result.workloads[("project-a", "a")]
    assert rejected.reason is Reason.POOL_DEDICATED and "dedicated to project-a/b" in rejected.message


def test_a_dedicated_pool_keeps_its_admitted_workload_against_a_higher_priority_one() -> None:
    pool = shared(hosts(8), mode="dedicated")
    first = admit_pool(pool, [want("owner", 8)])
    second = admit_pool(pool, [want("owner", 8), want("vip", 1, priority=99)], previous_of(first))
    assert actions(second) == {"owner": "admitted", "vip": "rejected"}


def test_a_dedicated_pool_owner_that_does_not_fit_is_pending_and_the_others_still_rejected() -> None:
    pool = shared(hosts(4), mode="dedicated")
    result = admit_pool(pool, [want("greedy", 6, priority=1), want("modest", 2)])
    assert actions(result) == {"greedy": "pending", "modest": "rejected"}


def test_gpu_limits_apply_per_workload_and_count_mig_slices_rounded_up() -> None:
    pool = shared(hosts(8, 8), gpu_limits={A100: 4}, profile="a100-profile", mig_strategy="mixed")
    mig = [MigRequest(A100, "1g.10gb", 7)]  # 7 slices = 1 GPU
    result = admit_pool(pool, [want("fits", 4), want("over", 5), want("mixed", 4, mig=mig)])
    assert actions(result)["fits"] == "admit"
    over = result.workloads[("project-a", "over")]
    assert over.reason is Reason.GPU_LIMIT_EXCEEDED
    assert "allows at most 4" in over.message and "a100-profile" in over.message
    mixed = result.workloads[("project-a", "mixed")]
    assert mixed.reason is Reason.GPU_LIMIT_EXCEEDED and "5 NVIDIA-A100 GPUs" in mixed.message


def test_removal_frees_capacity_in_the_same_pass() -> None:
    pool = shared(hosts(8))
    first = admit_pool(pool, [want("a-old", 6), want("b-next", 4)])
    assert actions(first) == {"a-old": "admit", "b-next": "pending"}
    second = admit_pool(pool, [want("b-next", 4)], previous_of(first))
    assert actions(second) == {"a-old": "remove", "b-next": "admit"}
    flagged = admit_pool(pool, [want("a-old", 6, removed=True), want("b-next", 4)], previous_of(first))
    assert actions(flagged) == {"a-old": "remove", "b-next": "admit"}


def test_a_suspended_workload_releases_its_gpus_in_the_same_pass() -> None:
    pool = shared(hosts(8))
    first = admit_pool(pool, [want("a-old", 6), want("b-next", 4)])
    second = admit_pool(pool, [want("a-old", 6, suspended=True), want("b-next", 4)], previous_of(first))
    assert actions(second) == {"a-old": "suspended", "b-next": "admit"}
    assert second.workloads[("project-a", "a-old")].gpus == ()
    assert "6 GPUs are released" in second.workloads[("project-a", "a-old")].message


def test_when_the_pool_shrinks_an_admitted_workload_is_rebound_on_other_free_gpus() -> None:
    before = shared(hosts(4, 4))
    first = admit_pool(before, [want("w", 4)])
    assert {h for h, _ in bound(first, "w")} == {"host-0"}
    after = shared(hosts(4, 4)[4:])  # host-0 left the pool
    second = admit_pool(after, [want("w", 4)], previous_of(first))
    assert actions(second) == {"w": "admit"}
    assert {h for h, _ in bound(second, "w")} == {"host-1"}
    assert "admitted again" in second.workloads[("project-a", "w")].message


def test_when_the_pool_shrinks_below_a_workload_it_is_pending_and_releases_what_remains() -> None:
    before = shared(hosts(4, 4))
    first = admit_pool(before, [want("wide", 8)])
    second = admit_pool(shared(hosts(4, 4)[4:]), [want("wide", 8), want("small", 2)], previous_of(first))
    assert actions(second) == {"small": "admit", "wide": "pending"}
    assert second.workloads[("project-a", "wide")].gpus == ()
    assert second.capacity["NVIDIA-A100"].free == 2


def test_a_changed_request_that_no_longer_fits_keeps_its_previous_gpus() -> None:
    pool = shared(hosts(8))
    first = admit_pool(pool, [want("w", 4), want("other", 3)])
    second = admit_pool(pool, [want("w", 6), want("other", 3)], previous_of(first))
    w = second.workloads[("project-a", "w")]
    assert w.action is WorkloadAction.PENDING and len(w.gpus) == 4
    assert "keeps its previous admission" in w.message
    assert second.capacity["NVIDIA-A100"].admitted == 7


def test_a_shrunk_request_keeps_a_subset_of_its_own_gpus() -> None:
    pool = shared(hosts(8))
    first = admit_pool(pool, [want("w", 6)])
    second = admit_pool(pool, [want("w", 2)], previous_of(first))
    assert actions(second) == {"w": "admit"}
    assert set(bound(second, "w")) <= set(bound(first, "w"))
    assert second.capacity["NVIDIA-A100"].free == 6


def test_mig_requests_without_a_planner_are_rejected_as_not_available() -> None:
    mig = [MigRequest(A100, "3g.40gb", 1)]
    mixed = admit_pool(shared(hosts(8), mig_strategy="mixed"), [want("m", mig=mig)])
    decision = mixed.workloads[("project-a", "m")]
    assert decision.reason is Reason.MIG_UNSUPPORTED and "MIG placement is not available" in decision.message
    plain = admit_pool(shared(hosts(8)), [want("m", mig=mig)])
    assert "mig.strategy none" in plain.workloads[("project-a", "m")].message


def test_a_pool_that_is_not_ready_keeps_admitted_workloads_and_makes_new_ones_wait() -> None:
    pool = shared(hosts(8))
    first = admit_pool(pool, [want("kept", 2)])
    blocked = shared(hosts(8), not_ready="rejected: InsufficientCompute")
    second = admit_pool(blocked, [want("kept", 2), want("new", 2)], previous_of(first))
    assert actions(second) == {"kept": "admitted", "new": "pending"}
    new = second.workloads[("project-a", "new")]
    assert new.reason is Reason.POOL_NOT_READY and "InsufficientCompute" in new.message


def test_capacity_counts_total_admitted_and_free_per_family() -> None:
    pool = shared(hosts(8, 8), hosts(4, family=H100, prefix="h"))
    result = admit_pool(pool, [want("a", 6), want("b", 4), want("h", 1, family=H100)])
    capacity = {f: (c.total, c.admitted, c.free) for f, c in result.capacity.items()}
    assert capacity == {"NVIDIA-A100": (16, 10, 6), "NVIDIA-H100": (4, 1, 3)}


def test_previous_gpus_of_another_family_do_not_count_as_the_request() -> None:
    pool = shared(hosts(4), hosts(4, family=H100, prefix="h"))
    previous = [PreviousAdmission(("project-a", "w"), (GpuRef("uid-h-0", 0),))]
    result = admit_pool(pool, [want("w", 1)], previous)
    assert actions(result) == {"w": "admit"}
    assert bound(result, "w") == [("host-0", 0)]


def test_gpu_units_come_from_the_pool_hosts_one_per_device_index() -> None:
    def machine(name: str, gpus: int, family: str | None) -> Machine:
        fam = GpuFamily(family) if family else None
        return Machine(f"uid-{name}", name, "amd64", 32, fam, gpus, None, Role.WORKER, False)

    units = gpu_units(
        [machine("b", 2, "NVIDIA-A100"), machine("a", 1, "NVIDIA-A100"), machine("cpu", 0, None)]
    )
    assert [(u.host_name, u.index) for u in units] == [("a", 0), ("b", 0), ("b", 1)]


def test_a_change_above_the_limits_is_rejected_and_keeps_the_previous_admission() -> None:
    pool = shared(hosts(8), gpu_limits={A100: 4})
    first = admit_pool(pool, [want("w", 2)])
    second = admit_pool(pool, [want("w", 6), want("x", 6)], previous_of(first))
    w = second.workloads[("project-a", "w")]
    assert w.action is WorkloadAction.REJECTED and w.reason is Reason.GPU_LIMIT_EXCEEDED
    assert w.gpus == first.workloads[("project-a", "w")].gpus
    assert "keeps its previous admission (2 GPUs on host-0)" in w.message


def test_a_dedicated_pool_stays_with_a_workload_whose_change_was_refused() -> None:
    pool = shared(hosts(8), mode="dedicated", gpu_limits={A100: 4})
    first = admit_pool(pool, [want("owner", 2)])
    second = admit_pool(pool, [want("owner", 6), want("newcomer", 1, priority=5)], previous_of(first))
    assert actions(second) == {"owner": "rejected", "newcomer": "rejected"}
    assert second.workloads[("project-a", "newcomer")].reason is Reason.POOL_DEDICATED
    assert len(second.workloads[("project-a", "owner")].gpus) == 2


def test_a_grown_request_is_admitted_when_a_later_one_shrinks_in_the_same_pass() -> None:
    # 11 GPUs: i holds 1, d holds 10. i asks for 2 and d for 1: i is re-bound first (name order) and
    # finds nothing free until d shrinks; the retry at the end of the pass admits it.
    pool = shared(hosts(11))
    first = admit_pool(pool, [want("i", 1), want("d", 10)])
    second = admit_pool(pool, [want("i", 2), want("d", 1)], previous_of(first))
    assert actions(second) == {"d": "admit", "i": "admit"}
    assert len(second.workloads[("project-a", "i")].gpus) == 2
    assert set(bound(first, "i")) <= set(bound(second, "i"))
    assert second.capacity[A100].free == 8


def test_a_broken_admission_retried_does_not_claim_gpus_it_released() -> None:
    # b held 4 across two hosts; host-0 leaves. b goes pending (releasing what remains) and a, which
    # grows, takes b's remainder; the retry of b finds nothing and b stays pending holding nothing.
    pool = shared(hosts(2, 3))
    first = admit_pool(pool, [want("b", 4), want("a", 1)])
    smaller = shared(hosts(0, 3))
    second = admit_pool(smaller, [want("b", 4), want("a", 3)], previous_of(first))
    held = [ref for d in second.workloads.values() for ref in d.gpus]
    assert len(held) == len(set(held))
    assert actions(second)["b"] == "pending"
    assert second.workloads[("project-a", "b")].gpus == ()


def test_who_frees_counts_freed_gpus_on_their_own_hosts() -> None:
    """Removing a and b frees 12 GPUs, but 6 on each host: an 8-GPU replica fits on neither. The
    message names holders whose removal does leave 8 on one host (b, and serve's replica beside it)."""
    pool = shared(hosts(8, 8))
    placed = [want("a", 6), want("b", 6), want("serve", 2, replicas=2)]
    first = admit_pool(pool, placed)
    assert sorted({h for h, _ in bound(first, "serve")}) == ["host-0", "host-1"]
    result = admit_pool(pool, [*placed, want("big", 8)], previous_of(first))
    message = result.workloads[("project-a", "big")].message
    assert "project-a/a and project-a/b are removed" not in message
    assert message.endswith("frees when project-a/b and project-a/serve are removed, or the pool grows by 8")


def test_holders_whose_removal_leaves_no_host_big_enough_are_not_named() -> None:
    """x and y hold 7 GPUs each, one host each; nlp/serve one GPU on each host. By count removing x and
    y frees 14, enough for 8, but 7 on each host: an 8-GPU replica needs one host. The message names
    removals that do leave 8 on one host."""
    pool = shared(hosts(8, 8))
    placed = [want("x", 7), want("y", 7), want("serve", 1, replicas=2, ns="nlp")]
    first = admit_pool(pool, placed)
    assert sorted(h for h, _ in bound(first, "serve")) == ["host-0", "host-1"]
    result = admit_pool(pool, [*placed, want("big", 8)], previous_of(first))
    message = result.workloads[("project-a", "big")].message
    assert "project-a/x and project-a/y are removed" not in message, message
    assert message.endswith("frees when project-a/y and nlp/serve are removed, or the pool grows by 8"), (
        message
    )
