"""The planner's search: dynamic programming over the GPUs in order with the remaining request as state
(exact; pure).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.placement.mig.options import Option


@dataclass(frozen=True, slots=True)
class _Packing:
    """Count vectors packed into one integer: a field per profile with a guard bit that a subtraction
    below zero clears."""

    width: int
    fields: int

    @staticmethod
    def of(target: Sequence[int]) -> _Packing:
        return _Packing(max(target).bit_length() + 1, len(target))

    @property
    def guard(self) -> int:
        return sum(1 << (k * self.width + self.width - 1) for k in range(self.fields))

    def pack(self, counts: Sequence[int]) -> int:
        return sum(c << (k * self.width) for k, c in enumerate(counts))

    def unpack(self, code: int) -> tuple[int, ...]:
        mask = (1 << self.width) - 1
        return tuple((code >> (k * self.width)) & mask for k in range(self.fields))


def _forward(
    codes: Sequence[Sequence[int]], start: int, packing: _Packing, room: Sequence[int] | None
) -> list[set[int]]:
    """The remaining requests reachable before each position (and after the last), from ``start``;
    ``room`` (most the GPUs from a position on can take) cuts states that cannot finish."""
    guard = packing.guard

    def fits(small: int, big: int) -> bool:
        return ((big | guard) - small) & guard == guard

    reachable: list[set[int]] = [{start} if room is None or fits(start, room[0]) else set()]
    for pos, row in enumerate(codes):
        following: set[int] = set()
        for remaining in reachable[pos]:
            for code in row:
                left = (remaining | guard) - code
                if left & guard == guard and (room is None or fits(left & ~guard, room[pos + 1])):
                    following.add(left & ~guard)
        reachable.append(following)
    return reachable


def leftover_requests(tables: Sequence[Sequence[Option]], target: tuple[int, ...]) -> set[tuple[int, ...]]:
    """What may remain of the request once the searched GPUs took what they can (every way)."""
    packing = _Packing.of(target)
    codes = [[packing.pack(option.counts) for option in table] for table in tables]
    return {packing.unpack(code) for code in _forward(codes, packing.pack(target), packing, None)[-1]}


def best_options(tables: Sequence[Sequence[Option]], target: tuple[int, ...]) -> list[Option] | None:
    """Exact lexicographic minimum over one option per GPU whose counts add up to ``target``.

    Key of a choice: (GPUs switched, stranded slices, instances per GPU in order (more on earlier GPUs),
    then per GPU in order its layout's tie). The key of the GPUs from ``pos`` on depends only on ``pos``
    and the remaining request, so dynamic programming over (pos, remaining) is exact: a forward pass
    finds the reachable states (suffix capacities cut those that cannot finish), a backward pass the best
    option of each. The two sequence parts of a key are replaced by their rank among the states of the
    next position, so keys stay flat however many GPUs there are.
    """
    n = len(tables)
    packing = _Packing.of(target)
    guard = packing.guard
    codes = [[packing.pack(option.counts) for option in table] for table in tables]
    # Most instances the GPUs from pos on can still take, per profile (capped): an upper bound.
    room = [0] * (n + 1)
    totals = [0] * len(target)
    for pos in range(n - 1, -1, -1):
        for k in range(len(target)):
            totals[k] = min(totals[k] + max(option.counts[k] for option in tables[pos]), target[k])
        room[pos] = packing.pack(totals)
    reachable = _forward(codes, packing.pack(target), packing, room)
    if 0 not in reachable[n]:
        return None

    # best[pos][remaining] = (switched, stranded, spread rank, tie rank, option index)
    Entry = tuple[int, int, int, int, int]
    best: list[dict[int, Entry]] = [{} for _ in range(n + 1)]
    best[n][0] = (0, 0, 0, 0, 0)
    for pos in range(n - 1, -1, -1):
        table, after = tables[pos], best[pos + 1]
        found: dict[int, tuple[int, int, tuple[int, int], tuple[Any, int], int]] = {}
        for remaining in reachable[pos]:
            choice: tuple[int, int, tuple[int, int], tuple[Any, int], int] | None = None
            for index, code in enumerate(codes[pos]):
                left = (remaining | guard) - code
                if left & guard != guard:
                    continue
                tail = after.get(left & ~guard)
                if tail is None:
                    continue
                option = table[index]
                key = (
                    tail[0] + option.switched,
                    tail[1] + option.stranded,
                    (-sum(option.counts), tail[2]),
                    (option.tie, tail[3]),
                    index,
                )
                if choice is None or key[:4] < choice[:4]:
                    choice = key
            if choice is not None:
                found[remaining] = choice
        spread_rank = {v: r for r, v in enumerate(sorted({entry[2] for entry in found.values()}))}
        tie_rank = {v: r for r, v in enumerate(sorted({entry[3] for entry in found.values()}))}
        best[pos] = {
            remaining: (e[0], e[1], spread_rank[e[2]], tie_rank[e[3]], e[4]) for remaining, e in found.items()
        }

    remaining = packing.pack(target)
    if remaining not in best[0]:
        return None
    chosen: list[Option] = []
    for pos in range(n):
        index = best[pos][remaining][4]
        chosen.append(tables[pos][index])
        remaining = ((remaining | guard) - codes[pos][index]) & ~guard
    return chosen
