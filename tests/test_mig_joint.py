"""Joint MIG planning of a pass (reconciler.placement.mig_joint): pure rules, hypothesis properties."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from reconciler.model.mig import entry_by_key
from reconciler.placement.mig import MigInstance, PoolGpu, is_valid_layout, stranded_slices
from reconciler.placement.mig_joint import WHOLE_GPUS, fewest, greedy_pass, is_free, plan_pass, used_gpus

A100 = entry_by_key("NVIDIA-A100-80GB")
PROFILES = ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")


def whole_pool(n: int) -> tuple[PoolGpu, ...]:
    return tuple(PoolGpu(f"host-{k // 8}", k % 8, A100) for k in range(n))


def bound_instances(gpus: tuple[PoolGpu, ...]) -> Counter[tuple[str, int, int, str, str]]:
    return Counter(
        (g.host, g.index, i.start, i.profile, i.workload)
        for g in gpus
        for i in g.instances or ()
        if i.workload is not None
    )


def test_joint_plan_puts_a_1g_2g_3g_on_one_gpu_where_the_greedy_takes_two() -> None:
    requests = [("ns/a", {"1g.10gb": 1}), ("ns/b", {"2g.20gb": 1}), ("ns/c", {"3g.40gb": 1})]
    greedy = greedy_pass(whole_pool(8), requests)
    joint = plan_pass(whole_pool(8), requests)
    assert (used_gpus(greedy.gpus), used_gpus(joint.gpus)) == (2, 1)
    assert joint.method == "joint" and joint.admitted == ("ns/a", "ns/b", "ns/c")
    (used,) = [g for g in joint.gpus if g.instances]
    assert {i.workload for i in used.instances or ()} - {None} == {"ns/a", "ns/b", "ns/c"}


LATER_HOST = [("ns/a", {"7g.80gb": 1}), ("ns/b", {"1g.20gb": 4}), ("ns/c", {"7g.80gb": 1})]
LATER_HOST += [("ns/d", {"1g.20gb": 4}), ("ns/e", {"4g.40gb": 5}), ("ns/f", {"1g.20gb": 4})]
LATER_HOST += [("ns/g", {"4g.40gb": 4})]


def test_a_host_filled_first_does_not_take_what_a_later_host_needs() -> None:
    """Three hosts: filled one after the other, the first takes the 5 x 4g, the three 4 x 1g.20gb and both
    7g (8 GPUs) and the 4 x 4g take 4 more; the optimum (11) keeps a 4 x 1g.20gb beside the 4 x 4g."""
    requests = LATER_HOST
    joint = plan_pass(whole_pool(24), requests)
    assert joint.method == "joint" and len(joint.admitted) == 7
    assert used_gpus(joint.gpus) == 11


def test_without_a_node_budget_the_greedy_answer_stands() -> None:
    requests = [("ns/a", {"1g.10gb": 1}), ("ns/b", {"2g.20gb": 1}), ("ns/c", {"3g.40gb": 1})]
    assert plan_pass(whole_pool(8), requests, node_limit=0) == greedy_pass(whole_pool(8), requests)


def test_frozen_and_bound_gpus_are_not_free() -> None:
    held = PoolGpu("h", 0, A100, instances=(MigInstance(0, "3g.40gb", "old/x"),))
    assert not is_free(held)
    assert not is_free(PoolGpu("h", 1, A100, bound="old/y"))
    assert not is_free(PoolGpu("h", 2, A100, instances=(MigInstance(0, "7g.80gb"),), frozen=True))
    assert not is_free(PoolGpu("h", 3, None))
    assert is_free(PoolGpu("h", 4, A100, instances=(MigInstance(0, "7g.80gb"),)))


def held(gpus: tuple[PoolGpu, ...]) -> int:
    """GPUs holding a bound instance or bound whole."""
    return sum(1 for g in gpus if g.bound is not None or any(i.workload for i in g.instances or ()))


@st.composite
def passes(
    draw: st.DrawFn, mixed: bool = False
) -> tuple[tuple[PoolGpu, ...], list[tuple[str, dict[str, int]]]]:
    """GPUs of 1-2 hosts (free, bound whole, holding an instance, frozen, and with ``mixed`` without MIG)
    and requests of 1-2 profiles; with ``mixed``, some take 1-3 whole GPUs on their host too."""
    gpus = list(whole_pool(8 * draw(st.integers(1, 2))))
    kinds = ("whole", "whole", "bound", "held", "frozen") + (("plain",) if mixed else ())
    for k in range(len(gpus)):
        kind = draw(st.sampled_from(kinds))
        if kind == "plain":
            gpus[k] = PoolGpu(gpus[k].host, gpus[k].index, None)
        elif kind == "bound":
            gpus[k] = PoolGpu(gpus[k].host, gpus[k].index, A100, bound=f"old/w{k}")
        elif kind == "held":
            instances = (MigInstance(0, "3g.40gb", f"old/m{k}"), MigInstance(4, "2g.20gb"))
            gpus[k] = PoolGpu(gpus[k].host, gpus[k].index, A100, instances=instances)
        elif kind == "frozen":
            instances = (MigInstance(0, "4g.40gb"), MigInstance(4, "1g.10gb"), MigInstance(5, "1g.10gb"))
            gpus[k] = PoolGpu(gpus[k].host, gpus[k].index, A100, instances=instances, frozen=True)
    requests = []
    for n in range(draw(st.integers(1, 8))):
        names = draw(st.lists(st.sampled_from(PROFILES), min_size=1, max_size=2, unique=True))
        request = {name: draw(st.integers(1, 3)) for name in names}
        if mixed and draw(st.booleans()):
            request[WHOLE_GPUS] = draw(st.integers(1, 3))
        requests.append((f"ns/w{n}", request))
    return tuple(gpus), requests


@settings(max_examples=80, deadline=None)
@given(st.booleans().flatmap(lambda mixed: passes(mixed)))
@example((whole_pool(24), LATER_HOST))  # all sites in one program
def test_joint_plan_keeps_bound_instances_uses_no_more_gpus_and_is_deterministic(
    case: tuple[tuple[PoolGpu, ...], list[tuple[str, dict[str, int]]]],
) -> None:
    """MIG-only requests, or some with whole GPUs beside their instances (mixed demand)."""
    gpus, requests = case
    greedy = greedy_pass(gpus, requests)
    joint = plan_pass(gpus, requests)
    assert plan_pass(gpus, requests) == joint  # same input, same layout
    assert held(joint.gpus) <= held(greedy.gpus)
    assert (joint.admitted, joint.pending) == (greedy.admitted, greedy.pending)
    before = bound_instances(gpus)
    after = bound_instances(joint.gpus)
    assert after & before == before  # every bound instance is still there, bound to the same workload
    for old, new in zip(gpus, joint.gpus, strict=True):
        if old.bound is not None or old.frozen:
            assert (new.bound, new.frozen) == (old.bound, old.frozen)
            if old.frozen:
                assert [(i.start, i.profile) for i in new.instances or ()] == [
                    (i.start, i.profile) for i in old.instances or ()
                ]
        if new.instances is not None and new.gpu_type is not None:
            assert is_valid_layout(new.gpu_type, [(i.profile, i.start) for i in new.instances])
    got: Counter[tuple[str, str]] = Counter()
    for g in joint.gpus:
        got.update((i.workload, i.profile) for i in g.instances or () if (i.workload or "")[:3] == "ns/")
    admitted = [(label, r) for label, r in requests if label in joint.admitted]
    wanted = Counter({(label, p): n for label, r in admitted for p, n in r.items() if p != WHOLE_GPUS})
    assert got == wanted
    taken = Counter(new.bound for old, new in zip(gpus, joint.gpus, strict=True) if new.bound != old.bound)
    assert taken == Counter({label: r[WHOLE_GPUS] for label, r in admitted if WHOLE_GPUS in r})
    for label, _ in admitted:  # a replica's whole GPUs and instances on one host
        hosts = {
            g.host
            for g in joint.gpus
            if g.bound == label or any(i.workload == label for i in g.instances or ())
        }
        assert len(hosts) == 1


def test_the_joint_planner_prints_nothing_on_standard_output(capfd: pytest.CaptureFixture[str]) -> None:
    """HiGHS's start-up banner goes to file descriptor 1; run in a fresh process so it is the first
    solver built there, and capture at descriptor level."""
    code = (
        "from reconciler.model.mig import entry_by_key\n"
        "from reconciler.placement.mig import PoolGpu\n"
        "from reconciler.placement.mig_joint import plan_pass\n"
        "a100 = entry_by_key('NVIDIA-A100-80GB')\n"
        "gpus = tuple(PoolGpu('h', k, a100) for k in range(8))\n"
        "reqs = [('ns/a', {'1g.10gb': 1}), ('ns/b', {'2g.20gb': 1}), ('ns/c', {'3g.40gb': 1})]\n"
        "assert plan_pass(gpus, reqs).method == 'joint'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], check=False)
    plan_pass(whole_pool(8), [("ns/a", {"1g.10gb": 1}), ("ns/b", {"2g.20gb": 1})])
    out, _ = capfd.readouterr()
    assert done.returncode == 0
    assert out == ""


def _cost(start: tuple[PoolGpu, ...], after: tuple[PoolGpu, ...]) -> tuple[int, int]:
    """GPUs a plan starts using and the slices they strand, restated here."""
    new = [
        g
        for g0, g in zip(start, after, strict=True)
        if any(i.workload for i in g.instances or ()) and not any(i.workload for i in g0.instances or ())
    ]
    return len(new), sum(stranded_slices(g) for g in new)


@settings(max_examples=60, deadline=None)
@given(passes())
def test_the_cheap_bound_is_never_above_what_a_plan_costs(
    case: tuple[tuple[PoolGpu, ...], list[tuple[str, dict[str, int]]]],
) -> None:
    """``fewest`` (GPUs, then stranded slices) may skip the programs only because no plan does better:
    it is at most the cost of the greedy's and the joint plan's answers, the pool as one site or not."""
    gpus, requests = case
    for one_host in (True, False):
        greedy = greedy_pass(gpus, requests, one_host=one_host)
        for plan in (greedy, plan_pass(gpus, requests, one_host=one_host)):
            asked: Counter[str] = Counter()
            for label, request in requests:
                if label in plan.admitted:
                    asked.update(request)
            assert fewest(gpus, asked) <= _cost(gpus, plan.gpus)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 2),
    st.lists(
        st.dictionaries(st.sampled_from(PROFILES), st.integers(1, 4), min_size=1, max_size=2),
        min_size=1,
        max_size=10,
    ),
)
def test_the_cheap_bound_on_whole_gpus_counts_stranded_slices_no_plan_avoids(
    hosts: int, asks: list[dict[str, int]]
) -> None:
    gpus = whole_pool(8 * hosts)
    requests = [(f"ns/w{n}", ask) for n, ask in enumerate(asks)]
    plan = plan_pass(gpus, requests, one_host=False)
    asked: Counter[str] = Counter()
    for label, request in requests:
        if label in plan.admitted:
            asked.update(request)
    assert fewest(gpus, asked) <= _cost(gpus, plan.gpus)
    assert fewest(gpus, Counter({"1g.10gb": 7})) == (1, 1)  # 7 x 1g.10gb leave slice 8 uncovered
