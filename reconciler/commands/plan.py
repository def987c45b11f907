"""``reconciler plan``: what one pass would do, without doing it (DESIGN.md section 8).

The desired state comes from ``--repo``: a directory is read as it is on disk (the working tree of a
pull request, its revision the work tree's HEAD when it is a git work tree); with ``--rev``, or for a
bare repository or a URL, the revision is read from git objects. The observed state comes from exactly
one of ``--inventory FILE`` (a snapshot, offline) or ``--palette URL`` (online, API key from
``PALETTE_API_KEY`` only). Either way every namespace is routed as ``run`` routes it (one routing
function, :func:`reconciler.resolve.route`): each sees the hosts of its Settings' project only
(``spec.projectMeta.uid`` = ``defaultProjectID``), and the pass is planned by the same
:func:`reconciler.plan.plan_targets`, so the plan is what the next pass would do.
Exit codes: 0 every platform valid and placeable, 1 some platform rejected or
invalid (or some manifest could not be read at all), 2 an error (usage, unreadable repository or
inventory, Palette unreachable).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path

from rich.console import Console
from rich.table import Table

from reconciler.inventory import ExcludedHost, Inventory, Machine, discover
from reconciler.model.desired import DesiredState
from reconciler.model.observed import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from reconciler.palette.credentials import MissingAPIKey, api_key_from_env
from reconciler.palette.observe import Snapshot
from reconciler.plan import Action, Observed, Plan, PlatformPlan, free_capacity, merge, plan_targets
from reconciler.resolve import Routing, Target, route

EXIT_OK, EXIT_REJECTED, EXIT_ERROR = 0, 1, 2


class PlanError(Exception):
    """A problem that ends the command with exit code 2; its text never carries the API key."""


# --- inputs --------------------------------------------------------------------------------------


def load_desired(repo: str, rev: str | None) -> DesiredState:
    """The desired state of ``repo`` (a directory's files, or one git revision)."""
    from reconciler.source.errors import SourceError

    path = Path(repo)
    if path.is_symlink():  # --repo is what the user named: follow it (links inside are never followed)
        path = path.resolve()
    if rev is None and (path.is_dir() or path.is_file()):
        from reconciler.source.git import work_tree_head

        bare, head = work_tree_head(path) if path.is_dir() else (False, None)
        if not bare:
            from reconciler.source.directory import load_directory

            return load_directory(path, revision=head)
    from reconciler.manifests import load_files
    from reconciler.model.diagnostics import Severity
    from reconciler.source.git import SkippedEntry, read_revision

    skipped: list[SkippedEntry] = []
    try:
        sha, files = read_revision(repo, rev, skipped=skipped)
    except SourceError as exc:
        if rev is not None:
            raise PlanError(str(exc)) from None
        # `git init --bare` may leave HEAD on a branch never pushed (master) while the config lives on
        # main, the branch `run` follows by default: plan that before giving up.
        try:
            skipped.clear()
            sha, files = read_revision(repo, "main", skipped=skipped)
        except SourceError:
            raise PlanError(str(exc)) from None
    desired = load_files(files, revision=sha)
    desired.diagnostics.extend(s.to_diagnostic() for s in skipped)
    if any(s.severity is Severity.ERROR for s in skipped):
        desired.complete = False  # a skipped manifest may hold a resource: plan no deletion
    return desired


def read_snapshot(path: Path) -> Snapshot:
    from reconciler.palette.observe import load_snapshot

    try:
        return load_snapshot(path)
    except OSError as exc:
        raise PlanError(f"cannot read inventory {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise PlanError(f"inventory {path}: {exc}") from None


def _observation(snapshot: Snapshot) -> Observed:
    from reconciler.palette.observe import managed_clusters

    inventory = discover(snapshot.edge_hosts)
    clusters = managed_clusters(snapshot.clusters, snapshot.edge_hosts, inventory.by_uid())
    return Observed(inventory, clusters)


def snapshot_url(path: Path) -> str:
    """The endpoint an offline plan routes every namespace to: the snapshot stands for Palette."""
    return f"inventory:{path}"


def observe_snapshot(snapshot: Snapshot, routing: Routing, url: str) -> dict[Target, Observed]:
    """What each target would observe in a Palette holding ``snapshot``, scoped exactly as ``run`` sees it.

    Besides the routed targets, the project of every managed cluster in the snapshot is observed (as
    ``run`` keeps observing the targets it manages), so a cluster whose platform is gone is still planned.
    """
    from reconciler.palette.observe import scoped

    whole = _observation(snapshot)
    targets = set(routing.targets)
    targets |= {Target(url, c.project_uid) for c in whole.clusters}
    if not targets:
        targets.add(Target(url, None))
    return {t: whole if t.project_uid is None else _observation(scoped(snapshot, t)) for t in targets}


def observe_palette(url: str, routing: Routing) -> dict[Target, Observed]:
    """Each routed target read from Palette (the whole tenant when nothing is routed)."""
    from reconciler.palette import PaletteClient, PaletteError
    from reconciler.palette.observe import managed_clusters

    try:
        key = api_key_from_env()
    except MissingAPIKey as exc:
        raise PlanError(f"--palette needs the API key: {exc}") from None
    observed: dict[Target, Observed] = {}
    for target in sorted(routing.targets or {Target(url, None)}, key=lambda t: t.project_uid or ""):
        try:
            with PaletteClient(target.url, api_key=key, project_uid=target.project_uid) as client:
                hosts = client.search_edge_hosts()
                clusters = client.search_clusters({MANAGED_BY_LABEL: MANAGED_BY_VALUE})
        except (PaletteError, ValueError) as exc:
            raise PlanError(f"Palette at {url}: {str(exc).replace(key, '***')}") from None
        inventory = discover(hosts)
        observed[target] = Observed(inventory, managed_clusters(clusters, hosts, inventory.by_uid()))
    return observed


def whole_inventory(observed: Mapping[Target, Observed]) -> Inventory:
    """Every machine any target sees, once (for the free-capacity table)."""
    machines: dict[str, Machine] = {}
    excluded: dict[str, ExcludedHost] = {}
    for seen in observed.values():
        machines.update((m.uid, m) for m in seen.inventory.machines)
        excluded.update((h.uid, h) for h in seen.inventory.excluded)
    return Inventory(
        tuple(sorted(machines.values(), key=lambda m: (m.name, m.uid))),
        tuple(sorted(excluded.values(), key=lambda h: (h.name, h.uid))),
    )


def plan_pass(
    desired: DesiredState,
    routing: Routing,
    observed: Mapping[Target, Observed],
    max_deletions: int,
    prometheus: str | None = None,
) -> Plan:
    """The plan of one pass over every target, as ``run`` would carry it out. With ``prometheus`` (a URL),
    pools with a scaling policy show the scaling decision of this moment (without the status branch: no
    recorded action, so no cooldown)."""
    plans = plan_targets(desired, routing, observed, max_deletions=max_deletions)
    diagnostics = next(iter(plans.values())).diagnostics if plans else desired.diagnostics
    merged = merge(desired.revision, plans, diagnostics)
    if prometheus is None:
        return merged
    import time

    from reconciler.prometheus.stage import ScalingStage, evaluate

    with ScalingStage(prometheus) as stage:
        outcomes = evaluate(stage, desired, plans.values(), time.time())
    return merged.with_scaling({key: o.entry for key, o in outcomes.items()})


# --- outputs -------------------------------------------------------------------------------------


def _gpus_text(gpus: dict[str, int]) -> str:
    return ", ".join(f"{count} x {family}" for family, count in sorted(gpus.items())) or "-"


def _reason_text(p: PlatformPlan) -> str:
    return f"{p.reason}: {p.message}" if p.reason is not None else p.message


def render_text(plan: Plan, inventory: Inventory, console: Console) -> None:
    table = Table(title=f"Plan for revision {plan.revision or '(working tree)'}", title_justify="left")
    for column in ("platform", "action", "gpus", "control plane", "workers", "reason"):
        table.add_column(column, overflow="fold")
    for p in plan.platforms:
        table.add_row(
            f"{p.namespace}/{p.name}",
            str(p.action),
            _gpus_text(p.gpus),
            "\n".join(p.control_plane) or "-",
            "\n".join(p.workers) or "-",
            _reason_text(p),
        )
    console.print(table)
    free = Table(title="Free after this plan", title_justify="left")
    for column in ("kind", "hosts", "gpus"):
        free.add_column(column)
    for c in free_capacity(plan, inventory):
        free.add_row(c.kind, str(c.hosts), str(c.gpus))
    console.print(free)
    for d in plan.diagnostics:
        console.print(
            f"{d.file}:{d.line}:{d.column}: {d.severity}: {d.message}", markup=False, highlight=False
        )
    counts: dict[str, int] = {}
    for p in plan.platforms:
        counts[str(p.action)] = counts.get(str(p.action), 0) + 1
    console.print(", ".join(f"{n} {a}" for a, n in sorted(counts.items())) or "no platforms")


def _md(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")


_ICONS = {
    Action.CREATE: "create",
    Action.SCALE: "scale",
    Action.REPLACE: "**replace**",
    Action.DELETE: "**delete**",
    Action.UNCHANGED: "unchanged",
    Action.REJECTED: "**rejected**",
    Action.INVALID: "**invalid**",
    Action.SUSPENDED: "suspended",
}


def render_markdown(plan: Plan, inventory: Inventory) -> str:
    """A pull-request comment: one row per platform, then the free capacity per family."""
    revision = f"`{plan.revision[:12]}`" if plan.revision else "the working tree"
    lines = [
        f"### Reconciler plan for {revision}",
        "",
        "| Platform | Action | GPUs | Hosts | Reason |",
        "|---|---|---|---|---|",
    ]
    for p in plan.platforms:
        hosts = []
        if p.control_plane:
            hosts.append("control plane: " + ", ".join(f"`{h}`" for h in p.control_plane))
        if p.workers:
            hosts.append("workers: " + ", ".join(f"`{h}`" for h in p.workers))
        lines.append(
            f"| `{p.namespace}/{p.name}` | {_ICONS[p.action]} | {_md(_gpus_text(p.gpus))} | "
            f"{_md('<br>'.join(hosts)) or '-'} | {_md(_reason_text(p))} |"
        )
    lines += ["", "**Free capacity after this plan**", "", "| Kind | Hosts | GPUs |", "|---|---:|---:|"]
    capacity = free_capacity(plan, inventory)
    lines += [f"| {_md(c.kind)} | {c.hosts} | {c.gpus} |" for c in capacity] or ["| (none) | 0 | 0 |"]
    if plan.diagnostics:
        lines += ["", "**Diagnostics**", ""]
        lines += [
            f"- `{_md(d.file)}:{d.line}:{d.column}` {d.severity}: {_md(d.message)}" for d in plan.diagnostics
        ]
    return "\n".join(lines) + "\n"


# --- the command ---------------------------------------------------------------------------------


def run(
    repo: str,
    rev: str | None,
    inventory: Path | None,
    palette: str | None,
    max_deletions: int,
    fmt: str,
    prometheus: str | None = None,
) -> int:
    """Plan one pass and print it. Exit 0 all placeable, 1 some rejected or invalid, 2 on error."""
    if (inventory is None) == (palette is None):
        print("error: give exactly one of --inventory FILE or --palette URL", file=sys.stderr)
        return EXIT_ERROR
    try:
        desired = load_desired(repo, rev)
        if inventory is not None:
            url = snapshot_url(inventory)
            snapshot = read_snapshot(inventory)
            routing = route(desired, url)
            observed = observe_snapshot(snapshot, routing, url)
        else:
            routing = route(desired, str(palette))
            observed = observe_palette(str(palette), routing)
    except PlanError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    plan = plan_pass(desired, routing, observed, max_deletions, prometheus)
    machines = whole_inventory(observed)
    if fmt == "json":
        sys.stdout.write(json.dumps(plan.to_json(), indent=2) + "\n")
    elif fmt == "markdown":
        sys.stdout.write(render_markdown(plan, machines))
    else:
        render_text(plan, machines, Console(width=max(Console().width, 140)))
    # A document that could not even be identified (a YAML syntax error, say) may be a platform: then
    # not every platform is known to be valid, so the plan cannot say "all placeable" (exit 1).
    return EXIT_OK if plan.placeable and desired.complete else EXIT_REJECTED
