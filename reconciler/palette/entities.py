"""Request bodies for Palette, built from the reconciler's resources (pure: no I/O).

Shapes follow the swagger subset (``v1SpectroEdgeNativeClusterEntity`` for a create,
``v1EdgeNativeMachinePoolConfigEntity`` for a machine pool, ``v1SpectroClusterProfiles`` and
``v1SpectroClusterProfilesDeleteEntity`` for attaching and detaching cluster profiles), filled the way
the Terraform provider fills them (``spectrocloud/resource_cluster_edge_native.go``: ``toEdgeNativeCluster``,
``toMachinePoolEdgeNative``, ``toEdgeHosts``, ``toOverlayNetworkConfigAndVip``;
``spectrocloud/cluster_common_profiles.go``: ``toProfilesCommon``). docs/palette-requests.md explains
every field.

- A create always names its cluster profiles: an empty ``profiles`` list is refused here, before Palette.
- Edge hosts carry ``hostUid`` and ``hostName`` (the host's name; the provider matches machines to hosts
  by it when it removes one).
- A two-node cluster marks its two control-plane hosts ``twoNodeCandidatePriority`` primary/secondary.
- ``staticIp`` is only sent when the profile asks for static addressing *and* every host of the request
  carries its address (``nic`` from the host's agent data); otherwise Palette's default, DHCP, applies.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.edgehost import Nic
from reconciler.inventory import Machine
from reconciler.model.base import ClusterProfileRef
from reconciler.model.resources import ComputeProfile, Taint

CONTROL_PLANE_POOL = "control-plane-pool"
WORKER_POOL = "worker-pool"
TWO_NODE_PRIORITIES = ("primary", "secondary")


@dataclass(frozen=True, slots=True)
class PoolHost:
    """One edge host of a machine pool request: its uid, and its name and address when known."""

    uid: str
    name: str | None = None
    nic: Nic | None = None


def pool_hosts(
    uids: Iterable[str], machines: Mapping[str, Machine], names: Mapping[str, str] | None = None
) -> list[PoolHost]:
    """Hosts by uid, with the name and address discovery found (else a name Palette already reported)."""
    out: list[PoolHost] = []
    for uid in uids:
        machine = machines.get(uid)
        if machine is not None:
            out.append(PoolHost(uid, machine.name or None, machine.nic))
        else:
            out.append(PoolHost(uid, (names or {}).get(uid) or None))
    return sorted(out, key=lambda h: (h.name or "", h.uid))


def static_ip_wanted(profile: ComputeProfile) -> bool:
    """The profile asks for static addresses (``edge.networkOverlayConfig.staticIp``)."""
    edge = profile.spec.edge
    overlay = edge.network_overlay_config if edge is not None else None
    return bool(overlay is not None and overlay.static_ip)


def static_ip(profile: ComputeProfile, hosts: Iterable[PoolHost]) -> bool:
    """True when the profile asks for static addresses and every host carries one."""
    return static_ip_wanted(profile) and all(h.nic is not None and h.nic.ip for h in hosts)


def cluster_profile_entities(refs: Sequence[ClusterProfileRef]) -> list[dict[str, Any]]:
    """``v1SpectroClusterProfileEntity`` items: ``uid``, and ``packValues`` when the resource gives them."""
    out: list[dict[str, Any]] = []
    for ref in refs:
        item: dict[str, Any] = {"uid": ref.uid}
        if ref.pack_values:
            item["packValues"] = [dict(v) for v in ref.pack_values]
        out.append(item)
    return out


def cluster_create_entity(
    *,
    name: str,
    labels: Mapping[str, str],
    profile: ComputeProfile,
    cluster_profiles: Sequence[ClusterProfileRef],
    vip: str | None,
    arch: str,
    control_plane: Sequence[PoolHost],
    workers: Sequence[PoolHost],
) -> dict[str, Any]:
    """The ``POST /v1/spectroclusters/edge-native`` body of one platform's cluster.

    ``vip`` is the platform's resolved VIP (``resolve.vip``); when None (as the provider does) the first
    address of an enabled overlay CIDR is used; when none applies no control-plane
    endpoint is sent. The worker pool is left out when there are no workers (Palette has no use for an
    empty pool; :func:`machine_pool_entity` adds one later). Raises ValueError without cluster profiles.
    """
    if not cluster_profiles:
        raise ValueError(f"cluster {name}: no cluster profile: Palette cannot build the cluster")
    static = static_ip(profile, [*control_plane, *workers])
    pools = [machine_pool_entity(CONTROL_PLANE_POOL, True, control_plane, profile, arch, static=static)]
    if workers:
        pools.append(machine_pool_entity(WORKER_POOL, False, workers, profile, arch, static=static))
    return {
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {
            "cloudConfig": _cloud_config(profile, vip, static),
            "machinepoolconfig": pools,
            "profiles": cluster_profile_entities(cluster_profiles),
        },
    }


def machine_pool_entity(
    pool: str,
    is_control_plane: bool,
    hosts: Sequence[PoolHost],
    profile: ComputeProfile,
    arch: str,
    *,
    static: bool | None = None,
) -> dict[str, Any]:
    """A full machine pool (``v1EdgeNativeMachinePoolConfigEntity``), for a create or a ``PUT`` update.

    Control-plane pools take ``controlPlaneDefaults`` (and ``useControlPlaneAsWorker`` from
    ``workerNodeEligible``); worker pools take ``workerPoolDefaults`` and, as the provider sends them,
    ``nodeRepaveInterval: 0`` and ``skipK8sUpgrade: disabled``. ``static`` None means :func:`static_ip`
    of these hosts.
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
    else:
        pool_config["nodeRepaveInterval"] = 0
        pool_config["skipK8sUpgrade"] = "disabled"
    use_static = static_ip(profile, hosts) if static is None else static
    two_node = is_control_plane and _is_two_node(profile) and len(hosts) == len(TWO_NODE_PRIORITIES)
    ordered = sorted(hosts, key=lambda h: (h.name or "", h.uid))
    edge_hosts = []
    for index, host in enumerate(ordered):
        item: dict[str, Any] = {"hostUid": host.uid}
        if host.name:
            item["hostName"] = host.name
        if use_static and host.nic is not None:
            item["nic"] = _nic(host.nic)
        if two_node:
            item["twoNodeCandidatePriority"] = TWO_NODE_PRIORITIES[index]
        edge_hosts.append(item)
    return {"cloudConfig": {"edgeHosts": edge_hosts}, "poolConfig": pool_config}


def attach_profiles_entity(refs: Sequence[ClusterProfileRef]) -> dict[str, Any]:
    """``v1SpectroClusterProfiles`` for ``PATCH /v1/spectroclusters/{uid}/profiles`` (attach)."""
    return {"profiles": cluster_profile_entities(refs)}


def detach_profiles_entity(profile_uids: Iterable[str]) -> dict[str, Any]:
    """``v1SpectroClusterProfilesDeleteEntity`` for ``DELETE /v1/spectroclusters/{uid}/profiles``."""
    return {"profileUids": sorted(set(profile_uids))}


def _is_two_node(profile: ComputeProfile) -> bool:
    return bool(profile.spec.edge is not None and profile.spec.edge.is_two_node)


def _nic(nic: Nic) -> dict[str, Any]:
    out: dict[str, Any] = {"ip": nic.ip}
    if nic.name:
        out["nicName"] = nic.name
    if nic.subnet:
        out["subnet"] = nic.subnet
    if nic.gateway:
        out["gateway"] = nic.gateway
    if nic.dns:
        out["dns"] = list(nic.dns)
    return out


def _cloud_config(profile: ComputeProfile, vip: str | None, static: bool) -> dict[str, Any]:
    edge = profile.spec.edge
    overlay = edge.network_overlay_config if edge else None
    enabled = bool(overlay and overlay.enabled and overlay.cidr)
    cidr = overlay.cidr if overlay is not None and enabled and overlay.cidr else ""
    endpoint = vip or (_first_address(cidr) if enabled else None)
    config: dict[str, Any] = {
        "ntpServers": list(edge.ntp_servers) if edge else [],
        "overlayNetworkConfiguration": {"enable": enabled, "cidr": cidr},
        "sshKeys": list(profile.spec.ssh_keys),
        "isTwoNodeCluster": _is_two_node(profile),
    }
    if static:
        config["staticIp"] = True
    if endpoint:
        config["controlPlaneEndpoint"] = {"host": endpoint, "type": "VIP"}
    return config


def _first_address(cidr: str) -> str | None:
    """The provider's ``getFirstIPRange``: the network address plus one."""
    try:
        network = ipaddress.ip_network(cidr, strict=False)
    except ValueError:
        return None
    return str(network.network_address + 1)


def _taint(taint: Taint) -> dict[str, Any]:
    out: dict[str, Any] = {"key": taint.key, "effect": taint.effect}
    if taint.value is not None:
        out["value"] = taint.value
    return out
