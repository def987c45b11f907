"""Recorded state checked against what Palette reports before a pass plans with it (pure).

``status/record_check.py`` checks the recorded admissions against each other as the status branch is
read; this module checks what needs the pass's observation, with the same rule for a contradiction:
it is resolved deterministically, the repaired record is what the pass plans with and writes, and the
repair is a sentence for the log, the status commit and the resource's message; every other resource
proceeds. What exists keeps what it has (as the earlier admission keeps its GPU): nothing running
moves because of a recorded value that Palette contradicts.

- **Pool sizes.** A pool with a scaling policy requests the size its record implies (``spec.gpus``
  adjusted by the recorded actions, ``scaling.current_size``). When that record is settled (no intent,
  its last action, if any, completed: not in progress nor failed), the pool's last status says
  Running at the pool's inputs of this pass (``inputsHash``), and its Running cluster's workers
  (Palette's machine pools) hold another number of GPUs of a family, the record contradicts Palette:
  a hand edit or a bad merge changed it, as nothing the reconciler does leaves a settled pool at
  another size than its record. The pool keeps the GPUs its cluster has: the record's
  ``earlierActions`` are set so that it implies that size (clamped to the policy's bounds), and the
  repaired block is written.
- **MIG layouts.** A pool's recorded layout of a GPU (``status.mig``) is derived from its workloads'
  instances; the instances a workload's file records are the claims (checked against each other by
  ``record_check``). A layout that leaves out an instance a workload holds, or records another
  instance over it, contradicts it: planning from it would re-lay out a GPU whose instances are held
  (a Palette write that changes the host's MIG machine pool) and move the workload. The admission keeps
  its instance: it is put back into the layout, bound to its workload, and the layout's instances over
  it that no other admission holds are dropped, when the result is a valid layout of the GPU's type
  (the observation's host answer: model, memory, ``migCapable``). A pool with no recorded layout (or
  an unreadable one) is planned afresh as before. Otherwise (the GPU's type is not
  known, or another admission holds an instance over it) the layout is left as recorded and the
  planner's checks of recorded layouts decide, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from reconciler.inventory import Machine
from reconciler.model.conditions import Phase
from reconciler.model.desired import DesiredState
from reconciler.model.mig import MigGpuType, catalogue_entry
from reconciler.model.observed import ClusterState, ManagedCluster
from reconciler.model.pools import POOL_KIND, PoolKey, WorkloadKey, cluster_kind
from reconciler.model.resources import ComputePool
from reconciler.placement.admission_types import PreviousAdmission
from reconciler.placement.mig import MigInstance as Slot
from reconciler.placement.mig import is_valid_layout, placement_mask
from reconciler.placement.mig_layouts import GpuLayout
from reconciler.placement.units import MigInstance, gpu_units
from reconciler.plan import Observation, gpus_of
from reconciler.resolve import Target
from reconciler.scaling.pools import policy_of
from reconciler.scaling.record import current_size, spec_size
from reconciler.scaling.record_types import ScalingStatus
from reconciler.status.record_check import REPAIRED
from reconciler.status.render import INPUTS_HASH, resource_inputs, status_path

Observed = Mapping[Target, Observation]


@dataclass(frozen=True, slots=True)
class SizeRepair:
    """A pool whose scaling record implied another size than its cluster has."""

    pool: PoolKey
    recorded: Mapping[str, int]  # what the record implied
    palette: Mapping[str, int]  # the GPUs of the cluster's workers
    kept: Mapping[str, int]  # the size the repaired record implies

    @property
    def note(self) -> str:
        return f"{REPAIRED}: {self.detail}"

    @property
    def detail(self) -> str:
        return (
            f"the scaling record of pool {'/'.join(self.pool)} makes it "
            f"{_gpus(self.recorded)} but Palette's machine pools hold {_gpus(self.palette)}; the pool keeps "
            f"what its cluster has ({_gpus(self.kept)}) and its record is rewritten to that size"
        )


@dataclass(frozen=True, slots=True)
class LayoutRepair:
    """A recorded MIG layout that left out (or covered) an instance a workload holds."""

    pool: PoolKey
    workload: WorkloadKey
    instance: MigInstance
    dropped: tuple[Slot, ...]  # the layout's instances over it

    @property
    def note(self) -> str:
        return f"{REPAIRED}: {self.detail}"

    @property
    def detail(self) -> str:
        i, who = self.instance, "/".join(self.workload)
        over = ", ".join(f"{s.profile}@{s.start}" for s in self.dropped)
        return (
            f"the MIG layout of GPU {i.gpu} on host {i.host_uid} (pool "
            f"{'/'.join(self.pool)}) left out {i.profile}@{i.start}, which {who} holds; the layout keeps it"
            + (f" ({over} over it dropped)" if over else "")
        )


def _gpus(size: Mapping[str, int]) -> str:
    return ", ".join(f"{n} {family}" for family, n in sorted(size.items())) or "no GPUs"


def check_sizes(
    desired: DesiredState,
    observed: Observed,
    scaling: Mapping[PoolKey, ScalingStatus | None],
    docs: Mapping[str, Mapping[str, object]],
    hosts: Hosts | None = None,
) -> tuple[dict[PoolKey, ScalingStatus | None], list[SizeRepair]]:
    """``scaling`` (each pool's parsed record) with every record that Palette's machine pools
    contradict repaired (see the module docstring), and the repairs. ``hosts``: the observed hosts
    (indexed from ``observed`` when not given)."""
    hosts = hosts if hosts is not None else Hosts(observed)
    clusters = _pool_clusters(observed)
    out = dict(scaling)
    repairs: list[SizeRepair] = []
    for pool in desired.of_kind(ComputePool):
        key = (pool.metadata.namespace, pool.metadata.name)
        record, policy, cluster = scaling.get(key), policy_of(desired, pool), clusters.get(key)
        if record is None or policy is None or cluster is None or not _settled(record, cluster):
            continue
        last = docs.get(status_path(POOL_KIND, *key))
        if not _recorded_running(last, resource_inputs(desired, POOL_KIND, *key)):
            continue
        spec = spec_size(pool.spec.gpus)
        implied = {str(f): n for f, n in current_size(spec, policy.spec, record).items()}
        palette = gpus_of(cluster.workers, {uid: m for uid in cluster.workers if (m := hosts.get(uid))})
        families = set(implied) | {str(b.canonical) for b in policy.spec.gpu_resource_bounds}
        off = {f: palette.get(f, 0) - implied.get(f, 0) for f in sorted(families)}
        if not any(off.values()):
            continue
        earlier = dict(record.earlier)
        for family, n in off.items():
            earlier[family] = earlier.get(family, 0) + n
        fixed = replace(record, earlier={f: n for f, n in sorted(earlier.items()) if n})
        kept = {str(f): n for f, n in current_size(spec, policy.spec, fixed).items()}
        out[key] = replace(fixed, size=kept)
        repairs.append(SizeRepair(key, implied, {f: palette[f] for f in sorted(palette)}, kept))
    return out, repairs


def _pool_clusters(observed: Observed) -> dict[PoolKey, ManagedCluster]:
    """Each pool's cluster, from the first target (by url, project) that lists it."""
    out: dict[PoolKey, ManagedCluster] = {}
    for target in sorted(observed, key=lambda t: (t.url, t.project_uid or "")):
        for cluster in observed[target].clusters:
            if cluster_kind(cluster.labels) == POOL_KIND:
                out.setdefault(cluster.key, cluster)
    return out


def _settled(record: ScalingStatus, cluster: ManagedCluster) -> bool:
    """The record has no action under way and the cluster runs, its membership not in doubt."""
    last = record.last_action
    if last is not None and last.completed_at is None:
        # In progress (or an intent, read back as one): the size is on its way. Failed: its host, if it
        # joined after all, is released by the next plan (a failed action never counts).
        return False
    return cluster.known_state is ClusterState.RUNNING and cluster.held is None


def _recorded_running(doc: Mapping[str, object] | None, inputs: str) -> bool:
    """The pool's last status says Running (its cluster at the size requested) at these inputs."""
    status = doc.get("status") if doc is not None else None
    if not isinstance(status, Mapping):
        return False
    return status.get("phase") == str(Phase.RUNNING) and status.get(INPUTS_HASH) == inputs


_Gpu = tuple[str, int]  # (host uid, device index)


def check_layouts(
    layouts: Mapping[PoolKey, tuple[GpuLayout, ...]],
    previous: Mapping[PoolKey, Sequence[PreviousAdmission]],
    machine: Callable[[str], Machine | None],
) -> tuple[dict[PoolKey, tuple[GpuLayout, ...]], list[LayoutRepair]]:
    """``layouts`` (each pool's recorded MIG layouts) with every instance a recorded admission holds
    put back where the layout contradicts it (see the module docstring), and the repairs. ``machine``:
    a host by uid, as observed (asked only for a GPU whose layout contradicts an instance)."""
    out = dict(layouts)
    repairs: list[LayoutRepair] = []
    for pool, admissions in sorted(previous.items()):
        if pool not in layouts:
            continue  # no layout recorded (or unreadable): the pool's MIG is planned afresh
        held = {(i.host_uid, i.gpu, i.profile, i.start): a.key for a in admissions for i in a.mig}
        gpus: dict[_Gpu, tuple[Slot, ...]] = {(g.host_uid, g.gpu): g.instances for g in out.get(pool, ())}
        found: list[LayoutRepair] = []
        for admission in sorted(admissions, key=lambda a: a.key):
            for inst in admission.mig:
                ref = (inst.host_uid, inst.gpu)
                slots = gpus.get(ref, ())
                if any((s.start, s.profile) == (inst.start, inst.profile) for s in slots):
                    continue
                kept = _put_back(
                    _gpu_type(machine(inst.host_uid), inst.gpu), slots, inst, admission.key, held
                )
                if kept is not None:
                    gpus[ref] = kept
                    dropped = tuple(s for s in slots if s not in kept)
                    found.append(LayoutRepair(pool, admission.key, inst, dropped))
        if found:
            out[pool] = tuple(sorted(GpuLayout(h, g, slots) for (h, g), slots in gpus.items()))
            repairs.extend(found)
    return out, repairs


def _put_back(
    gpu_type: MigGpuType | None,
    slots: tuple[Slot, ...],
    inst: MigInstance,
    owner: WorkloadKey,
    held: Mapping[tuple[str, int, str, int], WorkloadKey],
) -> tuple[Slot, ...] | None:
    """The layout ``slots`` with ``inst`` in it (bound to ``owner``) and what covers it dropped; None
    when that cannot be judged or is not a valid layout, or another admission holds what covers it."""
    if gpu_type is None or gpu_type.profile(inst.profile) is None:
        return None
    mask = placement_mask(gpu_type, (inst.profile, inst.start))
    over: list[Slot] = []
    for s in slots:
        if gpu_type.profile(s.profile) is None:
            return None
        if placement_mask(gpu_type, (s.profile, s.start)) & mask:
            if held.get((inst.host_uid, inst.gpu, s.profile, s.start), owner) != owner:
                return None  # two admissions overlap: not a layout question
            over.append(s)
    kept = tuple(
        sorted([*(s for s in slots if s not in over), Slot(inst.start, inst.profile, "/".join(owner))])
    )
    return kept if is_valid_layout(gpu_type, [(s.profile, s.start) for s in kept]) else None


def _gpu_type(host: Machine | None, index: int) -> MigGpuType | None:
    """A GPU's MIG type as its host's answer gives it (None: not MIG-capable, or not known)."""
    for u in gpu_units([host] if host is not None else []):
        if u.index == index:
            return catalogue_entry(u.family, u.memory_bytes, mig_capable=u.mig_capable)
    return None


class Hosts:
    """The observed hosts by uid (the first target, by url and project, that has one), indexed on the
    first look-up: a pass with nothing to check builds nothing."""

    def __init__(self, observed: Observed) -> None:
        self._observed = observed
        self._by_uid: dict[str, Machine] | None = None

    def get(self, uid: str) -> Machine | None:
        if self._by_uid is None:
            self._by_uid = {}
            for target in sorted(self._observed, key=lambda t: (t.url, t.project_uid or "")):
                for m in self._observed[target].inventory.machines:
                    self._by_uid.setdefault(m.uid, m)
        return self._by_uid.get(uid)
