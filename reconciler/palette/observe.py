"""From Palette's answers to what the reconciler manages (pure), and reading inventory snapshots.

``managed_clusters`` accepts both shapes a cluster arrives in: ``v1SpectroCluster`` (GET, and snapshot
files) and ``v1SpectroClusterSummary`` (search). Which hosts belong to a cluster comes from the edge
hosts' ``status.inUseClustersRef``, which Palette keeps for every in-use host.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

from reconciler.edgehost import HostFacts, read_host, read_hosts
from reconciler.inventory import Machine, Role, role_of
from reconciler.membership import config_roles, doubtful_membership, held_reason
from reconciler.model.observed import (
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    NAME_LABEL,
    NAMESPACE_LABEL,
    ClusterState,
    ManagedCluster,
)
from reconciler.resolve import Target, in_scope

PROFILE_TYPES = ("infra", "add-on", "full")  # cluster profile types of a snapshot's catalogue

try:  # the C loader is much faster on 10,000-host snapshots
    from yaml import CSafeLoader as _SafeLoader
except ImportError:  # pragma: no cover - libyaml missing
    from yaml import SafeLoader as _SafeLoader  # type: ignore[assignment]


@dataclass(frozen=True)
class Snapshot:
    """An inventory snapshot (docs/palette.md): edge hosts as the search returns them, clusters as
    ``GET /v1/spectroclusters/{uid}`` returns them, and the cluster profile catalogue the emulator knows
    (``{uid, name, type: infra|add-on|full}``; None when the snapshot has none)."""

    edge_hosts: list[dict[str, Any]] = field(default_factory=list)
    clusters: list[dict[str, Any]] = field(default_factory=list)
    cluster_profiles: list[dict[str, Any]] | None = None

    @cached_property
    def host_facts(self) -> list[HostFacts]:
        """Each edge host read once (:func:`reconciler.edgehost.read_host`), in order: discovery, cluster
        membership and project scope all take these, never the JSON again."""
        return read_hosts(self.edge_hosts)


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


def scoped(snapshot: Snapshot, target: Target) -> Snapshot:
    """The part of a snapshot a target sees, as Palette (and the emulator) scope a ``ProjectUid``. The
    part carries the facts of its hosts: they are not read again."""
    if target.project_uid is None:
        return snapshot
    facts: list[HostFacts | None] = list(snapshot.host_facts)
    if len(facts) != len(snapshot.edge_hosts):  # some item is not an object (never in a parsed file)
        facts = [read_host(h) for h in snapshot.edge_hosts]
    members: dict[str, list[HostFacts]] = {}
    for f in facts:
        if f is not None and f.cluster_uid:
            members.setdefault(f.cluster_uid, []).append(f)
    clusters = [
        c
        for c in snapshot.clusters
        if in_scope(cluster_project(c, members.get(str(_get(c, "metadata", "uid")), [])), target)
    ]
    keep = [f is not None and in_scope(f.project_uid, target) for f in facts]
    part = Snapshot(
        edge_hosts=[h for h, k in zip(snapshot.edge_hosts, keep, strict=True) if k],
        clusters=clusters,
        cluster_profiles=snapshot.cluster_profiles,  # the catalogue is the tenant's, not one project's
    )
    # Seeds the part's cached ``host_facts`` (a cached_property keeps its value in the instance dict).
    part.__dict__["host_facts"] = [f for f, k in zip(facts, keep, strict=True) if f is not None and k]
    return part


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
    clusters = data.get("clusters") or []
    if not isinstance(hosts, list) or not all(isinstance(h, dict) for h in hosts):
        raise ValueError("snapshot edgeHosts must be a list of objects")
    if not isinstance(clusters, list) or not all(isinstance(c, dict) for c in clusters):
        raise ValueError("snapshot clusters must be a list of objects")
    for host in hosts:  # 100,000 hosts: the common shape inline, the index found only for the message
        metadata = host.get("metadata")
        if not (metadata.get("uid") if type(metadata) is dict else _get(metadata, "uid")):
            index = next(i for i, h in enumerate(hosts) if h is host)
            raise ValueError(f"snapshot edgeHosts[{index}] has no metadata.uid")
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
    return Snapshot(edge_hosts=hosts, clusters=clusters, cluster_profiles=profiles)


def load_snapshot(path: Path) -> Snapshot:
    """Read a snapshot file: JSON when it ends in ``.json``, YAML (safe C loader) otherwise."""
    text = Path(path).read_text(encoding="utf-8")
    return parse_snapshot(text, json_first=Path(path).suffix.lower() == ".json")


def dump_snapshot(snapshot: Snapshot, path: Path) -> None:
    """Write a snapshot file; JSON for ``.json`` paths, YAML otherwise."""
    data: dict[str, Any] = {"edgeHosts": snapshot.edge_hosts, "clusters": snapshot.clusters}
    if snapshot.cluster_profiles is not None:
        data["clusterProfiles"] = snapshot.cluster_profiles
    target = Path(path)
    if target.suffix.lower() == ".json":
        target.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        return
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    target.write_text(yaml.dump(data, Dumper=dumper, sort_keys=False), encoding="utf-8")
