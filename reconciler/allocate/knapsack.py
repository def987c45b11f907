"""The exact choice of GPU workers: a bounded knapsack over the GPU counts on offer (pure).

Fewest surplus GPUs, then fewest hosts, then the hosts that come first by host key
(docs/allocation.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import lru_cache

from reconciler.inventory import Machine

_INF = 1 << 60


# --- exact GPU worker choice ---------------------------------------------------------------------


def optimal_count_vectors(available: Mapping[int, int], request: int) -> list[dict[int, int]]:
    """Every multiset of GPU counts (count -> hosts) with the fewest surplus GPUs, then fewest hosts.

    ``available`` maps a per-host GPU count to how many such hosts are free. Returns [] when the
    request cannot be met. A bounded knapsack over counts: any optimal set sums to less than
    ``request + max count`` (else a host could be dropped), so the tables stay small. No sum below
    that bound takes more than ``bound // count`` hosts of a count, so availability is capped there
    and the answer is remembered for the capped shape (a large fleet asks the same few questions).
    """
    return [dict(v) for v in optimal(available, request)]


def optimal(available: Mapping[int, int], request: int) -> tuple[dict[int, int], ...]:
    """:func:`optimal_count_vectors`, shared with its cache (read-only)."""
    if request <= 0:
        return ({},)
    counts = [c for c, a in available.items() if c > 0 and a > 0]
    if not counts:
        return ()
    counts.sort()
    bound = request + counts[-1] - 1
    return _optimal_vectors(tuple((c, min(available[c], bound // c)) for c in counts), request)


@lru_cache(maxsize=4096)
def _optimal_vectors(shape: tuple[tuple[int, int], ...], request: int) -> tuple[dict[int, int], ...]:
    """:func:`optimal_count_vectors` of capped availability ``shape`` ((count, hosts), counts sorted);
    each vector lists its counts in ascending order."""
    available = dict(shape)
    counts = [c for c, _ in shape]
    total = sum(c * available[c] for c in counts)
    if total < request:
        return ()
    top = min(request + counts[-1] - 1, total)
    n = len(counts)
    # suffix[i][s]: fewest hosts from count groups i.. summing to exactly s
    suffix: list[list[int]] = [[_INF] * (top + 1) for _ in range(n + 1)]
    suffix[n][0] = 0
    for i in range(n - 1, -1, -1):
        c = counts[i]
        row = suffix[i + 1][:]
        remaining, chunk = min(available[c], top // c), 1
        while remaining > 0:  # binary splitting of the multiplicity
            take = min(chunk, remaining)
            remaining -= take
            chunk *= 2
            size = take * c
            for s in range(top, size - 1, -1):
                v = row[s - size] + take
                if v < row[s]:
                    row[s] = v
        suffix[i] = row
    best_sum = next((s for s in range(request, top + 1) if suffix[0][s] < _INF), None)
    if best_sum is None:
        return ()
    best_hosts = suffix[0][best_sum]
    vectors: list[dict[int, int]] = []

    def walk(i: int, s: int, hosts: int, chosen: dict[int, int]) -> None:
        if i == n:
            if s == 0 and hosts == 0:
                vectors.append(dict(chosen))
            return
        c = counts[i]
        for m in range(min(available[c], s // c, hosts), -1, -1):
            # Any exact fill of the rest uses its minimum host count, else best_hosts was not minimal.
            if m + suffix[i + 1][s - m * c] == hosts:
                if m:
                    chosen[c] = m
                walk(i + 1, s - m * c, hosts - m, chosen)
                chosen.pop(c, None)

    walk(0, best_sum, best_hosts, {})
    return tuple(vectors)


# The order of equally good hosts: hosts that carry no resource group first (they are the ones a platform
# without groups should take, leaving grouped hosts to the platforms that need them), then by name, uid.
HostKey = tuple[int, str, str]  # (1 if the host carries resource groups else 0, name, uid)


def host_key(m: Machine) -> HostKey:
    return (1 if m.resource_groups else 0, m.name, m.uid)


def choose_gpu_hosts(
    available: Mapping[int, int], request: int, first: Callable[[int, int], list[HostKey]]
) -> dict[int, int] | None:
    """Pick the optimal count vector whose hosts, sorted, come first by host key.

    ``first(count, m)`` returns the m first free hosts with ``count`` GPUs by host key (hosts with one
    count are interchangeable but for their keys, so an optimal set always takes a prefix of each group).
    """
    vectors = optimal_count_vectors(available, request)
    if not vectors:
        return None
    if len(vectors) == 1:
        return vectors[0]
    return min(vectors, key=lambda v: sorted(h for c, m in v.items() for h in first(c, m)))
