"""One reconcile pass, and the loop around it (DESIGN.md sections 1, 5, 6 and 7).

A pass reads top to bottom as the pipeline it is: fetch -> load -> observe -> plan -> apply -> report.
Every exit goes through :meth:`Controller.reconcile_once`, whose :meth:`Controller._finish` is the one
place that turns what happened into metrics, the pass summary line, health and readiness (the status
files are the report stage's). Errors are sorted as in Flux: transient ones (git or Palette unreachable,
5xx, 429) back off and retry; a target that refuses the key (401/403, or no key) is *stalled*: not
contacted again until its key or the Settings change; invalid input is reported and left alone until it
changes (a pass over unchanged inputs does nothing).

Decisions the design leaves open, written down here (docs/operations.md has the long form):
- A platform talks to the Palette of its ComputeProfile's Settings, else its Project's (``hostUrl``,
  ``defaultProjectID`` as the ``ProjectUid`` scope, the key from ``apiKeySecretRef``, else
  ``$PALETTE_API_KEY``); a Compute to its own Settings, else its Project's. ``--palette URL`` replaces
  every ``hostUrl`` and takes the key from ``$PALETTE_API_KEY``. Everything on one (URL, project)
  shares one inventory, so it is observed and planned together (with the first Settings' key); the
  prune guard counts deletions over the whole pass.
- A target that no Settings names any more (recorded in ``reconciler.yaml``'s ``targets``) is observed
  with the key reference this process last saw for it, else ``$PALETTE_API_KEY``. No key is stored.
- A pass whose git read fails does nothing at all (no apply, no status); one whose Palette read fails
  for a target leaves that target's clusters alone and keeps its resources' last reported status.
- Inputs unchanged since the last clean pass (same revision, same Palette observation) -> the pass
  stops before planning (outcome ``skipped``): no Palette write, no commit.
- Revision fence: the config head is confirmed with ``ls-remote`` after observing and before the first
  Palette write, and again before the status push; when it moved, the pass starts over at the new head
  (at most three times). The status branch is re-read before each push.
- A shard (``namespaces`` and ``shard`` set) loads the whole repository but keeps only its namespaces'
  resources, and only managed clusters labelled with its namespaces; its status store shows and writes
  only its files, with its record at ``shards/<shard>.yaml`` (status/store.py, ShardStatusStore).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from reconciler.apply import apply_plan, apply_pools, apply_workload_profiles
from reconciler.compute_status import compute_status, holders, in_use_machines
from reconciler.deletions import approved_deletions
from reconciler.edgehost import carry_readable
from reconciler.inventory import HostState, Inventory, Machine, discover
from reconciler.logging import get_logger, pass_context
from reconciler.manifests import ParsedFile, build_desired, parse_file
from reconciler.manifests.carry import carry_unreadable, has_unreadable
from reconciler.metrics import Metrics, PassOutcome
from reconciler.model.conditions import Phase, Reason
from reconciler.model.desired import DesiredState, PlatformKey
from reconciler.model.diagnostics import Severity
from reconciler.model.gpu import GpuFamily
from reconciler.model.observed import MANAGED_BY_LABEL, MANAGED_BY_VALUE, ManagedCluster
from reconciler.model.pools import POOL_KIND, PoolKey, WorkloadKey, cluster_kind
from reconciler.model.resources import Compute, ComputePool, Settings
from reconciler.palette.client import PaletteClient
from reconciler.palette.cloud_configs import read_cloud_configs
from reconciler.palette.credentials import API_KEY_ENV, MissingAPIKey, api_key_from_env, read_key_file
from reconciler.palette.errors import PaletteError, UnauthorizedError
from reconciler.palette.hosts import HostLister
from reconciler.palette.observe import managed_clusters
from reconciler.palette.pacing import DASHBOARD, RateLimits, resync_interval
from reconciler.placement.admission import WorkloadAction
from reconciler.plan import (
    DONE,
    Action,
    Plan,
    PlatformPlan,
    PoolPlan,
    WorkloadPlan,
    gpus_of,
    plan_targets,
    select_namespaces,
)
from reconciler.prometheus.stage import ScalingOutcome, ScalingStage, confirm, evaluate
from reconciler.resolve import EVERY_NAMESPACE, NamespaceSelector, Routing, Target, route
from reconciler.runtime.lease import Lease, NoLease
from reconciler.scaling import ScalingStatusError
from reconciler.scaling import parse as parse_scaling
from reconciler.scaling import render as render_scaling
from reconciler.scaling.pools import pool_sizes
from reconciler.scaling.record import ScalingStatus
from reconciler.source import DirectorySource, GitError, GitSource
from reconciler.status.changes import commit_message, source_trailers
from reconciler.status.pools import (
    PoolRecords,
    WorkloadOutcome,
    pending_since,
    pool_document,
    read_pool_records,
    scaling_blocks,
    unreachable_document,
    workload_document,
)
from reconciler.status.recorded import listing_gap, missing_clusters
from reconciler.status.render import (
    RECONCILER_FILE,
    Outcome,
    Recorded,
    compute_document,
    dump,
    parse_previous,
    parse_recorded,
    platform_status,
    reconciler_document,
    resource_inputs,
    status_path,
    unreachable_status,
)
from reconciler.status.snapshot import SnapshotError, read_snapshots, render_snapshot, target_file
from reconciler.status.store import ShardStatusStore, StatusStore

log = get_logger(component="controller")

DEFAULT_KEY_ENV = API_KEY_ENV
MAX_RESTARTS = 3
"""Times a pass starts over because the config branch moved under it, before it gives up (error)."""


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
    dry_run: bool = False  # plan against Palette and log; write nothing to Palette or git
    # shard: the namespaces this instance owns, and its name (its lease and status record)
    namespaces: NamespaceSelector = EVERY_NAMESPACE
    shard: str | None = None

    @property
    def unhealthy_bound(self) -> float:
        """Seconds of continuously failing passes after which ``/healthz`` answers 503."""
        return self.unhealthy_after if self.unhealthy_after is not None else max(300.0, 3 * self.interval)


@dataclass(frozen=True)
class KeyRef:
    """Where a target's API key is: an environment variable or a file. Never the key itself."""

    env: str | None = DEFAULT_KEY_ENV
    file: str | None = None


@dataclass
class PassResult:
    outcome: PassOutcome
    revision: str | None = None
    plan: list[PlatformPlan] = field(default_factory=list)
    phases: dict[PlatformKey, Phase] = field(default_factory=dict)
    commit: str | None = None
    error: str | None = None
    writes: int = 0
    duration: float = 0.0
    not_ready: str | None = (
        None  # why this instance must not act (e.g. the status branch follows another branch)
    )
    interrupted: bool = False  # a stop request cut the pass short: entries not started were not applied


@dataclass
class _Observed:
    inventory: Inventory
    clusters: list[ManagedCluster]
    fingerprint: str
    raw_hosts: list[dict[str, Any]] = field(default_factory=list)
    raw_clusters: list[dict[str, Any]] = field(default_factory=list)
    _snapshot: bytes | None = None

    def snapshot(self) -> bytes:
        """This observation as the status branch's ``inventory/`` file (rendered once per observation)."""
        if self._snapshot is None:
            self._snapshot = render_snapshot(self.raw_hosts, self.raw_clusters)
        return self._snapshot


@dataclass(frozen=True)
class _Stall:
    """A target that refused its key: not contacted again until ``fingerprint`` changes."""

    fingerprint: str
    message: str


@dataclass
class _Observation:
    """The observe stage's result: what was read, and which targets could not be read and why."""

    observed: dict[Target, _Observed] = field(default_factory=dict)
    failed: dict[Target, str] = field(default_factory=dict)  # transient: PaletteUnavailable
    stalled: dict[Target, str] = field(default_factory=dict)  # refused key: PaletteUnauthorized


@dataclass
class _PoolPass:
    """What one pass did about pools and workloads, for the report stage."""

    records: PoolRecords = field(default_factory=PoolRecords)
    plans: dict[Target, Plan] = field(default_factory=dict)
    pools: dict[PoolKey, Outcome] = field(default_factory=dict)
    workloads: dict[WorkloadKey, WorkloadOutcome] = field(default_factory=dict)
    scaling: dict[PoolKey, ScalingOutcome] = field(default_factory=dict)  # the scaling stage's outcomes
    applied_at: float | None = None  # when the pool writes finished (an action's cooldown runs from it)
    commits: list[str] = field(default_factory=list)  # scaling records for the status commit's body
    unreadable: set[PoolKey] = field(default_factory=set)  # pools whose status.scaling did not parse


class _HeadMoved(Exception):
    """The config branch moved while a pass held an older revision: the pass starts over."""

    def __init__(self, held: str | None, head: str) -> None:
        super().__init__(f"the config branch moved from {(held or '?')[:12]} to {head[:12]}")
        self.held, self.head = held, head


class Controller:
    """Reconciles one config repository branch against Palette."""

    def __init__(
        self,
        options: ControllerOptions,
        *,
        metrics: Metrics | None = None,
        environ: Mapping[str, str] | None = None,
        client_factory: Callable[[Target, str], PaletteClient] | None = None,
        lease: Lease | None = None,
    ) -> None:
        if options.namespaces.everything != (options.shard is None):
            raise ValueError("a shard needs both namespaces and a shard name")
        self.options = options
        # One writer (DESIGN.md section 7): Palette and the status branch are written only while held.
        self.lease: Lease = lease if lease is not None else NoLease()
        self.metrics = metrics or Metrics()
        self._environ = environ if environ is not None else os.environ
        cache = options.cache_dir
        self.source: GitSource[ParsedFile] | DirectorySource[ParsedFile]
        self.status: StatusStore | None
        if options.watch:
            # A local working directory: read as it is on disk; status goes to its repository if it has one.
            self.source = DirectorySource(Path(options.repo), parse=parse_file, subtree=options.subtree)
            has_git = (Path(options.repo) / ".git").exists()
            self.status = self._status_store(cache) if has_git else None
        else:
            self.source = GitSource(
                options.repo,
                options.branch,
                cache / "source" if cache else None,
                parse=parse_file,
                subtree=options.subtree,
            )
            self.status = self._status_store(cache)
        self._client_factory = client_factory or self._make_client
        self._clients: dict[Target, PaletteClient] = {}
        self._revision: str | None = None
        self._deletions_note = ""  # the deletion guard's sentence about an approval, for the status commit
        self._desired: DesiredState | None = None
        self._previous: dict[str, bytes] | None = None
        self._status_tip: str | None = None
        self._recorded = Recorded()
        self._mismatch: str | None = None
        self._clean_fingerprint: str | None = None
        self._clean_status_tip: str | None = None  # the status branch's tip when that pass ended
        self._known_targets: set[Target] = set()
        self._key_refs: dict[Target, KeyRef] = {}
        self._observed: dict[Target, _Observed] = {}
        self._stalls: dict[Target, _Stall] = {}
        self._warned: set[tuple[PlatformKey, str, str]] = set()
        self._failing_since: float | None = None
        self._not_ready: str | None = "no pass has completed yet"
        self._host_listers: dict[Target, HostLister] = {}
        self._dashboard_requests: dict[Target, int] = {}  # /v1/dashboard requests of the last observe
        self.wake = threading.Event()
        self.stopping = threading.Event()
        self.last: PassResult | None = None
        self._pool_pass = _PoolPass()
        self._scaling = ScalingStage(options.prometheus_url, environ=self._environ)

    # -- wiring -------------------------------------------------------------------------------------

    def _status_store(self, cache: Path | None) -> StatusStore:
        opts = self.options
        workdir = cache / "status" if cache else None
        if opts.shard is None:
            return StatusStore(opts.repo, opts.status_branch, workdir)
        return ShardStatusStore(
            opts.repo, opts.status_branch, workdir, shard=opts.shard, namespaces=opts.namespaces
        )

    def _make_client(self, target: Target, key: str) -> PaletteClient:
        return PaletteClient(
            target.url,
            key,
            target.project_uid,
            on_request=self.metrics.on_palette_request,
            rate_limits=self.options.palette_rate_limits,
            on_wait=self.metrics.on_palette_rate_limit_wait,
        )

    def _api_key(self, target: Target) -> str:
        ref = self._key_refs.get(target, KeyRef())
        if ref.file:
            return read_key_file(ref.file)
        if ref.env and ref.env != DEFAULT_KEY_ENV and self._environ.get(ref.env, "").strip():
            return api_key_from_env(self._environ, name=ref.env)
        return api_key_from_env(self._environ)

    def _client(self, target: Target) -> PaletteClient:
        client = self._clients.get(target)
        if client is None:
            client = self._client_factory(target, self._api_key(target))
            self._clients[target] = client
        return client

    def _drop_client(self, target: Target) -> None:
        client = self._clients.pop(target, None)
        if client is not None:
            client.close()

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()
        if isinstance(self.source, GitSource):
            self.source.close()
        if self.status is not None:
            self.status.close()
        self._scaling.close()

    # -- health and readiness (read by the HTTP server's thread) -------------------------------------

    def health(self) -> str | None:
        """None when healthy; else why: passes have failed continuously for longer than the bound."""
        since = self._failing_since
        bound = self.options.unhealthy_bound
        if since is not None and time.monotonic() - since > bound:
            return f"every pass has failed for {time.monotonic() - since:.0f} s (bound {bound:.0f} s)"
        return None

    def readiness(self) -> str | None:
        """None when ready; else why not (no pass yet, or the status branch follows another branch)."""
        return self._not_ready

    # -- the pass -----------------------------------------------------------------------------------

    def _writes_allowed(self) -> bool:
        return not self.stopping.is_set() and self.lease.holds()

    def reconcile_once(self, *, check_source: bool = True) -> PassResult:
        """One pass: fetch, load, observe, plan, apply, report; then :meth:`_finish`."""
        started = time.perf_counter()
        held = self.options.dry_run or self.lease.holds()
        self.metrics.set_lease_held(held and not self.options.dry_run)
        if not held:
            # A standby reads nothing and writes nothing: the holder spends the Palette budget. It is
            # ready all the same (a rollout of two replicas completes): the lease is not readiness.
            log.info("standing by", holder=self.lease.holder())
            return self._finish(PassResult(PassOutcome.STANDBY, revision=self._revision), 0.0)
        try:
            result = self._attempt(check_source)
        except GitError as exc:
            log.warning("git unavailable; nothing applied", error=str(exc))
            result = PassResult(PassOutcome.ERROR, revision=self._revision, error=str(exc))
        except Exception as exc:  # a bug or an unforeseen failure must not end the loop: back off, retry
            log.exception("pass failed", revision=self._revision)
            result = PassResult(
                PassOutcome.ERROR, revision=self._revision, error=f"{type(exc).__name__}: {exc}"
            )
        return self._finish(result, time.perf_counter() - started)

    def _attempt(self, check_source: bool) -> PassResult:
        """The pass, started over at the new head when the config branch moves under it (the fence)."""
        for attempt in range(MAX_RESTARTS):
            try:
                return self._pass(check_source or attempt > 0)
            except _HeadMoved as moved:
                log.info(
                    "config branch moved during the pass; planning again at its head",
                    held=moved.held,
                    head=moved.head,
                )
                if self.stopping.is_set():
                    return PassResult(
                        PassOutcome.ERROR,
                        revision=self._revision,
                        interrupted=True,
                        error=f"stopped: {moved}",
                    )
        return PassResult(
            PassOutcome.ERROR,
            revision=self._revision,
            error=f"the config branch kept moving: gave up after {MAX_RESTARTS} attempts",
        )

    def _finish(self, result: PassResult, duration: float) -> PassResult:
        """The one place a pass's result becomes metrics, health, readiness and its summary line."""
        result.duration = duration
        result.interrupted = result.interrupted or self.stopping.is_set()
        self.metrics.observe_pass(result.outcome, result.duration)
        if result.phases:
            counts: dict[Phase | str, int] = {}
            for phase in result.phases.values():
                counts[phase] = counts.get(phase, 0) + 1
            self.metrics.set_platform_phases(counts)
        if result.outcome is PassOutcome.ERROR:
            if self._failing_since is None:
                self._failing_since = time.monotonic()
        else:
            self._failing_since = None
        if result.not_ready is not None:
            self._not_ready = result.not_ready
        elif result.outcome is not PassOutcome.ERROR:
            self._not_ready = None
        summary = _summary(result.plan)
        fields = {
            "outcome": str(result.outcome),
            "revision": result.revision,
            **summary,
            "writes": result.writes,
            "commit": result.commit,
            "duration": round(result.duration, 3),
            "error": result.error,
        }
        if result.interrupted:
            fields["interrupted"] = True
        if result.outcome is PassOutcome.ERROR:
            log.warning("pass finished", **fields)
        else:
            log.info("pass finished", **fields)
        self.last = result
        return result

    def _pass(self, check_source: bool) -> PassResult:
        # 1. fetch and 2. load
        desired = self._fetch_and_load(check_source)
        revision = self._revision
        with pass_context(revision):
            if self._mismatch is not None:
                log.warning(
                    "status branch follows another config branch; writing nothing", reason=self._mismatch
                )
                return PassResult(
                    PassOutcome.STALLED, revision=revision, not_ready=self._mismatch, error=self._mismatch
                )
            # 3. observe
            routing = self._route(desired)
            seen = self._observe_targets(desired, routing)
            fingerprint = hashlib.sha256(
                json.dumps(
                    [
                        revision,
                        sorted((t.url, t.project_uid or "", o.fingerprint) for t, o in seen.observed.items()),
                    ]
                ).encode()
            ).hexdigest()
            routed_failed = any(t in routing.targets for t in seen.failed)
            calm = not routed_failed and not seen.stalled and not routing.unavailable
            # Utilisation is no input of the fingerprint: a pass with a scaling policy is never skipped.
            calm = calm and not any(p.spec.scaling_policy_ref for p in desired.of_kind(ComputePool))
            if calm and fingerprint == self._clean_fingerprint and not self._status_moved():
                log.debug("nothing changed since the last pass")
                return PassResult(PassOutcome.SKIPPED, revision=revision, phases=self._last_phases())

            # 4. allocate and plan
            plans = self._plan(desired, routing, seen.observed)

            # 5. apply (after confirming that the revision held is still the head)
            outcomes = self._apply(desired, revision, plans)
            outcomes.update(self._apply_pools(desired, revision, plans))
            for target, plan in plans.items():
                denied = [o for p in plan.platforms if (o := outcomes.get(p.key)) and o.unauthorized]
                if denied:
                    why = denied[0].error or "Palette refused the key"
                    seen.stalled[target] = self._stall(target, desired, why)

            # 6. report
            entries = [p for plan in plans.values() for p in plan.platforms]
            result = self._report(desired, revision, entries, outcomes, seen, routing)

        report_error = result.error
        # A recorded target that nothing routes to any more (an old endpoint) is retried every pass and
        # kept in reconciler.yaml, but its outage alone does not fail the pass: nothing desired waits on it.
        transient = any(t in routing.targets for t in seen.failed) or any(
            not o.ok and not o.unauthorized for o in outcomes.values()
        )
        refused = bool(seen.stalled) or any(o.unauthorized for o in outcomes.values())
        problems = [
            f"{t.url}: {why}"
            for t, why in sorted(seen.failed.items(), key=lambda item: _target_order(item[0]))
            if t in routing.targets
        ]
        problems += [
            f"{t.url}: {why}"
            for t, why in sorted(seen.stalled.items(), key=lambda item: _target_order(item[0]))
        ]
        failed_writes = [o for o in outcomes.values() if not o.ok]
        if failed_writes:
            problems.append(f"{len(failed_writes)} Palette writes failed (first: {failed_writes[0].error})")
        if report_error is not None:
            problems.append(report_error)
        result.error = "; ".join(problems) or None
        if transient or report_error is not None:
            result.outcome = PassOutcome.ERROR
        elif refused:
            result.outcome = PassOutcome.STALLED
        elif desired.has_errors:
            result.outcome = PassOutcome.INVALID
        else:
            result.outcome = PassOutcome.SUCCESS
        result.writes = len(outcomes)
        # Only a pass that changed nothing may be skipped next time with the same inputs.
        clean = result.outcome in (PassOutcome.SUCCESS, PassOutcome.INVALID) and not outcomes and calm
        self._clean_fingerprint = fingerprint if clean else None
        self._clean_status_tip = self._status_tip
        return result

    # -- 1. fetch and 2. load -----------------------------------------------------------------------

    def _fetch_and_load(self, check_source: bool) -> DesiredState:
        desired = self._desired
        if not check_source and desired is not None:
            return desired  # a resync pass: Palette only (the fence confirms the head before writing)
        head = self._sync()
        self._read_recorded()
        if head != self._revision or desired is None:
            loaded = build_desired(self.source.read_parsed(head), head)
            loaded.diagnostics.extend(self.source.diagnostics)
            if not self.source.complete:  # a skipped manifest may hold a resource: prune nothing
                loaded.complete = False
            if desired is None and has_unreadable(loaded):
                desired = self._last_reported_desired(head)
            # A shard validates the whole repository but acts on (and logs) only its namespaces.
            desired = select_namespaces(carry_unreadable(desired, loaded), self.options.namespaces)
            self._desired, self._revision = desired, head
            with pass_context(head):
                for diag in desired.diagnostics:  # once per revision, not on every resync
                    log.warning(
                        "invalid manifest" if diag.severity is Severity.ERROR else "manifest warning",
                        file=diag.file,
                        line=diag.line,
                        kind=diag.kind,
                        namespace=diag.namespace,
                        name=diag.name,
                        message=diag.message,
                    )
        return desired

    def _sync(self) -> str:
        """The config branch's head, fetched when it moved; a failure counts as a failed fetch."""
        fetches = self.source.fetch_count
        started = time.perf_counter()
        try:
            head = self.source.sync()
        except GitError:
            self.metrics.observe_git_fetch(time.perf_counter() - started, success=False)
            raise
        if self.source.fetch_count != fetches:
            self.metrics.observe_git_fetch(self.source.last_fetch_seconds)
        return head

    def _confirm_head(self, revision: str | None) -> None:
        """The fence: raise :class:`_HeadMoved` unless ``revision`` is still the config branch's head."""
        if not isinstance(self.source, GitSource) or revision is None:
            return
        started = time.perf_counter()
        try:
            head = self.source.remote_head()
        except GitError:
            self.metrics.observe_git_fetch(time.perf_counter() - started, success=False)
            raise
        if head != revision:
            raise _HeadMoved(revision, head)

    def _status_moved(self) -> bool:
        """Whether someone else (a hand edit, another writer) moved the status branch since this process
        last read or wrote it: then an idle pass is not skipped, so the branch is repaired now (one
        ``ls-remote``; DESIGN.md section 6: the branch is read, not assumed)."""
        if self.status is None or self.options.dry_run:
            return False
        return self.status.tip() != self._clean_status_tip

    def _read_status(self) -> dict[str, bytes]:
        """The status branch's files, read again only when its tip moved (another writer, a hand edit)."""
        if self.status is None:
            return self._previous if self._previous is not None else {}
        tip = self.status.tip()
        if self._previous is None or tip != self._status_tip:
            self._previous = self.status.read()
            self._status_tip = tip
        return self._previous

    def _read_recorded(self) -> Recorded:
        """``reconciler.yaml``: the targets to observe besides the routed ones, and the branch check."""
        recorded = parse_recorded(self._read_status())
        self._recorded = recorded
        self._known_targets |= {Target(url, project) for url, project in recorded.targets}
        self._mismatch = self._branch_mismatch(recorded)
        return recorded

    def _branch_mismatch(self, recorded: Recorded) -> str | None:
        branch = self.options.branch
        if recorded.branch is None or recorded.branch == branch or self.options.switch_branch:
            return None
        return (
            f"the status branch {self.options.status_branch!r} follows the config branch "
            f"{recorded.branch!r}, not {branch!r}: nothing is written (start with --switch-branch to move it)"
        )

    # -- 3. observe ---------------------------------------------------------------------------------

    def _observe_targets(self, desired: DesiredState, routing: Routing) -> _Observation:
        """Read every routed or recorded target; a refused key stalls its target until it changes."""
        seen = _Observation()
        for target in sorted(routing.targets | self._known_targets, key=_target_order):
            stall = self._stalls.get(target)
            if stall is not None:
                if self._credentials_fingerprint(target, desired) == stall.fingerprint:
                    seen.stalled[target] = stall.message
                    continue
                log.info("key or Settings changed: trying a stalled target again", url=target.url)
                del self._stalls[target]
                self._drop_client(target)
                self._key_refs.pop(target, None)
                self._route(desired)  # picks the key reference the Settings name now
            try:
                seen.observed[target] = self._observe(target)
                self._confirm_listing(target, seen.observed[target], routing)
            except (UnauthorizedError, MissingAPIKey) as exc:
                seen.stalled[target] = self._stall(target, desired, str(exc))
            except PaletteError as exc:
                seen.failed[target] = f"Palette unavailable: {exc}"
                log.warning("palette unavailable", url=target.url, error=str(exc))
        self._known_targets |= set(seen.observed) | set(seen.stalled) | set(seen.failed)
        return seen

    def _confirm_listing(self, target: Target, observed: _Observed, routing: Routing) -> None:
        """Absence is confirmed before it is acted on: a cluster the status branch records for a platform
        or pool of this target that the listing does not show is looked up by uid; if it exists, the
        listing is incomplete and the target is read as unavailable this pass (nothing is created)."""
        missing = missing_clusters(
            self._read_status(),
            routing.platforms.get(target, ()),
            routing.pools.get(target, ()),
            (c.uid for c in observed.clusters),
        )
        if not missing:
            return
        client = self._client(target)
        found = {uid: who for uid, who in sorted(missing.items())[:20] if client.get_cluster(uid) is not None}
        gap = listing_gap(found)
        if gap is not None:
            self._observed.pop(target, None)  # read it afresh next pass
            raise PaletteError(gap, method="POST", path="/v1/dashboard/spectroclusters/search")

    def _stall(self, target: Target, desired: DesiredState, error: str) -> str:
        message = f"Palette refused the API key or none is set: {error}"
        self._stalls[target] = _Stall(self._credentials_fingerprint(target, desired), message)
        self._drop_client(target)
        log.warning(
            "target stalled: not retried until its key or Settings change",
            url=target.url,
            project_uid=target.project_uid,
            reason=str(Reason.PALETTE_UNAUTHORIZED),
            error=error,
        )
        return message

    def _credentials_fingerprint(self, target: Target, desired: DesiredState) -> str:
        """A hash of the target's current key (never the key) and of every Settings document."""
        try:
            key = hashlib.sha256(self._api_key(target).encode()).hexdigest()
        except MissingAPIKey:
            key = "no key"
        ref = self._key_refs.get(target, KeyRef())
        settings = sorted(s.model_dump_json() for s in desired.of_kind(Settings))
        return hashlib.sha256(json.dumps([key, ref.env, ref.file, settings]).encode()).hexdigest()

    # -- routing ----------------------------------------------------------------------------------

    def _route(self, desired: DesiredState) -> Routing:
        """Which Palette each platform and Compute talks to: the one routing rule, shared with ``plan``."""
        routing = route(desired, self.options.palette_url)
        for target, ref in routing.keys.items():
            self._key_refs.setdefault(target, KeyRef(ref.env, ref.file) if ref is not None else KeyRef())
        return routing

    def _observe(self, target: Target) -> _Observed:
        client = self._client(target)
        lister = self._host_listers.get(target)
        if lister is None or lister.client is not client:  # reads what changed since its last read
            lister = self._host_listers[target] = HostLister(client)
        before = client.requests_sent(DASHBOARD)
        hosts = lister.list()
        raw_clusters = client.search_clusters({MANAGED_BY_LABEL: MANAGED_BY_VALUE})
        self._dashboard_requests[target] = client.requests_sent(DASHBOARD) - before
        # The lister's version moves whenever a host does; the cluster listing's order is stable.
        digest = hashlib.sha256(json.dumps([lister.version, raw_clusters], default=str).encode()).hexdigest()
        last = self._observed.get(target)
        if last is not None and last.fingerprint == digest:
            return last  # nothing moved in Palette: reuse the machines and clusters read last time
        doubtful = lister.doubtful
        if doubtful:  # a member's unreadable answer is replaced by its last readable copy, and the
            # clusters' own cloud configs say who their members are
            hosts, carried = carry_readable(hosts, doubtful, self._prior_hosts(target))
            log.warning(
                "unreadable edge host answers: never placed; cluster members keep their last readable copy",
                url=target.url,
                unreadable=len(doubtful),
                carried=len(carried),
            )
        inventory = discover(hosts)
        configs = read_cloud_configs(client, raw_clusters) if doubtful else None
        clusters = managed_clusters(raw_clusters, hosts, inventory.by_uid(), configs)
        # Another shard's clusters are not this instance's: never planned, pruned or recorded here. The
        # raw listing stays whole: the target's inventory snapshot is shared by the shards observing it.
        clusters = [c for c in clusters if self.options.namespaces.owns(c.namespace)]
        seen = _Observed(inventory, clusters, digest, hosts, raw_clusters)
        self._observed[target] = seen
        return seen

    def _prior_hosts(self, target: Target) -> list[dict[str, Any]]:
        """The hosts as last read right: the last observation in memory, else the status branch's
        inventory snapshot of the target (a restarted process)."""
        last = self._observed.get(target)
        if last is not None:
            return last.raw_hosts
        try:
            snapshots = read_snapshots(self._read_status())
        except SnapshotError:
            return []
        found = snapshots.get((target.url, target.project_uid))
        return list(found.edge_hosts) if found is not None else []

    # -- 4. plan ------------------------------------------------------------------------------------

    def _plan(
        self, desired: DesiredState, routing: Routing, observed: Mapping[Target, _Observed]
    ) -> dict[Target, Plan]:
        # Each target plans what is routed to it; the prune guard counts the whole pass (plan.py).
        docs = parse_previous(self._read_status())
        records = self._pool_records(docs)
        self._pool_pass = _PoolPass(records=records)

        def plan(sizes: Mapping[PoolKey, Mapping[GpuFamily, int]] | None = None) -> dict[Target, Plan]:
            return plan_targets(
                desired,
                routing,
                observed,
                max_deletions=self.options.max_deletions,
                namespaces=self.options.namespaces,
                previous=records.previous,
                pool_modes=records.modes,
                previous_layouts=records.layouts,
                sizes=sizes,
                approved_deletions=approved,
            )

        source, head = self.source, desired.revision  # a directory has no commit message, so no trailer
        approved = approved_deletions(
            source.commit_message(head) if isinstance(source, GitSource) and head else None
        )
        plans = self._scaling_pass(desired, observed, docs, plan)
        self._deletions_note = next((p.deletions_note for p in plans.values() if p.deletions_note), "")
        return plans

    def _scaling_pass(
        self,
        desired: DesiredState,
        observed: Mapping[Target, _Observed],
        docs: Mapping[str, dict[str, Any]],
        plan: Callable[[Mapping[PoolKey, Mapping[GpuFamily, int]] | None], dict[Target, Plan]],
    ) -> dict[Target, Plan]:
        """Plan with the scaling stage (docs/scaling.md, "How the controller runs it"): pools with a
        policy request their current size (``spec.gpus`` and the recorded actions); the stage decides
        on the plan; an action is planned with its target size and confirmed against that plan; the
        pass's plan (made with the final sizes) carries each pool's decision. Pools without a policy: one
        plan, no query."""
        recorded: dict[PoolKey, ScalingStatus | None] = {}
        unreadable: set[PoolKey] = set()
        for key, (path, block) in scaling_blocks(docs).items():
            try:
                recorded[key] = parse_scaling(block, f"{path}: status.scaling")
            except ScalingStatusError as exc:
                log.warning("unreadable scaling status: the pool keeps its size, not scaled", error=str(exc))
                unreadable.add(key)
        self._pool_pass.unreadable = unreadable
        sizes = pool_sizes(desired, recorded)
        if not sizes:
            return plan(None)
        machines = {uid: m for o in observed.values() for uid, m in o.inventory.by_uid().items()}
        for key in unreadable & set(sizes):
            cluster = next(
                (
                    c
                    for o in observed.values()
                    for c in o.clusters
                    if cluster_kind(c.labels) == POOL_KIND and c.key == key
                ),
                None,
            )
            if cluster is not None:  # keep what it has, decide nothing this pass
                sizes[key] = {GpuFamily(f): n for f, n in gpus_of(cluster.workers, machines).items()}
        first = plan(sizes)
        now = time.time()
        outcomes = evaluate(
            self._scaling, desired, first.values(), now, recorded, pending_since(docs), skip=unreadable
        )
        if not outcomes:
            return first
        plans = first
        if any(o.acts for o in outcomes.values()):  # plan again with the actions' sizes
            acting = {k: dict(o.target) for k, o in outcomes.items() if o.acts}
            plans = plan(sizes | acting)
            outcomes = confirm(outcomes, first, plans)
            if any(o.withdrawn for o in outcomes.values()):  # back to its size: plan once more
                sizes |= {k: dict(o.target) for k, o in outcomes.items()}
                plans = plan(sizes)
        self._pool_pass.scaling = outcomes
        entries = {k: o.entry for k, o in outcomes.items()}
        for (ns, name), entry in entries.items():
            if self.options.dry_run:
                log.info(
                    "dry run: scaling decision",
                    namespace=ns,
                    name=name,
                    decision=str(entry.decision),
                    reason=entry.reason,
                    message=entry.message,
                )
            elif outcomes[(ns, name)].acts:
                log.info("scaling", namespace=ns, name=name, message=entry.message)
        return {target: p.with_scaling(entries) for target, p in plans.items()}

    def _pool_records(self, docs: Mapping[str, dict[str, Any]]) -> PoolRecords:
        """Admissions, MIG layouts, pool modes and attached profiles as the status branch recorded them."""
        records = read_pool_records(docs)
        for problem in records.problems:
            log.warning("unreadable pool status: its MIG layout is planned afresh", error=problem)
        return records

    # -- 5. apply -----------------------------------------------------------------------------------

    def _apply(
        self, desired: DesiredState, revision: str | None, plans: Mapping[Target, Plan]
    ) -> dict[PlatformKey, Outcome]:
        todo = {t: plan for t, plan in plans.items() if any(p.mutating for p in plan.platforms)}
        if not todo:
            return {}
        if self.options.dry_run:
            for plan in todo.values():
                for p in plan.platforms:
                    if p.mutating:
                        log.info(
                            f"dry run: would {p.action}",
                            namespace=p.namespace,
                            name=p.name,
                            message=p.message,
                            control_plane=sorted(p.control_plane),
                            workers=sorted(p.workers),
                        )
            return {}
        if self.stopping.is_set():
            return {}
        self._confirm_head(revision)  # never write for a revision that is no longer the head
        outcomes: dict[PlatformKey, Outcome] = {}
        for target, plan in todo.items():
            outcomes.update(
                apply_plan(
                    self._client(target),
                    desired,
                    plan,
                    concurrency=self.options.apply_concurrency,
                    stop=lambda: not self._writes_allowed(),
                )
            )
        return outcomes

    def _apply_pools(
        self, desired: DesiredState, revision: str | None, plans: Mapping[Target, Plan]
    ) -> dict[PlatformKey, Outcome]:
        """Pool clusters (created, scaled, MIG machine pools, deleted) and workload profiles (attached,
        detached). Returns the pool clusters' outcomes, and a failed outcome per workload whose profiles
        could not be changed (both count as Palette writes of the pass)."""
        work = self._pool_pass
        work.plans = dict(plans)
        recorded = work.records.attached
        if not any(plan.pools for plan in plans.values()):
            return {}
        if self.options.dry_run or self.stopping.is_set():
            for plan in plans.values():
                for pool in plan.pools:
                    if pool.mutating and self.options.dry_run:
                        log.info(f"dry run: would {pool.action}", namespace=pool.namespace, name=pool.name)
            work.workloads = {k: WorkloadOutcome(uids) for k, (_pool, uids) in recorded.items()}
            return {}
        self._confirm_head(revision)
        failed: dict[PlatformKey, Outcome] = {}
        for target, plan in plans.items():
            if not plan.pools:
                continue
            client = self._client(target)
            work.pools.update(apply_pools(client, desired, plan, stop=lambda: not self._writes_allowed()))
            done = apply_workload_profiles(client, desired, plan, recorded)
            work.workloads.update(done)
            failed.update({k: Outcome(ok=False, error=o.error) for k, o in done.items() if not o.ok})
        work.applied_at = time.time()
        return {**work.pools, **failed}

    # -- 6. report ----------------------------------------------------------------------------------

    def _report(
        self,
        desired: DesiredState,
        revision: str | None,
        entries: list[PlatformPlan],
        outcomes: Mapping[PlatformKey, Outcome],
        seen: _Observation,
        routing: Routing,
    ) -> PassResult:
        before = self._previous if self._previous is not None else self._read_status()
        previous = parse_previous(before)
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        files: dict[str, bytes] = {}
        phases: dict[PlatformKey, Phase] = {}
        stopped = self.stopping.is_set() and not self.options.dry_run
        machines = {uid: m for o in seen.observed.values() for uid, m in o.inventory.by_uid().items()}
        unreachable = _unreachable(routing, seen)
        for p in entries:
            path = status_path("MLPlatform", p.namespace, p.name)
            if p.key in unreachable:
                continue  # its target refused the key while applying: reported as unreachable below
            if stopped and p.mutating and p.key not in outcomes:
                # Not started because of a stop request: its status stays as last reported.
                if path in before:
                    files[path] = before[path]
                continue
            hosts = p.existing.hosts if p.existing is not None else ()
            unhealthy = [h for h in hosts if h in machines and machines[h].state is HostState.UNAVAILABLE]
            phase, doc = platform_status(
                p,
                revision=revision,
                inputs=resource_inputs(desired, "MLPlatform", p.namespace, p.name),
                outcome=outcomes.get(p.key),
                previous=previous.get(path),
                now=now,
                unhealthy=unhealthy,
            )
            phases[p.key] = phase
            files[path] = dump(doc)
        # Platforms whose Palette could not be read keep what was last reported (DESIGN.md section 6).
        for key, (reason, message) in sorted(unreachable.items()):
            path = status_path("MLPlatform", *key)
            if path in files:
                continue
            phase, doc = unreachable_status(
                key[0], key[1], previous=previous.get(path), reason=reason, message=message, now=now
            )
            phases[key] = phase
            files[path] = dump(doc)
        if seen.failed or seen.stalled:
            # A platform removed from git whose target cannot be read may still have its cluster.
            for path, data in before.items():
                if path not in files and _is_platform_file(path):
                    files[path] = data
        for compute in desired.of_kind(Compute):
            ns, name = compute.metadata.namespace, compute.metadata.name
            target = routing.computes.get((ns, name))
            path = status_path("Compute", ns, name)
            if target is not None and target in seen.observed:
                observation = seen.observed[target]
                # PaletteAI's shape (available compute, excluded hosts), plus which platform or pool
                # holds each host in use.
                held = in_use_machines(observation.inventory, holders(observation.raw_clusters))
                doc = compute_document(
                    ns,
                    name,
                    {**compute_status(observation.inventory), "inUseMachines": held},
                    revision=revision,
                    inputs=resource_inputs(desired, "Compute", ns, name),
                    previous=previous.get(path),
                )
                files[path] = dump(doc)
            elif path in before:
                files[path] = before[path]
        files.update(self._pool_files(desired, before, previous, revision, now, machines, seen, routing))
        self.metrics.observe_pools(files, [str(o.entry.decision) for o in self._pool_pass.scaling.values()])
        self._warn_once(entries)

        # A target leaves reconciler.yaml only when it holds no managed cluster any more.
        keep = routing.targets | set(seen.failed) | set(seen.stalled)
        keep |= {t for t, o in seen.observed.items() if o.clusters}
        self._known_targets = set(keep)
        targets = [(t.url, t.project_uid) for t in keep]

        # The last observed inventory of each target (DESIGN.md section 6), what `plan --from-status`
        # plans against; a target not read this pass keeps its file.
        inventory = {target_file(t.url, t.project_uid): o.snapshot() for t, o in seen.observed.items()}
        for t in keep:
            path = target_file(t.url, t.project_uid)
            if path not in inventory and path in before:
                inventory[path] = before[path]

        result = PassResult(PassOutcome.SUCCESS, revision=revision, plan=entries, phases=phases)
        recorded = self._recorded
        changed = (
            files != _resource_files(before)
            or inventory != {p: d for p, d in before.items() if p.startswith("inventory/")}
            or recorded.branch != self.options.branch
            or set(recorded.targets) != set(targets)
        )
        if not changed:
            return result
        record = reconciler_document(self.options.branch, revision, targets, palette=self.options.palette_url)
        tree = {**files, **inventory, RECONCILER_FILE: dump(record)}
        if self.options.dry_run:
            log.info("dry run: status not written", files=len(files))
            return result
        if self.status is None:
            log.info("status not written: the directory is not a git repository", files=len(files))
            self._previous = tree
            return result
        try:
            result.commit = self._write_status(tree, revision)
            if result.commit:
                log.info("status committed", commit=result.commit, files=len(files))
        except GitError as exc:
            result.error = f"status branch not written: {exc}"
            log.warning("status branch not written", error=str(exc))
        if self._mismatch is not None:
            result.not_ready = self._mismatch
        return result

    def _pool_files(
        self,
        desired: DesiredState,
        before: Mapping[str, bytes],
        previous: Mapping[str, dict[str, Any]],
        revision: str | None,
        now: str,
        machines: Mapping[str, Machine],
        seen: _Observation,
        routing: Routing,
    ) -> dict[str, bytes]:
        """Status files of pools and workloads (DESIGN.md sections 6 and 9). A pool or workload whose
        Palette could not be read keeps its last facts with ``PaletteReachable=False``."""
        work = self._pool_pass
        files: dict[str, bytes] = {}
        cut_off: dict[PoolKey, tuple[Reason, str]] = {
            key: (Reason.PALETTE_UNAVAILABLE, why) for key, why in routing.pool_unavailable.items()
        }
        for target, why in seen.failed.items():
            cut_off.update(dict.fromkeys(routing.pools.get(target, ()), (Reason.PALETTE_UNAVAILABLE, why)))
        for target, why in seen.stalled.items():
            cut_off.update(dict.fromkeys(routing.pools.get(target, ()), (Reason.PALETTE_UNAUTHORIZED, why)))
        stopped = self.stopping.is_set() and not self.options.dry_run
        workloads: dict[WorkloadKey, list[WorkloadPlan]] = {}
        if work.plans:
            self.metrics.set_pool_mig(
                {p.key: _mig_figures(p) for plan in work.plans.values() for p in plan.pools}
            )
        for plan in work.plans.values():
            for pool in plan.pools:
                path = status_path("ComputePool", pool.namespace, pool.name)
                if stopped and pool.mutating and pool.key not in work.pools:
                    if path in before:
                        files[path] = before[path]
                    continue
                hosts = pool.cluster.existing.hosts if pool.cluster.existing is not None else ()
                unhealthy = tuple(
                    h for h in hosts if h in machines and machines[h].state is HostState.UNAVAILABLE
                )
                _phase, doc = pool_document(
                    pool,
                    revision=revision,
                    inputs=resource_inputs(desired, "ComputePool", pool.namespace, pool.name),
                    outcome=work.pools.get(pool.key),
                    previous=previous.get(path),
                    now=now,
                    unhealthy=unhealthy,
                )
                block = self._scaling_record(pool, previous.get(path))
                if block is not None:
                    doc["status"]["scaling"] = block
                files[path] = dump(doc)
            for w in plan.workloads:
                workloads.setdefault(w.key, []).append(w)
        for key, (reason, message) in sorted(cut_off.items()):
            path = status_path("ComputePool", *key)
            if path not in files and path in previous:
                _phase, doc = unreachable_document(
                    "ComputePool", *key, previous=previous.get(path), reason=reason, message=message, now=now
                )
                files[path] = dump(doc)
        for key, entries in sorted(workloads.items()):
            w = next((e for e in entries if e.action is not WorkloadAction.REMOVE), entries[0])
            path = status_path(w.kind, *key)
            outcome = work.workloads.get(key)
            attached = (
                outcome.attached if outcome is not None else work.records.attached.get(key, ("", ()))[1]
            )
            lost = cut_off.get((key[0], w.pool)) if w.pool is not None else None
            if lost is not None and path in previous:
                _phase, doc = unreachable_document(
                    w.kind, *key, previous=previous.get(path), reason=lost[0], message=lost[1], now=now
                )
            elif w.action is WorkloadAction.REMOVE and not attached:
                continue  # it left its pool and nothing of it is attached any more: no file
            else:
                _phase, doc = workload_document(
                    w,
                    revision=revision,
                    inputs=resource_inputs(desired, w.kind, *key),
                    outcome=outcome,
                    attached=attached,
                    previous=previous.get(path),
                    now=now,
                )
            files[path] = dump(doc)
        # Workloads whose pool could not be read are not planned: they keep their last facts.
        for path, doc in previous.items():
            parts = path.split("/")
            status = doc.get("status") if isinstance(doc, dict) else None
            if path in files or len(parts) != 3 or parts[1] not in ("aiworkloads", "mlplatforms"):
                continue
            held_in = status.get("pool") if isinstance(status, dict) else None
            cut = cut_off.get((parts[0], str(held_in))) if held_in else None
            if cut is not None:
                kind = "AIWorkload" if parts[1] == "aiworkloads" else "MLPlatform"
                name = parts[2].removesuffix(".yaml")
                _phase, doc = unreachable_document(
                    kind, parts[0], name, previous=doc, reason=cut[0], message=cut[1], now=now
                )
                files[path] = dump(doc)
        return files

    def _scaling_record(self, pool: PoolPlan, previous: Mapping[str, Any] | None) -> Any:
        """``status.scaling`` of a pool with a policy after apply (None: the plan's entry stands). An
        action is recorded once its Palette write succeeded (its commit text goes in the status
        commit's body); a failed write records nothing done. A pool the stage did not decide keeps its
        recorded block (an unreadable one as it is)."""
        work = self._pool_pass
        o = work.scaling.get(pool.key)
        if o is None:
            before = (previous or {}).get("status") or {}
            kept = before.get("scaling") if isinstance(before, Mapping) else None
            if pool.scaling.policy is None or kept is None:
                return None
            if pool.key in work.unreadable:
                return kept  # as it is, until someone fixes it
            recorded = isinstance(kept, Mapping) and isinstance(kept.get("decision"), Mapping)
            return dict(kept) if recorded else None
        status = o.status
        if o.acts:
            written = work.pools.get(pool.key)
            if written is not None and written.ok and work.applied_at is not None:
                status = o.written(work.applied_at)
            else:
                return render_scaling(o.unwritten())
        if o.commit is not None:
            work.commits.append(o.commit)
        return render_scaling(status)

    def _write_status(self, tree: dict[str, bytes], revision: str | None) -> str | None:
        """Push the status tree for ``revision``, but only while it is the head (the fence) and the
        status branch still follows this config branch; a rollback of the branch is said so. The
        message names what changed against the branch as it is now; the trailers name the config
        commit (sha, subject, author)."""
        assert self.status is not None
        if not self.lease.holds():
            raise GitError("the writer lease was lost (or could not be renewed in time); status not written")
        current = self._read_status()  # another writer may have moved it
        recorded = parse_recorded(current)
        self._mismatch = self._branch_mismatch(recorded)
        if self._mismatch is not None:
            log.warning("status branch follows another config branch; writing nothing", reason=self._mismatch)
            return None
        self._confirm_head(revision)
        branch = self.options.branch
        notes: list[str] = []
        if recorded.branch is not None and recorded.branch != branch:
            notes.append(f"the status branch now follows {branch} (was {recorded.branch})")
        elif (
            recorded.revision
            and revision
            and recorded.revision != revision
            and isinstance(self.source, GitSource)
            and not self.source.is_ancestor(recorded.revision, revision)
        ):
            notes.append(f"{branch} moved back from {recorded.revision[:7]} to {revision[:7]}")
        for note in notes:
            log.warning(note, recorded=recorded.revision, revision=revision)
        if self._deletions_note:
            notes.append(self._deletions_note)
        summary = None
        if revision and isinstance(self.source, GitSource):
            summary = self.source.commit_summary(revision)
        commit = self.status.write(
            tree,
            commit_message(current, tree, notes, scaling=self._pool_pass.commits),
            source_trailers(revision, summary),
        )
        self._previous = tree
        if commit is not None:
            self._status_tip = commit
        self._recorded = parse_recorded(tree)
        return commit

    def _warn_once(self, entries: list[PlatformPlan]) -> None:
        """One warning per rejection and blocked prune (again only when its reason or message changes)."""
        current: set[tuple[PlatformKey, str, str]] = set()
        for p in entries:
            if p.action is Action.REJECTED or p.reason is Reason.PRUNE_BLOCKED:
                mark = (p.key, str(p.reason), p.message)
                current.add(mark)
                if mark not in self._warned:
                    log.warning(
                        "prune blocked" if p.reason is Reason.PRUNE_BLOCKED else "platform rejected",
                        namespace=p.namespace,
                        name=p.name,
                        reason=str(p.reason),
                        message=p.message,
                    )
        self._warned = current

    def _last_reported_desired(self, head: str) -> DesiredState | None:
        """After a restart: the desired state of the revision the status branch last reported, so that
        a file which stopped parsing meanwhile still reads as Invalid (not absent). None if unknown."""
        if self.status is None or not isinstance(self.source, GitSource):
            return None
        before = self._read_status()
        revisions = {
            str(doc.get("status", {}).get("observedRevision"))
            for doc in parse_previous(before).values()
            if isinstance(doc.get("status"), dict) and doc["status"].get("observedRevision")
        }
        # Files keep the revision their inputs last changed at, so several differ: the revision of the
        # last pass that committed (reconciler.yaml) comes first, as the newest.
        recorded = parse_recorded(before).revision
        ordered = ([recorded] if recorded else []) + sorted(revisions)
        for revision in dict.fromkeys(r for r in ordered if r != head):
            try:
                return build_desired(self.source.read_parsed(revision), revision)
            except GitError:
                continue  # not in the cache (e.g. the branch was rewritten): nothing to carry over
        return None

    def _last_phases(self) -> dict[PlatformKey, Phase]:
        return dict(self.last.phases) if self.last is not None else {}

    # -- the loop -----------------------------------------------------------------------------------

    def request_pass(self) -> None:
        """Start a pass (with a source check) as soon as possible: the webhook calls this."""
        self.wake.set()

    def stop(self) -> None:
        self.stopping.set()
        self.wake.set()

    def run_forever(self, on_pass: Callable[[PassResult], None] | None = None) -> None:
        """Pass after pass until :meth:`stop`: git every ``interval`` (with jitter) or on a webhook,
        Palette every ``resync_interval`` (longer when idle passes would use more than a quarter of
        Palette's ``/v1/dashboard`` budget), and exponential back-off after a transient error."""
        opts = self.options
        delays = _backoff(2.0, max(2.0, min(opts.max_backoff, opts.interval)))
        next_source = 0.0
        force = True
        while not self.stopping.is_set():
            now = time.monotonic()
            check_source = force or now >= next_source
            if check_source:
                next_source = now + opts.interval * (1 + random.uniform(-opts.jitter, opts.jitter))
            result = self.reconcile_once(check_source=check_source)
            if on_pass is not None:
                on_pass(result)
            if result.outcome is PassOutcome.ERROR:
                delay = next(delays)
            else:
                delays = _backoff(2.0, max(2.0, min(opts.max_backoff, opts.interval)))
                resync = resync_interval(
                    max(self._dashboard_requests.values(), default=0),
                    floor=opts.resync_interval,
                    limit=opts.palette_rate_limits.dashboard,
                )
                delay = max(0.0, min(resync, next_source - time.monotonic()))
            force = self.wake.wait(delay)
            self.wake.clear()


def _backoff(base: float, cap: float) -> Iterator[float]:
    """Delays for retries after transient errors: doubling from ``base`` up to ``cap``, with jitter."""
    delay = base
    while True:
        yield delay * random.uniform(0.8, 1.2)
        delay = min(cap, delay * 2)


def _unreachable(routing: Routing, seen: _Observation) -> dict[PlatformKey, tuple[Reason, str]]:
    """Platforms whose Palette could not be read this pass, with the reason their status gives."""
    out: dict[PlatformKey, tuple[Reason, str]] = {
        key: (Reason.PALETTE_UNAVAILABLE, why) for key, why in routing.unavailable.items()
    }
    for target, why in seen.failed.items():
        out.update(dict.fromkeys(routing.platforms.get(target, ()), (Reason.PALETTE_UNAVAILABLE, why)))
    for target, why in seen.stalled.items():
        out.update(dict.fromkeys(routing.platforms.get(target, ()), (Reason.PALETTE_UNAUTHORIZED, why)))
    return out


def _summary(entries: list[PlatformPlan]) -> dict[str, int]:
    """Counts for the pass summary line."""
    counted = (Action.CREATE, Action.SCALE, Action.REPLACE, Action.DELETE, Action.REJECTED)
    counts = {**{DONE[a]: 0 for a in counted}, "prune_blocked": 0}
    for p in entries:
        if p.reason is Reason.PRUNE_BLOCKED:
            counts["prune_blocked"] += 1
        elif p.action in counted:
            counts[DONE[p.action]] += 1
    return counts


def _mig_figures(pool: PoolPlan) -> tuple[int, int]:
    """A pool's stranded MIG slices and MIG instances bound to a workload, for /metrics."""
    in_use = sum(
        1
        for gpus in pool.mig.values()
        for gpu in gpus
        for instance in gpu.get("instances") or []
        if instance.get("workload") is not None
    )
    return (pool.mig_usage.stranded if pool.mig_usage is not None else 0), in_use


def _target_order(target: Target) -> tuple[str, str]:
    return (target.url, target.project_uid or "")


def _is_platform_file(path: str) -> bool:
    return path.count("/") == 2 and path.split("/")[1] == "mlplatforms"


def _resource_files(files: Mapping[str, bytes]) -> dict[str, bytes]:
    """A status tree without its root files (``reconciler.yaml``, ``inventory/``)."""
    return {p: d for p, d in files.items() if p != RECONCILER_FILE and not p.startswith("inventory/")}
