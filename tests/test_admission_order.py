"""Which new workloads of one priority are admitted: name order is a tie-break, not a reason to leave
capacity unused (reconciler/placement/order.py through admit_pool)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import reconciler.placement.admission_trial as admission_trial
import reconciler.placement.order as order
from reconciler.model.pools import MigRequest, WorkloadRequest
from reconciler.placement.admission import admit_pool
from reconciler.placement.admission_types import PoolAdmission, PoolState
from reconciler.placement.mig_admission import PoolMigPlanner
from reconciler.placement.units import gpu_units
from tests._admission_support import A100, HOLDING, actions, bound, hosts, previous_of, shared, want
from tests.test_mig_admission import a100_hosts


def test_equal_priority_admits_more_when_name_order_leaves_capacity_unused() -> None:
    # Name order binds a-big (6 of 8) and leaves 2 GPUs idle; b and c (4 each) fill the host.
    result = admit_pool(shared(hosts(8)), [want("a-big", 6), want("b", 4), want("c", 4)])
    assert actions(result) == {"a-big": "pending", "b": "admit", "c": "admit"}
    assert result.workloads[("project-a", "a-big")].position == 1


def test_equal_count_keeps_exactly_what_name_order_gives() -> None:
    # Name order: a (6) then c (2); b and c (6 together) would admit 2 as well: name order stays.
    result = admit_pool(shared(hosts(8)), [want("c", 2), want("b", 4), want("a", 6)])
    assert actions(result) == {"a": "admit", "b": "pending", "c": "admit"}
    assert bound(result, "a") == [("host-0", i) for i in range(6)]
    tie = admit_pool(shared(hosts(4)), [want("b", 4), want("a", 4)])
    assert actions(tie) == {"a": "admit", "b": "pending"}


def test_small_replicas_fill_the_leftovers_where_the_smallest_in_all_do_not_bind() -> None:
    """Name order admits w0 (8 x 2, both hosts of 8) and w1 (3 x 3): 2. The four smallest in all (w2 5,
    w3 6, w4 3 x 2, w5 6) need three hosts of 5 or more where there are two: three of them bind. The
    four narrowest replicas (w1 3 x 3, w4 3 x 2, w2 5, w3 6) fill the hosts of 3 and 4 and leave the two
    8s to w2 and w3: 4."""
    ws = [
        WorkloadRequest(("project-a", name), whole={A100: n}, replicas=r)
        for name, n, r in (("w0", 8, 2), ("w1", 3, 3), ("w2", 5, 1), ("w3", 6, 1), ("w4", 3, 2), ("w5", 6, 1))
    ]
    ws.append(WorkloadRequest(("project-a", "w6"), whole={A100: 6}, replicas=2))
    result = admit_pool(shared(hosts(3, 4, 8, 3, 8, 3)), ws)
    assert {k for k, a in actions(result).items() if a == "admit"} == {"w1", "w2", "w3", "w4"}


def test_a_higher_priority_is_never_given_up_for_more_lower_priority_admissions() -> None:
    requests = [want("z-urgent", 8, priority=5), want("a", 4), want("b", 4)]
    result = admit_pool(shared(hosts(8)), requests)
    assert actions(result) == {"a": "pending", "b": "pending", "z-urgent": "admit"}
    # Within the higher priority the same rule applies, before the lower one is looked at.
    requests = [
        want("a-big", 6, priority=1),
        want("b", 4, priority=1),
        want("c", 4, priority=1),
        want("d", 2),
    ]
    assert actions(admit_pool(shared(hosts(8)), requests)) == {
        "a-big": "pending",
        "b": "admit",
        "c": "admit",
        "d": "pending",
    }


def test_sticky_admissions_are_never_moved_to_admit_more_newcomers() -> None:
    pool = shared(hosts(8))
    first = admit_pool(pool, [want("a-big", 6)])
    again = admit_pool(pool, [want("a-big", 6), want("b", 4), want("c", 4), want("d", 2)], previous_of(first))
    assert actions(again) == {"a-big": "admitted", "b": "pending", "c": "pending", "d": "admit"}
    assert bound(again, "a-big") == bound(first, "a-big")


def test_mig_equal_priority_admits_more_than_name_order() -> None:
    pool = PoolState(
        ("project-a", "shared-a100"), gpus=gpu_units(a100_hosts(1, gpus=1)), mig_strategy="mixed"
    )
    requests = [
        want("a-full", mig=(MigRequest(A100, "7g.80gb", 1),)),
        want("b-half", mig=(MigRequest(A100, "3g.40gb", 1),)),
        want("c-half", mig=(MigRequest(A100, "3g.40gb", 1),)),
    ]
    result = admit_pool(pool, requests, (), PoolMigPlanner(pool, (), (), requests))
    assert actions(result) == {"a-full": "pending", "b-half": "admit", "c-half": "admit"}
    assert result.workloads[("project-a", "a-full")].reason is not None


# --- properties ------------------------------------------------------------------------------------------


@st.composite
def overloaded(draw: st.DrawFn) -> tuple[list[int], list[WorkloadRequest]]:
    sizes = draw(st.lists(st.sampled_from([2, 4, 8]), min_size=1, max_size=4))
    names = draw(st.lists(st.text("abcdefghij", min_size=1, max_size=2), unique=True, min_size=1, max_size=9))
    requests = [
        want(
            n,
            draw(st.integers(1, 6)),
            priority=draw(st.integers(0, 1)),
            replicas=draw(st.sampled_from([1, 1, 2])),
            ns=draw(st.sampled_from(["project-a", "project-b"])),
        )
        for n in names
    ]
    return sizes, requests


def admitted_by_priority(result: PoolAdmission, requests: Sequence[WorkloadRequest]) -> list[set[str]]:
    levels = sorted({r.priority for r in requests}, reverse=True)
    held = {k for k, d in result.workloads.items() if d.action in HOLDING}
    return [{r.label for r in requests if r.priority == p and r.key in held} for p in levels]


@settings(max_examples=150, deadline=None)
@given(case=overloaded(), data=st.data())
def test_priorities_are_lexicographic_and_name_order_wins_ties(
    case: tuple[list[int], list[WorkloadRequest]], data: st.DataObject
) -> None:
    sizes, requests = case
    pool = shared(hosts(*sizes))
    result = admit_pool(pool, requests)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(admission_trial, "_SEARCH_BUDGET", 0)  # no search: name order, the rule before
        name_order = admit_pool(pool, requests)
    mine, theirs = admitted_by_priority(result, requests), admitted_by_priority(name_order, requests)
    for got, reference in zip(mine, theirs, strict=True):
        if got != reference:  # the first priority that differs admits strictly more
            assert len(got) > len(reference)
            break
    else:
        assert result == name_order
    # Never two workloads on one GPU, never more than a host has.
    used = Counter(u.ref for d in result.workloads.values() for u in d.gpus)
    assert all(n == 1 for n in used.values())
    # Deterministic whatever the order of the files.
    assert admit_pool(pool, data.draw(st.permutations(requests))) == result


# --- the search alone, on a toy state ---------------------------------------------------------------------


class Bins:
    """Items of a size into bins, best fit: the smallest free space that holds it, ties by bin index."""

    def __init__(self, *sizes: int) -> None:
        self.free = list(sizes)
        self.attempts = 0
        self.log: list[object] = []

    def attempt(self, item: tuple[str, int]) -> object | None:
        self.attempts += 1
        fitting = [(f, b) for b, f in enumerate(self.free) if f >= item[1]]
        if not fitting:
            return None
        _, b = min(fitting)
        self.free[b] -= item[1]
        return b, item[1]

    def undo(self, token: object) -> None:
        assert isinstance(token, tuple)
        b, size = token
        self.free[b] += size

    def bind(self, item: tuple[str, int]) -> bool:
        token = self.attempt(item)
        if token is not None:
            self.log.append(token)
        return token is not None

    def mark(self) -> object:
        return len(self.log)

    def back(self, mark: object) -> None:
        assert isinstance(mark, int)
        while len(self.log) > mark:
            self.undo(self.log.pop())

    def room(self) -> Mapping[Hashable, int]:
        return {"gpu": sum(self.free)}

    def fits(self, item: tuple[str, int]) -> bool:
        return any(f >= item[1] for f in self.free)

    def save(self) -> object:
        return list(self.free), list(self.log)

    def restore(self, saved: object) -> None:
        assert isinstance(saved, tuple)
        self.free, self.log = list(saved[0]), list(saved[1])


def choose_in(bins: Bins, items: list[tuple[str, int]], budget: int = 100) -> order.Choice[tuple[str, int]]:
    return order.choose(
        items, lambda i: ("gpu", i[1], i[1]) if bins.fits(i) else None, lambda i: i[1], bins, budget
    )


def test_choose_keeps_name_order_when_it_admits_all_or_as_many_as_the_bound() -> None:
    bins = Bins(8)
    choice = choose_in(bins, [("a", 4), ("b", 4)])
    assert (choice.admitted, choice.name_order, choice.attempts, bins.free) == (
        (("a", 4), ("b", 4)),
        True,
        2,
        [0],
    )
    bins = Bins(8)
    assert choose_in(bins, [("a", 6), ("b", 4), ("c", 2)]).admitted == (("a", 6), ("c", 2))  # 2 = the bound


def test_choose_leaves_the_state_as_its_choice_and_a_zero_budget_is_name_order() -> None:
    items = [("a", 6), ("b", 4), ("c", 4)]
    bins = Bins(8)
    choice = choose_in(bins, items)
    assert (set(choice.admitted), choice.name_order, bins.free) == ({("b", 4), ("c", 4)}, False, [0])
    bins = Bins(8)
    choice = choose_in(bins, items, budget=0)
    assert (choice.admitted, choice.name_order, bins.free) == ((("a", 6),), True, [2])


def test_choose_binds_the_largest_first_so_a_tight_packing_is_found() -> None:
    # Name order: a into the 4 (3 left), b there too (1 left), c into the 5, d finds no room: 3 of 4.
    # Largest first: 3 into the 4, 3 into the 5, then 2 and 1 fill what is left: all 4.
    bins = Bins(4, 5)
    choice = choose_in(bins, [("a", 1), ("b", 2), ("c", 3), ("d", 3)])
    assert (len(choice.admitted), choice.name_order, bins.free) == (4, False, [0, 0])
