"""Admission's per-shape shortcuts change nothing (hypothesis): a whole-GPU shape refused once is refused
again without a try until a GPU is freed (``admission_bind.Binder``), a pending message is worked out once
per shape (``shortfall.Shortfall``), the order search reads a need once per shape (``admission_trial``),
a request over the pool's limits is refused once per shape (``admission``).
Pools with many workloads of few shapes, over passes that keep, change, remove and add workloads, give
the same admission with the shortcuts and without them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.model.pools import WorkloadRequest
from reconciler.placement import admission, admission_bind, admission_trial, shortfall
from reconciler.placement.admission import admit_pool
from reconciler.placement.admission_types import PoolAdmission, PoolState, PreviousAdmission
from reconciler.placement.units import GpuUnit
from tests._admission_support import A100, H100, previous_of


@contextmanager
def without_shortcuts() -> Iterator[None]:
    bind, need, explain = admission_bind.Binder.bind, admission_trial.Trial.need, shortfall.Shortfall.explain
    rejection = admission._Pass._static_rejection

    def rejection_afresh(self: admission._Pass, request: WorkloadRequest) -> Any:
        self.rejections.clear()
        return rejection(self, request)

    def bind_afresh(self: admission_bind.Binder, *args: Any) -> Any:
        self.failed.clear()
        return bind(self, *args)

    def need_afresh(self: admission_trial.Trial, request: WorkloadRequest) -> Any:
        self._need.clear()
        return need(self, request)

    admission_bind.Binder.bind = bind_afresh  # type: ignore[method-assign]
    admission_trial.Trial.need = need_afresh  # type: ignore[method-assign]
    shortfall.Shortfall.explain = shortfall.Shortfall._explain  # type: ignore[method-assign]
    admission._Pass._static_rejection = rejection_afresh  # type: ignore[method-assign]
    try:
        yield
    finally:
        admission_bind.Binder.bind = bind  # type: ignore[method-assign]
        admission_trial.Trial.need = need  # type: ignore[method-assign]
        shortfall.Shortfall.explain = explain  # type: ignore[method-assign]
        admission._Pass._static_rejection = rejection  # type: ignore[method-assign]


def both(
    pool: PoolState, requests: list[WorkloadRequest], previous: list[PreviousAdmission]
) -> PoolAdmission:
    fast = admit_pool(pool, requests, previous)
    with without_shortcuts():
        slow = admit_pool(pool, requests, previous)
    assert fast == slow
    return fast


@st.composite
def pools(draw: st.DrawFn) -> PoolState:
    counts = draw(
        st.lists(st.tuples(st.integers(1, 8), st.sampled_from((A100, H100))), min_size=1, max_size=5)
    )
    units = tuple(
        GpuUnit(f"uid-{h}", f"host-{h:02d}", i, family)
        for h, (n, family) in enumerate(counts)
        for i in range(n)
    )
    mode = draw(st.sampled_from(["shared", "shared", "shared", "dedicated"]))
    limits = draw(st.dictionaries(st.sampled_from((A100, H100)), st.integers(2, 12), max_size=1))
    return PoolState(("ns", "pool"), mode=mode, gpus=units, gpu_limits=limits)


SHAPES = st.tuples(
    st.dictionaries(st.sampled_from((A100, H100)), st.integers(1, 4), min_size=1, max_size=2),
    st.sampled_from([1, 1, 2, 3]),
)


@st.composite
def workloads(draw: st.DrawFn, prefix: str = "w") -> list[WorkloadRequest]:
    shapes = draw(st.lists(SHAPES, min_size=1, max_size=3))
    out = []
    for i in range(draw(st.integers(0, 24))):
        whole, replicas = draw(st.sampled_from(shapes))
        out.append(
            WorkloadRequest(
                (draw(st.sampled_from(["ns", "other"])), f"{prefix}-{i:02d}"),
                priority=draw(st.integers(0, 1)),
                whole=whole,
                suspended=draw(st.integers(0, 9)) == 0,
                replicas=replicas,
            )
        )
    return out


@settings(max_examples=150, deadline=None)
@given(pool=pools(), requests=workloads(), newcomers=workloads("new"), data=st.data())
def test_the_shortcuts_change_no_admission(
    pool: PoolState, requests: list[WorkloadRequest], newcomers: list[WorkloadRequest], data: st.DataObject
) -> None:
    first = both(pool, requests, [])
    # The next pass: some workloads change or leave, newcomers arrive, a host may leave the pool.
    second_requests = []
    for request in requests:
        what = data.draw(st.sampled_from(["keep", "keep", "grow", "shrink", "leave"]))
        if what == "grow":
            request = replace(request, whole={f: n + 1 for f, n in request.whole.items()})
        elif what == "shrink":
            request = replace(request, whole={f: max(1, n - 1) for f, n in request.whole.items()})
        if what != "leave":
            second_requests.append(request)
    hosts = sorted({u.host_uid for u in pool.gpus})
    gone = data.draw(st.sets(st.sampled_from(hosts), max_size=1))
    smaller = replace(pool, gpus=tuple(u for u in pool.gpus if u.host_uid not in gone))
    second = both(smaller, second_requests + newcomers, previous_of(first))
    both(smaller, second_requests + newcomers, previous_of(second))


@settings(max_examples=300, deadline=None)
@given(pool=pools(), shapes=st.lists(SHAPES, min_size=1, max_size=2), data=st.data())
def test_a_refused_shape_is_refused_again_exactly_while_nothing_was_freed(
    pool: PoolState, shapes: list[Any], data: st.DataObject
) -> None:
    """Binds and releases in any order (and the order search's save and restore): the binder that
    remembers refusals binds exactly as one that tries every time."""
    from reconciler.placement.binding import FreeGpus

    fast, slow = FreeGpus(pool.gpus), FreeGpus(pool.gpus)
    binders = admission_bind.Binder(fast, None), admission_bind.Binder(slow, None)
    bound: list[list[GpuUnit]] = []
    saved = fast.snapshot(), slow.snapshot(), 0
    kinds = st.sampled_from(["bind", "bind", "bind", "release", "save", "restore"])
    for n in range(data.draw(st.integers(0, 30))):
        what = data.draw(kinds)
        if what == "bind":
            whole, replicas = data.draw(st.sampled_from(shapes))
            request = WorkloadRequest(("ns", f"w{n}"), whole=whole, replicas=replicas)
            binders[1].failed.clear()
            got = [b.bind(request, []) for b in binders]
            assert got[0] == got[1]
            if got[0] is not None:
                bound.append([u for _, u in got[0][0]])
        elif what == "release" and bound:
            units = bound.pop(data.draw(st.integers(0, len(bound) - 1)))
            fast.give_back(units)
            slow.give_back(units)
        elif what == "save":
            saved = fast.snapshot(), slow.snapshot(), len(bound)
        elif what == "restore":
            fast.restore(saved[0])
            slow.restore(saved[1])
            del bound[saved[2] :]
        assert fast.free_units() == slow.free_units()
