"""The apply stage: the plans carried out through Palette (or, in a dry run, logged).

Platforms' clusters first (create, scale, replace, delete; at most ``concurrency`` requests in flight),
then pools' clusters (created, scaled, MIG machine pools, deleted) and workloads' profiles (attached,
detached). Before its first write the stage confirms that the revision it holds is still the config
branch's head (``confirm``, the revision fence); a stop request or a lost lease stops new writes at
once, and every write asks the lease's ``fence`` at the moment it is sent (the Palette clients ask it
before each attempt; it raises :class:`~reconciler.fencing.Fenced`, which ends the pass).

Write-ahead: before the first Palette write of a pass whose scaling acts, the stage commits the status
branch with each acting pool's intent (``status/intents.py``); a failure to record it (git, a lost
lease) ends the pass before anything is written to Palette. Creates likewise (``status/creates.py``):
before a pass sends a cluster create, ``reconciler.yaml`` records it (cluster name, target, time), and a
create whose cluster Palette does not list yet is not sent again until it is listed or a lookup, after
Palette's indexing delay, confirms it absent: by the uid the create answered with (recorded in the
intent by the pass's status commit), else by name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from reconciler.apply import apply_plan, apply_pools
from reconciler.apply_profiles import apply_workload_profiles
from reconciler.logging import get_logger
from reconciler.model.desired import DesiredState, PlatformKey
from reconciler.model.observed import cluster_name
from reconciler.model.outcomes import Outcome, WorkloadOutcome
from reconciler.model.pools import POOL_KIND, PoolKey, WorkloadKey
from reconciler.palette.client import PaletteClient
from reconciler.palette.errors import PaletteError
from reconciler.plan import Action, Plan
from reconciler.resolve import Target
from reconciler.runtime.branch import BranchReader
from reconciler.runtime.facts import Applied
from reconciler.scaling.stage import ScalingOutcome
from reconciler.status.changes import source_trailers
from reconciler.status.creates import (
    CreateIntent,
    Found,
    TargetKey,
    Wanted,
    answered,
    gate,
    read_creates,
    with_creates,
)
from reconciler.status.intents import intent_message, intent_tree

log = get_logger(component="controller")


def apply_pass(
    desired: DesiredState,
    plans: Mapping[Target, Plan],
    attached: Mapping[WorkloadKey, tuple[str, tuple[str, ...]]],
    *,
    client: Callable[[Target], PaletteClient],
    confirm: Callable[[], None],
    stopped: Callable[[], bool],
    writes_allowed: Callable[[], bool],
    now: Callable[[], float],
    dry_run: bool,
    concurrency: int,
    fence: Callable[[], None],
    scaling: Mapping[PoolKey, ScalingOutcome] | None = None,
    status: BranchReader | None = None,
    listed: Mapping[TargetKey, Iterable[str]] | None = None,
) -> Applied:
    """What Palette was asked and answered for ``plans``. ``attached``: the profiles each workload had
    attached after the last pass (status branch). ``scaling``: the pass's scaling outcomes, whose
    actions are recorded as intended on ``status`` before any Palette write. ``listed``: the names of
    the clusters each observed target lists (what resolves a recorded create)."""
    creates: tuple[CreateIntent, ...] | None = None
    if status is not None and not dry_run and not stopped():
        if scaling:
            confirm()
            record_intents(status, scaling, desired.revision, now(), fence)
        plans, creates = gate_creates(
            plans, status, client, listed or {}, now(), confirm, fence, desired.revision
        )
    writes = _Writes(client, confirm, fence, stopped, lambda: not writes_allowed(), now, dry_run, concurrency)
    applied = _apply_pass(desired, plans, attached, writes)
    if creates is None:
        return applied
    return replace(applied, creates=answered(creates, _created_uids(applied)))


def _created_uids(applied: Applied) -> dict[tuple[str, str, str], str]:
    """The uid each cluster write of the pass answered with, by (kind, namespace, name): a create's
    resolves its intent (``status/creates.py``)."""
    out = {("MLPlatform", *k): o.cluster_uid for k, o in applied.clusters.items() if o.ok and o.cluster_uid}
    out.update({(POOL_KIND, *k): o.cluster_uid for k, o in applied.pools.items() if o.ok and o.cluster_uid})
    return out


@dataclass(frozen=True, slots=True)
class _Writes:
    """How the pass writes: a target's Palette client, the revision fence (``confirm``), the lease's
    fence, whether a stop was asked (``stopped``: no new step starts) or writes must end at once
    (``stop``: lost lease or stop), the clock, and the dry-run and concurrency options."""

    client: Callable[[Target], PaletteClient]
    confirm: Callable[[], None]
    fence: Callable[[], None]
    stopped: Callable[[], bool]
    stop: Callable[[], bool]
    now: Callable[[], float]
    dry_run: bool
    concurrency: int

    def begin(self) -> None:
        """Before a stage's first write: never for a revision that is no longer the head, nor without
        the lease."""
        self.confirm()
        self.fence()


def _apply_pass(
    desired: DesiredState,
    plans: Mapping[Target, Plan],
    attached: Mapping[WorkloadKey, tuple[str, tuple[str, ...]]],
    writes: _Writes,
) -> Applied:
    clusters = _apply_platforms(desired, plans, writes)
    if not any(plan.pools for plan in plans.values()):
        return Applied(clusters=clusters)
    if writes.dry_run or writes.stopped():
        if writes.dry_run:
            for plan in plans.values():
                for pool in plan.pools:
                    if pool.mutating:
                        log.info(f"dry run: would {pool.action}", namespace=pool.namespace, name=pool.name)
        kept = {k: WorkloadOutcome(uids) for k, (_pool, uids) in attached.items()}
        return Applied(clusters=clusters, workloads=kept)
    writes.begin()
    pools: dict[PoolKey, Outcome] = {}
    workloads: dict[WorkloadKey, WorkloadOutcome] = {}
    failed: dict[PlatformKey, Outcome] = {}
    for target, plan in plans.items():
        if not plan.pools:
            continue
        palette = writes.client(target)
        pools.update(apply_pools(palette, desired, plan, stop=writes.stop))
        done = apply_workload_profiles(palette, desired, plan, attached, stop=writes.stop)
        workloads.update(done)
        failed.update({k: Outcome(ok=False, error=o.error) for k, o in done.items() if not o.ok})
    return Applied(
        clusters=clusters, pools=pools, workloads=workloads, failed_profiles=failed, at=writes.now()
    )


def _apply_platforms(
    desired: DesiredState, plans: Mapping[Target, Plan], writes: _Writes
) -> dict[PlatformKey, Outcome]:
    todo = {t: plan for t, plan in plans.items() if any(p.mutating for p in plan.platforms)}
    if not todo:
        return {}
    if writes.dry_run:
        for plan in todo.values():
            for p in plan.platforms:
                if p.mutating:
                    log.info(
                        f"dry run: would {p.action}",
                        namespace=p.namespace,
                        name=p.name,
                        message=p.message,
                        control_plane=sorted(p.control_plane),
                        workers=sorted(p.workers),
                    )
        return {}
    if writes.stopped():
        return {}
    writes.begin()
    outcomes: dict[PlatformKey, Outcome] = {}
    for target, plan in todo.items():
        palette = writes.client(target)
        outcomes.update(apply_plan(palette, desired, plan, concurrency=writes.concurrency, stop=writes.stop))
    return outcomes


def record_intents(
    status: BranchReader,
    scaling: Mapping[PoolKey, ScalingOutcome],
    revision: str | None,
    at: float,
    fence: Callable[[], None],
) -> str | None:
    """Commit the status branch with each acting pool's intent (write-ahead); the commit, or None when
    nothing acts. Raises what the store raises (a git failure, :class:`~reconciler.fencing.Fenced`)."""
    blocks = {key: block for key, o in scaling.items() if (block := o.intent(at)) is not None}
    if not blocks:
        return None
    fence()
    records = status.records()
    tree = intent_tree(records.files, records.docs, blocks)
    commit = status.branch.write(
        tree,
        intent_message(blocks),
        source_trailers(revision, None),
        expected=status.tip,  # a compare-and-swap on the tip the pass planned from
        may_push=None,  # the store asks the lease's fence right before the push
    )
    status.wrote(tree, commit)
    log.info("scaling intent recorded before its Palette write", commit=commit, pools=len(blocks))
    return commit


def wanted_creates(plans: Mapping[Target, Plan]) -> list[Wanted]:
    """The cluster creates the plans ask for (platforms' and pools')."""
    out: list[Wanted] = []
    for target, plan in plans.items():
        for p in plan.platforms:
            if p.action is Action.CREATE:
                name = cluster_name(p.namespace, p.name)
                out.append(Wanted(target.url, target.project_uid, name, "MLPlatform", p.namespace, p.name))
        for pool in plan.pools:
            if pool.action is Action.CREATE:
                name = cluster_name(pool.namespace, pool.name)
                out.append(Wanted(target.url, target.project_uid, name, POOL_KIND, pool.namespace, pool.name))
    return out


def _look_up(client: Callable[[Target], PaletteClient], intent: CreateIntent) -> Found:
    """A recorded create's cluster read directly by its uid (known from the create's answer or an
    earlier lookup), else searched by name: its uid, False when absent, True when Palette could not
    be asked (not confirmed absent: not created this pass)."""
    palette = client(Target(intent.url, intent.project_uid))
    try:
        if intent.uid is not None:
            return intent.uid if palette.get_cluster(intent.uid) is not None else False
        found = palette.find_cluster_by_name(intent.cluster)
    except PaletteError as exc:
        log.warning("could not look up a recorded create", cluster=intent.cluster, error=str(exc))
        return True
    if found is None:
        return False
    uid = (found.get("metadata") or {}).get("uid")
    return uid if isinstance(uid, str) and uid else True


def gate_creates(
    plans: Mapping[Target, Plan],
    status: BranchReader,
    client: Callable[[Target], PaletteClient],
    listed: Mapping[TargetKey, Iterable[str]],
    at: float,
    confirm: Callable[[], None],
    fence: Callable[[], None],
    revision: str | None,
) -> tuple[Mapping[Target, Plan], tuple[CreateIntent, ...] | None]:
    """The plans without the creates held back (their cluster may exist: see ``status/creates.py``),
    and the intents to record; the creates to send are committed to the status branch first. None:
    no create is recorded or wanted."""
    records = status.records()
    intents = read_creates(records.files)
    wanted = wanted_creates(plans)
    if not intents and not wanted:
        return plans, None

    decided = gate(intents, wanted, listed, at, lambda intent: _look_up(client, intent))
    for (_target, name), why in sorted(decided.held.items()):
        log.warning("create held back: its cluster may exist", cluster=name, reason=why)
    if decided.send and decided.intents != intents:
        confirm()
        fence()
        tree = with_creates(records.files, decided.intents)
        names = ", ".join(w.cluster for w in decided.send)
        commit = status.branch.write(
            tree,
            f"create intent (before the Palette write)\n\n{names}\n",
            source_trailers(revision, None),
            expected=status.tip,
            may_push=None,
        )
        status.wrote(tree, commit)
        log.info("create intent recorded before its Palette write", commit=commit, clusters=len(decided.send))
    if not decided.held:
        return plans, decided.intents
    held = {(t, name) for (t, name) in decided.held}
    out: dict[Target, Plan] = {}
    for target, plan in plans.items():
        key = (target.url, target.project_uid)

        def keep(action: Action, namespace: str, name: str, key: TargetKey = key) -> bool:
            return action is not Action.CREATE or (key, cluster_name(namespace, name)) not in held

        out[target] = replace(
            plan,
            platforms=[p for p in plan.platforms if keep(p.action, p.namespace, p.name)],
            pools=[p for p in plan.pools if keep(p.action, p.namespace, p.name)],
        )
    return out, decided.intents
