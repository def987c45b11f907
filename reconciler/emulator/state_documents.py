"""The documents the emulator answers with, built from its records as Palette shapes them:
``v1SpectroCluster``, its summary, a machine pool's config, a machine, an attached profile
(docs/emulator.md). ``state`` adds the operations."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from reconciler.emulator.errors import ApiError
from reconciler.emulator.hosts import get as _get
from reconciler.emulator.records import (
    _POOL_FIELDS,
    PALETTE_PROFILE_TYPES,
    Cluster,
    Pool,
    _machine_uid,
    timestamp,
)
from reconciler.emulator.state_base import StateBase


class DocumentedState(StateBase):
    """The emulator's world with the documents of its clusters, pools, machines and profiles."""

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

    def cluster_profile(self, uid: str) -> dict[str, Any]:
        """``GET /v1/clusterprofiles/{uid}`` (``v1ClusterProfile``): the catalogue's profile, its type in
        ``spec.published.type`` as Palette names it; 404 for a uid the catalogue does not have. Without a
        catalogue the emulator cannot say what a profile is (it accepts any uid as an infrastructure
        profile): the answer has no type."""
        with self.lock:
            if self.catalogue is None:
                return {"metadata": {"uid": uid, "name": uid}, "spec": {"published": {"name": uid}}}
            entry = self.catalogue.get(uid)
            if entry is None:
                raise ApiError(404, "ResourceNotFound", f"cluster profile {uid} not found")
            published = {
                "name": entry["name"],
                "cloudType": "edge-native",
                "type": PALETTE_PROFILE_TYPES.get(entry["type"], "infra"),
                "profileVersion": "1.0.0",
            }
            return {"metadata": {"uid": uid, "name": entry["name"]}, "spec": {"published": published}}

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

    def _template_meta(self, attached: Mapping[str, Any]) -> dict[str, Any]:
        document = self._profile_document(attached)
        return {
            "uid": document["metadata"]["uid"],
            "name": document["metadata"]["name"],
            "type": document["spec"]["type"],
            "cloudType": "edge-native",
        }

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
