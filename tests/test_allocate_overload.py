"""New platforms under overload: within one priority the (namespace, name) order is only a tie-break; a
bounded, deterministic search places more when it can and never changes anything when it cannot (pure)."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from reconciler.allocate import Allocation, Rejection, place
from reconciler.model.resources import MLPlatform
from reconciler.placement import platform_order
from reconciler.placement.platform_order import Better, Budget, Usage, better_order
from tests._allocate_support import cps, desired, inventory, machine, platform

H100 = "NVIDIA-H100"


def prioritised(name: str, gpus: int, priority: int = 0, **kw: Any) -> MLPlatform:
    base = platform(name, {H100: gpus}, **kw)
    return base.model_copy(update={"spec": base.spec.model_copy(update={"priority": priority})})


def placed(platforms: list[MLPlatform], hosts: list[int], control_planes: int = 40) -> list[str]:
    machines = [*cps(control_planes), *(machine(f"g{i:02d}", n) for i, n in enumerate(hosts))]
    decisions = place(desired(*platforms), inventory(machines), []).platforms
    return sorted(name for (_, name), d in decisions.items() if isinstance(d, Allocation))


class Knapsack:
    """A placer over one resource: each platform takes its size of a capacity; counts its attempts."""

    def __init__(self, capacity: int, sizes: dict[str, int]) -> None:
        self.capacity, self.sizes, self.used, self.attempts = capacity, sizes, 0, 0

    def place(self, ident: str) -> Usage | None:
        self.attempts += 1
        if self.used + self.sizes[ident] > self.capacity:
            return None
        self.used += self.sizes[ident]
        return {"gpus": float(self.sizes[ident])}

    def mark(self) -> object:
        return self.used

    def restore(self, mark: object) -> None:
        assert isinstance(mark, int)
        self.used = mark


def first_come(sack: Knapsack, idents: list[str]) -> list[str]:
    fit = [i for i in idents if sack.place(i) is not None]
    sack.used, sack.attempts = 0, 0
    return fit


def search(
    sizes: dict[str, int], capacity: int, budget: Budget = Budget()
) -> tuple[list[str] | None, Knapsack]:
    """The order found (or None); the placer is back at the start unless the search says it holds it."""
    sack = Knapsack(capacity, sizes)
    idents = sorted(sizes)
    usage = {i: {"gpus": float(n)} for i, n in sizes.items()}
    found = better_order(idents, first_come(sack, idents), usage, {"gpus": float(capacity)}, sack, budget)
    if found is not None and found.in_place:
        held, attempts = sack.used, sack.attempts
        sack.restore(0)
        assert held == sum(sizes[i] for i in found.order if sack.place(i) is not None)
        sack.restore(0)
        sack.attempts = attempts
    assert sack.used == 0
    return (None if found is None else found.order), sack


def test_a_large_group_places_more_when_the_name_order_strands_capacity() -> None:
    """20 hosts of 8 GPUs; by name four 12-GPU asks come first and take two hosts each: 16 placed.
    Smallest first places all sixteen 8-GPU asks and two of the 12s: 18."""
    big = [prioritised(f"a{i}", 12) for i in range(4)]
    small = [prioritised(f"b{i:02d}", 8) for i in range(16)]
    got = placed([*big, *small], [8] * 20)
    assert len(got) == 18
    assert set(got) >= {p.metadata.name for p in small}


def test_a_small_group_is_searched_exactly() -> None:
    got = placed([prioritised("a", 12), prioritised("b", 4), prioritised("c", 8)], [8, 8])
    assert got == ["b", "c"]


def test_equal_count_keeps_the_name_order_exactly() -> None:
    """Ten 8-GPU hosts and twenty 6-GPU asks: any ten fit, so the first ten by name are placed, on the
    hosts the name order gives them."""
    platforms = [prioritised(f"p{i:02d}", 6) for i in range(20)]
    machines = [*cps(20), *(machine(f"g{i:02d}", 8) for i in range(10))]
    decisions = place(desired(*platforms), inventory(machines), []).platforms
    allocated = {name: d for (_, name), d in decisions.items() if isinstance(d, Allocation)}
    assert sorted(allocated) == [f"p{i:02d}" for i in range(10)]
    assert [allocated[f"p{i:02d}"].workers for i in range(10)] == [(f"g{i:02d}",) for i in range(10)]
    by_name = sorted(f"cp-{i}" for i in range(20))[:10]
    assert [allocated[f"p{i:02d}"].control_plane for i in range(10)] == [(cp,) for cp in by_name]


def test_a_smaller_set_is_never_traded_for_a_different_one_of_the_same_size() -> None:
    got = placed([prioritised("a", 8), prioritised("b", 4), prioritised("c", 4)], [8])
    assert got == ["a"]


def test_a_higher_priority_is_never_given_up_for_more_of_a_lower_one() -> None:
    """The high-priority 12 takes two of three 8-GPU hosts; three low 8s would fit without it."""
    low = [prioritised(f"low{i}", 8) for i in range(3)]
    got = placed([prioritised("high", 12, priority=1), *low], [8, 8, 8])
    assert got == ["high", "low0"]
    more_low = [prioritised(f"low{i:02d}", 8) for i in range(18)]
    high = [prioritised(f"high{i}", 12, priority=1) for i in range(2)]
    got = placed([*high, *more_low], [8] * 20)
    assert {"high0", "high1"} <= set(got) and len(got) == 18


def test_the_placement_is_deterministic_whatever_the_input_order() -> None:
    platforms = [prioritised(f"a{i}", 12) for i in range(4)] + [
        prioritised(f"b{i:02d}", 8) for i in range(16)
    ]
    machines = [*cps(40), *(machine(f"g{i:02d}", 8) for i in range(20))]
    one = place(desired(*platforms), inventory(machines), []).platforms
    two = place(desired(*reversed(platforms)), inventory(list(reversed(machines))), []).platforms
    assert one == two


def test_the_search_finds_a_fuller_set_and_comes_back() -> None:
    found, _ = search({"a": 6, "b": 5, "c": 5}, 10)
    assert found == ["b", "c"]


def test_no_search_when_the_name_order_is_already_the_most_the_supply_allows() -> None:
    found, sack = search({f"p{i:02d}": 5 for i in range(30)}, 52)
    assert found is None and sack.attempts == 0


def test_the_budget_counts_placement_attempts_and_is_never_exceeded() -> None:
    sizes = {f"p{i:02d}": n for i, n in enumerate([9, 7, 7, 5, 5, 4, 4, 3, 3, 2] * 3)}
    for attempts in (0, 1, 7, 40, 500):
        _, sack = search(sizes, 30, Budget(attempts=attempts))
        assert sack.attempts <= attempts
    assert search(sizes, 30, Budget(attempts=0))[0] is None


def test_the_search_is_deterministic() -> None:
    sizes = {f"p{i:02d}": n for i, n in enumerate([9, 7, 7, 5, 5, 4, 4, 3, 3, 2] * 3)}
    first, sack = search(sizes, 30, Budget(attempts=3000))
    assert first is not None and first == search(sizes, 30, Budget(attempts=3000))[0]
    sack.restore(0)
    assert sum(1 for i in first if sack.place(i) is not None) > len(
        first_come(Knapsack(30, sizes), sorted(sizes))
    )


def test_the_placer_is_left_holding_the_best_order_when_it_was_the_last_pass() -> None:
    """A budget that pays for one pass after the first checks: that pass is the best, the placer holds it
    (no pass placed again), though not every hopeful platform fits in it."""
    sizes = {f"p{i:02d}": n for i, n in enumerate([9, 7, 7, 5, 5, 4, 4, 3, 3, 2] * 3)}
    sack = Knapsack(30, sizes)
    idents = sorted(sizes)
    usage = {i: {"gpus": float(n)} for i, n in sizes.items()}
    found = better_order(idents, first_come(sack, idents), usage, {"gpus": 30.0}, sack, Budget(attempts=60))
    assert found is not None and found.in_place and sack.attempts == 55
    held = sack.used
    sack.restore(0)
    fit = [i for i in found.order if sack.place(i) is not None]
    assert held == sack.used and len(fit) < len(found.order)


def test_a_placement_the_search_leaves_held_is_the_one_its_order_gives_placed_again() -> None:
    """When the engine keeps the search's last pass as it is, every decision of it (the platforms of the
    order refused at their turn too, with the free capacity of that moment in their message) is the one
    placing the order again from the start gives."""
    rnd = random.Random(3)
    platforms = [prioritised(f"p{i:02d}", rnd.choice([4, 6, 8, 12, 16])) for i in range(24)]
    machines = [*cps(40), *(machine(f"g{i:02d}", rnd.choice([4, 8])) for i in range(20))]
    search = platform_order.better_order
    held: list[int] = []

    def small_budget(redo: bool) -> Callable[..., Better[Any] | None]:
        def searched(*args: Any, budget: Budget = Budget()) -> Better[Any] | None:
            placer = args[-1]
            start = placer.mark()
            found = search(*args, budget=Budget(attempts=60))
            if found is not None and found.in_place:
                held.append(sum(isinstance(d, Rejection) for d in placer.placed.values()))
                if redo:
                    placer.restore(start)
                    return Better(found.order, in_place=False)
            return found

        return searched

    decisions = []
    for redo in (False, True):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(platform_order, "better_order", small_budget(redo))
            decisions.append(place(desired(*platforms), inventory(machines), []).platforms)
    assert held[0] > 0  # the pass kept as it was refused some of its order
    assert decisions[0] == decisions[1]
