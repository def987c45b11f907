"""What ``reconciler status`` shows, computed from status files (pure: bytes in, rows out).

One row per resource the status branch holds a file for (platforms, Computes, pools, workloads,
scaling policies): kind, namespace, name, phase, reason, message, cluster, GPUs, hosts, since. A
Compute has no phase: its row counts the hosts it offers (its ``hosts`` are the available ones).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from reconciler.model.gpu import canonical_family

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# Status file directories of the kinds the table shows: every kind the status branch holds.
SHOWN_KINDS: dict[str, str] = {
    "mlplatforms": "MLPlatform",
    "computes": "Compute",
    "computepools": "ComputePool",
    "aiworkloads": "AIWorkload",
    "scalingpolicies": "ScalingPolicy",
}
PLURAL_OF: dict[str, str] = {kind: plural for plural, kind in SHOWN_KINDS.items()}


@dataclass(frozen=True)
class ResourceRow:
    kind: str
    namespace: str
    name: str
    phase: str | None
    reason: str | None
    message: str | None
    cluster: str | None
    gpus: dict[str, int] = field(default_factory=dict)
    hosts: list[str] = field(default_factory=list)
    since: str | None = None
    path: str = ""
    status: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """The whole ``status`` mapping of the file, for the details of one resource (not in the JSON)."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "phase": self.phase,
            "reason": self.reason,
            "message": self.message,
            "cluster": self.cluster,
            "gpus": dict(self.gpus),
            "hosts": list(self.hosts),
            "since": self.since,
        }


def load_yaml(data: bytes) -> Any:
    try:
        return yaml.load(data, Loader=_LOADER)
    except yaml.YAMLError:
        return None


def _ready(status: Mapping[str, Any]) -> Mapping[str, Any]:
    for cond in status.get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == "Ready":
            return cond
    return {}


def _hosts(status: Mapping[str, Any]) -> list[str]:
    hosts: set[str] = set()
    allocation = status.get("allocation")
    if isinstance(allocation, Mapping):
        for role in ("controlPlane", "workers"):
            hosts.update(str(h) for h in allocation.get(role) or [])
        for binding in [*(allocation.get("bound") or []), *(allocation.get("mig") or [])]:  # a workload's
            if isinstance(binding, Mapping) and binding.get("host"):
                hosts.add(str(binding["host"]))
    for binding in status.get("bindings") or status.get("mig") or []:
        if isinstance(binding, Mapping) and binding.get("host"):
            hosts.add(str(binding["host"]))
    return sorted(hosts)


def _gpus(status: Mapping[str, Any]) -> dict[str, int]:
    allocation = status.get("allocation")
    gpus = allocation.get("gpus") if isinstance(allocation, Mapping) else status.get("gpus")
    if not isinstance(gpus, Mapping):
        return {}
    return {str(k): int(v) for k, v in sorted(gpus.items()) if isinstance(v, int)}


def _compute_row(namespace: str, name: str, path: str, status: Mapping[str, Any]) -> ResourceRow:
    """A Compute offers hosts: its row lists the available ones, their GPUs, and counts the rest."""
    hosts: set[str] = set()
    gpus: dict[str, int] = {}
    for key in ("availableControlPlaneCompute", "availableWorkerCompute"):
        for entry in status.get(key) or []:
            if not isinstance(entry, Mapping):
                continue
            machines = [str(m) for m in entry.get("machines") or []]
            hosts.update(machines)
            count, family = entry.get("gpuCount"), entry.get("family")
            if family and isinstance(count, int) and count > 0:
                try:
                    label = str(canonical_family(str(family)))
                except ValueError:
                    label = str(family)
                gpus[label] = gpus.get(label, 0) + count * len(machines)
    in_use = len(status.get("inUseMachines") or [])
    excluded = len(status.get("excludedMachines") or [])
    return ResourceRow(
        kind="Compute",
        namespace=namespace,
        name=name,
        phase=None,
        reason=None,
        message=f"{len(hosts)} hosts available, {in_use} in use, {excluded} excluded",
        cluster=None,
        gpus=dict(sorted(gpus.items())),
        hosts=sorted(hosts),
        since=None,
        path=path,
        status=status,
    )


def split_path(path: str) -> tuple[str, str, str] | None:
    """(kind, namespace, name) of a shown status file path; None for other files."""
    parts = path.split("/")
    if len(parts) != 3 or parts[1] not in SHOWN_KINDS or not parts[2].endswith(".yaml"):
        return None
    return SHOWN_KINDS[parts[1]], parts[0], parts[2].removesuffix(".yaml")


def row_of(path: str, data: bytes) -> ResourceRow | None:
    """The table row of one status file; None for files the table does not show or cannot read."""
    parts = path.split("/")
    if split_path(path) is None:
        return None
    doc = load_yaml(data)
    status = doc.get("status") if isinstance(doc, Mapping) else None
    status = status if isinstance(status, Mapping) else {}
    if parts[1] == "computes":
        return _compute_row(parts[0], parts[2].removesuffix(".yaml"), path, status)
    ready = _ready(status)
    cluster = status.get("cluster")
    cluster_name = cluster.get("name") if isinstance(cluster, Mapping) else None
    if cluster_name is None and status.get("pool"):
        cluster_name = f"{parts[0]}-{status['pool']}"
    return ResourceRow(
        kind=SHOWN_KINDS[parts[1]],
        namespace=parts[0],
        name=parts[2].removesuffix(".yaml"),
        phase=_str(status.get("phase")),
        reason=_str(ready.get("reason")),
        message=_str(ready.get("message")),
        cluster=_str(cluster_name),
        gpus=_gpus(status),
        hosts=_hosts(status),
        since=_str(ready.get("lastTransitionTime")),
        path=path,
        status=status,
    )


def host_names(files: Mapping[str, bytes]) -> dict[str, str]:
    """Host names by uid from the tree's ``inventory/*.json`` snapshots (the first snapshot by path that
    names a host wins); unreadable snapshots are skipped: a name is a courtesy, never a fact to plan on."""
    names: dict[str, str] = {}
    for path, data in sorted(files.items()):
        if not (path.startswith("inventory/") and path.endswith(".json")):
            continue
        try:
            doc = json.loads(data)
        except ValueError:
            continue
        hosts = doc.get("edgeHosts") if isinstance(doc, Mapping) else None
        for host in hosts if isinstance(hosts, list) else []:
            metadata = host.get("metadata") if isinstance(host, Mapping) else None
            if isinstance(metadata, Mapping) and metadata.get("uid") and metadata.get("name"):
                names.setdefault(str(metadata["uid"]), str(metadata["name"]))
    return names


def host_label(uid: str, names: Mapping[str, str]) -> str:
    """How a person reads a host: ``gpu-a100-01 (edge-9baf...)``; the uid alone when no name is known."""
    name = names.get(uid)
    return f"{name} ({uid})" if name and name != uid else uid


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def rows(files: Mapping[str, bytes]) -> list[ResourceRow]:
    """Every shown resource, sorted by namespace, name, kind."""
    found = [row for path, data in files.items() if (row := row_of(path, data)) is not None]
    return sorted(found, key=lambda r: (r.namespace, r.name, r.kind))


def recorded_revision(files: Mapping[str, bytes]) -> str | None:
    """The config revision of the last pass that committed (``reconciler.yaml``), if recorded."""
    doc = load_yaml(files["reconciler.yaml"]) if "reconciler.yaml" in files else None
    if isinstance(doc, Mapping) and doc.get("revision"):
        return str(doc["revision"])
    return None


def table(found: list[ResourceRow]) -> str:
    """A plain table for terminals and CI logs: one line per resource, nothing folded."""
    header = ("KIND", "RESOURCE", "PHASE", "REASON", "CLUSTER", "GPUS", "HOSTS", "SINCE")
    lines = [header]
    for row in found:
        gpus = ",".join(f"{family}={count}" for family, count in row.gpus.items()) or "-"
        lines.append(
            (
                row.kind,
                row.key,
                row.phase or "-",
                row.reason or "-",
                row.cluster or "-",
                gpus,
                str(len(row.hosts)),
                row.since or "-",
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in lines
    )


# Health of a resource by its phase, for the page's colours and the "needs attention" list: one place.
HEALTH_OF_PHASE: dict[str, str] = {
    "Running": "ok",
    "Provisioning": "progress",
    "Pending": "progress",
    "Deleting": "progress",
    "Degraded": "problem",
    "Failed": "problem",
    "Rejected": "problem",
    "Invalid": "problem",
}
_UNREACHABLE = {"PaletteUnavailable", "PaletteUnauthorized"}


def health(row: ResourceRow) -> str:
    """``ok`` (Running), ``progress`` (Provisioning, Pending, Deleting), ``problem`` (Degraded, Failed,
    Rejected, Invalid, or Palette unreachable), ``neutral`` (Suspended, a Compute, no phase)."""
    if row.reason in _UNREACHABLE:
        return "problem"
    return HEALTH_OF_PHASE.get(row.phase or "", "neutral")


def needs_attention(found: list[ResourceRow]) -> list[ResourceRow]:
    """Problems first, then what waits (Pending): each with its reason and message, in table order."""
    problems = [r for r in found if health(r) == "problem"]
    waiting = [r for r in found if health(r) != "problem" and r.phase == "Pending"]
    return problems + waiting
