"""The integer programs of joint MIG planning (``mig_joint``): which replicas go to each site and how
many of its free GPUs take each layout (pure; HiGHS through ``highspy``).

A *site* is where one replica's instances must all be: a host when the model requires one host per
replica, else the whole pool. A site offers its free GPUs (per MIG type: any layout) and the free
instances of its GPUs already in MIG mode that keep their layout (fixed, per profile), and GPUs
without MIG (``plain``) that only a replica asking for whole GPUs takes. A replica's *shape*: its
instances per profile and the whole GPUs it takes on its site (each a GPU fully: no instance on it,
any of the site's free or plain GPUs). Sites are
filled one after the other, each by one small program (``solve``). Deterministic: one thread, a fixed
seed, a branch-and-bound *node* limit and a cap on a program's size, never a wall-clock budget.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from reconciler.model.mig import MigGpuType
from reconciler.placement.mig import Layout, layout_mask, uncovered, valid_layouts

NODE_LIMIT = 2000  # branch-and-bound nodes per program: deterministic work, not time
TOGETHER_NODES = 100  # the program of all sites (``_together``) is harder: fewer nodes, and it is not
TOGETHER_COLUMNS = 600  # built past this size (its root alone took 0.3-1 s at 800-900 columns)
MAX_COLUMNS = 5000  # larger programs are not built: the greedy's answer stands (a size, not a time)
SEED = 0

Vector = tuple[int, ...]  # instances per profile of the program's profile list
Shape = tuple[Vector, int, int]  # a replica's instances per profile, how many replicas, whole GPUs of each


@dataclass(frozen=True, slots=True)
class Site:
    """One host (or the pool): its free GPUs per MIG type, its frozen GPUs' free instances, and its
    GPUs without MIG free whole."""

    free: tuple[tuple[MigGpuType, int], ...]
    spare: Vector
    plain: int = 0


@dataclass(frozen=True, slots=True)
class Answer:
    """Per site, how many GPUs of each type take each layout, and how many replicas of each shape."""

    layouts: tuple[tuple[tuple[MigGpuType, Layout, int], ...], ...]
    replicas: tuple[tuple[tuple[int, int], ...], ...]


def new_solver() -> Any:
    """A HiGHS solver that writes nothing: deterministic options, logging off. HiGHS writes its start-up
    banner at the first call that logs while ``output_flag`` is on, and highspy's ``Highs()`` makes such
    a call in its constructor (it registers its callbacks); so the option is set just before that
    call (``enableCallbacks``), by setting an option, as HiGHS documents, not by touching the process's
    file descriptors (the banner would corrupt ``plan --format json``)."""
    solver = _quiet_class()()
    for option, value in (
        ("log_to_console", False),
        ("threads", 1),
        ("random_seed", SEED),
        ("mip_rel_gap", 0.0),
        ("mip_heuristic_run_feasibility_jump", False),
    ):
        solver.setOptionValue(option, value)
    return solver


@lru_cache(maxsize=1)
def _quiet_class() -> Any:
    import highspy

    class QuietHighs(highspy.Highs):
        def enableCallbacks(self) -> None:
            self.setOptionValue("output_flag", False)  # before highspy's first call that logs
            super().enableCallbacks()  # type: ignore[no-untyped-call]

    return QuietHighs


def highspy_optimal() -> Any:
    import highspy

    return highspy.HighsModelStatus.kOptimal


def available() -> bool:
    try:
        import highspy  # noqa: F401
    except ImportError:
        return False
    return True


@lru_cache(maxsize=256)
def configurations(gpu_type: MigGpuType, profiles: tuple[str, ...]) -> tuple[tuple[Vector, int, Layout], ...]:
    """Per count vector of ``profiles`` one GPU's layout holds, the layout stranding fewest slices (then
    the first in a fixed order). Instances of other profiles stay free padding."""
    best: dict[Vector, tuple[int, tuple[tuple[str, int], ...]]] = {}
    for names, key in _every_layout(gpu_type):
        vector = tuple(names.get(p, 0) for p in profiles)
        if not any(vector):
            continue
        if vector not in best or key < best[vector]:
            best[vector] = key
    return tuple((v, s, frozenset(layout)) for v, (s, layout) in sorted(best.items()))


@lru_cache(maxsize=64)
def _every_layout(
    gpu_type: MigGpuType,
) -> tuple[tuple[Mapping[str, int], tuple[int, tuple[tuple[str, int], ...]]], ...]:
    """Every valid layout of the type once: its instances per profile, and (stranded slices, the layout
    sorted), what ``configurations`` ranks by (made once per type, not per profile list)."""
    return tuple(
        (
            Counter(name for name, _ in layout),
            (uncovered(gpu_type, layout_mask(gpu_type, layout)), tuple(sorted(layout))),
        )
        for layout in valid_layouts(gpu_type)
    )


def solve(
    sites: Sequence[Site],
    shapes: Sequence[Shape],
    profiles: tuple[str, ...],
    weights: Vector,
    node_limit: int = NODE_LIMIT,
    beat: tuple[int, int] | None = None,
) -> Answer | None:
    """Layouts per site and replicas (``shapes``: instances per profile, how many, whole GPUs) per site,
    covering every replica; None when they do not all fit (or a program is over ``MAX_COLUMNS``), or when the
    optimum of the sites pooled, a lower bound, is no better than ``beat`` (GPUs, stranded slices of an
    answer already at hand): then no site is solved.

    Site by site in order, one small program each: the replicas still to place that the site holds
    best, most memory slices first (``weights``: slices per instance of each profile), then fewest
    GPUs laid out, then fewest stranded slices. Done twice: once free, once *guided* by the optimum of
    the whole demand over all the sites pooled (a site may only take layouts that optimum still has
    unused); the guided answer when it matches that optimum, else the better of the two (fewer GPUs,
    then fewer stranded slices; the free one on a tie). When the guided answer misses that optimum (a
    site took layouts a later site needed), first all the sites in one program (``_together``, small
    programs only, 100 nodes), kept when it matches that optimum; else the best of the three."""
    pooled = _pooled(sites, len(profiles))
    asked = [n for _, n, _ in shapes]
    whole = _fill(pooled, shapes, asked, profiles, weights, node_limit, None)
    guided = together = None
    if whole is not None and whole[1] == asked:
        bound = _answer_cost(Answer((whole[0],), ()))
        if whole[2] and beat is not None and bound >= beat:
            return None  # the pooled optimum is a lower bound: the answer at hand is as good
        limits = {(t.key, layout): n for t, layout, n in whole[0]}
        guided = _sequential(sites, shapes, profiles, weights, node_limit, limits)
        if guided is not None and _answer_cost(guided) == bound:
            return guided  # as good as the pooled optimum: nothing beats it
        if len(sites) > 1:
            together = _together(sites, shapes, profiles, node_limit)
            if together is not None and _answer_cost(together) == bound:
                return together
    free = _sequential(sites, shapes, profiles, weights, node_limit, None)
    found = [a for a in (free, guided, together) if a is not None]  # on a tie, the first
    return min(found, key=_answer_cost) if found else None


def _together(
    sites: Sequence[Site], shapes: Sequence[Shape], profiles: tuple[str, ...], node_limit: int
) -> Answer | None:
    """Every site in one program (``solve``): per site its rows as in ``_site_program`` (GPUs per type,
    instances per profile, GPUs laid out plus whole), and per shape one row, all its replicas placed.
    Fewest GPUs laid out, then fewest stranded slices. None past ``TOGETHER_COLUMNS`` columns, or when
    ``TOGETHER_NODES`` nodes find no answer."""
    tables = {t.key: configurations(t, profiles) for site in sites for t, _ in site.free}
    columns = sum(len(tables[t.key]) for site in sites for t, _ in site.free) + len(sites) * len(shapes)
    if columns > TOGETHER_COLUMNS or node_limit <= 0:
        return None
    node_limit = min(node_limit, TOGETHER_NODES)
    width = len(profiles)
    scale = 8 * sum(n for site in sites for _, n in site.free) + 1  # a GPU costs more than all strands
    program = _Program()
    rows: list[tuple[float, float]] = []
    inf = float("inf")
    x: list[tuple[int, MigGpuType, int]] = []
    y: list[tuple[int, int]] = []
    ends: list[int] = []  # per site, its whole-GPU row
    for s, site in enumerate(sites):
        base = len(rows)
        rows += [(-inf, float(count)) for _, count in site.free]
        rows += [(-float(site.spare[p]), inf) for p in range(width)]
        rows.append((-inf, float(sum(n for _, n in site.free) + site.plain)))
        ends.append(len(rows) - 1)
        for row, (gpu_type, count) in enumerate(site.free):
            for k, (vector, stranded, _) in enumerate(tables[gpu_type.key]):
                entries = [(base + row, 1.0)]
                entries += [(base + len(site.free) + p, float(c)) for p, c in enumerate(vector) if c]
                program.column(scale + stranded, count, [*entries, (ends[s], 1.0)])
                x.append((s, gpu_type, k))
    first = len(rows)
    rows += [(float(n), float(n)) for _, n, _ in shapes]
    for s in range(len(sites)):
        offset = ends[s] - width
        for j, (vector, n, whole) in enumerate(shapes):
            entries = [(offset + p, -float(c)) for p, c in enumerate(vector) if c]
            entries += [(ends[s], float(whole))] if whole else []
            program.column(0.0, n, [*entries, (first + j, 1.0)])
            y.append((s, j))
    solver = new_solver()
    solver.setOptionValue("mip_max_nodes", node_limit)
    solver.passModel(program.lp(rows))
    solver.run()
    if solver.getInfo().primal_solution_status != 2:
        return None
    values = [round(v) for v in solver.getSolution().col_value]
    layouts: list[list[tuple[MigGpuType, Layout, int]]] = [[] for _ in sites]
    replicas: list[list[tuple[int, int]]] = [[] for _ in sites]
    for (s, t, k), n in zip(x, values, strict=False):
        if n > 0:
            layouts[s].append((t, tables[t.key][k][2], n))
    for (s, j), n in zip(y, values[len(x) :], strict=True):
        if n > 0:
            replicas[s].append((j, n))
    return Answer(tuple(map(tuple, layouts)), tuple(map(tuple, replicas)))


def _pooled(sites: Sequence[Site], width: int) -> Site:
    types: dict[str, tuple[MigGpuType, int]] = {}
    for site in sites:
        for t, n in site.free:
            types[t.key] = (t, types.get(t.key, (t, 0))[1] + n)
    spare = tuple(sum(site.spare[p] for site in sites) for p in range(width))
    return Site(tuple(types[key] for key in sorted(types)), spare, sum(site.plain for site in sites))


def _answer_cost(answer: Answer) -> tuple[int, int]:
    gpus = sum(n for per in answer.layouts for _, _, n in per)
    stranded = sum(n * uncovered(t, layout_mask(t, layout)) for per in answer.layouts for t, layout, n in per)
    return gpus, stranded


def _sequential(
    sites: Sequence[Site],
    shapes: Sequence[Shape],
    profiles: tuple[str, ...],
    weights: Vector,
    node_limit: int,
    limits: Mapping[tuple[str, Layout], int] | None,
) -> Answer | None:
    """The sites filled in order (see ``solve``); ``limits``: layouts the sites may still take."""
    left = [n for _, n, _ in shapes]
    budget = dict(limits) if limits is not None else None
    layouts: list[tuple[tuple[MigGpuType, Layout, int], ...]] = []
    replicas: list[tuple[tuple[int, int], ...]] = []
    for site in sites:
        if not any(left):
            layouts.append(())
            replicas.append(())
            continue
        got = _fill(site, shapes, left, profiles, weights, node_limit, budget)
        if got is None:
            return None
        laid, taken, _ = got
        if budget is not None:
            for t, layout, n in laid:
                budget[(t.key, layout)] -= n
        layouts.append(laid)
        replicas.append(tuple((s, n) for s, n in enumerate(taken) if n))
        left = [a - b for a, b in zip(left, taken, strict=True)]
    if any(left):
        return None
    return Answer(tuple(layouts), tuple(replicas))


def _fill(
    site: Site,
    shapes: Sequence[Shape],
    left: Sequence[int],
    profiles: tuple[str, ...],
    weights: Vector,
    node_limit: int,
    limits: Mapping[tuple[str, Layout], int] | None,
) -> tuple[tuple[tuple[MigGpuType, Layout, int], ...], list[int], bool] | None:
    """One site's program (see ``solve``): its layouts, the replicas of each shape it takes, and whether
    that is proven optimal (not cut by the node limit)."""
    tables = {t.key: configurations(t, profiles) for t, _ in site.free}
    if sum(len(tables[t.key]) for t, _ in site.free) + len(shapes) > MAX_COLUMNS or node_limit <= 0:
        return None
    program, rows, x = _site_program(site, tables, shapes, left, weights, limits)
    solver = new_solver()
    solver.setOptionValue("mip_max_nodes", node_limit)
    solver.passModel(program.lp(rows))
    solver.run()
    if solver.getInfo().primal_solution_status != 2:  # no feasible solution within the limit
        return None
    values = [round(v) for v in solver.getSolution().col_value]
    laid = tuple((t, tables[t.key][k][2], n) for (t, k), n in zip(x, values, strict=False) if n > 0)
    optimal = solver.getModelStatus() == highspy_optimal()
    return laid, values[len(x) :], optimal


def _site_program(
    site: Site,
    tables: Mapping[str, tuple[tuple[Vector, int, Layout], ...]],
    shapes: Sequence[Shape],
    left: Sequence[int],
    weights: Vector,
    limits: Mapping[tuple[str, Layout], int] | None,
) -> tuple[_Program, list[tuple[float, float]], list[tuple[MigGpuType, int]]]:
    """One site's program (see ``solve``): the columns, the rows' bounds, and per layout column its
    (type, configuration). Columns: per type, one per configuration (GPUs taking it), then one per
    shape (replicas placed). Rows: per type, its GPUs; per profile, instances supplied minus asked >=
    -spare; with whole GPUs, GPUs laid out plus whole GPUs <= the site's GPUs."""
    gpus = sum(n for _, n in site.free) + site.plain
    most_memory = max((t.memory_slices for t, _ in site.free), default=8)
    scale = most_memory * gpus + 1
    big = (scale + 8) * gpus + 1  # a slice placed is worth more than any layout costs
    width = len(weights)
    wholes = any(whole for _, _, whole in shapes)
    program = _Program()
    x: list[tuple[MigGpuType, int]] = []
    for row, (gpu_type, count) in enumerate(site.free):
        for k, (vector, stranded, layout) in enumerate(tables[gpu_type.key]):
            most = count if limits is None else min(count, limits.get((gpu_type.key, layout), 0))
            entries = [(row, 1.0)] + [(len(site.free) + p, float(c)) for p, c in enumerate(vector) if c]
            if wholes:
                entries.append((len(site.free) + width, 1.0))
            program.column(scale + stranded, most, entries)
            x.append((gpu_type, k))
    for (vector, _, whole), most in zip(shapes, left, strict=True):
        value = big * (sum(w * c for w, c in zip(weights, vector, strict=True)) + whole * most_memory)
        entries = [(len(site.free) + p, -float(c)) for p, c in enumerate(vector) if c]
        if whole:
            entries.append((len(site.free) + width, float(whole)))
        program.column(scale * whole - value, most, entries)
    inf = float("inf")
    rows = [(-inf, float(count)) for _, count in site.free]
    rows += [(-float(site.spare[p]), inf) for p in range(width)]
    if wholes:
        rows.append((-inf, float(gpus)))
    return program, rows, x


class _Program:
    """A minimisation over integral columns, built column by column (a column-wise sparse matrix)."""

    def __init__(self) -> None:
        self.cost: list[float] = []
        self.upper: list[float] = []
        self.start: list[int] = [0]
        self.index: list[int] = []
        self.value: list[float] = []

    def column(self, cost: float, upper: int, entries: Sequence[tuple[int, float]]) -> None:
        self.cost.append(float(cost))
        self.upper.append(float(upper))
        for row, value in entries:
            self.index.append(row)
            self.value.append(value)
        self.start.append(len(self.index))

    def lp(self, rows: Sequence[tuple[float, float]]) -> Any:
        import highspy

        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = len(self.cost), len(rows)
        lp.col_cost_, lp.col_lower_, lp.col_upper_ = self.cost, [0.0] * len(self.cost), self.upper
        lp.row_lower_ = [low for low, _ in rows]
        lp.row_upper_ = [high for _, high in rows]
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = self.start, self.index, self.value
        lp.integrality_ = [highspy.HighsVarType.kInteger] * len(self.cost)
        return lp
