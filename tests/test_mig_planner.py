"""MIG layouts and the exact admission planner, checked against an independent checker and brute force.

Nothing here reuses the planner's geometry: the checker below states NVIDIA's placement rules (NOTES.md
section 2.1) on its own, and the brute force enumerates layouts with it.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.model.mig import MigGpuType, entry_by_key
from reconciler.placement.mig import (
    MigInstance,
    MigPlan,
    MigRefusal,
    MigShortfall,
    PoolGpu,
    frozen_gpus,
    mig_usage,
    plan_mig_admission,
    release_idle_gpus,
    repad,
    valid_layouts,
)

A100 = entry_by_key("NVIDIA-A100-80GB")
A100_40 = entry_by_key("NVIDIA-A100-40GB")
A30 = entry_by_key("NVIDIA-A30-24GB")
PROPS = settings(max_examples=120, deadline=None)

# --- the independent checker -------------------------------------------------------------------------

# (compute slices, memory slices, allowed starts) by the shape of a profile name, from `nvidia-smi mig
# -lgipp` on a 7-slice GPU and go-nvml's A30 table. "1g-double" is the 1g with doubled memory.
SEVEN = {
    "1g": (1, 1, range(7)),
    "1g-double": (1, 2, (0, 2, 4, 6)),
    "2g": (2, 2, (0, 2, 4)),
    "3g": (3, 4, (0, 4)),
    "4g": (4, 4, (0,)),
    "7g": (7, 8, (0,)),
}
FOUR = {"1g": (1, 1, range(4)), "2g": (2, 2, (0, 2)), "4g": (4, 4, (0,))}


def geometry(gpu_type: MigGpuType, name: str) -> tuple[int, int, Sequence[int]]:
    base = name.removesuffix("+me")
    g = base.split(".")[0]
    if gpu_type.compute_slices == 4:
        return FOUR[g]
    if g == "1g":
        smallest = min(int(p.removesuffix("+me").split(".")[1].removesuffix("gb")) for p in gpu_type.profiles)
        memory = int(base.split(".")[1].removesuffix("gb"))
        return SEVEN["1g" if memory == smallest else "1g-double"]
    return SEVEN[g]


def layout_errors(gpu_type: MigGpuType, layout: Iterable[tuple[str, int]]) -> list[str]:
    """Everything wrong with a layout, by NVIDIA's rules; an empty list means valid."""
    errors: list[str] = []
    slices = 8 if gpu_type.compute_slices == 7 else 4
    used: set[int] = set()
    compute = media = 0
    for name, start in layout:
        if name not in gpu_type.profiles:
            errors.append(f"{name} is not a profile of {gpu_type.key}")
            continue
        g, size, starts = geometry(gpu_type, name)
        if start not in starts:
            errors.append(f"{name} may not start at {start}")
        span = set(range(start, start + size))
        if max(span) >= slices:
            errors.append(f"{name}@{start} runs past slice {slices - 1}")
        if span & used:
            errors.append(f"{name}@{start} overlaps")
        used |= span
        compute += g
        media += name.endswith("+me")
    if compute > gpu_type.compute_slices:
        errors.append(f"{compute} compute slices > {gpu_type.compute_slices}")
    if media > 1:
        errors.append(f"{media} +me instances")
    return errors


def uncovered(gpu_type: MigGpuType, layout: Iterable[tuple[str, int]]) -> int:
    slices = 8 if gpu_type.compute_slices == 7 else 4
    covered = {s for name, start in layout for s in range(start, start + geometry(gpu_type, name)[1])}
    return slices - len(covered)


@cache
def brute_layouts(gpu_type: MigGpuType) -> frozenset[frozenset[tuple[str, int]]]:
    """All valid layouts, by growing sets one placement at a time and keeping what the checker accepts."""
    candidates = sorted((name, s) for name in gpu_type.profiles for s in range(8))
    found: set[frozenset[tuple[str, int]]] = set()

    def grow(first: int, chosen: tuple[tuple[str, int], ...]) -> None:
        found.add(frozenset(chosen))
        for i in range(first, len(candidates)):
            bigger = (*chosen, candidates[i])
            if not layout_errors(gpu_type, bigger):
                grow(i + 1, bigger)

    grow(0, ())
    return frozenset(found)


@cache
def brute_stranded(gpu_type: MigGpuType, layout: frozenset[tuple[str, int]]) -> int:
    """Fewest uncovered slices of any valid layout that contains ``layout`` plus plain instances."""
    return min(
        uncovered(gpu_type, other)
        for other in brute_layouts(gpu_type)
        if layout <= other and all(not n.endswith("+me") for n, _ in other - layout)
    )


# --- layouts ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key", ["NVIDIA-A100-40GB", "NVIDIA-A100-80GB", "NVIDIA-H200-141GB", "NVIDIA-A30-24GB"]
)
def test_enumerated_layouts_are_exactly_the_valid_ones(key: str) -> None:
    gpu_type = entry_by_key(key)
    assert set(valid_layouts(gpu_type)) == brute_layouts(gpu_type)
    assert len(valid_layouts(gpu_type)) == len(set(valid_layouts(gpu_type)))


def _maximal_plain(gpu_type: MigGpuType) -> list[Counter[str]]:
    plain = [lay for lay in brute_layouts(gpu_type) if all(not n.endswith("+me") for n, _ in lay)]
    maximal = [lay for lay in plain if not any(lay < other for other in plain)]
    shapes = {tuple(sorted(Counter(n for n, _ in lay).items())) for lay in maximal}
    return [Counter(dict(shape)) for shape in shapes]


def test_a_seven_slice_gpu_has_38_maximal_layouts_11_without_waste() -> None:
    """NOTES.md section 2.3: 38 maximal multisets; 11 use all 7 compute and all 8 memory slices."""
    shapes = _maximal_plain(A100)
    assert len(shapes) == 38
    full = [
        s
        for s in shapes
        if sum(geometry(A100, n)[1] * c for n, c in s.items()) == 8
        and sum(geometry(A100, n)[0] * c for n, c in s.items()) == 7
    ]
    assert len(full) == 11
    assert Counter({"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}) in full  # all-balanced
    assert Counter({"1g.10gb": 7}) not in full  # all-1g.10gb strands a slice


def test_an_a30_has_four_maximal_layouts() -> None:
    shapes = _maximal_plain(A30)
    assert sorted(sorted(s.items()) for s in shapes) == sorted(
        [
            [("4g.24gb", 1)],
            [("2g.12gb", 2)],
            [("1g.6gb", 2), ("2g.12gb", 1)],
            [("1g.6gb", 4)],
        ]
    )


def test_the_checker_rejects_what_nvidia_forbids() -> None:
    assert layout_errors(A100, [("4g.40gb", 0), ("4g.40gb", 0)])
    assert layout_errors(A100, [("3g.40gb", 2)])
    assert layout_errors(A100, [("1g.10gb", 7)])
    assert layout_errors(A100, [("1g.10gb+me", 0), ("1g.10gb+me", 1)])
    assert layout_errors(A30, [("2g.12gb+me", 0), ("1g.6gb+me", 2)])
    assert layout_errors(A100, [("2g.20gb", 4), ("1g.20gb", 4)])
    assert not layout_errors(A100, [("4g.40gb", 0), ("3g.40gb", 4)])


# --- pools for the planner ----------------------------------------------------------------------------

TYPES = (A100, A100_40, A30)


@st.composite
def gpu_states(draw: st.DrawFn, host: str, index: int, gpu_type: MigGpuType) -> PoolGpu:
    kind = draw(st.sampled_from(["whole", "whole", "bound", "mig", "mig"]))
    if kind == "whole":
        return PoolGpu(host, index, gpu_type)
    if kind == "bound":
        return PoolGpu(host, index, gpu_type, bound="old/whole")
    layouts = sorted(brute_layouts(gpu_type), key=lambda lay: sorted(lay))
    layout = sorted(draw(st.sampled_from(layouts)))
    instances = tuple(
        MigInstance(start, name, draw(st.sampled_from([None, None, "old/a", "old/b"])))
        for name, start in layout
    )
    frozen = draw(st.booleans())  # an earlier workload's instance is on it (or was: it stays as it is)
    return PoolGpu(host, index, gpu_type, instances=tuple(sorted(instances)), frozen=frozen)


@st.composite
def pools(draw: st.DrawFn, max_gpus: int = 4) -> tuple[list[PoolGpu], frozenset[str], dict[str, int]]:
    n = draw(st.integers(1, max_gpus))
    mixed = draw(st.booleans())
    first = draw(st.sampled_from(TYPES))
    gpus: list[PoolGpu] = []
    for i in range(n):
        host = draw(st.sampled_from(["h-a", "h-b", "h-c"]))
        gpu_type = draw(st.sampled_from(TYPES)) if mixed else first
        gpus.append(draw(gpu_states(host, i, gpu_type)))
    frozen = frozenset(draw(st.sets(st.sampled_from(["h-a", "h-b", "h-c"]))))
    names = sorted({name for g in gpus if g.gpu_type for name in g.gpu_type.profiles} | {"9g.99gb"})
    chosen = draw(st.lists(st.sampled_from(names), min_size=1, max_size=2, unique=True))
    request = {name: draw(st.integers(1, 3)) for name in chosen}
    return gpus, frozen, request


def brute_optimum(
    gpus: Sequence[PoolGpu], frozen: frozenset[str], request: Mapping[str, int]
) -> tuple[int, int, tuple[int, ...]] | None:
    """Best (switched, stranded, instances per GPU in order) over every way to place the request."""
    names = sorted(request)
    target = tuple(request[n] for n in names)
    order = sorted(gpus, key=lambda g: (g.host, g.index))
    per_gpu: list[dict[tuple[int, ...], tuple[int, int]]] = []
    for gpu in order:
        current = frozenset((i.profile, i.start) for i in gpu.instances or ())
        here = {(0,) * len(names): (0, uncovered(gpu.gpu_type, current) if gpu.mig and gpu.gpu_type else 0)}
        choices: list[tuple[tuple[int, ...], tuple[int, int]]] = []
        is_frozen = gpu.frozen or gpu.host in frozen
        if gpu.gpu_type is not None and gpu.bound is None:
            if is_frozen and gpu.instances is not None:
                free = [i for i in gpu.instances if i.workload is None and i.profile in request]
                for k in range(1, len(free) + 1):
                    for subset in itertools.combinations(free, k):
                        counts = Counter(i.profile for i in subset)
                        choices.append((tuple(counts[n] for n in names), here[(0,) * len(names)]))
            elif not is_frozen:
                kept = frozenset((i.profile, i.start) for i in gpu.instances or () if i.workload)
                for layout in brute_layouts(gpu.gpu_type):
                    new = layout - kept
                    if not kept <= layout or not new or any(n not in request for n, _ in new):
                        continue
                    counts = Counter(n for n, _ in new)
                    cost = (0 if gpu.mig else 1, brute_stranded(gpu.gpu_type, layout))
                    choices.append((tuple(counts[n] for n in names), cost))
        for vector, cost in choices:
            if all(v <= t for v, t in zip(vector, target, strict=True)) and cost < here.get(vector, (99, 99)):
                here[vector] = cost
        per_gpu.append(here)
    best: tuple[int, int, tuple[int, ...]] | None = None
    for combo in itertools.product(*(sorted(h) for h in per_gpu)):
        if tuple(map(sum, zip(*combo, strict=True))) != target:
            continue
        switched = sum(per_gpu[i][v][0] for i, v in enumerate(combo))
        stranded = sum(per_gpu[i][v][1] for i, v in enumerate(combo))
        spread = tuple(-sum(v) for v in combo)
        key = (switched, stranded, spread)
        if best is None or key < best:
            best = key
    return None if best is None else (best[0], best[1], tuple(-x for x in best[2]))


def check_plan(
    before: Sequence[PoolGpu], frozen: frozenset[str], request: Mapping[str, int], plan: MigPlan
) -> None:
    """What every plan must satisfy, whatever it chose."""
    assert len(plan.gpus) == len(before)
    assert Counter(b.profile for b in plan.bindings) == Counter(request)
    switched = 0
    for old, new in zip(before, plan.gpus, strict=True):
        assert (old.host, old.index, old.gpu_type, old.bound) == (
            new.host,
            new.index,
            new.gpu_type,
            new.bound,
        )
        if new.instances is not None:
            assert new.gpu_type is not None
            assert layout_errors(new.gpu_type, [(i.profile, i.start) for i in new.instances]) == []
        kept = {i for i in old.instances or () if i.workload is not None}
        assert kept <= set(new.instances or ()), "a bound instance moved"
        if old.frozen or old.host in frozen:  # the layout stays; only free instances get a workload
            assert old.mig == new.mig
            assert Counter((i.profile, i.start) for i in old.instances or ()) == Counter(
                (i.profile, i.start) for i in new.instances or ()
            )
        if old.bound is not None:
            assert new.instances is None
        switched += old.instances is None and new.instances is not None
        mine = {(b.profile, b.start) for b in plan.bindings if (b.host, b.gpu) == (new.host, new.index)}
        assert mine == {(i.profile, i.start) for i in new.instances or () if i.workload == "new/w"} - {
            (i.profile, i.start) for i in old.instances or () if i.workload == "new/w"
        }
    assert plan.switched == switched
    assert plan.stranded == mig_usage(plan.gpus).stranded
    assert plan.stranded == sum(
        uncovered(g.gpu_type, [(i.profile, i.start) for i in g.instances])
        for g in plan.gpus
        if g.instances is not None and g.gpu_type is not None
    )


@PROPS
@given(pools())
def test_planner_matches_brute_force_on_small_pools(
    case: tuple[list[PoolGpu], frozenset[str], dict[str, int]],
) -> None:
    gpus, frozen, request = case
    result = plan_mig_admission(gpus, request, "new/w", frozen)
    expected = brute_optimum(gpus, frozen, request)
    offered = {name for g in gpus if g.gpu_type for name in g.gpu_type.profiles}
    if not set(request) <= offered:
        assert isinstance(result, MigRefusal) and result.reason is MigShortfall.MIG_UNSUPPORTED
        return
    if expected is None:
        assert isinstance(result, MigRefusal)
        assert result.reason in (MigShortfall.NO_FITTING_LAYOUT, MigShortfall.POOL_CAPACITY_EXCEEDED)
        assert (result.reason is MigShortfall.POOL_CAPACITY_EXCEEDED) == (
            result.needed_slices > result.free_slices
        )
        return
    assert isinstance(result, MigPlan), result
    check_plan(gpus, frozen, request, result)
    order = sorted(range(len(gpus)), key=lambda i: (gpus[i].host, gpus[i].index))
    spread = tuple(
        sum(1 for b in result.bindings if (b.host, b.gpu) == (gpus[i].host, gpus[i].index)) for i in order
    )
    assert (result.switched, result.stranded, spread) == expected


@st.composite
def sequences(draw: st.DrawFn) -> tuple[list[PoolGpu], list[dict[str, int]]]:
    gpu_type = draw(st.sampled_from(TYPES))
    n = draw(st.integers(1, 6))
    gpus = [PoolGpu(f"h-{i // 2}", i % 2, gpu_type) for i in range(n)]
    names = sorted(gpu_type.profiles)
    demands = draw(
        st.lists(
            st.dictionaries(st.sampled_from(names), st.integers(1, 3), min_size=1, max_size=2),
            min_size=1,
            max_size=6,
        )
    )
    return gpus, demands


@PROPS
@given(sequences())
def test_admitting_more_never_moves_what_is_bound_nor_a_frozen_layout(
    case: tuple[list[PoolGpu], list[dict[str, int]]],
) -> None:
    gpus, demands = case
    half = len(demands) // 2
    # First pass: nothing frozen. Second pass: the GPUs holding an instance of the first pass are frozen.
    state = tuple(replace(g, frozen=False) for g in gpus)
    for n, demand in enumerate(demands):
        if n == half:
            held = frozen_gpus(state, {f"ns/w{k}" for k in range(half)})
            state = release_idle_gpus(tuple(replace(g, frozen=(g.host, g.index) in held) for g in state))
        result = plan_mig_admission(state, demand, f"ns/w{n}")
        if isinstance(result, MigRefusal):
            continue
        for old, new in zip(state, result.gpus, strict=True):
            assert {i for i in old.instances or () if i.workload} <= set(new.instances or ())
            if old.frozen:
                assert [(i.profile, i.start) for i in old.instances or ()] == [
                    (i.profile, i.start) for i in new.instances or ()
                ]
                assert old.mig == new.mig
            if new.instances is not None:
                assert new.gpu_type is not None
                assert layout_errors(new.gpu_type, [(i.profile, i.start) for i in new.instances]) == []
        state = result.gpus


# --- examples ------------------------------------------------------------------------------------------


def whole(host: str, index: int, gpu_type: MigGpuType = A100, bound: str | None = None) -> PoolGpu:
    return PoolGpu(host, index, gpu_type, bound=bound)


def test_a_gpu_already_in_mig_mode_is_used_before_a_whole_one_is_switched() -> None:
    mig = PoolGpu("h-b", 0, A100, instances=(MigInstance(0, "4g.40gb", "old/x"),))
    plan = plan_mig_admission([whole("h-a", 0), mig], {"2g.20gb": 1}, "new/w")
    assert isinstance(plan, MigPlan)
    assert plan.switched == 0
    assert [(b.host, b.profile) for b in plan.bindings] == [("h-b", "2g.20gb")]


def test_ties_go_to_the_lowest_host_name_and_gpu_index() -> None:
    gpus = [whole("h-b", 0), whole("h-a", 1), whole("h-a", 0)]
    plan = plan_mig_admission(gpus, {"3g.40gb": 1}, "new/w")
    assert isinstance(plan, MigPlan)
    assert [(b.host, b.gpu) for b in plan.bindings] == [("h-a", 0)]


def test_host_name_orders_ties_when_the_host_is_a_uid() -> None:
    gpus = [PoolGpu("uid-1", 0, A100, host_name="zeta"), PoolGpu("uid-2", 0, A100, host_name="alpha")]
    plan = plan_mig_admission(gpus, {"7g.80gb": 1}, "new/w")
    assert isinstance(plan, MigPlan)
    assert plan.bindings[0].host == "uid-2"


def test_small_instances_leave_room_for_a_4g_and_strand_nothing() -> None:
    plan = plan_mig_admission([whole("h-a", 0)], {"1g.10gb": 2}, "new/w")
    assert isinstance(plan, MigPlan)
    assert plan.stranded == 0
    after = plan_mig_admission(plan.gpus, {"4g.40gb": 1}, "new/v")
    assert isinstance(after, MigPlan) and after.switched == 0


def test_seven_1g_instances_strand_one_slice() -> None:
    plan = plan_mig_admission([whole("h-a", 0)], {"1g.10gb": 7}, "new/w")
    assert isinstance(plan, MigPlan)
    assert plan.stranded == 1


def test_the_free_space_of_a_new_layout_is_filled_with_free_instances() -> None:
    plan = plan_mig_admission([whole("h-a", 0)], {"3g.40gb": 1}, "new/w")
    assert isinstance(plan, MigPlan)
    (gpu,) = plan.gpus
    assert gpu.instances is not None
    assert [i.workload for i in gpu.instances].count(None) >= 1
    assert mig_usage(plan.gpus).stranded == 0


def test_a_frozen_host_offers_only_its_free_instances() -> None:
    layout = (MigInstance(0, "4g.40gb", "old/x"), MigInstance(4, "3g.40gb", None))
    gpus = [PoolGpu("h-a", 0, A100, instances=layout), whole("h-a", 1)]
    refused = plan_mig_admission(gpus, {"2g.20gb": 1}, "new/w", frozenset({"h-a"}))
    assert isinstance(refused, MigRefusal) and refused.reason is MigShortfall.NO_FITTING_LAYOUT
    plan = plan_mig_admission(gpus, {"3g.40gb": 1}, "new/w", frozenset({"h-a"}))
    assert isinstance(plan, MigPlan)
    assert plan.gpus[0].instances == (MigInstance(0, "4g.40gb", "old/x"), MigInstance(4, "3g.40gb", "new/w"))


def test_not_enough_slices_is_pool_capacity_exceeded() -> None:
    refused = plan_mig_admission([whole("h-a", 0), whole("h-a", 1, bound="old/x")], {"3g.40gb": 3}, "new/w")
    assert isinstance(refused, MigRefusal)
    assert refused.reason is MigShortfall.POOL_CAPACITY_EXCEEDED
    assert (refused.needed_slices, refused.free_slices) == (12, 8)


def test_enough_slices_but_no_layout_is_no_fitting_layout() -> None:
    refused = plan_mig_admission([whole("h-a", 0)], {"4g.40gb": 2}, "new/w")
    assert isinstance(refused, MigRefusal) and refused.reason is MigShortfall.NO_FITTING_LAYOUT


def test_a_profile_of_another_model_is_mig_unsupported() -> None:
    refused = plan_mig_admission([whole("h-a", 0)], {"1g.5gb": 1}, "new/w")
    assert isinstance(refused, MigRefusal) and refused.reason is MigShortfall.MIG_UNSUPPORTED
    assert "1g.5gb" in refused.message
    no_mig = plan_mig_admission([PoolGpu("h-a", 0, None)], {"1g.10gb": 1}, "new/w")
    assert isinstance(no_mig, MigRefusal) and no_mig.reason is MigShortfall.MIG_UNSUPPORTED


def test_at_most_one_media_extension_instance_per_gpu() -> None:
    plan = plan_mig_admission([whole("h-a", 0), whole("h-a", 1)], {"1g.10gb+me": 2}, "new/w")
    assert isinstance(plan, MigPlan)
    assert sorted((b.host, b.gpu) for b in plan.bindings) == [("h-a", 0), ("h-a", 1)]


def test_idle_layouts_return_to_whole_except_frozen_ones() -> None:
    idle = (MigInstance(0, "3g.40gb", None), MigInstance(4, "3g.40gb", None))
    busy = (MigInstance(0, "3g.40gb", "old/x"), MigInstance(4, "3g.40gb", None))
    gpus = [
        PoolGpu("h-a", 0, A100, instances=idle),
        PoolGpu("h-a", 1, A100, instances=busy),
        PoolGpu("h-a", 2, A100, instances=idle, frozen=True),
        PoolGpu("h-b", 0, A100, instances=idle),
    ]
    after = release_idle_gpus(gpus, frozenset({"h-b"}))
    assert [g.instances for g in after] == [None, busy, idle, idle]


def test_a_gpu_is_frozen_when_an_earlier_workload_holds_one_of_its_instances() -> None:
    gpus = [
        PoolGpu("h-a", 0, A100, bound="old/x"),
        PoolGpu("h-b", 0, A100, instances=(MigInstance(0, "3g.40gb", "old/y"), MigInstance(4, "3g.40gb"))),
        PoolGpu("h-b", 1, A100, instances=(MigInstance(0, "7g.80gb", None),)),
        PoolGpu("h-b", 2, A100),
        PoolGpu("h-c", 0, A100, instances=(MigInstance(0, "7g.80gb", "new/z"),)),
    ]
    assert frozen_gpus(gpus, {"old/x", "old/y"}) == {("h-b", 0)}


def test_an_idle_gpu_beside_a_frozen_one_on_the_same_host_may_be_switched() -> None:
    frozen = PoolGpu(
        "h-a", 0, A100, instances=(MigInstance(0, "3g.40gb", "old/x"), MigInstance(4, "4g.40gb")), frozen=True
    )
    idle = PoolGpu("h-a", 1, A100, instances=(MigInstance(0, "7g.80gb"),))
    plan = plan_mig_admission([frozen, idle, whole("h-a", 2)], {"3g.40gb": 2}, "new/w")
    assert isinstance(plan, MigPlan)
    assert plan.gpus[0] == frozen  # its free 4g stays a 4g
    assert {(b.host, b.gpu) for b in plan.bindings} == {("h-a", 1)}  # re-laid out, no GPU switched
    assert plan.switched == 0 and plan.changed == (1,)


@PROPS
@given(pools(max_gpus=3))
def test_growth_is_the_fewest_new_gpus_with_which_the_request_fits(
    case: tuple[list[PoolGpu], frozenset[str], dict[str, int]],
) -> None:
    gpus, frozen, request = case
    grow = next((t for t in TYPES if all(t.profile(name) for name in request)), None)
    result = plan_mig_admission(gpus, request, "new/w", frozen, growth_type=grow)
    if grow is None or not isinstance(result, MigRefusal) or result.reason is MigShortfall.MIG_UNSUPPORTED:
        return
    fits = next(
        (
            k
            for k in range(1, sum(request.values()) + 1)
            if isinstance(
                plan_mig_admission(
                    gpus + [PoolGpu("zz-new", i, grow) for i in range(k)], request, "new/w", frozen
                ),
                MigPlan,
            )
        ),
        None,
    )
    assert result.growth == fits
    assert all(0 <= n <= request[name] for name, n in result.room)


def test_repad_keeps_bound_instances_and_pads_with_asked_for_profiles_stranding_no_more() -> None:
    bound = (MigInstance(4, "3g.40gb", "new/w"),)
    layout = (MigInstance(0, "4g.40gb"), *bound)
    laid = PoolGpu("h-a", 0, A100, instances=layout)
    frozen = PoolGpu("h-a", 1, A100, instances=layout, frozen=True)
    other = PoolGpu("h-a", 2, A100, instances=layout)
    after = repad([laid, frozen, other], {"3g.40gb": 5, "1g.10gb": 1}, {("h-a", 0), ("h-a", 1)})
    assert after[0].instances == (MigInstance(0, "3g.40gb"), *bound)
    assert after[1:] == (frozen, other)  # frozen, or not asked for: as they were
    assert mig_usage(after).stranded == mig_usage([laid, frozen, other]).stranded
    nothing_asked = repad([laid], {}, {("h-a", 0)})
    assert nothing_asked == (laid,)
