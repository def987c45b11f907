"""Nothing running moves without a change of its own (pure): a placed platform or pool keeps its hosts
while its own spec and what it resolves are unchanged, whatever else the repository does."""

from __future__ import annotations

from dataclasses import replace

from reconciler.inventory import HostState, Inventory, Machine
from reconciler.model.observed import ManagedCluster
from reconciler.plan import Action, PlatformPlan, make_plan
from tests._allocate_support import cluster, cps, desired, machine, platform, pool, pool_cluster

H100 = "NVIDIA-H100"
USED = HostState.IN_USE


def _applied(machines: list[Machine], entries: list[PlatformPlan]) -> tuple[Inventory, list[ManagedCluster]]:
    """The clusters once ``entries`` are carried out (deleted ones gone) and the hosts' states then."""
    clusters: list[ManagedCluster] = []
    for e in entries:
        if e.action is Action.DELETE or not (e.control_plane or e.workers):
            continue
        make = pool_cluster if e.kind == "ComputePool" else cluster
        clusters.append(make(e.name, e.control_plane, e.workers, ns=e.namespace))
    used = {u for c in clusters for u in c.hosts}
    states = [replace(m, state=USED if m.uid in used else HostState.AVAILABLE) for m in machines]
    return Inventory(tuple(states)), clusters


def _entries(
    plan_platforms: list[PlatformPlan], pools: list[PlatformPlan] | None = None
) -> list[PlatformPlan]:
    return [*plan_platforms, *(pools or [])]


def test_a_platform_on_an_8_gpu_host_stays_when_another_platform_is_deleted() -> None:
    """The reported bug: ``small`` (4 GPUs) got the only free 8-GPU host; deleting ``other`` frees a
    4-GPU host, and ``small`` was moved onto it (its only GPU worker swapped). It stays."""
    machines = [*cps(2), machine("a4", 4), machine("b8", 8)]
    other, small = platform("other", {H100: 4}), platform("small", {H100: 4})
    first = make_plan(desired(other), Inventory(tuple(machines)), [])
    inv, clusters = _applied(machines, first.platforms)
    second = make_plan(desired(other, small), inv, clusters)
    placed = second.get("project-a", "small")
    assert placed is not None and placed.workers == ("b8",)
    # ``other`` is deleted: its cluster goes, and its 4-GPU host is free again.
    inv, clusters = _applied(machines, second.platforms)
    third = make_plan(desired(small), inv, clusters)
    inv, clusters = _applied(machines, third.platforms)
    fourth = make_plan(desired(small), inv, clusters)
    kept = fourth.get("project-a", "small")
    assert kept is not None and kept.action is Action.UNCHANGED, kept
    assert kept.workers == ("b8",) and kept.control_plane == placed.control_plane


def test_a_pool_keeps_its_hosts_when_a_better_host_frees_up() -> None:
    machines = [*cps(2), machine("a4", 4, state=USED), machine("b8", 8, state=USED)]
    existing = [cluster("other", ["cp-0"], ["a4"]), pool_cluster("shared", ["cp-1"], ["b8"])]
    freed = [replace(m, state=HostState.AVAILABLE) if m.uid in ("a4", "cp-0") else m for m in machines]
    plan = make_plan(desired(pool("shared", {H100: 4})), Inventory(tuple(freed)), existing[1:])
    entry = plan.get_pool("project-a", "shared")
    assert entry is not None and entry.action is Action.UNCHANGED, entry.cluster
    assert entry.cluster.workers == ("b8",)


def test_a_change_of_its_own_still_scales_in_one_step() -> None:
    """A spec its hosts no longer meet is met as before: 4 -> 6 on a 4-GPU host takes a free 8."""
    machines = [*cps(1, state=USED), machine("n4", 4, state=USED), machine("m8", 8)]
    existing = cluster("notebooks", ["cp-0"], ["n4"])
    entry = make_plan(desired(platform("notebooks", {H100: 6})), Inventory(tuple(machines)), [existing])
    assert (entry.platforms[0].add_workers, entry.platforms[0].remove_workers) == (("m8",), ("n4",))


def test_a_scale_down_releases_hosts_it_no_longer_needs() -> None:
    machines = [*cps(1, state=USED), machine("a8", 8, state=USED), machine("b4", 4, state=USED)]
    existing = cluster("p", ["cp-0"], ["a8", "b4"])
    entry = make_plan(desired(platform("p", {H100: 8})), Inventory(tuple(machines)), [existing]).platforms[0]
    assert entry.action is Action.SCALE and entry.remove_workers == ("b4",) and entry.add_workers == ()
