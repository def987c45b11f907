"""The apply stage: the plans carried out through Palette (or, in a dry run, logged).

Platforms' clusters first (create, scale, replace, delete; at most ``concurrency`` requests in flight),
then pools' clusters (created, scaled, MIG machine pools, deleted) and workloads' profiles (attached,
detached). Before its first write the stage confirms that the revision it holds is still the config
branch's head (``confirm``, the revision fence); a stop request or a lost lease stops new writes at
once, and every write asks the lease's ``fence`` at the moment it is sent (the Palette clients ask it
before each attempt; it raises :class:`~reconciler.fencing.Fenced`, which ends the pass).

Write-ahead: before the first Palette write of a pass whose scaling acts, the stage commits the status
branch with each acting pool's intent (``status/intents.py``); a failure to record it (git, a lost
lease) ends the pass before anything is written to Palette.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from reconciler.apply import apply_plan, apply_pools, apply_workload_profiles
from reconciler.logging import get_logger
from reconciler.model.desired import DesiredState, PlatformKey
from reconciler.model.outcomes import Outcome, WorkloadOutcome
from reconciler.model.pools import PoolKey, WorkloadKey
from reconciler.palette.client import PaletteClient
from reconciler.plan import Plan
from reconciler.resolve import Target
from reconciler.runtime.branch import BranchReader
from reconciler.runtime.facts import Applied
from reconciler.scaling.stage import ScalingOutcome
from reconciler.status.changes import source_trailers
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
) -> Applied:
    """What Palette was asked and answered for ``plans``. ``attached``: the profiles each workload had
    attached after the last pass (status branch). ``scaling``: the pass's scaling outcomes, whose
    actions are recorded as intended on ``status`` before any Palette write."""
    stop = lambda: not writes_allowed()  # noqa: E731
    if scaling and status is not None and not dry_run and not stopped():
        confirm()
        record_intents(status, scaling, desired.revision, now(), fence)
    clusters = _apply_platforms(desired, plans, client, confirm, fence, stopped, stop, dry_run, concurrency)
    if not any(plan.pools for plan in plans.values()):
        return Applied(clusters=clusters)
    if dry_run or stopped():
        if dry_run:
            for plan in plans.values():
                for pool in plan.pools:
                    if pool.mutating:
                        log.info(f"dry run: would {pool.action}", namespace=pool.namespace, name=pool.name)
        kept = {k: WorkloadOutcome(uids) for k, (_pool, uids) in attached.items()}
        return Applied(clusters=clusters, workloads=kept)
    confirm()
    fence()
    pools: dict[PoolKey, Outcome] = {}
    workloads: dict[WorkloadKey, WorkloadOutcome] = {}
    failed: dict[PlatformKey, Outcome] = {}
    for target, plan in plans.items():
        if not plan.pools:
            continue
        palette = client(target)
        pools.update(apply_pools(palette, desired, plan, stop=stop))
        done = apply_workload_profiles(palette, desired, plan, attached, stop=stop)
        workloads.update(done)
        failed.update({k: Outcome(ok=False, error=o.error) for k, o in done.items() if not o.ok})
    return Applied(clusters=clusters, pools=pools, workloads=workloads, failed_profiles=failed, at=now())


def _apply_platforms(
    desired: DesiredState,
    plans: Mapping[Target, Plan],
    client: Callable[[Target], PaletteClient],
    confirm: Callable[[], None],
    fence: Callable[[], None],
    stopped: Callable[[], bool],
    stop: Callable[[], bool],
    dry_run: bool,
    concurrency: int,
) -> dict[PlatformKey, Outcome]:
    todo = {t: plan for t, plan in plans.items() if any(p.mutating for p in plan.platforms)}
    if not todo:
        return {}
    if dry_run:
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
    if stopped():
        return {}
    confirm()  # never write for a revision that is no longer the head
    fence()
    outcomes: dict[PlatformKey, Outcome] = {}
    for target, plan in todo.items():
        outcomes.update(apply_plan(client(target), desired, plan, concurrency=concurrency, stop=stop))
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
