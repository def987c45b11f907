"""``reconciler demo``: the whole loop, locally, with no configuration.

In a temporary workspace it makes a bare "remote" from ``sample-repo/``, starts the Palette emulator with
the sample inventory, and runs the reconcile loop against both until every sample platform is Running,
with a live view of the passes. Then it prints a summary and how to read the audit trail, and (with a
``prometheus`` binary on the PATH) shows one pool scaling up from utilisation (``demo_scaling``). With
``--keep`` the loop goes on: each pass that did something is printed as a block, idle passes as a
heartbeat line, until Ctrl-C or SIGTERM (docs/demo.md).

This module runs the scenes in order and prints the platform table and the instructions; beside it,
by job: ``demo_workspace`` (the sample repository and its bare remote), ``demo_pools`` (pools and
workloads from the status branch), ``demo_passes`` (the kept loop's blocks and heartbeat) and
``demo_scaling`` (the scaling scene).
"""

from __future__ import annotations

import os
import queue
import secrets
import signal
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import FrameType
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table

from reconciler.commands import demo_passes, demo_pools, demo_scaling, demo_workspace
from reconciler.emulator import EmulatorServer
from reconciler.logging import configure_logging
from reconciler.metrics import PassOutcome
from reconciler.model.conditions import Phase
from reconciler.model.desired import PlatformKey
from reconciler.plan import PlatformPlan
from reconciler.runtime import wiring
from reconciler.runtime.options import ControllerOptions
from reconciler.runtime.outcome import PassResult
from reconciler.runtime.pipeline import Pipeline
from reconciler.server.app import Server
from reconciler.snapshots import load_snapshot
from reconciler.source.status_reader import StatusBranch

DEMO_TIMEOUT_SECONDS = 180.0
GIT_INTERVAL_SECONDS = 5.0
SUSPEND_EXAMPLE = "project-a/platforms/notebooks.yaml"  # its last lines are under spec:


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


class _StopRequest:
    """Ctrl-C and SIGTERM set :attr:`event` (a second one interrupts at once); restored on exit."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _StopRequest:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, _signum: int, _frame: FrameType | None) -> None:
        if self.event.is_set():
            raise KeyboardInterrupt
        self.event.set()

    def __exit__(self, *_exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def _print(console: Console, line: str) -> None:
    console.print(line, markup=False, highlight=False, soft_wrap=True)


def run(keep: bool, heartbeat: float = 30.0) -> int:
    console = Console() if Console().is_terminal else Console(width=160)
    configure_logging("warning")
    try:
        sample = demo_workspace.find_sample_repo()
    except FileNotFoundError as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 2
    workspace = Path(tempfile.mkdtemp(prefix="reconciler-demo-"))
    remote = demo_workspace.make_remote(sample, workspace)
    api_key = secrets.token_urlsafe(24)
    os.environ["PALETTE_API_KEY"] = api_key
    key_file = workspace / "palette-api-key"  # the emulator's throwaway key, for your own commands
    key_file.touch(mode=0o600)
    key_file.write_text(api_key)
    snapshot = load_snapshot(sample / "inventory.json")
    console.print(f"[bold]workspace[/bold] {workspace}")
    console.print(f"[bold]config repository[/bold] {remote} (branch main)")

    with (
        _StopRequest() as stop,
        EmulatorServer.from_snapshot(
            snapshot, api_key, provision_seconds=3.0, delete_seconds=1.0
        ) as emulator,
    ):
        catalogue = len(snapshot.cluster_profiles or [])
        console.print(
            f"[bold]Palette emulator[/bold] {emulator.url} "
            f"({len(snapshot.edge_hosts)} edge hosts, {catalogue} cluster profiles)"
        )
        options = ControllerOptions(
            repo=str(remote),
            palette_url=emulator.url,
            interval=GIT_INTERVAL_SECONDS,
            resync_interval=1.0,
            cache_dir=workspace / "cache",
        )
        controller = wiring.build(options)
        server = Server(
            controller.metrics, webhook_secret=None, on_webhook=lambda _p: _start_pass(controller)
        )
        server.start()
        console.print(f"[bold]reconciler[/bold] /metrics, /healthz and /readyz at {server.url}\n")
        passes: queue.Queue[PassResult] = queue.Queue()

        def on_pass(result: PassResult) -> None:
            if result.outcome is not PassOutcome.ERROR:
                server.mark_ready()
            passes.put(result)

        loop = threading.Thread(target=controller.run_forever, args=(on_pass,), daemon=True)
        loop.start()
        try:
            ok, latest = _converge(console, passes, stop.event)
            pools_ok, pool_rows = (
                demo_pools.converge_pools(passes, stop.event, remote, latest, DEMO_TIMEOUT_SECONDS)
                if ok
                else (False, [])
            )
            _summary(console, ok, latest, remote, workspace)
            demo_pools.pool_summary(
                console, pools_ok, pool_rows, demo_pools.pool_modes(remote) if pool_rows else {}
            )
            files = StatusBranch(str(remote)).files()
            for line in [*demo_pools.bundle_lines(files), *demo_pools.environment_lines(files)]:
                _print(console, line)
            if ok and not stop.event.is_set():
                demo_scaling.scene(
                    sample, workspace, api_key, lambda line: _print(console, line), demo_workspace.make_remote
                )
            if keep and not stop.event.is_set():
                _instructions(console, remote, workspace, key_file, emulator.url, server.url, heartbeat)
                view = demo_passes.PassView(
                    demo_passes.commit_subject(remote),
                    heartbeat,
                    time.monotonic(),
                    demo_passes.commit_changes(remote),
                )
                for result in latest:
                    view.seen(result)
                demo_passes.follow(lambda line: _print(console, line), passes, stop.event, view)
        finally:
            controller.stop()
            loop.join(10.0)
            server.stop()
            controller.close()
    if stop.event.is_set():
        console.print("\nstopped.")
    console.print(f"(the workspace {workspace} is left for you to read; delete it when done)")
    return 0 if ok or keep else 1


def _converge(
    console: Console, passes: queue.Queue[PassResult], stop: threading.Event
) -> tuple[bool, list[PassResult]]:
    """Show the live table until every platform is Running (True), the timeout or a stop request."""
    latest: list[PassResult] = []
    plans: list[PlatformPlan] = []
    started = time.monotonic()
    with Live(console=console, refresh_per_second=4, transient=False) as live:
        while not stop.is_set() and time.monotonic() - started < DEMO_TIMEOUT_SECONDS:
            try:
                last = passes.get(timeout=0.25)
            except queue.Empty:
                continue
            latest.append(last)
            plans = last.plan or plans
            title = f"pass {len(latest)}: {last.outcome} (revision {str(last.revision)[:12]})"
            live.update(_table(plans, last.phases, title))
            if last.plan and last.phases and all(ph is Phase.RUNNING for ph in last.phases.values()):
                live.update(_table(plans, last.phases, "summary"))
                return True, latest
    return False, latest


def _summary(console: Console, ok: bool, latest: list[PassResult], remote: Path, workspace: Path) -> None:
    plans = next((r.plan for r in reversed(latest) if r.plan), [])
    console.print()
    if ok:
        console.print(f"[green]all {len(plans)} platforms Running[/green] after {len(latest)} passes")
    else:
        console.print("[red]not every platform reached Running[/red]")
    _print(
        console,
        "read the audit trail:\n"
        f"  git --git-dir {remote} log --stat reconciler/status\n"
        f"  git --git-dir {remote} show reconciler/status:project-a/mlplatforms/clearml-prod.yaml\n"
        "see what the status branch says (every resource, each pool's capacity, what waits and why;\n"
        "a page that draws the hosts):\n"
        f"  reconciler status --repo {remote}\n"
        f"  reconciler status --repo {remote} --html {workspace / 'status.html'}",
    )


def _instructions(
    console: Console,
    remote: Path,
    workspace: Path,
    key_file: Path,
    palette: str,
    http: str,
    heartbeat: float,
) -> None:
    clone = workspace / "edit"
    _print(
        console,
        f"\nkept running: each pass that does something is shown below, idle passes are summed up every "
        f"{heartbeat:g} s. Ctrl-C stops.\n"
        "change the configuration and see it applied "
        f"(the loop reads git every {GIT_INTERVAL_SECONDS:g} s):\n"
        f"  git clone -q {remote} {clone}\n"
        f"  cd {clone}\n"
        f"  echo '  suspend: true' >> {SUSPEND_EXAMPLE}\n"
        f'  git commit -qam "Suspend notebooks" && git push -q\n'
        "what the reconciler would do at the remote's head, without doing it:\n"
        f"  PALETTE_API_KEY_FILE={key_file} reconciler plan --repo {remote} --palette {palette}\n"
        f"HTTP: {http}/metrics, {http}/healthz, {http}/readyz "
        "(no webhook: the demo sets no secret, so /hooks/git answers 404)\n",
    )


def _start_pass(controller: Pipeline) -> bool:
    controller.request_pass()
    return True
