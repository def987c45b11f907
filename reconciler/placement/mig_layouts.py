"""The MIG layouts a pool's status records (``pools[].mig``): their type, their reader with errors that name
the field, the JSON of a workload's instances, and which recorded layouts a pass keeps (``kept_layouts``)
(docs/mig.md). Pure; used by ``mig_admission``."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass
from typing import Any

from reconciler.model.mig import MigGpuType
from reconciler.placement.admission_types import PoolState
from reconciler.placement.mig import MigInstance as Slot
from reconciler.placement.mig import PoolGpu, is_valid_layout
from reconciler.placement.units import MigInstance

_Key = tuple[str, int]  # a GPU: (host uid, device index)


@dataclass(frozen=True, slots=True, order=True)
class GpuLayout:
    """One GPU in MIG mode as the status records it: its instances, each bound to ``namespace/name`` or
    free (``workload`` None)."""

    host_uid: str
    gpu: int
    instances: tuple[Slot, ...]


class MigLayoutError(ValueError):
    """A recorded ``mig`` value that does not have the shape of ``pools[].mig``; the message names it."""


def parse_mig_layouts(data: Any, where: str = "mig") -> tuple[GpuLayout, ...]:
    """The layouts of ``pools[].mig`` (``plan --format json``): ``{host uid: [{gpu, instances: [{profile,
    start, workload}]}]}``; None is no layout. ``where`` prefixes every error (file and field)."""
    if data is None:
        return ()
    if not isinstance(data, Mapping):
        raise MigLayoutError(f"{where}: expected a mapping of host uid to GPUs, got {_kind(data)}")
    out: list[GpuLayout] = []
    for host, entries in data.items():
        path = f"{where}[{json.dumps(host)}]"
        if not isinstance(host, str) or not host:
            raise MigLayoutError(f"{path}: a host uid must be a non-empty string")
        if not isinstance(entries, list):
            raise MigLayoutError(f"{path}: expected a list of GPUs, got {_kind(entries)}")
        seen: set[int] = set()
        for n, entry in enumerate(entries):
            at = f"{path}[{n}]"
            _fields(entry, at, ("gpu", "instances"))
            gpu = _count(entry.get("gpu"), f"{at}.gpu")
            if gpu in seen:
                raise MigLayoutError(f"{at}.gpu: GPU {gpu} of host {host} is listed twice")
            seen.add(gpu)
            raw = entry.get("instances")
            if not isinstance(raw, list):
                raise MigLayoutError(f"{at}.instances: expected a list, got {_kind(raw)}")
            out.append(
                GpuLayout(
                    host, gpu, tuple(sorted(_slot(i, f"{at}.instances[{k}]") for k, i in enumerate(raw)))
                )
            )
    return tuple(sorted(out))


def _slot(raw: Any, at: str) -> Slot:
    _fields(raw, at, ("profile", "start", "workload"))
    profile = raw.get("profile")
    if not isinstance(profile, str) or not profile:
        raise MigLayoutError(f"{at}.profile: expected a profile name such as 3g.40gb, got {_kind(profile)}")
    workload = raw.get("workload")
    if workload is not None:
        parts = workload.split("/") if isinstance(workload, str) else []
        if len(parts) != 2 or not all(parts):
            raise MigLayoutError(
                f"{at}.workload: expected namespace/name or null, got {json.dumps(workload)}"
            )
    return Slot(_count(raw.get("start"), f"{at}.start"), profile, workload)


def _fields(raw: Any, at: str, allowed: tuple[str, ...]) -> None:
    if not isinstance(raw, Mapping):
        raise MigLayoutError(f"{at}: expected a mapping, got {_kind(raw)}")
    for key in raw:
        if key not in allowed:
            raise MigLayoutError(f"{at}: unexpected field {json.dumps(key)} (allowed: {', '.join(allowed)})")
    for key in allowed:
        if key not in raw and key != "workload":
            raise MigLayoutError(f"{at}: missing field {key}")


def _count(value: Any, at: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise MigLayoutError(f"{at}: expected a non-negative integer, got {json.dumps(value)}")
    return value


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def layouts_of(gpus: Iterable[PoolGpu]) -> tuple[GpuLayout, ...]:
    """The GPUs in MIG mode as ``GpuLayout``s (what ``parse_mig_layouts`` reads back from ``layout_json``)."""
    return tuple(
        sorted(
            GpuLayout(g.host, g.index, tuple(sorted(g.instances))) for g in gpus if g.instances is not None
        )
    )


def workload_mig_json(instances: Iterable[MigInstance]) -> list[dict[str, Any]]:
    """``workloads[].mig`` of ``plan --format json``: ``[{host, gpu, profile, start}]``, sorted."""
    return [
        {"host": i.host_uid, "gpu": i.gpu, "profile": i.profile, "start": i.start} for i in sorted(instances)
    ]


def kept_layouts(
    pool: PoolState,
    units: Set[_Key],
    layouts: Iterable[GpuLayout],
    types: Mapping[_Key, MigGpuType | None],
    whole_of: Mapping[_Key, str],
    owner_of: Mapping[tuple[str, int, str, int], str],
    active: Set[str],
) -> tuple[dict[_Key, tuple[Slot, ...]], list[str]]:
    """The recorded layouts that still hold, each instance with the workload holding it (an earlier
    admission, or the recorded holder if it is still there), and notes on the others."""
    recorded: dict[_Key, tuple[Slot, ...]] = {}
    notes: list[str] = []
    for layout in sorted(layouts):
        ref = (layout.host_uid, layout.gpu)
        gpu_type = types.get(ref)
        why = _unusable(pool, units, ref, layout, gpu_type, whole_of, recorded)
        if why is not None:
            notes.append(f"MIG layout of GPU {layout.gpu} on host {layout.host_uid} dropped: {why}")
            continue
        recorded[ref] = tuple(
            sorted(
                Slot(
                    s.start,
                    s.profile,
                    owner_of.get((layout.host_uid, layout.gpu, s.profile, s.start))
                    or (s.workload if s.workload in active else None),
                )
                for s in layout.instances
            )
        )
    return recorded, notes


def _unusable(
    pool: PoolState,
    units: Set[_Key],
    ref: _Key,
    layout: GpuLayout,
    gpu_type: MigGpuType | None,
    whole_of: Mapping[_Key, str],
    recorded: Mapping[_Key, tuple[Slot, ...]],
) -> str | None:
    if pool.mig_strategy != "mixed":
        return f"pool {pool.label} has mig.strategy {pool.mig_strategy}"
    if ref not in units:
        return "the GPU is not in the pool any more"
    if gpu_type is None:
        return "the GPU is not MIG-capable (agent migCapable and the MIG catalogue)"
    if ref in recorded:
        return "listed twice"
    placements = [(s.profile, s.start) for s in layout.instances]
    if not is_valid_layout(gpu_type, placements):
        return f"not a valid layout of {gpu_type.key}"
    if ref in whole_of:
        return f"{whole_of[ref]} holds the GPU whole"
    return None
