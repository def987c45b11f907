"""Which new workloads of one priority a pool admits (docs/pools.md), pure.

Workloads of one priority are bound one by one in (namespace, name) order, each where it fits best; that
greedy can leave capacity unused that another choice of the same priority would fill (two 4-GPU
workloads that fit where name order put one 8-GPU workload). The name order is a tie-break, not a reason
to admit fewer: :func:`choose` keeps what name order gives unless another choice admits strictly more
workloads of the priority, and among choices that admit the same number the first one found wins, name
order first. Deterministic: the search is bounded by a count of binding attempts, never by time.

1. Name order. When it admits every workload, or as many as the upper bound allows (the smallest
   requests that fit alone, within the free capacity of their dimension), that is the answer (no
   search: the common case costs nothing more).
2. Otherwise the ``k`` workloads that need least in all (ties: the same shape together, then name
   order) and fit now, bound largest block first (a replica's need on one host, as best fit decreasing
   packs), for ``k`` from the upper bound down to one more than name order's count; the first ``k``
   that binds is the best so far. Then, once, the ``best + 1`` whose replicas need least on one host
   (then least in all): several small replicas fill the leftovers of hosts where a large one needs a
   host of its own (these attempts come on top of ``budget``: at most one more than the best so far).
3. Then a depth-first branch and bound over the workloads, largest block first, each admitted (when it
   fits) before it is left out. Workloads of the same shape are alike: once one is left out, so are the
   later ones of its shape; a shape that failed to bind is not tried again below that point (binding
   more only takes room). A branch is cut when what it holds plus what the rest could hold at best
   (the smallest remaining needs that fit now, within the free capacity of their dimension) does not
   beat the best so far. The search ends when a choice reaches the upper bound, or after ``budget``
   binding attempts.

The caller's state (the pool's free GPUs and MIG layouts) is driven through :class:`Trial`: ``bind``
and ``attempt`` bind all of a workload or nothing (``attempt`` with a token that ``undo`` reverses);
``mark``/``back`` return to the start of the priority, ``save``/``restore`` to name order's outcome.
:func:`choose` leaves the state with the chosen workloads bound, in the order it returns them.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

__all__ = ["Choice", "Need", "Trial", "choose"]

T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)

# What one workload needs at least: the capacity dimension it draws on (a GPU family), how much of it in
# all, and how much on one host (a replica), in the units of :meth:`Trial.room`. None: it cannot fit,
# whatever else is admitted.
Need = tuple[Hashable, int, int] | None


class Trial(Protocol[T_contra]):
    """The pool's state as the search sees it."""

    def bind(self, item: T_contra) -> bool:
        """Bind all of ``item``, or nothing (False)."""
        ...

    def mark(self) -> object:
        """A mark of the state now: :meth:`back` undoes every binding since."""
        ...

    def back(self, mark: object) -> None: ...

    def attempt(self, item: T_contra) -> object | None:
        """Bind all of ``item`` (a token for :meth:`undo`), or nothing (None)."""
        ...

    def undo(self, token: object) -> None:
        """Reverse an :meth:`attempt` (the latest one still bound)."""
        ...

    def room(self) -> Mapping[Hashable, int]:
        """Free capacity per dimension now: at least what any set of admissions can still use."""
        ...

    def fits(self, item: T_contra) -> bool:
        """False only when :meth:`attempt` would fail now (a cheap test, asked before it)."""
        ...

    def save(self) -> object:
        """The whole state now (what is bound, and the outcome of every attempt), to :meth:`restore`."""
        ...

    def restore(self, saved: object) -> None: ...


@dataclass(frozen=True, slots=True)
class Choice(Generic[T]):
    """The workloads bound, in the order they were bound. ``name_order``: the name-order greedy (every
    workload was attempted in name order, the ones left out when it was their turn); otherwise the
    search found a choice that admits more, and the ones left out have not been attempted since."""

    admitted: tuple[T, ...]
    name_order: bool
    attempts: int


def choose(
    items: Sequence[T],
    need: Callable[[T], Need],
    shape: Callable[[T], Hashable],
    trial: Trial[T],
    budget: int,
) -> Choice[T]:
    """The workloads of one priority to admit (``items`` in name order); see the module docstring.
    ``need`` is read at the start (before anything is bound); ``shape``: workloads of equal shape bind
    alike."""
    needs = [need(item) for item in items]
    best = _bound(needs, range(len(items)), trial.room())
    start = trial.mark()
    greedy = tuple(item for item in items if trial.bind(item))
    if len(greedy) >= best:
        return Choice(greedy, True, len(items))
    saved = trial.save()
    trial.back(start)
    search = _Search(items, needs, shape, trial, budget, len(greedy), best)
    found = search.run()
    if found is None:  # name order stays, as it was left
        trial.restore(saved)
        return Choice(greedy, True, len(items) + search.attempts)
    for item in found:
        if not trial.bind(item):
            raise AssertionError("a choice found by the search no longer binds")  # the state is the same
    return Choice(found, False, len(items) + search.attempts + len(found))


def _bound(needs: Sequence[Need], positions: Sequence[int], room: Mapping[Hashable, int]) -> int:
    """How many of ``positions`` (smallest need first) could still fit: per dimension, the smallest needs
    whose sum fits the room."""
    left = dict(room)
    count = 0
    for need in sorted((n for n in (needs[p] for p in positions) if n is not None), key=lambda n: n[1]):
        dimension, amount, _ = need
        if amount <= left.get(dimension, 0):
            left[dimension] = left.get(dimension, 0) - amount
            count += 1
    return count


class _Search(Generic[T]):
    """Branch and bound over one priority's workloads (see the module docstring), iterative: a group
    may hold more workloads than Python's recursion limit."""

    def __init__(
        self,
        items: Sequence[T],
        needs: Sequence[Need],
        shape: Callable[[T], Hashable],
        trial: Trial[T],
        budget: int,
        floor: int,
        ceiling: int,
    ) -> None:
        self.trial = trial
        self.budget = budget
        self.attempts = 0
        fits = [p for p in range(len(items)) if needs[p] is not None]
        shapes = [shape(items[p]) for p in fits]
        rank = {s: i for i, s in enumerate(dict.fromkeys(shapes))}  # first appearance in name order
        # Bound the largest blocks first (a replica's need on one host), as best fit decreasing packs.
        fits.sort(key=lambda p: (-_block(needs[p]), -_amount(needs[p]), rank[shape(items[p])], p))
        smallest = sorted(fits, key=lambda p: (_amount(needs[p]), rank[shape(items[p])], p))
        at = {p: i for i, p in enumerate(fits)}
        self.ascending = [at[p] for p in smallest]  # positions in self.items, smallest need first
        self.items = [items[p] for p in fits]
        self.needs = [needs[p] for p in fits]
        self.shapes = [shape(item) for item in self.items]
        self.dead: dict[Hashable, int] = {}
        n = len(fits)
        # Where the next shape starts: leaving one out leaves out the rest of its shape.
        self.skip = [n] * (n + 1)
        for i in range(n - 2, -1, -1):
            same = self.shapes[i] == self.shapes[i + 1]
            self.skip[i] = self.skip[i + 1] if same else i + 1
        self.best = floor
        self.ceiling = ceiling
        self.found: tuple[T, ...] | None = None

    def run(self) -> tuple[T, ...] | None:
        self._smallest()
        if not self._done():
            self._narrowest()
        if not self._done():
            self._branch_and_bound()
        return self.found

    def _smallest(self) -> None:
        """The ``k`` smallest workloads, bound largest block first, for ``k`` from the bound down to one
        more than the best so far."""
        fitting = [p for p in self.ascending if self.trial.fits(self.items[p])]
        for k in range(min(self.ceiling, len(fitting)), self.best, -1):
            chosen = sorted(fitting[:k])
            if self._bind_all(chosen):
                self.best, self.found = k, tuple(self.items[p] for p in chosen)
            if self.found is not None or self._done():
                return

    def _narrowest(self) -> None:
        """The ``best + 1`` workloads whose replicas need least on one host, bound largest block first."""
        fitting = [p for p in range(len(self.items)) if self.trial.fits(self.items[p])]
        fitting.sort(key=lambda p: (_block(self.needs[p]), _amount(self.needs[p]), p))
        chosen = sorted(fitting[: self.best + 1])
        if len(chosen) <= self.best:
            return
        self.budget += len(chosen)  # on top of the budget: the search after it is not cut short
        if self._bind_all(chosen):
            self.best, self.found = len(chosen), tuple(self.items[p] for p in chosen)

    def _bind_all(self, chosen: Sequence[int]) -> bool:
        """Whether every one of ``chosen`` binds, in order (within the budget); undone either way."""
        tokens: list[object] = []
        for p in chosen:
            if self._done():
                break
            self.attempts += 1
            token = self.trial.attempt(self.items[p])
            if token is None:
                break
            tokens.append(token)
        for token in reversed(tokens):
            self.trial.undo(token)
        return len(tokens) == len(chosen)

    def _branch_and_bound(self) -> None:
        path: list[T] = []
        tokens: list[object] = []
        # Shapes that failed to bind, with the depth they failed at: binding more only takes room, so they
        # are not tried again below that point (nor counted in the bound).
        self.dead = {}
        # Frames: (position, token of the item admitted at this position, or None when entering).
        stack: list[tuple[int, object | None]] = [(0, None)]
        while stack:
            pos, token = stack.pop()
            if token is not None:  # back from the branch that admitted items[pos]: now leave it out
                self.trial.undo(tokens.pop())
                path.pop()
                self.dead = {s: d for s, d in self.dead.items() if d <= len(path)}
                if not self._done():
                    stack.append((self.skip[pos], None))
                continue
            if len(path) > self.best:
                self.best, self.found = len(path), tuple(path)
            if self._done() or pos >= len(self.items) or not self._promising(pos, len(path)):
                continue
            got = None
            if self._alive(pos):
                self.attempts += 1
                got = self.trial.attempt(self.items[pos])
            if got is None:  # the rest of its shape does not fit either
                self.dead.setdefault(self.shapes[pos], len(path))
                stack.append((self.skip[pos], None))
                continue
            tokens.append(got)
            path.append(self.items[pos])
            stack.append((pos, got))
            stack.append((pos + 1, None))

    def _alive(self, pos: int) -> bool:
        return self.shapes[pos] not in self.dead and self.trial.fits(self.items[pos])

    def _done(self) -> bool:
        return self.best >= self.ceiling or self.attempts >= self.budget

    def _promising(self, pos: int, count: int) -> bool:
        """Whether the remaining workloads that fit now could beat the best, smallest first."""
        rest = [p for p in range(pos, len(self.items)) if self._alive(p)]
        return count + _bound(self.needs, rest, self.trial.room()) > self.best


def _amount(need: Need) -> int:
    return 0 if need is None else need[1]


def _block(need: Need) -> int:
    return 0 if need is None else need[2]
