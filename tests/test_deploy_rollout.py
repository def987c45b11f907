"""A rollout of `deploy/` finishes: a small model of the Deployment controller's rolling-update arithmetic
(maxSurge, maxUnavailable, which pods are available, the ReplicaSets' scaling), of the scheduler's
topology spread over nodes, and of the reconciler's pods (one writer Lease, the readiness rule of
``reconciler.server``), run on the Deployments that `kubectl kustomize` builds from `deploy/base` and from
the sharded overlay. No cluster can run here; the model follows kube-controller-manager's
``rolloutRolling`` (``NewRSNewReplicas``, ``reconcileOldReplicaSets``, ``cleanupUnhealthyReplicas``,
``scaleDownOldReplicaSetsForRollingUpdate``) and ``kubectl rollout status``'s completion test."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from reconciler.readiness import judge_readiness
from tests.test_deploy import BASE, SHARDED, _kustomize

Readiness = Callable[["Pod", "World"], bool]


@dataclass
class Pod:
    name: str
    revision: str
    node: str
    passed: bool = False  # the reconciler's first successful pass (or, sticky, having stood by)
    ready: bool = False
    writer_ticks: int = 0  # ticks spent holding the Lease (a pass takes `pass_ticks`)


@dataclass
class World:
    replicas: int
    max_surge: int
    max_unavailable: int
    spread_skew: int | None  # maxSkew over kubernetes.io/hostname (DoNotSchedule), per revision
    nodes: tuple[str, ...]
    pass_ticks: int | None  # a writer's first pass succeeds after this many ticks; None: never
    delete_writer_first: bool
    spec: dict[str, int] = field(default_factory=dict)  # ReplicaSet (revision) -> spec.replicas
    pods: list[Pod] = field(default_factory=list)
    holder: str | None = None  # the Lease's holder
    created: int = 0
    unplaceable: int = 0  # ticks a pod could not be scheduled

    def running(self, revision: str) -> list[Pod]:
        return [p for p in self.pods if p.revision == revision]


class ModelLease:
    """The Lease as one pod sees it (the protocol ``reconciler.server`` reads)."""

    def __init__(self, pod: Pod, world: World) -> None:
        self.identity, self._world = pod.name, world

    def acquire(self) -> bool:
        return self.holds()

    def holds(self) -> bool:
        return self._world.holder == self.identity

    def release(self) -> None:
        """Not used by the readiness rule."""

    def holder(self) -> str | None:
        return self._world.holder


def reconciler_readiness(pod: Pod, world: World) -> bool:
    """What the reconciler's /readyz answers (the rule and its stickiness, as ``Server.readiness``)."""
    verdict, standing_by = judge_readiness(passed=pod.passed, problem=None, lease=ModelLease(pod, world))
    pod.passed = pod.passed or standing_by
    return verdict.ready


def lease_is_readiness(pod: Pod, world: World) -> bool:
    """The rule before: a standby answered 503, so only the writer could ever be Ready."""
    return world.holder == pod.name and pod.passed


def scaled(value: Any, replicas: int, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        exact = replicas * int(value[:-1]) / 100
        return math.ceil(exact) if round_up else math.floor(exact)
    return int(value)


def world_of(deployment: dict[str, Any], **kw: Any) -> World:
    spec = deployment["spec"]
    replicas = spec["replicas"]
    rolling = spec["strategy"]["rollingUpdate"]
    surge = scaled(rolling.get("maxSurge", "25%"), replicas, round_up=True)
    unavailable = scaled(rolling.get("maxUnavailable", "25%"), replicas, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1  # the API server refuses both zero; the controller would use 1
    skews = [
        c["maxSkew"]
        for c in spec["template"]["spec"].get("topologySpreadConstraints", [])
        if c["topologyKey"] == "kubernetes.io/hostname" and c["whenUnsatisfiable"] == "DoNotSchedule"
    ]
    return World(replicas, surge, unavailable, skews[0] if skews else None, **kw)


def schedule(world: World, revision: str) -> str | None:
    """A node for a new pod of ``revision`` that keeps the spread within maxSkew (None: Pending)."""
    counts = {n: sum(p.node == n for p in world.running(revision)) for n in world.nodes}
    for node in sorted(world.nodes, key=lambda n: counts[n]):
        if world.spread_skew is None or counts[node] + 1 - min(counts.values()) <= world.spread_skew:
            return node
    return None


def pods_tick(world: World, readiness: Readiness) -> None:
    """One step of every pod: the Lease keeper, the first pass, the readiness probe."""
    if world.holder is None:
        standbys = sorted(world.pods, key=lambda p: p.name)
        if standbys:
            world.holder = standbys[0].name  # a free Lease is taken at the next attempt
    for pod in world.pods:
        if world.holder == pod.name:
            pod.writer_ticks += 1
            if world.pass_ticks is not None and pod.writer_ticks >= world.pass_ticks:
                pod.passed = True
        pod.ready = readiness(pod, world)


def replicasets_tick(world: World) -> None:
    """Each ReplicaSet brings its pods to spec.replicas; a stopped writer releases the Lease."""
    for revision, wanted in world.spec.items():
        pods = world.running(revision)
        while len(pods) < wanted:
            node = schedule(world, revision)
            if node is None:
                world.unplaceable += 1
                break
            world.created += 1
            pod = Pod(f"{revision}-{world.created}", revision, node)
            world.pods.append(pod)
            pods.append(pod)
        for _ in range(len(pods) - wanted):
            # Not ready before ready; among ready ones the model tries both orders for the writer.
            victim = min(pods, key=lambda p: (p.ready, (p.name == world.holder) != world.delete_writer_first))
            pods.remove(victim)
            world.pods.remove(victim)
            if world.holder == victim.name:
                world.holder = None  # SIGTERM: the Lease is released, a standby takes it at once


def deployment_tick(world: World, new: str, old: str) -> None:
    """The rolling update's arithmetic, as ``rolloutRolling`` does it."""
    r = world.replicas
    total = sum(world.spec.values())
    if total < r + world.max_surge:
        world.spec[new] += min(r + world.max_surge - total, r - world.spec[new])
    min_available = r - world.max_unavailable
    new_available = sum(p.ready for p in world.running(new))
    max_scaled_down = sum(world.spec.values()) - min_available - (world.spec[new] - new_available)
    if max_scaled_down <= 0 or world.spec[old] == 0:
        return
    unhealthy = sum(not p.ready for p in world.running(old))
    cleanup = min(unhealthy, max_scaled_down, world.spec[old])
    world.spec[old] -= cleanup
    available = sum(p.ready for p in world.pods)
    if available > min_available:
        world.spec[old] -= min(available - min_available, world.spec[old])


def complete(world: World, new: str, old: str) -> bool:
    """``kubectl rollout status``: all replicas updated and available, no old pod left."""
    return (
        world.spec[new] == world.replicas
        and not world.running(old)
        and world.spec[old] == 0
        and sum(p.ready for p in world.running(new)) == world.replicas
    )


def rollout(
    deployment: dict[str, Any],
    readiness: Readiness = reconciler_readiness,
    *,
    nodes: tuple[str, ...] = ("node-1", "node-2"),
    pass_ticks: int | None = 3,
    delete_writer_first: bool = True,
    ticks: int = 60,
) -> tuple[bool, World, int]:
    """Settle revision "old" (Palette up: its writer passes), then roll out "new" with Palette as
    given; returns (complete, the world, ticks without a writer during the rollout)."""
    world = world_of(deployment, nodes=nodes, pass_ticks=3, delete_writer_first=delete_writer_first)
    world.spec = {"old": world.replicas, "new": 0}
    for _ in range(10):
        replicasets_tick(world)
        pods_tick(world, readiness)
    assert world.holder is not None and any(p.ready for p in world.pods), "the old revision never settled"
    world.pass_ticks = pass_ticks
    without_writer = 0
    for _ in range(ticks):
        deployment_tick(world, "new", "old")
        replicasets_tick(world)
        pods_tick(world, readiness)
        assert sum(world.holder == p.name for p in world.pods) <= 1
        without_writer += world.holder is None
        if complete(world, "new", "old"):
            return True, world, without_writer
    return False, world, without_writer


@pytest.fixture(scope="module")
def deployments() -> dict[str, dict[str, Any]]:
    built = {"base": _kustomize(BASE), "sharded": _kustomize(SHARDED)}
    return {
        f"{where}/{d['metadata']['name']}": d
        for where, docs in built.items()
        for d in docs
        if d["kind"] == "Deployment"
    }


@pytest.mark.parametrize("palette_up", [True, False], ids=["palette-up", "palette-down"])
@pytest.mark.parametrize("writer_first", [True, False], ids=["writer-stopped-first", "standby-stopped-first"])
def test_a_rollout_of_every_deployment_completes_with_two_replicas(
    deployments: dict[str, dict[str, Any]], palette_up: bool, writer_first: bool
) -> None:
    """base and both shards: whichever old pod goes first, and even while Palette is down (the new writer
    cannot finish a pass), the rollout completes, never below two Ready pods, never two writers."""
    assert sorted(deployments) == [
        "base/paletteai-reconciler",
        "sharded/paletteai-reconciler-a",
        "sharded/paletteai-reconciler-b",
    ]
    for name, deployment in deployments.items():
        done, world, without_writer = rollout(
            deployment, pass_ticks=3 if palette_up else None, delete_writer_first=writer_first
        )
        assert done, f"{name}: rollout stuck: {world}"
        assert world.holder is not None and world.holder.startswith("new-"), name
        assert without_writer <= 1, f"{name}: {without_writer} ticks without a writer"
        assert world.unplaceable == 0, f"{name}: a pod could not be scheduled on two nodes"
        assert {p.node for p in world.pods} == {"node-1", "node-2"}, f"{name}: replicas share a node"


def test_the_rollout_keeps_two_ready_pods_at_every_step(deployments: dict[str, dict[str, Any]]) -> None:
    deployment = deployments["base/paletteai-reconciler"]
    world = world_of(deployment, nodes=("node-1", "node-2"), pass_ticks=3, delete_writer_first=True)
    assert (world.max_surge, world.max_unavailable) == (1, 0)
    world.spec = {"old": 2, "new": 0}
    for _ in range(10):
        replicasets_tick(world)
        pods_tick(world, reconciler_readiness)
    for _ in range(30):
        deployment_tick(world, "new", "old")
        replicasets_tick(world)
        pods_tick(world, reconciler_readiness)
        assert sum(p.ready for p in world.pods) >= 2
        if complete(world, "new", "old"):
            return
    raise AssertionError("not complete")


def test_one_node_is_enough_and_the_old_rule_would_hang(deployments: dict[str, dict[str, Any]]) -> None:
    """A single-node cluster (kind, say) still rolls out: the spread has one domain. And the model does
    catch the old bug: with readiness tied to the Lease, the standby is never Ready and no rollout ends."""
    deployment = deployments["base/paletteai-reconciler"]
    assert rollout(deployment, nodes=("only-node",))[0]
    assert not rollout(deployment, lease_is_readiness)[0]
    old_strategy = {
        **deployment,
        "spec": {**deployment["spec"], "strategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}},
    }
    assert not rollout(old_strategy, lease_is_readiness)[0]
    assert rollout(old_strategy)[0]  # the readiness rule alone fixes it; the surge keeps two Ready
