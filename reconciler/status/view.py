"""What ``reconciler status`` shows, computed from status files (pure: bytes in, rows out).

DESIGN.md section 8: one row per platform, pool and workload (kind, namespace, name, phase, reason,
message, cluster, GPUs, hosts, since), and a resource's history from the status branch's commits.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# Status file directories (DESIGN.md section 6) of the kinds the table shows, in table order.
SHOWN_KINDS: dict[str, str] = {
    "mlplatforms": "MLPlatform",
    "computepools": "ComputePool",
    "aiworkloads": "AIWorkload",
}


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
    replicas: list[str] = field(default_factory=list)  # a workload's: where each replica is (text view)

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


def _replica(item: Mapping[str, Any]) -> int:
    replica = item.get("replica")
    return replica if isinstance(replica, int) else 0


def _replicas(status: Mapping[str, Any]) -> list[str]:
    """A workload's replicas, one line each: its host and whole GPU indices, and its MIG instances."""
    allocation = status.get("allocation")
    if not isinstance(allocation, Mapping):
        return []
    per: dict[int, dict[str, list[str]]] = {}
    for item in allocation.get("bound") or []:
        if isinstance(item, Mapping) and item.get("host") is not None:
            host = str(item.get("hostName") or item["host"])
            per.setdefault(_replica(item), {}).setdefault(host, []).append(f"GPU {item.get('gpu')}")
    for item in allocation.get("mig") or []:
        if isinstance(item, Mapping) and item.get("host") is not None:
            what = f"{item.get('profile')} on GPU {item.get('gpu')} at {item.get('start')}"
            per.setdefault(_replica(item), {}).setdefault(str(item["host"]), []).append(what)
    return [
        f"replica {r}: " + "; ".join(f"{host}: {', '.join(parts)}" for host, parts in sorted(hosts.items()))
        for r, hosts in sorted(per.items())
    ]


def _gpus(status: Mapping[str, Any]) -> dict[str, int]:
    allocation = status.get("allocation")
    gpus = allocation.get("gpus") if isinstance(allocation, Mapping) else status.get("gpus")
    if not isinstance(gpus, Mapping):
        return {}
    return {str(k): int(v) for k, v in sorted(gpus.items()) if isinstance(v, int)}


def row_of(path: str, data: bytes) -> ResourceRow | None:
    """The table row of one status file; None for files the table does not show or cannot read."""
    parts = path.split("/")
    if len(parts) != 3 or parts[1] not in SHOWN_KINDS or not parts[2].endswith(".yaml"):
        return None
    doc = load_yaml(data)
    status = doc.get("status") if isinstance(doc, Mapping) else None
    status = status if isinstance(status, Mapping) else {}
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
        replicas=_replicas(status) if status.get("pool") else [],
    )


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
