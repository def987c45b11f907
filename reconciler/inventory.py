"""Palette edge hosts -> machines with roles, capacity and resource groups (pure).

The types below are the contract between discovery and allocation. ``discover`` implements every
discovery rule of DESIGN.md section 4 and the seed's device-tag table.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from reconciler.model.gpu import GpuFamily


class Role(StrEnum):
    WORKER = "worker"
    CONTROL_PLANE = "control-plane"


class HostState(StrEnum):
    AVAILABLE = "available"  # healthy and ready: can be placed
    IN_USE = "in-use"  # belongs to the cluster in ``cluster_uid``
    UNAVAILABLE = "unavailable"  # unhealthy, unpaired, or otherwise not ready: never placed


@dataclass(frozen=True, slots=True)
class Machine:
    uid: str
    name: str
    arch: str  # "amd64" | "arm64"
    cpus: int
    gpu_family: GpuFamily | None  # canonical form; None when the host has no GPUs
    gpu_count: int
    gpu_memory_bytes: int | None
    role: Role
    worker_tagged: bool  # carries palette.ai/worker: true
    resource_groups: Mapping[str, str] = field(default_factory=dict)
    state: HostState = HostState.AVAILABLE
    cluster_uid: str | None = None

    @property
    def available(self) -> bool:
        return self.state is HostState.AVAILABLE

    def in_groups(self, groups: Mapping[str, str]) -> bool:
        """True when the machine carries every ``palette.ai.rg/<group>: <value>`` of ``groups``."""
        return all(self.resource_groups.get(k) == v for k, v in groups.items())


@dataclass(frozen=True, slots=True)
class ExcludedHost:
    """A host carrying ``palette.ai: "true"`` that cannot be used, and why (shown in Compute status)."""

    uid: str
    name: str
    reason: str


@dataclass(frozen=True, slots=True)
class Inventory:
    machines: tuple[Machine, ...] = ()
    excluded: tuple[ExcludedHost, ...] = ()

    def by_uid(self) -> dict[str, Machine]:
        return {m.uid: m for m in self.machines}


def discover(edge_hosts: Iterable[Mapping[str, Any]]) -> Inventory:
    """Turn raw edge-host search items into machines. Not implemented yet."""
    raise NotImplementedError
