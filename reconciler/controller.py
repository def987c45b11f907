"""One reconcile pass, and the loop around it (DESIGN.md section 1).

A pass reads top to bottom as the pipeline it is: source -> load -> observe -> plan -> apply -> report.
Every exit goes through :meth:`Controller.reconcile_once`, which turns what happened into a
:class:`PassResult` (status files, metrics, and the delay before the next pass). Errors are sorted as in
Flux: transient ones (git or Palette unreachable) back off and retry; invalid input is reported and
left alone until it changes (a pass over unchanged inputs does nothing).

Decisions the design leaves open, written down here:
- A platform talks to the Palette of its ComputeProfile's Settings, else its Project's (``hostUrl``,
  ``defaultProjectID`` as the ``ProjectUid`` scope, the key from ``apiKeySecretRef``, else
  ``$PALETTE_API_KEY``); a Compute to its own Settings, else its Project's. ``--palette URL`` replaces
  every ``hostUrl`` and takes the key from ``$PALETTE_API_KEY``. Everything on one (URL, project)
  shares one inventory, so it is observed and planned together (with the first Settings' key); the
  prune guard counts deletions over the whole pass.
- A pass whose git read fails does nothing at all (no apply, no status); one whose Palette read fails
  for a namespace leaves that namespace's clusters alone and reports ``PaletteUnavailable``.
- Inputs unchanged since the last clean pass (same revision, same Palette observation) -> the pass
  stops before planning (outcome ``skipped``): no Palette write, no commit.
"""

from __future__ import annotations

import dataclasses
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

from reconciler.apply import apply_plan
from reconciler.compute_status import compute_status
from reconciler.inventory import HostState, Inventory, discover
from reconciler.logging import get_logger, pass_context
from reconciler.manifests import ParsedFile, build_desired, parse_file
from reconciler.metrics import Metrics, PassOutcome
from reconciler.model.conditions import Phase, Reason
from reconciler.model.desired import DesiredState, PlatformKey
from reconciler.model.diagnostics import Diagnostic, Severity
from reconciler.model.observed import MANAGED_BY_LABEL, MANAGED_BY_VALUE, ManagedCluster
from reconciler.model.resources import Compute
from reconciler.palette.client import PaletteClient
from reconciler.palette.credentials import API_KEY_ENV, MissingAPIKey, api_key_from_env, read_key_file
from reconciler.palette.errors import PaletteError
from reconciler.palette.hosts import HostLister
from reconciler.palette.observe import managed_clusters
from reconciler.palette.pacing import DASHBOARD, RateLimits, resync_interval
from reconciler.plan import Action, Plan, PlatformPlan, make_plan
from reconciler.source import DirectorySource, GitError, GitSource
from reconciler.status.render import (
    Outcome,
    commit_message,
    compute_document,
    dump,
    parse_previous,
    platform_status,
    status_path,
)
from reconciler.status.store import StatusStore

log = get_logger(component="controller")

DEFAULT_KEY_ENV = API_KEY_ENV


@dataclass(frozen=True)
class ControllerOptions:
    """Everything a controller is configured with, grouped by purpose."""

    # source
    repo: str
    branch: str = "main"
    cache_dir: Path | None = None
    watch: bool = False  # repo is a local directory read as it is on disk (not its commits)
    # palette
    palette_url: str | None = None
    apply_concurrency: int = 4
    palette_rate_limits: RateLimits = field(default_factory=RateLimits.palette)  # off(): fast tests
    # report
    status_branch: str = "reconciler/status"
    # loop
    interval: float = 60.0
    resync_interval: float = 30.0
    jitter: float = 0.1
    max_backoff: float = 300.0
    # safety
    max_deletions: int = 1


@dataclass(frozen=True)
class Target:
    """One Palette endpoint and project scope: the unit that is observed and planned together."""

    url: str
    project_uid: str | None


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


@dataclass
class _Observed:
    inventory: Inventory
    clusters: list[ManagedCluster]
    fingerprint: str


@dataclass
class _Routing:
    """Which Palette (target) each platform and Compute talks to, and who has none."""

    platforms: dict[Target, set[PlatformKey]] = field(default_factory=dict)
    computes: dict[tuple[str, str], Target] = field(default_factory=dict)
    unavailable: dict[PlatformKey, str] = field(default_factory=dict)

    @property
    def targets(self) -> set[Target]:
        return set(self.platforms) | set(self.computes.values())

    def all_platforms(self) -> set[PlatformKey]:
        return {key for keys in self.platforms.values() for key in keys}


class Controller:
    """Reconciles one config repository branch against Palette."""

    def __init__(
        self,
        options: ControllerOptions,
        *,
        metrics: Metrics | None = None,
        environ: Mapping[str, str] | None = None,
        client_factory: Callable[[Target, str], PaletteClient] | None = None,
    ) -> None:
        self.options = options
        self.metrics = metrics or Metrics()
        self._environ = environ if environ is not None else os.environ
        cache = options.cache_dir
        self.source: GitSource[ParsedFile] | DirectorySource[ParsedFile]
        self.status: StatusStore | None
        if options.watch:
            # A local working directory: read as it is on disk; status goes to its repository if it has one.
            self.source = DirectorySource(Path(options.repo), parse=parse_file)
            has_git = (Path(options.repo) / ".git").exists()
            self.status = (
                StatusStore(options.repo, options.status_branch, cache / "status" if cache else None)
                if has_git
                else None
            )
        else:
            self.source = GitSource(
                options.repo, options.branch, cache / "source" if cache else None, parse=parse_file
            )
            self.status = StatusStore(
                options.repo, options.status_branch, cache / "status" if cache else None
            )
        self._client_factory = client_factory or self._make_client
        self._clients: dict[Target, PaletteClient] = {}
        self._revision: str | None = None
        self._desired: DesiredState | None = None
        self._previous: dict[str, bytes] | None = None
        self._clean_fingerprint: str | None = None
        self._known_targets: set[Target] = set()
        self._key_refs: dict[Target, KeyRef] = {}
        self._observed: dict[Target, _Observed] = {}
        self._host_listers: dict[Target, HostLister] = {}
        self._dashboard_requests: dict[Target, int] = {}  # /v1/dashboard requests of the last observe
        self.wake = threading.Event()
        self.stopping = threading.Event()
        self.last: PassResult | None = None

    # -- wiring -------------------------------------------------------------------------------------

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

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()
        if isinstance(self.source, GitSource):
            self.source.close()
        if self.status is not None:
            self.status.close()

    # -- the pass -----------------------------------------------------------------------------------

    def reconcile_once(self, *, check_source: bool = True) -> PassResult:
        """One pass: source, load, observe, plan, apply, report."""
        started = time.perf_counter()
        try:
            result = self._pass(check_source)
        except GitError as exc:
            log.warning("git unavailable; nothing applied", error=str(exc))
            result = PassResult(PassOutcome.ERROR, revision=self._revision, error=str(exc))
        except Exception as exc:  # a bug or an unforeseen failure must not end the loop: back off, retry
            log.exception("pass failed", revision=self._revision)
            result = PassResult(
                PassOutcome.ERROR, revision=self._revision, error=f"{type(exc).__name__}: {exc}"
            )
        result.duration = time.perf_counter() - started
        self.metrics.observe_pass(result.outcome, result.duration)
        if result.phases:
            counts: dict[Phase | str, int] = {}
            for phase in result.phases.values():
                counts[phase] = counts.get(phase, 0) + 1
            self.metrics.set_platform_phases(counts)
        self.last = result
        return result

    def _pass(self, check_source: bool) -> PassResult:
        # 1. source  2. load and validate
        desired = self._desired
        if check_source or desired is None:
            fetches = self.source.fetch_count
            head = self.source.sync()
            if self.source.fetch_count != fetches:
                self.metrics.observe_git_fetch(self.source.last_fetch_seconds)
            if head != self._revision or desired is None:
                loaded = build_desired(self.source.read_parsed(head), head)
                loaded.diagnostics.extend(self.source.diagnostics)
                if not self.source.complete:  # a skipped manifest may hold a resource: prune nothing
                    loaded.complete = False
                if desired is None and _has_unreadable(loaded):
                    desired = self._last_reported_desired(head)
                desired = _carry_unreadable(desired, loaded)
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
        revision = self._revision

        with pass_context(revision):
            # 3. observe
            routing = self._route(desired)
            observed: dict[Target, _Observed] = {}
            failed: dict[Target, str] = {}
            for target in sorted(
                routing.targets | self._known_targets, key=lambda t: (t.url, t.project_uid or "")
            ):
                try:
                    observed[target] = self._observe(target)
                except (PaletteError, MissingAPIKey) as exc:
                    failed[target] = f"Palette unavailable: {exc}"
                    log.warning("palette unavailable", url=target.url, error=str(exc))
            self._known_targets |= set(observed)
            fingerprint = hashlib.sha256(
                json.dumps(
                    [
                        revision,
                        sorted((t.url, t.project_uid or "", o.fingerprint) for t, o in observed.items()),
                    ]
                ).encode()
            ).hexdigest()
            if not failed and not routing.unavailable and fingerprint == self._clean_fingerprint:
                log.debug("nothing changed since the last pass")
                return PassResult(PassOutcome.SKIPPED, revision=revision, phases=self._last_phases())

            # 4. allocate and 5. plan
            plans = self._plan(desired, routing, observed)

            # 6. apply
            outcomes: dict[PlatformKey, Outcome] = {}
            for target, plan in plans.items():
                outcomes.update(
                    apply_plan(
                        self._client(target), desired, plan, concurrency=self.options.apply_concurrency
                    )
                )

            # 7. report
            unavailable = dict(routing.unavailable)
            for target, reason in failed.items():
                unavailable.update(dict.fromkeys(routing.platforms.get(target, ()), reason))
            entries = [p for plan in plans.values() for p in plan.platforms]
            result = self._report(desired, revision, entries, outcomes, observed, routing, unavailable)

        errors = bool(failed) or any(not o.ok for o in outcomes.values()) or result.error is not None
        if errors:
            result.outcome = PassOutcome.ERROR
        elif desired.has_errors:
            result.outcome = PassOutcome.INVALID
        else:
            result.outcome = PassOutcome.SUCCESS
        result.writes = len(outcomes)
        # Only a pass that changed nothing may be skipped next time with the same inputs.
        clean = not errors and not outcomes and not routing.unavailable
        self._clean_fingerprint = fingerprint if clean else None
        return result

    def _route(self, desired: DesiredState) -> _Routing:
        """Each platform talks to the Palette of its ComputeProfile's Settings, else its Project's; each
        Compute to its own Settings, else its Project's (DESIGN.md section 3). ``--palette`` replaces
        every ``hostUrl``. An invalid platform uses its Project's, so its cluster is still found."""
        routing = _Routing()
        for platform in desired.platforms():
            key = (platform.metadata.namespace, platform.metadata.name)
            profile = desired.compute_profile_for(platform)
            ref = profile.spec.settings_ref if profile is not None else None
            target = self._target(desired, key[0], ref.name if ref else None)
            if isinstance(target, str):
                routing.unavailable[key] = target
            else:
                routing.platforms.setdefault(target, set()).add(key)
        for kind, ns, name in sorted(desired.invalid):
            if kind == "MLPlatform":
                target = self._target(desired, ns, None)
                if isinstance(target, str):
                    routing.unavailable[(ns, name)] = target
                else:
                    routing.platforms.setdefault(target, set()).add((ns, name))
        for compute in desired.of_kind(Compute):
            ns, ref = compute.metadata.namespace, compute.spec.settings_ref
            target = self._target(desired, ns, ref.name if ref else None)
            if not isinstance(target, str):
                routing.computes[(ns, compute.metadata.name)] = target
        return routing

    def _target(self, desired: DesiredState, namespace: str, settings_name: str | None) -> Target | str:
        """The Palette of a Settings reference (None: the Project's), or why there is none."""
        settings = desired.settings_for(namespace, settings_name)
        url = self.options.palette_url or (settings.spec.palette.host_url if settings else None)
        if url is None:
            return f"namespace {namespace} has no Settings and no --palette endpoint was given"
        target = Target(url.rstrip("/"), settings.spec.palette.default_project_id if settings else None)
        # One key per target: with --palette, $PALETTE_API_KEY; else the first Settings' reference.
        ref = settings.spec.palette.api_key_secret_ref if settings else None
        if target not in self._key_refs:
            use_ref = ref is not None and self.options.palette_url is None
            self._key_refs[target] = KeyRef(ref.env, ref.file) if use_ref and ref else KeyRef()
        return target

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
        inventory = discover(hosts)
        seen = _Observed(inventory, managed_clusters(raw_clusters, hosts, inventory.by_uid()), digest)
        self._observed[target] = seen
        return seen

    def _plan(
        self, desired: DesiredState, routing: _Routing, observed: Mapping[Target, _Observed]
    ) -> dict[Target, Plan]:
        everyone = routing.all_platforms()
        plans: dict[Target, Plan] = {}
        for target, seen in observed.items():
            mine = routing.platforms.get(target, set())
            # A cluster of a platform routed elsewhere is left alone here; one whose platform is gone
            # from the desired state everywhere is an orphan of this target.
            clusters = [c for c in seen.clusters if c.key in mine or c.key not in everyone]
            plans[target] = make_plan(
                _restrict(desired, mine), seen.inventory, clusters, max_deletions=self.options.max_deletions
            )
        deletions = sum(1 for plan in plans.values() for p in plan.platforms if p.action is Action.DELETE)
        if deletions > self.options.max_deletions:
            message = (
                f"would delete {deletions} platform clusters, more than --max-deletions "
                f"{self.options.max_deletions}; nothing is deleted"
            )
            for target, plan in plans.items():
                plans[target] = dataclasses.replace(
                    plan,
                    platforms=[
                        dataclasses.replace(
                            p, action=Action.UNCHANGED, reason=Reason.PRUNE_BLOCKED, message=message
                        )
                        if p.action is Action.DELETE
                        else p
                        for p in plan.platforms
                    ],
                )
        return plans

    def _report(
        self,
        desired: DesiredState,
        revision: str | None,
        entries: list[PlatformPlan],
        outcomes: Mapping[PlatformKey, Outcome],
        observed: Mapping[Target, _Observed],
        routing: _Routing,
        unavailable: Mapping[PlatformKey, str],
    ) -> PassResult:
        if self._previous is None:
            self._previous = self.status.read() if self.status is not None else {}
        previous = parse_previous(self._previous)
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        files: dict[str, bytes] = {}
        phases: dict[PlatformKey, Phase] = {}
        planned = {p.key for p in entries}
        # Platforms whose Palette could not be observed: their clusters are left alone.
        stranded = [
            PlatformPlan(ns, name, Action.UNCHANGED, Reason.PALETTE_UNAVAILABLE, unavailable[(ns, name)])
            for (ns, name) in sorted(unavailable)
            if (ns, name) not in planned
        ]
        machines = {uid: m for seen in observed.values() for uid, m in seen.inventory.by_uid().items()}
        for p in [*entries, *stranded]:
            path = status_path("MLPlatform", p.namespace, p.name)
            hosts = p.existing.hosts if p.existing is not None else ()
            unhealthy = [h for h in hosts if h in machines and machines[h].state is HostState.UNAVAILABLE]
            phase, doc = platform_status(
                p,
                revision=revision,
                outcome=outcomes.get(p.key),
                previous=previous.get(path),
                now=now,
                unavailable=unavailable.get(p.key) if p.reason is Reason.PALETTE_UNAVAILABLE else None,
                unhealthy=unhealthy,
            )
            phases[p.key] = phase
            files[path] = dump(doc)
        for compute in desired.of_kind(Compute):
            ns, name = compute.metadata.namespace, compute.metadata.name
            target = routing.computes.get((ns, name))
            if target is not None and target in observed:
                files[status_path("Compute", ns, name)] = dump(
                    compute_document(ns, name, revision, compute_status(observed[target].inventory))
                )
            elif status_path("Compute", ns, name) in self._previous:
                files[status_path("Compute", ns, name)] = self._previous[status_path("Compute", ns, name)]
        result = PassResult(PassOutcome.SUCCESS, revision=revision, plan=entries, phases=phases)
        if files != self._previous and self.status is None:
            log.info("status not written: the directory is not a git repository", files=len(files))
            self._previous = files
        elif files != self._previous and self.status is not None:
            try:
                result.commit = self.status.write(
                    files,
                    commit_message(revision, entries, outcomes),
                    {"Source-Revision": revision or "unknown"},
                )
                self._previous = files
                if result.commit:
                    log.info("status committed", commit=result.commit, files=len(files))
            except GitError as exc:
                result.error = f"status branch not written: {exc}"
                log.warning("status branch not written", error=str(exc))
        return result

    def _last_reported_desired(self, head: str) -> DesiredState | None:
        """After a restart: the desired state of the revision the status branch last reported, so that
        a file which stopped parsing meanwhile still reads as Invalid (not absent). None if unknown."""
        if self.status is None or not isinstance(self.source, GitSource):
            return None
        if self._previous is None:
            self._previous = self.status.read()
        revisions = {
            str(doc.get("status", {}).get("observedRevision"))
            for doc in parse_previous(self._previous).values()
            if isinstance(doc.get("status"), dict) and doc["status"].get("observedRevision")
        }
        for revision in sorted(revisions - {head}):
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


def _has_unreadable(state: DesiredState) -> bool:
    return any(d.severity is Severity.ERROR and d.kind is None and d.name is None for d in state.diagnostics)


def _carry_unreadable(previous: DesiredState | None, current: DesiredState) -> DesiredState:
    """Resources last seen in a file that no longer parses are Invalid, not absent (DESIGN.md section 7).

    A YAML syntax error hides which resources a file holds. The previous revision's desired state says
    which ones were there; they are marked invalid (so their clusters are kept and their status says
    Invalid) instead of looking deleted.
    """
    if previous is None:
        return current
    broken: dict[str, list[Diagnostic]] = {}
    for diag in current.diagnostics:
        if diag.severity is Severity.ERROR and diag.kind is None and diag.name is None:
            broken.setdefault(diag.file, []).append(diag)
    if not broken:
        return current
    last_file = {identity: loaded.source.file for identity, loaded in previous.resources.items()}
    for identity, diags in previous.invalid.items():
        if diags:
            last_file[identity] = diags[0].file
    for identity, file in last_file.items():
        problems = broken.get(file)
        if problems and identity not in current.resources and identity not in current.invalid:
            current.invalid[identity] = list(problems)
    return current


def _restrict(desired: DesiredState, platforms: set[PlatformKey]) -> DesiredState:
    """The desired state with only ``platforms`` among the MLPlatforms (valid or invalid); every other
    resource, the diagnostics and completeness are kept whole."""

    def keep(identity: tuple[str, str, str]) -> bool:
        return identity[0] != "MLPlatform" or (identity[1], identity[2]) in platforms

    return DesiredState(
        revision=desired.revision,
        resources={k: v for k, v in desired.resources.items() if keep(k)},
        invalid={k: v for k, v in desired.invalid.items() if keep(k)},
        diagnostics=list(desired.diagnostics),
        complete=desired.complete,
    )
