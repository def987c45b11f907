"""What one pool's MIG pass leaves: the GPUs laid out this pass re-padded, the layouts realised as
``PoolMigOutcome`` (its machine pools, migConfig, usage), and the lines that say which GPUs of a host
are re-laid out (docs/mig.md). Pure; used by ``mig_admission``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.model.gpu import GpuFamily
from reconciler.model.pools import WorkloadKey
from reconciler.placement.mig import (
    MIG_CONFIG_LABEL,
    MigUsage,
    PoolGpu,
    layout_json,
    mig_usage,
    realise,
    repad,
)
from reconciler.placement.mig_layouts import GpuLayout, layouts_of, workload_mig_json
from reconciler.placement.units import GpuRef, MigInstance

_Key = tuple[str, int]  # a GPU: (host uid, device index)
_Layout = frozenset[tuple[str, int]] | None  # a GPU's (profile, start) placements; None: whole


def plural(n: int, what: str) -> str:
    """``1 host``, ``2 hosts``."""
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


@dataclass(frozen=True, slots=True)
class MigMachinePool:
    """Hosts sharing one layout: one worker machine pool of the pool's cluster (docs/mig.md)."""

    config: str  # the mig-parted config name, also the label value
    hosts: tuple[str, ...]  # host uids, sorted

    @property
    def labels(self) -> dict[str, str]:
        return {MIG_CONFIG_LABEL: self.config}


@dataclass(frozen=True, slots=True)
class PoolMigOutcome:
    """What one pool's pass leaves, for the plan, the status and the applier."""

    gpus: tuple[PoolGpu, ...]  # every GPU of the pool after the pass (``bound``: holder of a whole GPU)
    layouts: tuple[GpuLayout, ...]  # the GPUs in MIG mode: the next pass's recorded layouts
    mig: dict[str, list[dict[str, Any]]]  # pools[].mig
    mig_config: dict[str, Any] | None  # migConfig (None: no GPU in MIG mode)
    usage: MigUsage  # memory slices bound, free in instances, stranded
    machine_pools: tuple[MigMachinePool, ...]  # hosts by layout; hosts not listed stay in worker-pool
    host_configs: Mapping[str, str]  # host uid -> config name, for hosts with a GPU in MIG mode
    frozen_gpus: frozenset[GpuRef]  # GPUs whose layout an earlier workload holds: kept this pass
    workloads: dict[WorkloadKey, list[dict[str, Any]]]  # workloads[].mig of every workload with instances
    notes: tuple[str, ...]  # recorded layouts that were dropped, and why
    # Per host whose MIG configuration changes: which GPUs are re-laid out and which stay untouched
    # ("gpu-a100-03: GPUs 4-7 re-laid out; GPUs 0-3 untouched"), by host name.
    relayout: tuple[str, ...] = ()

    @property
    def frozen_hosts(self) -> frozenset[str]:
        """Hosts with a frozen GPU (their other GPUs may still change)."""
        return frozenset(ref.host_uid for ref in self.frozen_gpus)


def index_ranges(indices: Iterable[int]) -> str:
    """``GPU 4`` or ``GPUs 0-3, 6``: device indices as ranges."""
    ordered = sorted(set(indices))
    parts: list[str] = []
    first = previous = ordered[0]
    for index in [*ordered[1:], None]:
        if index is not None and index == previous + 1:
            previous = index
            continue
        parts.append(str(first) if first == previous else f"{first}-{previous}")
        if index is not None:
            first = previous = index
    return f"GPU {parts[0]}" if len(ordered) == 1 else f"GPUs {', '.join(parts)}"


def relayout_lines(
    before: Mapping[tuple[str, int], frozenset[tuple[str, int]] | None],
    after: Iterable[PoolGpu],
    names: Mapping[str, str],
) -> tuple[str, ...]:
    """One line per host whose MIG configuration changes (whole <-> MIG, or another layout)."""
    changed: dict[str, list[int]] = {}
    same: dict[str, list[int]] = {}
    for gpu in after:
        now = None if gpu.instances is None else frozenset((i.profile, i.start) for i in gpu.instances)
        moved = before.get((gpu.host, gpu.index)) != now
        (changed if moved else same).setdefault(gpu.host, []).append(gpu.index)
    lines = []
    for host in sorted(changed, key=lambda h: (names.get(h, h), h)):
        line = f"{names.get(host, host)}: {index_ranges(changed[host])} re-laid out"
        if host in same:
            line += f"; {index_ranges(same[host])} untouched"
        lines.append(line)
    return tuple(lines)


_RELAYOUT_HOSTS_SHOWN = 5  # hosts a plan message names; more are counted
# How a pool's plan message starts when its GPUs are re-laid out (the plan report keys its hint on it).
RELAYOUT_PREFIX = "MIG layout: "


def relayout_summary(lines: Sequence[str]) -> str:
    """``MIG layout: gpu-a100-03: GPUs 4-7 re-laid out; GPUs 0-3 untouched``, for a pool's plan message
    (the first hosts by name; the rest counted)."""
    shown = list(lines[:_RELAYOUT_HOSTS_SHOWN])
    if len(lines) > _RELAYOUT_HOSTS_SHOWN:
        shown.append(f"and {plural(len(lines) - _RELAYOUT_HOSTS_SHOWN, 'more host')}")
    return RELAYOUT_PREFIX + " | ".join(shown)


def repadded(
    gpus: Sequence[PoolGpu],
    before: Mapping[_Key, _Layout],
    demand: Mapping[GpuFamily, Mapping[str, int]],
    family_of: Callable[[_Key], GpuFamily],
) -> tuple[PoolGpu, ...]:
    """The GPUs laid out this pass (their layout differs from ``before``) get free instances of the
    profiles the pool's workloads ask for (``repad``): once a workload runs there, only those can serve
    the next requests."""
    changed = {
        (g.host, g.index)
        for g in gpus
        if g.instances is not None
        and before.get((g.host, g.index)) != frozenset((i.profile, i.start) for i in g.instances)
    }
    out = list(gpus)
    for family, asked in sorted(demand.items()):
        keys = {key for key in changed if family_of(key) == family}
        if keys:
            out = list(repad(out, asked, keys))
    return tuple(out)


def outcome_of(
    final: Sequence[PoolGpu],
    frozen: frozenset[GpuRef],
    instances: Mapping[WorkloadKey, Iterable[MigInstance]],
    notes: tuple[str, ...],
    before: Mapping[_Key, _Layout],
    names: Mapping[str, str],
) -> PoolMigOutcome:
    """The pass's final GPUs realised: layouts, ``pools[].mig``, migConfig, usage, machine pools, the
    ``workloads[].mig`` of each workload with ``instances``, and the re-layout lines against ``before``."""
    final = tuple(final)
    real = realise(final)
    return PoolMigOutcome(
        gpus=final,
        layouts=layouts_of(final),
        mig=layout_json(final),
        mig_config=real.mig_config,
        usage=mig_usage(final),
        machine_pools=tuple(MigMachinePool(name, hosts) for name, hosts in real.machine_pools.items()),
        host_configs=real.host_configs,
        frozen_gpus=frozen,
        workloads={key: workload_mig_json(mig) for key, mig in instances.items()},
        notes=notes,
        relayout=relayout_lines(before, final, names),
    )
