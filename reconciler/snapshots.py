"""The inventory snapshot format (read, scoped, written) and, from Palette's cluster answers, what the
reconciler manages (pure: a snapshot file is read or written only where a caller names one).

``managed_clusters`` accepts both shapes a cluster arrives in: ``v1SpectroCluster`` (GET, and snapshot
files) and ``v1SpectroClusterSummary`` (search). Which hosts belong to a cluster comes from the edge
hosts' ``status.inUseClustersRef``, which Palette keeps for every in-use host.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, cast

import yaml

from reconciler.edgehost import HostFacts, read_host, read_hosts
from reconciler.inventory import Machine, Role, role_of
from reconciler.membership import config_roles, doubtful_membership, held_reason
from reconciler.model.catalogue import PROFILE_TYPES
from reconciler.model.observed import (
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    NAME_LABEL,
    NAMESPACE_LABEL,
    ClusterState,
    ManagedCluster,
)
from reconciler.resolve import Target, in_scope

# Palette's profile types (``v1ProfileType``) as a catalogue names them: a full profile is "cluster".
_CATALOGUE_TYPES = {"infra": "infra", "add-on": "add-on", "cluster": "full"}

try:  # the C loader is much faster on 10,000-host snapshots
    from yaml import CSafeLoader as _SafeLoader
except ImportError:  # pragma: no cover - libyaml missing
    from yaml import SafeLoader as _SafeLoader  # type: ignore[assignment]


@dataclass(frozen=True)
class Snapshot:
    """An inventory snapshot (docs/palette.md): edge hosts as the search returns them, clusters as
    ``GET /v1/spectroclusters/{uid}`` returns them, and the cluster profile catalogue the emulator knows
    (``{uid, name, type: infra|add-on|full}``; None when the snapshot has none). ``profiles_asked``
    (``clusterProfilesAsked``, a recorded live read): the uids Palette was asked about, which makes
    ``cluster_profiles`` Palette's answers for those only (docs/status-branch.md)."""

    edge_hosts: list[dict[str, Any]] = field(default_factory=list)
    clusters: list[dict[str, Any]] = field(default_factory=list)
    cluster_profiles: list[dict[str, Any]] | None = None
    profiles_asked: list[str] | None = None

    @cached_property
    def host_facts(self) -> list[HostFacts]:
        """Each edge host read once (:func:`reconciler.edgehost.read_host`), in order: discovery, cluster
        membership and project scope all take these, never the JSON again."""
        return read_hosts(self.edge_hosts)


@dataclass(frozen=True)
class ReadSnapshot:
    """A snapshot with its hosts read: each edge host's facts, in order, and no JSON kept for them
    (:func:`load_read_snapshot` reads a file host by host); clusters and catalogue as in :class:`Snapshot`.
    What ``plan --inventory`` observes: discovery, membership and project scope take these facts."""

    hosts: list[HostFacts] = field(default_factory=list)
    clusters: list[dict[str, Any]] = field(default_factory=list)
    cluster_profiles: list[dict[str, Any]] | None = None
    profiles_asked: list[str] | None = None


def read_snapshot_of(snapshot: Snapshot) -> ReadSnapshot:
    """A snapshot's hosts read (:attr:`Snapshot.host_facts`)."""
    return ReadSnapshot(
        list(snapshot.host_facts), snapshot.clusters, snapshot.cluster_profiles, snapshot.profiles_asked
    )


def profile_type(answer: Mapping[str, Any]) -> str | None:
    """A catalogue type (``infra | add-on | full``) from ``GET /v1/clusterprofiles/{uid}``'s
    ``spec.published.type``; None when the answer names no type the bundle rules know."""
    kind = _get(answer, "spec", "published", "type")
    return _CATALOGUE_TYPES.get(kind) if isinstance(kind, str) else None


def _get(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def cluster_config_uid(cluster: Mapping[str, Any]) -> str | None:
    """The cloud config uid from either cluster shape."""
    uid = _get(cluster, "spec", "cloudConfigRef", "uid") or _get(cluster, "specSummary", "cloudConfig", "uid")
    return str(uid) if uid else None


def managed_clusters(
    clusters: Iterable[Mapping[str, Any]],
    edge_hosts: Iterable[Mapping[str, Any] | HostFacts],
    machines: Mapping[str, Machine] | None = None,
    configs: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[ManagedCluster]:
    """Clusters carrying ``palette.ai/managed-by: reconciler`` that are not deleted, with their hosts.

    A host's role comes from ``machines`` (discovery's reading of it) when discovery knows the host;
    :func:`reconciler.inventory.role_of` only covers hosts discovery left out (a cluster host whose
    ``palette.ai`` tag was removed, or one excluded for a bad tag). ``configs`` (cluster uid -> its cloud
    config, read when some host's answer was unreadable) are the membership where given, cross-checked
    with the hosts' refs; a cluster whose membership is in doubt is ``held`` (:mod:`reconciler.membership`).
    """
    known = machines or {}
    members: dict[str, list[HostFacts]] = {}
    facts_by_uid: dict[str, HostFacts] = {}
    unreadable: list[tuple[str, tuple[tuple[str, Any], ...]]] = []
    for host in edge_hosts:
        facts = read_host(host)
        if facts is None:
            continue
        facts_by_uid.setdefault(facts.uid, facts)
        if facts.unreadable:
            unreadable.append((facts.uid, facts.unreadable))
        if facts.cluster_uid:
            members.setdefault(facts.cluster_uid, []).append(facts)
    doubtful = doubtful_membership(unreadable)
    unreadable_uids = {uid for uid, _fields in unreadable}

    def worker(facts: HostFacts) -> bool:
        machine = known.get(facts.uid)
        return (machine.role if machine is not None else role_of(facts)) is Role.WORKER

    result: list[ManagedCluster] = []
    for cluster in clusters:
        labels = dict(_get(cluster, "metadata", "labels") or {})
        state = str(_get(cluster, "status", "state") or ClusterState.UNKNOWN.value)
        uid = _get(cluster, "metadata", "uid")
        deleted = ClusterState.parse(state) is ClusterState.DELETED
        if labels.get(MANAGED_BY_LABEL) != MANAGED_BY_VALUE or deleted or not uid:
            continue
        namespace, platform = labels.get(NAMESPACE_LABEL), labels.get(NAME_LABEL)
        if not namespace or not platform:
            continue
        hosts = members.get(str(uid), [])
        workers = tuple(sorted(h.uid for h in hosts if worker(h)))
        control_plane = tuple(sorted(h.uid for h in hosts if not worker(h)))
        config = (configs or {}).get(str(uid))
        roles = config_roles(config) if config is not None else None
        if roles is not None:  # the cluster's own word
            control_plane, workers = roles
            hosts = [facts_by_uid[h] for h in control_plane + workers if h in facts_by_uid]
        name = str(_get(cluster, "metadata", "name") or "")
        held = held_reason(
            name or str(uid),
            (h.uid for h in members.get(str(uid), [])),
            None if roles is None else control_plane + workers,
            sorted(h.uid for h in hosts if h.uid in unreadable_uids),
            doubtful,
        )
        arches = Counter(h.arch for h in hosts if h.arch is not None)
        arch = sorted(arches.items(), key=lambda kv: (-kv[1], kv[0]))[0][0] if arches else None
        result.append(
            ManagedCluster(
                uid=str(uid),
                name=name,
                namespace=namespace,
                platform=platform,
                state=state,
                cloud_config_uid=cluster_config_uid(cluster),
                control_plane=control_plane,
                workers=workers,
                arch=arch,
                labels=labels,
                project_uid=cluster_project(cluster, hosts),
                held=held,
            )
        )
    return sorted(result, key=lambda c: (c.namespace, c.platform, c.uid))


def doubtful_clusters(edge_hosts: Iterable[Mapping[str, Any]]) -> bool:
    """Whether some host's answer is unreadable, so that the observer should read the managed clusters'
    cloud configs before believing the hosts' refs (:func:`managed_clusters` ``configs``)."""
    return any(f is not None and f.unreadable for f in map(read_host, edge_hosts))


def cluster_project(cluster: Mapping[str, Any], members: Iterable[HostFacts]) -> str | None:
    """The Palette project of a cluster: as the summary or the annotations say, else its first host's."""
    uid = _get(cluster, "specSummary", "projectMeta", "uid") or _get(
        cluster, "metadata", "annotations", "projectUid"
    )
    if isinstance(uid, str) and uid:
        return uid
    return next((h.project_uid for h in members if h.project_uid), None)


def _in_scope(
    clusters: Iterable[dict[str, Any]], facts: Sequence[HostFacts | None], target: Target
) -> tuple[list[dict[str, Any]], list[bool]]:
    """The clusters a target sees, and for each host whether it sees it (``ProjectUid`` scope)."""
    members: dict[str, list[HostFacts]] = {}
    for f in facts:
        if f is not None and f.cluster_uid:
            members.setdefault(f.cluster_uid, []).append(f)
    seen = [
        c
        for c in clusters
        if in_scope(cluster_project(c, members.get(str(_get(c, "metadata", "uid")), [])), target)
    ]
    return seen, [f is not None and in_scope(f.project_uid, target) for f in facts]


def scoped(snapshot: Snapshot, target: Target) -> Snapshot:
    """The part of a snapshot a target sees, as Palette (and the emulator) scope a ``ProjectUid``. The
    part carries the facts of its hosts: they are not read again."""
    if target.project_uid is None:
        return snapshot
    facts: list[HostFacts | None] = list(snapshot.host_facts)
    if len(facts) != len(snapshot.edge_hosts):  # some item is not an object (never in a parsed file)
        facts = [read_host(h) for h in snapshot.edge_hosts]
    clusters, keep = _in_scope(snapshot.clusters, facts, target)
    part = Snapshot(
        edge_hosts=[h for h, k in zip(snapshot.edge_hosts, keep, strict=True) if k],
        clusters=clusters,
        cluster_profiles=snapshot.cluster_profiles,  # the catalogue is the tenant's, not one project's
        profiles_asked=snapshot.profiles_asked,
    )
    # Seeds the part's cached ``host_facts`` (a cached_property keeps its value in the instance dict).
    part.__dict__["host_facts"] = [f for f, k in zip(facts, keep, strict=True) if f is not None and k]
    return part


def scoped_read(snapshot: ReadSnapshot, target: Target) -> ReadSnapshot:
    """:func:`scoped` of a read snapshot: the hosts and clusters a target sees."""
    if target.project_uid is None:
        return snapshot
    clusters, keep = _in_scope(snapshot.clusters, snapshot.hosts, target)
    hosts = [f for f, k in zip(snapshot.hosts, keep, strict=True) if k]
    return ReadSnapshot(hosts, clusters, snapshot.cluster_profiles, snapshot.profiles_asked)


def parse_snapshot(text: str, *, json_first: bool = False) -> Snapshot:
    """Parse snapshot text (JSON or YAML). Raises ValueError with a readable message when malformed."""
    data: Any
    try:
        data = json.loads(text) if json_first else yaml.load(text, Loader=_SafeLoader)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise ValueError(f"not a valid snapshot: {exc}") from None
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ValueError("a snapshot is a mapping with edgeHosts (and optionally clusters)")
    hosts = data.get("edgeHosts") or []
    if not isinstance(hosts, list) or not all(isinstance(h, dict) for h in hosts):
        raise ValueError("snapshot edgeHosts must be a list of objects")
    clusters = _clusters(data)
    for host in hosts:  # 100,000 hosts: the common shape inline, the index found only for the message
        if not _has_uid(host):
            index = next(i for i, h in enumerate(hosts) if h is host)
            raise ValueError(f"snapshot edgeHosts[{index}] has no metadata.uid")
    return Snapshot(hosts, clusters, _profiles(data), _asked(data))


def _has_uid(host: dict[str, Any]) -> bool:
    metadata = host.get("metadata")
    return bool(metadata.get("uid") if type(metadata) is dict else _get(metadata, "uid"))


def _clusters(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    clusters = data.get("clusters") or []
    if not isinstance(clusters, list) or not all(isinstance(c, dict) for c in clusters):
        raise ValueError("snapshot clusters must be a list of objects")
    return clusters


def _profiles(data: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    profiles = data.get("clusterProfiles")
    if profiles is not None:
        if not isinstance(profiles, list) or not all(isinstance(p, dict) for p in profiles):
            raise ValueError("snapshot clusterProfiles must be a list of objects")
        for index, profile in enumerate(profiles):
            if not isinstance(profile.get("uid"), str) or not profile["uid"]:
                raise ValueError(f"snapshot clusterProfiles[{index}] has no uid")
            if profile.get("type", "infra") not in PROFILE_TYPES:
                raise ValueError(
                    f"snapshot clusterProfiles[{index}].type: {profile.get('type')!r} is not one of "
                    + ", ".join(PROFILE_TYPES)
                )
    return profiles


def _asked(data: Mapping[str, Any]) -> list[str] | None:
    asked = data.get("clusterProfilesAsked")
    if asked is None:
        return None
    if not isinstance(asked, list) or not all(isinstance(u, str) and u for u in asked):
        raise ValueError("snapshot clusterProfilesAsked must be a list of profile uids")
    return asked


def read_snapshot_text(text: str, *, json_first: bool = False) -> ReadSnapshot:
    """:func:`parse_snapshot` with the hosts read: the same snapshot, the same errors. JSON is read host
    by host, each host's JSON dropped once read (a 100,000-host file never holds every host's JSON at
    once, nor frees it all at the end); any other text, or JSON in another shape, is parsed whole."""
    streamed = _streamed(text) if json_first else None
    return streamed if streamed is not None else read_snapshot_of(parse_snapshot(text, json_first=json_first))


# JSON's whitespace, as json.loads skips it (the pattern matches anywhere, if only the empty string)
_WS = cast(Callable[[str, int], "re.Match[str]"], re.compile(r"[ \t\n\r]*").match)
_SCAN: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _streamed(text: str) -> ReadSnapshot | None:
    """A JSON object whose keys appear once and whose ``edgeHosts`` is a list of objects that each
    have a ``metadata.uid``, read with its hosts taken one at a time; None for anything else (a
    malformed or odd snapshot is parsed whole, so that it fails or reads exactly as it does there)."""
    ws, scan = _WS, _SCAN
    data: dict[str, Any] = {}
    hosts: list[HostFacts] = []
    try:
        i = ws(text, 0).end()
        if text[i : i + 1] != "{":
            return None
        i = ws(text, i + 1).end()
        while text[i : i + 1] != "}":  # key: value, then a comma and the next or the end
            if text[i : i + 1] != '"':
                return None
            key, i = scan(text, i)
            i = ws(text, i).end()
            if text[i : i + 1] != ":" or key in data:
                return None  # a key seen twice: json.loads keeps the last
            i = ws(text, i + 1).end()
            if key == "edgeHosts":
                if text[i : i + 1] != "[":
                    return None
                i = _hosts(text, ws(text, i + 1).end(), hosts)
                data[key] = None
            else:
                data[key], i = scan(text, i)
            i = ws(text, i).end()
            if text[i : i + 1] == ",":
                i = ws(text, i + 1).end()
                if text[i : i + 1] != '"':
                    return None  # a trailing comma
            elif text[i : i + 1] != "}":
                return None
        if ws(text, i + 1).end() != len(text):
            return None
    except (StopIteration, ValueError, _Odd):
        return None
    return ReadSnapshot(hosts, _clusters(data), _profiles(data), _asked(data))


class _Odd(Exception):
    """A host list that is not the common shape (the caller parses the whole text instead)."""


def _hosts(text: str, i: int, out: list[HostFacts]) -> int:
    """The host objects from ``i`` (after ``[``) read into ``out``; the index after ``]``."""
    ws, scan = _WS, _SCAN
    if text[i : i + 1] == "]":
        return i + 1
    while True:
        item, i = scan(text, i)
        if type(item) is not dict or not _has_uid(item):
            raise _Odd
        facts = read_host(item)
        assert facts is not None  # an object always has facts
        out.append(facts)
        i = ws(text, i).end()
        mark = text[i : i + 1]
        if mark == "]":
            return i + 1
        if mark != ",":
            raise _Odd
        i = ws(text, i + 1).end()


def load_snapshot(path: Path) -> Snapshot:
    """Read a snapshot file: JSON when it ends in ``.json``, YAML (safe C loader) otherwise."""
    text = Path(path).read_text(encoding="utf-8")
    return parse_snapshot(text, json_first=Path(path).suffix.lower() == ".json")


def load_read_snapshot(path: Path) -> ReadSnapshot:
    """:func:`load_snapshot` with the hosts read (:func:`read_snapshot_text`)."""
    text = Path(path).read_text(encoding="utf-8")
    return read_snapshot_text(text, json_first=Path(path).suffix.lower() == ".json")


def dump_snapshot(snapshot: Snapshot, path: Path) -> None:
    """Write a snapshot file; JSON for ``.json`` paths, YAML otherwise."""
    data: dict[str, Any] = {"edgeHosts": snapshot.edge_hosts, "clusters": snapshot.clusters}
    if snapshot.cluster_profiles is not None:
        data["clusterProfiles"] = snapshot.cluster_profiles
    if snapshot.profiles_asked is not None:
        data["clusterProfilesAsked"] = snapshot.profiles_asked
    target = Path(path)
    if target.suffix.lower() == ".json":
        target.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        return
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    target.write_text(yaml.dump(data, Dumper=dumper, sort_keys=False), encoding="utf-8")
