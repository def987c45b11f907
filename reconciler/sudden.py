"""A sudden change of the inventory is confirmed before it is acted on (pure).

Palette's inventory moves a little between passes: a host goes unhealthy, a cluster this reconciler
created takes its hosts. When a large share of it changes at once in ways that no cluster operation
explains (hosts vanish, become unusable, change GPU family, count or role; managed clusters vanish), the
likelier cause is a bad answer (a partial listing, say), not a real change. Such a pass applies nothing
and says so; the next pass acts only if it
observes the same changed inventory again (a real change persists; an odd answer rarely repeats exactly).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from reconciler.inventory import Inventory, Machine
from reconciler.model.observed import ClusterState, ManagedCluster

DEFAULT_THRESHOLD = 0.2  # a fifth of the hosts or of the managed clusters


@dataclass(frozen=True, slots=True)
class Drift:
    """How much of an observation changed since the last one that was acted on."""

    hosts_changed: int
    hosts_before: int
    clusters_gone: int
    clusters_before: int
    fingerprint: str  # of the changed observation: the same fingerprint next pass confirms it

    def sudden(self, threshold: float = DEFAULT_THRESHOLD) -> bool:
        """Over ``threshold`` of the hosts or of the clusters, and more than one (one host or cluster
        going is never sudden, however small the fleet)."""
        hosts = self.hosts_changed > 1 and self.hosts_changed / max(self.hosts_before, 1) > threshold
        gone = self.clusters_gone > 1 and self.clusters_gone / max(self.clusters_before, 1) > threshold
        return hosts or gone

    def message(self, threshold: float = DEFAULT_THRESHOLD) -> str:
        return (
            f"{self.hosts_changed} of {self.hosts_before} hosts and {self.clusters_gone} of "
            f"{self.clusters_before} managed clusters changed at once without a configuration change "
            f"(over {threshold:.0%}): nothing is applied this pass; the change is acted on when the "
            "next pass observes it again"
        )


def _facts(machine: Machine) -> tuple[object, ...]:
    # Hardware and role only: hosts joining and leaving clusters, or going unhealthy, is ordinary.
    return (machine.gpu_family, machine.gpu_count, machine.role)


def drift(
    before: Inventory,
    after: Inventory,
    clusters_before: Iterable[ManagedCluster],
    clusters_after: Iterable[ManagedCluster],
    expected_gone: Iterable[str] = (),
) -> Drift:
    """What changed from ``before`` to ``after``: a host that vanished, became unusable (excluded), or
    changed GPU family, GPU count or role counts; a host that appeared does not (new capacity cannot move
    what runs), nor one that joined or left a cluster or changed health; a cluster that was Deleting
    may vanish, and so may one this reconciler deleted or replaced since (``expected_gone``)."""
    old: Mapping[str, Machine] = before.by_uid()
    new: Mapping[str, Machine] = after.by_uid()
    changed = 0
    for uid, machine in old.items():
        now = new.get(uid)
        if now is None or _facts(now) != _facts(machine):
            changed += 1
    ours = set(expected_gone)
    known_before = {
        c.uid for c in clusters_before if c.known_state is not ClusterState.DELETING and c.uid not in ours
    }
    known_after = {c.uid for c in clusters_after}
    gone = len(known_before - known_after)
    digest = hashlib.sha256(
        json.dumps([sorted((uid, repr(_facts(m))) for uid, m in new.items()), sorted(known_after)]).encode()
    ).hexdigest()
    return Drift(changed, len(old), gone, len(known_before), digest)
