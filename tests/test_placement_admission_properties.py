"""Invariants of admission over generated pools and workloads with replicas (hypothesis): no replica
spans hosts, no GPU is bound twice, the result does not depend on file order, admissions are sticky."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.model.conditions import Reason
from reconciler.model.pools import WorkloadRequest
from reconciler.placement.admission import admit_pool
from reconciler.placement.admission_types import PoolAdmission, PoolState, PreviousAdmission, WorkloadAction
from reconciler.placement.units import GpuUnit
from tests._admission_support import A100, H100, HOLDING, previous_of

FAMILIES = (A100, H100)


@st.composite
def pools(draw: st.DrawFn) -> PoolState:
    counts = draw(st.lists(st.tuples(st.integers(1, 8), st.sampled_from(FAMILIES)), min_size=1, max_size=6))
    units = tuple(
        GpuUnit(f"uid-{h}", f"host-{h:02d}", i, family)
        for h, (n, family) in enumerate(counts)
        for i in range(n)
    )
    mode = draw(st.sampled_from(["shared", "shared", "dedicated"]))
    limits = draw(st.dictionaries(st.sampled_from(FAMILIES), st.integers(1, 12), max_size=1))
    return PoolState(("ns", "pool"), mode=mode, gpus=units, gpu_limits=limits)


@st.composite
def workloads(draw: st.DrawFn) -> list[WorkloadRequest]:
    names = draw(st.lists(st.sampled_from("abcdefghijkl"), unique=True, max_size=10))
    out = []
    for name in names:
        # Mostly one family (a replica of two families fits no host: it stays pending).
        families = 2 if draw(st.integers(0, 9)) == 0 else 1
        whole = draw(
            st.dictionaries(
                st.sampled_from(FAMILIES), st.integers(1, 8), min_size=families, max_size=families
            )
        )
        out.append(
            WorkloadRequest(
                (draw(st.sampled_from(["ns", "other"])), name),
                priority=draw(st.integers(-1, 2)),
                whole=whole,
                suspended=draw(st.integers(0, 5)) == 0,
                replicas=draw(st.sampled_from([1, 1, 1, 2, 3])),
            )
        )
    return out


def holdings(result: PoolAdmission) -> list[tuple[str, int]]:
    return [(u.host_uid, u.index) for d in result.workloads.values() for u in d.gpus]


def fits_free(pool: PoolState, result: PoolAdmission, request: WorkloadRequest) -> bool:
    """Whether every replica of a one-family whole-GPU request fits the GPUs the pass leaves free."""
    if len(request.whole) != 1:
        return False
    family, per = next(iter(request.whole.items()))
    taken = set(holdings(result))
    free: Counter[str] = Counter(
        u.host_uid for u in pool.gpus if u.family == family and (u.host_uid, u.index) not in taken
    )
    return sum(n // per for n in free.values()) >= request.replicas


def check_invariants(pool: PoolState, requests: list[WorkloadRequest], result: PoolAdmission) -> None:
    held = holdings(result)
    assert len(held) == len(set(held)), "a GPU is bound twice"
    per_family = Counter(u.family for d in result.workloads.values() for u in d.gpus)
    totals = Counter(u.family for u in pool.gpus)
    for family, n in per_family.items():
        assert n <= totals[family]
        assert result.capacity[family].admitted == n
    for family, cap in result.capacity.items():
        assert cap.total == cap.admitted + cap.free == totals[family]
    by_key = {r.key: r for r in requests}
    for key, decision in result.workloads.items():
        request = by_key.get(key)
        for binding in decision.bound():
            # A replica never spans hosts: one binding per replica.
            assert [b.replica for b in decision.bound()].count(binding.replica) == 1
        if decision.action in HOLDING:
            assert request is not None
            assert decision.gpu_counts() == {str(f): n for f, n in sorted(request.total_whole().items())}
            assert sorted(b.replica for b in decision.bound()) == list(range(request.replicas))
            assert all(len(b.gpus) == sum(request.whole.values()) for b in decision.bound())
        if decision.action is WorkloadAction.PENDING and decision.reason in (
            Reason.POOL_CAPACITY_EXCEEDED,
            Reason.NO_FITTING_LAYOUT,
        ):
            # No GPU idles while a workload that would fit it waits: its replicas do not fit what is free.
            assert request is not None
            assert not fits_free(pool, result, request)
        assert (decision.position is not None) == (decision.action is WorkloadAction.PENDING)
    positions = sorted(d.position for d in result.workloads.values() if d.position is not None)
    assert positions == list(range(1, len(positions) + 1))
    if pool.mode == "dedicated":
        assert sum(bool(d.gpus) or d.action in HOLDING for d in result.workloads.values()) <= 1


@settings(max_examples=150, deadline=None)
@given(pool=pools(), requests=workloads())
def test_first_pass_invariants(pool: PoolState, requests: list[WorkloadRequest]) -> None:
    check_invariants(pool, requests, admit_pool(pool, requests))


@settings(max_examples=150, deadline=None)
@given(pool=pools(), requests=workloads(), data=st.data())
def test_the_result_does_not_depend_on_document_order(
    pool: PoolState, requests: list[WorkloadRequest], data: st.DataObject
) -> None:
    earlier = admit_pool(pool, requests[: len(requests) // 2])
    previous = previous_of(earlier)
    expected = admit_pool(pool, requests, previous)
    shuffled_pool = PoolState(
        pool.key, pool.mode, tuple(data.draw(st.permutations(pool.gpus))), pool.gpu_limits
    )
    again = admit_pool(
        shuffled_pool, data.draw(st.permutations(requests)), data.draw(st.permutations(previous))
    )
    assert again == expected


@settings(max_examples=150, deadline=None)
@given(pool=pools(), requests=workloads(), data=st.data())
def test_an_admitted_workload_stays_admitted_unless_its_pool_shrank_or_it_changed(
    pool: PoolState, requests: list[WorkloadRequest], data: st.DataObject
) -> None:
    first = admit_pool(pool, requests)
    check_invariants(pool, requests, first)
    # Newcomers arrive (any priority) and some GPUs leave the pool.
    newcomers = [
        WorkloadRequest(("zz", f"new-{i}"), priority=9, whole={A100: n})
        for i, n in enumerate(data.draw(st.lists(st.integers(1, 8), max_size=3)))
    ]
    gone_hosts = data.draw(st.sets(st.sampled_from(sorted({u.host_uid for u in pool.gpus}))))
    smaller = PoolState(
        pool.key, pool.mode, tuple(u for u in pool.gpus if u.host_uid not in gone_hosts), pool.gpu_limits
    )
    second = admit_pool(smaller, requests + newcomers, previous_of(first))
    check_invariants(smaller, requests + newcomers, second)
    for key, decision in first.workloads.items():
        if decision.action not in HOLDING:
            continue
        untouched = all(u.host_uid not in gone_hosts for u in decision.gpus)
        after = second.workloads[key]
        if untouched:
            assert after.action is WorkloadAction.ADMITTED
            assert after.gpus == decision.gpus
        else:
            assert after.action in (WorkloadAction.ADMIT, WorkloadAction.PENDING)


@settings(max_examples=100, deadline=None)
@given(pool=pools(), requests=workloads())
def test_removing_every_workload_frees_the_whole_pool_in_one_pass(
    pool: PoolState, requests: list[WorkloadRequest]
) -> None:
    first = admit_pool(pool, requests)
    second = admit_pool(pool, [], previous_of(first))
    assert all(d.action is WorkloadAction.REMOVE for d in second.workloads.values())
    assert all(c.free == c.total for c in second.capacity.values())
    assert {d.key for d in second.workloads.values()} == {p.key for p in previous_of(first)}
    assert all(isinstance(p, PreviousAdmission) for p in previous_of(first))


@settings(max_examples=150, deadline=None)
@given(pool=pools(), requests=workloads(), data=st.data())
def test_changed_requests_keep_every_invariant_and_never_lose_a_kept_admission(
    pool: PoolState, requests: list[WorkloadRequest], data: st.DataObject
) -> None:
    first = admit_pool(pool, requests)
    changed = [
        replace(r, whole={f: data.draw(st.integers(1, 12)) for f in r.whole})
        if data.draw(st.booleans())
        else r
        for r in requests
    ]
    second = admit_pool(pool, changed, previous_of(first))
    check_invariants(pool, changed, second)
    for key, before in first.workloads.items():
        after = second.workloads[key]
        if before.action in HOLDING and after.action not in HOLDING:
            # A change that cannot be met keeps what the workload had (the pool did not shrink).
            assert after.gpus == before.gpus
