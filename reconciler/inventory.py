"""Palette edge hosts -> machines with roles, capacity and resource groups (pure).

The types below are the contract between discovery and allocation. ``discover`` implements every
discovery rule of docs/allocation.md and the seed's device-tag table:

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

Palette's JSON is read by :mod:`reconciler.edgehost` (the one reader); this module applies the rules to
the facts it returns. No pydantic per host, so that 10,000 hosts take a few tens of milliseconds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache
from typing import Any

from reconciler.edgehost import DEFAULT_ARCH, GpuDevice, HostFacts, Nic, label_text, read_host
from reconciler.model.gpu import GPU_MODEL_FAMILIES, KNOWN_FAMILIES, GpuFamily, canonical_family
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
    unavailable_reason: str = ""  # why an UNAVAILABLE host is (health, state)
    project_uid: str | None = None  # spec.projectMeta.uid: the Palette project the host belongs to
    addresses: tuple[str, ...] = ()  # IP addresses (default NIC first, then hostAddress): for staticIp
    gpu_devices: tuple[GpuDevice, ...] = ()  # the agent's GPU entries as reported (MIG capability, ...)
    nic: Nic | None = None  # the interface Palette reaches it on, for static-IP clusters

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
    if family in KNOWN_FAMILIES:
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
                _add_resource_group(tags, key, label_text(raw_value))
            continue
        value = label_text(raw_value)
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


def _agent_gpus(devices: tuple[GpuDevice, ...], tags: _Tags) -> _Gpus:
    """GPUs from ``spec.device.gpus``, with the tags filling in what the agent leaves out."""
    counts: dict[GpuFamily, int] = {}
    memories: dict[GpuFamily, int] = {}
    unnamed = 0
    unnamed_memory: int | None = None
    if not devices and not tags.gpus and tags.gpu_family is None:
        return _Gpus()  # the common CPU host: nothing to look at
    for device in devices:
        if device.count <= 0:
            continue
        memory = _agent_memory(device.memory) if device.memory is not None else None
        family = family_from_model(device.vendor, device.model)
        if family is None:
            unnamed += device.count
            if memory is not None:
                unnamed_memory = memory if unnamed_memory is None else min(unnamed_memory, memory)
            continue
        counts[family] = counts.get(family, 0) + device.count
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


def _host_state(facts: HostFacts) -> tuple[HostState, str]:
    """Availability, and for an unavailable host why (shown by ``inventory show``)."""
    if facts.health != "healthy":
        return HostState.UNAVAILABLE, f"health is {facts.health or 'not reported'}"
    if facts.state == "in-use" or (facts.cluster_uid is not None and facts.state == "ready"):
        return HostState.IN_USE, ""
    if facts.state == "ready":
        return HostState.AVAILABLE, ""
    return HostState.UNAVAILABLE, f"state is {facts.state or 'not reported'} (not ready)"


def classify(facts: HostFacts) -> Machine | ExcludedHost | None:
    """Discovery's rules on one host's facts: a machine, an excluded host, or None when not PaletteAI's.

    A host whose answer is unreadable (:attr:`HostFacts.unreadable`) is excluded and says why, even when
    its labels are what cannot be read (then nobody can say it is not PaletteAI's): it is never placed,
    and never read as free or as having fewer GPUs than it has.
    """
    unreadable = facts.problems
    ours = facts.tags.get(PALETTE_AI_TAG, "").strip().lower() == "true"
    if unreadable and (ours or any(path == "metadata.labels" for path, _ in facts.unreadable)):
        reason = "Palette's answer for this host is unreadable: " + "; ".join(unreadable)
        return ExcludedHost(uid=facts.uid, name=facts.name, reason=reason, cluster_uid=facts.cluster_uid)
    if not ours:
        return None
    uid = facts.uid
    tags = _parse_tags(facts.tags)
    problems = tags.problems
    if not uid:
        problems.insert(0, "the edge host has no metadata.uid")
    if facts.arch is None:
        problems.append(f"the agent reports an unknown architecture {_shown(str(facts.raw_arch))}")
    cpus = facts.cpu_cores or tags.cpus or 0
    gpus = _agent_gpus(facts.gpus, tags)
    if gpus.problem is not None:
        problems.append(gpus.problem)
    if problems:
        return ExcludedHost(
            uid=uid, name=facts.name, reason="; ".join(problems), cluster_uid=facts.cluster_uid
        )
    role = _role(tags.worker, tags.control_plane, gpus.count)
    state, why = _host_state(facts)
    return Machine(
        uid=uid,
        name=facts.name,
        arch=facts.arch or DEFAULT_ARCH,
        cpus=cpus,
        gpu_family=gpus.family if gpus.count > 0 else None,
        gpu_count=gpus.count,
        gpu_memory_bytes=gpus.memory if gpus.count > 0 else None,
        role=role,
        worker_tagged=tags.worker,
        resource_groups=tags.resource_groups,
        state=state,
        cluster_uid=facts.cluster_uid,
        notes=tuple(gpus.notes),
        unavailable_reason=why,
        project_uid=facts.project_uid,
        addresses=facts.addresses,
        gpu_devices=facts.gpus,
        nic=facts.primary_nic,
    )


def _role(worker_tag: bool, control_plane_tag: bool, gpus: int) -> Role:
    """Roles are exclusive: worker tag > control-plane tag > GPUs make a worker, none a control plane."""
    if worker_tag:
        return Role.WORKER
    if control_plane_tag:
        return Role.CONTROL_PLANE
    return Role.WORKER if gpus > 0 else Role.CONTROL_PLANE


def role_of(facts: HostFacts) -> Role:
    """The role rule on a host discovery may have left out: tags that do not parse count as absent,
    the agent's GPUs else the ``gpus`` tag give the count."""
    tags = _parse_tags(facts.tags)
    gpus = sum(d.count for d in facts.gpus) or tags.gpus or 0
    return _role(tags.worker, tags.control_plane, gpus)


def _discover_host(item: Any) -> Machine | ExcludedHost | None:
    facts = read_host(item)
    return classify(facts) if facts is not None else None


def discover(edge_hosts: Iterable[Mapping[str, Any] | HostFacts]) -> Inventory:
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
