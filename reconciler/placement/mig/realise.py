"""Realisation: one machine pool per distinct host layout, and mig-parted's config for them (pure)."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.placement.mig.state import ALL_DISABLED, PoolGpu


@dataclass(frozen=True, slots=True)
class MigRealisation:
    """How the layouts are applied: one machine pool per distinct host layout, and mig-parted's config."""

    host_configs: Mapping[str, str]  # host -> config name, for hosts with a GPU in MIG mode
    machine_pools: Mapping[str, tuple[str, ...]]  # config name -> its hosts, sorted
    mig_config: dict[str, Any] | None  # mig-parted v1 config; None when no GPU is in MIG mode


def _device_entries(host_gpus: Sequence[PoolGpu]) -> list[dict[str, Any]]:
    """mig-parted entries for one host: GPUs with the same configuration share one entry."""
    groups: dict[tuple[bool, tuple[tuple[str, int], ...]], list[int]] = {}
    for gpu in sorted(host_gpus, key=lambda g: g.index):
        counts = tuple(sorted(Counter(i.profile for i in gpu.instances or ()).items()))
        groups.setdefault((gpu.instances is not None, counts), []).append(gpu.index)
    entries: list[dict[str, Any]] = []
    for (enabled, counts), devices in sorted(groups.items(), key=lambda item: item[1][0]):
        entry: dict[str, Any] = {"devices": devices, "mig-enabled": enabled}
        if enabled:
            entry["mig-devices"] = dict(counts)
        entries.append(entry)
    return entries


def config_name(entries: list[dict[str, Any]]) -> str:
    """A stable name for a host layout: the same layout always gets the same node label value."""
    digest = hashlib.sha256(json.dumps(entries, sort_keys=True).encode()).hexdigest()
    return f"mig-{digest[:10]}"


def realise(gpus: Iterable[PoolGpu]) -> MigRealisation:
    """Group hosts by identical layout (all their GPUs) and render the mig-parted config for them.

    Hosts whose GPUs are all whole carry no config (they stay in ``worker-pool``; the GPU Operator labels
    them ``all-disabled``, which the rendered config therefore defines too).
    """
    by_host: dict[str, list[PoolGpu]] = {}
    for gpu in gpus:
        by_host.setdefault(gpu.host, []).append(gpu)
    configs: dict[str, list[dict[str, Any]]] = {}
    host_configs: dict[str, str] = {}
    for host in sorted(by_host):
        if not any(g.mig for g in by_host[host]):
            continue
        entries = _device_entries(by_host[host])
        name = config_name(entries)
        configs[name] = entries
        host_configs[host] = name
    if not configs:
        return MigRealisation({}, {}, None)
    pools: dict[str, list[str]] = {}
    for host, name in host_configs.items():
        pools.setdefault(name, []).append(host)
    mig_configs: dict[str, Any] = {ALL_DISABLED: [{"devices": "all", "mig-enabled": False}]}
    mig_configs.update(sorted(configs.items()))
    return MigRealisation(
        host_configs=host_configs,
        machine_pools={name: tuple(sorted(hosts)) for name, hosts in sorted(pools.items())},
        mig_config={"version": "v1", "mig-configs": mig_configs},
    )


def layout_json(gpus: Iterable[PoolGpu]) -> dict[str, list[dict[str, Any]]]:
    """``pools[].mig`` of ``plan --format json``: per host, its GPUs in MIG mode and their instances."""
    out: dict[str, list[dict[str, Any]]] = {}
    for gpu in sorted(gpus, key=lambda g: (g.host, g.index)):
        if gpu.instances is None:
            continue
        out.setdefault(gpu.host, []).append(
            {
                "gpu": gpu.index,
                "instances": [
                    {"profile": i.profile, "start": i.start, "workload": i.workload} for i in gpu.instances
                ],
            }
        )
    return out
