"""Typed host facts -> the smallest edge host search item that reads back as them (pure): the inverse of
:func:`reconciler.edgehost.read_host`, used to store hosts in the status branch's inventory snapshots.
"""

from __future__ import annotations

from typing import Any

from reconciler.edgehost import GpuDevice, HostFacts, Nic


def host_item(facts: HostFacts) -> dict[str, Any]:
    """The smallest search item that :func:`read_host` reads back as ``facts``: exactly the fields it
    reads, in their canonical spelling (the status branch's inventory snapshots store hosts this way,
    so a field nobody reads, such as a heartbeat time, never changes a snapshot).

    ``read_host(host_item(f)) == f`` for every ``f`` that :func:`read_host` returned.
    """
    metadata: dict[str, Any] = {"uid": facts.uid, "name": facts.name}
    if facts.tags:
        metadata["labels"] = dict(facts.tags)
    device: dict[str, Any] = {}
    if facts.raw_arch is not None:
        device["archType"] = facts.raw_arch
    if facts.cpu_cores is not None:
        device["cpu"] = {"cores": facts.cpu_cores}
    if facts.gpus:
        device["gpus"] = [_gpu_item(g) for g in facts.gpus]
    if facts.nics:
        device["nics"] = [_nic_item(n) for n in facts.nics]
    spec: dict[str, Any] = {}
    if device:
        spec["device"] = device
    if facts.host_address is not None:
        spec["host"] = {"hostAddress": facts.host_address}
    if facts.project_uid is not None:
        spec["projectMeta"] = {"uid": facts.project_uid}
    status: dict[str, Any] = {}
    if facts.state:
        status["state"] = facts.state
    if facts.health:
        status["health"] = {"state": facts.health}
    if facts.cluster_uid is not None:
        status["inUseClustersRef"] = [{"uid": facts.cluster_uid}]
    item: dict[str, Any] = {"metadata": metadata}
    if spec:
        item["spec"] = spec
    if status:
        item["status"] = status
    for path, value in facts.unreadable:  # as Palette sent it: read back as the same unreadable host
        _put(item, path.split("."), value)
    return item


def _put(item: dict[str, Any], path: list[str], value: Any) -> None:
    node = item
    for key in path[:-1]:
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            return  # a parent is itself unreadable and already written as it was
        node = child
    node[path[-1]] = value


def _gpu_item(gpu: GpuDevice) -> dict[str, Any]:
    out: dict[str, Any] = {"vendor": gpu.vendor, "model": gpu.model, "gpuCount": gpu.count}
    if gpu.memory is not None:
        out["memory"] = gpu.memory
    if gpu.mig_capable:
        out["migCapable"] = True
    if gpu.mig_strategy is not None:
        out["migStrategy"] = gpu.mig_strategy
    return out


def _nic_item(nic: Nic) -> dict[str, Any]:
    out: dict[str, Any] = {"nicName": nic.name, "ip": nic.ip}
    if nic.subnet is not None:
        out["subnet"] = nic.subnet
    if nic.gateway is not None:
        out["gateway"] = nic.gateway
    if nic.is_default:
        out["isDefault"] = True
    if nic.dns:
        out["dns"] = list(nic.dns)
    return out
