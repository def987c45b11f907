"""``reconciler demo``: the whole loop, locally, with no configuration.

In a temporary workspace it makes a bare "remote" from ``sample-repo/``, starts the Palette emulator with
the sample inventory, and runs the reconcile loop against both until every sample platform is Running,
with a live view of the passes. Then it prints a summary and how to read the audit trail, and (with a
``prometheus`` binary on the PATH) shows one pool scaling up from utilisation (``demo_scaling``). With
``--keep`` the loop goes on: each pass that did something is printed as a block, idle passes as a
heartbeat line, until Ctrl-C or SIGTERM (docs/demo.md).
"""

from __future__ import annotations

import os
import queue
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table

from reconciler.commands import demo_scaling
from reconciler.emulator import EmulatorServer
from reconciler.logging import configure_logging
from reconciler.metrics import PassOutcome
from reconciler.model.conditions import Phase
from reconciler.model.desired import PlatformKey
from reconciler.palette.observe import load_snapshot
from reconciler.plan import DONE, Action, PlatformPlan
from reconciler.runtime import wiring
from reconciler.runtime.options import ControllerOptions
from reconciler.runtime.outcome import PassResult
from reconciler.runtime.pipeline import Pipeline
from reconciler.server.app import Server
from reconciler.source.status_reader import StatusBranch
from reconciler.status.view import ResourceRow, load_yaml, rows

DEMO_TIMEOUT_SECONDS = 180.0
GIT_INTERVAL_SECONDS = 5.0
SUSPEND_EXAMPLE = "project-a/platforms/notebooks.yaml"  # its last lines are under spec:


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
    # The server's repository has no upstream: readers of its status branch read it, not an "origin".
    git("--git-dir", str(remote), "remote", "remove", "origin")
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


# -- the kept loop: one block per pass that did something, a heartbeat for idle ones ----------------

_LABELS = DONE


def _entry_line(p: PlatformPlan) -> str:
    def named(uids: tuple[str, ...]) -> list[str]:
        return [m.name if (m := p.machines.get(uid)) is not None else uid for uid in uids]

    label = _LABELS[p.action]
    hosts = named((*p.control_plane, *p.workers))
    if p.action is Action.SCALE:
        added = named((*p.add_control_plane, *p.add_workers))
        removed = named((*p.remove_control_plane, *p.remove_workers))
        change = " ".join([*(f"+{h}" for h in added), *(f"-{h}" for h in removed)])
        detail = f"{change}; now {', '.join(hosts)}"
    elif p.action in (Action.REJECTED, Action.INVALID):
        detail = p.message
    elif p.action is Action.SUSPENDED:
        detail = f"{p.message}" + (f" (hosts {', '.join(hosts)})" if hosts else "")
    elif p.action is Action.DELETE and p.existing is not None:
        detail = f"cluster {p.existing.name}, hosts {', '.join(hosts) or '-'}"
    else:
        detail = f"hosts {', '.join(hosts) or '-'}"
    return f"  {label:<10} {p.namespace}/{p.name}: {detail}"


class PassView:
    """Turns the loop's passes into text: a block for a pass that did something, else a count.

    A pass "did something" when it acted on Palette (created, scaled, replaced or deleted a cluster),
    committed status, moved a platform's phase, ran at a new revision, or failed differently from the
    pass before. Every other pass is idle: it is counted, and :meth:`heartbeat` sums the count up in one
    line at most every ``heartbeat`` seconds. ``subject`` gives a commit's subject line; ``changes`` the
    lines of a status commit's body about pools and workloads (each with its reason), shown under it.
    """

    def __init__(
        self,
        subject: Callable[[str], str],
        heartbeat: float,
        now: float,
        changes: Callable[[str], list[str]] | None = None,
    ) -> None:
        self._subject = subject
        self._changes = changes
        self._every = heartbeat
        self._last_beat = now
        self._idle = 0
        self._revision: str | None = None
        self._phases: dict[PlatformKey, Phase] = {}
        self._error: str | None = None
        self.passes = 0

    def seen(self, result: PassResult) -> None:
        """Record a pass without showing it (the passes up to the first convergence have the table)."""
        self.passes += 1
        self._revision = result.revision or self._revision
        self._phases = dict(result.phases) or self._phases
        self._error = result.error

    def block(self, result: PassResult, now: float) -> list[str]:
        """The lines that show ``result``, or none when the pass was idle (then it is counted)."""
        self.passes += 1
        acted = [p for p in result.plan if p.action in _LABELS]
        moved: list[tuple[PlatformKey, Phase | None, Phase | None]] = []
        reported = bool(result.phases or result.plan)  # an error or standby pass says nothing of phases
        if reported:
            moved += [
                (key, self._phases.get(key), phase)
                for key, phase in sorted(result.phases.items())
                if self._phases.get(key) != phase
            ]
            moved += [(key, ph, None) for key, ph in sorted(self._phases.items()) if key not in result.phases]
        new_revision = result.revision is not None and result.revision != self._revision
        new_error = result.error is not None and result.error != self._error
        busy = result.commit or any(p.mutating for p in acted) or moved or new_revision or new_error
        self._revision = result.revision or self._revision
        self._phases = dict(result.phases) if reported else self._phases
        self._error = result.error
        if not busy:
            self._idle += 1
            return []
        self._idle, self._last_beat = 0, now
        revision = result.revision or "unknown"
        lines = [
            f"{_clock()} pass {self.passes}: {result.outcome} at revision {revision[:12]} "
            f'"{self._subject(revision)}" ({result.duration:.1f} s)'
        ]
        lines += [_entry_line(p) for p in acted]
        lines += [
            f"  {'phase':<10} {ns}/{name}: {old or '-'} -> {new or 'gone'}" for (ns, name), old, new in moved
        ]
        if result.commit:
            lines.append(f'  status commit {result.commit[:12]} "{self._subject(result.commit)}"')
            if self._changes is not None:
                lines += [f"    {line}" for line in self._changes(result.commit)]
        if result.error:
            lines.append(f"  error: {result.error}")
        return lines

    def heartbeat(self, now: float) -> str | None:
        """One line summing up the idle passes, when some happened and ``heartbeat`` seconds have passed."""
        if self._idle == 0 or now - self._last_beat < self._every:
            return None
        counts: dict[str, int] = {}
        for phase in self._phases.values():
            counts[str(phase)] = counts.get(str(phase), 0) + 1
        phases = ", ".join(f"{n} {phase}" for phase, n in sorted(counts.items())) or "no platforms"
        state = f"still failing: {self._error}" if self._error else "nothing to do"
        count = f"{self._idle} pass" + ("" if self._idle == 1 else "es")
        line = (
            f"{_clock()} idle: {count} in {now - self._last_beat:.0f} s, {state} "
            f"(revision {(self._revision or 'unknown')[:12]}; {phases})"
        )
        self._idle, self._last_beat = 0, now
        return line


def _clock() -> str:
    return datetime.now().strftime("%H:%M:%S")


def _commit_subject(remote: Path) -> Callable[[str], str]:
    cache: dict[str, str] = {}

    def subject(sha: str) -> str:
        if sha not in cache:
            proc = subprocess.run(
                ["git", "--git-dir", str(remote), "log", "-1", "--format=%s", sha, "--"],
                capture_output=True,
                text=True,
            )
            if proc.returncode != 0:
                return "?"
            cache[sha] = proc.stdout.strip()
        return cache[sha]

    return subject


_POOL_LINES = ("ComputePool ", "AIWorkload ")


def _commit_changes(remote: Path) -> Callable[[str], list[str]]:
    """The body lines of a status commit about pools and workloads: what moved and why."""

    def changes(sha: str) -> list[str]:
        proc = subprocess.run(
            ["git", "--git-dir", str(remote), "log", "-1", "--format=%b", sha, "--"],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            return []
        return [line for line in proc.stdout.splitlines() if line.startswith(_POOL_LINES)]

    return changes


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
            pools_ok, pool_rows = _converge_pools(passes, stop.event, remote, latest) if ok else (False, [])
            _summary(console, ok, latest, remote, workspace)
            _pool_summary(console, pools_ok, pool_rows, _pool_modes(remote) if pool_rows else {})
            files = StatusBranch(str(remote)).files()
            for line in [*bundle_lines(files), *environment_lines(files)]:
                _print(console, line)
            if ok and not stop.event.is_set():
                demo_scaling.scene(
                    sample, workspace, api_key, lambda line: _print(console, line), make_remote
                )
            if keep and not stop.event.is_set():
                _instructions(console, remote, workspace, key_file, emulator.url, server.url, heartbeat)
                view = PassView(_commit_subject(remote), heartbeat, time.monotonic(), _commit_changes(remote))
                for result in latest:
                    view.seen(result)
                _follow(console, passes, stop.event, view)
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


# -- pools and workloads ---------------------------------------------------------------------------

_POOL_KINDS = ("ComputePool", "AIWorkload")
_SETTLED = {"Running", "Pending", "Rejected", "Invalid", "Suspended"}


def _pool_rows(remote: Path) -> list[ResourceRow]:
    """The pools and workloads (AIWorkloads, shared MLPlatforms) the status branch reports."""
    branch = StatusBranch(str(remote))
    files = branch.files()
    shared = {p for p, d in files.items() if "/mlplatforms/" in p and b"\n  pool: " in d}
    return [r for r in rows(files) if r.kind in _POOL_KINDS or (r.kind == "MLPlatform" and r.path in shared)]


def _pool_modes(remote: Path) -> dict[str, str]:
    """Pool status path -> its mode (shared | dedicated)."""
    out: dict[str, str] = {}
    for path, data in StatusBranch(str(remote)).files().items():
        if "/computepools/" in path:
            doc = load_yaml(data)
            status = doc.get("status") if isinstance(doc, dict) else None
            if isinstance(status, dict) and status.get("mode"):
                out[path] = str(status["mode"])
    return out


def _pools_settled(found: list[ResourceRow]) -> bool:
    """Every pool Running; every workload Running, or waiting for a reason other than its pool."""
    pools = [r for r in found if r.kind == "ComputePool"]
    workloads = [r for r in found if r.kind != "ComputePool"]
    return (
        bool(pools)
        and all(r.phase == "Running" for r in pools)
        and all(r.phase in _SETTLED and r.reason != "PoolNotReady" for r in workloads)
    )


def _converge_pools(
    passes: queue.Queue[PassResult], stop: threading.Event, remote: Path, latest: list[PassResult]
) -> tuple[bool, list[ResourceRow]]:
    """After the platforms: wait until the pools are Running and their workloads settled (their
    profiles are attached once the pool cluster runs, which may take another pass)."""
    found = _pool_rows(remote)
    started = time.monotonic()
    while not stop.is_set() and time.monotonic() - started < DEMO_TIMEOUT_SECONDS:
        if _pools_settled(found):
            return True, found
        try:
            latest.append(passes.get(timeout=0.5))
        except queue.Empty:
            continue
        found = _pool_rows(remote)
    return _pools_settled(found), found


def _pool_summary(console: Console, ok: bool, found: list[ResourceRow], modes: Mapping[str, str]) -> None:
    if not found:
        return
    table = Table(title="pools and workloads")
    for column in ("resource", "kind", "phase", "cluster", "GPUs", "reason"):
        table.add_column(column)
    for r in sorted(found, key=lambda r: (r.kind != "ComputePool", r.namespace, r.name)):
        gpus = ", ".join(f"{family} x{n}" for family, n in sorted(r.gpus.items())) or "-"
        reason = r.reason or ""
        if r.phase == "Pending" and r.message:
            reason = f"{reason}: {r.message}"
        kind = f"{r.kind} ({modes[r.path]})" if r.path in modes else r.kind
        table.add_row(r.key, kind, r.phase or "-", r.cluster or "-", gpus, reason)
    console.print(table)
    pools = sum(1 for r in found if r.kind == "ComputePool")
    running = sum(1 for r in found if r.kind != "ComputePool" and r.phase == "Running")
    pending = sum(1 for r in found if r.kind != "ComputePool" and r.phase == "Pending")
    if ok:
        console.print(
            f"[green]all {pools} pools Running[/green], {running} workloads Running, {pending} pending"
        )
    else:
        console.print("[red]not every pool reached Running[/red]")


def bundle_lines(files: Mapping[str, bytes]) -> list[str]:
    """Which pools are built from a Profile Bundle, and from which cluster profiles (docs/bundles.md)."""
    out: list[str] = []
    for path, data in sorted(files.items()):
        parts = path.split("/")
        if len(parts) != 3 or parts[1] != "computepools":
            continue
        doc = load_yaml(data)
        status = doc.get("status") if isinstance(doc, dict) else None
        profiles = status.get("profiles") if isinstance(status, dict) else None
        if isinstance(profiles, list) and profiles:
            name = f"{parts[0]}/{parts[2].removesuffix('.yaml')}"
            out.append(
                f"pool {name} is built from its profile bundle: cluster profiles {', '.join(profiles)}"
            )
    return out


def environment_lines(files: Mapping[str, bytes]) -> list[str]:
    """Where each Environment placed its workloads, from its status file (docs/environments.md)."""
    out: list[str] = []
    for path, data in sorted(files.items()):
        parts = path.split("/")
        if len(parts) != 3 or parts[1] != "environments":
            continue
        doc = load_yaml(data)
        status = doc.get("status") if isinstance(doc, dict) else None
        if not isinstance(status, dict):
            continue
        candidates = ", ".join(str(c) for c in status.get("candidates") or []) or "none"
        placed = status.get("workloads")
        placed = placed if isinstance(placed, dict) else {}
        where = "; ".join(f"{w} -> {p or 'no pool yet'}" for w, p in sorted(placed.items())) or "no workload"
        out.append(
            f"environment {parts[0]}/{parts[2].removesuffix('.yaml')} (candidates {candidates}): {where}"
        )
    return out


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


def _follow(console: Console, passes: queue.Queue[PassResult], stop: threading.Event, view: PassView) -> None:
    """Print each pass's block, and a heartbeat for idle ones, until a stop request."""
    while not stop.is_set():
        try:
            result = passes.get(timeout=0.25)
        except queue.Empty:
            result = None
        now = time.monotonic()
        if result is not None:
            lines = view.block(result, now)
            if lines:
                _print(console, "\n".join(lines))
        beat = view.heartbeat(now)
        if beat is not None:
            _print(console, beat)


def _start_pass(controller: Pipeline) -> bool:
    controller.request_pass()
    return True
