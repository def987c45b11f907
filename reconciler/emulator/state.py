"""The emulator's world: edge hosts, edge-native clusters and their cloud configs, over an injectable clock.

Cluster states are computed lazily from timestamps (Pending for the first third of ``provision_seconds``,
then Provisioning, then Running; Deleting for ``delete_seconds``, then gone), so no background thread is
needed and tests can drive time with a fake clock. Every public method takes the lock, so the HTTP
server and a test thread can use one state safely.

Scope: a request with ``ProjectUid`` sees the hosts whose ``spec.projectMeta.uid`` is that project and the
clusters created in it; one without sees everything (tenant scope). Hosts and clusters with no project
are visible in every scope, so a simple snapshot works whatever project the client names.
"""

from __future__ import annotations

import bisect
import copy
import hashlib
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from reconciler.emulator import search
from reconciler.emulator.errors import ApiError
from reconciler.emulator.hosts import get as _get
from reconciler.emulator.hosts import is_worker_host
from reconciler.palette.observe import Snapshot

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


class EmulatorState:
    """Hosts and clusters of one emulated Palette tenant (several projects)."""

    def __init__(
        self,
        snapshot: Snapshot | None = None,
        *,
        provision_seconds: float = 5.0,
        delete_seconds: float = 2.0,
        clock: Clock = time.time,
    ) -> None:
        self.provision_seconds = provision_seconds
        self.delete_seconds = delete_seconds
        self.clock = clock
        # Palette's search index lags its store: a cluster created less than this many seconds ago (on
        # ``clock``) is not listed by the cluster search yet; ``GET`` by uid finds it at once.
        self.index_delay = 0.0
        self.lock = threading.RLock()
        self._counter = 0
        self.hosts: dict[str, dict[str, Any]] = {}
        self.clusters: dict[str, Cluster] = {}
        # uid -> {uid, name, type: infra|add-on|full}; None: no catalogue, any uid is an infrastructure
        # profile. Palette's documents name the types infra, add-on and cluster (full).
        self.catalogue: dict[str, dict[str, str]] | None = None
        # Paging a large inventory re-runs one search per page; the matching list is kept until any
        # host changes (``_version``), so each page costs O(page), not O(inventory).
        self._version = 0
        self._search_cache: dict[tuple[str | None, str], tuple[int, list[dict[str, Any]]]] = {}
        self._cluster_listings: dict[tuple[str | None, str], tuple[int, list[dict[str, Any]]]] = {}
        if snapshot is not None:
            self._seed(snapshot)
        self._host_order = sorted(
            self.hosts, key=lambda uid: (str(self.hosts[uid]["metadata"].get("name")), uid)
        )

    # --- seeding -----------------------------------------------------------------------------------

    def _seed(self, snapshot: Snapshot) -> None:
        if snapshot.cluster_profiles is not None:
            self.catalogue = {}
            for entry in snapshot.cluster_profiles:
                uid = str(entry["uid"])
                kind = str(entry.get("type") or "infra")
                self.catalogue[uid] = {"uid": uid, "name": str(entry.get("name") or uid), "type": kind}
        for host in snapshot.edge_hosts:
            item = copy.deepcopy(host)
            uid = str(item["metadata"]["uid"])
            item["metadata"].setdefault("name", uid)
            item.setdefault("spec", {})
            status = item.setdefault("status", {})
            status.setdefault("state", "ready")
            status.setdefault("health", {"state": "healthy"})
            status.setdefault("inUseClustersRef", [])
            self.hosts[uid] = item
        now = self.clock()
        for item in self.hosts.values():
            meta = item["metadata"]
            meta.setdefault("creationTimestamp", timestamp(now))
            meta.setdefault("lastModifiedTimestamp", meta["creationTimestamp"])
        for raw in snapshot.clusters:
            uid = _get(raw, "metadata", "uid")
            state = str(_get(raw, "status", "state") or "Running")
            if not uid or state == "Deleted":
                continue
            members = [h for h in self.hosts.values() if self._refers(h, str(uid))]
            workers = [h["metadata"]["uid"] for h in members if is_worker_host(h)]
            control_plane = [h["metadata"]["uid"] for h in members if not is_worker_host(h)]
            pools = [Pool("control-plane-pool", True, {"labels": ["control-plane"]}, sorted(control_plane))]
            if workers:
                pools.append(Pool("worker-pool", False, {"labels": ["worker"]}, sorted(workers)))
            project = next((_get(h, "spec", "projectMeta") for h in members), None) or {}
            cluster = Cluster(
                uid=str(uid),
                name=str(_get(raw, "metadata", "name") or uid),
                labels=dict(_get(raw, "metadata", "labels") or {}),
                annotations=dict(_get(raw, "metadata", "annotations") or {}),
                project_uid=project.get("uid"),
                project_name=project.get("name"),
                created=now - self.provision_seconds if state == "Running" else now,
                cloud_config_uid=str(_get(raw, "spec", "cloudConfigRef", "uid") or self._new_uid("cc")),
                cluster_config={},
                pools=pools,
                profiles=[
                    {"uid": str(t["uid"])}
                    for t in _get(raw, "spec", "clusterProfileTemplates") or []
                    if isinstance(t, Mapping) and t.get("uid")
                ],
            )
            if state == "Deleting":
                cluster.deleting_since = now
            elif state not in ("Running", "Pending", "Provisioning"):
                cluster.fixed_state = state
            self.clusters[cluster.uid] = cluster

    @staticmethod
    def _refers(host: Mapping[str, Any], cluster_uid: str) -> bool:
        refs = _get(host, "status", "inUseClustersRef") or []
        return any(isinstance(r, Mapping) and r.get("uid") == cluster_uid for r in refs)

    def _new_uid(self, prefix: str) -> str:
        """Palette uids are 24 hex digits; ours are deterministic so tests can predict them."""
        self._counter += 1
        tag = {"cl": "c1", "cc": "cc", "au": "a0"}.get(prefix, "ff")
        return f"{tag}{self._counter:022x}"

    # --- time --------------------------------------------------------------------------------------

    def cluster_state(self, cluster: Cluster, now: float | None = None) -> str:
        now = self.clock() if now is None else now
        if cluster.deleting_since is not None:
            return "Deleting"
        if cluster.fixed_state:
            return cluster.fixed_state
        elapsed = now - cluster.created
        if elapsed >= self.provision_seconds:
            return "Running"
        if elapsed < self.provision_seconds / 3:
            return "Pending"
        return "Provisioning"

    def sweep(self) -> None:
        """Remove clusters whose deletion has completed and hand their hosts back (``ready``)."""
        with self.lock:
            now = self.clock()
            for uid in [
                uid
                for uid, c in self.clusters.items()
                if c.deleting_since is not None and now - c.deleting_since >= self.delete_seconds
            ]:
                cluster = self.clusters.pop(uid)
                for host_uid in cluster.host_uids():
                    self._release(host_uid, uid)

    def _release(self, host_uid: str, cluster_uid: str) -> None:
        host = self.hosts.get(host_uid)
        if host is None:
            return
        self._touch(host)
        status = host.setdefault("status", {})
        refs = [r for r in status.get("inUseClustersRef") or [] if r.get("uid") != cluster_uid]
        status["inUseClustersRef"] = refs
        if not refs and status.get("state") == "in-use":
            status["state"] = "ready"

    def _occupy(self, host_uid: str, cluster: Cluster) -> None:
        self._touch(self.hosts[host_uid])
        status = self.hosts[host_uid].setdefault("status", {})
        status["state"] = "in-use"
        status["inUseClustersRef"] = [{"name": cluster.name, "uid": cluster.uid}]

    def _touch(self, host: dict[str, Any]) -> None:
        """A host changes: its ``lastModifiedTimestamp`` moves (incremental reads key on it)."""
        self._version += 1
        host.setdefault("metadata", {})["lastModifiedTimestamp"] = timestamp(self.clock())

    # --- scope -------------------------------------------------------------------------------------

    @staticmethod
    def _in_scope(project_of_thing: str | None, project: str | None) -> bool:
        return project is None or project_of_thing is None or project_of_thing == project

    def _host_project(self, host: Mapping[str, Any]) -> str | None:
        uid = _get(host, "spec", "projectMeta", "uid")
        return str(uid) if uid else None

    def _visible_hosts(self, project: str | None) -> list[dict[str, Any]]:
        """Hosts in scope, ordered by name then uid (a stable order for paging)."""
        hosts = (self.hosts[uid] for uid in self._host_order)
        return [h for h in hosts if self._in_scope(self._host_project(h), project)]

    def _visible_cluster(self, uid: str, project: str | None) -> Cluster:
        cluster = self.clusters.get(uid)
        if cluster is None or not self._in_scope(cluster.project_uid, project):
            raise ApiError(404, "ResourceNotFound", f"spectrocluster {uid} not found")
        return cluster

    def _cluster_by_config(self, config_uid: str, project: str | None) -> Cluster:
        for cluster in self.clusters.values():
            if cluster.cloud_config_uid == config_uid and self._in_scope(cluster.project_uid, project):
                return cluster
        raise ApiError(404, "ResourceNotFound", f"cloud config {config_uid} not found")

    # --- edge hosts --------------------------------------------------------------------------------

    def search_hosts(
        self, project: str | None, body: Any, limit: str | None, token: str | None, offset: str | None
    ) -> dict[str, Any]:
        predicate = search.compile_filter(body, _HOST_PROPERTIES)
        key = (project, json.dumps(body, sort_keys=True, default=str))
        with self.lock:
            self.sweep()
            cached = self._search_cache.get(key)
            if cached is not None and cached[0] == self._version:
                matching = cached[1]
            else:
                matching = search.sort_items(
                    [h for h in self._visible_hosts(project) if predicate(h)], body, _HOST_SORT_FIELDS
                )
                if len(self._search_cache) > 64:
                    self._search_cache.clear()
                self._search_cache[key] = (self._version, matching)
            result = search.page(matching, limit, token, offset)
            result["items"] = copy.deepcopy(result["items"])
        return result

    # --- clusters ----------------------------------------------------------------------------------

    def search_clusters(
        self, project: str | None, body: Any, limit: str | None, token: str | None, offset: str | None
    ) -> dict[str, Any]:
        predicate = search.compile_filter(body, _CLUSTER_PROPERTIES)
        key = (project, json.dumps(body, sort_keys=True, default=str))
        with self.lock:
            self.sweep()
            cached = self._cluster_listings.get(key)
            # The first page takes a snapshot; continuation pages read the same snapshot, as a
            # consistent cursor would (and one listing costs O(clusters), not O(clusters x pages)).
            if token and cached is not None and cached[0] == self._version:
                matching = cached[1]
            else:
                indexed = self.clock() - self.index_delay
                matching = [
                    summary
                    for c in sorted(self.clusters.values(), key=lambda c: (c.name, c.uid))
                    if self._in_scope(c.project_uid, project)
                    and (self.index_delay <= 0 or c.created <= indexed)
                    for summary in (self.cluster_summary(c),)
                    if predicate(summary)
                ]
                if len(self._cluster_listings) > 64:
                    self._cluster_listings.clear()
                self._cluster_listings[key] = (self._version, matching)
        return search.page(matching, limit, token, offset)

    def get_cluster(self, uid: str, project: str | None) -> dict[str, Any]:
        with self.lock:
            self.sweep()
            return self.cluster_document(self._visible_cluster(uid, project))

    def create_cluster(self, project: str | None, body: Any) -> str:
        """Validate and create an edge-native cluster; the hosts go ``in-use`` at once."""
        if not isinstance(body, Mapping):
            raise ApiError(400, "InvalidRequest", "the body must be a JSON object")
        name = _get(body, "metadata", "name")
        if not isinstance(name, str) or not name:
            raise ApiError(400, "InvalidRequest", "metadata.name is required")
        spec = body.get("spec") or {}
        if not isinstance(spec, Mapping):
            raise ApiError(400, "InvalidRequest", "spec must be an object")
        entities = spec.get("machinepoolconfig")
        if entities is None:
            entities = spec.get("machinePoolConfig")
        if not isinstance(entities, list) or not entities:
            raise ApiError(
                400, "InvalidRequest", "spec.machinepoolconfig must list at least one machine pool"
            )
        pools = [_parse_pool(entity) for entity in entities]
        if len({p.name for p in pools}) != len(pools):
            raise ApiError(400, "InvalidRequest", "machine pool names must be unique")
        if not any(p.is_control_plane and p.hosts for p in pools):
            raise ApiError(
                400, "InvalidRequest", "a control-plane machine pool with at least one host is required"
            )
        all_hosts = [uid for p in pools for uid in p.hosts]
        if len(set(all_hosts)) != len(all_hosts):
            raise ApiError(400, "InvalidRequest", "an edge host may appear only once in a cluster")
        cloud_config = spec.get("cloudConfig") or {}
        if not isinstance(cloud_config, Mapping):
            raise ApiError(400, "InvalidRequest", "spec.cloudConfig must be an object")
        _check_addressing(cloud_config, pools)
        profiles = spec.get("profiles")
        labels = _get(body, "metadata", "labels") or {}
        annotations = _get(body, "metadata", "annotations") or {}
        with self.lock:
            self.sweep()
            for existing in self.clusters.values():
                same_project = existing.project_uid == project or project is None
                if existing.name == name and same_project and existing.deleting_since is None:
                    raise ApiError(409, "ClusterNameExists", f"a cluster named {name} already exists")
            attached = self._check_profiles(profiles, for_create=True)
            for uid in all_hosts:
                self._check_placeable(uid, project)
            first = self.hosts[pools[0].hosts[0]] if pools[0].hosts else self.hosts[all_hosts[0]]
            project_meta = _get(first, "spec", "projectMeta") or {}
            now = self.clock()
            cluster = Cluster(
                uid=self._new_uid("cl"),
                name=name,
                labels={str(k): str(v) for k, v in dict(labels).items()},
                annotations={str(k): str(v) for k, v in dict(annotations).items()},
                project_uid=project or project_meta.get("uid"),
                project_name=project_meta.get("name"),
                created=now,
                cloud_config_uid=self._new_uid("cc"),
                cluster_config=copy.deepcopy(dict(cloud_config)),
                pools=pools,
                profiles=attached,
            )
            self.clusters[cluster.uid] = cluster
            for uid in all_hosts:
                self._occupy(uid, cluster)
            return cluster.uid

    # --- cluster profiles ---------------------------------------------------------------------------

    def _profile_type(self, uid: str) -> str:
        """Palette's type of a known profile uid; 400 for an unknown one (with a catalogue)."""
        if self.catalogue is None:
            return "infra"
        entry = self.catalogue.get(uid)
        if entry is None:
            raise ApiError(400, "ClusterProfileNotFound", f"cluster profile {uid} not found")
        return PALETTE_PROFILE_TYPES.get(entry["type"], "infra")

    def _check_profiles(self, profiles: Any, *, for_create: bool) -> list[dict[str, Any]]:
        """Validate ``v1SpectroClusterProfileEntity`` items; a create needs an infra or full profile."""
        if not isinstance(profiles, list) or not profiles:
            what = "spec.profiles" if for_create else "profiles"
            raise ApiError(400, "InvalidRequest", f"{what} must name at least one cluster profile")
        out: list[dict[str, Any]] = []
        for item in profiles:
            uid = item.get("uid") if isinstance(item, Mapping) else None
            if not isinstance(uid, str) or not uid:
                raise ApiError(400, "InvalidRequest", "every cluster profile needs a uid")
            self._profile_type(uid)
            if any(p["uid"] == uid for p in out):
                raise ApiError(400, "InvalidRequest", f"cluster profile {uid} is named twice")
            out.append(copy.deepcopy(dict(item)))
        if for_create and not any(self._profile_type(p["uid"]) in _BUILDING_TYPES for p in out):
            raise ApiError(
                400,
                "InvalidClusterProfiles",
                "an edge-native cluster needs an infrastructure or full cluster profile",
            )
        return out

    def _profile_document(self, attached: Mapping[str, Any]) -> dict[str, Any]:
        """``v1SpectroClusterProfile`` of an attached profile."""
        uid = str(attached["uid"])
        entry = (self.catalogue or {}).get(uid, {"uid": uid, "name": uid, "type": "infra"})
        return {
            "metadata": {"uid": uid, "name": entry["name"]},
            "spec": {
                "cloudType": "edge-native",
                "type": PALETTE_PROFILE_TYPES.get(entry["type"], "infra"),
                "version": 1,
            },
        }

    def get_cluster_profiles(self, uid: str, project: str | None) -> dict[str, Any]:
        with self.lock:
            self.sweep()
            cluster = self._visible_cluster(uid, project)
            return {"profiles": [self._profile_document(p) for p in cluster.profiles]}

    def attach_profiles(self, uid: str, project: str | None, body: Any) -> None:
        """PATCH: add the named profiles, or update the pack values of ones already attached; a
        ``replaceWithProfile`` item takes the place of the profile it names. Others stay as they are."""
        profiles = body.get("profiles") if isinstance(body, Mapping) else None
        with self.lock:
            self.sweep()
            cluster = self._visible_cluster(uid, project)
            if cluster.deleting_since is not None:
                raise ApiError(409, "ClusterDeleting", f"cluster {cluster.name} is being deleted")
            items = self._check_profiles(profiles, for_create=False)
            attached = list(cluster.profiles)
            for item in items:
                replaced = item.pop("replaceWithProfile", None)
                index = next((i for i, p in enumerate(attached) if p["uid"] in (item["uid"], replaced)), None)
                if index is None:
                    attached.append(item)
                else:
                    attached[index] = item
            cluster.profiles = attached

    def detach_profiles(self, uid: str, project: str | None, body: Any) -> None:
        """DELETE: remove exactly the named profiles (uids not attached are ignored). The last
        infrastructure or full profile cannot be removed: the cluster is built from it."""
        uids = body.get("profileUids") if isinstance(body, Mapping) else None
        if not isinstance(uids, list) or not uids or not all(isinstance(u, str) and u for u in uids):
            raise ApiError(400, "InvalidRequest", "profileUids must list at least one profile uid")
        with self.lock:
            self.sweep()
            cluster = self._visible_cluster(uid, project)
            if cluster.deleting_since is not None:
                raise ApiError(409, "ClusterDeleting", f"cluster {cluster.name} is being deleted")
            kept = [p for p in cluster.profiles if p["uid"] not in set(uids)]
            building = [p for p in kept if self._attached_type(p["uid"]) in _BUILDING_TYPES]
            if not building and any(
                self._attached_type(p["uid"]) in _BUILDING_TYPES for p in cluster.profiles
            ):
                raise ApiError(
                    400,
                    "InvalidClusterProfiles",
                    "the cluster's last infrastructure or full cluster profile cannot be removed",
                )
            cluster.profiles = kept

    def _attached_type(self, uid: str) -> str:
        entry = (self.catalogue or {}).get(uid)
        return PALETTE_PROFILE_TYPES.get(entry["type"], "infra") if entry is not None else "infra"

    # --- machines and overview -------------------------------------------------------------------

    def list_machines(self, config_uid: str, pool_name: str, project: str | None) -> dict[str, Any]:
        """``v1EdgeNativeMachines``: one machine per host of the pool."""
        with self.lock:
            self.sweep()
            cluster = self._cluster_by_config(config_uid, project)
            pool = cluster.pool(pool_name)
            if pool is None:
                raise ApiError(404, "ResourceNotFound", f"machine pool {pool_name} not found")
            return {"items": [self._machine_document(cluster, pool, h) for h in pool.hosts]}

    def get_machine(
        self, config_uid: str, pool_name: str, machine_uid: str, project: str | None
    ) -> dict[str, Any]:
        with self.lock:
            self.sweep()
            cluster = self._cluster_by_config(config_uid, project)
            pool = cluster.pool(pool_name)
            if pool is None:
                raise ApiError(404, "ResourceNotFound", f"machine pool {pool_name} not found")
            for host_uid in pool.hosts:
                if machine_uid == _machine_uid(cluster.uid, host_uid):
                    return self._machine_document(cluster, pool, host_uid)
            raise ApiError(404, "ResourceNotFound", f"machine {machine_uid} not found")

    def delete_machine(self, config_uid: str, pool_name: str, machine_uid: str, project: str | None) -> None:
        """``DELETE .../machines/{machineUid}``: the machine leaves its pool and its host is free again
        (Palette drains and removes the node; the Terraform provider deletes the machines of removed
        hosts before it PUTs the pool without them). The last machine of a control-plane pool stays."""
        with self.lock:
            self.sweep()
            cluster = self._cluster_by_config(config_uid, project)
            if cluster.deleting_since is not None:
                raise ApiError(409, "ClusterDeleting", f"cluster {cluster.name} is being deleted")
            pool = cluster.pool(pool_name)
            if pool is None:
                raise ApiError(404, "ResourceNotFound", f"machine pool {pool_name} not found")
            host_uid = next((h for h in pool.hosts if _machine_uid(cluster.uid, h) == machine_uid), None)
            if host_uid is None:
                raise ApiError(404, "ResourceNotFound", f"machine {machine_uid} not found")
            if pool.is_control_plane and len(pool.hosts) == 1:
                raise ApiError(400, "InvalidRequest", "a control-plane pool needs at least one machine")
            self._release(host_uid, cluster.uid)
            pool.hosts = [h for h in pool.hosts if h != host_uid]
            pool.entities = {h: e for h, e in pool.entities.items() if h != host_uid}

    def _machine_document(self, cluster: Cluster, pool: Pool, host_uid: str) -> dict[str, Any]:
        """``v1EdgeNativeMachine``: named as the host (the provider matches machines to hosts by name)."""
        state = self.cluster_state(cluster)
        instance = {"Pending": "Pending", "Provisioning": "Provisioning", "Running": "Running"}.get(
            state, "Deleting" if state == "Deleting" else "Unknown"
        )
        host = self.hosts.get(host_uid)
        name = pool.entities.get(host_uid, {}).get("hostName") or _get(host, "metadata", "name") or host_uid
        address = _get(pool.entities.get(host_uid), "nic", "ip") or _get(host, "spec", "host", "hostAddress")
        status: dict[str, Any] = {
            "instanceState": instance,
            "ready": instance == "Running",
            "health": {"state": "Healthy" if instance == "Running" else "Unknown"},
        }
        if address:
            status["addresses"] = [{"type": "InternalIP", "address": str(address)}]
        return {
            "apiVersion": "v1",
            "kind": "Machine",
            "metadata": {
                "uid": _machine_uid(cluster.uid, host_uid),
                "name": str(name),
                "labels": {},
                "annotations": {},
                "creationTimestamp": timestamp(cluster.created),
            },
            "spec": {"edgeHostUid": host_uid},
            "status": status,
        }

    def cluster_overview(self, uid: str, project: str | None) -> dict[str, Any]:
        """``v1SpectroClusterUidSummary`` (``GET /v1/dashboard/spectroclusters/{uid}/overview``)."""
        with self.lock:
            self.sweep()
            cluster = self._visible_cluster(uid, project)
            summary = self.cluster_summary(cluster)
            templates = [self._template_meta(p) for p in cluster.profiles]
            return {
                "metadata": summary["metadata"],
                "spec": {
                    "archTypes": summary["specSummary"]["archTypes"],
                    "cloudConfig": summary["specSummary"]["cloudConfig"],
                    "clusterProfileTemplates": templates,
                },
                "status": {"state": summary["status"]["state"], "health": summary["status"]["health"]},
            }

    def _template_meta(self, attached: Mapping[str, Any]) -> dict[str, Any]:
        document = self._profile_document(attached)
        return {
            "uid": document["metadata"]["uid"],
            "name": document["metadata"]["name"],
            "type": document["spec"]["type"],
            "cloudType": "edge-native",
        }

    def _check_placeable(self, host_uid: str, project: str | None) -> None:
        host = self.hosts.get(host_uid)
        if host is None or not self._in_scope(self._host_project(host), project):
            raise ApiError(400, "EdgeHostNotFound", f"edge host {host_uid} not found")
        refs = _get(host, "status", "inUseClustersRef") or []
        if refs or _get(host, "status", "state") == "in-use":
            owner = ", ".join(str(r.get("name") or r.get("uid")) for r in refs) or "another cluster"
            raise ApiError(409, "EdgeHostInUse", f"edge host {host_uid} is already in use by {owner}")
        if _get(host, "status", "state") != "ready":
            raise ApiError(400, "EdgeHostNotReady", f"edge host {host_uid} is not ready")
        if _get(host, "status", "health", "state") != "healthy":
            raise ApiError(400, "EdgeHostUnhealthy", f"edge host {host_uid} is not healthy")

    def delete_cluster(self, uid: str, project: str | None) -> None:
        with self.lock:
            self.sweep()
            cluster = self._visible_cluster(uid, project)
            if cluster.deleting_since is None:
                cluster.deleting_since = self.clock()

    def get_cloud_config(self, config_uid: str, project: str | None) -> dict[str, Any]:
        with self.lock:
            self.sweep()
            cluster = self._cluster_by_config(config_uid, project)
            return {
                "metadata": {"uid": cluster.cloud_config_uid, "name": cluster.name},
                "spec": {
                    "clusterConfig": copy.deepcopy(cluster.cluster_config),
                    "machinePoolConfig": [self._pool_document(p) for p in cluster.pools],
                },
                "status": {"conditions": []},
            }

    def update_machine_pool(self, config_uid: str, pool_name: str, project: str | None, body: Any) -> None:
        """Replace a pool's hosts: added hosts go ``in-use``, removed ones back to ``ready``."""
        new = _parse_pool(body, default_name=pool_name)
        if new.name != pool_name:
            raise ApiError(400, "InvalidRequest", f"poolConfig.name {new.name} does not match {pool_name}")
        with self.lock:
            self.sweep()
            cluster = self._cluster_by_config(config_uid, project)
            pool = cluster.pool(pool_name)
            if pool is None:
                raise ApiError(404, "ResourceNotFound", f"machine pool {pool_name} not found")
            self._replace_hosts(cluster, pool, new, project)

    def create_machine_pool(self, config_uid: str, project: str | None, body: Any) -> str:
        new = _parse_pool(body)
        with self.lock:
            self.sweep()
            cluster = self._cluster_by_config(config_uid, project)
            if cluster.pool(new.name) is not None:
                raise ApiError(409, "MachinePoolExists", f"machine pool {new.name} already exists")
            pool = Pool(new.name, new.is_control_plane, {}, [])
            self._replace_hosts(cluster, pool, new, project)
            cluster.pools.append(pool)
            return new.name

    def _replace_hosts(self, cluster: Cluster, pool: Pool, new: Pool, project: str | None) -> None:
        if cluster.deleting_since is not None:
            raise ApiError(409, "ClusterDeleting", f"cluster {cluster.name} is being deleted")
        if len(set(new.hosts)) != len(new.hosts):
            raise ApiError(400, "InvalidRequest", "an edge host may appear only once in a pool")
        if pool.is_control_plane and not new.hosts:
            raise ApiError(400, "InvalidRequest", "a control-plane pool needs at least one host")
        _check_addressing(cluster.cluster_config, [new])
        added = [uid for uid in new.hosts if uid not in pool.hosts]
        removed = [uid for uid in pool.hosts if uid not in new.hosts]
        for uid in added:
            self._check_placeable(uid, project)
        for uid in removed:
            self._release(uid, cluster.uid)
        for uid in added:
            self._occupy(uid, cluster)
        pool.hosts = list(new.hosts)
        pool.entities = new.entities
        pool.config = new.config
        pool.is_control_plane = new.is_control_plane

    # --- admin -------------------------------------------------------------------------------------

    def patch_host(self, uid: str, body: Any) -> dict[str, Any]:
        """Change a host while running: ``healthState``, ``state``, ``labels`` (replace), ``tags`` (merge)."""
        if not isinstance(body, Mapping):
            raise ApiError(400, "InvalidRequest", "the body must be a JSON object")
        unknown = set(body) - {"healthState", "state", "labels", "tags"}
        if unknown:
            raise ApiError(400, "InvalidRequest", f"unknown fields: {', '.join(sorted(unknown))}")
        with self.lock:
            host = self.hosts.get(uid)
            if host is None:
                raise ApiError(404, "ResourceNotFound", f"edge host {uid} not found")
            self._touch(host)
            status = host.setdefault("status", {})
            if "healthState" in body:
                if body["healthState"] not in ("healthy", "unhealthy"):
                    raise ApiError(400, "InvalidRequest", "healthState is healthy or unhealthy")
                status.setdefault("health", {})["state"] = body["healthState"]
            if "state" in body:
                if body["state"] not in ("ready", "unpaired", "in-use"):
                    raise ApiError(400, "InvalidRequest", "state is ready, unpaired or in-use")
                status["state"] = body["state"]
            meta = host.setdefault("metadata", {})
            if "labels" in body:
                meta["labels"] = {str(k): str(v) for k, v in dict(body["labels"] or {}).items()}
            if "tags" in body:
                labels = meta.setdefault("labels", {})
                for key, value in dict(body["tags"] or {}).items():
                    if value is None:
                        labels.pop(str(key), None)
                    else:
                        labels[str(key)] = str(value)
            return copy.deepcopy(host)

    def put_host(self, item: Any) -> dict[str, Any]:
        """Register (or replace) an edge host, as the edge agent's registration would."""
        uid = _get(item, "metadata", "uid")
        if not isinstance(item, Mapping) or not uid:
            raise ApiError(400, "InvalidRequest", "an edge host needs metadata.uid")
        with self.lock:
            host = copy.deepcopy(dict(item))
            host["metadata"].setdefault("name", str(uid))
            host["metadata"].setdefault("creationTimestamp", timestamp(self.clock()))
            status = host.setdefault("status", {})
            status.setdefault("state", "ready")
            status.setdefault("health", {"state": "healthy"})
            self._touch(host)
            if str(uid) in self.hosts:
                self._host_order.remove(str(uid))
            self.hosts[str(uid)] = host
            key = (str(host["metadata"]["name"]), str(uid))
            names = [(str(self.hosts[u]["metadata"].get("name")), u) for u in self._host_order]
            self._host_order.insert(bisect.bisect(names, key), str(uid))
            return copy.deepcopy(host)

    def remove_host(self, uid: str) -> None:
        """Deregister an edge host (DELETE /v1/edgehosts/{uid})."""
        with self.lock:
            if uid not in self.hosts:
                raise ApiError(404, "ResourceNotFound", f"edge host {uid} not found")
            del self.hosts[uid]
            self._host_order.remove(uid)
            self._version += 1

    def snapshot_view(self) -> dict[str, Any]:
        """Everything, unscoped: hosts as the search returns them and clusters as GET returns them."""
        with self.lock:
            self.sweep()
            return {
                "edgeHosts": [copy.deepcopy(h) for h in self._visible_hosts(None)],
                "clusters": [
                    self.cluster_document(c) for c in sorted(self.clusters.values(), key=lambda c: c.name)
                ],
                **(
                    {"clusterProfiles": [dict(e) for e in self.catalogue.values()]}
                    if self.catalogue is not None
                    else {}
                ),
            }

    # --- documents ---------------------------------------------------------------------------------

    def _meta(self, cluster: Cluster) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "uid": cluster.uid,
            "name": cluster.name,
            "labels": dict(cluster.labels),
            "annotations": dict(cluster.annotations),
            "creationTimestamp": timestamp(cluster.created),
            "lastModifiedTimestamp": timestamp(cluster.deleting_since or cluster.created),
        }
        if cluster.deleting_since is not None:
            meta["deletionTimestamp"] = timestamp(cluster.deleting_since)
        return meta

    def cluster_document(self, cluster: Cluster) -> dict[str, Any]:
        """``v1SpectroCluster``."""
        return {
            "apiVersion": "v1",
            "kind": "SpectroCluster",
            "metadata": self._meta(cluster),
            "spec": {
                "cloudType": "edge-native",
                "cloudConfigRef": {
                    "kind": "EdgeNativeCloudConfig",
                    "name": cluster.name,
                    "uid": cluster.cloud_config_uid,
                },
                "clusterType": "PureManage",
                "clusterProfileTemplates": [self._template_meta(p) for p in cluster.profiles],
            },
            "status": {"state": self.cluster_state(cluster), "conditions": []},
        }

    def cluster_summary(self, cluster: Cluster) -> dict[str, Any]:
        """``v1SpectroClusterSummary``."""
        state = self.cluster_state(cluster)
        arches = sorted({self._host_arch(uid) for uid in cluster.host_uids()})
        summary: dict[str, Any] = {
            "metadata": self._meta(cluster),
            "specSummary": {
                "cloudConfig": {
                    "cloudType": "edge-native",
                    "uid": cluster.cloud_config_uid,
                    "machinePools": [
                        {
                            "cloudType": "edge-native",
                            "labels": ["control-plane"] if p.is_control_plane else ["worker"],
                            "isControlPlane": p.is_control_plane,
                            "size": len(p.hosts),
                            "healthy": len(p.hosts) if state == "Running" else 0,
                        }
                        for p in cluster.pools
                    ],
                },
                "archTypes": arches,
            },
            "status": {"state": state, "health": {"state": "Healthy" if state == "Running" else "Unknown"}},
        }
        if cluster.project_uid:
            summary["specSummary"]["projectMeta"] = {
                "uid": cluster.project_uid,
                "name": cluster.project_name or "",
            }
        return summary

    def _host_arch(self, uid: str) -> str:
        arch = _get(self.hosts.get(uid), "spec", "device", "archType")
        return str(arch) if arch in ("amd64", "arm64") else "amd64"

    def _pool_document(self, pool: Pool) -> dict[str, Any]:
        """``v1EdgeNativeMachinePoolConfig`` with its hosts (``hostUid`` and ``hostAddress`` required)."""
        doc: dict[str, Any] = {k: copy.deepcopy(v) for k, v in pool.config.items() if k in _POOL_FIELDS}
        doc["name"] = pool.name
        doc["isControlPlane"] = pool.is_control_plane
        doc["size"] = len(pool.hosts)
        doc["hosts"] = [
            {
                "hostUid": uid,
                "hostAddress": str(_get(self.hosts.get(uid), "spec", "host", "hostAddress") or ""),
                "hostName": str(_get(self.hosts.get(uid), "metadata", "name") or uid),
                **copy.deepcopy(pool.entities.get(uid, {})),
            }
            for uid in pool.hosts
        ]
        return doc


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
