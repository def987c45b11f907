"""What the last pass left on the status branch, read once per pass into one value (pure).

``run`` reads it at the start of every pass and ``plan --from-status`` from the branch it plans
against; both plan with it, so the pull request's plan is the pass's plan: the admissions and MIG
layouts a pool holds, each pool's mode, the profiles attached for each workload, the scaling records
(the size a policy's actions left a pool at) and when each pending workload started waiting.
``plan --inventory`` and ``plan --palette`` plan with :data:`NO_RECORDS` (nothing deployed is known).

A recorded value that cannot be read is named in :attr:`Records.problems` (the caller logs it) and
planned as if absent, except a scaling block: its pool keeps the size it has and is not scaled.
Recorded admissions that claim one GPU twice are repaired before anyone plans with them
(``status/record_check.py``): :attr:`Records.repairs` says what was dropped. What Palette contradicts
(a pool's recorded size against its machine pools: ``status/palette_check.py``) is repaired the same
way once the pass has observed, by :func:`checked`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from reconciler.model.desired import DesiredState
from reconciler.model.pools import PoolKey, WorkloadKey
from reconciler.scaling import ScalingStatusError
from reconciler.scaling import parse as parse_scaling
from reconciler.scaling.record_types import ScalingStatus
from reconciler.status.palette_check import (
    Hosts,
    LayoutRepair,
    Observed,
    SizeRepair,
    check_layouts,
    check_sizes,
)
from reconciler.status.pools import PoolRecords, pending_since, read_pool_records, scaling_blocks
from reconciler.status.record_check import REPAIRED
from reconciler.status.render import Recorded, parse_previous, parse_recorded

POOL_PROBLEM = "unreadable pool status: its MIG layout is planned afresh"
SCALING_PROBLEM = "unreadable scaling status: the pool keeps its size, not scaled"


@dataclass(frozen=True, slots=True)
class Problem:
    """A recorded value that could not be read: what it means for the pass, and the error."""

    meaning: str
    error: str

    def __str__(self) -> str:
        """How ``plan`` warns of it."""
        return f"{self.meaning}: {self.error}"


@dataclass(frozen=True, slots=True)
class Records:
    """The status branch before a pass, parsed."""

    files: Mapping[str, bytes] = field(default_factory=dict)  # the tree as read
    docs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # every parseable YAML file
    recorded: Recorded = field(
        default_factory=Recorded
    )  # reconciler.yaml (a shard's record on a sharded branch)
    pools: PoolRecords = field(default_factory=PoolRecords)
    scaling: Mapping[PoolKey, ScalingStatus | None] = field(default_factory=dict)
    unreadable: frozenset[PoolKey] = frozenset()  # pools whose status.scaling did not parse
    pending_since: Mapping[WorkloadKey, float] = field(default_factory=dict)
    problems: tuple[Problem, ...] = ()
    # claims on GPUs an earlier admission holds, dropped before planning (a note of the status commit)
    repairs: tuple[str, ...] = ()
    repaired: Mapping[WorkloadKey, str] = field(default_factory=dict)  # the loser -> its repair's note
    repaired_pools: Mapping[PoolKey, str] = field(default_factory=dict)  # a repaired pool -> the notes
    resized: frozenset[PoolKey] = frozenset()  # pools whose scaling record was repaired (palette_check)


NO_RECORDS = Records()


def read_records(tree: Mapping[str, bytes]) -> Records:
    """Parse a status tree (path -> bytes) once: everything a pass plans and reports with."""
    docs = parse_previous(tree)
    pools = read_pool_records(docs)
    problems = [Problem(POOL_PROBLEM, p) for p in pools.problems]
    repairs = tuple(r.note for r in pools.repairs)
    problems.extend(Problem(REPAIRED, r.detail) for r in pools.repairs)
    scaling: dict[PoolKey, ScalingStatus | None] = {}
    unreadable: set[PoolKey] = set()
    for key, (path, block) in scaling_blocks(docs).items():
        try:
            scaling[key] = parse_scaling(block, f"{path}: status.scaling")
        except ScalingStatusError as exc:
            problems.append(Problem(SCALING_PROBLEM, str(exc)))
            unreadable.add(key)
    return Records(
        files=dict(tree),
        docs=docs,
        recorded=parse_recorded(tree),
        pools=pools,
        scaling=scaling,
        unreadable=frozenset(unreadable),
        pending_since=pending_since(docs),
        problems=tuple(problems),
        repairs=repairs,
        repaired=_by_loser(pools),
    )


def checked(records: Records, desired: DesiredState, observed: Observed) -> Records:
    """``records`` with what Palette's observation contradicts repaired (``status/palette_check.py``),
    each repair named as the read-time ones are (in ``problems``, ``repairs`` and per resource)."""
    hosts = Hosts(observed)
    scaling, sizes = check_sizes(desired, observed, records.scaling, records.docs, hosts)
    layouts, migs = check_layouts(records.pools.layouts, records.pools.previous, hosts.get)
    if not sizes and not migs:
        return records
    found: list[SizeRepair | LayoutRepair] = [*sizes, *migs]
    notes = tuple(r.note for r in found)
    by_pool: dict[PoolKey, list[str]] = {}
    for repair in found:
        by_pool.setdefault(repair.pool, []).append(repair.note)
    return replace(
        records,
        scaling=scaling,
        pools=replace(records.pools, layouts=layouts),
        problems=(*records.problems, *(Problem(REPAIRED, r.detail) for r in found)),
        repairs=(*records.repairs, *notes),
        repaired_pools={**records.repaired_pools, **{k: "; ".join(n) for k, n in by_pool.items()}},
        resized=records.resized | {r.pool for r in sizes},
    )


def _by_loser(pools: PoolRecords) -> dict[WorkloadKey, str]:
    out: dict[WorkloadKey, list[str]] = {}
    for repair in pools.repairs:
        out.setdefault(repair.loser, []).append(repair.note)
    return {key: "; ".join(notes) for key, notes in out.items()}
