"""The apply stage: the plans carried out through Palette (or, in a dry run, logged).

Platforms' clusters first (create, scale, replace, delete; at most ``concurrency`` requests in flight),
then pools' clusters (created, scaled, MIG machine pools, deleted) and workloads' profiles (attached,
detached). Before its first write the stage confirms that the revision it holds is still the config
branch's head (``confirm``, the fence); a stop request or a lost lease stops new writes at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from reconciler.apply import apply_plan, apply_pools, apply_workload_profiles
from reconciler.logging import get_logger
from reconciler.model.desired import DesiredState, PlatformKey
from reconciler.model.pools import PoolKey, WorkloadKey
from reconciler.palette.client import PaletteClient
from reconciler.plan import Plan
from reconciler.resolve import Target
from reconciler.runtime.facts import Applied
from reconciler.status.pools import WorkloadOutcome
from reconciler.status.render import Outcome

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
) -> Applied:
    """What Palette was asked and answered for ``plans``. ``attached``: the profiles each workload had
    attached after the last pass (status branch)."""
    stop = lambda: not writes_allowed()  # noqa: E731
    clusters = _apply_platforms(desired, plans, client, confirm, stopped, stop, dry_run, concurrency)
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
    pools: dict[PoolKey, Outcome] = {}
    workloads: dict[WorkloadKey, WorkloadOutcome] = {}
    failed: dict[PlatformKey, Outcome] = {}
    for target, plan in plans.items():
        if not plan.pools:
            continue
        palette = client(target)
        pools.update(apply_pools(palette, desired, plan, stop=stop))
        done = apply_workload_profiles(palette, desired, plan, attached)
        workloads.update(done)
        failed.update({k: Outcome(ok=False, error=o.error) for k, o in done.items() if not o.ok})
    return Applied(clusters=clusters, pools=pools, workloads=workloads, failed_profiles=failed, at=now())


def _apply_platforms(
    desired: DesiredState,
    plans: Mapping[Target, Plan],
    client: Callable[[Target], PaletteClient],
    confirm: Callable[[], None],
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
    outcomes: dict[PlatformKey, Outcome] = {}
    for target, plan in todo.items():
        outcomes.update(apply_plan(client(target), desired, plan, concurrency=concurrency, stop=stop))
    return outcomes
