"""``reconciler demo``: the whole loop, locally, with no configuration.

In a temporary workspace it makes a bare "remote" from ``sample-repo/``, starts the Palette emulator with
the sample inventory, and runs the reconcile loop against both until every sample platform is Running,
with a live view of the passes. Then it prints a summary and how to read the audit trail.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from rich.console import Console
from rich.live import Live
from rich.table import Table

from reconciler.controller import Controller, ControllerOptions, PassResult
from reconciler.emulator import EmulatorServer
from reconciler.logging import configure_logging
from reconciler.metrics import PassOutcome
from reconciler.model.conditions import Phase
from reconciler.model.desired import PlatformKey
from reconciler.palette.observe import load_snapshot
from reconciler.plan import PlatformPlan
from reconciler.server import Server

DEMO_TIMEOUT_SECONDS = 180.0


def find_sample_repo() -> Path:
    """``$RECONCILER_SAMPLE_REPO``, else ``sample-repo/`` beside the package (a source checkout)."""
    candidates = [
        os.environ.get("RECONCILER_SAMPLE_REPO"),
        str(Path(__file__).resolve().parents[2] / "sample-repo"),
        str(Path.cwd() / "sample-repo"),
    ]
    for candidate in candidates:
        if candidate and (Path(candidate) / "inventory.json").is_file():
            return Path(candidate)
    raise FileNotFoundError(
        "sample-repo/ not found: run from a source checkout or set RECONCILER_SAMPLE_REPO"
    )


def make_remote(sample: Path, workspace: Path) -> Path:
    """A bare repository holding one commit of the sample repository, as a team's Git server would."""
    work = workspace / "config"
    shutil.copytree(sample, work, ignore=shutil.ignore_patterns("inventory.json"))
    remote = workspace / "config-remote.git"
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Platform Team",
        "GIT_AUTHOR_EMAIL": "platform@example.com",
        "GIT_COMMITTER_NAME": "Platform Team",
        "GIT_COMMITTER_EMAIL": "platform@example.com",
    }

    def git(*args: str) -> None:
        subprocess.run(["git", *args], check=True, env=env, capture_output=True)

    git("init", "-q", "-b", "main", str(work))
    git("-C", str(work), "add", "-A")
    git("-C", str(work), "commit", "-q", "-m", "Sample PaletteAI compute configuration")
    git("clone", "-q", "--bare", str(work), str(remote))
    return remote


def _table(plans: list[PlatformPlan], phases: Mapping[PlatformKey, Phase], title: str) -> Table:
    table = Table(title=title)
    for column in ("platform", "phase", "cluster", "GPUs", "hosts", "reason"):
        table.add_column(column)
    for p in plans:
        cluster = p.existing.name if p.existing is not None else "-"
        gpus = ", ".join(f"{family} x{n}" for family, n in sorted(p.gpus.items())) or "-"
        hosts = f"{len(p.control_plane)} cp + {len(p.workers)} workers"
        phase = phases.get(p.key)
        table.add_row(
            f"{p.namespace}/{p.name}", str(phase) if phase else "-", cluster, gpus, hosts, str(p.reason or "")
        )
    return table


def run(keep: bool) -> int:
    console = Console() if Console().is_terminal else Console(width=160)
    configure_logging("warning")
    try:
        sample = find_sample_repo()
    except FileNotFoundError as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 2
    workspace = Path(tempfile.mkdtemp(prefix="reconciler-demo-"))
    remote = make_remote(sample, workspace)
    api_key = secrets.token_urlsafe(24)
    os.environ["PALETTE_API_KEY"] = api_key
    key_file = workspace / "palette-api-key"  # the emulator's throwaway key, for your own commands
    key_file.touch(mode=0o600)
    key_file.write_text(api_key)
    snapshot = load_snapshot(sample / "inventory.json")
    console.print(f"[bold]workspace[/bold] {workspace}")
    console.print(f"[bold]config repository[/bold] {remote} (branch main)")

    with EmulatorServer.from_snapshot(
        snapshot, api_key, provision_seconds=3.0, delete_seconds=1.0
    ) as emulator:
        catalogue = len(snapshot.cluster_profiles or [])
        console.print(
            f"[bold]Palette emulator[/bold] {emulator.url} "
            f"({len(snapshot.edge_hosts)} edge hosts, {catalogue} cluster profiles)"
        )
        options = ControllerOptions(
            repo=str(remote),
            palette_url=emulator.url,
            interval=5.0,
            resync_interval=1.0,
            cache_dir=workspace / "cache",
        )
        controller = Controller(options)
        server = Server(
            controller.metrics, webhook_secret=None, on_webhook=lambda _p: controller.request_pass()
        )
        server.start()
        console.print(f"[bold]reconciler[/bold] /metrics and /healthz at {server.url}\n")
        latest: list[PassResult] = []
        done = threading.Event()

        def on_pass(result: PassResult) -> None:
            latest.append(result)
            if result.outcome is not PassOutcome.ERROR:
                server.mark_ready()
            if result.plan and result.phases and all(ph is Phase.RUNNING for ph in result.phases.values()):
                done.set()

        loop = threading.Thread(target=controller.run_forever, args=(on_pass,), daemon=True)
        loop.start()
        started = time.monotonic()
        plans: list[PlatformPlan] = []
        with Live(console=console, refresh_per_second=4, transient=False) as live:
            while not done.is_set() and time.monotonic() - started < DEMO_TIMEOUT_SECONDS:
                if latest:
                    last = latest[-1]
                    plans = last.plan or plans
                    title = f"pass {len(latest)}: {last.outcome} (revision {str(last.revision)[:12]})"
                    live.update(_table(plans, last.phases, title))
                done.wait(0.25)
            planned = [r.plan for r in latest if r.plan]
            if planned:
                plans = planned[-1]
                live.update(_table(plans, latest[-1].phases, "summary"))
        ok = done.is_set()
        console.print()
        if ok:
            console.print(f"[green]all {len(plans)} platforms Running[/green] after {len(latest)} passes")
        else:
            console.print("[red]not every platform reached Running in time[/red]")
        console.print(
            "read the audit trail:\n"
            f"  git --git-dir {remote} log --stat reconciler/status\n"
            f"  git --git-dir {remote} show reconciler/status:project-a/mlplatforms/clearml-prod.yaml"
        )
        if keep:
            console.print(
                f"\nkept running (Ctrl-C to stop). Change the config: git clone {remote}, edit, push.\n"
                f"  PALETTE_API_KEY_FILE={key_file} reconciler plan --repo {remote} --palette {emulator.url}"
            )
            try:
                while loop.is_alive():
                    loop.join(1.0)
            except KeyboardInterrupt:
                pass
        controller.stop()
        loop.join(10.0)
        server.stop()
        controller.close()
    console.print(f"(the workspace {workspace} is left for you to read; delete it when done)")
    return 0 if ok else 1
