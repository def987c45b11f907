"""The ``reconciler`` command line, declared with typer (docs/planning.md).

This module only declares the command line; each command's work lives in ``reconciler.commands.<name>``
and is imported lazily so that ``reconciler validate`` does not pay for the HTTP or git stacks. The
process's entry point is :func:`reconciler.cli.main`, which runs an ordinary ``plan`` without loading
typer at all (``reconciler.cli_plan``) and hands every other command line to :data:`app`.
"""

from __future__ import annotations

import enum
from pathlib import Path

import typer

app = typer.Typer(
    name="reconciler",
    help="GitOps reconciler for PaletteAI compute: Git -> allocation -> Palette edge-native clusters.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
inventory_app = typer.Typer(help="Show or export the machine inventory.", no_args_is_help=True)
app.add_typer(inventory_app, name="inventory")


def _print_version(value: bool) -> None:
    if value:
        from reconciler.version import version_line

        typer.echo(version_line())
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        is_eager=True,
        callback=_print_version,
        help="Print the version and the git commit it was built from, then exit.",
    ),
) -> None:
    """GitOps reconciler for PaletteAI compute: Git -> allocation -> Palette edge-native clusters."""


_PATH_HELP = "Read only this directory of the repository (relative to its root), as Flux's spec.path."


class ValidateFormat(enum.StrEnum):
    text = "text"
    json = "json"
    github = "github"


class PlanFormat(enum.StrEnum):
    text = "text"
    json = "json"
    markdown = "markdown"


class LogLevel(enum.StrEnum):
    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"


class LeaseKind(enum.StrEnum):
    git = "git"
    kubernetes = "kubernetes"
    none = "none"


class InventoryFormat(enum.StrEnum):
    table = "table"
    yaml = "yaml"
    json = "json"


@app.command()
def validate(
    path: Path = typer.Argument(..., help="A directory (or file) of YAML manifests."),
    format: ValidateFormat = typer.Option(ValidateFormat.text, "--format", help="Output format."),
    subtree: str | None = typer.Option(None, "--path", metavar="DIR", help=_PATH_HELP),
) -> None:
    """Validate every manifest under PATH. Exit 0 when valid, 1 on errors, 2 when PATH is unreadable."""
    from reconciler.commands import validate as cmd

    raise typer.Exit(cmd.run(path, str(format), subtree))


@app.command()
def schemas(
    out: Path = typer.Option(Path("schemas"), "--out", help="Directory to write the JSON Schemas to."),
    reference: Path | None = typer.Option(
        None, "--reference", help="Also write a Markdown field reference per kind there (docs/reference)."
    ),
) -> None:
    """Write the JSON Schema of every resource kind (and, with --reference, its field reference)."""
    from reconciler.commands import schemas as cmd

    raise typer.Exit(cmd.run(out, reference))


@app.command()
def plan(
    repo: str = typer.Option(..., "--repo", help="Config repository: a directory, a bare repo or a URL."),
    rev: str | None = typer.Option(
        None, "--rev", help="Revision to plan (default: the work tree/HEAD; --from-status: the branch head)."
    ),
    inventory: Path | None = typer.Option(None, "--inventory", help="Inventory snapshot file (offline)."),
    palette: str | None = typer.Option(None, "--palette", help="Palette API URL (online)."),
    from_status: bool = typer.Option(
        False, "--from-status", help="Plan against the inventory recorded on the status branch (no Palette)."
    ),
    status_branch: str | None = typer.Option(
        None,
        "--status-branch",
        help="Status branch whose records every mode reads (default: reconciler/status).",
    ),
    no_status: bool = typer.Option(
        False, "--no-status", help="Read no status records: plan a first start (not with --from-status)."
    ),
    no_fetch: bool = typer.Option(
        False, "--no-fetch", help="Read the status branch as it is, without fetching it first."
    ),
    expect_status: str | None = typer.Option(
        None,
        "--expect-status",
        metavar="SHA",
        help="Exit 3 (stale plan) when the status branch's tip is not SHA (a full sha or a prefix).",
    ),
    branch: str | None = typer.Option(
        None,
        "--branch",
        help="Config branch planned by --from-status without --rev (default: the one the status records, "
        "else main).",
    ),
    prometheus: str | None = typer.Option(
        None,
        "--prometheus",
        help="Prometheus URL for every namespace (instead of its Settings' prometheus.url): pools with a "
        "scaling policy show this pass's scaling decision.",
    ),
    max_deletions: int = typer.Option(1, "--max-deletions", min=0, help="Most removals per pass."),
    format: PlanFormat = typer.Option(PlanFormat.text, "--format", help="Output format."),
    changes_only: bool = typer.Option(
        False, "--changes-only", help="Leave out entries with nothing to do (unchanged, admitted)."
    ),
    subtree: str | None = typer.Option(None, "--path", metavar="DIR", help=_PATH_HELP),
    what_if: list[Path] | None = typer.Option(
        None,
        "--what-if",
        metavar="FILE",
        help="Plan as if FILE were added to the revision (repeatable; a file at the same path replaces it).",
    ),
) -> None:
    """Show what a pass would do. Exit 0 all placeable, 1 rejected/invalid/held, 2 error, 3 stale."""
    from reconciler.commands import plan as cmd

    code = cmd.run(
        repo,
        rev,
        inventory,
        palette,
        max_deletions,
        str(format),
        from_status=from_status,
        status_branch=status_branch,
        branch=branch,
        changes_only=changes_only,
        prometheus=prometheus,
        subtree=subtree,
        what_if=what_if or (),
        no_status=no_status,
        fetch=not no_fetch,
        expect_status=expect_status,
    )
    raise typer.Exit(code)


@app.command()
def run(
    repo: str = typer.Option(..., "--repo", envvar="RECONCILER_REPO", help="Config repository path or URL."),
    branch: str = typer.Option("main", "--branch", envvar="RECONCILER_BRANCH"),
    palette: str | None = typer.Option(
        None, "--palette", envvar="RECONCILER_PALETTE", help="Palette API URL."
    ),
    prometheus: str | None = typer.Option(
        None,
        "--prometheus",
        envvar="RECONCILER_PROMETHEUS",
        help="Prometheus URL of every namespace's scaling policies (replaces its Settings' prometheus.url).",
    ),
    status_branch: str = typer.Option(
        "reconciler/status", "--status-branch", envvar="RECONCILER_STATUS_BRANCH"
    ),
    interval: float = typer.Option(
        60.0, "--interval", envvar="RECONCILER_INTERVAL", min=1.0, help="Seconds between git checks (>= 1)."
    ),
    max_deletions: int = typer.Option(1, "--max-deletions", envvar="RECONCILER_MAX_DELETIONS", min=0),
    once: bool = typer.Option(False, "--once", help="Run a single pass and exit."),
    listen: str = typer.Option(
        "127.0.0.1:9090",
        "--listen",
        envvar="RECONCILER_LISTEN",
        help="Address of /healthz, /metrics, webhook.",
    ),
    cache_dir: Path | None = typer.Option(None, "--cache-dir", envvar="RECONCILER_CACHE_DIR"),
    watch: bool = typer.Option(
        False,
        "--watch",
        help="--repo is a local directory: reconcile its files as they are, on every change.",
    ),
    log_level: LogLevel = typer.Option(LogLevel.info, "--log-level", envvar="RECONCILER_LOG_LEVEL"),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Plan each pass against Palette and log it; write nothing to Palette or git."
    ),
    switch_branch: bool = typer.Option(
        False,
        "--switch-branch",
        help="Let the status branch follow --branch although it recorded another config branch.",
    ),
    unhealthy_after: float | None = typer.Option(
        None,
        "--unhealthy-after",
        envvar="RECONCILER_UNHEALTHY_AFTER",
        min=1.0,
        help="/healthz answers 503 after passes failed this many seconds in a row "
        "(default: max(300, 3 x --interval)).",
    ),
    lease: LeaseKind = typer.Option(
        LeaseKind.git,
        "--lease",
        envvar="RECONCILER_LEASE",
        help="One writer: git (branch reconciler/lease), kubernetes (a Lease in the pod's namespace), none.",
    ),
    lease_duration: float = typer.Option(
        60.0, "--lease-duration", envvar="RECONCILER_LEASE_DURATION", min=3.0, help="Seconds a lease holds."
    ),
    namespaces: str | None = typer.Option(
        None,
        "--namespaces",
        envvar="RECONCILER_NAMESPACES",
        help="Own only these namespaces: comma-separated globs, e.g. 'team-a-*,ml-prod' (needs --shard).",
    ),
    shard: str | None = typer.Option(
        None,
        "--shard",
        envvar="RECONCILER_SHARD",
        help="This shard's name (a DNS-1123 label): its lease and its record shards/NAME.yaml.",
    ),
    subtree: str | None = typer.Option(
        None, "--path", metavar="DIR", envvar="RECONCILER_PATH", help=_PATH_HELP
    ),
) -> None:
    """Run the reconcile loop."""
    from reconciler.commands import run as cmd

    raise typer.Exit(
        cmd.run(
            repo=repo,
            branch=branch,
            palette=palette,
            prometheus=prometheus,
            status_branch=status_branch,
            interval=interval,
            max_deletions=max_deletions,
            once=once,
            listen=listen,
            cache_dir=cache_dir,
            watch=watch,
            log_level=str(log_level),
            dry_run=dry_run,
            switch_branch=switch_branch,
            unhealthy_after=unhealthy_after,
            lease_kind=str(lease),
            lease_duration=lease_duration,
            namespaces=namespaces,
            shard=shard,
            subtree=subtree,
        )
    )


@app.command()
def emulator(
    inventory: Path = typer.Option(..., "--inventory", help="Inventory snapshot to seed the state from."),
    host: str = typer.Option("127.0.0.1", "--host"),
    port: int = typer.Option(8080, "--port"),
    api_key: str | None = typer.Option(None, "--api-key", help="Accepted key (default: $PALETTE_API_KEY)."),
    provision_seconds: float = typer.Option(5.0, "--provision-seconds"),
    delete_seconds: float = typer.Option(2.0, "--delete-seconds"),
    faults: str | None = typer.Option(None, "--faults", help="Fault injection rules as JSON."),
    seed: int = typer.Option(0, "--seed", help="Random seed of the fault injection."),
    rate_limits: str = typer.Option(
        "palette",
        "--rate-limits",
        help="palette: enforce Palette's rate limits (429 with Retry-After); off: none (fast tests).",
    ),
) -> None:
    """Serve a local emulator of the Palette API subset."""
    from reconciler.commands import emulator as cmd

    raise typer.Exit(
        cmd.run(inventory, host, port, api_key, provision_seconds, delete_seconds, faults, seed, rate_limits)
    )


@app.command()
def demo(
    keep: bool = typer.Option(
        False, "--keep", help="Keep the loop running after everything is Running, showing each pass."
    ),
    heartbeat: float = typer.Option(
        30.0,
        "--heartbeat",
        min=0.1,
        metavar="SECONDS",
        help="With --keep: at most one idle line per SECONDS.",
    ),
) -> None:
    """The whole loop, locally, in one command: emulator + sample repo + reconciler."""
    from reconciler.commands import demo as cmd

    raise typer.Exit(cmd.run(keep, heartbeat))


@inventory_app.command("show")
def inventory_show(
    palette: str | None = typer.Option(None, "--palette", help="Palette API URL."),
    inventory: Path | None = typer.Option(None, "--inventory", help="Inventory snapshot file."),
    project_uid: str | None = typer.Option(None, "--project-uid", envvar="PALETTE_PROJECT_UID"),
    format: InventoryFormat = typer.Option(InventoryFormat.table, "--format"),
) -> None:
    """Show the Compute view of the inventory, with excluded hosts and why."""
    from reconciler.commands import inventory as cmd

    raise typer.Exit(cmd.show(palette, inventory, project_uid, str(format)))


@inventory_app.command("export")
def inventory_export(
    palette: str = typer.Option(..., "--palette", help="Palette API URL."),
    project_uid: str | None = typer.Option(None, "--project-uid", envvar="PALETTE_PROJECT_UID"),
    out: Path | None = typer.Option(None, "--out", help="File to write (default: standard output)."),
) -> None:
    """Write an inventory snapshot that the emulator and offline ``plan`` read."""
    from reconciler.commands import inventory as cmd

    raise typer.Exit(cmd.export(palette, project_uid, out))


class StatusFormat(enum.StrEnum):
    text = "text"
    json = "json"


@app.command()
def status(
    resource: str | None = typer.Argument(
        None,
        metavar="[NAMESPACE/NAME]",
        help="One resource (NAMESPACE/KIND/NAME when a name is shared, e.g. a pool and its workload).",
    ),
    repo: str = typer.Option(..., "--repo", help="Config repository: a directory, a bare repo or a URL."),
    status_branch: str = typer.Option("reconciler/status", "--status-branch"),
    history: bool = typer.Option(False, "--history", help="The resource's changes, newest first."),
    format: StatusFormat = typer.Option(StatusFormat.text, "--format", help="Output format."),
    html: Path | None = typer.Option(None, "--html", help="Write a page that draws the inventory."),
    no_fetch: bool = typer.Option(
        False, "--no-fetch", help="Read a clone's copy of the status branch as it is (said in the output)."
    ),
) -> None:
    """Show what the status branch says: every platform, pool and workload, or one and its history."""
    from reconciler.commands import status as cmd

    raise typer.Exit(cmd.run(repo, status_branch, resource, history, str(format), html, fetch=not no_fetch))
