"""The read-only observers of a preview: what each Palette target shows, without writing anything.

- :class:`PaletteObserver` (``plan --palette``): ``run``'s own observe stage
  (:class:`~reconciler.runtime.stages.observe.Observer`), which only reads (edge hosts, managed
  clusters, cloud configs); a target it cannot read is an error of the plan.
- :class:`SnapshotObserver` (``plan --inventory FILE``): a Palette holding the snapshot file, each target
  scoped exactly as ``run`` sees it.
- :class:`RecordedObserver` (``plan --from-status``, and the merge's comparison with its pull request's
  plan): each target as the status branch last recorded it (``inventory/*.json``), read by
  :func:`recorded_observation`, the one reader of recorded snapshots.

Each one routes as ``run`` routes (:func:`reconciler.resolve.route`) and observes the targets
``reconciler.yaml`` lists besides the routed ones (``run`` keeps observing a target whose last platform
was removed, so its clusters are planned for deletion).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.edgehost import read_hosts
from reconciler.inventory import discover
from reconciler.model.desired import DesiredState
from reconciler.plan import Observation, Observed
from reconciler.resolve import EVERY_NAMESPACE, NamespaceSelector, Routing, Target, route
from reconciler.runtime.facts import ObservedTarget
from reconciler.runtime.stages.plan import snapshot_observation, with_catalogue
from reconciler.snapshots import ReadSnapshot, managed_clusters
from reconciler.status.basis import ObservationKind
from reconciler.status.records import Records
from reconciler.status.render import RECONCILER_FILE, parse_recorded
from reconciler.status.snapshot import SnapshotError, read_snapshot, recorded_palette, target_file

if TYPE_CHECKING:  # the cache reads git's cache directory: imported by the plan command that uses it
    from reconciler.runtime.observation_cache import ObservationCache


class ObserveError(Exception):
    """A target could not be observed: the preview cannot say what the next pass does there."""


def _recorded_targets(records: Records) -> set[Target]:
    return {Target(url, project) for url, project in records.recorded.targets}


def _order(targets: Iterable[Target]) -> list[Target]:
    return sorted(targets, key=lambda t: (t.url, t.project_uid or ""))


@dataclass
class SnapshotObserver:
    """A Palette holding the snapshot ``path`` (read once, its hosts as facts): ``plan --inventory``."""

    path: Path
    snapshot: ReadSnapshot
    kind: ObservationKind = "inventory"
    warnings: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        """The endpoint every namespace is routed to: the snapshot stands for Palette."""
        return f"inventory:{self.path}"

    def route(self, desired: DesiredState) -> Routing:
        return route(desired, self.url)

    def observe(self, desired: DesiredState, routing: Routing, records: Records) -> dict[Target, Observation]:
        return observe_snapshot(self.snapshot, routing, self.url)


def read_snapshot_file(path: Path) -> ReadSnapshot:
    """The snapshot file ``plan --inventory`` names, its hosts read as it is parsed; ObserveError naming
    it when it cannot be read."""
    from reconciler.snapshots import load_read_snapshot

    try:
        return load_read_snapshot(path)
    except OSError as exc:
        raise ObserveError(f"cannot read inventory {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ObserveError(f"inventory {path}: {exc}") from None


def observe_snapshot(snapshot: ReadSnapshot, routing: Routing, url: str) -> dict[Target, Observation]:
    """What each target would observe in a Palette holding ``snapshot``, scoped exactly as ``run`` sees it.

    Besides the routed targets, the project of every managed cluster in the snapshot is observed (as
    ``run`` keeps observing the targets it manages), so a cluster whose platform is gone is still planned.
    """
    from reconciler.snapshots import scoped_read

    whole = snapshot_observation(snapshot)
    targets = set(routing.targets)
    targets |= {Target(url, c.project_uid) for c in whole.clusters}
    if not targets:
        targets.add(Target(url, None))
    observed: dict[Target, Observation] = {}
    for t in targets:
        part = scoped_read(snapshot, t)
        # A scope holding every host and cluster (one project) is the whole snapshot: observed once.
        whole_seen = len(part.hosts) == len(snapshot.hosts) and len(part.clusters) == len(snapshot.clusters)
        observed[t] = whole if whole_seen else snapshot_observation(part)
    return observed


@dataclass
class RecordedObserver:
    """Each target as the status branch recorded it: ``plan --from-status``. ``palette``: the endpoint
    to route to (default: the one ``reconciler.yaml`` records); ``live``: a pass's own observation, whose
    snapshots need not be parsed again when they are byte for byte what was recorded; ``cache``: the
    observations of snapshots read before (:mod:`.observation_cache`)."""

    palette: str | None = None
    live: Mapping[Target, ObservedTarget] | None = None
    cache: ObservationCache | None = None
    namespaces: NamespaceSelector = EVERY_NAMESPACE
    use_recorded_palette: bool = True
    kind: ObservationKind = "status"
    warnings: list[str] = field(default_factory=list)
    _records: Records | None = None

    def route(self, desired: DesiredState) -> Routing:
        palette = self.palette
        if palette is None and self.use_recorded_palette and self._records is not None:
            palette = recorded_palette(self._records.files)
        return route(desired, palette)

    def bind(self, records: Records) -> RecordedObserver:
        """This observer reading ``records`` (the routing takes the endpoint they record)."""
        self._records = records
        return self

    def observe(self, desired: DesiredState, routing: Routing, records: Records) -> dict[Target, Observation]:
        if RECONCILER_FILE not in records.files:
            raise ObserveError("reconciler.yaml is missing from the status branch: no observed inventory")
        listed = set(parse_recorded(records.files).targets)
        missing = _order(
            t for t in routing.targets if (t.url, t.project_uid) not in listed or not _has(records, t)
        )
        if missing:
            raise ObserveError(
                f"the status branch has no observed inventory for {targets_text(missing)}: "
                "the reconciler has not observed that target yet"
            )
        # A recorded target nothing routes to any more is observed by ``run`` for its clusters to be pruned;
        # without a snapshot (never observed: unreachable) ``run`` plans nothing there either.
        unseen = _order(t for t in _recorded_targets(records) - routing.targets if not _has(records, t))
        if unseen:
            self.warnings.append(
                f"no observed inventory for {targets_text(unseen)}: its clusters are not planned"
            )
        targets = (routing.targets | _recorded_targets(records)) - set(unseen)
        observed = recorded_observation(records, targets, self.namespaces, self.live, self.cache)
        if observed is None:
            raise ObserveError("a recorded inventory snapshot does not parse")
        return dict(observed)


def _has(records: Records, target: Target) -> bool:
    return target_file(target.url, target.project_uid) in records.files


def targets_text(targets: Iterable[Target]) -> str:
    return ", ".join(
        f"{t.url} project {t.project_uid or '(tenant)'} ({target_file(t.url, t.project_uid)})"
        for t in targets
    )


def recorded_observation(
    records: Records,
    targets: Iterable[Target],
    namespaces: NamespaceSelector = EVERY_NAMESPACE,
    live: Mapping[Target, ObservedTarget] | None = None,
    cache: ObservationCache | None = None,
) -> dict[Target, Observed] | None:
    """Each target as the status branch recorded it; None when some target has no readable snapshot.

    ``live``: a pass's own observation. A recorded snapshot that is byte for byte what the live one
    renders is that observation (the snapshot keeps exactly what discovery and planning read), so it is
    not read again; otherwise only the hosts whose text changed since the last render are parsed. At
    100,000 hosts that is the difference between a 60 MB parse and none. ``cache``: what reading a
    snapshot gave before, by its blob id (the same observation)."""
    files = records.files
    if RECONCILER_FILE not in files:
        return None
    listed = set(parse_recorded(files).targets)
    out: dict[Target, Observed] = {}
    for target in targets:
        data = files.get(target_file(target.url, target.project_uid))
        if (target.url, target.project_uid) not in listed or data is None:
            return None
        seen = (live or {}).get(target)
        read: Observed | None
        if seen is not None and seen.snapshot() == data:
            inventory = seen.inventory
            read = Observed(
                inventory, managed_clusters(seen.raw_clusters, seen.raw_hosts, inventory.by_uid())
            )
        else:
            read = cache.observed(data, _read_recorded) if cache is not None else _read_recorded(data)
        if read is None:
            return None
        out[target] = Observed(read.inventory, [c for c in read.clusters if namespaces.owns(c.namespace)])
    return out


def _read_recorded(data: bytes) -> Observed | None:
    """A recorded snapshot's observation; None when it does not parse."""
    try:
        head, items = read_snapshot(data)
    except SnapshotError:
        return None
    hosts = read_hosts(items)  # once, for discovery and the clusters alike
    inventory = with_catalogue(discover(hosts), head)
    return Observed(inventory, managed_clusters(head.clusters, hosts, inventory.by_uid()))


@dataclass
class PaletteObserver:
    """Palette itself, read by ``run``'s observe stage (reads only): ``plan --palette URL``. The API key
    comes from ``PALETTE_API_KEY`` (or the Settings' reference), as for ``run``."""

    url: str
    environ: Mapping[str, str]
    kind: ObservationKind = "palette"
    warnings: list[str] = field(default_factory=list)

    def route(self, desired: DesiredState) -> Routing:
        return route(desired, self.url)

    def observe(self, desired: DesiredState, routing: Routing, records: Records) -> dict[Target, Observation]:
        from reconciler.bundles import bundle_uids
        from reconciler.palette.client import PaletteClient
        from reconciler.palette.credentials import MissingAPIKey
        from reconciler.palette.errors import PaletteError
        from reconciler.runtime.stages.observe import Observer

        def client(target: Target, key: str) -> PaletteClient:
            return PaletteClient(target.url, key, target.project_uid)

        # Never hold a sudden change back: a plan observes once, it has no second look to confirm it.
        observer = Observer(
            client, self.environ, palette_url=self.url, namespaces=EVERY_NAMESPACE, sudden_threshold=1.0
        )
        observer.route(desired)  # the key reference each target's Settings name
        # The recorded targets are observed too (for their clusters to be pruned); nothing routed or
        # recorded: the whole tenant of the endpoint.
        # (those at the endpoint --palette names: it stands for every namespace's Palette).
        targets = routing.targets | {t for t in _recorded_targets(records) if t.url == self.url}
        observed: dict[Target, Observation] = {}
        try:
            for target in _order(targets or {Target(self.url, None)}):
                try:
                    uids = bundle_uids(desired)
                    observed[target] = observer.read(target, routing, records.files, records.docs, uids)
                except MissingAPIKey as exc:
                    raise ObserveError(f"--palette needs the API key: {exc}") from None
                except (PaletteError, ValueError) as exc:
                    raise ObserveError(f"Palette at {target.url}: {self._redacted(str(exc))}") from None
        finally:
            observer.close()
        return observed

    def _redacted(self, text: str) -> str:
        """``text`` with the API key, should an answer have echoed it, replaced by ``***``."""
        key = self.environ.get("PALETTE_API_KEY", "").strip()
        return text.replace(key, "***") if key else text
