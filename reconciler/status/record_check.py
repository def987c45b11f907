"""Recorded admissions checked against each other before a pass plans with them (pure).

The status branch is an input like any other: a bad merge or a hand edit can leave two workload files
that claim the same GPU (a whole GPU bound twice, a whole GPU one workload holds and MIG instances of
another on it, one MIG instance claimed twice). Planning from such records would bind one GPU to two
workloads, so they are repaired first, deterministically: the earlier admission keeps the GPU (the one
whose Ready condition has been in its state longest, by ``lastTransitionTime``; then by namespace and
name), the other loses the claim on it and is placed again by admission (its other GPUs still offered
to it first), or waits with admission's usual reason. Each repair is a sentence for the log and the
status commit; the pass writes the repaired files as it writes every file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from reconciler.model.pools import PoolKey, WorkloadKey
from reconciler.placement.admission_types import PreviousAdmission
from reconciler.placement.units import GpuRef, MigInstance

# A claim on one physical GPU: (host uid, GPU index), as whole GPU or MIG instance.
_Gpu = tuple[str, int]
LATE = "~"  # sorts after every timestamp: a file without a transition time is the later admission


REPAIRED = "recorded state repaired"
"""What every repair of recorded state says first (:attr:`Repair.note`, and those of ``palette_check``)."""


@dataclass(frozen=True, slots=True)
class Repair:
    """One recorded claim dropped because an earlier admission holds the same GPU."""

    loser: WorkloadKey
    winner: WorkloadKey
    host: str
    gpu: int
    what: str  # "GPU" or "MIG instance 1g.10gb@3"

    @property
    def note(self) -> str:
        return f"{REPAIRED}: {self.detail}"

    @property
    def detail(self) -> str:
        loser, winner = "/".join(self.loser), "/".join(self.winner)
        return (
            f"{loser} claimed {self.what} {self.gpu} of host {self.host}, which "
            f"{winner} (admitted earlier) holds; {loser} is placed again without it"
        )


def check_admissions(
    previous: Mapping[PoolKey, Sequence[PreviousAdmission]], since: Mapping[WorkloadKey, str]
) -> tuple[dict[PoolKey, list[PreviousAdmission]], list[Repair]]:
    """``previous`` (per pool, as read from the workload files) with every claim on a GPU that an
    earlier admission holds dropped, and what was dropped. ``since``: each workload's Ready
    ``lastTransitionTime`` (a missing one counts as latest). A workload recorded twice (an AIWorkload
    and an MLPlatform of one name) keeps the first record read."""
    entries: list[tuple[str, PoolKey, PreviousAdmission]] = []
    seen: set[WorkloadKey] = set()
    for pool, admissions in previous.items():
        for admission in admissions:
            if admission.key in seen:
                continue
            seen.add(admission.key)
            entries.append((since.get(admission.key) or LATE, pool, admission))
    entries.sort(key=lambda e: (e[0], e[2].key, e[1]))
    whole: dict[_Gpu, WorkloadKey] = {}
    sliced: dict[_Gpu, WorkloadKey] = {}  # a GPU in MIG mode -> the first workload holding instances
    slots: dict[tuple[str, int, int], WorkloadKey] = {}
    repairs: list[Repair] = []
    kept: dict[tuple[PoolKey, WorkloadKey], PreviousAdmission] = {}
    for _at, pool, admission in entries:
        key = admission.key
        gpus: list[GpuRef] = []
        for ref in admission.gpus:
            gpu = (ref.host_uid, ref.index)
            holder = whole.get(gpu) or sliced.get(gpu)
            if holder is not None and holder != key:
                repairs.append(Repair(key, holder, ref.host_uid, ref.index, "GPU"))
                continue
            whole[gpu] = key
            gpus.append(ref)
        mig: list[MigInstance] = []
        for inst in admission.mig:
            gpu = (inst.host_uid, inst.gpu)
            holder = whole.get(gpu) or slots.get((inst.host_uid, inst.gpu, inst.start))
            if holder is not None and holder != key:
                what = f"MIG instance {inst.profile}@{inst.start} of GPU"
                repairs.append(Repair(key, holder, inst.host_uid, inst.gpu, what))
                continue
            sliced.setdefault(gpu, key)
            slots[(inst.host_uid, inst.gpu, inst.start)] = key
            mig.append(inst)
        if gpus or mig:
            kept[(pool, key)] = _narrowed(admission, gpus, mig)
    out: dict[PoolKey, list[PreviousAdmission]] = {}
    for pool, admissions in previous.items():
        rows = [kept.pop((pool, a.key)) for a in admissions if (pool, a.key) in kept]
        if rows:
            out[pool] = rows
    return out, repairs


def _narrowed(admission: PreviousAdmission, gpus: list[GpuRef], mig: list[MigInstance]) -> PreviousAdmission:
    if len(gpus) == len(admission.gpus) and len(mig) == len(admission.mig):
        return admission
    replicas = admission.replica_of()
    kept_replicas = tuple(replicas[r] for r in gpus) if admission.gpu_replicas else ()
    return replace(admission, gpus=tuple(gpus), mig=tuple(mig), gpu_replicas=kept_replicas)
