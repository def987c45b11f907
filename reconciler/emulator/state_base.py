"""The emulator's world without its HTTP operations: hosts, clusters and the catalogue seeded from a
snapshot, the clock that moves cluster states, the project scope, and the checks an operation makes of
a host or a profile (docs/emulator.md). ``state_documents`` adds the documents, ``state`` the
operations."""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Mapping
from typing import Any

from reconciler.emulator.errors import ApiError
from reconciler.emulator.hosts import get as _get
from reconciler.emulator.hosts import is_worker_host
from reconciler.emulator.records import (
    _BUILDING_TYPES,
    PALETTE_PROFILE_TYPES,
    Clock,
    Cluster,
    Pool,
    timestamp,
)
from reconciler.snapshots import Snapshot


class StateBase:
    """Hosts and clusters of one emulated Palette tenant (several projects): their records and rules."""

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

    def _attached_type(self, uid: str) -> str:
        entry = (self.catalogue or {}).get(uid)
        return PALETTE_PROFILE_TYPES.get(entry["type"], "infra") if entry is not None else "infra"

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
