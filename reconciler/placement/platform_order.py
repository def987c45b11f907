"""Which new platforms of one priority to place when not all of them fit (pure).

The allocation engine places new platforms of one priority in (namespace, name) order. That order is a
tie-break, not a reason to leave capacity unused: when it leaves some out, :func:`better_order` looks for
an order that places strictly more, and returns None when it finds none (the name order then stands
exactly as it was). The search knows nothing of hosts: it drives the engine's own placement of one
platform through a :class:`Placer` (place and commit, mark, restore), so every candidate is a real
placement by the engine's rules, and it only counts.

The search is deterministic and bounded by :attr:`Budget.attempts` placement attempts (counted, never
timed, so the result does not depend on the machine):

1. No search when the name order already places as many as the free resources could hold at all (per
   aggregated resource -- control-plane hosts, worker hosts, GPUs of one family -- the most platforms
   whose smallest asks add up to the supply): a fleet short of one resource for everyone pays nothing.
2. A platform that does not fit on the free hosts alone can never be placed (capacity only shrinks as
   others are placed): it is left out. When every platform the name order left out is such a one, the
   name order is already the best (one attempt per such platform).
3. A small group (at most :attr:`Budget.exact_max` hopeful platforms) is searched exactly within
   :attr:`Budget.exact_attempts`: a depth-first search over subsets placed in name order, include before
   exclude, so among sets of one size the first found keeps the earliest names.
4. A larger group spends at most one pass per platform left out (within the budget: a few left out of
   many buy a few passes) on candidate orders, each one full pass: the ones left out first, then the
   rest in name order; smallest ask first; cheapest first under scarcity prices (a resource is priced
   by the group's demand over its supply; after each pass what ran out gets dearer and what was left
   over cheaper, and a platform's cost uses what it really took when last placed: surplus GPUs, hosts
   added to reach its minimum). Then, while the budget lasts, the best order is re-run with its costs
   jittered by a fixed-seed generator. A pass beats another when it places more, or as many while
   taking less of the free resources (each as a share of its supply: what is left is for the priorities
   below); ties keep the earlier candidate.
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

K = TypeVar("K", bound=Hashable)


class Placer(Protocol[K]):  # type: ignore[misc]
    """The engine's placement of one platform on the free hosts, with marks to come back to."""

    def place(self, ident: K) -> Usage | None:
        """Place ``ident`` and take its hosts if it fits, returning what it took; None (nothing taken)
        if it does not fit."""
        ...

    def mark(self) -> object:
        """What is taken so far, to :meth:`restore` later."""
        ...

    def restore(self, mark: object) -> None: ...


@dataclass(frozen=True, slots=True)
class Better(Generic[K]):
    """An order that places more: place it, then the rest of the group in name order."""

    order: list[K]
    # The placer already holds this order's placement (its last pass, every one of the order tried in
    # turn, those that fit placed): no need to redo it.
    in_place: bool


@dataclass(frozen=True, slots=True)
class Budget:
    attempts: int = 20_000  # placement attempts for one priority group
    exact_max: int = 16  # a group of at most this many hopeful platforms is searched exactly,
    exact_attempts: int = 2_000  # within this many of the attempts
    price_rounds: int = 6  # price updates after the first priced pass


Usage = Mapping[str, float]  # aggregated resource -> how much of it one platform takes


class _Counter(Generic[K]):
    """The placer, counting attempts, remembering what each platform took when it was last placed."""

    def __init__(self, placer: Placer[K], attempts: int) -> None:
        self.placer = placer
        self.left = attempts
        self.took: dict[K, Usage] = {}

    def place(self, ident: K) -> bool:
        self.left -= 1
        took = self.placer.place(ident)
        if took is None:
            return False
        self.took[ident] = took
        return True


def better_order(
    idents: Sequence[K],
    first_come: Sequence[K],
    usage: Mapping[K, Usage],
    supply: Usage,
    placer: Placer[K],
    budget: Budget = Budget(),
) -> Better[K] | None:
    """An order of ``idents`` whose placement places strictly more than ``first_come`` (the platforms the
    name order placed), or None. ``placer`` starts at the free hosts before the group and ends there too,
    unless :attr:`Better.in_place` says it holds the placement of the order found."""
    if len(first_come) >= _most_that_fit(idents, usage, supply):
        return None
    start = placer.mark()
    count = _Counter(placer, budget.attempts)
    placed = set(first_come)
    hopeful: list[K] = []
    for ident in idents:
        if ident in placed:
            hopeful.append(ident)
            continue
        if count.left <= 0:
            break
        if count.place(ident):
            hopeful.append(ident)
        placer.restore(start)
    if len(hopeful) == len(first_come):
        return None
    if len(hopeful) <= budget.exact_max:
        count.left = min(count.left, budget.exact_attempts)
        found = _exact(hopeful, len(first_come), count, start)
        return None if found is None else Better(found, in_place=False)
    # The most a search can gain is the hopeful ones left out: a few left out of many buy a few passes.
    left_out = [i for i in hopeful if i not in placed]
    count.left = min(count.left, len(hopeful) * len(left_out))
    rank = {ident: n for n, ident in enumerate(idents)}
    best: _Pass[K] | None = None
    last: _Pass[K] | None = None  # the pass the placer holds
    floor = (len(first_come), 0.0)
    for last in _orders(hopeful, left_out, usage, supply, rank, count, start, budget):
        if last.value > (best.value if best else floor):
            best = last
        if best is not None and len(best.fit) == len(hopeful):
            return Better(best.idents, in_place=best is last)
    if best is None:
        placer.restore(start)
        return None
    return _shake(best, last, count, supply, start)


def _shake(
    best: _Pass[K], last: _Pass[K] | None, count: _Counter[K], supply: Usage, start: object
) -> Better[K]:
    """Re-run the best order with its costs jittered (a fixed-seed generator: deterministic) while the
    budget lasts, keeping any pass that is better (:attr:`_Pass.value`). ``last``: the pass the placer
    holds; when the best is the last pass run, the placer is left holding it (no need to redo it)."""
    rnd = random.Random(len(best.idents))
    while True:
        cost = {i: c * (0.7 + 0.6 * rnd.random()) for i, c in best.cost.items()}
        run = _run(sorted(best.idents, key=lambda i: cost[i]), best.cost, count, start, supply)
        if run is None:
            if last is best:
                return Better(best.idents, in_place=True)
            count.placer.restore(start)
            return Better(best.idents, in_place=False)
        last = run
        if run.value > best.value:
            best = run


def _most_that_fit(idents: Sequence[K], usage: Mapping[K, Usage], supply: Usage) -> int:
    """An upper bound on how many of ``idents`` fit: per resource, the most whose smallest uses add up
    to no more than the supply (``usage`` must not exceed what a platform really takes)."""
    bound = len(idents)
    for r in sorted({r for i in idents for r in usage[i]}):
        total, fit = 0.0, 0
        for n in sorted(usage[i].get(r, 0.0) for i in idents):
            total += n
            if total > supply.get(r, 0.0) + 1e-9:
                break
            fit += 1
        bound = min(bound, fit)
    return bound


@dataclass(frozen=True, slots=True)
class _Pass(Generic[K]):
    idents: list[K]  # the order
    fit: list[K]  # those that fit, placed in it
    cost: Mapping[K, float]  # what the order was sorted by
    spent: float  # what the placed ones took, each resource as a share of its supply

    @property
    def value(self) -> tuple[int, float]:
        """More placed, then less taken (what is left is for the priorities below)."""
        return (len(self.fit), -self.spent)


def _run(
    order: list[K], cost: Mapping[K, float], count: _Counter[K], start: object, supply: Usage
) -> _Pass[K] | None:
    """Place ``order`` from ``start`` (the placer is left holding it); None when the budget cannot pay
    for the pass."""
    if count.left < len(order):
        return None
    count.placer.restore(start)
    fit = [ident for ident in order if count.place(ident)]
    spent = sum(n / supply[r] for i in fit for r, n in count.took[i].items() if supply.get(r))
    return _Pass(order, fit, cost, spent)


def _exact(hopeful: Sequence[K], floor: int, count: _Counter[K], start: object) -> list[K] | None:
    """The largest subset that fits placed in order (depth-first, include before exclude)."""
    best: list[K] | None = None
    best_size = floor

    def dfs(i: int, chosen: list[K]) -> None:
        nonlocal best, best_size
        if len(chosen) + len(hopeful) - i <= best_size or count.left <= 0:
            return
        if i == len(hopeful):
            best, best_size = list(chosen), len(chosen)
            return
        mark = count.placer.mark()
        if count.place(hopeful[i]):
            dfs(i + 1, [*chosen, hopeful[i]])
            count.placer.restore(mark)
        dfs(i + 1, chosen)

    dfs(0, [])
    count.placer.restore(start)
    return best


def _orders(
    hopeful: Sequence[K],
    left_out: Sequence[K],
    usage: Mapping[K, Usage],
    supply: Usage,
    rank: Mapping[K, int],
    count: _Counter[K],
    start: object,
    budget: Budget,
) -> Iterator[_Pass[K]]:
    """The candidate passes, in the order they are tried (a later one learns its prices from the last)."""

    def _took(i: K) -> Usage:
        return count.took.get(i) or usage[i]

    def by(cost: Mapping[K, float]) -> list[K]:
        return sorted(hopeful, key=lambda i: (cost[i], rank[i]))

    size = {i: sum(usage[i].values()) for i in hopeful}
    out = set(left_out)
    promoted = [*left_out, *(i for i in hopeful if i not in out)]
    for order in (promoted, by(size)):
        run = _run(order, size, count, start, supply)
        if run is None:
            return
        yield run
    demand: dict[str, float] = {}
    for i in hopeful:
        for r, n in usage[i].items():
            demand[r] = demand.get(r, 0.0) + n
    prices = {r: n / supply[r] if supply.get(r) else float(len(hopeful)) for r, n in demand.items()}
    prices.update({r: 1.0 for r in supply if r not in prices})
    for _ in range(budget.price_rounds + 1):
        # What a platform took when last placed (surplus GPUs, fill hosts) is a better guess than its ask.
        cost = {
            i: sum(prices.get(r, 0.0) * n / max(supply.get(r, 0.0), 1.0) for r, n in _took(i).items())
            for i in hopeful
        }
        run = _run(by(cost), cost, count, start, supply)
        if run is None:
            return
        yield run
        used: dict[str, float] = {}
        for i in run.fit:
            for r, n in _took(i).items():
                used[r] = used.get(r, 0.0) + n
        for r in sorted(prices):  # what ran out gets dearer, what is left over cheaper
            share = used.get(r, 0.0) / supply[r] if supply.get(r) else 1.0
            prices[r] *= 2.0 if share >= 0.95 else 0.5 if share < 0.8 else 1.0
