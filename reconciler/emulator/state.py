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
import json
from collections.abc import Mapping
from typing import Any

from reconciler.emulator import search
from reconciler.emulator.errors import ApiError
from reconciler.emulator.hosts import get as _get
from reconciler.emulator.records import (
    _BUILDING_TYPES,
    _CLUSTER_PROPERTIES,
    _HOST_PROPERTIES,
    _HOST_SORT_FIELDS,
    Cluster,
    Pool,
    _check_addressing,
    _machine_uid,
    _parse_pool,
    timestamp,
)
from reconciler.emulator.state_documents import DocumentedState

# The records (``records``), the world (``state_base``) and its documents (``state_documents``) live in
# their own modules; the public names are importable from here.
__all__ = ["EmulatorState"]


class EmulatorState(DocumentedState):
    """Hosts and clusters of one emulated Palette tenant (several projects)."""

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
