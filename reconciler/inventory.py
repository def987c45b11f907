"""Palette edge hosts -> machines with roles, capacity and resource groups (pure).

The types below are the contract between discovery and allocation. ``discover`` implements every
discovery rule of DESIGN.md section 4 and the seed's device-tag table:

- Only hosts tagged ``palette.ai: "true"`` (case-insensitive) are considered; any other host is neither a
  machine nor excluded, it is simply not PaletteAI's.
- State: healthy and ``ready`` -> AVAILABLE; in a cluster (``in-use`` or ``inUseClustersRef``) and healthy
  -> IN_USE; anything else (unhealthy, unpaired, unknown) -> UNAVAILABLE, never placed. ``cluster_uid``
  is set whenever Palette names the host's cluster, healthy or not, so a cluster's hosts stay known.
- Hardware comes from the agent (``spec.device``); per attribute, when the agent reports nothing, the
  tags ``cpus``, ``gpus``, ``gpu-memory`` and ``gpu-family`` are used instead. Agent data wins over tags.
- Every recognised tag is validated even when the agent's value wins: a tag that does not parse excludes
  the host with a reason naming the tag and its value (a mistyped tag is surfaced, not silently ignored).
- GPU families: agent models map through ``GPU_MODEL_FAMILIES`` (token -> family); unknown models fall back
  to ``<vendor> <model>`` cleaned; everything goes through ``canonical_family``. GPU entries of one family
  add up. A host with GPUs of several families is placed as the family with most GPUs (ties: the
  alphabetically first family) and says so in ``Machine.notes``: a cluster is requested per family, and
  the minority GPUs cannot be requested separately on the same host anyway.
- Roles are exclusive: ``palette.ai/worker: true`` -> worker (even with ``palette.ai/control-plane:
  true``); else ``palette.ai/control-plane: true`` -> control plane; else GPUs -> worker, none -> control
  plane.
- Resource groups: each tag ``palette.ai.rg/<group>: <value>``; the group may contain ``/``.

Discovery is a plain-dict pass (no pydantic per host) so that 10,000 hosts take a few tens of milliseconds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache
from typing import Any

from reconciler.model.gpu import GpuFamily, canonical_family
from reconciler.model.quantity import parse_memory_bytes

PALETTE_AI_TAG = "palette.ai"
WORKER_TAG = "palette.ai/worker"
CONTROL_PLANE_TAG = "palette.ai/control-plane"
RESOURCE_GROUP_PREFIX = "palette.ai.rg/"
CPUS_TAG = "cpus"
GPUS_TAG = "gpus"
GPU_MEMORY_TAG = "gpu-memory"
GPU_FAMILY_TAG = "gpu-family"
BARE_TAG_VALUE = "spectro__tag"  # Palette's label value for a tag without a value


class Role(StrEnum):
    WORKER = "worker"
    CONTROL_PLANE = "control-plane"


class HostState(StrEnum):
    AVAILABLE = "available"  # healthy and ready: can be placed
    IN_USE = "in-use"  # belongs to the cluster in ``cluster_uid``
    UNAVAILABLE = "unavailable"  # unhealthy, unpaired, or otherwise not ready: never placed


@dataclass(frozen=True, slots=True)
class Nic:
    """The network interface Palette reaches a host on, as its agent reports it (``v1Nic``)."""

    name: str | None
    ip: str
    subnet: str | None = None
    gateway: str | None = None
    dns: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Machine:
    uid: str
    name: str
    arch: str  # "amd64" | "arm64"
    cpus: int  # 0 when neither the agent nor a ``cpus`` tag says
    gpu_family: GpuFamily | None  # canonical form; None when the host has no GPUs
    gpu_count: int
    gpu_memory_bytes: int | None  # per GPU
    role: Role
    worker_tagged: bool  # carries palette.ai/worker: true
    resource_groups: Mapping[str, str] = field(default_factory=dict)
    state: HostState = HostState.AVAILABLE
    cluster_uid: str | None = None  # set whenever Palette names the host's cluster, whatever the state
    notes: tuple[str, ...] = ()  # decisions discovery took about this host (e.g. mixed GPU families)
    nic: Nic | None = None  # its address (agent's spec.device.nics), for static-IP clusters

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
    cluster_uid: str | None = None  # an excluded host may still belong to a cluster


@dataclass(frozen=True, slots=True)
class Inventory:
    machines: tuple[Machine, ...] = ()
    excluded: tuple[ExcludedHost, ...] = ()

    def by_uid(self) -> dict[str, Machine]:
        return {m.uid: m for m in self.machines}


# --- GPU family names -------------------------------------------------------------------------------

# Model tokens as agents and nvidia-smi/rocm-smi spell them ("GH100 [H100 PCIe]", "NVIDIA A100-SXM4-80GB",
# "TU104GL [Tesla T4]", "Aqua Vanjaram [Instinct MI300X]") -> canonical family. A model string is split
# into upper-case alphanumeric tokens; the bracketed marketing name is tried first, then the whole string,
# and the first token found here wins. Tokens match whole, so L40S never reads as L40 nor GB200 as B200.
GPU_MODEL_FAMILIES: Mapping[str, GpuFamily] = {
    token: canonical_family(family)
    for token, family in {
        # NVIDIA data-centre
        "B100": "NVIDIA-B100",
        "B200": "NVIDIA-B200",
        "B300": "NVIDIA-B300",
        "GB200": "NVIDIA-GB200",
        "GB300": "NVIDIA-GB300",
        "H100": "NVIDIA-H100",
        "H200": "NVIDIA-H200",
        "H800": "NVIDIA-H800",
        "GH200": "NVIDIA-GH200",
        "A100": "NVIDIA-A100",
        "A800": "NVIDIA-A800",
        "A40": "NVIDIA-A40",
        "A30": "NVIDIA-A30",
        "A16": "NVIDIA-A16",
        "A10": "NVIDIA-A10",
        "A10G": "NVIDIA-A10G",
        "A2": "NVIDIA-A2",
        "L40S": "NVIDIA-L40S",
        "L40": "NVIDIA-L40",
        "L20": "NVIDIA-L20",
        "L4": "NVIDIA-L4",
        "T4": "NVIDIA-T4",
        "V100": "NVIDIA-V100",
        "V100S": "NVIDIA-V100S",
        "P100": "NVIDIA-P100",
        "P40": "NVIDIA-P40",
        # AMD Instinct
        "MI325X": "AMD-MI325X",
        "MI300X": "AMD-MI300X",
        "MI300A": "AMD-MI300A",
        "MI250X": "AMD-MI250X",
        "MI250": "AMD-MI250",
        "MI210": "AMD-MI210",
        "MI100": "AMD-MI100",
    }.items()
}
_KNOWN_FAMILIES = frozenset(GPU_MODEL_FAMILIES.values())

# Vendor strings as agents report them (names or PCI vendor ids) -> the prefix used in fallback names.
_VENDOR_PREFIXES = (
    ("NVIDIA", "NVIDIA"),
    ("10DE", "NVIDIA"),
    ("ADVANCED MICRO", "AMD"),
    ("AMD", "AMD"),
    ("1002", "AMD"),
    ("INTEL", "INTEL"),
    ("8086", "INTEL"),
)
_TOKEN_SPLIT = re.compile(r"[^A-Z0-9]+")
_BRACKETED = re.compile(r"\[([^\]]*)\]")
_NOT_NAME = re.compile(r"[^A-Za-z0-9.+]+")


def _vendor_prefix(vendor: str) -> str:
    upper = vendor.upper()
    for needle, prefix in _VENDOR_PREFIXES:
        if needle in upper:
            return prefix
    return _NOT_NAME.sub(" ", vendor).strip()


def _lookup_tokens(text: str) -> GpuFamily | None:
    for token in _TOKEN_SPLIT.split(text.upper()):
        family = GPU_MODEL_FAMILIES.get(token)
        if family is not None:
            return family
    return None


@lru_cache(maxsize=4096)
def family_from_model(vendor: str, model: str) -> GpuFamily | None:
    """Canonical family of an agent-reported GPU; None when the agent names no model at all."""
    bracketed = _BRACKETED.findall(model)
    for text in (*bracketed, model):
        family = _lookup_tokens(text)
        if family is not None:
            return family
    # Fallback: "<vendor> <model>", preferring the marketing name in brackets over the chip name.
    name = (bracketed[-1] if bracketed and bracketed[-1].strip() else model).strip()
    if not name:
        return None
    prefix = _vendor_prefix(vendor)
    cleaned = _NOT_NAME.sub(" ", name).strip().lstrip(".+")
    if prefix and not cleaned.upper().startswith(prefix.upper()):
        cleaned = f"{prefix} {cleaned}"
    try:
        return canonical_family(cleaned)
    except ValueError:
        return None


@lru_cache(maxsize=1024)
def family_from_tag(value: str) -> GpuFamily:
    """Canonical family of a ``gpu-family`` tag; a bare model ("h100") gets its vendor from the table.

    Raises ValueError when the value is not a family name (the caller turns that into an exclusion).
    """
    family = canonical_family(value)
    if family in _KNOWN_FAMILIES:
        return family
    return GPU_MODEL_FAMILIES.get(family, family)


def display_family(family: str) -> str:
    """The spelling of the seed's Compute status ("NVIDIA H100") for a canonical family."""
    return family.replace("-", " ")


# --- tag parsing ------------------------------------------------------------------------------------


class _TagError(ValueError):
    """A tag value that does not parse; the message names the tag and its value."""


def _shown(value: str) -> str:
    return repr(value if len(value) <= 64 else value[:61] + "...")


def _label_text(value: Any) -> str:
    """Labels are strings in Palette; hand-written YAML snapshots may hold booleans or numbers."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    return str(value)


def _parse_bool_tag(tag: str, value: str) -> bool:
    folded = value.strip().lower()
    if folded == "true":
        return True
    if folded == "false":
        return False
    raise _TagError(f"tag {tag}: {_shown(value)} is not a boolean (expected true or false)")


def _parse_count_tag(tag: str, value: str, minimum: int) -> int:
    text = value.strip()
    if not (text.isascii() and text.isdigit()) or len(text) > 9 or int(text) < minimum:
        raise _TagError(f"tag {tag}: {_shown(value)} is not a whole number of at least {minimum}")
    return int(text)


@lru_cache(maxsize=1024)
def _parse_memory_tag(value: str) -> int:
    try:
        size = parse_memory_bytes(value)
    except (ValueError, OverflowError) as exc:
        raise _TagError(
            f"tag {GPU_MEMORY_TAG}: {_shown(value)} does not parse (units M, MB, MiB, G, GB, GiB)"
        ) from exc
    if size <= 0:
        raise _TagError(f"tag {GPU_MEMORY_TAG}: {_shown(value)} is not a positive memory size")
    return size


def _parse_family_tag(value: str) -> GpuFamily:
    try:
        return family_from_tag(value)
    except ValueError as exc:
        raise _TagError(f"tag {GPU_FAMILY_TAG}: {_shown(value)} is not a GPU family name") from exc


@dataclass(slots=True)
class _Tags:
    """The PaletteAI tags of one host, parsed; ``problems`` lists the ones that did not parse."""

    worker: bool = False
    control_plane: bool = False
    cpus: int | None = None
    gpus: int | None = None
    gpu_memory: int | None = None
    gpu_family: GpuFamily | None = None
    resource_groups: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


_HARDWARE_AND_ROLE_TAGS = frozenset(
    {WORKER_TAG, CONTROL_PLANE_TAG, CPUS_TAG, GPUS_TAG, GPU_MEMORY_TAG, GPU_FAMILY_TAG}
)


def _add_resource_group(tags: _Tags, key: str, value: str) -> None:
    group = key[len(RESOURCE_GROUP_PREFIX) :]
    if not group:
        tags.problems.append(f"tag {key}: resource group tag without a group name")
    elif not value or value == BARE_TAG_VALUE:
        tags.problems.append(f"tag {key}: resource group tag without a value")
    else:
        tags.resource_groups[group] = value


def _parse_tags(labels: Mapping[Any, Any]) -> _Tags:
    tags = _Tags()
    for raw_key, raw_value in labels.items():
        key = raw_key if type(raw_key) is str else str(raw_key)
        if key not in _HARDWARE_AND_ROLE_TAGS:
            if key.startswith(RESOURCE_GROUP_PREFIX):
                _add_resource_group(tags, key, _label_text(raw_value))
            continue
        value = _label_text(raw_value)
        try:
            if key == WORKER_TAG:
                tags.worker = _parse_bool_tag(key, value)
            elif key == CONTROL_PLANE_TAG:
                tags.control_plane = _parse_bool_tag(key, value)
            elif key == CPUS_TAG:
                tags.cpus = _parse_count_tag(key, value, 1)
            elif key == GPUS_TAG:
                tags.gpus = _parse_count_tag(key, value, 0)
            elif key == GPU_MEMORY_TAG:
                tags.gpu_memory = _parse_memory_tag(value)
            else:
                tags.gpu_family = _parse_family_tag(value)
        except _TagError as exc:
            tags.problems.append(str(exc))
    return tags


# --- agent data -------------------------------------------------------------------------------------

_EMPTY: Mapping[str, Any] = {}
_ARCHES = {"amd64": "amd64", "x86_64": "amd64", "arm64": "arm64", "aarch64": "arm64"}


def _mapping(value: Any) -> Mapping[str, Any]:
    # ``type(...) is dict`` first: the ABC check is slow and almost every value is a plain dict.
    return value if type(value) is dict or isinstance(value, Mapping) else _EMPTY


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _positive_int(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


@lru_cache(maxsize=1024)
def _agent_memory(text: str) -> int | None:
    """GPU memory as the agent reports it ("80 GB"); free-form, so an odd string counts as not reported."""
    try:
        size = parse_memory_bytes(text)
    except (ValueError, OverflowError):
        return None
    return size if size > 0 else None


@dataclass(slots=True)
class _Gpus:
    family: GpuFamily | None = None
    count: int = 0
    memory: int | None = None
    notes: list[str] = field(default_factory=list)
    problem: str | None = None


def _agent_gpus(device: Mapping[str, Any], tags: _Tags) -> _Gpus:
    """GPUs from ``spec.device.gpus``, with the tags filling in what the agent leaves out."""
    counts: dict[GpuFamily, int] = {}
    memories: dict[GpuFamily, int] = {}
    unnamed = 0
    unnamed_memory: int | None = None
    entries = device.get("gpus")
    if not entries and not tags.gpus and tags.gpu_family is None:
        return _Gpus()  # the common CPU host: nothing to look at
    for entry in entries if isinstance(entries, list) else ():
        if type(entry) is not dict and not isinstance(entry, Mapping):
            continue
        raw_count = entry.get("gpuCount")
        # A missing count means one entry per device (the schema allows either); 0 means none.
        count = 1 if raw_count is None else raw_count
        if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
            continue
        memory_text = entry.get("memory")
        memory = _agent_memory(memory_text) if isinstance(memory_text, str) else None
        family = family_from_model(_text(entry.get("vendor")), _text(entry.get("model")))
        if family is None:
            unnamed += count
            if memory is not None:
                unnamed_memory = memory if unnamed_memory is None else min(unnamed_memory, memory)
            continue
        counts[family] = counts.get(family, 0) + count
        if memory is not None:
            memories[family] = min(memories.get(family, memory), memory)
    result = _Gpus()
    if unnamed:
        if tags.gpu_family is not None:
            family = tags.gpu_family
            counts[family] = counts.get(family, 0) + unnamed
            if unnamed_memory is not None:
                memories[family] = min(memories.get(family, unnamed_memory), unnamed_memory)
        elif not counts:
            result.problem = (
                f"the agent reports {unnamed} GPU(s) without a model and there is no {GPU_FAMILY_TAG} tag"
            )
            return result
        else:
            result.notes.append(f"{unnamed} GPU(s) without a model ignored (no {GPU_FAMILY_TAG} tag)")
    if len(counts) == 1:
        ((family, count),) = counts.items()
        result.family, result.count = family, count
        result.memory = memories.get(family, tags.gpu_memory)
        return result
    if counts:
        family = min(counts, key=lambda f: (-counts[f], f))
        if len(counts) > 1:
            mix = ", ".join(f"{f} x{counts[f]}" for f in sorted(counts))
            result.notes.append(f"mixed GPU families ({mix}): placed as {family}")
        result.family, result.count = family, counts[family]
        result.memory = memories.get(family, tags.gpu_memory)
        return result
    # The agent reports no GPUs: the tags say how many and which.
    if tags.gpus:
        if tags.gpu_family is None:
            result.problem = (
                f"tag {GPUS_TAG}: {tags.gpus} needs a {GPU_FAMILY_TAG} tag (the agent reports no GPUs)"
            )
            return result
        result.family, result.count, result.memory = tags.gpu_family, tags.gpus, tags.gpu_memory
    elif tags.gpu_family is not None and tags.gpus is None:
        result.problem = (
            f"tag {GPU_FAMILY_TAG}: {tags.gpu_family} without a GPU count "
            f"(the agent reports no GPUs and there is no {GPUS_TAG} tag)"
        )
    return result


def _nic(spec: Mapping[str, Any]) -> Nic | None:
    """The agent's default interface with an address (else the one on ``spec.host.hostAddress``, else the
    first with an address); None when the agent reports no address."""
    reported = _mapping(spec.get("device")).get("nics")
    nics = [n for n in reported or () if isinstance(n, Mapping) and _text(n.get("ip"))]
    if not nics:
        return None
    address = _text(_mapping(spec.get("host")).get("hostAddress"))
    chosen = next((n for n in nics if n.get("isDefault") is True), None)
    chosen = chosen or next((n for n in nics if _text(n.get("ip")) == address), nics[0])
    dns = chosen.get("dns")
    return Nic(
        name=_text(chosen.get("nicName")) or None,
        ip=_text(chosen.get("ip")),
        subnet=_text(chosen.get("subnet")) or None,
        gateway=_text(chosen.get("gateway")) or None,
        dns=tuple(_text(d) for d in dns if _text(d)) if isinstance(dns, list) else (),
    )


def _cluster_uid(status: Mapping[str, Any]) -> str | None:
    for key in ("inUseClustersRef", "inUseClusters"):  # inUseClusters is Palette's deprecated spelling
        refs = status.get(key)
        if isinstance(refs, list):
            for ref in refs:
                if isinstance(ref, Mapping) and isinstance(ref.get("uid"), str) and ref["uid"]:
                    return str(ref["uid"])
    return None


def _host_state(status: Mapping[str, Any], cluster_uid: str | None) -> HostState:
    healthy = _text(_mapping(status.get("health")).get("state")).lower() == "healthy"
    state = _text(status.get("state")).lower()
    if not healthy:
        return HostState.UNAVAILABLE
    if state == "in-use" or (cluster_uid is not None and state == "ready"):
        return HostState.IN_USE
    if state == "ready":
        return HostState.AVAILABLE
    return HostState.UNAVAILABLE


def _discover_host(item: Any) -> Machine | ExcludedHost | None:
    """One search item -> a machine, an excluded host, or None when it is not PaletteAI's."""
    if type(item) is not dict and not isinstance(item, Mapping):
        return None
    metadata = _mapping(item.get("metadata"))
    labels = _mapping(metadata.get("labels"))
    if _label_text(labels.get(PALETTE_AI_TAG)).strip().lower() != "true":
        return None
    uid = _text(metadata.get("uid"))
    name = _text(metadata.get("name")) or uid
    status = _mapping(item.get("status"))
    cluster_uid = _cluster_uid(status)
    tags = _parse_tags(labels)
    problems = tags.problems
    if not uid:
        problems.insert(0, "the edge host has no metadata.uid")
    spec = _mapping(item.get("spec"))
    device = _mapping(spec.get("device"))
    raw_arch = device.get("archType")
    arch = _ARCHES.get(raw_arch.lower(), "") if isinstance(raw_arch, str) and raw_arch else "amd64"
    if not arch:
        problems.append(f"the agent reports an unknown architecture {_shown(str(raw_arch))}")
    cpus = _positive_int(_mapping(device.get("cpu")).get("cores")) or tags.cpus or 0
    gpus = _agent_gpus(device, tags)
    if gpus.problem is not None:
        problems.append(gpus.problem)
    if problems:
        return ExcludedHost(uid=uid, name=name, reason="; ".join(problems), cluster_uid=cluster_uid)
    if tags.worker:
        role = Role.WORKER
    elif tags.control_plane:
        role = Role.CONTROL_PLANE
    else:
        role = Role.WORKER if gpus.count > 0 else Role.CONTROL_PLANE
    return Machine(
        uid=uid,
        name=name,
        arch=arch,
        cpus=cpus,
        gpu_family=gpus.family if gpus.count > 0 else None,
        gpu_count=gpus.count,
        gpu_memory_bytes=gpus.memory if gpus.count > 0 else None,
        role=role,
        worker_tagged=tags.worker,
        resource_groups=tags.resource_groups,
        state=_host_state(status, cluster_uid),
        cluster_uid=cluster_uid,
        notes=tuple(gpus.notes),
        nic=_nic(spec),
    )


def discover(edge_hosts: Iterable[Mapping[str, Any]]) -> Inventory:
    """Turn raw ``POST /v1/dashboard/edgehosts/search`` items into machines and excluded hosts.

    Never raises on odd data: what cannot be understood about a PaletteAI host excludes it with a reason.
    A uid seen twice (a page boundary shifting under a concurrent change) counts once, first one wins.
    Machines and excluded hosts are sorted by name, then uid, so the same hosts always give the same result.
    """
    machines: dict[str, Machine] = {}
    excluded: dict[str, ExcludedHost] = {}
    for item in edge_hosts:
        host = _discover_host(item)
        if host is None or host.uid in machines or (host.uid and host.uid in excluded):
            continue
        if isinstance(host, Machine):
            machines[host.uid] = host
        else:
            excluded[host.uid or f"\0{len(excluded)}"] = host
    return Inventory(
        machines=tuple(sorted(machines.values(), key=lambda m: (m.name, m.uid))),
        excluded=tuple(sorted(excluded.values(), key=lambda h: (h.name, h.uid))),
    )
