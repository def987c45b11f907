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
from pathlib import Path
from typing import Any

import yaml

from reconciler.inventory import Machine, Role
from reconciler.model.observed import (
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    NAME_LABEL,
    NAMESPACE_LABEL,
    ManagedCluster,
)

WORKER_TAG = "palette.ai/worker"
PROFILE_TYPES = ("infra", "add-on", "full")  # cluster profile types of a snapshot's catalogue
CONTROL_PLANE_TAG = "palette.ai/control-plane"

try:  # the C loader is much faster on 10,000-host snapshots
    from yaml import CSafeLoader as _SafeLoader
except ImportError:  # pragma: no cover - libyaml missing
    from yaml import SafeLoader as _SafeLoader  # type: ignore[assignment]


@dataclass(frozen=True)
class Snapshot:
    """An inventory snapshot (DESIGN.md section 5): edge hosts as the search returns them, clusters as
    ``GET /v1/spectroclusters/{uid}`` returns them, and the cluster profile catalogue the emulator knows
    (``{uid, name, type: infra|add-on|full}``; None when the snapshot has none)."""

    edge_hosts: list[dict[str, Any]] = field(default_factory=list)
    clusters: list[dict[str, Any]] = field(default_factory=list)
    cluster_profiles: list[dict[str, Any]] | None = None


def _get(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def is_worker_host(host: Mapping[str, Any]) -> bool:
    """The exclusive role rule of DESIGN.md section 4, as far as membership splitting needs it."""
    labels = _get(host, "metadata", "labels") or {}
    if str(labels.get(WORKER_TAG, "")).lower() == "true":
        return True
    if str(labels.get(CONTROL_PLANE_TAG, "")).lower() == "true":
        return False
    return host_gpu_count(host) > 0


def host_gpu_count(host: Mapping[str, Any]) -> int:
    """GPUs reported by the agent, else the ``gpus`` tag; 0 when neither says anything usable."""
    gpus = _get(host, "spec", "device", "gpus") or []
    reported = sum(int(g.get("gpuCount") or 0) for g in gpus if isinstance(g, Mapping))
    if reported:
        return reported
    tag = (_get(host, "metadata", "labels") or {}).get("gpus")
    try:
        return max(int(str(tag)), 0) if tag is not None else 0
    except ValueError:
        return 0


def cluster_config_uid(cluster: Mapping[str, Any]) -> str | None:
    """The cloud config uid from either cluster shape."""
    uid = _get(cluster, "spec", "cloudConfigRef", "uid") or _get(cluster, "specSummary", "cloudConfig", "uid")
    return str(uid) if uid else None


def managed_clusters(
    clusters: Iterable[Mapping[str, Any]],
    edge_hosts: Iterable[Mapping[str, Any]],
    machines: Mapping[str, Machine] | None = None,
) -> list[ManagedCluster]:
    """Clusters carrying ``palette.ai/managed-by: reconciler`` that are not deleted, with their hosts.

    A host's role comes from ``machines`` (discovery's reading of it) when discovery knows the host;
    :func:`is_worker_host` only covers hosts discovery left out (a cluster host whose ``palette.ai``
    tag was removed, or one excluded for a bad tag).
    """
    known = machines or {}

    def worker(host: Mapping[str, Any]) -> bool:
        machine = known.get(str(_get(host, "metadata", "uid")))
        return machine.role is Role.WORKER if machine is not None else is_worker_host(host)

    members: dict[str, list[Mapping[str, Any]]] = {}
    for host in edge_hosts:
        for ref in _get(host, "status", "inUseClustersRef") or []:
            uid = ref.get("uid") if isinstance(ref, Mapping) else None
            if uid:
                members.setdefault(str(uid), []).append(host)
    result: list[ManagedCluster] = []
    for cluster in clusters:
        labels = dict(_get(cluster, "metadata", "labels") or {})
        state = str(_get(cluster, "status", "state") or "Unknown")
        uid = _get(cluster, "metadata", "uid")
        if labels.get(MANAGED_BY_LABEL) != MANAGED_BY_VALUE or state == "Deleted" or not uid:
            continue
        namespace, platform = labels.get(NAMESPACE_LABEL), labels.get(NAME_LABEL)
        if not namespace or not platform:
            continue
        hosts = members.get(str(uid), [])
        workers = sorted(str(_get(h, "metadata", "uid")) for h in hosts if worker(h))
        control_plane = sorted(str(_get(h, "metadata", "uid")) for h in hosts if not worker(h))
        arches = Counter(str(_get(h, "spec", "device", "archType") or "amd64") for h in hosts)
        arch = sorted(arches.items(), key=lambda kv: (-kv[1], kv[0]))[0][0] if arches else None
        result.append(
            ManagedCluster(
                uid=str(uid),
                name=str(_get(cluster, "metadata", "name") or ""),
                namespace=namespace,
                platform=platform,
                state=state,
                cloud_config_uid=cluster_config_uid(cluster),
                control_plane=tuple(control_plane),
                workers=tuple(workers),
                arch=arch,
                labels=labels,
            )
        )
    return sorted(result, key=lambda c: (c.namespace, c.platform, c.uid))


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
    for index, host in enumerate(hosts):
        if not _get(host, "metadata", "uid"):
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
