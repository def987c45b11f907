"""The emulator's records and the rules on one request body: machine pools (``Pool``) and clusters
(``Cluster``), Palette's timestamps, a pool entity's parsing and addressing checks, machine uids, and what
the edge-host and cluster searches filter and sort on. Used by ``emulator.state``; import the names
from here."""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from reconciler.emulator import search
from reconciler.emulator.errors import ApiError
from reconciler.emulator.hosts import get as _get

Clock = Callable[[], float]

# Fields of a pool entity's poolConfig kept on v1EdgeNativeMachinePoolConfig (GET cloud config).
_POOL_FIELDS = (
    "name",
    "isControlPlane",
    "useControlPlaneAsWorker",
    "labels",
    "additionalLabels",
    "additionalAnnotations",
    "additionalTags",
    "taints",
    "nodeRepaveInterval",
    "updateStrategy",
    "machinePoolProperties",
    "minSize",
    "maxSize",
)


def timestamp(seconds: float) -> str:
    """RFC 3339 with milliseconds, as Palette writes ``v1Time``."""
    moment = datetime.fromtimestamp(seconds, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


# Fields of an edge host entity (v1EdgeNativeMachinePoolHostEntity) kept on the pool's hosts.
_HOST_FIELDS = ("hostName", "nic", "twoNodeCandidatePriority")

# Catalogue types (docs/palette.md) -> Palette's profile types; infra and full can build a cluster.
PALETTE_PROFILE_TYPES = {"infra": "infra", "full": "cluster", "add-on": "add-on"}
_BUILDING_TYPES = ("infra", "cluster")


@dataclass
class Pool:
    name: str
    is_control_plane: bool
    config: dict[str, Any]
    hosts: list[str] = field(default_factory=list)
    # Per host uid: the fields of its entity that Palette keeps (hostName, nic, twoNodeCandidatePriority).
    entities: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class Cluster:
    uid: str
    name: str
    labels: dict[str, str]
    annotations: dict[str, str]
    project_uid: str | None
    project_name: str | None
    created: float
    cloud_config_uid: str
    cluster_config: dict[str, Any]
    pools: list[Pool]
    profiles: list[dict[str, Any]] = field(default_factory=list)
    deleting_since: float | None = None
    fixed_state: str | None = None  # a seeded state that does not progress (e.g. Failed)

    def host_uids(self) -> list[str]:
        return [uid for pool in self.pools for uid in pool.hosts]

    def pool(self, name: str) -> Pool | None:
        return next((p for p in self.pools if p.name == name), None)


def _parse_pool(entity: Any, default_name: str | None = None) -> Pool:
    """A ``v1EdgeNativeMachinePoolConfigEntity``; raises ApiError 400 when malformed."""
    if not isinstance(entity, Mapping):
        raise ApiError(400, "InvalidRequest", "a machine pool must be an object")
    config = entity.get("poolConfig") or {}
    if not isinstance(config, Mapping):
        raise ApiError(400, "InvalidRequest", "poolConfig must be an object")
    name = config.get("name") or default_name
    if not isinstance(name, str) or not name:
        raise ApiError(400, "InvalidRequest", "poolConfig.name is required")
    edge_hosts = _get(entity, "cloudConfig", "edgeHosts")
    if not isinstance(edge_hosts, list):
        raise ApiError(400, "InvalidRequest", f"pool {name}: cloudConfig.edgeHosts is required")
    hosts: list[str] = []
    entities: dict[str, dict[str, Any]] = {}
    for item in edge_hosts:
        uid = item.get("hostUid") if isinstance(item, Mapping) else None
        if not isinstance(uid, str) or not uid:
            raise ApiError(400, "InvalidRequest", f"pool {name}: every edge host needs a hostUid")
        hosts.append(uid)
        kept = {k: copy.deepcopy(item[k]) for k in _HOST_FIELDS if item.get(k) not in (None, "", {})}
        priority = kept.get("twoNodeCandidatePriority")
        if priority is not None and priority not in ("primary", "secondary"):
            raise ApiError(
                400, "InvalidRequest", f"pool {name}: twoNodeCandidatePriority is primary or secondary"
            )
        entities[uid] = kept
    size = config.get("size")
    if size is not None and size != len(hosts):
        raise ApiError(
            400, "InvalidRequest", f"pool {name}: size {size} does not match {len(hosts)} edge hosts"
        )
    return Pool(name, bool(config.get("isControlPlane")), copy.deepcopy(dict(config)), hosts, entities)


def _machine_uid(cluster_uid: str, host_uid: str) -> str:
    """A machine's uid: stable for one host in one cluster, 24 hex digits like Palette's."""
    return hashlib.sha256(f"{cluster_uid}/{host_uid}".encode()).hexdigest()[:24]


def _check_addressing(cloud_config: Mapping[str, Any], pools: list[Pool]) -> None:
    """What Palette checks of a request's addressing against its cluster's cloud config: ``staticIp``
    needs every host's ``nic.ip``; a two-node cluster's control plane is two hosts marked primary and
    secondary."""
    if cloud_config.get("staticIp") is True:
        for pool in pools:
            for uid in pool.hosts:
                if not _get(pool.entities.get(uid), "nic", "ip"):
                    raise ApiError(
                        400, "InvalidRequest", f"staticIp is set but edge host {uid} has no nic.ip"
                    )
    control = [p for p in pools if p.is_control_plane]
    if cloud_config.get("isTwoNodeCluster") is True and control:
        priorities = sorted(
            str(p.entities.get(uid, {}).get("twoNodeCandidatePriority")) for p in control for uid in p.hosts
        )
        if priorities != ["primary", "secondary"]:
            raise ApiError(
                400,
                "InvalidRequest",
                "a two-node cluster needs two control-plane hosts with twoNodeCandidatePriority "
                "primary and secondary",
            )


def _tags(host: Mapping[str, Any]) -> list[str]:
    """Tags as the search filter sees them: ``key:value``, and a bare ``key`` for ``spectro__tag``."""
    out: list[str] = []
    for key, value in (_get(host, "metadata", "labels") or {}).items():
        out.append(f"{key}:{value}")
        if value == "spectro__tag":
            out.append(str(key))
    return out


def _strings(*values: Any) -> list[str]:
    return [str(v) for v in values if v is not None]


_HOST_PROPERTIES: dict[str, search.Extractor] = {
    "tags": _tags,
    "state": lambda h: _strings(_get(h, "status", "state")),
    "healthState": lambda h: _strings(_get(h, "status", "health", "state")),
    "name": lambda h: _strings(_get(h, "metadata", "name")),
    "architecture": lambda h: _strings(_get(h, "spec", "device", "archType")),
    "lastModifiedTimestamp": lambda h: _strings(_get(h, "metadata", "lastModifiedTimestamp")),
    "creationTimestamp": lambda h: _strings(_get(h, "metadata", "creationTimestamp")),
}

# The edge-host search's own sort contract (Palette 4.10: name, state, healthState and the timestamps).
_HOST_SORT_FIELDS: dict[str, search.SortKey] = {
    "name": lambda h: _get(h, "metadata", "name"),
    "state": lambda h: _get(h, "status", "state"),
    "healthState": lambda h: _get(h, "status", "health", "state"),
    "creationTimestamp": lambda h: search.parse_time(_get(h, "metadata", "creationTimestamp")),
    "lastModifiedTimestamp": lambda h: search.parse_time(_get(h, "metadata", "lastModifiedTimestamp")),
}

_CLUSTER_PROPERTIES: dict[str, search.Extractor] = {
    "clusterName": lambda c: _strings(_get(c, "metadata", "name")),
    "clusterState": lambda c: _strings(_get(c, "status", "state")),
    "environment": lambda c: _strings(_get(c, "specSummary", "cloudConfig", "cloudType")),
    "isDeleted": lambda c: _get(c, "status", "state") == "Deleted",
    "tags": _tags,
}
