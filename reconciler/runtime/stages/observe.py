"""The observe stage: every routed or recorded Palette target read (edge hosts, managed clusters).

A target that refuses its key (401/403, or no key) is *stalled*: not contacted again until its key or
the Settings change. One that cannot be read (unreachable, 5xx) is *failed* for this pass. What was read
is reused when nothing moved in Palette (the host lister reads only what changed since its last read).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from reconciler.bundles import bundle_uids
from reconciler.edgehost import HostFacts, read_host
from reconciler.host_answers import carry_readable, doubtful_answers
from reconciler.inventory import DiscoveryMemo, discover
from reconciler.logging import get_logger
from reconciler.model.conditions import Reason
from reconciler.model.desired import DesiredState, PlatformKey
from reconciler.model.observed import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from reconciler.model.outcomes import Outcome
from reconciler.model.resources import Settings
from reconciler.palette.catalogue import ProfileMemory, read_catalogue
from reconciler.palette.client import PaletteClient
from reconciler.palette.cloud_configs import read_cloud_configs
from reconciler.palette.credentials import MissingAPIKey, api_key_from_env, read_key_file
from reconciler.palette.errors import DoubtfulAnswer, PaletteError, UnauthorizedError
from reconciler.palette.hosts import HostLister
from reconciler.palette.pacing import DASHBOARD
from reconciler.plan import Action, Plan
from reconciler.resolve import NamespaceSelector, Routing, Target, route
from reconciler.runtime.facts import Observation, ObservedTarget
from reconciler.runtime.options import DEFAULT_KEY_ENV, KeyRef
from reconciler.runtime.outcome import target_order
from reconciler.snapshots import managed_clusters
from reconciler.status.creates import indexing, read_creates
from reconciler.status.recorded import listing_gap, missing_clusters
from reconciler.status.snapshot import SnapshotError, read_snapshots
from reconciler.sudden import DEFAULT_THRESHOLD, drift

log = get_logger(component="controller")

ClientFactory = Callable[[Target, str], PaletteClient]
ListerFactory = Callable[[PaletteClient], HostLister]


@dataclass(frozen=True)
class _Stall:
    """A target that refused its key: not contacted again until ``fingerprint`` changes."""

    fingerprint: str
    message: str


class Observer:
    """The Palette side of a running reconciler: one client per target, its key reference, stalls, and
    the last observation of each target (kept between passes)."""

    def __init__(
        self,
        client_factory: ClientFactory,
        environ: Mapping[str, str],
        *,
        palette_url: str | None,
        namespaces: NamespaceSelector,
        sudden_threshold: float = DEFAULT_THRESHOLD,
        host_lister: ListerFactory = HostLister,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``host_lister`` makes a target's lister (the loop's gives it the pass's clock and sweep pace);
        ``clock``: the pass's clock (how old a recorded create is)."""
        self._factory = client_factory
        self._clock = clock
        self._host_lister = host_lister
        self._sudden_threshold = sudden_threshold  # 1.0 or more: never held
        self._unconfirmed: dict[Target, str] = {}  # a sudden change seen once, by its fingerprint
        self._expected_gone: set[str] = set()  # clusters the last apply deleted or replaced
        self._environ = environ
        self._palette_url = palette_url
        self._namespaces = namespaces
        self._clients: dict[Target, PaletteClient] = {}
        self._key_refs: dict[Target, KeyRef] = {}
        self._stalls: dict[Target, _Stall] = {}
        self._observed: dict[Target, ObservedTarget] = {}
        self._host_listers: dict[Target, HostLister] = {}
        self._discovered: dict[Target, DiscoveryMemo] = {}  # each host's discovery, by its kept facts
        self._profiles: dict[Target, ProfileMemory] = {}  # catalogue answers read, and what was logged
        self.dashboard_requests: dict[Target, int] = {}  # /v1/dashboard requests of the last observe
        self.known_targets: set[Target] = set()  # recorded or observed: still observed

    def route(self, desired: DesiredState) -> Routing:
        """Which Palette each platform and Compute talks to: the one routing rule, shared with ``plan``."""
        routing = route(desired, self._palette_url)
        for target, ref in routing.keys.items():
            self._key_refs.setdefault(target, KeyRef(ref.env, ref.file) if ref is not None else KeyRef())
        return routing

    def observe(
        self,
        desired: DesiredState,
        routing: Routing,
        recorded: Mapping[str, bytes],
        docs: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> Observation:
        """Read every routed or recorded target; a refused key stalls its target until it changes.
        ``recorded``: the status branch's files (the clusters it records, the last inventory snapshots);
        ``docs``: those files parsed, when the caller has them (they are not parsed again)."""
        observed: dict[Target, ObservedTarget] = {}
        failed: dict[Target, str] = {}
        stalled: dict[Target, str] = {}
        uids = bundle_uids(desired)  # the catalogue's answers the bundle checks need (docs/bundles.md)
        for target in sorted(routing.targets | self.known_targets, key=target_order):
            stall = self._stalls.get(target)
            if stall is not None:
                if self._credentials_fingerprint(target, desired) == stall.fingerprint:
                    stalled[target] = stall.message
                    continue
                log.info("key or Settings changed: trying a stalled target again", url=target.url)
                del self._stalls[target]
                self.drop_client(target)
                self._key_refs.pop(target, None)
                self.route(desired)  # picks the key reference the Settings name now
            try:
                observed[target] = self.read(target, routing, recorded, docs, uids)
            except (UnauthorizedError, MissingAPIKey) as exc:
                stalled[target] = self.stall(target, desired, str(exc))
            except DoubtfulAnswer as exc:
                failed[target] = f"Palette unavailable: {exc}"
                log.warning(
                    "doubtful answer: nothing is created, deleted or moved on this target this pass; "
                    "read again next pass",
                    url=target.url,
                    error=str(exc),
                )
            except PaletteError as exc:
                failed[target] = f"Palette unavailable: {exc}"
                log.warning("palette unavailable", url=target.url, error=str(exc))
        self.known_targets |= set(observed) | set(stalled) | set(failed)
        return Observation(observed, failed, stalled)

    def read(
        self,
        target: Target,
        routing: Routing,
        recorded: Mapping[str, bytes],
        docs: Mapping[str, Mapping[str, Any]] | None = None,
        profile_uids: Sequence[str] = (),
    ) -> ObservedTarget:
        """One target read and its listing confirmed, with the catalogue's answers for ``profile_uids``
        (the bundles' uids); what the read raises is raised (nothing stalls): what ``plan --palette``
        observes through. A catalogue read that fails is no failure of the target (its bundles are not
        checked this pass)."""
        seen = self._observe(target, recorded)
        self._confirm_listing(target, seen, routing, recorded, docs)
        return self._with_catalogue(target, seen, profile_uids)

    def _with_catalogue(self, target: Target, seen: ObservedTarget, uids: Sequence[str]) -> ObservedTarget:
        """``seen`` with Palette's answers for ``uids`` (an answer is asked again once it is old); no
        catalogue when no bundle names a uid. An unread uid is logged once per change of its reason."""
        catalogue = None
        if uids:
            memory = self._profiles.setdefault(target, ProfileMemory())
            read = read_catalogue(self.client(target), uids, memory, self._clock())
            catalogue = read.catalogue
            if read.news:
                log.warning(
                    "cluster profiles not read: their bundles are not checked until they are",
                    url=target.url,
                    profiles=dict(sorted(read.news.items())),
                )
        if seen.inventory.catalogue == catalogue:
            return seen  # the observation reused: the same catalogue, the same snapshot
        with_profiles = replace(
            seen,
            inventory=replace(seen.inventory, catalogue=catalogue),
            records_catalogue=self._namespaces.everything,
            _snapshot=None,
        )
        self._observed[target] = with_profiles
        return with_profiles

    def stall(self, target: Target, desired: DesiredState, error: str) -> str:
        """Stall ``target`` until its key or the Settings change; the message its resources report."""
        message = f"Palette refused the API key or none is set: {error}"
        self._stalls[target] = _Stall(self._credentials_fingerprint(target, desired), message)
        self.drop_client(target)
        log.warning(
            "target stalled: not retried until its key or Settings change",
            url=target.url,
            project_uid=target.project_uid,
            reason=str(Reason.PALETTE_UNAUTHORIZED),
            error=error,
        )
        return message

    def refused(
        self,
        desired: DesiredState,
        plans: Mapping[Target, Plan],
        seen: Observation,
        writes: Mapping[PlatformKey, Outcome],
    ) -> Observation:
        """``seen`` with every target that refused the key while applying stalled, as when observing.
        The cluster profiles a failed pool write or profile attach used are asked again next pass."""
        stalled = dict(seen.stalled)
        for target, plan in plans.items():
            denied = [o for p in plan.platforms if (o := writes.get(p.key)) and o.unauthorized]
            if denied:
                stalled[target] = self.stall(target, desired, denied[0].error or "Palette refused the key")
            memory = self._profiles.get(target)
            if memory is not None:
                memory.expire(failed_profile_uids(plan, writes))
        return replace(seen, stalled=stalled)

    def expect_gone(self, plans: Mapping[Target, Plan]) -> None:
        """The clusters this pass's plans delete or replace: their going is no sudden change."""
        entries = [e for plan in plans.values() for e in (*plan.platforms, *(p.cluster for p in plan.pools))]
        self._expected_gone = {
            e.existing.uid
            for e in entries
            if e.existing is not None and e.action in (Action.DELETE, Action.REPLACE)
        }

    def client(self, target: Target) -> PaletteClient:
        client = self._clients.get(target)
        if client is None:
            client = self._factory(target, self._api_key(target))
            self._clients[target] = client
        return client

    def drop_client(self, target: Target) -> None:
        client = self._clients.pop(target, None)
        if client is not None:
            client.close()

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()

    def remember(self, targets: Iterable[Target]) -> None:
        """The targets to observe next pass besides the routed ones (what ``reconciler.yaml`` keeps)."""
        self.known_targets = set(targets)

    def _api_key(self, target: Target) -> str:
        ref = self._key_refs.get(target, KeyRef())
        if ref.file:
            return read_key_file(ref.file)
        if ref.env and ref.env != DEFAULT_KEY_ENV and self._environ.get(ref.env, "").strip():
            return api_key_from_env(self._environ, name=ref.env)
        return api_key_from_env(self._environ)

    def _credentials_fingerprint(self, target: Target, desired: DesiredState) -> str:
        """A hash of the target's current key (never the key) and of every Settings document."""
        try:
            key = hashlib.sha256(self._api_key(target).encode()).hexdigest()
        except MissingAPIKey:
            key = "no key"
        ref = self._key_refs.get(target, KeyRef())
        settings = sorted(s.model_dump_json() for s in desired.of_kind(Settings))
        return hashlib.sha256(json.dumps([key, ref.env, ref.file, settings]).encode()).hexdigest()

    def _confirm_listing(
        self,
        target: Target,
        observed: ObservedTarget,
        routing: Routing,
        recorded: Mapping[str, bytes],
        docs: Mapping[str, Mapping[str, Any]] | None,
    ) -> None:
        """Absence is confirmed before it is acted on: a cluster the status branch records for a platform
        or pool of this target that the listing does not show is looked up by uid; if it exists, the
        listing is incomplete and the target is read as unavailable this pass (nothing is created). A
        cluster this reconciler created within Palette's indexing delay is not listed yet by design
        (``status/creates.py``): it is left out of the check."""
        creating = indexing(read_creates(recorded), (target.url, target.project_uid), self._clock())
        missing = missing_clusters(
            recorded,
            routing.platforms.get(target, ()),
            routing.pools.get(target, ()),
            [*(c.uid for c in observed.clusters), *creating],
            docs,
        )
        if not missing:
            return
        client = self.client(target)
        found = {uid: who for uid, who in sorted(missing.items())[:20] if client.get_cluster(uid) is not None}
        gap = listing_gap(found)
        if gap is not None:
            self._observed.pop(target, None)  # read it afresh next pass
            raise DoubtfulAnswer(gap)

    def _prior_hosts(
        self, target: Target, recorded: Mapping[str, bytes]
    ) -> list[Mapping[str, Any] | HostFacts]:
        """The hosts as last read right: the last observation in memory, else the status branch's
        inventory snapshot of the target (a restarted process)."""
        last = self._observed.get(target)
        if last is not None:
            return list(last.raw_hosts)
        try:
            snapshots = read_snapshots(recorded)
        except SnapshotError:
            return []
        found = snapshots.get((target.url, target.project_uid))
        return list(found.edge_hosts) if found is not None else []

    def _observe(self, target: Target, recorded: Mapping[str, bytes]) -> ObservedTarget:
        client = self.client(target)
        lister = self._host_listers.get(target)
        if lister is None or lister.client is not client:  # reads what changed since its last read
            lister = self._host_listers[target] = self._host_lister(client)
        before = client.requests_sent(DASHBOARD)
        hosts: list[Mapping[str, Any] | HostFacts] = list(lister.list())  # facts, read once per page
        raw_clusters = client.search_clusters({MANAGED_BY_LABEL: MANAGED_BY_VALUE})
        self.dashboard_requests[target] = client.requests_sent(DASHBOARD) - before
        # The lister's version moves whenever a host does; the cluster listing's order is stable.
        digest = hashlib.sha256(json.dumps([lister.version, raw_clusters], default=str).encode()).hexdigest()
        last = self._observed.get(target)
        if last is not None and last.fingerprint == digest:
            return last  # nothing moved in Palette: reuse the machines and clusters read last time
        doubtful = lister.doubtful
        prior: list[Mapping[str, Any] | HostFacts] | None = None
        if any(not f.gpus and f.cluster_uid for f in map(read_host, hosts) if f is not None):
            prior = self._prior_hosts(target, recorded)
            doubtful |= doubtful_answers(hosts, prior)  # gpus: [] on a member: not "no GPUs"
        if doubtful:  # a member's unreadable answer is replaced by its last readable copy, and the
            # clusters' own cloud configs say who their members are
            prior = prior if prior is not None else self._prior_hosts(target, recorded)
            hosts, carried = carry_readable(hosts, doubtful, prior)
            log.warning(
                "unreadable edge host answers: never placed; cluster members keep their last readable copy",
                url=target.url,
                unreadable=len(doubtful),
                carried=len(carried),
            )
        inventory = discover(hosts, self._discovered.setdefault(target, {}))  # changed hosts only
        configs = read_cloud_configs(client, raw_clusters) if doubtful else None
        clusters = managed_clusters(raw_clusters, hosts, inventory.by_uid(), configs)
        # Another shard's clusters are not this instance's: never planned, pruned or recorded here. The
        # raw listing stays whole: the target's inventory snapshot is shared by the shards observing it.
        clusters = [c for c in clusters if self._namespaces.owns(c.namespace)]
        seen = ObservedTarget(inventory, clusters, digest, hosts, raw_clusters)
        self._confirm_sudden(target, seen)
        self._observed[target] = seen
        return seen

    def _confirm_sudden(self, target: Target, seen: ObservedTarget) -> None:
        """A sudden change since the last observation acted on (over ``sudden_threshold`` of the hosts or
        managed clusters) is believed only when the next pass observes the same: until then the target
        is unavailable for the pass (nothing applied; statuses keep their facts)."""
        last = self._observed.get(target)
        if last is None or self._sudden_threshold >= 1.0:
            return
        change = drift(last.inventory, seen.inventory, last.clusters, seen.clusters, self._expected_gone)
        if not change.sudden(self._sudden_threshold):
            self._unconfirmed.pop(target, None)
            return
        if self._unconfirmed.get(target) == change.fingerprint:
            log.warning("a sudden inventory change was observed twice: acting on it", url=target.url)
            self._unconfirmed.pop(target, None)
            return
        self._unconfirmed[target] = change.fingerprint
        raise DoubtfulAnswer(change.message(self._sudden_threshold))


def failed_profile_uids(plan: Plan, writes: Mapping[PlatformKey, Outcome]) -> set[str]:
    """The cluster profile uids of ``plan``'s pools and workloads whose write failed (not a refused key,
    which stalls the target): a pool's own profiles, a workload's profiles to attach."""

    def failed(key: PlatformKey) -> bool:
        outcome = writes.get(key)
        return outcome is not None and not outcome.ok and not outcome.unauthorized

    uids = {u for pool in plan.pools if failed(pool.key) for u in pool.own_profiles or ()}
    return uids | {r.uid for w in plan.workloads if failed(w.key) for r in w.cluster_profiles}
