"""A sudden change of the inventory is confirmed before it is acted on (reconciler.sudden)."""

from __future__ import annotations

from dataclasses import replace

from reconciler.inventory import HostState, Inventory
from reconciler.sudden import drift
from tests._allocate_support import cluster, machine


def fleet(n: int) -> Inventory:
    return Inventory(tuple(machine(f"h{i:02d}", 4, state=HostState.IN_USE) for i in range(n)))


def test_a_few_hosts_changing_is_not_sudden() -> None:
    before = fleet(10)
    after = Inventory((replace(before.machines[0], gpu_count=2), *before.machines[1:]))
    found = drift(before, after, [], [])
    assert (found.hosts_changed, found.hosts_before) == (1, 10) and not found.sudden()


def test_hosts_joining_leaving_clusters_or_going_unhealthy_are_ordinary() -> None:
    before = fleet(10)
    moved = [replace(m, cluster_uid="c-new", state=HostState.UNAVAILABLE) for m in before.machines[:6]]
    assert drift(before, Inventory((*moved, *before.machines[6:])), [], []).hosts_changed == 0


def test_a_third_of_the_hosts_losing_gpus_or_vanishing_is_sudden() -> None:
    before = fleet(10)
    shrunk = [replace(m, gpu_count=1) for m in before.machines[:2]]
    after = Inventory((*shrunk, *before.machines[3:]))  # h02 vanished too
    found = drift(before, after, [], [])
    assert found.hosts_changed == 3 and found.sudden()
    assert "3 of 10 hosts" in found.message() and "nothing is applied" in found.message()


def test_managed_clusters_vanishing_is_sudden_and_new_hosts_are_not() -> None:
    before = fleet(4)
    grown = Inventory((*before.machines, *(machine(f"new{i}", 8) for i in range(8))))
    clusters = [cluster(f"p{i}", [], [f"h{i:02d}"]) for i in range(4)]
    assert not drift(before, grown, clusters, clusters).sudden()
    assert drift(before, before, clusters, clusters[:2]).sudden()


def test_the_same_changed_observation_has_the_same_fingerprint() -> None:
    before = fleet(10)
    after = Inventory(before.machines[:5])
    assert drift(before, after, [], []).fingerprint == drift(before, after, [], []).fingerprint
    assert drift(before, after, [], []).fingerprint != drift(before, before, [], []).fingerprint


def test_a_cluster_that_was_deleting_may_vanish() -> None:
    before = fleet(4)
    clusters = [cluster(f"p{i}", [], [f"h{i:02d}"], state="Deleting") for i in range(4)]
    assert not drift(before, before, clusters, []).sudden()


def test_one_going_is_never_sudden_and_our_own_deletions_are_expected() -> None:
    before = fleet(3)
    clusters = [cluster(f"p{i}", [], [f"h{i:02d}"]) for i in range(3)]
    assert not drift(before, Inventory(before.machines[1:]), clusters, clusters[1:]).sudden()
    assert drift(before, before, clusters, clusters[2:]).sudden()
    deleted = [c.uid for c in clusters[:2]]
    assert not drift(before, before, clusters, clusters[2:], expected_gone=deleted).sudden()
