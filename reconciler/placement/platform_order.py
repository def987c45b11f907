"""Which new platforms of one priority to place when not all of them fit (pure).

The allocation engine places new platforms of one priority in (namespace, name) order. That order is a
tie-break, not a reason to leave capacity unused: when it leaves some out, :func:`better_order` looks for
an order that places strictly more, and returns None when it finds none (the name order then stands
exactly as it was). The search knows nothing of hosts: it drives the engine's own placement of one
platform through a :class:`Placer` (place and commit, mark, restore), so every candidate is a real
placement by the engine's rules, and it only counts.

The search, deterministic and bounded by :attr:`Budget.attempts` placement attempts (counted, never
timed, so the result does not depend on the machine):

1. A platform that does not fit on the free hosts alone can never be placed (capacity only shrinks as
   others are placed): it is left out. When every platform left out by the name order is such a one, the
   name order is already the best and nothing else runs (a fleet where everything that can fit fits pays
   one attempt per such platform).
2. A small group (at most :attr:`Budget.exact_max` hopeful platforms) is searched exactly: a depth-first
   search over subsets placed in name order, include before exclude, so among sets of one size the first
   found keeps the earliest names.
3. A larger group tries candidate orders, each one full pass: smallest request first, then by cost under
   scarcity prices (each aggregated resource -- control-plane hosts, GPUs of one family, worker hosts --
   priced by how far the group's demand exceeds what is free), the prices then raised on the resources
   the best pass ran out of, a few rounds. The best pass wins; ties keep the earlier candidate.
4. Within what is left of the budget, the best order is improved one move at a time: a platform left
   out is moved to just before the first placed platform that costs more than it, and the pass re-run
   from there; kept when it places more.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

K = TypeVar("K", bound=Hashable)


class Placer(Protocol[K]):  # type: ignore[misc]
    """The engine's placement of one platform on the free hosts, with marks to come back to."""

    def place(self, ident: K) -> bool:
        """Place ``ident`` and take its hosts if it fits; False (nothing taken) if it does not."""
        ...

    def mark(self) -> object:
        """What is taken so far, to :meth:`restore` later."""
        ...

    def restore(self, mark: object) -> None: ...


@dataclass(frozen=True, slots=True)
class Budget:
    attempts: int = 20_000  # placement attempts for one priority group
    exact_max: int = 16  # a group of at most this many hopeful platforms is searched exactly
    price_rounds: int = 4  # price updates after the first priced pass


Usage = Mapping[str, float]  # aggregated resource -> how much of it one platform takes


class _Counter:
    def __init__(self, placer: Placer[K], attempts: int) -> None:
        self.placer = placer
        self.left = attempts

    def place(self, ident: K) -> bool:
        self.left -= 1
        return self.placer.place(ident)


def better_order(
    idents: Sequence[K],
    first_come: Sequence[K],
    usage: Mapping[K, Usage],
    supply: Usage,
    placer: Placer[K],
    budget: Budget = Budget(),
) -> list[K] | None:
    """An order of ``idents`` whose placement places strictly more than ``first_come`` (the platforms the
    name order placed), or None. ``placer`` starts and ends at the free hosts before the group."""
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
        found = _exact(hopeful, len(first_come), count, start)
        return found
    rank = {ident: n for n, ident in enumerate(idents)}
    best, best_fit = None, len(first_come)
    for order in _orders(hopeful, usage, supply, rank, count, start, budget):
        if len(order.fit) > best_fit:
            best, best_fit = order.idents, len(order.fit)
        if best_fit == len(hopeful):
            break
    return best


@dataclass(frozen=True, slots=True)
class _Pass(Generic[K]):
    idents: list[K]  # the order
    fit: list[K]  # those that fit, placed in it


def _run(order: list[K], count: _Counter, start: object) -> _Pass | None:
    """Place ``order`` from ``start``, then come back; None when the budget cannot pay for the pass."""
    if count.left < len(order):
        return None
    count.placer.restore(start)
    fit = [ident for ident in order if count.place(ident)]
    count.placer.restore(start)
    return _Pass(order, fit)


def _exact(hopeful: Sequence[K], floor: int, count: _Counter, start: object) -> list[K] | None:
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
    usage: Mapping[K, Usage],
    supply: Usage,
    rank: Mapping[K, int],
    count: _Counter,
    start: object,
    budget: Budget,
) -> Iterator[_Pass]:
    """The candidate passes, in the order they are tried (a later one learns its prices from the last)."""

    def by(cost: Mapping[K, float]) -> list[K]:
        return sorted(hopeful, key=lambda i: (cost[i], rank[i]))

    run = _run(by({i: sum(usage[i].values()) for i in hopeful}), count, start)
    if run is None:
        return
    yield run
    demand: dict[str, float] = {}
    for i in hopeful:
        for r, n in usage[i].items():
            demand[r] = demand.get(r, 0.0) + n
    prices = {r: n / supply[r] if supply.get(r) else float(len(hopeful)) for r, n in demand.items()}
    for _ in range(budget.price_rounds + 1):
        cost = {i: sum(prices[r] * n / max(supply.get(r, 0.0), 1.0) for r, n in usage[i].items()) for i in hopeful}
        run = _run(by(cost), count, start)
        if run is None:
            return
        yield run
        used: dict[str, float] = {}
        for i in run.fit:
            for r, n in usage[i].items():
                used[r] = used.get(r, 0.0) + n
        for r in prices:  # what ran out gets dearer
            if used.get(r, 0.0) >= 0.95 * supply.get(r, 0.0):
                prices[r] *= 2
