"""``reconciler run``: the reconcile loop, with the webhook/metrics server beside it.

``--once`` exits 0 when the pass completed, even if some input was invalid or some platform rejected:
those are reported in the status files, as the loop reports them (an invalid pass still counts as
ready). It exits 1 when the pass failed (git or Palette unreachable, a Palette write refused) and 2 on
a usage error.
"""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

from reconciler.controller import Controller, ControllerOptions, PassResult
from reconciler.logging import configure_logging, get_logger
from reconciler.metrics import PassOutcome
from reconciler.server import Server, ServerError, parse_listen, push_ref, webhook_secret_from_env
from reconciler.source import GitError, watch_directory


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
) -> int:
    configure_logging()
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
    )
    if watch and not Path(repo).is_dir():
        print(f"error: --watch needs --repo to be a local directory, got {repo}", file=sys.stderr)
        return 2
    try:
        controller = Controller(options)
    except GitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if once:
        try:
            result = controller.reconcile_once()
        finally:
            controller.close()
        log.info("pass finished", outcome=str(result.outcome), commit=result.commit, error=result.error)
        return 0 if result.outcome in (PassOutcome.SUCCESS, PassOutcome.SKIPPED, PassOutcome.INVALID) else 1

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
    )
    try:
        server.start()
    except ServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    log.info("serving", url=server.url)

    def on_pass(result: PassResult) -> None:
        if result.outcome in (PassOutcome.SUCCESS, PassOutcome.SKIPPED, PassOutcome.INVALID):
            server.mark_ready()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        controller.stop()

    if watch:
        watcher = threading.Thread(
            target=watch_directory,
            args=(Path(repo), controller.request_pass, controller.stopping),
            name="watch",
            daemon=True,
        )
        watcher.start()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
    try:
        controller.run_forever(on_pass)
    finally:
        server.stop()
        controller.close()
    return 0
