"""Palette's edge host JSON -> typed facts: the one reader of that JSON outside the emulator (pure).

An item of ``POST /v1/dashboard/edgehosts/search`` (``v1EdgeHostsMetadata``) or of an inventory snapshot
becomes a :class:`HostFacts`. Nothing here decides anything (roles, availability, families are
discovery's rules in :mod:`reconciler.inventory`); this module only says what Palette reported, with the
few spellings Palette allows folded into one: architecture names (``x86_64`` = ``amd64``, ``aarch64`` =
``arm64``; a missing ``archType`` is Palette's default ``amd64``), label values (strings in Palette, maybe
booleans or numbers in hand-written snapshots), ``inUseClustersRef`` (or the deprecated
``inUseClusters``). Odd data never raises, and is never believed: a field that a rule reads and that is
present but not what Palette's schema says (a ``gpuCount`` of ``null`` or ``"4"``, an ``inUseClustersRef``
that is a string, a host ``in-use`` that names no cluster) makes the host *unreadable*
(:attr:`HostFacts.unreadable`): discovery reports it and never places it, never reads it as "not in use"
or "fewer GPUs". A field that is absent (or ``null`` where Go's encoder writes an empty list as ``null``)
reads as absent, as the schema allows.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

DEFAULT_ARCH = "amd64"  # v1DeviceSpec.archType's default
_ARCHES = {"amd64": "amd64", "x86_64": "amd64", "x86-64": "amd64", "arm64": "arm64", "aarch64": "arm64"}


def canonical_arch(text: str) -> str | None:
    """``amd64`` or ``arm64`` for any spelling Palette or an agent uses; None for anything else."""
    return _ARCHES.get(text.strip().lower())


@dataclass(frozen=True, slots=True)
class GpuDevice:
    """One ``spec.device.gpus[]`` entry (Palette's ``v1GPUDeviceSpec``).

    ``count`` is ``gpuCount``; an entry without one stands for one device (the schema allows either).
    ``memory`` is the agent's free-form text ("80 GB"); parsing it is discovery's business.
    """

    vendor: str
    model: str
    count: int
    memory: str | None = None
    mig_capable: bool = False
    mig_strategy: str | None = None


class Nic(NamedTuple):
    """A network interface with an address, as the agent reports it (``v1Nic``)."""

    name: str
    ip: str
    subnet: str | None = None
    gateway: str | None = None
    is_default: bool = False
    dns: tuple[str, ...] = ()


@dataclass(slots=True)
class HostFacts:
    """What Palette says about one edge host, typed. ``arch`` is canonical, or None when the agent
    reports an architecture nobody knows (``raw_arch`` keeps its text for the message).

    Read-only by convention; not frozen because a frozen dataclass costs a third of the time of reading
    10,000 hosts (its fields are only ever set here). Devices and NICs are immutable tuples.
    """

    uid: str
    name: str
    arch: str | None
    raw_arch: str | None
    cpu_cores: int | None
    gpus: tuple[GpuDevice, ...]
    tags: Mapping[str, str]
    project_uid: str | None
    health: str  # lower case: "healthy", "unhealthy", "" when not reported
    state: str  # lower case: "ready", "unpaired", "in-use", "" when not reported
    cluster_uid: str | None  # the cluster Palette says the host is in use by
    host_address: str | None = None  # spec.host.hostAddress
    nics: tuple[Nic, ...] = ()
    # Fields present but unreadable: (dotted path, the value as Palette sent it), kept so that a snapshot
    # of the host (host_item) reads back as the same unreadable host.
    unreadable: tuple[tuple[str, Any], ...] = ()

    @property
    def problems(self) -> tuple[str, ...]:
        """One sentence per unreadable field, naming it and what was there."""
        return tuple(_problem(path, value) for path, value in self.unreadable)

    @property
    def primary_nic(self) -> Nic | None:
        """The interface Palette reaches the host on: the default one, else the one carrying
        ``hostAddress``, else the first; None when the agent reports no address."""
        if not self.nics:
            return None
        default = next((n for n in self.nics if n.is_default), None)
        return default or next((n for n in self.nics if n.ip == self.host_address), self.nics[0])

    @property
    def addresses(self) -> tuple[str, ...]:
        """The host's IP addresses: its default NIC's first, then the others, then ``hostAddress``."""
        if not self.nics:
            return (self.host_address,) if self.host_address else ()
        ordered = sorted(self.nics, key=lambda n: (not n.is_default, n.name))
        found = [n.ip for n in ordered]
        if self.host_address and self.host_address not in found:
            found.append(self.host_address)
        return tuple(found)


# A host as the readers take it: a search item (or snapshot entry), or the facts already read from one.
HostItem = Mapping[str, Any] | HostFacts

_EMPTY: Mapping[str, Any] = {}


def _mapping(value: Any) -> Mapping[str, Any]:
    # ``type(...) is dict`` first: the ABC check is slow and almost every value is a plain dict.
    return value if type(value) is dict or isinstance(value, Mapping) else _EMPTY


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _optional_text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def label_text(value: Any) -> str:
    """Labels are strings in Palette; hand-written YAML snapshots may hold booleans or numbers."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    return str(value)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _gpu(entry: Any) -> tuple[GpuDevice] | None:
    """One ``gpus[]`` entry, as a one-device tuple; None when it is not an object or its ``gpuCount`` is
    present but not a count (unreadable: the caller marks the host)."""
    if type(entry) is not dict and not isinstance(entry, Mapping):
        return None
    if "gpuCount" in entry:
        count = _int(entry["gpuCount"])
        if count is None or count < 0:
            return None
    else:
        count = 1  # the schema allows an entry without a count: one device
    vendor, model, memory = entry.get("vendor"), entry.get("model"), entry.get("memory")
    strategy = entry.get("migStrategy")
    key = (
        vendor if type(vendor) is str else _text(vendor),
        model if type(model) is str else _text(model),
        count,
        memory if type(memory) is str and memory else None,
        entry.get("migCapable") is True,
        strategy if type(strategy) is str and strategy else None,
    )
    # A fleet has few kinds of GPU entry: equal devices are one immutable value, built once, and so is
    # the tuple of a host with one entry (most hosts).
    device = _DEVICES.get(key)
    if device is None:
        if len(_DEVICES) >= _DEVICES_MAX:
            _DEVICES.clear()
        device = _DEVICES[key] = (GpuDevice(*key),)
    return device


_DEVICES: dict[tuple[str, str, int, str | None, bool, str | None], tuple[GpuDevice]] = {}
_DEVICES_MAX = 4096


def _nic(entry: Any) -> Nic | None:
    entry = _mapping(entry)
    ip = _optional_text(entry.get("ip"))
    if ip is None:
        return None
    dns = entry.get("dns")
    return Nic(
        name=_text(entry.get("nicName")),
        ip=ip,
        subnet=_optional_text(entry.get("subnet")),
        gateway=_optional_text(entry.get("gateway")),
        is_default=entry.get("isDefault") is True,
        dns=tuple(d for d in dns if isinstance(d, str) and d) if isinstance(dns, list) else (),
    )


def cluster_ref(status: Mapping[str, Any]) -> str | None:
    """The uid of the cluster a host is in use by (``inUseClustersRef``, or the deprecated spelling)."""
    for key in ("inUseClustersRef", "inUseClusters"):
        refs = status.get(key)
        if isinstance(refs, list):
            for ref in refs:
                if isinstance(ref, Mapping) and isinstance(ref.get("uid"), str) and ref["uid"]:
                    return str(ref["uid"])
    return None


def _refs_readable(refs: Any) -> bool:
    if refs is None:
        return True  # Go encodes an empty list as null
    return isinstance(refs, list) and all(
        isinstance(r, Mapping) and isinstance(r.get("uid"), str) and r["uid"] for r in refs
    )


# Fields present but unreadable, as (dotted path, value) pairs: what a reader of one item collects.
_Bad = list[tuple[str, Any]]


def _mapping_at(parent: Mapping[str, Any], key: str, path: str, bad: _Bad) -> Mapping[str, Any]:
    """``parent[key]`` when it is an object (absent or null: empty); anything else is noted in ``bad``."""
    value = parent.get(key)
    if value is None or type(value) is dict or isinstance(value, Mapping):
        return value if value is not None else _EMPTY
    bad.append((path, value))
    return _EMPTY


def _text_at(parent: Mapping[str, Any], key: str, path: str, bad: _Bad) -> str | None:
    value = parent.get(key)
    if value is None or isinstance(value, str):
        return value
    bad.append((path, value))
    return None


def _problem(path: str, value: Any) -> str:
    if path == "status.state":
        return f"{path} is in-use but status.inUseClustersRef names no cluster"
    shown = "null" if value is None else repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{path} is unreadable ({type(value).__name__ if value is not None else 'null'}: {shown})"


def _tags(labels: Mapping[Any, Any]) -> Mapping[str, str]:
    """Labels as text. Almost always they already are (Palette's are strings): then the item's own
    mapping is kept, not copied (it is the same size as a copy, and facts are never written)."""
    for key, value in labels.items():
        if type(value) is not str or type(key) is not str:
            return {
                k if type(k) is str else str(k): v if type(v) is str else label_text(v)
                for k, v in labels.items()
            }
    return labels


_UID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")  # Palette's uids: hex; never a path or blank


def read_host(item: Any) -> HostFacts | None:
    """One search item -> its facts; None when the item is not even an object. Facts already read
    (what :class:`reconciler.palette.hosts.HostLister` keeps) are returned as they are.

    Hot (every host of every listing): plain dicts and strings, what Palette sends, are taken inline;
    anything else goes through :func:`_mapping_at` and :func:`_text_at`, which note what is unreadable.
    """
    if type(item) is HostFacts:
        return item
    if type(item) is not dict and not isinstance(item, Mapping):
        return None
    bad: _Bad = []
    metadata = item.get("metadata")
    if type(metadata) is not dict:
        metadata = _mapping_at(item, "metadata", "metadata", bad)
    labels = metadata.get("labels")
    if type(labels) is not dict:
        labels = _mapping_at(metadata, "labels", "metadata.labels", bad)
    uid = metadata.get("uid")
    if type(uid) is not str or not _UID.fullmatch(uid):
        bad.append(("metadata.uid", uid))  # a number, null, a path: whose answer this is is unknown
        uid = ""
    name = metadata.get("name")
    name = (name if type(name) is str else _text(name)) or uid
    spec = item.get("spec")
    if type(spec) is not dict:
        spec = _mapping_at(item, "spec", "spec", bad)
    device = spec.get("device")
    if type(device) is not dict:
        device = _mapping_at(spec, "device", "spec.device", bad)
    status = item.get("status")
    if type(status) is not dict:
        status = _mapping_at(item, "status", "status", bad)
    # Each field's common shape is taken inline; anything else is read by its own helper.
    shown_arch = device.get("archType")
    if type(shown_arch) is str and shown_arch in _ARCHES:
        arch: str | None = _ARCHES[shown_arch]
    else:
        arch, shown_arch = _read_arch(device, bad)
    cpu = device.get("cpu")
    if not (type(cpu) is dict and type(cores := cpu.get("cores")) is int and cores > 0):
        cores = _read_cores(device, bad)
    gpus = _read_gpus(device, bad) if "gpus" in device else ()
    nics_raw = device.get("nics")
    nics = (
        tuple(n for n in map(_nic, nics_raw) if n is not None)
        if isinstance(nics_raw, list) and nics_raw
        else ()
    )
    project_meta = spec.get("projectMeta")
    if type(project_meta) is not dict:
        project_meta = _mapping_at(spec, "projectMeta", "spec.projectMeta", bad)
    project = project_meta.get("uid")
    if project is not None and type(project) is not str:
        project = _text_at(project_meta, "uid", "spec.projectMeta.uid", bad)
    health, state, ref = _read_status(status, bad)
    host = spec.get("host")
    return HostFacts(
        uid,
        name,
        arch,
        shown_arch,
        cores,
        gpus,
        _tags(labels),
        project or None,
        health,
        state,
        ref,
        _optional_text(host.get("hostAddress")) if type(host) is dict else None,
        nics,
        tuple(bad) if bad else (),
    )


def read_hosts(items: Iterable[Any]) -> list[HostFacts]:
    """The facts of each item that is an object, in order: read once, then handed to discovery,
    membership and project scope alike."""
    return [f for f in map(read_host, items) if f is not None]


def _read_status(status: Mapping[str, Any], bad: _Bad) -> tuple[str, str, str | None]:
    """(health, state, both in lower case; the cluster the host is in use by). A host ``in-use`` that
    names no cluster is unreadable: it is never read as free."""
    health = status.get("health")
    if type(health) is not dict:
        health = _mapping_at(status, "health", "status.health", bad)
    health_state = health.get("state")
    if health_state is not None and type(health_state) is not str:
        health_state = _text_at(health, "state", "status.health.state", bad)
    state = status.get("state")
    if state is not None and type(state) is not str:
        state = _text_at(status, "state", "status.state", bad)
    state = state.lower() if state else ""
    refs = status.get("inUseClustersRef")
    if (refs is None or (type(refs) is list and not refs)) and status.get("inUseClusters") is None:
        ref = None  # almost every free host: told at once
    else:
        ref = _read_refs(status, bad)
    if state == "in-use" and ref is None and not any(p.startswith("status.inUse") for p, _ in bad):
        bad.append(("status.state", "in-use"))
    return health_state.lower() if health_state else "", state, ref


def _read_arch(device: Mapping[str, Any], bad: _Bad) -> tuple[str | None, str | None]:
    """(canonical architecture or None when unknown, the agent's text when it gave one)."""
    raw = device.get("archType")
    if raw is not None and type(raw) is not str:
        raw = _text_at(device, "archType", "spec.device.archType", bad)
    if not raw:
        return DEFAULT_ARCH, None
    return _ARCHES.get(raw) or canonical_arch(raw), raw


def _read_cores(device: Mapping[str, Any], bad: _Bad) -> int | None:
    cpu = device.get("cpu")
    if type(cpu) is not dict:
        cpu = _mapping_at(device, "cpu", "spec.device.cpu", bad)
    cores = cpu.get("cores")
    if cores is None:
        return None
    if _int(cores) is None or cores < 0:
        bad.append(("spec.device.cpu.cores", cores))
        return None
    return cores or None


def _read_gpus(device: Mapping[str, Any], bad: _Bad) -> tuple[GpuDevice, ...]:
    """The agent's GPU entries; all of them or, when one is unreadable, none (and the host noted)."""
    entries = device.get("gpus")
    if isinstance(entries, list):
        read: tuple[GpuDevice, ...] = ()
        for entry in entries:
            one = _gpu(entry)
            if one is None:
                bad.append(("spec.device.gpus", entries))
                return ()
            read = read + one if read else one
        return read
    if entries is not None:
        bad.append(("spec.device.gpus", entries))
    return ()


_REF_KEYS = ("inUseClustersRef", "inUseClusters")


def _read_refs(status: Mapping[str, Any], bad: _Bad) -> str | None:
    """The cluster a host is in use by (:func:`cluster_ref`); either ref list present but unreadable is
    noted in ``bad``. Absent, null and empty lists (almost every free host) are told at once."""
    named = False
    for key in _REF_KEYS:
        refs = status.get(key)
        if refs is None or (type(refs) is list and not refs):
            continue
        named = True
        if not _refs_readable(refs):
            bad.append((f"status.{key}", refs))
    return cluster_ref(status) if named else None
