"""Replicas: one host per replica, best fit, against an exhaustive search; MIG replicas; messages; JSON."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.model.conditions import Reason
from reconciler.model.pools import MigRequest, WorkloadRequest
from reconciler.placement.admission import admit_pool
from reconciler.placement.admission_types import PoolAdmission, PoolState, PreviousAdmission, WorkloadAction
from reconciler.placement.mig_admission import PoolMigPlanner
from reconciler.placement.units import GpuRef, gpu_units
from reconciler.plan import WorkloadPlan
from tests._admission_support import A100, HOLDING, actions, hosts, previous_of, shared, want
from tests.test_mig_admission import a100_hosts

# --- brute force -------------------------------------------------------------------------------------


def exhaustive(
    host_sizes: Sequence[int], requests: Sequence[WorkloadRequest], kept: dict[str, list[str]]
) -> dict[str, list[str]]:
    """The admitted workloads and the host of each replica, by exhaustive search under admission's rules:
    kept workloads keep their hosts; the others in order (priority, namespace, name), each all or
    nothing, every replica on one host; among all feasible assignments of its replicas to hosts, the one
    whose per-replica best-fit keys (free GPUs on the host when the replica is bound, host name) are
    lexicographically smallest."""
    names = [f"host-{h}" for h in range(len(host_sizes))]
    free = dict(zip(names, host_sizes, strict=True))
    out: dict[str, list[str]] = {}
    by_name = {r.key[1]: r for r in requests}
    for name, hosts_of in kept.items():
        per = by_name[name].whole[A100]
        for host in hosts_of:
            free[host] -= per
        out[name] = list(hosts_of)
    for request in sorted(requests, key=lambda r: (-r.priority, r.key)):
        if request.key[1] in kept:
            continue
        per = request.whole[A100]
        best: tuple[list[tuple[int, str]], tuple[str, ...]] | None = None
        for choice in itertools.product(names, repeat=request.replicas):
            left = dict(free)
            keys: list[tuple[int, str]] = []
            for host in choice:
                if left[host] < per:
                    break
                keys.append((left[host], host))
                left[host] -= per
            else:
                if best is None or keys < best[0]:
                    best = (keys, choice)
        if best is not None:
            for host in best[1]:
                free[host] -= per
            out[request.key[1]] = sorted(best[1])
    return out


def replica_hosts(result: PoolAdmission) -> dict[str, list[str]]:
    return {
        key[1]: sorted(b.host_name for b in d.bound())
        for key, d in result.workloads.items()
        if d.action in HOLDING
    }


small_pools = st.lists(st.integers(1, 4), min_size=1, max_size=4)


@st.composite
def small_requests(draw: st.DrawFn) -> list[WorkloadRequest]:
    names = draw(st.lists(st.sampled_from("abcdefg"), unique=True, min_size=1, max_size=6))
    return [
        want(n, draw(st.integers(1, 4)), priority=draw(st.integers(0, 1)), replicas=draw(st.integers(1, 3)))
        for n in names
    ]


@settings(max_examples=200, deadline=None)
@given(sizes=small_pools, requests=small_requests(), data=st.data())
def test_admitted_set_and_hosts_equal_an_exhaustive_search(
    sizes: list[int], requests: list[WorkloadRequest], data: st.DataObject
) -> None:
    pool = shared(hosts(*sizes))
    first = admit_pool(pool, requests)
    check_against_name_order(replica_hosts(first), sizes, requests, {})
    # A second pass: the admitted stay where they are, newcomers go by the same rules around them.
    newcomers = data.draw(small_requests())
    newcomers = [w for w in newcomers if w.key not in {r.key for r in requests}]
    kept = replica_hosts(first)
    second = replica_hosts(admit_pool(pool, requests + newcomers, previous_of(first)))
    assert {name: second[name] for name in kept} == kept
    check_against_name_order(second, sizes, requests + newcomers, kept)


def check_against_name_order(
    got: dict[str, list[str]],
    sizes: Sequence[int],
    requests: Sequence[WorkloadRequest],
    kept: dict[str, list[str]],
) -> None:
    """Name order (``exhaustive``) is what admission gives unless it admits strictly more workloads of a
    priority: then at the first priority (high first) where the admitted sets differ it has more, and
    every replica is on one host within the host's GPUs."""
    reference = exhaustive(sizes, requests, kept)
    for priority in sorted({r.priority for r in requests}, reverse=True):
        names = {r.key[1] for r in requests if r.priority == priority and r.key[1] not in kept}
        mine, theirs = names & set(got), names & set(reference)
        if mine != theirs:
            assert len(mine) > len(theirs), (priority, mine, theirs)
            used: Counter[str] = Counter()
            by_name = {r.key[1]: r for r in requests}
            for name, on in got.items():
                assert len(on) == by_name[name].replicas
                used.update({host: by_name[name].whole[A100] * n for host, n in Counter(on).items()})
            assert all(used[f"host-{h}"] <= size for h, size in enumerate(sizes)), used
            return
    assert got == reference


# --- MIG replicas (the real planner) -------------------------------------------------------------------


@st.composite
def mig_requests(draw: st.DrawFn) -> list[WorkloadRequest]:
    names = draw(st.lists(st.sampled_from("abcdefgh"), unique=True, min_size=1, max_size=6))
    out = []
    for name in names:
        profiles = draw(
            st.dictionaries(
                st.sampled_from(["1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"]), st.integers(1, 2), max_size=2
            )
        )
        whole = draw(st.integers(0, 3)) if profiles else draw(st.integers(1, 3))
        mig = tuple(MigRequest(A100, p, n) for p, n in sorted(profiles.items()))
        out.append(
            want(name, whole, priority=draw(st.integers(0, 1)), mig=mig, replicas=draw(st.integers(1, 3)))
        )
    return out


def mig_pass(
    pool: PoolState, requests: Sequence[WorkloadRequest], previous: Sequence[PreviousAdmission] = ()
) -> PoolAdmission:
    planner = PoolMigPlanner(pool, (), previous, requests)
    return admit_pool(pool, requests, previous, planner)


@settings(max_examples=60, deadline=None)
@given(requests=mig_requests(), data=st.data())
def test_mig_replicas_never_span_hosts_and_no_gpu_or_slot_is_bound_twice(
    requests: list[WorkloadRequest], data: st.DataObject
) -> None:
    pool = PoolState(
        ("project-a", "shared-a100"), gpus=gpu_units(a100_hosts(3, gpus=2)), mig_strategy="mixed"
    )
    result = mig_pass(pool, requests)
    whole: set[GpuRef] = set()
    slots: Counter[tuple[str, int, int]] = Counter()
    for decision in result.workloads.values():
        for unit in decision.gpus:
            assert unit.ref not in whole
            whole.add(unit.ref)
        replica_host: dict[int, set[str]] = {}
        for b in decision.bound():
            replica_host.setdefault(b.replica, set()).add(b.host_uid)
        for inst in decision.mig:
            replica_host.setdefault(inst.replica, set()).add(inst.host_uid)
            slots[(inst.host_uid, inst.gpu, inst.start)] += 1
        assert all(len(h) == 1 for h in replica_host.values()), decision
    assert all(n == 1 for n in slots.values())
    assert not {GpuRef(h, g) for h, g, _ in slots} & whole, "a GPU is both whole and in MIG mode"
    # The same answer whatever the order of the files.
    shuffled = data.draw(st.permutations(requests))
    assert mig_pass(pool, shuffled) == result


def test_a_mig_replica_goes_to_one_host_and_the_next_replica_may_share_it() -> None:
    pool = PoolState(
        ("project-a", "shared-a100"), gpus=gpu_units(a100_hosts(2, gpus=2)), mig_strategy="mixed"
    )
    request = want("serve", 0, mig=(MigRequest(A100, "3g.40gb", 2),), replicas=2)
    decision = mig_pass(pool, [request]).workloads[("project-a", "serve")]
    assert decision.action is WorkloadAction.ADMIT
    per_replica = {r: {i.host_uid for i in decision.mig if i.replica == r} for r in (0, 1)}
    assert per_replica == {0: {"uid-gpu-0"}, 1: {"uid-gpu-0"}}  # two 3g fit one GPU: replica 1 reuses it


def test_a_mig_replica_that_fits_the_pool_in_total_but_no_host_is_no_fitting_layout() -> None:
    pool = PoolState(
        ("project-a", "shared-a100"), gpus=gpu_units(a100_hosts(2, gpus=1)), mig_strategy="mixed"
    )
    request = want("wide", 0, mig=(MigRequest(A100, "7g.80gb", 2),))
    decision = mig_pass(pool, [request]).workloads[("project-a", "wide")]
    assert (decision.action, decision.reason) == (WorkloadAction.PENDING, Reason.NO_FITTING_LAYOUT)


# --- whole GPUs: rules and messages ----------------------------------------------------------------------


def test_best_fit_keeps_the_large_block_whole_for_a_later_big_replica() -> None:
    result = admit_pool(shared(hosts(8, 4)), [want("a-small", 2, replicas=2), want("b-big", 8)])
    assert actions(result) == {"a-small": "admit", "b-big": "admit"}
    assert [(b.replica, b.host_name, b.gpus) for b in result.workloads[("project-a", "a-small")].bound()] == [
        (0, "host-1", (0, 1)),
        (1, "host-1", (2, 3)),
    ]


def test_nothing_is_admitted_without_all_of_its_replicas_and_no_head_of_line_blocking() -> None:
    result = admit_pool(shared(hosts(4, 4)), [want("a-three", 4, replicas=3), want("b-two", 4, replicas=2)])
    assert actions(result) == {"a-three": "pending", "b-two": "admit"}
    pending = result.workloads[("project-a", "a-three")]
    assert pending.gpus == () and pending.reason is Reason.POOL_CAPACITY_EXCEEDED
    assert pending.message == (
        "needs 12 NVIDIA-A100 GPUs (3 replicas of 4), 0 free in pool shared-a100 (8 total, 8 admitted); "
        "frees when the pool grows by 12"
    )


def test_no_fitting_layout_with_replicas_says_how_many_fit() -> None:
    pool = shared(hosts(4, 4, 4, 4))
    first = admit_pool(pool, [want("w", 3, replicas=3)])
    assert sorted(b.host_name for b in first.workloads[("project-a", "w")].bound()) == [
        "host-0",
        "host-1",
        "host-2",
    ]
    again = admit_pool(pool, [want("w", 3, replicas=3), want("x", 2, replicas=3)], previous_of(first))
    x = again.workloads[("project-a", "x")]
    assert (x.reason, x.gpus, x.position) == (Reason.NO_FITTING_LAYOUT, (), 1)
    assert x.message == (
        "needs 2 NVIDIA-A100 GPUs on one host per replica (3 replicas); 7 free in pool shared-a100, "
        "at most 4 on one host (host-3), room for 2 of 3 replicas"
    )


def test_positions_follow_admission_order_among_pending_workloads() -> None:
    result = admit_pool(
        shared(hosts(2)),
        [want("a", 4), want("b", 1, priority=5), want("c", 2), want("d", 3, priority=9)],
    )
    positions = {k[1]: d.position for k, d in result.workloads.items()}
    assert positions == {"d": 1, "b": None, "a": 2, "c": 3}


def test_old_status_without_replicas_reads_as_replica_zero_and_stays_admitted() -> None:
    pool = shared(hosts(4))
    old = PreviousAdmission(("project-a", "w"), (GpuRef("uid-host-0", 0), GpuRef("uid-host-0", 1)))
    decision = admit_pool(pool, [want("w", 2)], [old]).workloads[("project-a", "w")]
    assert decision.action is WorkloadAction.ADMITTED
    assert [(b.replica, b.gpus) for b in decision.bound()] == [(0, (0, 1))]


def test_an_old_admission_spanning_hosts_is_bound_again_on_one_host() -> None:
    pool = shared(hosts(2, 2, 4))
    spanning = PreviousAdmission(
        ("project-a", "w"), tuple(GpuRef(f"uid-host-{h}", i) for h in (0, 1) for i in (0, 1))
    )
    decision = admit_pool(pool, [want("w", 4)], [spanning]).workloads[("project-a", "w")]
    assert decision.action is WorkloadAction.ADMIT
    assert [(b.host_name, b.gpus) for b in decision.bound()] == [("host-2", (0, 1, 2, 3))]


def test_plan_json_of_a_workload_with_replicas() -> None:
    result = admit_pool(shared(hosts(4, 4)), [want("w", 3, replicas=2)])
    d = result.workloads[("project-a", "w")]
    entry = WorkloadPlan(
        "project-a",
        "w",
        "AIWorkload",
        "shared-a100",
        d.action,
        d.reason,
        d.message,
        d.gpus,
        d.mig,
        replicas=d.replicas,
        gpu_replicas=d.gpu_replicas,
        position=d.position,
    )
    doc = entry.to_json()
    assert (doc["replicas"], doc["gpus"], doc["position"]) == (2, {"NVIDIA-A100": 6}, None)
    assert doc["bound"] == [
        {"replica": 0, "host": "uid-host-0", "gpus": [0, 1, 2]},
        {"replica": 1, "host": "uid-host-1", "gpus": [0, 1, 2]},
    ]


def test_a_workload_without_gpus_is_admitted_with_nothing_bound() -> None:
    result = admit_pool(shared(hosts(2)), [want("cpu-only", 0, replicas=3), want("full", 2)])
    assert actions(result) == {"cpu-only": "admit", "full": "admit"}
    assert result.workloads[("project-a", "cpu-only")].gpus == ()
