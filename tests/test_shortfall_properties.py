"""Property: a pending workload's "frees when X is removed" check (``Shortfall._fits_without``), which
counts each holder's GPUs per host once per pass, agrees with counting every held GPU again."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.model.gpu import GpuFamily
from reconciler.model.pools import WorkloadKey, WorkloadRequest
from reconciler.placement.binding import FreeGpus
from reconciler.placement.shortfall import Shortfall
from reconciler.placement.units import GpuUnit

FAMILIES = (GpuFamily("NVIDIA-A100"), GpuFamily("NVIDIA-H100"))


def _reference(
    free: FreeGpus, request: WorkloadRequest, family: GpuFamily, removed: set[WorkloadKey]
) -> bool:
    per = request.whole.get(family, 0)
    if per <= 0:
        return True
    counts = {host: len(units) for host, units in free.by_family.get(family, {}).items()}
    for ref, key in free.holder.items():
        unit = free.units[ref]
        if key in removed and ref not in free.mig_mode and unit.family == family:
            counts[unit.host_uid] = counts.get(unit.host_uid, 0) + 1
    return sum(n // per for n in counts.values()) >= request.replicas


@settings(max_examples=150, deadline=None)
@given(
    hosts=st.lists(st.tuples(st.integers(0, 1), st.integers(1, 8)), min_size=1, max_size=8),
    holders=st.lists(st.integers(0, 5), max_size=40),
    mig=st.lists(st.integers(0, 63), max_size=6),
    checks=st.lists(
        st.tuples(st.integers(0, 1), st.integers(1, 8), st.integers(1, 3), st.sets(st.integers(0, 6))),
        min_size=1,
        max_size=8,
    ),
)
def test_fits_without_counts_as_every_held_gpu_again(
    hosts: list[tuple[int, int]],
    holders: list[int],
    mig: list[int],
    checks: list[tuple[int, int, int, set[int]]],
) -> None:
    units = [
        GpuUnit(f"uid-{h}", f"host-{h}", i, FAMILIES[family])
        for h, (family, count) in enumerate(hosts)
        for i in range(count)
    ]
    free = FreeGpus(units)
    for unit, holder in zip(units, holders, strict=False):  # the first GPUs held, by a few workloads
        free.take([unit], ("ns", f"w{holder}"))
    free.to_mig(units[i].ref for i in mig if i < len(units))
    shortfall = Shortfall("ns/pool", units, free)
    for family, per, replicas, removed in checks:
        request = WorkloadRequest(("ns", "me"), whole={FAMILIES[family]: per}, replicas=replicas)
        shortfall._who_frees(request, FAMILIES[family], 1)  # counts the holders (once per pass)
        gone = {("ns", f"w{k}") for k in removed}
        assert shortfall._fits_without(request, FAMILIES[family], gone) == _reference(
            free, request, FAMILIES[family], gone
        )
