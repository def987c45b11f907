"""Prometheus metrics of the reconciler, served at ``/metrics``.

Every ``Metrics`` owns its own ``CollectorRegistry`` instead of using prometheus-client's global one, so
that tests (and a process running several loops) can make as many as they like without name clashes.
The controller, the Palette client and the git source feed it through the small methods below; nothing
here knows about their types.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

import yaml
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from reconciler.model.conditions import Phase

__all__ = ["CONTENT_TYPE", "SCALING_DIRECTIONS", "Metrics", "PassOutcome", "PoolFigures", "pool_figures"]

# prometheus_client adds a ``*_created`` series (the creation time) to every counter and histogram: a
# second series per counter that no rule reads and that restarts alone would make look new. Off, as
# the Prometheus text format allows (the setting is the library's, process-wide).
disable_created_metrics()  # type: ignore[no-untyped-call]  # the library leaves it unannotated

CONTENT_TYPE = CONTENT_TYPE_LATEST
"""The ``Content-Type`` of :meth:`Metrics.render`'s output (Prometheus text format 0.0.4)."""

# A pass reads git, lists the inventory and talks to Palette: from tens of milliseconds on the emulator
# to minutes against a slow Palette with thousands of hosts.
_PASS_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
# An ls-remote plus an incremental fetch is usually well under a second; a first clone can take long.
_FETCH_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

SCALING_DIRECTIONS = ("up", "down", "hold", "none")
"""The ``direction`` label of ``reconciler_scaling_decisions_total`` (a pool's decision in one pass)."""

_WORKLOAD_KINDS = ("AIWorkload", "MLPlatform")  # an MLPlatform is a workload when its status names a pool
_PoolLabel = tuple[str, str]  # (namespace, pool)


class PassOutcome(StrEnum):
    """How a reconcile pass ended (the ``outcome`` label of ``reconciler_passes_total``).

    The three kinds of errors follow Flux: ``error`` is transient (retried with back-off), ``invalid``
    means the input is wrong (not retried until it changes), ``stalled`` means a target refused the
    key (401/403, or no key) or the status branch follows another config branch: not retried until
    the key, the Settings or the configuration change. ``skipped`` is a pass that found nothing to do
    before planning (for instance the revision and inventory did not move).
    """

    SUCCESS = "success"
    ERROR = "error"
    INVALID = "invalid"
    STALLED = "stalled"
    SKIPPED = "skipped"
    STANDBY = "standby"


class Metrics:
    """The reconciler's metrics, in a registry of their own."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.pass_duration = self._histogram(
            "reconciler_pass_duration_seconds",
            "Duration of a reconcile pass (load, observe, allocate, plan, apply, report).",
            buckets=_PASS_BUCKETS,
        )
        self.passes = self._counter(
            "reconciler_passes",
            "Reconcile passes by outcome (success, error, invalid, stalled, skipped).",
            ("outcome",),
        )
        self.platforms = self._gauge(
            "reconciler_platforms", "MLPlatforms by status phase after the last pass.", ("phase",)
        )
        self.palette_requests = self._counter(
            "reconciler_palette_requests",
            "Palette API requests by method, path template and HTTP status (0: no response).",
            ("method", "path", "status"),
        )
        self.palette_rate_limit_wait = self._counter(
            "reconciler_palette_rate_limit_wait_seconds",
            "Time the Palette client spent waiting for rate-limit tokens, by path class.",
            ("path_class",),
        )
        self.git_fetches = self._counter(
            "reconciler_git_fetches",
            "Fetches of the config repository by outcome (success, error).",
            ("outcome",),
        )
        self.git_fetch_duration = self._histogram(
            "reconciler_git_fetch_duration_seconds",
            "Duration of a fetch of the config repository (remote head check plus fetch).",
            buckets=_FETCH_BUCKETS,
        )
        self.git_stale_locks = self._counter(
            "reconciler_git_stale_locks_removed",
            "Lock files a killed git left in a cache repository (source, status, lease), removed.",
        )
        self.lease_held = self._gauge(
            "reconciler_lease_held",
            "1 while this instance holds the writer lease (it writes); 0 while it stands by.",
        )
        self.webhooks = self._counter(
            "reconciler_webhooks",
            "Requests to the git webhook by result (accepted, coalesced, ping, ignored, unauthorized, ...).",
            ("result",),
        )
        self.os_errors = self._counter(
            "reconciler_os_errors",
            "Passes that failed on an OS error, by errno name (ENOSPC: the disk is full).",
            ("errno",),
        )
        self.last_success = self._gauge(
            "reconciler_last_successful_pass_timestamp_seconds",
            "Unix time at which the last successful (or skipped: nothing to do) pass ended (0: none yet).",
        )
        self._define_pool_metrics()
        self._pools = PoolFigures()  # replaced whole by set_pools (the scrape thread reads it)
        self._held = False
        self.registry.register(_PendingAge(clock, lambda: self._pools))
        self._zero_series()

    def _define_pool_metrics(self) -> None:
        """The pools' figures (GPUs, MIG instances, workloads) and their scaling decisions."""
        self.pool_mig_stranded = self._gauge(
            "reconciler_pool_mig_stranded_slices",
            "Memory slices of a pool's GPUs in MIG mode that no instance covers, after the last pass.",
            ("namespace", "pool"),
        )
        self.pool_mig_in_use = self._gauge(
            "reconciler_pool_mig_instances_in_use",
            "MIG instances of a pool bound to a workload, after the last pass.",
            ("namespace", "pool"),
        )
        self.workloads = self._gauge(
            "reconciler_workloads",
            "Workloads (AIWorkloads, shared MLPlatforms) by pool, phase and reason, after the last pass.",
            ("namespace", "pool", "phase", "reason"),
        )
        self.pool_pending = self._gauge(
            "reconciler_pool_pending_workloads",
            "Workloads of a pool whose phase is Pending, after the last pass.",
            ("namespace", "pool"),
        )
        # The parts (admitted, free) and their total are two metrics, so sum(reconciler_pool_gpus) is the
        # pool's GPUs, not twice them.
        self.pool_gpus = self._gauge(
            "reconciler_pool_gpus",
            "GPUs of a pool by family and state: admitted (bound to workloads) or free, after the last pass.",
            ("namespace", "pool", "family", "state"),
        )
        self.pool_capacity = self._gauge(
            "reconciler_pool_capacity_gpus",
            "GPUs of a pool by family (admitted + free), after the last pass.",
            ("namespace", "pool", "family"),
        )
        self.scaling_decisions = self._counter(
            "reconciler_scaling_decisions",
            "Scaling decisions taken for a pool with a ScalingPolicy, one per pool and pass, by direction.",
            ("direction",),
        )

    def _zero_series(self) -> None:
        """Zero-valued series exist from the start, so that rate() and absent() alerts work before the
        first pass of each kind."""
        for direction in SCALING_DIRECTIONS:
            self.scaling_decisions.labels(direction=direction)
        for outcome in PassOutcome:
            self.passes.labels(outcome=outcome.value)
        for phase in Phase:
            self.platforms.labels(phase=phase.value).set(0)
        for fetch_outcome in ("success", "error"):
            self.git_fetches.labels(outcome=fetch_outcome)

    def _counter(self, name: str, documentation: str, labels: tuple[str, ...] = ()) -> Counter:
        return Counter(name, documentation, labels, registry=self.registry)

    def _gauge(self, name: str, documentation: str, labels: tuple[str, ...] = ()) -> Gauge:
        return Gauge(name, documentation, labels, registry=self.registry)

    def _histogram(self, name: str, documentation: str, *, buckets: tuple[float, ...]) -> Histogram:
        return Histogram(name, documentation, buckets=buckets, registry=self.registry)

    def observe_pass(
        self, outcome: PassOutcome | str, duration_seconds: float, *, ended_at: float | None = None
    ) -> None:
        """Record one finished pass; a successful one also moves the last-success timestamp, and so
        does a skipped one (it read git and Palette and found nothing to do: an idle writer is healthy)."""
        value = str(outcome)
        self.pass_duration.observe(max(duration_seconds, 0.0))
        self.passes.labels(outcome=value).inc()
        if value in (PassOutcome.SUCCESS, PassOutcome.SKIPPED):
            self.last_success.set(time.time() if ended_at is None else ended_at)

    def set_platform_phases(self, counts: Mapping[Phase | str, int]) -> None:
        """Replace the platforms-by-phase gauge with ``counts``; every phase not in it drops to 0.

        Setting all phases at once keeps a platform that moved from Provisioning to Running from being
        counted in both until some later pass.
        """
        given = {str(phase): count for phase, count in counts.items()}
        for phase in Phase:
            self.platforms.labels(phase=phase.value).set(given.pop(phase.value, 0))
        for phase_name, count in given.items():
            self.platforms.labels(phase=phase_name).set(count)

    def set_pool_mig(self, pools: Mapping[tuple[str, str], tuple[int, int]]) -> None:
        """Replace the per-pool MIG gauges: ``(namespace, pool) -> (stranded slices, instances in use)``.
        A pool that is gone loses its series."""
        self.pool_mig_stranded.clear()
        self.pool_mig_in_use.clear()
        for (namespace, pool), (stranded, in_use) in sorted(pools.items()):
            self.pool_mig_stranded.labels(namespace=namespace, pool=pool).set(stranded)
            self.pool_mig_in_use.labels(namespace=namespace, pool=pool).set(in_use)

    def set_pools(self, figures: PoolFigures) -> None:
        """Replace the pool and workload gauges with ``figures`` (a pool that is gone loses its series)."""
        for gauge in (self.workloads, self.pool_pending, self.pool_gpus, self.pool_capacity):
            gauge.clear()
        for (namespace, pool, phase, reason), count in sorted(figures.workloads.items()):
            self.workloads.labels(namespace=namespace, pool=pool, phase=phase, reason=reason).set(count)
        for (namespace, pool), pending in sorted(figures.pending.items()):
            self.pool_pending.labels(namespace=namespace, pool=pool).set(pending)
        for (namespace, pool, family), counts in sorted(figures.gpus.items()):
            total, used, free = counts
            self.pool_capacity.labels(namespace=namespace, pool=pool, family=family).set(total)
            for state, value in (("admitted", used), ("free", free)):
                self.pool_gpus.labels(namespace=namespace, pool=pool, family=family, state=state).set(value)
        self._pools = figures

    def observe_pools(self, status_files: Mapping[str, bytes], decisions: Iterable[str] = ()) -> None:
        """After a pass's report: the pool and workload gauges from its status files (the phases and
        reasons operators read there), and one count per scaling decision the pass took."""
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        # Only pools and workloads are parsed: thousands of platform files would cost a second a pass.
        # (A false positive is only parsed and left out by pool_figures.)
        docs = [yaml.load(data, Loader=loader) for data in status_files.values() if _maybe_pool_related(data)]
        self.set_pools(pool_figures(docs))
        for direction in decisions:
            self.scaling_decisions.labels(direction=str(direction)).inc()

    def on_palette_request(self, method: str, path_template: str, status: int) -> None:
        """Hook for the Palette client: one call per HTTP request sent, retries included.

        ``path_template`` must be the route template (``/v1/spectroclusters/{uid}``), never the concrete
        path, so that the number of series stays bounded. ``status`` is 0 when no response arrived.
        """
        self.palette_requests.labels(method=method.upper(), path=path_template, status=str(status)).inc()

    def on_palette_rate_limit_wait(self, path_class: str, seconds: float) -> None:
        """Hook for the Palette client: it waited ``seconds`` for a token of ``path_class``."""
        self.palette_rate_limit_wait.labels(path_class=path_class).inc(max(seconds, 0.0))

    def observe_git_fetch(self, duration_seconds: float, *, success: bool = True) -> None:
        """Record one fetch (or remote head check) of the config repository."""
        self.git_fetches.labels(outcome="success" if success else "error").inc()
        self.git_fetch_duration.observe(max(duration_seconds, 0.0))

    @contextmanager
    def time_git_fetch(self) -> Iterator[None]:
        """Time the block as a git fetch; an exception leaving it counts as a failed fetch."""
        started = time.perf_counter()
        try:
            yield
        except BaseException:
            self.observe_git_fetch(time.perf_counter() - started, success=False)
            raise
        self.observe_git_fetch(time.perf_counter() - started, success=True)

    def on_stale_git_lock(self, name: str) -> None:
        """Hook for the git caches (``on_stale_lock``): one call per stale lock file removed."""
        self.git_stale_locks.inc()

    def set_lease_held(self, held: bool) -> None:
        """1 while this instance writes. A writer that loses the lease drops its pool and workload
        figures: a standby observes nothing, and what it last saw would only grow stale."""
        if not held and self._held:
            self.set_pools(PoolFigures())
            self.set_pool_mig({})
        self._held = held
        self.lease_held.set(1 if held else 0)

    def on_os_error(self, code: str) -> None:
        """One pass failed on an OS error (``code``: its errno name)."""
        self.os_errors.labels(errno=code).inc()

    def on_webhook(self, result: str) -> None:
        """Count one webhook request by what the server did with it (see ``reconciler.server.webhook``)."""
        self.webhooks.labels(result=result).inc()

    def render(self) -> bytes:
        """The registry in the Prometheus text exposition format."""
        return generate_latest(self.registry)


@dataclass(frozen=True, slots=True)
class PoolFigures:
    """What ``/metrics`` says about pools and workloads (see :func:`pool_figures`)."""

    # (namespace, pool, phase, reason) -> workloads
    workloads: Mapping[tuple[str, str, str, str], int] = field(default_factory=dict)
    pending: Mapping[_PoolLabel, int] = field(default_factory=dict)
    oldest_pending: Mapping[_PoolLabel, float] = field(default_factory=dict)  # unix time it began pending
    # (namespace, pool, family) -> (total, admitted, free)
    gpus: Mapping[tuple[str, str, str], tuple[int, int, int]] = field(default_factory=dict)


def pool_figures(docs: Iterable[Any]) -> PoolFigures:
    """Pure: the figures of the status documents of pools and workloads, as the status branch holds them.

    A workload counts in the pool its status names (``""`` when it names none) under its phase and its
    ``Ready`` condition's reason; a pending one waits since that condition's ``lastTransitionTime``.
    Every pool has a pending count (0 included) and its capacity per GPU family. Documents of other
    kinds, and MLPlatforms that are not a pool's workload, are left out.
    """
    workloads: dict[tuple[str, str, str, str], int] = {}
    pending: dict[_PoolLabel, int] = {}
    oldest: dict[_PoolLabel, float] = {}
    gpus: dict[tuple[str, str, str], tuple[int, int, int]] = {}
    for doc in docs:
        if not isinstance(doc, Mapping):
            continue
        kind, meta, status = doc.get("kind"), doc.get("metadata"), doc.get("status")
        if not isinstance(meta, Mapping) or not isinstance(status, Mapping):
            continue
        namespace = str(meta.get("namespace", ""))
        if kind == "ComputePool":
            pool = (namespace, str(meta.get("name", "")))
            pending.setdefault(pool, 0)
            for family, c in (status.get("capacity") or {}).items():
                if isinstance(c, Mapping):
                    counts = (_count(c.get("total")), _count(c.get("admitted")), _count(c.get("free")))
                    gpus[(*pool, str(family))] = counts
            continue
        if kind not in _WORKLOAD_KINDS or (kind == "MLPlatform" and not status.get("pool")):
            continue
        pool = (namespace, str(status.get("pool") or ""))
        phase = str(status.get("phase") or "Unknown")
        ready = _ready(status)
        reason = str(ready.get("reason") or phase)
        workloads[(*pool, phase, reason)] = workloads.get((*pool, phase, reason), 0) + 1
        if phase == Phase.PENDING:
            pending[pool] = pending.get(pool, 0) + 1
            since = _timestamp(ready.get("lastTransitionTime"))
            if since is not None:
                oldest[pool] = min(oldest.get(pool, since), since)
    return PoolFigures(workloads, pending, oldest, gpus)


def _maybe_pool_related(data: bytes) -> bool:
    """Could this status file be a pool's or a workload's (a platform that is a tenant names its pool)?"""
    return b"ComputePool" in data or b"AIWorkload" in data or b"pool:" in data


def _ready(status: Mapping[str, Any]) -> Mapping[str, Any]:
    for condition in status.get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            return condition
    return {}


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _timestamp(value: Any) -> float | None:
    if isinstance(value, datetime):  # YAML reads an unquoted timestamp as a datetime
        when = value
    else:
        try:
            when = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            return None
    return when.timestamp() if when.tzinfo is not None else None


class _PendingAge:
    """``reconciler_pool_oldest_pending_workload_age_seconds``, computed when scraped (so it grows
    between passes, as the wait does); 0 for a pool with nothing pending."""

    def __init__(self, clock: Callable[[], float], figures: Callable[[], PoolFigures]) -> None:
        self._clock, self._figures = clock, figures

    def describe(self) -> list[GaugeMetricFamily]:
        return [self._family()]

    def collect(self) -> list[GaugeMetricFamily]:
        family = self._family()
        figures, now = self._figures(), self._clock()
        for pool in sorted(figures.pending):
            since = figures.oldest_pending.get(pool)
            family.add_metric(list(pool), max(0.0, now - since) if since is not None else 0.0)
        return [family]

    @staticmethod
    def _family() -> GaugeMetricFamily:
        return GaugeMetricFamily(
            "reconciler_pool_oldest_pending_workload_age_seconds",
            "Seconds the longest-pending workload of a pool has been Pending (0: none pending).",
            labels=["namespace", "pool"],
        )
