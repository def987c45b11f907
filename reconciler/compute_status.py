"""The Compute status: available machines grouped as in the PaletteAI documentation (pure).

Shape (camelCase keys, as the status file and ``inventory show --format yaml|json`` print it)::

    availableControlPlaneCompute:
      - {architecture: AMD64, available: true, cpuCount: 4, instances: 6, machines: [...],
         resourceGroups: {...}}            # resourceGroups only when the hosts carry any
    availableWorkerCompute:
      - {architecture: AMD64, available: true, family: NVIDIA H100, gpuCount: 8, instances: 3,
         machines: [...], resourceGroups: {...}}
      - {architecture: AMD64, available: true, cpuCount: 16, gpuCount: 0, instances: 2, machines: [...]}
    excludedMachines:
      - {name: ..., uid: ..., reason: ...}

Only AVAILABLE machines are listed (in-use and unhealthy hosts are not "available compute"), so
``available`` is always true; it is kept because the documented shape has it. One entry per
(architecture, CPU count or GPU family and count, resource groups). Worker-tagged hosts without GPUs are
workers: their entry has ``gpuCount: 0``, no ``family`` and a ``cpuCount`` (they group by CPU count, as
control-plane candidates do).

Ordering, so that the same inventory always renders the same bytes:
- entries by architecture, then resource groups (hosts in no group first, then by sorted (group, value)
  pairs), then CPU count (control plane) or GPU family and GPU count (workers; CPU-only workers last);
- ``machines`` are host uids in inventory order: host name, then uid. Names are what people choose and
  read, so a listing follows them; the seed's example lists uids in exactly such an order;
- excluded machines by name, then uid.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from reconciler.host_tags import display_family
from reconciler.inventory import HostState, Inventory, Machine, Role
from reconciler.model.observed import MANAGED_BY_LABEL, MANAGED_BY_VALUE, NAME_LABEL, NAMESPACE_LABEL
from reconciler.model.pools import cluster_kind

_GroupKey = tuple[str, tuple[tuple[str, str], ...], int, str, int]


def _groups_key(machine: Machine) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(machine.resource_groups.items()))


def _entry(key: _GroupKey, worker: bool, machines: list[Machine]) -> dict[str, Any]:
    arch, groups, cpus, family, gpus = key
    entry: dict[str, Any] = {"architecture": arch.upper(), "available": True}
    if not worker or not family:
        entry["cpuCount"] = cpus
    if worker and family:
        entry["family"] = display_family(family)
    if worker:
        entry["gpuCount"] = gpus
    entry["instances"] = len(machines)
    entry["machines"] = [m.uid for m in machines]
    if groups:
        entry["resourceGroups"] = dict(groups)
    return entry


def _grouped(machines: list[Machine], worker: bool) -> list[dict[str, Any]]:
    groups: dict[_GroupKey, list[Machine]] = {}
    for machine in machines:
        if worker and machine.gpu_family is not None and machine.gpu_count > 0:
            key: _GroupKey = (machine.arch, _groups_key(machine), 0, machine.gpu_family, machine.gpu_count)
        else:
            key = (machine.arch, _groups_key(machine), machine.cpus, "", 0)
        groups.setdefault(key, []).append(machine)

    def order(key: _GroupKey) -> tuple[Any, ...]:
        arch, rg, cpus, family, gpus = key
        return (arch, rg, family == "", family, gpus, cpus)

    return [_entry(key, worker, groups[key]) for key in sorted(groups, key=order)]


def compute_status(inventory: Inventory) -> dict[str, Any]:
    """The Compute resource's status for ``inventory`` (machines are already in name, uid order)."""
    control_plane = [m for m in inventory.machines if m.available and m.role is Role.CONTROL_PLANE]
    workers = [m for m in inventory.machines if m.available and m.role is Role.WORKER]
    return {
        "availableControlPlaneCompute": _grouped(control_plane, worker=False),
        "availableWorkerCompute": _grouped(workers, worker=True),
        "excludedMachines": [{"name": h.name, "uid": h.uid, "reason": h.reason} for h in inventory.excluded],
    }


def unavailable_machines(inventory: Inventory) -> list[dict[str, str]]:
    """Hosts that are PaletteAI's but cannot be placed now (unhealthy, not ready), with why."""
    return [
        {"name": m.name, "uid": m.uid, "reason": m.unavailable_reason or "not available"}
        for m in inventory.machines
        if m.state is HostState.UNAVAILABLE
    ]


def summary(inventory: Inventory) -> Mapping[str, int]:
    """Host counts by state, for the people-facing view."""
    counts = {"available": 0, "in-use": 0, "unavailable": 0}
    for machine in inventory.machines:
        counts[machine.state.value] += 1
    return {**counts, "excluded": len(inventory.excluded)}


def holders(clusters: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Cluster uid -> ``{cluster: <name>, heldBy: {kind, namespace, name}}``; ``heldBy`` only for the
    clusters the reconciler manages (by their labels; ``kind`` is MLPlatform or ComputePool)."""
    out: dict[str, dict[str, Any]] = {}
    for cluster in clusters:
        meta: Mapping[str, Any] = cluster.get("metadata") or {}
        uid, name = meta.get("uid"), meta.get("name")
        if not isinstance(uid, str):
            continue
        labels: Mapping[str, str] = meta.get("labels") or {}
        entry: dict[str, Any] = {"cluster": str(name or uid)}
        if labels.get(MANAGED_BY_LABEL) == MANAGED_BY_VALUE and labels.get(NAMESPACE_LABEL):
            entry["heldBy"] = {
                "kind": cluster_kind(labels),
                "namespace": str(labels[NAMESPACE_LABEL]),
                "name": str(labels.get(NAME_LABEL, "")),
            }
        out[uid] = entry
    return out


def in_use_machines(inventory: Inventory, held_by: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Hosts in a cluster (``name``, ``uid``, ``cluster``), each with the platform or pool that holds it
    (``heldBy``) when the reconciler manages the cluster; in inventory order."""
    out: list[dict[str, Any]] = []
    for m in inventory.machines:
        if m.state is not HostState.IN_USE:
            continue
        found = held_by.get(m.cluster_uid or "", {})
        entry: dict[str, Any] = {"name": m.name, "uid": m.uid, "cluster": found.get("cluster", m.cluster_uid)}
        if "heldBy" in found:
            entry["heldBy"] = dict(found["heldBy"])
        out.append(entry)
    return out
