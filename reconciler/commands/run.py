"""``reconciler run``: the reconcile loop, with the webhook/metrics server beside it.

``--once`` exits 0 when the pass completed, even if some input was invalid or some platform rejected:
those are reported in the status files, as the loop reports them (an invalid pass still counts as
ready). It exits 1 when the pass failed (git or Palette unreachable, a Palette write refused, a target
that refused the key), 2 on a usage error or when the status branch follows another config branch
(without ``--switch-branch``), and 130 when a signal interrupted it.

Shards (docs/operations.md): ``--namespaces PATTERNS --shard NAME`` makes this instance own exactly
the namespaces matching the globs; it holds its own lease (``reconciler/lease-<NAME>``, or the Lease
``paletteai-reconciler-<NAME>``) and writes its own status files and record ``shards/<NAME>.yaml``.
One without the other is a usage error (exit 2).

Graceful stop (docs/reconciling.md): the first SIGTERM or SIGINT stops new Palette writes at once; the
requests in flight finish, the status of what was done is committed, and the process exits (0 for the
loop, 130 for an interrupted ``--once``). A watchdog ends the process (130) 15 s after the signal
whatever is still running; a second signal ends it (130) at once.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, Final, Protocol

from reconciler.forges import push_refs
from reconciler.logging import configure_logging, get_logger
from reconciler.metrics import PassOutcome
from reconciler.resolve import EVERY_NAMESPACE, NamespaceSelector
from reconciler.runtime.lease import Lease, LeaseKeeper, NoLease, default_identity
from reconciler.runtime.options import ControllerOptions
from reconciler.runtime.outcome import PassResult
from reconciler.runtime.pipeline import Pipeline
from reconciler.runtime.wiring import build
from reconciler.server.app import Server
from reconciler.server.config import (
    ServerError,
    parse_listen,
    webhook_allow_sha1_from_env,
    webhook_secret_from_env,
)
from reconciler.server.webhook import COALESCED, WebhookOutcome
from reconciler.source import GitError, watch_directory
from reconciler.source.select import normalize_subtree

STOP_DEADLINE_SECONDS: Final = 15.0
"""After the first signal the process is gone within this long, whatever is still in flight."""
INTERRUPTED: Final = 130

_DONE = (PassOutcome.SUCCESS, PassOutcome.SKIPPED, PassOutcome.INVALID)


class _Stopper:
    """Signal handling: the first signal asks the controller to stop; a second one, or the deadline,
    ends the process at once."""

    def __init__(self, controller: Pipeline) -> None:
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
        self._controller.stop()  # before saying so: once the line is out, no new write starts
        self._log.info(
            "stopping: no new Palette writes; requests in flight finish, then status is committed",
            signal=name,
        )
        watchdog = threading.Timer(STOP_DEADLINE_SECONDS, self._deadline)
        watchdog.daemon = True
        watchdog.start()

    def _deadline(self) -> None:
        self._log.warning("stop deadline reached: exiting now", seconds=STOP_DEADLINE_SECONDS)
        os._exit(INTERRUPTED)


LEASE_KINDS = ("git", "kubernetes", "none")
_SHARD_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def shard_options(namespaces: str | None, shard: str | None) -> tuple[NamespaceSelector, str | None]:
    """``--namespaces`` and ``--shard``, checked together; ValueError saying what is wrong."""
    if namespaces is None and shard is None:
        return EVERY_NAMESPACE, None
    if namespaces is None or not namespaces.strip():
        raise ValueError(
            "--shard needs --namespaces: a shard owns the namespaces its globs match (e.g. 'team-a-*')"
        )
    if shard is None or not shard.strip():
        raise ValueError(
            "--namespaces needs --shard NAME: each shard holds its own lease and writes its own status "
            "record (shards/NAME.yaml), so that shards on one Palette never prune each other's clusters"
        )
    if not _SHARD_NAME.match(shard):
        raise ValueError(
            f"--shard {shard!r} must be a DNS-1123 label: at most 63 lowercase letters, digits and '-', "
            "starting and ending with a letter or digit"
        )
    return NamespaceSelector.parse(namespaces), shard


def make_lease(
    kind: str,
    *,
    repo: str,
    cache_dir: Path | None,
    duration: float = 60.0,
    name: str | None = None,
    on_stale_lock: Callable[[str], None] | None = None,
) -> Lease:
    """The lease of ``run --lease KIND`` (docs/reconciling.md).

    ``git``: the branch ``reconciler/lease`` of the config repository (``name`` gives a shard its own,
    ``reconciler/lease-<name>``); ``kubernetes``: a ``coordination.k8s.io/v1`` Lease in the pod's
    namespace, named ``paletteai-reconciler`` (or ``paletteai-reconciler-<name>``); ``none``: the
    operator promises a single instance. Imported lazily: the Kubernetes client is large.
    """
    identity = default_identity()
    if kind == "none":
        return NoLease(identity)
    if kind == "git":
        from reconciler.source.lease import DEFAULT_BRANCH, GitLease

        return GitLease(
            repo,
            identity,
            branch=f"{DEFAULT_BRANCH}-{name}" if name else DEFAULT_BRANCH,
            cache_dir=cache_dir / "lease" if cache_dir else None,
            duration=duration,
            safety_margin=duration / 3,
            on_stale_lock=on_stale_lock,
        )
    if kind == "kubernetes":
        from reconciler.runtime.kubernetes_lease import (
            DEFAULT_NAME,
            KubernetesLease,
            api_client_from_environment,
            default_namespace,
        )

        return KubernetesLease(
            api_client_from_environment(),
            namespace=default_namespace(),
            name=f"{DEFAULT_NAME}-{name}" if name else DEFAULT_NAME,
            identity=identity,
            duration=duration,
            margin=duration / 3,
        )
    raise ValueError(f"unknown lease kind {kind!r}: expected one of {', '.join(LEASE_KINDS)}")


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
    lease_kind: str = "git",
    lease_duration: float = 60.0,
    namespaces: str | None = None,
    shard: str | None = None,
    prometheus: str | None = None,
    subtree: str | None = None,
) -> int:
    try:
        configure_logging(log_level)
        selector, shard = shard_options(namespaces, shard)
        path = normalize_subtree(subtree)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    options = ControllerOptions(
        repo=repo,
        branch=branch,
        palette_url=palette,
        prometheus_url=prometheus,
        status_branch=status_branch,
        interval=interval,
        max_deletions=max_deletions,
        cache_dir=cache_dir,
        watch=watch,
        dry_run=dry_run,
        switch_branch=switch_branch,
        unhealthy_after=unhealthy_after,
        namespaces=selector,
        shard=shard,
        subtree=path,
    )
    if watch and not Path(repo).is_dir():
        print(f"error: --watch needs --repo to be a local directory, got {repo}", file=sys.stderr)
        return 2
    try:
        controller = build(options)
    except GitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    _say_mode(options)
    # One writer (docs/reconciling.md). A dry run writes nothing, so it takes no lease; --watch reads a
    # local directory that one person edits, so it takes none either.
    kind = "none" if dry_run or watch else lease_kind
    try:
        controller.lease = make_lease(
            kind,
            repo=repo,
            cache_dir=cache_dir,
            duration=lease_duration,
            name=shard,
            on_stale_lock=controller.metrics.on_stale_git_lock,
        )
    except Exception as exc:  # a bad kubeconfig, an invalid identity: say so, never a traceback
        controller.close()
        print(f"error: cannot set up the {kind} lease: {exc}", file=sys.stderr)
        return 2
    if once:
        return _run_once(controller, lease_duration)
    return _serve(controller, branch=branch, listen=listen, watch=watch, lease_duration=lease_duration)


def _say_mode(options: ControllerOptions) -> None:
    log = get_logger(component="run")
    if options.dry_run:
        log.info("dry run: plans are logged; nothing is written to Palette or git")
    if options.shard is not None:
        log.info(
            "shard: only these namespaces are planned, applied and reported",
            shard=options.shard,
            namespaces=str(options.namespaces),
        )


def _run_once(controller: Pipeline, lease_duration: float = 60.0) -> int:
    """``--once``: one pass under the lease, renewed while it runs (every write asks the lease's fence);
    exit 0 done, 1 failed, 2 not ready, 130 interrupted."""
    stopper = _Stopper(controller)
    stopper.install()
    if not controller.lease.acquire():
        holder = controller.lease.holder() or "another instance"
        controller.close()
        print(f"error: the writer lease is held by {holder}; nothing was written", file=sys.stderr)
        return 1
    keeper = LeaseKeeper(controller.lease, renew_every=lease_duration / 3)
    keeper.start()
    try:
        result = controller.reconcile_once()
    finally:
        keeper.stop()  # releases the lease
        controller.close()
    if result.interrupted or stopper.signalled:
        return INTERRUPTED
    if result.not_ready is not None:
        print(f"error: {result.not_ready}", file=sys.stderr)
        return 2
    return 0 if result.outcome in _DONE else 1


class _Passes(Protocol):
    wake: threading.Event

    def request_pass(self) -> None: ...


def push_handler(branch: str, passes: _Passes) -> Callable[[dict[str, Any]], WebhookOutcome]:
    """The webhook's ``on_webhook``: start a pass for a push that names the followed branch (or names no
    ref); anything else (a tag, our own status commits, another branch) starts none and the answer says
    so. A pass already requested and not started yet reads this push too: the answer is coalesced (the
    loop clears ``wake`` just before a pass reads the branch)."""
    log = get_logger(component="run")
    followed = f"refs/heads/{branch}"

    def on_webhook(payload: dict[str, Any]) -> WebhookOutcome:
        refs = push_refs(payload)
        if refs and followed not in refs:
            log.info("webhook for another ref ignored", ref=refs[0])
            return False
        pending = passes.wake.is_set()
        passes.request_pass()
        if pending:
            return COALESCED
        log.info("webhook received; starting a pass", refs=list(refs))
        return True

    return on_webhook


def _serve(controller: Pipeline, *, branch: str, listen: str, watch: bool, lease_duration: float) -> int:
    """The loop, with the webhook/metrics server, the lease keeper and (``--watch``) the file watcher."""
    log = get_logger(component="run")

    on_webhook = push_handler(branch, controller)

    host, port = parse_listen(listen)
    try:
        server = Server(
            controller.metrics,
            webhook_secret=webhook_secret_from_env(),
            on_webhook=on_webhook,
            host=host,
            port=port,
            health=controller.health,
            readiness=controller.readiness,
            lease=controller.lease,
            webhook_allow_sha1=webhook_allow_sha1_from_env(),
        )
        server.start()
    except ServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    log.info("serving", url=server.url)

    def on_pass(result: PassResult) -> None:
        if result.not_ready is None and result.outcome in (*_DONE, PassOutcome.STALLED):
            server.mark_ready()

    if watch:
        repo = Path(controller.options.repo)
        args = (repo, controller.request_pass, controller.stopping)
        threading.Thread(target=watch_directory, args=args, name="watch", daemon=True).start()

    def on_lease_change(held: bool) -> None:
        controller.metrics.set_lease_held(held)
        controller.request_pass()  # take over (or stand by) now, not at the next interval

    keeper = LeaseKeeper(
        controller.lease,
        renew_every=lease_duration / 3,
        retry_every=min(5.0, lease_duration / 6),
        on_change=on_lease_change,
    )
    keeper.start()
    _Stopper(controller).install()
    try:
        controller.run_forever(on_pass)
    finally:
        keeper.stop()  # releases the lease, so a standby takes over at once
        server.stop()
        controller.close()
    log.info("stopped")
    return 0
