"""Property tests of the allocation engine and planner over random inventories and platforms."""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler import resolve
from reconciler.allocate import Allocation, Rejection, allocate, optimal_count_vectors
from reconciler.inventory import HostState, Inventory, Machine, Role
from reconciler.model.conditions import Reason
from reconciler.model.desired import DesiredState
from reconciler.model.observed import ManagedCluster
from reconciler.model.resources import ComputeProfile, MLPlatform, Resource
from reconciler.plan import Action, make_plan
from tests._allocate_support import cluster, desired, machine, plans_in_two_orders, platform, profile

FAMILIES = ("NVIDIA-H100", "NVIDIA-A100")
PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def machines_st(
    draw: st.DrawFn, max_size: int = 14, arches: Sequence[str] = ("amd64", "arm64")
) -> list[Machine]:
    n = draw(st.integers(1, max_size))
    out = []
    for i in range(n):
        gpus = draw(st.sampled_from([0, 0, 1, 2, 4, 8]))
        tagged = draw(st.booleans()) if gpus == 0 else draw(st.sampled_from([False, False, False, True]))
        cp_tagged = gpus > 0 and not tagged and draw(st.sampled_from([False, False, False, True]))
        out.append(
            machine(
                f"h{i:02d}",
                gpus,
                draw(st.sampled_from(FAMILIES)),
                arch=draw(st.sampled_from(arches)),
                role=Role.CONTROL_PLANE if cp_tagged else None,
                tagged=tagged,
                groups=draw(st.sampled_from([{}, {"pool": "1"}, {"pool": "2"}])),
                state=draw(st.sampled_from([HostState.AVAILABLE] * 5 + [HostState.UNAVAILABLE])),
            )
        )
    return out


@st.composite
def platforms_st(draw: st.DrawFn, max_size: int = 4) -> list[Resource]:
    n = draw(st.integers(1, max_size))
    resources: list[Resource] = [
        profile(
            node_count=draw(st.sampled_from([1, 1, 3])),
            min_workers=draw(st.sampled_from([None, 0, 1, 2, 3])),
            limits=draw(st.sampled_from([{}, {"nvidia h100": 12}])),
        )
    ]
    for i in range(n):
        gpus = {
            f: draw(st.sampled_from([0, 1, 3, 4, 8, 12, 16]))
            for f in draw(st.sets(st.sampled_from(FAMILIES)))
        }
        resources.append(
            platform(
                f"p{i}",
                gpus,
                ns=draw(st.sampled_from(["project-a", "project-a", "project-b"])),
                override_min=draw(st.sampled_from([None, None, 0, 2])),
                groups=draw(st.sampled_from([{}, {}, {"pool": "1"}])),
                suspend=draw(st.sampled_from([False] * 7 + [True])),
            )
        )
    # Every namespace gets the same profile so that platforms of project-b resolve one too.
    profiles = [r for r in resources if isinstance(r, ComputeProfile)]
    spec = profiles[0].model_dump(by_alias=True)
    spec["metadata"]["namespace"] = "project-b"
    resources.append(ComputeProfile.model_validate(spec))
    return resources


def _check_allocation(
    state: DesiredState, p: MLPlatform, a: Allocation, machines: dict[str, Machine]
) -> None:
    prof = resolve.compute_profile(state, p)
    assert prof is not None
    cp = [machines[u] for u in a.control_plane]
    workers = [machines[u] for u in a.workers]
    assert len(cp) == prof.spec.control_plane_defaults.node_count
    assert all(m.role is Role.CONTROL_PLANE for m in cp)
    assert all(m.role is Role.WORKER for m in workers)
    assert {m.arch for m in cp + workers} == {a.arch}
    assert all(m.in_groups(p.spec.resource_groups) for m in cp + workers)
    have: dict[str, int] = {}
    for m in workers:
        if m.gpu_family and m.gpu_count:
            have[m.gpu_family] = have.get(m.gpu_family, 0) + m.gpu_count
    assert have == a.gpus
    for req in p.spec.gpus:
        assert have.get(req.family, 0) >= req.count
    override = p.spec.compute_profile_ref.override if p.spec.compute_profile_ref else None
    minimum = override.min_worker_nodes if override and override.min_worker_nodes is not None else None
    if minimum is None:
        minimum = prof.spec.min_worker_nodes or 0
    assert len(workers) >= minimum


@PROPS
@given(machines_st(), platforms_st())
def test_property_allocations_respect_every_rule(machines: list[Machine], resources: list[Resource]) -> None:
    state = desired(*resources)
    decisions = allocate(state, Inventory(tuple(machines)), [])
    by_uid = {m.uid: m for m in machines}
    seen: set[str] = set()
    for p in state.platforms():
        key = (p.metadata.namespace, p.metadata.name)
        if p.spec.suspend:
            assert key not in decisions
            continue
        d = decisions[key]
        if isinstance(d, Rejection):
            assert d.reason in (Reason.INSUFFICIENT_COMPUTE, Reason.GPU_LIMIT_EXCEEDED)
            continue
        assert all(by_uid[u].available for u in d.hosts)
        assert not seen & set(d.hosts), "a host in two clusters"
        seen |= set(d.hosts)
        _check_allocation(state, p, d, by_uid)


@PROPS
@given(machines_st(), platforms_st(), st.randoms(use_true_random=False))
def test_property_same_input_in_any_order_gives_the_same_plan(
    machines: list[Machine], resources: list[Resource], rnd: random.Random
) -> None:
    first, second = plans_in_two_orders(machines, resources, rnd)
    assert first.to_json() == second.to_json()
    assert first.platforms == second.platforms


@PROPS
@given(machines_st(), platforms_st())
def test_property_applied_plan_replans_unchanged(machines: list[Machine], resources: list[Resource]) -> None:
    """Sticky and stable: once a plan's creates are applied, the next plan changes nothing."""
    state = desired(*resources)
    plan = make_plan(state, Inventory(tuple(machines)), [])
    clusters: list[ManagedCluster] = []
    for e in plan.platforms:
        if e.action is Action.CREATE:
            clusters.append(cluster(e.name, e.control_plane, e.workers, ns=e.namespace, arch=e.arch))
    used = {u for c in clusters for u in c.hosts}
    after = tuple(replace(m, state=HostState.IN_USE) if m.uid in used else m for m in machines)
    again = make_plan(state, Inventory(after), clusters)
    for e in again.platforms:
        before = plan.get(e.namespace, e.name)
        assert before is not None
        if before.action is Action.CREATE:
            assert e.action is Action.UNCHANGED, (e, before)
            assert (e.control_plane, e.workers) == (before.control_plane, before.workers)


@PROPS
@given(machines_st(), platforms_st(max_size=1))
def test_property_single_platform_rejected_only_when_infeasible(
    machines: list[Machine], resources: list[Resource]
) -> None:
    state = desired(*resources)
    (p,) = state.platforms()
    decision = allocate(state, Inventory(tuple(machines)), []).get((p.metadata.namespace, p.metadata.name))
    if not isinstance(decision, Rejection) or decision.reason is not Reason.INSUFFICIENT_COMPUTE:
        return
    prof = resolve.compute_profile(state, p)
    assert prof is not None
    override = p.spec.compute_profile_ref.override if p.spec.compute_profile_ref else None
    minimum = override.min_worker_nodes if override and override.min_worker_nodes is not None else None
    minimum = prof.spec.min_worker_nodes or 0 if minimum is None else minimum
    for arch in ("amd64", "arm64"):
        free = [m for m in machines if m.available and m.arch == arch and m.in_groups(p.spec.resource_groups)]
        cps = [m for m in free if m.role is Role.CONTROL_PLANE]
        workers = [m for m in free if m.role is Role.WORKER]
        gpus_ok = all(
            sum(m.gpu_count for m in workers if m.gpu_family == r.family) >= r.count for r in p.spec.gpus
        )
        feasible = (
            len(cps) >= prof.spec.control_plane_defaults.node_count and gpus_ok and len(workers) >= minimum
        )
        assert not feasible, f"rejected although {arch} could host it: {decision.message}"


def _brute_force(hosts: list[Machine], request: int) -> tuple[str, ...] | None:
    best: tuple[int, int, list[tuple[str, str]]] | None = None
    for r in range(len(hosts) + 1):
        for combo in itertools.combinations(hosts, r):
            total = sum(m.gpu_count for m in combo)
            if total < request:
                continue
            key = (total - request, r, sorted((m.name, m.uid) for m in combo))
            if best is None or key < best:
                best = key
    return None if best is None else tuple(sorted(uid for _, uid in best[2]))


@PROPS
@given(
    st.lists(st.sampled_from([1, 2, 3, 4, 6, 8]), min_size=0, max_size=9),
    st.integers(0, 40),
    st.randoms(use_true_random=False),
)
def test_property_gpu_worker_choice_equals_brute_force(
    counts: list[int], request: int, rnd: random.Random
) -> None:
    names = [f"n{i:02d}" for i in range(len(counts))]
    rnd.shuffle(names)
    hosts = [machine(name, c) for name, c in zip(names, counts, strict=True)]
    state = desired(platform("p", {"NVIDIA-H100": request}))
    decision = allocate(state, Inventory((*hosts, machine("cp", 0, None))), [])[("project-a", "p")]
    expected = _brute_force(hosts, request)
    if expected is None:
        assert isinstance(decision, Rejection)
    else:
        assert isinstance(decision, Allocation)
        assert decision.workers == expected


@PROPS
@given(
    st.dictionaries(st.sampled_from([1, 2, 3, 4, 5, 8]), st.integers(0, 3), max_size=4), st.integers(0, 30)
)
def test_property_optimal_count_vectors_match_brute_force(available: dict[int, int], request: int) -> None:
    items = [c for c, a in available.items() for _ in range(a)]
    best: tuple[int, int] | None = None
    optimal: set[tuple[tuple[int, int], ...]] = set()
    for r in range(len(items) + 1):
        for combo in itertools.combinations(items, r):
            if sum(combo) < request:
                continue
            key = (sum(combo) - request, r)
            vec = tuple(sorted((c, combo.count(c)) for c in set(combo)))
            if best is None or key < best:
                best, optimal = key, {vec}
            elif key == best:
                optimal.add(vec)
    got = {tuple(sorted(v.items())) for v in optimal_count_vectors(available, request)}
    assert got == optimal


@PROPS
@given(machines_st(), platforms_st(), platforms_st())
def test_property_changed_specs_never_share_a_host(
    machines: list[Machine], before: list[Resource], after: list[Resource]
) -> None:
    """Apply a plan, change every spec, plan again: still no host in two clusters, every rule met."""
    plan = make_plan(desired(*before), Inventory(tuple(machines)), [])
    clusters = [
        cluster(e.name, e.control_plane, e.workers, ns=e.namespace, arch=e.arch)
        for e in plan.platforms
        if e.action is Action.CREATE
    ]
    used = {u for c in clusters for u in c.hosts}
    inv = Inventory(tuple(replace(m, state=HostState.IN_USE) if m.uid in used else m for m in machines))
    state = desired(*after)
    again = make_plan(state, inv, clusters, max_deletions=10)
    assert make_plan(state, inv, clusters[::-1], max_deletions=10).platforms == again.platforms
    by_uid = {m.uid: m for m in machines}
    seen: set[str] = set()
    for e in again.platforms:
        hosts = set(e.control_plane + e.workers)
        if e.action is Action.DELETE:
            continue
        assert not seen & hosts, "a host in two clusters"
        seen |= hosts
        placed = e.action in (Action.CREATE, Action.SCALE, Action.REPLACE)
        if placed or (e.action is Action.UNCHANGED and e.reason is not Reason.PRUNE_BLOCKED):
            p = next(p for p in state.platforms() if (p.metadata.namespace, p.metadata.name) == e.key)
            alloc = Allocation(e.control_plane, e.workers, e.gpus, e.arch or "")
            _check_allocation(state, p, alloc, by_uid)
