"""A platform that already has a cluster: kept, scaled in place, or replaced when allowed (pure).

Nothing running moves without a change of its own (:func:`_holds`); a different architecture or
other control-plane hosts need the ``palette.ai/allow-replace`` annotation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from reconciler import resolve
from reconciler.allocate.free_hosts import FreeHosts
from reconciler.allocate.needs import (
    ALLOW_REPLACE_ANNOTATION,
    DELETING_STATE,
    Allocation,
    Decision,
    Rejection,
    Requirements,
    allow_replace,
)
from reconciler.allocate.one_platform import Existing, Outcome, best_fresh, place_one
from reconciler.inventory import Machine
from reconciler.model.conditions import Reason
from reconciler.model.observed import ManagedCluster


def _cluster_arch(cluster: ManagedCluster, known: Mapping[str, Machine]) -> str | None:
    if cluster.arch:
        return cluster.arch
    arches = sorted({known[u].arch for u in cluster.hosts if u in known})
    return arches[0] if arches else None


def to_allocation(arch: str, outcome: Outcome, replaces: bool = False) -> Allocation:
    return Allocation(
        control_plane=tuple(outcome.control_plane),
        workers=tuple(outcome.workers),
        gpus=outcome.gpus,
        arch=arch,
        replaces=replaces,
    )


def gpus_on(workers: Iterable[str], known: Mapping[str, Machine]) -> dict[str, int]:
    """GPUs per family on ``workers`` (hosts the inventory does not list count none)."""
    gpus: dict[str, int] = {}
    for uid in workers:
        m = known.get(uid)
        if m is not None and m.gpu_family is not None and m.gpu_count > 0:
            gpus[m.gpu_family] = gpus.get(m.gpu_family, 0) + m.gpu_count
    return dict(sorted(gpus.items()))


def _holds(
    req: Requirements, arch: str, existing: Existing, known: Mapping[str, Machine], nothing: FreeHosts
) -> bool:
    """Whether a cluster's own hosts are exactly what the rules choose when offered nothing else.

    Nothing running moves without a change of its own: a cluster whose hosts still meet its needs is not
    re-optimised against hosts that freed up since (another platform removed, a better host added). Its
    hosts were the best choice among a larger offer when they were chosen, so they stay the choice among
    themselves until its needs change or one of them stops serving (architecture, resource groups).
    """
    alone = place_one(req, nothing, arch, False, existing, known)
    return (
        isinstance(alone, Outcome)
        and tuple(alone.control_plane) == tuple(sorted(existing.control_plane))
        and tuple(alone.workers) == tuple(sorted(existing.workers))
    )


def allocate_existing(
    platform: resolve.Clustered,
    req: Requirements,
    cluster: ManagedCluster,
    free: FreeHosts,
    known: Mapping[str, Machine],
) -> Decision:
    """Scale a platform's cluster in place; a different architecture needs a (permitted) replace."""
    existing = Existing(cluster.control_plane, cluster.workers)
    arch = _cluster_arch(cluster, known)
    if cluster.known_state is DELETING_STATE:
        # Its hosts are held until Palette lets go of them; the platform is placed anew after that.
        return Allocation(cluster.control_plane, cluster.workers, gpus_on(cluster.workers, known), arch or "")
    if arch is None:  # nothing known about its hosts: scale in place on the first architecture that fits
        failures: list[str] = []
        for a in free.arches(req.groups):
            attempt = place_one(req, free, a, True, existing, known)
            if isinstance(attempt, Outcome):
                free.commit(attempt.trial)
                return to_allocation(a, attempt)
            failures.append(attempt.message)
        return Rejection(Reason.INSUFFICIENT_COMPUTE, "; ".join(failures) or "no host to scale onto")
    if _holds(req, arch, existing, known, free.nothing):
        return Allocation(cluster.control_plane, cluster.workers, gpus_on(cluster.workers, known), arch)
    in_place = place_one(req, free, arch, False, existing, known)
    if isinstance(in_place, Outcome):
        swapped = sorted(set(cluster.control_plane) - set(in_place.control_plane))
        if not swapped or len(in_place.control_plane) < len(cluster.control_plane):
            free.commit(in_place.trial)
            return to_allocation(arch, in_place)
        # Control-plane hosts would be exchanged (e.g. new resource groups), not just added or removed:
        # that moves the cluster's quorum, so it is a replace, never a silent in-place scale.
        if not allow_replace(platform):
            return Rejection(
                Reason.REPLACE_BLOCKED,
                f"the spec needs other control-plane hosts than {', '.join(swapped)}; that needs a new "
                f'cluster: set annotation {ALLOW_REPLACE_ANNOTATION}: "true" to replace it',
            )
        fresh = best_fresh(req, free)
        if isinstance(fresh, Rejection):
            return fresh
        new_arch, outcome = fresh
        free.commit(outcome.trial)
        return to_allocation(new_arch, outcome, replaces=True)
    other = best_fresh(req, free, skip=arch)
    if isinstance(other, Rejection):
        return in_place
    new_arch, outcome = other
    if not allow_replace(platform):
        return Rejection(
            Reason.REPLACE_BLOCKED,
            f"cannot scale the {arch} cluster in place ({in_place.message}); the spec needs a new "
            f'{new_arch} cluster: set annotation {ALLOW_REPLACE_ANNOTATION}: "true" to replace it',
        )
    free.commit(outcome.trial)
    return to_allocation(new_arch, outcome, replaces=True)
