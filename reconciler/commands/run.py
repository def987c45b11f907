"""``reconciler run``: the reconcile loop, with the webhook/metrics server beside it.

``--once`` exits 0 when the pass completed, even if some input was invalid or some platform rejected:
those are reported in the status files, as the loop reports them (an invalid pass still counts as
ready). It exits 1 when the pass failed (git or Palette unreachable, a Palette write refused, a target
that refused the key), 2 on a usage error or when the status branch follows another config branch
(without ``--switch-branch``), and 130 when a signal interrupted it.

Graceful stop (DESIGN.md section 7): the first SIGTERM or SIGINT stops new Palette writes at once; the
requests in flight finish, the status of what was done is committed, and the process exits (0 for the
loop, 130 for an interrupted ``--once``). A watchdog ends the process (130) 15 s after the signal
whatever is still running; a second signal ends it (130) at once.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any, Final

from reconciler.controller import Controller, ControllerOptions, PassResult
from reconciler.logging import configure_logging, get_logger
from reconciler.metrics import PassOutcome
from reconciler.server import Server, ServerError, parse_listen, push_ref, webhook_secret_from_env
from reconciler.source import GitError, watch_directory

STOP_DEADLINE_SECONDS: Final = 15.0
"""After the first signal the process is gone within this long, whatever is still in flight."""
INTERRUPTED: Final = 130

_DONE = (PassOutcome.SUCCESS, PassOutcome.SKIPPED, PassOutcome.INVALID)


class _Stopper:
    """Signal handling: the first signal asks the controller to stop; a second one, or the deadline,
    ends the process at once."""

    def __init__(self, controller: Controller) -> None:
        self._controller = controller
        self._log = get_logger(component="run")
        self.signalled = False

    def install(self) -> None:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._on_signal)
            signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.signalled:
            self._log.warning("second signal: exiting at once", signal=name)
            os._exit(INTERRUPTED)
        self.signalled = True
        self._log.info(
            "stopping: no new Palette writes; requests in flight finish, then status is committed",
            signal=name,
        )
        self._controller.stop()
        watchdog = threading.Timer(STOP_DEADLINE_SECONDS, self._deadline)
        watchdog.daemon = True
        watchdog.start()

    def _deadline(self) -> None:
        self._log.warning("stop deadline reached: exiting now", seconds=STOP_DEADLINE_SECONDS)
        os._exit(INTERRUPTED)


def run(
    *,
    repo: str,
    branch: str,
    palette: str | None,
    status_branch: str,
    interval: float,
    max_deletions: int,
    once: bool,
    listen: str,
    cache_dir: Path | None,
    watch: bool = False,
    log_level: str = "info",
    dry_run: bool = False,
    switch_branch: bool = False,
    unhealthy_after: float | None = None,
) -> int:
    try:
        configure_logging(log_level)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    log = get_logger(component="run")
    options = ControllerOptions(
        repo=repo,
        branch=branch,
        palette_url=palette,
        status_branch=status_branch,
        interval=interval,
        max_deletions=max_deletions,
        cache_dir=cache_dir,
        watch=watch,
        dry_run=dry_run,
        switch_branch=switch_branch,
        unhealthy_after=unhealthy_after,
    )
    if watch and not Path(repo).is_dir():
        print(f"error: --watch needs --repo to be a local directory, got {repo}", file=sys.stderr)
        return 2
    try:
        controller = Controller(options)
    except GitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if dry_run:
        log.info("dry run: plans are logged; nothing is written to Palette or git")
    if once:
        stopper = _Stopper(controller)
        stopper.install()
        try:
            result = controller.reconcile_once()
        finally:
            controller.close()
        if result.interrupted or stopper.signalled:
            return INTERRUPTED
        if result.not_ready is not None:
            print(f"error: {result.not_ready}", file=sys.stderr)
            return 2
        return 0 if result.outcome in _DONE else 1

    def on_webhook(payload: dict[str, Any]) -> None:
        ref = push_ref(payload)
        if ref is not None and ref != f"refs/heads/{branch}":
            log.info("webhook for another branch ignored", ref=ref)  # e.g. our own status commits
            return
        log.info("webhook received; starting a pass", ref=ref)
        controller.request_pass()

    host, port = parse_listen(listen)
    server = Server(
        controller.metrics,
        webhook_secret=webhook_secret_from_env(),
        on_webhook=on_webhook,
        host=host,
        port=port,
        health=controller.health,
        readiness=controller.readiness,
    )
    try:
        server.start()
    except ServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    log.info("serving", url=server.url)

    def on_pass(result: PassResult) -> None:
        if result.not_ready is None and result.outcome in (*_DONE, PassOutcome.STALLED):
            server.mark_ready()

    if watch:
        watcher = threading.Thread(
            target=watch_directory,
            args=(Path(repo), controller.request_pass, controller.stopping),
            name="watch",
            daemon=True,
        )
        watcher.start()
    _Stopper(controller).install()
    try:
        controller.run_forever(on_pass)
    finally:
        server.stop()
        controller.close()
    log.info("stopped")
    return 0
