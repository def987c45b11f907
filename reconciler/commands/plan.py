"""``reconciler plan``: what one pass would do, without doing it (docs/planning.md).

The desired state comes from ``--repo``: a directory is read as it is on disk (the working tree of a
pull request, its revision the work tree's HEAD when it is a git work tree); with ``--rev``, or for a
bare repository or a URL, the revision is read from git objects. The observed state comes from exactly
one of ``--inventory FILE`` (a snapshot, offline), ``--palette URL`` (online, API key from
``PALETTE_API_KEY`` only) or ``--from-status`` (the inventory of each target last observed by ``run``,
recorded on the status branch; no Palette, no key). Every way, each namespace is routed as ``run``
routes it (one routing function, :func:`reconciler.resolve.route`): each sees the hosts of its
Settings' project only (``spec.projectMeta.uid`` = ``defaultProjectID``), and the pass is planned by
``run``'s own plan stage (:func:`reconciler.runtime.stages.plan.plan_pass`) with the same inputs,
including, with ``--from-status``, what the last pass recorded (admissions, MIG layouts, pool modes,
scaled pool sizes), so the plan is what the next pass would do.
``--changes-only`` filters the plan's JSON before any format renders it; the exit code is always that of
the whole plan. Exit codes: 0 every platform valid and placeable, 1 some platform rejected or
invalid (or some manifest could not be read at all), 2 an error (usage, unreadable repository or
inventory, Palette unreachable, no status branch or no snapshot for a target).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from reconciler import plan_report as report
from reconciler.deletions import approved_deletions
from reconciler.inventory import ExcludedHost, Inventory, Machine, discover
from reconciler.model.desired import DesiredState
from reconciler.model.observed import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from reconciler.palette.credentials import MissingAPIKey, api_key_from_env
from reconciler.palette.observe import Snapshot
from reconciler.plan import Observed, Plan, free_capacity, merge
from reconciler.resolve import Routing, Target, route
from reconciler.runtime.stages.plan import plan_pass as plan_stage
from reconciler.runtime.stages.plan import snapshot_observation
from reconciler.scaling.stage import NoSamples, SampleSource
from reconciler.status.records import NO_RECORDS, Records, read_records

EXIT_OK, EXIT_REJECTED, EXIT_ERROR = 0, 1, 2


class PlanError(Exception):
    """A problem that ends the command with exit code 2; its text never carries the API key."""


# --- inputs --------------------------------------------------------------------------------------


def load_desired(
    repo: str, rev: str | None, subtree: str = "", extra: Sequence[tuple[str, bytes]] = ()
) -> DesiredState:
    """The desired state of ``repo`` (a directory's files, or one git revision): under ``subtree``
    (``--path``), with the what-if files ``extra`` added (``reconciler.source.overlay``)."""
    from reconciler.source.directory import MissingSubtree

    path = Path(repo)
    if path.is_symlink():  # --repo is what the user named: follow it (links inside are never followed)
        path = path.resolve()
    if rev is None and (path.is_dir() or path.is_file()):
        bare, head = _work_tree_head(path) if path.is_dir() else (False, None)
        if not bare:
            from reconciler.source.directory import load_directory

            try:
                return load_directory(path, revision=head, subtree=subtree, extra=extra)
            except MissingSubtree as exc:
                raise PlanError(str(exc)) from None
    from reconciler.manifests import build_desired
    from reconciler.model.diagnostics import Severity
    from reconciler.source.documents import read_checked
    from reconciler.source.errors import SourceError
    from reconciler.source.git import SkippedEntry

    skipped: list[SkippedEntry] = []
    try:
        sha, files = read_checked(repo, rev, skipped=skipped, subtree=subtree, extra=extra)
    except SourceError as exc:
        if rev is not None:
            raise PlanError(str(exc)) from None
        # `git init --bare` may leave HEAD on a branch never pushed (master) while the config lives on
        # main, the branch `run` follows by default: plan that before giving up.
        try:
            skipped.clear()
            sha, files = read_checked(repo, "main", skipped=skipped, subtree=subtree, extra=extra)
        except SourceError:
            raise PlanError(str(exc)) from None
    desired = build_desired(files, revision=sha)  # checked files cached by blob id (source.documents)
    desired.diagnostics.extend(s.to_diagnostic() for s in skipped)
    if any(s.severity is Severity.ERROR for s in skipped):
        desired.complete = False  # a skipped manifest may hold a resource: plan no deletion
    return desired


def _work_tree_head(path: Path) -> tuple[bool, str | None]:
    """``work_tree_head`` of a directory; a plain one (no ``.git``, not a bare repository) is told
    without loading git."""
    if not (path / ".git").exists() and not (path / "HEAD").is_file():
        return False, None
    from reconciler.source.git import work_tree_head

    return work_tree_head(path)


def read_snapshot(path: Path) -> Snapshot:
    from reconciler.palette.observe import load_snapshot

    try:
        return load_snapshot(path)
    except OSError as exc:
        raise PlanError(f"cannot read inventory {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise PlanError(f"inventory {path}: {exc}") from None


def snapshot_url(path: Path) -> str:
    """The endpoint an offline plan routes every namespace to: the snapshot stands for Palette."""
    return f"inventory:{path}"


def observe_snapshot(snapshot: Snapshot, routing: Routing, url: str) -> dict[Target, Observed]:
    """What each target would observe in a Palette holding ``snapshot``, scoped exactly as ``run`` sees it.

    Besides the routed targets, the project of every managed cluster in the snapshot is observed (as
    ``run`` keeps observing the targets it manages), so a cluster whose platform is gone is still planned.
    """
    from reconciler.palette.observe import scoped

    whole = snapshot_observation(snapshot)
    targets = set(routing.targets)
    targets |= {Target(url, c.project_uid) for c in whole.clusters}
    if not targets:
        targets.add(Target(url, None))
    observed: dict[Target, Observed] = {}
    for t in targets:
        part = scoped(snapshot, t)
        # A scope holding every host and cluster (one project) is the whole snapshot: observed once.
        whole_seen = len(part.edge_hosts) == len(snapshot.edge_hosts) and len(part.clusters) == len(
            snapshot.clusters
        )
        observed[t] = whole if whole_seen else snapshot_observation(part)
    return observed


def observe_palette(url: str, routing: Routing) -> dict[Target, Observed]:
    """Each routed target read from Palette (the whole tenant when nothing is routed)."""
    from reconciler.edgehost import read_hosts
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
        facts = read_hosts(hosts)  # read once: discovery and membership take the same facts
        inventory = discover(facts)
        observed[target] = Observed(inventory, managed_clusters(clusters, facts, inventory.by_uid()))
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
    *,
    records: Records = NO_RECORDS,
    now: float | None = None,
    approved: int | None = None,
) -> Plan:
    """The plan of one pass over every target, made by the plan stage ``run`` uses
    (:func:`reconciler.runtime.stages.plan.plan_pass`) with the same inputs: ``records`` are what the
    status branch recorded (none offline). With ``prometheus`` (a URL), pools with a scaling policy show
    the scaling decision of this moment; without it no pool is decided and each keeps its recorded size."""
    samples: AbstractContextManager[SampleSource] = nullcontext(NoSamples())
    if prometheus is not None:  # the HTTP stack is imported only when a plan queries Prometheus
        from reconciler.prometheus.stage import ScalingStage

        samples = ScalingStage(prometheus)
    with samples as source:
        planned = plan_stage(
            desired,
            routing,
            observed,
            records,
            samples=source,
            now=time.time() if now is None else now,
            max_deletions=max_deletions,
            approved_deletions=approved,
        )
    plans = planned.plans
    diagnostics = next(iter(plans.values())).diagnostics if plans else desired.diagnostics
    return merge(desired.revision, plans, diagnostics)


# --- from the status branch ----------------------------------------------------------------------

DEFAULT_STATUS_BRANCH = "reconciler/status"
DEFAULT_CONFIG_BRANCH = "main"


@dataclass(frozen=True)
class StatusBasis:
    """What a ``--from-status`` plan was made against (for the heading of its report)."""

    branch: str
    commit: str | None
    observed_revision: str | None
    approved_deletions: int | None = None  # the revision's Reconciler-Allow-Deletions trailer


def observe_status(
    repo: str,
    rev: str | None,
    branch: str | None,
    status_branch: str,
    subtree: str = "",
    extra: Sequence[tuple[str, bytes]] = (),
) -> tuple[DesiredState, Routing, dict[Target, Observed], StatusBasis, Records]:
    """The desired state of ``rev`` (default: the config branch's head) routed as ``run`` routes it,
    each target observed as the status branch last recorded it (``inventory/*.json``), and what the
    last pass recorded there (admissions, MIG layouts, pool modes, scaled sizes), which ``run``'s next
    pass plans with too.

    The config branch is ``branch``, else the one ``reconciler.yaml`` records, else ``main``. Targets
    are those routed plus those ``reconciler.yaml`` lists (``run`` keeps observing a target whose last
    platform was removed, so its clusters are planned for deletion). A target without a snapshot is
    an error: the plan could not say what the next pass does there.
    """
    from reconciler.source.errors import GitError, redact
    from reconciler.source.status_reader import StatusBranch
    from reconciler.status.snapshot import SnapshotError, read_snapshots, recorded_palette

    try:
        status = StatusBranch(repo, status_branch)
    except GitError as exc:
        raise PlanError(f"cannot read the status branch of {redact(repo)}: {exc}") from None
    try:
        with status:
            if status.ref is None:
                raise PlanError(
                    f"no status branch {status_branch!r} in {redact(repo)}: the reconciler has not "
                    "committed a pass yet, or the branch was not fetched "
                    f"(git fetch origin {status_branch}:{status_branch})"
                )
            files = status.record()
            try:
                snapshots = read_snapshots(files)
                records = read_records(files)
                recorded = records.recorded
                palette = recorded_palette(files)
            except SnapshotError as exc:
                raise PlanError(f"status branch {status_branch}: {exc}") from None
            if rev is None:
                name = branch or recorded.branch or DEFAULT_CONFIG_BRANCH
                rev = status.branch_head(name)
                if rev is None:
                    raise PlanError(
                        f"no config branch {name!r} in {redact(repo)}; name the revision with --rev"
                    )
            desired = load_desired(status.location, rev, subtree, extra)
            message = status.commit_message(desired.revision) if desired.revision else None
            basis = StatusBasis(status_branch, status.tip, recorded.revision, approved_deletions(message))
    except GitError as exc:
        raise PlanError(f"cannot read the status branch {status_branch} of {redact(repo)}: {exc}") from None
    routing = route(desired, palette)
    recorded_targets = {Target(url, project) for url, project in recorded.targets}
    missing = sorted(
        (t for t in routing.targets if (t.url, t.project_uid) not in snapshots),
        key=lambda t: (t.url, t.project_uid or ""),
    )
    if missing:
        raise PlanError(
            f"status branch {status_branch} has no observed inventory for {_targets_text(missing)}: "
            "the reconciler has not observed that target yet"
        )
    # A recorded target nothing routes to any more is observed by ``run`` for its clusters to be pruned;
    # without a snapshot (never observed: unreachable) ``run`` plans nothing there either.
    unseen = sorted(
        (t for t in recorded_targets - routing.targets if (t.url, t.project_uid) not in snapshots),
        key=lambda t: (t.url, t.project_uid or ""),
    )
    if unseen:
        print(
            f"warning: no observed inventory for {_targets_text(unseen)}: its clusters are not planned",
            file=sys.stderr,
        )
    targets = (routing.targets | recorded_targets) - set(unseen)
    observed = {t: snapshot_observation(snapshots[(t.url, t.project_uid)]) for t in targets}
    return desired, routing, observed, basis, records


def _targets_text(targets: list[Target]) -> str:
    from reconciler.status.snapshot import target_file

    return ", ".join(
        f"{t.url} project {t.project_uid or '(tenant)'} ({target_file(t.url, t.project_uid)})"
        for t in targets
    )


def host_names(inventory: Inventory) -> dict[str, str]:
    """Host uid -> name for every host the plan may show (offered or excluded)."""
    names = {h.uid: h.name for h in inventory.excluded}
    names.update((m.uid, m.name) for m in inventory.machines)
    return names


# --- the command ---------------------------------------------------------------------------------


def _files_options(
    repo: str, subtree: str | None, what_if: Sequence[Path]
) -> tuple[str, list[tuple[str, bytes]]]:
    """``--path`` normalised and the ``--what-if`` files read (``reconciler.source.overlay``)."""
    from reconciler.source.overlay import WhatIfError, read_what_if
    from reconciler.source.select import SelectionError, normalize_subtree

    try:
        path = normalize_subtree(subtree)
        checkout = Path(repo) if Path(repo).is_dir() else None
        return path, read_what_if(what_if, checkout, path)
    except (SelectionError, WhatIfError) as exc:
        raise PlanError(str(exc)) from None


def run(
    repo: str,
    rev: str | None,
    inventory: Path | None,
    palette: str | None,
    max_deletions: int,
    fmt: str,
    *,
    from_status: bool = False,
    status_branch: str | None = None,
    branch: str | None = None,
    changes_only: bool = False,
    prometheus: str | None = None,
    subtree: str | None = None,
    what_if: Sequence[Path] = (),
) -> int:
    """Plan one pass and print it. Exit 0 all placeable, 1 some rejected or invalid, 2 on error.

    ``subtree`` (``--path``) reads only that directory; ``what_if`` files are added to the revision."""
    if (inventory is not None) + (palette is not None) + from_status != 1:
        print("error: give exactly one of --inventory FILE, --palette URL or --from-status", file=sys.stderr)
        return EXIT_ERROR
    if not from_status and (status_branch is not None or branch is not None):
        print("error: --status-branch and --branch only apply with --from-status", file=sys.stderr)
        return EXIT_ERROR
    basis: StatusBasis | None = None
    records = NO_RECORDS
    try:
        path, extra = _files_options(repo, subtree, what_if)
        if from_status:
            desired, routing, observed, basis, records = observe_status(
                repo, rev, branch, status_branch or DEFAULT_STATUS_BRANCH, path, extra
            )
            for problem in records.problems:  # planned as run plans them; said as run logs them
                print(f"warning: {problem.meaning}: {problem.error}", file=sys.stderr)
        else:
            desired = load_desired(repo, rev, path, extra)
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
    approved = basis.approved_deletions if basis is not None else None
    plan = plan_pass(
        desired, routing, observed, max_deletions, prometheus, records=records, approved=approved
    )
    document = plan.to_json()
    if changes_only:
        document = report.changes_only(document)
    if fmt == "json":
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        machines = whole_inventory(observed)
        free = [(c.kind, c.hosts, c.gpus) for c in free_capacity(plan, machines)]
        note = report.basis_note(
            status_branch=basis.branch if basis else None,
            status_commit=basis.commit if basis else None,
            observed_revision=basis.observed_revision if basis else None,
            changes=changes_only,
        )
        render = report.render_markdown if fmt == "markdown" else report.render_text
        sys.stdout.write(render(document, host_names(machines), note=note, free=free, changes=changes_only))
    # A document that could not even be identified (a YAML syntax error, say) may be a platform: then
    # not every platform is known to be valid, so the plan cannot say "all placeable" (exit 1).
    return EXIT_OK if plan.placeable and desired.complete else EXIT_REJECTED
