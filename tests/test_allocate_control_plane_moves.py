"""A spec change that would exchange control-plane hosts is a replace, never a silent in-place scale."""

from __future__ import annotations

from reconciler.allocate import Allocation, Rejection, allocate
from reconciler.inventory import HostState, Machine
from reconciler.model.conditions import Reason
from tests._allocate_support import NS, cluster, cps, desired, inventory, machine, platform, profile

H100 = "NVIDIA-H100"
POOL = {"network-pool": "3"}


def machines() -> list[Machine]:
    return [
        *cps(1, "old", state=HostState.IN_USE),
        machine("g-old", 8, H100, state=HostState.IN_USE),
        *cps(1, "pool", groups=POOL),
        machine("g-pool", 8, H100, groups=POOL),
    ]


def test_new_resource_groups_that_need_other_control_plane_hosts_are_replace_blocked() -> None:
    state = desired(profile(node_count=1), platform("p", {H100: 8}, groups=POOL))
    decision = allocate(state, inventory(machines()), [cluster("p", ["old-0"], ["g-old"])])[(NS, "p")]
    assert isinstance(decision, Rejection)
    assert decision.reason is Reason.REPLACE_BLOCKED
    assert "old-0" in decision.message and "palette.ai/allow-replace" in decision.message


def test_with_allow_replace_they_get_a_whole_new_cluster() -> None:
    annotations = {"palette.ai/allow-replace": "true"}
    state = desired(profile(node_count=1), platform("p", {H100: 8}, groups=POOL, annotations=annotations))
    decision = allocate(state, inventory(machines()), [cluster("p", ["old-0"], ["g-old"])])[(NS, "p")]
    assert isinstance(decision, Allocation)
    assert decision.replaces
    assert decision.control_plane == ("pool-0",) and decision.workers == ("g-pool",)


def test_adding_control_plane_hosts_is_still_an_in_place_scale() -> None:
    state = desired(profile(node_count=3), platform("p", {H100: 8}))
    hosts = [
        *cps(1, "old", state=HostState.IN_USE),
        *cps(2, "new"),
        machine("g-old", 8, H100, state=HostState.IN_USE),
    ]
    decision = allocate(state, inventory(hosts), [cluster("p", ["old-0"], ["g-old"])])[(NS, "p")]
    assert isinstance(decision, Allocation)
    assert not decision.replaces
    assert decision.control_plane == ("new-0", "new-1", "old-0")
