"""The composition root: options in, a :class:`~reconciler.runtime.pipeline.Pipeline` out.

It is the one place that knows which implementations stand behind the stages' ports: a git branch or a
local directory as the ``Source`` (only git has a ``History``), the status store (a shard's own, or a
directory without git: :class:`~reconciler.runtime.branch.NoStatus`), the Palette clients, Prometheus.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

from reconciler.logging import get_logger
from reconciler.manifests import check_bytes
from reconciler.metrics import Metrics
from reconciler.palette.client import PaletteClient
from reconciler.palette.hosts import HostLister
from reconciler.prometheus.stage import ScalingStage
from reconciler.resolve import Target
from reconciler.runtime.branch import NoStatus, StatusBranch
from reconciler.runtime.clock import SYSTEM_CLOCK, Clock
from reconciler.runtime.lease import Lease, LeaseFence, NoLease
from reconciler.runtime.options import ControllerOptions
from reconciler.runtime.parts import Parts
from reconciler.runtime.pipeline import Pipeline
from reconciler.runtime.ports import History, Source
from reconciler.runtime.stages.observe import ClientFactory, ListerFactory, Observer
from reconciler.source import DirectorySource, GitSource
from reconciler.source.documents import DocumentCache, default_root
from reconciler.source.status_shard import ShardStatusStore
from reconciler.source.status_store import StatusStore


def status_store(options: ControllerOptions) -> StatusBranch:
    workdir = options.cache_dir / "status" if options.cache_dir else None
    if options.shard is None:
        return StatusStore(options.repo, options.status_branch, workdir)
    return ShardStatusStore(
        options.repo, options.status_branch, workdir, shard=options.shard, namespaces=options.namespaces
    )


def document_cache(options: ControllerOptions) -> DocumentCache:
    """The checked files on disk behind the source's memory (``<cache dir>/documents``), so a restart
    checks only the blobs no earlier run checked; what goes wrong with it is logged once, never fatal."""
    root = options.cache_dir / "documents" if options.cache_dir else default_root()

    def warn(message: str) -> None:
        get_logger(component="source").warning("document cache not used", reason=message)

    return DocumentCache(root, read_once=True, on_error=warn)


def open_source(
    options: ControllerOptions,
) -> tuple[Source, History | None, StatusBranch, Callable[[], None]]:
    """The config source, its history (None for a directory read as it is on disk), the status branch,
    and what closes them."""
    store = document_cache(options)
    if options.watch:
        # A local working directory: read as it is on disk; status goes to its repository if it has one.
        directory = DirectorySource(
            Path(options.repo), parse=check_bytes, subtree=options.subtree, store=store
        )
        has_git = (Path(options.repo) / ".git").exists()
        status = status_store(options) if has_git else NoStatus()
        return directory, None, status, status.close
    cache = options.cache_dir
    git = GitSource(
        options.repo,
        options.branch,
        cache / "source" if cache else None,
        parse=check_bytes,
        subtree=options.subtree,
        store=store,
    )
    status = status_store(options)

    def close() -> None:
        git.close()
        status.close()

    return git, git, status, close


def palette_clients(options: ControllerOptions, metrics: Metrics) -> ClientFactory:
    def make(target: Target, key: str) -> PaletteClient:
        return PaletteClient(
            target.url,
            key,
            target.project_uid,
            on_request=metrics.on_palette_request,
            rate_limits=options.palette_rate_limits,
            on_wait=metrics.on_palette_rate_limit_wait,
        )

    return make


def fenced(factory: ClientFactory, fence: LeaseFence) -> ClientFactory:
    """Every client ``factory`` makes asks ``fence`` before each attempt of a mutating request."""

    def make(target: Target, key: str) -> PaletteClient:
        client = factory(target, key)
        if client.fence is None:
            client.fence = fence
        return client

    return make


def host_listers(options: ControllerOptions, clock: Clock) -> ListerFactory:
    """A target's host lister: sweeps paced as ``options`` say, scheduled by the pass's clock."""

    def make(client: PaletteClient) -> HostLister:
        every, rate = options.host_sweep_every, options.host_sweep_rate
        return HostLister(client, full_every=every, sweep_rate=rate, clock=clock.monotonic)

    return make


def parts(
    options: ControllerOptions,
    *,
    metrics: Metrics | None = None,
    environ: Mapping[str, str] | None = None,
    client_factory: ClientFactory | None = None,
    lease: Lease | None = None,
    clock: Clock | None = None,
) -> Parts:
    if options.namespaces.everything != (options.shard is None):
        raise ValueError("a shard needs both namespaces and a shard name")
    metrics = metrics or Metrics()
    env = environ if environ is not None else os.environ
    source, history, status, close_source = open_source(options)
    fence = LeaseFence(lease if lease is not None else NoLease(), dry_run=options.dry_run)
    clock = clock if clock is not None else SYSTEM_CLOCK
    if isinstance(status, StatusStore):
        status.fence = fence  # every push of the status branch asks the lease first
    observer = Observer(
        fenced(client_factory or palette_clients(options, metrics), fence),
        env,
        palette_url=options.palette_url,
        namespaces=options.namespaces,
        sudden_threshold=options.sudden_change,
        host_lister=host_listers(options, clock),
        clock=clock.time,
    )
    samples = ScalingStage(options.prometheus_url, environ=env)

    def close() -> None:
        observer.close()
        close_source()
        samples.close()

    return Parts(
        options=options,
        source=source,
        history=history,
        status=status,
        observer=observer,
        samples=samples,
        metrics=metrics,
        lease=fence.lease,
        fence=fence,
        clock=clock,
        close=close,
    )


def build(
    options: ControllerOptions,
    *,
    metrics: Metrics | None = None,
    environ: Mapping[str, str] | None = None,
    client_factory: ClientFactory | None = None,
    lease: Lease | None = None,
    clock: Clock | None = None,
) -> Pipeline:
    """The pipeline for ``options``: what ``run``, the demos, the benchmarks and the tests build. The
    ports may be injected (a Palette client factory, a lease, a clock; see :func:`parts`)."""
    return Pipeline(
        parts(
            options,
            metrics=metrics,
            environ=environ,
            client_factory=client_factory,
            lease=lease,
            clock=clock,
        )
    )
