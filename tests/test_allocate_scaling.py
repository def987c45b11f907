"""Scaling in one step (docs/allocation.md) and host preference among equally good hosts."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.inventory import HostState, Inventory, Machine
from reconciler.model.observed import ManagedCluster
from reconciler.plan import Action, PlatformPlan, make_plan
from tests._allocate_support import cluster, cps, desired, inventory, machine, platform, profile

H100 = "NVIDIA-H100"
USED = HostState.IN_USE


def test_scale_up_12_to_16_is_one_entry_adding_and_removing() -> None:
    """Hosts of 8+4 hold 12; a free 8 exists: 16 is one scale, +8 -4, never 20 GPUs held."""
    machines = [*cps(1, state=USED), machine("a8", 8, state=USED), machine("b4", 4, state=USED)]
    machines.append(machine("c8", 8))
    existing = cluster("p", ["cp-0"], ["a8", "b4"])
    entry = make_plan(desired(platform("p", {H100: 16})), inventory(machines), [existing]).platforms[0]
    assert entry.action is Action.SCALE
    assert (entry.add_workers, entry.remove_workers) == (("c8",), ("b4",))
    assert entry.gpus == {H100: 16} and entry.message.endswith("workers +1 -1")


def test_scale_up_4_to_6_takes_what_a_fresh_placement_takes() -> None:
    """The demo's notebooks 4 -> 6: one free 8 serves 6 on one host; the 4 is released in the same step."""
    machines = [*cps(1, state=USED), machine("n4", 4, state=USED), machine("m8", 8), machine("z8", 8)]
    existing = cluster("notebooks", ["cp-0"], ["n4"])
    state = desired(platform("notebooks", {H100: 6}))
    entry = make_plan(state, inventory(machines), [existing]).platforms[0]
    fresh = make_plan(state, inventory([replace(m, state=HostState.AVAILABLE) for m in machines]), [])
    assert entry.gpus == fresh.platforms[0].gpus == {H100: 8}
    assert (entry.add_workers, entry.remove_workers) == (("m8",), ("n4",))


def test_equal_sets_keep_the_current_workers() -> None:
    """Sticky: among equally good sets, the one with the current hosts wins over better-named free ones."""
    machines = [*cps(1, state=USED), machine("z8", 8, state=USED), machine("a8", 8), machine("b4", 4)]
    existing = cluster("p", ["cp-0"], ["z8"])
    entry = make_plan(desired(platform("p", {H100: 12})), inventory(machines), [existing]).platforms[0]
    assert entry.workers == ("b4", "z8") and entry.remove_workers == ()


def test_platform_without_groups_takes_hosts_without_groups_first() -> None:
    """The grouped hosts come first by name; a platform asking for no groups leaves them to one that does."""
    pool = {"network-pool": "3"}
    machines = [
        machine("cp-a", 0, None, groups=pool),
        machine("cp-b", 0, None),
        machine("a-pool", 8, groups=pool),
        machine("b-plain", 8),
    ]
    state = desired(platform("open", {H100: 8}), platform("pooled", {H100: 8}, groups=pool))
    plan = make_plan(state, inventory(machines), [])
    open_, pooled = plan.get("project-a", "open"), plan.get("project-a", "pooled")
    assert open_ is not None and pooled is not None
    assert (open_.control_plane, open_.workers) == (("cp-b",), ("b-plain",))
    assert (pooled.control_plane, pooled.workers) == (("cp-a",), ("a-pool",))
    assert open_.action is Action.CREATE and pooled.action is Action.CREATE


def test_control_plane_without_groups_taken_first_too() -> None:
    machines = [machine("a-cp", 0, None, groups={"zone": "1"}), machine("b-cp", 0, None), machine("g", 8)]
    entry = make_plan(desired(platform("p", {H100: 8})), inventory(machines), []).platforms[0]
    assert entry.control_plane == ("b-cp",)


# --- the property: one step, and a fixpoint ----------------------------------------------------------


def _apply(
    machines: list[Machine], entries: list[PlatformPlan]
) -> tuple[list[Machine], list[ManagedCluster]]:
    clusters = [
        cluster(e.name, e.control_plane, e.workers, ns=e.namespace, arch=e.arch)
        for e in entries
        if e.action in (Action.CREATE, Action.SCALE, Action.UNCHANGED) and (e.control_plane or e.workers)
    ]
    used = {u for c in clusters for u in c.hosts}
    states = [replace(m, state=USED if m.uid in used else HostState.AVAILABLE) for m in machines]
    return states, clusters


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.sampled_from([1, 2, 4, 8]), min_size=1, max_size=10),
    st.sampled_from([0, 1, 2, 4, 6, 8, 12, 16, 24]),
    st.sampled_from([0, 1, 2, 4, 6, 8, 12, 16, 24]),
    st.sampled_from([None, 1, 2, 3]),
    st.integers(0, 3),
)
def test_property_scaling_holds_no_more_than_old_or_new_and_converges_in_one_step(
    sizes: list[int], before: int, after: int, min_workers: int | None, tagged: int
) -> None:
    machines = [*cps(1), *(machine(f"g{i:02d}", n) for i, n in enumerate(sizes))]
    machines += [machine(f"t{i}", 0, None, tagged=True) for i in range(tagged)]
    prof = profile(min_workers=min_workers)
    first = make_plan(desired(platform("p", {H100: before}), prof), Inventory(tuple(machines)), [])
    if first.platforms[0].action is not Action.CREATE:
        return
    old = sum(first.platforms[0].gpus.values())
    machines, clusters = _apply(machines, first.platforms)
    state = desired(platform("p", {H100: after}), prof)
    scaled = make_plan(state, Inventory(tuple(machines)), clusters).platforms[0]
    if scaled.action is not Action.SCALE:
        return
    # Where the engine lands when asked again (the final allocation): exactly this plan's, in one step.
    machines2, clusters2 = _apply(machines, [scaled])
    again = make_plan(state, Inventory(tuple(machines2)), clusters2).platforms[0]
    assert again.action is Action.UNCHANGED, (scaled, again)
    assert (again.control_plane, again.workers) == (scaled.control_plane, scaled.workers)
    final = sum(again.gpus.values())
    assert sum(scaled.gpus.values()) <= max(old, final)
    # And a scale up never holds more GPUs than a fresh placement of the same spec on the same hosts.
    fresh_hosts = [replace(m, state=HostState.AVAILABLE) for m in machines]
    fresh = make_plan(state, Inventory(tuple(fresh_hosts)), []).platforms[0]
    if fresh.action is Action.CREATE and not min_workers:
        assert sum(scaled.gpus.values()) == sum(fresh.gpus.values())
