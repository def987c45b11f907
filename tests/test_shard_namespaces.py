"""Shards (``run --namespaces``): the namespace selector and planning restricted to it (pure)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.inventory import HostState
from reconciler.model.desired import DesiredState
from reconciler.model.diagnostics import Diagnostic
from reconciler.model.observed import ManagedCluster
from reconciler.model.pools import pool_cluster_labels
from reconciler.model.resources import Resource
from reconciler.plan import Action, Observed, plan_targets, select_namespaces
from reconciler.resolve import NamespaceSelector, Target, route
from tests._allocate_support import ai_workload, cluster, cps, desired, inventory, machine, platform, pool

URL = "https://palette"
TARGET = Target(URL, "6514216503b1d1cd4f1bdc44")  # the project of tests._allocate_support.settings
NAMESPACES = ("team-a-1", "team-a-2", "team-b", "ml-prod")
PATTERNS = ("team-a-*", "team-b", "ml-prod", "team-?-1", "ml-*")


def test_globs_match_whole_namespace_names() -> None:
    selector = NamespaceSelector.parse("team-a-*, ml-prod")
    assert selector.patterns == ("team-a-*", "ml-prod")
    assert selector.owns("team-a-1") and selector.owns("ml-prod")
    assert not selector.owns("team-b") and not selector.owns("ml-prod-2") and not selector.owns("xteam-a-1")


def test_no_patterns_own_every_namespace() -> None:
    assert NamespaceSelector().owns("anything") and NamespaceSelector().everything


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "at least one"),
        ("team-a,,b", "empty entry"),
        ("Team-A", "not a namespace or glob"),
        ("a b", "not"),
    ],
)
def test_bad_namespace_lists_are_refused_saying_why(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        NamespaceSelector.parse(text)


def test_a_shard_prunes_its_own_orphan_although_other_namespaces_have_more_orphans() -> None:
    """Three orphans of team-b would block any prune under --max-deletions 1; shard team-a does not
    see them, so it deletes its one orphan and leaves team-b's clusters out of its plan entirely."""
    state = desired(platform("kept", {}, ns="team-a-1"), platform("other", {}, ns="team-b"))
    machines = [*cps(6, state=HostState.IN_USE), *cps(1, prefix="free")]
    clusters = [
        cluster("kept", ["cp-0"], [], ns="team-a-1"),
        cluster("gone", ["cp-1"], [], ns="team-a-1"),
        *(cluster(f"orphan-{i}", [f"cp-{i + 2}"], [], ns="team-b") for i in range(3)),
    ]
    selector = NamespaceSelector.parse("team-a-*")
    mine = select_namespaces(state, selector)
    plans = plan_targets(
        mine, route(mine, URL), {TARGET: Observed(inventory(machines), clusters)}, namespaces=selector
    )
    entries = {p.key: p.action for p in plans[TARGET].platforms}
    assert entries == {("team-a-1", "gone"): Action.DELETE, ("team-a-1", "kept"): Action.UNCHANGED}


@st.composite
def passes(draw: st.DrawFn) -> tuple[DesiredState, list[ManagedCluster], NamespaceSelector, int]:
    keys = st.tuples(st.sampled_from(NAMESPACES), st.sampled_from(("p1", "p2", "p3")))
    wanted = draw(st.sets(keys, max_size=6))
    pools = draw(st.sets(st.tuples(st.sampled_from(NAMESPACES), st.just("pool")), max_size=3))
    existing = draw(
        st.lists(keys | st.sampled_from(sorted(pools) or [("ml-prod", "pool")]), unique=True, max_size=6)
    )
    resources: list[Resource] = [
        platform(name, {"NVIDIA-H100": 8} if draw(st.booleans()) else {}, ns=ns)
        for ns, name in sorted(wanted)
    ]
    resources += [pool(name, {"NVIDIA-H100": 8}, ns=ns) for ns, name in sorted(pools)]
    resources += [ai_workload("job", name, {"NVIDIA-H100": 1}, ns=ns) for ns, name in sorted(pools)]
    # Each existing cluster holds one control-plane host, which Palette reports in use.
    clusters = [cluster(name, [f"cp-{i}"], [], ns=ns) for i, (ns, name) in enumerate(existing)]
    clusters = [
        replace(c, labels=pool_cluster_labels(c.namespace, c.platform, "shared"))
        if c.platform == "pool"
        else c
        for c in clusters
    ]
    if draw(st.booleans()):
        clusters = [replace(c, state="Deleting") if i % 2 else c for i, c in enumerate(clusters)]
    patterns = draw(st.lists(st.sampled_from(PATTERNS), min_size=1, max_size=3, unique=True))
    return (
        desired(*resources, complete=draw(st.booleans())),
        clusters,
        NamespaceSelector(tuple(patterns)),
        draw(st.integers(0, 3)),
    )


@given(passes())
def test_property_clusters_of_unowned_namespaces_never_appear_in_any_plan_entry(
    case: tuple[DesiredState, list[ManagedCluster], NamespaceSelector, int],
) -> None:
    state, clusters, selector, max_deletions = case
    machines = [*cps(len(clusters), state=HostState.IN_USE), *cps(6, prefix="free"), machine("g", 8)]
    observed = {TARGET: Observed(inventory(machines), clusters)}
    # Given the whole repository and every managed cluster, as a shard's pass could see them.
    plans = plan_targets(state, route(state, URL), observed, max_deletions=max_deletions, namespaces=selector)
    entries = [p for plan in plans.values() for p in plan.platforms]
    assert all(selector.owns(p.namespace) for p in entries)
    assert all(p.existing is None or selector.owns(p.existing.namespace) for p in entries)
    # And exactly what the shard would plan had the other namespaces never existed: another shard's
    # platforms, orphans and deletions change nothing, not even the prune guard's count.
    mine = select_namespaces(state, selector)
    alone = {TARGET: Observed(inventory(machines), [c for c in clusters if selector.owns(c.namespace)])}
    expected = plan_targets(mine, route(mine, URL), alone, max_deletions=max_deletions)
    assert [p.to_json() for p in entries] == [
        p.to_json() for plan in expected.values() for p in plan.platforms
    ]


def test_select_namespaces_keeps_diagnostics_without_a_namespace_and_completeness() -> None:
    state = desired(platform("a", {}, ns="team-a-1"), platform("b", {}, ns="team-b"), complete=False)
    unreadable = Diagnostic("x.yaml", 3, 1, "not YAML")
    state.diagnostics += [unreadable, Diagnostic("b.yaml", 1, 1, "bad", namespace="team-b", name="b")]
    state.invalid[("MLPlatform", "team-b", "c")] = []
    mine = select_namespaces(state, NamespaceSelector.parse("team-a-*"))
    assert {k[1] for k in mine.resources} == {"team-a-1"}
    assert mine.diagnostics == [unreadable] and not mine.invalid
    assert mine.complete is False  # an unidentified document may be any shard's: none prunes
