"""Request bodies for Palette, built from the reconciler's resources (pure: no I/O).

Shapes follow the swagger subset: ``v1SpectroEdgeNativeClusterEntity`` for a create and
``v1EdgeNativeMachinePoolConfigEntity`` for a machine pool, assembled the way the Terraform provider
does (``size = len(edgeHosts)``, pool labels ``["control-plane"]``/``["worker"]``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reconciler.model.resources import ComputeProfile, Taint, WorkloadProfile

CONTROL_PLANE_POOL = "control-plane-pool"
WORKER_POOL = "worker-pool"


def cluster_create_entity(
    *,
    name: str,
    labels: Mapping[str, str],
    profile: ComputeProfile,
    workload: WorkloadProfile | None,
    vip: str | None,
    arch: str,
    control_plane: Sequence[str],
    workers: Sequence[str],
) -> dict[str, Any]:
    """The ``POST /v1/spectroclusters/edge-native`` body of one platform's cluster.

    ``vip`` is the platform's resolved VIP; when None the profile's ``edge.vip`` is used, and when neither
    is set no control-plane endpoint is sent. The worker pool is left out when there are no workers
    (Palette has no use for an empty pool; :func:`machine_pool_entity` adds one later).
    """
    pools = [machine_pool_entity(CONTROL_PLANE_POOL, True, control_plane, profile, arch)]
    if workers:
        pools.append(machine_pool_entity(WORKER_POOL, False, workers, profile, arch))
    profiles: list[dict[str, Any]] = []
    if workload is not None and workload.spec is not None:
        profiles = [
            {"uid": ref.uid, "packValues": list(ref.pack_values or [])}
            for ref in workload.spec.cluster_profiles
        ]
    return {
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {
            "cloudConfig": _cloud_config(profile, vip),
            "machinepoolconfig": pools,
            "profiles": profiles,
        },
    }


def machine_pool_entity(
    pool: str, is_control_plane: bool, hosts: Sequence[str], profile: ComputeProfile, arch: str
) -> dict[str, Any]:
    """A full machine pool (``v1EdgeNativeMachinePoolConfigEntity``), for a create or a ``PUT`` update.

    Control-plane pools take ``controlPlaneDefaults`` (and ``useControlPlaneAsWorker`` from
    ``workerNodeEligible``); worker pools take ``workerPoolDefaults``.
    """
    spec = profile.spec
    if is_control_plane:
        cp = spec.control_plane_defaults
        labels, annotations, taints = cp.labels, cp.annotations, cp.taints
    else:
        wp = spec.worker_pool_defaults
        labels = wp.labels if wp else {}
        annotations = wp.annotations if wp else {}
        taints = wp.taints if wp else []
    pool_config: dict[str, Any] = {
        "name": pool,
        "isControlPlane": is_control_plane,
        "labels": ["control-plane"] if is_control_plane else ["worker"],
        "size": len(hosts),
        "additionalLabels": dict(labels),
        "additionalAnnotations": dict(annotations),
        "taints": [_taint(t) for t in taints],
        "updateStrategy": {"type": "RollingUpdateScaleOut"},
        "machinePoolProperties": {"archType": arch},
    }
    if is_control_plane:
        pool_config["useControlPlaneAsWorker"] = spec.control_plane_defaults.worker_node_eligible
    return {
        "cloudConfig": {"edgeHosts": [{"hostUid": uid} for uid in hosts]},
        "poolConfig": pool_config,
    }


def _cloud_config(profile: ComputeProfile, vip: str | None) -> dict[str, Any]:
    edge = profile.spec.edge
    endpoint = vip or (edge.vip if edge else None)
    overlay = edge.network_overlay_config if edge else None
    config: dict[str, Any] = {
        "ntpServers": list(edge.ntp_servers) if edge else [],
        "overlayNetworkConfiguration": {
            "enable": bool(overlay and overlay.enabled),
            "cidr": (overlay.cidr or "") if overlay else "",
        },
        "sshKeys": list(profile.spec.ssh_keys),
        "isTwoNodeCluster": bool(edge and edge.is_two_node),
        "staticIp": bool(overlay and overlay.static_ip),
    }
    if endpoint:
        config["controlPlaneEndpoint"] = {"host": endpoint, "type": "VIP"}
    return config


def _taint(taint: Taint) -> dict[str, Any]:
    out: dict[str, Any] = {"key": taint.key, "effect": taint.effect}
    if taint.value is not None:
        out["value"] = taint.value
    return out
