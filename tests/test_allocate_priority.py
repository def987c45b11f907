"""New platforms by priority (high first); within one priority the (namespace, name) order is a tie-break,
not a reason to leave capacity unused (pure)."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.model.conditions import Reason
from reconciler.model.resources import MLPlatform
from reconciler.plan import Action, Plan, make_plan
from tests._allocate_support import cluster, cps, desired, inventory, machine, platform

H100 = "NVIDIA-H100"


def prioritised(name: str, gpus: int, priority: int = 0, **kw: Any) -> MLPlatform:
    base = platform(name, {H100: gpus}, **kw)
    return base.model_copy(update={"spec": base.spec.model_copy(update={"priority": priority})})


def actions(plan: Plan) -> dict[str, Action]:
    return {p.name: p.action for p in plan.platforms}


def test_priority_defaults_to_0_and_is_part_of_the_schema() -> None:
    doc = {
        "apiVersion": "palette.ai/v1alpha1",
        "kind": "MLPlatform",
        "metadata": {"name": "p", "namespace": "n"},
    }
    assert MLPlatform.model_validate(doc).spec.priority == 0
    schema = MLPlatform.model_json_schema(by_alias=True)
    assert "priority" in str(schema)


def test_a_higher_priority_is_placed_first_when_not_all_fit() -> None:
    machines = [*cps(2), machine("g8", 8)]
    plan = make_plan(desired(prioritised("a", 8), prioritised("z", 8, priority=5)), inventory(machines), [])
    assert actions(plan) == {"a": Action.REJECTED, "z": Action.CREATE}


def test_within_one_priority_more_platforms_fit_rather_than_the_first_by_name() -> None:
    """``a`` (12) first by name would take both 8-GPU hosts; ``b`` and ``c`` (8 each) fit instead."""
    machines = [*cps(3), machine("g1", 8), machine("g2", 8)]
    state = desired(prioritised("a", 12), prioritised("b", 8), prioritised("c", 8))
    plan = make_plan(state, inventory(machines), [])
    assert actions(plan) == {"a": Action.REJECTED, "b": Action.CREATE, "c": Action.CREATE}
    rejected = plan.get("project-a", "a")
    assert rejected is not None and rejected.reason is Reason.INSUFFICIENT_COMPUTE
    assert {w for p in plan.platforms for w in p.workers} == {"g1", "g2"}


def test_priority_still_comes_before_the_count() -> None:
    machines = [*cps(3), machine("g1", 8), machine("g2", 8)]
    state = desired(prioritised("a", 12, priority=1), prioritised("b", 8), prioritised("c", 8))
    plan = make_plan(state, inventory(machines), [])
    assert actions(plan) == {"a": Action.CREATE, "b": Action.REJECTED, "c": Action.REJECTED}


def test_equal_counts_keep_the_order_and_a_placed_platform_is_never_moved_for_a_higher_one() -> None:
    machines = [*cps(3), machine("g1", 8), machine("g2", 4)]
    plan = make_plan(desired(prioritised("b", 8), prioritised("a", 8)), inventory(machines), [])
    assert actions(plan) == {"a": Action.CREATE, "b": Action.REJECTED}
    running = cluster("low", ["cp-0"], ["g1"])
    state = desired(prioritised("low", 8), prioritised("high", 8, priority=9))
    plan = make_plan(state, inventory(machines), [running])
    assert actions(plan) == {"high": Action.REJECTED, "low": Action.UNCHANGED}


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.sampled_from([1, 2, 4, 8]), min_size=1, max_size=5),
    st.lists(st.sampled_from([1, 2, 3, 4, 5, 6, 8, 12]), min_size=2, max_size=5),
)
def test_property_one_priority_places_as_many_as_any_subset_and_is_deterministic(
    hosts: list[int], requests: list[int]
) -> None:
    machines = [*cps(len(requests)), *(machine(f"g{i}", n) for i, n in enumerate(hosts))]
    platforms = [prioritised(f"p{i}", n) for i, n in enumerate(requests)]
    plan = make_plan(desired(*platforms), inventory(machines), [])
    assert plan.to_json() == make_plan(desired(*platforms), inventory(machines), []).to_json()
    placed = sum(1 for p in plan.platforms if p.action is Action.CREATE)
    best = 0
    for size in range(len(platforms), 0, -1):
        for subset in itertools.combinations(platforms, size):
            alone = make_plan(desired(*subset), inventory(machines), [])
            if all(p.action is Action.CREATE for p in alone.platforms):
                best = size
                break
        if best:
            break
    assert placed == best
