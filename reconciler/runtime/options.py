"""What a running reconciler is configured with, grouped by purpose (one struct, injected)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from reconciler.palette.credentials import API_KEY_ENV
from reconciler.palette.hosts import DEFAULT_FULL_EVERY, DEFAULT_SWEEP_RATE
from reconciler.palette.pacing import RateLimits
from reconciler.resolve import EVERY_NAMESPACE, NamespaceSelector

DEFAULT_KEY_ENV = API_KEY_ENV


@dataclass(frozen=True)
class ControllerOptions:
    """Everything a controller is configured with, grouped by purpose."""

    # source
    repo: str
    branch: str = "main"
    cache_dir: Path | None = None
    watch: bool = False  # repo is a local directory read as it is on disk (not its commits)
    subtree: str = ""  # --path: only this directory of the repository is read
    # palette
    palette_url: str | None = None
    apply_concurrency: int = 4
    palette_rate_limits: RateLimits = field(default_factory=RateLimits.palette)  # off(): fast tests
    host_sweep_every: float = DEFAULT_FULL_EVERY  # seconds between full host sweeps (removals)
    host_sweep_rate: float | None = DEFAULT_SWEEP_RATE  # sweep pages per second; None: a due sweep whole
    prometheus_url: str | None = None  # --prometheus: replaces every Settings' prometheus.url (scaling)
    # report
    status_branch: str = "reconciler/status"
    switch_branch: bool = False  # let the status branch move to this config branch
    # loop
    interval: float = 60.0
    resync_interval: float = 30.0
    jitter: float = 0.1
    max_backoff: float = 300.0
    unhealthy_after: float | None = None  # None: max(300 s, 3 x interval)
    # safety
    max_deletions: int = 1
    sudden_change: float = 0.2  # share of hosts or managed clusters changing at once that is confirmed first
    dry_run: bool = False  # plan against Palette and log; write nothing to Palette or git
    # shard: the namespaces this instance owns, and its name (its lease and status record)
    namespaces: NamespaceSelector = EVERY_NAMESPACE
    shard: str | None = None

    @property
    def unhealthy_bound(self) -> float:
        """Seconds of continuously failing passes after which ``/healthz`` answers 503."""
        return self.unhealthy_after if self.unhealthy_after is not None else max(300.0, 3 * self.interval)


RunOptions = ControllerOptions


@dataclass(frozen=True)
class KeyRef:
    """Where a target's API key is: an environment variable or a file. Never the key itself."""

    env: str | None = DEFAULT_KEY_ENV
    file: str | None = None
