"""Palette's edge host JSON -> typed facts: the one reader of that JSON outside the emulator (pure).

An item of ``POST /v1/dashboard/edgehosts/search`` (``v1EdgeHostsMetadata``) or of an inventory snapshot
becomes a :class:`HostFacts`. Nothing here decides anything (roles, availability, families are
discovery's rules in :mod:`reconciler.inventory`); this module only says what Palette reported, with the
few spellings Palette allows folded into one: architecture names (``x86_64`` = ``amd64``, ``aarch64`` =
``arm64``; a missing ``archType`` is Palette's default ``amd64``), label values (strings in Palette, maybe
booleans or numbers in hand-written snapshots), ``inUseClustersRef`` (or the deprecated
``inUseClusters``). Odd data never raises: a field that is not what the schema says reads as absent.
"""

from __future__ import annotations

from collections.abc import Mapping
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
        ordered = sorted(self.nics, key=lambda n: (not n.is_default, n.name))
        found = [n.ip for n in ordered]
        if self.host_address and self.host_address not in found:
            found.append(self.host_address)
        return tuple(found)


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


def _gpu(entry: Any) -> GpuDevice | None:
    if type(entry) is not dict and not isinstance(entry, Mapping):
        return None
    raw_count = entry.get("gpuCount")
    count = 1 if raw_count is None else _int(raw_count)
    return GpuDevice(
        vendor=_text(entry.get("vendor")),
        model=_text(entry.get("model")),
        count=count if count is not None and count > 0 else 0,
        memory=_optional_text(entry.get("memory")),
        mig_capable=entry.get("migCapable") is True,
        mig_strategy=_optional_text(entry.get("migStrategy")),
    )


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


def read_host(item: Any) -> HostFacts | None:
    """One search item -> its facts; None when the item is not even an object. Facts already read
    (what :class:`reconciler.palette.hosts.HostLister` keeps) are returned as they are."""
    if type(item) is HostFacts:
        return item
    if type(item) is not dict and not isinstance(item, Mapping):
        return None
    metadata = _mapping(item.get("metadata"))
    labels = _mapping(metadata.get("labels"))
    uid = _text(metadata.get("uid"))
    spec = _mapping(item.get("spec"))
    device = _mapping(spec.get("device"))
    status = _mapping(item.get("status"))
    raw_arch = device.get("archType")
    if isinstance(raw_arch, str) and raw_arch:
        arch, shown_arch = canonical_arch(raw_arch), raw_arch
    else:
        arch, shown_arch = DEFAULT_ARCH, None
    cores = _int(_mapping(device.get("cpu")).get("cores"))
    entries = device.get("gpus")
    gpus = tuple(g for g in map(_gpu, entries) if g is not None) if isinstance(entries, list) else ()
    nics_raw = device.get("nics")
    nics = tuple(n for n in map(_nic, nics_raw) if n is not None) if isinstance(nics_raw, list) else ()
    return HostFacts(
        uid=uid,
        name=_text(metadata.get("name")) or uid,
        arch=arch,
        raw_arch=shown_arch,
        cpu_cores=cores if cores is not None and cores > 0 else None,
        gpus=gpus,
        tags={k if type(k) is str else str(k): label_text(v) for k, v in labels.items()},
        project_uid=_optional_text(_mapping(spec.get("projectMeta")).get("uid")),
        health=_text(_mapping(status.get("health")).get("state")).lower(),
        state=_text(status.get("state")).lower(),
        cluster_uid=cluster_ref(status),
        host_address=_optional_text(_mapping(spec.get("host")).get("hostAddress")),
        nics=nics,
    )


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
    return item


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
