"""The seam between admission and a MIG layout planner (the real planner is reconciler.placement.mig).

The planner here is deliberately naive (one instance per GPU, start 0) so that what is checked is
admission's side of the contract: GPUs switched to MIG mode are no longer bound whole, capacity counts
them as admitted, a refusal rolls back the whole GPUs of the same workload, and held instances stay.
"""

from __future__ import annotations

from collections.abc import Sequence

from reconciler.model.conditions import Reason
from reconciler.model.pools import MigRequest, WorkloadKey
from reconciler.placement.admission import admit_pool
from reconciler.placement.admission_types import WorkloadAction
from reconciler.placement.seam import MigPlacement, MigRefusal
from reconciler.placement.units import GpuRef, GpuUnit, MigInstance
from tests._admission_support import A100, actions, hosts, previous_of, shared, want


class OneInstancePerGpu:
    def __init__(self) -> None:
        self.held: dict[WorkloadKey, tuple[MigInstance, ...]] = {}

    def hold(self, key: WorkloadKey, instances: Sequence[MigInstance]) -> bool:
        self.held[key] = tuple(instances)
        return True

    def release(self, key: WorkloadKey) -> None:
        self.held.pop(key, None)

    def checkpoint(self) -> object:
        return dict(self.held)

    def rollback(self, state: object) -> None:
        assert isinstance(state, dict)
        self.held = dict(state)

    def place(
        self,
        key: WorkloadKey,
        requests: Sequence[MigRequest],
        whole_free: Sequence[GpuUnit],
        hosts: Sequence[str] | None = None,
    ) -> MigPlacement | MigRefusal:
        need = sum(r.count for r in requests)
        usable = [u for u in whole_free if hosts is None or u.host_uid in hosts]
        on_one = [[u for u in usable if u.host_uid == h] for h in (hosts or [u.host_uid for u in usable])]
        fitting = [group for group in on_one if len(group) >= need]
        if not fitting:
            return MigRefusal(Reason.POOL_CAPACITY_EXCEEDED, f"needs {need} MIG GPUs, {len(usable)} free")
        profiles = [r.profile for r in requests for _ in range(r.count)]
        chosen = fitting[0][:need]
        instances = tuple(
            MigInstance(u.host_uid, u.index, p, 0) for u, p in zip(chosen, profiles, strict=True)
        )
        self.held[key] = instances
        return MigPlacement(instances, tuple(u.ref for u in chosen))

    def mig_mode(self) -> frozenset[GpuRef]:
        return frozenset(GpuRef(i.host_uid, i.gpu) for held in self.held.values() for i in held)


def test_gpus_switched_to_mig_are_not_bound_whole_and_count_as_admitted() -> None:
    pool = shared(hosts(4), mig_strategy="mixed")
    planner = OneInstancePerGpu()
    mig = [MigRequest(A100, "3g.40gb", 2)]
    result = admit_pool(pool, [want("a-mig", mig=mig), want("b-whole", 2), want("c-more", 1)], (), planner)
    assert actions(result) == {"a-mig": "admit", "b-whole": "admit", "c-more": "pending"}
    mig_gpus = {(i.host_uid, i.gpu) for i in result.workloads[("project-a", "a-mig")].mig}
    whole = {(u.host_uid, u.index) for u in result.workloads[("project-a", "b-whole")].gpus}
    assert len(mig_gpus) == 2 and not mig_gpus & whole
    assert result.capacity["NVIDIA-A100"].admitted == 4


def test_a_refused_mig_placement_rolls_back_the_whole_gpus_of_the_same_workload() -> None:
    pool = shared(hosts(4), mig_strategy="mixed")
    both = want("both", 3, mig=[MigRequest(A100, "1g.10gb", 2)])  # 3 whole leave 1 GPU for 2 instances
    result = admit_pool(pool, [both, want("later", 4)], (), OneInstancePerGpu())
    assert actions(result) == {"both": "pending", "later": "admit"}
    # Tried again at the end of the pass, its whole GPUs are what is short now.
    assert result.workloads[("project-a", "both")].message.startswith("needs 3 NVIDIA-A100 GPUs, 0 free")


def test_held_mig_instances_stay_admitted_on_the_next_pass() -> None:
    pool = shared(hosts(4), mig_strategy="mixed")
    mig = [MigRequest(A100, "3g.40gb", 1)]
    first = admit_pool(pool, [want("m", mig=mig)], (), OneInstancePerGpu())
    second = admit_pool(pool, [want("m", mig=mig), want("w", 4)], previous_of(first), OneInstancePerGpu())
    assert actions(second) == {"m": "admitted", "w": "pending"}
    assert second.workloads[("project-a", "m")].mig == first.workloads[("project-a", "m")].mig
    assert second.workloads[("project-a", "m")].action is WorkloadAction.ADMITTED
