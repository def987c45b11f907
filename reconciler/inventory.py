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

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache
from operator import attrgetter, eq, lt
from typing import Any, NamedTuple, TypeVar

from reconciler.edgehost import DEFAULT_ARCH, GpuDevice, HostFacts, Nic, read_host
from reconciler.host_tags import (
    GPU_FAMILY_TAG,
    GPUS_TAG,
    PALETTE_AI_TAG,
    Tags,
    family_from_model,
    parse_tags,
    shown,
)
from reconciler.model.catalogue import ProfileCatalogue
from reconciler.model.gpu import GpuFamily
from reconciler.model.quantity import parse_memory_bytes


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
        return not groups or all(self.resource_groups.get(k) == v for k, v in groups.items())


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
    # Palette's cluster profile catalogue as observed (an inventory snapshot's clusterProfiles, or
    # Palette's answers for the bundles' uids); None when the observation has none.
    catalogue: ProfileCatalogue | None = None

    def by_uid(self) -> dict[str, Machine]:
        return {m.uid: m for m in self.machines}


# --- agent data -------------------------------------------------------------------------------------


@lru_cache(maxsize=1024)
def _agent_memory(text: str) -> int | None:
    """GPU memory as the agent reports it ("80 GB"); free-form, so an odd string counts as not reported."""
    try:
        size = parse_memory_bytes(text)
    except (ValueError, OverflowError):
        return None
    return size if size > 0 else None


class _Gpus(NamedTuple):
    family: GpuFamily | None = None
    number: int = 0
    memory: int | None = None
    notes: tuple[str, ...] = ()
    problem: str | None = None


_NO_GPUS = _Gpus()


def _agent_gpus(devices: tuple[GpuDevice, ...], tags: Tags) -> _Gpus:
    """GPUs from ``spec.device.gpus``, with the tags filling in what the agent leaves out."""
    if not devices:
        if not tags.gpus and tags.gpu_family is None:
            return _NO_GPUS  # the common CPU host: nothing to look at
    elif len(devices) == 1 and devices[0].count > 0:  # the common GPU host: one entry, a known model
        device = devices[0]
        family = family_from_model(device.vendor, device.model)
        if family is not None:
            memory = _agent_memory(device.memory) if device.memory is not None else None
            return _Gpus(family, device.count, tags.gpu_memory if memory is None else memory)
    counts: dict[GpuFamily, int] = {}
    memories: dict[GpuFamily, int] = {}
    unnamed = 0
    unnamed_memory: int | None = None
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
    notes: list[str] = []
    if unnamed:
        if tags.gpu_family is not None:
            family = tags.gpu_family
            counts[family] = counts.get(family, 0) + unnamed
            if unnamed_memory is not None:
                memories[family] = min(memories.get(family, unnamed_memory), unnamed_memory)
        elif not counts:
            problem = (
                f"the agent reports {unnamed} GPU(s) without a model and there is no {GPU_FAMILY_TAG} tag"
            )
            return _Gpus(problem=problem)
        else:
            notes.append(f"{unnamed} GPU(s) without a model ignored (no {GPU_FAMILY_TAG} tag)")
    if counts:
        family = min(counts, key=lambda f: (-counts[f], f))
        if len(counts) > 1:
            mix = ", ".join(f"{f} x{counts[f]}" for f in sorted(counts))
            notes.append(f"mixed GPU families ({mix}): placed as {family}")
        return _Gpus(family, counts[family], memories.get(family, tags.gpu_memory), tuple(notes))
    return _tagged_gpus(tags)


def _tagged_gpus(tags: Tags) -> _Gpus:
    """The agent reports no GPUs: the tags say how many and which."""
    if tags.gpus:
        if tags.gpu_family is None:
            problem = f"tag {GPUS_TAG}: {tags.gpus} needs a {GPU_FAMILY_TAG} tag (the agent reports no GPUs)"
            return _Gpus(problem=problem)
        return _Gpus(tags.gpu_family, tags.gpus, tags.gpu_memory)
    if tags.gpu_family is not None and tags.gpus is None:
        return _Gpus(
            problem=f"tag {GPU_FAMILY_TAG}: {tags.gpu_family} without a GPU count "
            f"(the agent reports no GPUs and there is no {GPUS_TAG} tag)"
        )
    return _NO_GPUS


_AVAILABLE, _IN_USE = (HostState.AVAILABLE, ""), (HostState.IN_USE, "")


def _host_state(facts: HostFacts) -> tuple[HostState, str]:
    """Availability, and for an unavailable host why (shown by ``inventory show``)."""
    if facts.health != "healthy":
        return HostState.UNAVAILABLE, f"health is {facts.health or 'not reported'}"
    if facts.state == "in-use" or (facts.cluster_uid is not None and facts.state == "ready"):
        return _IN_USE
    if facts.state == "ready":
        return _AVAILABLE
    return HostState.UNAVAILABLE, f"state is {facts.state or 'not reported'} (not ready)"


def classify(facts: HostFacts) -> Machine | ExcludedHost | None:
    """Discovery's rules on one host's facts: a machine, an excluded host, or None when not PaletteAI's.

    A host whose answer is unreadable (:attr:`HostFacts.unreadable`) is excluded and says why, even when
    its labels are what cannot be read (then nobody can say it is not PaletteAI's): it is never placed,
    and never read as free or as having fewer GPUs than it has.
    """
    mark = facts.tags.get(PALETTE_AI_TAG)
    ours = mark == "true" or (mark is not None and mark.strip().lower() == "true")
    if facts.unreadable and (ours or any(path == "metadata.labels" for path, _ in facts.unreadable)):
        reason = "Palette's answer for this host is unreadable: " + "; ".join(facts.problems)
        return ExcludedHost(uid=facts.uid, name=facts.name, reason=reason, cluster_uid=facts.cluster_uid)
    if not ours:
        return None
    uid = facts.uid
    tags = parse_tags(facts.tags)
    problems = [*tags.problems] if uid else ["the edge host has no metadata.uid", *tags.problems]
    if facts.arch is None:
        problems.append(f"the agent reports an unknown architecture {shown(str(facts.raw_arch))}")
    gpus = _agent_gpus(facts.gpus, tags)
    if gpus.problem is not None:
        problems.append(gpus.problem)
    if problems:
        return ExcludedHost(
            uid=uid, name=facts.name, reason="; ".join(problems), cluster_uid=facts.cluster_uid
        )
    count = gpus.number
    state, why = _host_state(facts)
    return _machine(
        uid,
        facts.name,
        facts.arch or DEFAULT_ARCH,
        facts.cpu_cores or tags.cpus or 0,
        gpus.family if count > 0 else None,
        count,
        gpus.memory if count > 0 else None,
        _role(tags.worker, tags.control_plane, count),
        tags.worker,
        tags.resource_groups,
        state,
        facts.cluster_uid,
        gpus.notes,
        why,
        facts.project_uid,
        # ``addresses`` and ``primary_nic``, told at once for a host without NICs (most hosts)
        facts.addresses if facts.nics or not facts.host_address else (facts.host_address,),
        facts.gpus,
        facts.primary_nic if facts.nics else None,
    )


# ``Machine(...)`` sets each of its 18 fields through ``object.__setattr__`` (it is frozen): about a
# quarter of discovery's time per host. Discovery builds it through the slots' own descriptors
# instead: the same object (tests/test_inventory_discover.py checks it field by field), a third of the cost.
def _slot(name: str) -> Callable[[Machine, Any], None]:
    setter: Callable[[Machine, Any], None] = Machine.__dict__[name].__set__
    return setter


_new_object = object.__new__
_S_UID, _S_NAME, _S_ARCH, _S_CPUS = _slot("uid"), _slot("name"), _slot("arch"), _slot("cpus")
_S_FAMILY, _S_COUNT, _S_MEMORY = _slot("gpu_family"), _slot("gpu_count"), _slot("gpu_memory_bytes")
_S_ROLE, _S_WORKER_TAGGED, _S_GROUPS = _slot("role"), _slot("worker_tagged"), _slot("resource_groups")
_S_STATE, _S_CLUSTER, _S_NOTES = _slot("state"), _slot("cluster_uid"), _slot("notes")
_S_WHY, _S_PROJECT, _S_ADDRESSES = _slot("unavailable_reason"), _slot("project_uid"), _slot("addresses")
_S_DEVICES, _S_NIC = _slot("gpu_devices"), _slot("nic")


def _machine(
    uid: str,
    name: str,
    arch: str,
    cpus: int,
    gpu_family: GpuFamily | None,
    gpu_count: int,
    gpu_memory_bytes: int | None,
    role: Role,
    worker_tagged: bool,
    resource_groups: Mapping[str, str],
    state: HostState,
    cluster_uid: str | None,
    notes: tuple[str, ...],
    unavailable_reason: str,
    project_uid: str | None,
    addresses: tuple[str, ...],
    gpu_devices: tuple[GpuDevice, ...],
    nic: Nic | None,
) -> Machine:
    """``Machine(...)`` with every field given, in field order, at a third of the cost."""
    machine: Machine = _new_object(Machine)
    _S_UID(machine, uid)
    _S_NAME(machine, name)
    _S_ARCH(machine, arch)
    _S_CPUS(machine, cpus)
    _S_FAMILY(machine, gpu_family)
    _S_COUNT(machine, gpu_count)
    _S_MEMORY(machine, gpu_memory_bytes)
    _S_ROLE(machine, role)
    _S_WORKER_TAGGED(machine, worker_tagged)
    _S_GROUPS(machine, resource_groups)
    _S_STATE(machine, state)
    _S_CLUSTER(machine, cluster_uid)
    _S_NOTES(machine, notes)
    _S_WHY(machine, unavailable_reason)
    _S_PROJECT(machine, project_uid)
    _S_ADDRESSES(machine, addresses)
    _S_DEVICES(machine, gpu_devices)
    _S_NIC(machine, nic)
    return machine


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
    tags = parse_tags(facts.tags)
    gpus = sum(d.count for d in facts.gpus) or tags.gpus or 0
    return _role(tags.worker, tags.control_plane, gpus)


# What discovery made of one host: a machine, an excluded host, or None (not PaletteAI's).
Classified = Machine | ExcludedHost | None
# A caller's memo of :func:`discover` between calls: uid -> (the facts classified, what they gave).
DiscoveryMemo = dict[str, tuple[HostFacts, Classified]]


def discover(
    edge_hosts: Iterable[Mapping[str, Any] | HostFacts], memo: DiscoveryMemo | None = None
) -> Inventory:
    """Turn raw ``POST /v1/dashboard/edgehosts/search`` items (or the facts already read from them)
    into machines and excluded hosts.

    Never raises on odd data: what cannot be understood about a PaletteAI host excludes it with a reason.
    A uid seen twice (a page boundary shifting under a concurrent change) counts once, first one wins.
    Machines and excluded hosts are sorted by name, then uid, so the same hosts always give the same result.

    ``memo`` (kept by the caller between calls, e.g. one per Palette target): a host given as the very
    facts object classified last time (the host lister keeps an unchanged host's) is not classified
    again; afterwards the memo holds this call's hosts only. The result is the same with or without it.
    """
    machines: dict[str, Machine] = {}
    excluded: dict[str, ExcludedHost] = {}
    fresh: DiscoveryMemo = {}
    for item in edge_hosts:
        facts = item if type(item) is HostFacts else read_host(item)
        if facts is None:
            continue
        if memo is None:
            host = classify(facts)
        else:
            last = memo.get(facts.uid)
            host = last[1] if last is not None and last[0] is facts else classify(facts)
            fresh.setdefault(facts.uid, (facts, host))
        if host is None:
            continue
        uid = host.uid
        if uid in machines or (uid and uid in excluded):
            continue
        if type(host) is Machine:
            machines[uid] = host
        else:
            excluded[uid or f"\0{len(excluded)}"] = host  # type: ignore[assignment]
    if memo is not None:
        memo.clear()
        memo.update(fresh)
    return Inventory(machines=tuple(by_name(machines.values())), excluded=tuple(by_name(excluded.values())))


# --- host order ------------------------------------------------------------------------------------

_Host = TypeVar("_Host", Machine, ExcludedHost)
_name = attrgetter("name")
NAME_UID = attrgetter("name", "uid")  # the order of hosts everywhere: name, then uid


def by_name(hosts: Iterable[_Host]) -> list[_Host]:
    """``hosts`` sorted by name, then uid. A fleet's names are distinct: then sorting by name alone gives
    that order, at a third of the cost of comparing (name, uid) pairs; a name seen twice sorts the pairs."""
    out = sorted(hosts, key=_name)
    names = list(map(_name, out))
    if any(map(eq, names, names[1:])):  # equal names are next to each other once sorted by name
        out.sort(key=NAME_UID)
    return out


def names_ascending(hosts: Sequence[Machine | ExcludedHost]) -> bool:
    """Whether every host's name comes strictly after the previous one's: then ``hosts`` are in
    :data:`NAME_UID` order, no (name, uid) twice (what discovery returns, told without sorting)."""
    names = list(map(_name, hosts))
    return all(map(lt, names, names[1:]))
