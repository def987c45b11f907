"""Admission into MIG pools: ``admit_pool`` driving ``PoolMigPlanner`` on realistic pools of A100 80GB x8.

Every pass is checked with the independent layout checker of ``test_mig_planner`` and the mig-parted
validator of ``test_mig_realise``; passes are chained through the JSON the status records.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.inventory import Machine, discover
from reconciler.model.conditions import Reason
from reconciler.model.gpu import GpuFamily
from reconciler.model.mig import (
    CATALOGUE,
    MigGpuType,
    entry_by_key,
    family_gpu_equivalents,
    gpu_equivalents,
)
from reconciler.model.pools import MigRequest, WorkloadRequest
from reconciler.placement.admission import admit_pool
from reconciler.placement.admission_types import PoolAdmission, PoolState, PreviousAdmission, WorkloadAction
from reconciler.placement.mig import MIG_CONFIG_LABEL
from reconciler.placement.mig_admission import PoolMigPlanner
from reconciler.placement.mig_layouts import MigLayoutError, parse_mig_layouts
from reconciler.placement.mig_outcome import PoolMigOutcome, index_ranges, relayout_summary
from reconciler.placement.seam import MigRefusal
from reconciler.placement.units import GpuRef, GpuUnit, gpu_units
from tests._admission_support import previous_of
from tests._inventory_support import edge_host
from tests.test_mig_planner import layout_errors
from tests.test_mig_realise import mig_parted_errors

A100 = GpuFamily("NVIDIA-A100")
A30 = GpuFamily("NVIDIA-A30")
A100_80 = entry_by_key("NVIDIA-A100-80GB")
NS = "project-a"


# --- builders ---------------------------------------------------------------------------------------


def a100_hosts(n: int, gpus: int = 8, mig_capable: bool = True, memory: str = "81920 MiB") -> list[Machine]:
    """Hosts ``gpu-0``, ``gpu-1``, ... as discovery makes them from the agent's report."""
    entry = {
        "vendor": "NVIDIA",
        "model": "GA100 [A100 SXM4 80GB]",
        "gpuCount": gpus,
        "memory": memory,
        "migCapable": mig_capable,
    }
    found = discover([edge_host(f"uid-gpu-{h}", name=f"gpu-{h}", gpus=[entry]) for h in range(n)])
    return list(found.machines)


def mixed_pool(hosts: int = 2, **kw: Any) -> PoolState:
    return PoolState((NS, "shared-a100"), gpus=gpu_units(a100_hosts(hosts)), mig_strategy="mixed", **kw)


def want(name: str, whole: int = 0, priority: int = 0, **mig: int) -> WorkloadRequest:
    """A workload of whole A100s and MIG instances given as ``p3g_40gb=2`` (profile 3g.40gb, 2 instances)."""
    instances = tuple(
        MigRequest(A100, key[1:].replace("_", ".", 1).replace("_me", "+me"), n)
        for key, n in sorted(mig.items())
    )
    return WorkloadRequest((NS, name), priority=priority, whole={A100: whole} if whole else {}, mig=instances)


class Pass:
    """One admission pass with the planner, its outcome, and what the status records of it."""

    result: PoolAdmission
    outcome: PoolMigOutcome

    def __init__(
        self,
        pool: PoolState,
        workloads: Sequence[WorkloadRequest],
        before: Pass | None = None,
        layouts: Any = None,
        previous: Sequence[PreviousAdmission] | None = None,
    ) -> None:
        recorded = json.loads(json.dumps(before.outcome.mig)) if before is not None else layouts
        self.previous = list(
            previous if previous is not None else previous_of(before.result) if before else []
        )
        self.planner = PoolMigPlanner(
            pool, parse_mig_layouts(recorded, "status: mig"), self.previous, workloads
        )
        self.result = admit_pool(pool, workloads, self.previous, self.planner)
        self.outcome = self.planner.finish(self.result)
        self.pool = pool
        check(pool, self.result, self.outcome)

    def action(self, name: str) -> WorkloadAction:
        return self.result.workloads[(NS, name)].action

    def decision(self, name: str) -> Any:
        return self.result.workloads[(NS, name)]

    def placements(self, host: str) -> dict[int, Counter[tuple[str, int]]]:
        return {
            e["gpu"]: Counter((i["profile"], i["start"]) for i in e["instances"])
            for e in self.outcome.mig.get(host, [])
        }


def check(pool: PoolState, result: PoolAdmission, outcome: PoolMigOutcome) -> None:
    """What every pass must satisfy, whatever it decided."""
    units = {u.ref: u for u in pool.gpus}
    mig_gpus = {GpuRef(g.host, g.index): g for g in outcome.gpus if g.instances is not None}
    # Valid layouts, by NVIDIA's rules restated independently.
    for gpu in mig_gpus.values():
        assert gpu.gpu_type is not None and units[GpuRef(gpu.host, gpu.index)].mig_capable
        assert layout_errors(gpu.gpu_type, [(i.profile, i.start) for i in gpu.instances or ()]) == []
    # Each instance bound once, and bound exactly as the decisions say.
    bound = Counter(
        (f"{k[0]}/{k[1]}", i.host_uid, i.gpu, i.profile, i.start)
        for k, d in result.workloads.items()
        for i in d.mig
    )
    assert all(n == 1 for n in bound.values())
    in_layouts = Counter(
        (i.workload, g.host, g.index, i.profile, i.start)
        for g in mig_gpus.values()
        for i in g.instances or ()
        if i.workload
    )
    assert in_layouts == bound
    # No GPU both bound whole and in MIG mode; no GPU bound whole twice.
    whole = Counter(u.ref for d in result.workloads.values() for u in d.gpus)
    assert all(n == 1 for n in whole.values())
    assert not set(whole) & set(mig_gpus)
    # Capacity: admitted = bound whole + in MIG mode.
    for family, cap in result.capacity.items():
        refs = {r for r, u in units.items() if u.family == family}
        assert cap.admitted == len(refs & (set(whole) | set(mig_gpus)))
        assert (cap.total, cap.free) == (len(refs), len(refs) - cap.admitted)
    # The plan's JSON and the rendered mig-parted config.
    assert parse_mig_layouts(json.loads(json.dumps(outcome.mig))) == outcome.layouts
    for key, entries in outcome.workloads.items():
        assert entries == sorted(entries, key=lambda e: (e["host"], e["gpu"], e["profile"], e["start"]))
        assert len(entries) == len(result.workloads[key].mig)
    if outcome.mig_config is None:
        assert not mig_gpus and not outcome.machine_pools
        return
    assert mig_parted_errors(outcome.mig_config) == []
    for gpu in outcome.gpus:
        name = outcome.host_configs.get(gpu.host)
        if name is None:
            assert gpu.instances is None
            continue
        (entry,) = [e for e in outcome.mig_config["mig-configs"][name] if gpu.index in e["devices"]]
        assert entry["mig-enabled"] == (gpu.instances is not None)
        assert Counter(entry.get("mig-devices", {})) == Counter(i.profile for i in gpu.instances or ())
    assert {h for p in outcome.machine_pools for h in p.hosts} == set(outcome.host_configs)


# --- mixed pools ------------------------------------------------------------------------------------


def test_whole_and_mig_workloads_share_the_pool_on_disjoint_gpus() -> None:
    pool = mixed_pool(2)
    one = Pass(
        pool,
        [
            want("train", 6),
            want("serve", p3g_40gb=2),
            want("notebooks", p1g_10gb=3),
            want("mixed", 1, p2g_20gb=1),
        ],
    )
    assert {k[1]: d.action for k, d in one.result.workloads.items()} == dict.fromkeys(
        ["mixed", "notebooks", "serve", "train"], WorkloadAction.ADMIT
    )
    # mixed switches one GPU and notebooks fit beside its 2g; the two 3g fill a second GPU exactly.
    where = {k[1]: {(i.host_uid, i.gpu) for i in d.mig} for k, d in one.result.workloads.items()}
    assert len(where["serve"]) == 1 and where["notebooks"] == where["mixed"]
    assert len(one.outcome.layouts) == 2
    assert one.result.capacity[A100].admitted == 6 + 1 + 2
    assert one.outcome.usage.stranded == 0
    (serve_gpu,) = [g for g in one.outcome.gpus if (g.host, g.index) in where["serve"]]
    assert all(i.workload == f"{NS}/serve" for i in serve_gpu.instances or ())


def test_a_workload_admitted_before_keeps_its_instances_and_its_gpus_layout_never_changes() -> None:
    pool = mixed_pool(2)
    one = Pass(pool, [want("serve", p3g_40gb=1)])
    (layout,) = one.outcome.layouts
    host, gpu = layout.host_uid, layout.gpu
    free = sorted((i.profile, i.start) for i in layout.instances if i.workload is None)
    assert free, "the new layout keeps free instances beside the 3g"
    # Next pass: a newcomer takes a free instance of the frozen GPU; another needs a GPU switched, which
    # the frozen GPU may not do: the next GPU of the same host is switched.
    profile = free[0][0]
    tenants = [
        want("serve", p3g_40gb=1),
        want("fits", **{"p" + profile.replace(".", "_", 1): 1}),
        want("beside", p1g_10gb=2),
    ]
    two = Pass(pool, tenants, before=one)
    assert two.action("serve") is WorkloadAction.ADMITTED
    assert two.decision("serve").mig == one.decision("serve").mig
    assert two.action("fits") is WorkloadAction.ADMIT and two.action("beside") is WorkloadAction.ADMIT
    assert two.outcome.frozen_gpus == {GpuRef(host, gpu)}
    assert two.placements(host)[gpu] == one.placements(host)[gpu]
    assert [(i.host_uid, i.gpu, i.profile, i.start) for i in two.decision("fits").mig] == [
        (host, gpu, *free[0])
    ]
    assert {(i.host_uid, i.gpu) for i in two.decision("beside").mig} == {(host, gpu + 1)}
    assert two.outcome.relayout == (f"gpu-0: GPU {gpu + 1} re-laid out; GPUs 0, 2-7 untouched",)
    # A third pass with nothing new keeps everything as it is.
    three = Pass(pool, tenants, before=two)
    assert {d.action for d in three.result.workloads.values()} == {WorkloadAction.ADMITTED}
    assert three.outcome.mig == two.outcome.mig and three.outcome.relayout == ()


def test_an_idle_gpu_on_a_busy_host_is_switched_to_mig_and_its_config_changes() -> None:
    pool = mixed_pool(1)
    one = Pass(pool, [want("train", 6), want("serve", p3g_40gb=2)])
    assert one.outcome.relayout == ("gpu-0: GPU 0 re-laid out; GPUs 1-7 untouched",)  # serve is first
    config = one.outcome.host_configs["uid-gpu-0"]
    two = Pass(pool, [want("train", 6), want("serve", p3g_40gb=2), want("notebook", p7g_80gb=1)], before=one)
    assert two.action("notebook") is WorkloadAction.ADMIT
    assert [(i.gpu, i.profile) for i in two.decision("notebook").mig] == [(7, "7g.80gb")]
    assert two.placements("uid-gpu-0")[0] == one.placements("uid-gpu-0")[0]
    assert two.outcome.relayout == ("gpu-0: GPU 7 re-laid out; GPUs 0-6 untouched",)
    assert two.outcome.host_configs["uid-gpu-0"] != config
    assert [p.hosts for p in two.outcome.machine_pools] == [("uid-gpu-0",)]


def test_a_changed_request_keeps_its_instances_and_one_that_cannot_be_met_keeps_the_old_ones() -> None:
    pool = mixed_pool(1)
    one = Pass(pool, [want("serve", p1g_10gb=1), want("train", 2)])
    two = Pass(pool, [want("serve", p1g_10gb=2), want("train", 2)], before=one)
    assert two.action("serve") is WorkloadAction.ADMIT
    assert set(one.decision("serve").mig) < set(two.decision("serve").mig)
    assert two.placements("uid-gpu-0") == one.placements("uid-gpu-0")  # frozen: train runs on the host
    three = Pass(pool, [want("serve", p7g_80gb=7), want("train", 2)], before=two)
    serve = three.decision("serve")
    assert (serve.action, serve.reason) == (WorkloadAction.PENDING, Reason.POOL_CAPACITY_EXCEEDED)
    assert serve.mig == two.decision("serve").mig
    assert "keeps its previous admission (2 MIG instances)" in serve.message
    assert three.outcome.mig == two.outcome.mig


def test_an_idle_layout_returns_to_whole_even_on_a_busy_host() -> None:
    pool = mixed_pool(1)
    one = Pass(pool, [want("serve", p3g_40gb=1), want("train", 2)])
    kept = Pass(pool, [want("train", 2)], before=one)  # train still runs on the host, serve left
    assert kept.action("train") is WorkloadAction.ADMITTED
    assert kept.outcome.layouts == () and kept.outcome.mig_config is None
    assert kept.result.capacity[A100].admitted == 2
    assert [g.gpu for g in one.outcome.layouts] == [0]
    assert kept.outcome.relayout == ("gpu-0: GPU 0 re-laid out; GPUs 1-7 untouched",)


def test_an_idle_layout_on_a_host_nobody_holds_is_offered_whole_in_the_same_pass() -> None:
    pool = mixed_pool(1)
    one = Pass(pool, [want("serve", p1g_10gb=1)])
    two = Pass(pool, [want("everything", 8)], before=one)
    assert two.action("everything") is WorkloadAction.ADMIT
    assert two.outcome.mig == {} and two.result.capacity[A100].free == 0


def test_a_profile_the_gpus_do_not_have_is_mig_unsupported() -> None:
    pool = mixed_pool(1)
    one = Pass(pool, [want("forty", p1g_5gb=1), want("ok", p1g_10gb=1)])
    assert one.action("forty") is WorkloadAction.REJECTED
    assert one.decision("forty").reason is Reason.MIG_UNSUPPORTED
    assert "have no 1g.5gb (NVIDIA-A100-80GB offers 1g.10gb," in one.decision("forty").message
    assert one.action("ok") is WorkloadAction.ADMIT
    h100 = WorkloadRequest((NS, "h100"), mig=(MigRequest(GpuFamily("NVIDIA-H100"), "1g.10gb", 1),))
    other = Pass(pool, [h100])
    assert other.action("h100") is WorkloadAction.REJECTED
    assert "has no NVIDIA-H100 GPUs" in other.decision("h100").message


def test_gpus_the_agent_does_not_call_mig_capable_take_no_mig() -> None:
    pool = PoolState((NS, "p"), gpus=gpu_units(a100_hosts(1, mig_capable=False)), mig_strategy="mixed")
    one = Pass(pool, [want("m", p1g_10gb=1)])
    assert one.decision("m").reason is Reason.MIG_UNSUPPORTED
    assert "is MIG-capable" in one.decision("m").message


def test_without_mig_strategy_mixed_recorded_layouts_go_and_mig_requests_are_rejected() -> None:
    mixed = mixed_pool(1)
    one = Pass(mixed, [want("serve", p3g_40gb=1), want("train", 1)])
    none = PoolState(mixed.key, gpus=mixed.gpus, mig_strategy="none")
    two = Pass(none, [want("serve", p3g_40gb=1), want("train", 1)], before=one)
    assert two.action("serve") is WorkloadAction.REJECTED
    assert two.decision("serve").reason is Reason.MIG_UNSUPPORTED and two.decision("serve").mig == ()
    assert two.action("train") is WorkloadAction.ADMITTED
    assert two.outcome.mig == {} and two.outcome.mig_config is None
    assert two.outcome.notes and "mig.strategy none" in two.outcome.notes[0]


# --- refusals from a recorded layout ----------------------------------------------------------------


def _seven_ones() -> dict[str, Any]:
    """Host gpu-0: GPUs 0-6 bound whole to big, GPU 7 seven 1g.10gb with the first bound to small."""
    instances = [
        {"profile": "1g.10gb", "start": s, "workload": f"{NS}/small" if s == 0 else None} for s in range(7)
    ]
    return {"uid-gpu-0": [{"gpu": 7, "instances": instances}]}


def _seven_ones_previous() -> list[PreviousAdmission]:
    from reconciler.placement.units import MigInstance

    return [
        PreviousAdmission((NS, "big"), tuple(GpuRef("uid-gpu-0", i) for i in range(7))),
        PreviousAdmission((NS, "small"), (), (MigInstance("uid-gpu-0", 7, "1g.10gb", 0),)),
    ]


def test_enough_free_slices_in_no_valid_layout_is_no_fitting_layout() -> None:
    pool = mixed_pool(1)
    tenants = [
        want("big", 7),
        want("small", p1g_10gb=1),
        want("needs-2g", p2g_20gb=1),
        want("takes-two", p1g_10gb=2),
    ]
    one = Pass(pool, tenants, layouts=_seven_ones(), previous=_seven_ones_previous())
    assert one.action("big") is WorkloadAction.ADMITTED and one.action("small") is WorkloadAction.ADMITTED
    refused = one.decision("needs-2g")
    assert (refused.action, refused.reason) == (WorkloadAction.PENDING, Reason.NO_FITTING_LAYOUT)
    assert "needs MIG instances 2g.20gb x1 of NVIDIA-A100 (2 memory slices)" in refused.message
    assert "can take 0 of 1 2g.20gb now (4 memory slices usable: 0 whole NVIDIA-A100 GPUs" in refused.message
    assert "; held: gpu-0 GPUs 0-6 (whole); gpu-0 GPU 7 keep their layouts while" in refused.message
    assert refused.message.endswith("or the pool grows by 1 NVIDIA-A100 GPU")
    assert [(i.gpu, i.start) for i in one.decision("takes-two").mig] == [(7, 1), (7, 2)]
    assert one.placements("uid-gpu-0")[7] == Counter(("1g.10gb", s) for s in range(7))


def test_fewer_free_slices_than_asked_is_pool_capacity_exceeded() -> None:
    pool = mixed_pool(1)
    tenants = [want("big", 7), want("small", p1g_10gb=1), want("seven", p1g_10gb=7)]
    one = Pass(pool, tenants, layouts=_seven_ones(), previous=_seven_ones_previous())
    refused = one.decision("seven")
    assert (refused.action, refused.reason) == (WorkloadAction.PENDING, Reason.POOL_CAPACITY_EXCEEDED)
    assert (
        "(7 memory slices); pool shared-a100 can take 6 of 7 1g.10gb now (6 memory slices" in refused.message
    )
    assert (
        "0 whole NVIDIA-A100 GPUs free to switch to MIG, 6 in free space of 1 GPU in MIG mode"
        in refused.message
    )
    assert refused.message.endswith("or the pool grows by 1 NVIDIA-A100 GPU")


def test_a_refused_mig_request_releases_the_whole_gpus_it_asked_with() -> None:
    pool = mixed_pool(1)
    one = Pass(pool, [want("both", 1, p7g_80gb=8)])
    assert one.decision("both").reason is Reason.POOL_CAPACITY_EXCEEDED and one.decision("both").gpus == ()
    assert one.result.capacity[A100].free == 8 and one.outcome.mig == {}
    # One replica is on one host: the 7 free whole GPUs of gpu-0 and one new GPU elsewhere would not do.
    assert "grows by 1 NVIDIA-A100 GPU" not in one.decision("both").message
    assert "or the pool grows by" in one.decision("both").message


def test_each_family_is_placed_on_its_own_gpus_and_a_replica_of_two_families_fits_no_host() -> None:
    h100 = GpuFamily("NVIDIA-H100")
    units = (
        *(
            GpuUnit("uid-a", "a100-host", i, A100, mig_capable=True, memory_bytes=80 * 10**9)
            for i in range(2)
        ),
        GpuUnit("uid-h", "h100-host", 0, h100, mig_capable=True, memory_bytes=80 * 10**9),
    )
    pool = PoolState((NS, "two-families"), gpus=units, mig_strategy="mixed")
    on_a100 = WorkloadRequest((NS, "a-a100"), mig=(MigRequest(A100, "3g.40gb", 1),))
    on_h100 = WorkloadRequest((NS, "a-h100"), mig=(MigRequest(h100, "3g.40gb", 1),))
    both = WorkloadRequest(
        (NS, "b-both"), mig=(MigRequest(A100, "1g.10gb", 1), MigRequest(h100, "1g.10gb", 1))
    )
    one = Pass(pool, [on_a100, on_h100, both])
    assert {i.host_uid for i in one.decision("a-a100").mig} == {"uid-a"}
    assert {i.host_uid for i in one.decision("a-h100").mig} == {"uid-h"}
    refused = one.decision("b-both")
    assert (refused.action, refused.reason) == (WorkloadAction.PENDING, Reason.NO_FITTING_LAYOUT)
    assert "a host of pool two-families has GPUs of one family" in refused.message
    assert one.outcome.usage.used == 8  # only the two 3g
    assert one.result.capacity[A100].admitted == 1 and one.result.capacity[h100].admitted == 1


def test_hosts_with_one_layout_form_one_machine_pool_labelled_with_its_config() -> None:
    pool = mixed_pool(3)
    layout = [{"gpu": 0, "instances": [{"profile": "7g.80gb", "start": 0, "workload": None}]}]
    recorded = {f"uid-gpu-{h}": json.loads(json.dumps(layout)) for h in range(2)}
    for h in range(2):
        recorded[f"uid-gpu-{h}"][0]["instances"][0]["workload"] = f"{NS}/w{h}"
    from reconciler.placement.units import MigInstance

    previous = [
        PreviousAdmission((NS, f"w{h}"), (), (MigInstance(f"uid-gpu-{h}", 0, "7g.80gb", 0),))
        for h in range(2)
    ]
    one = Pass(pool, [want("w0", p7g_80gb=1), want("w1", p7g_80gb=1)], layouts=recorded, previous=previous)
    (machine_pool,) = one.outcome.machine_pools
    assert machine_pool.hosts == ("uid-gpu-0", "uid-gpu-1")
    assert machine_pool.labels == {MIG_CONFIG_LABEL: machine_pool.config}
    assert one.outcome.host_configs == {"uid-gpu-0": machine_pool.config, "uid-gpu-1": machine_pool.config}
    assert one.outcome.usage.used == 16 and one.outcome.usage.stranded == 0


def test_recorded_layouts_that_do_not_fit_the_gpus_are_dropped_with_a_note() -> None:
    pool = mixed_pool(1)
    recorded = {
        "uid-gpu-0": [{"gpu": 0, "instances": [{"profile": "3g.40gb", "start": 2, "workload": None}]}],
        "uid-gone": [{"gpu": 0, "instances": []}],
    }
    one = Pass(pool, [want("w", 1)], layouts=recorded)
    assert one.outcome.mig == {}
    assert len(one.outcome.notes) == 2
    assert any("not a valid layout of NVIDIA-A100-80GB" in n for n in one.outcome.notes)
    assert any("not in the pool" in n for n in one.outcome.notes)


# --- the recorded JSON ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ([], "status: mig: expected a mapping"),
        ({"h": {}}, 'status: mig["h"]: expected a list'),
        ({"h": [{"gpu": -1, "instances": []}]}, 'status: mig["h"][0].gpu: expected a non-negative integer'),
        ({"h": [{"gpu": 0}]}, 'status: mig["h"][0]: missing field instances'),
        ({"h": [{"gpu": 0, "instances": [], "x": 1}]}, 'status: mig["h"][0]: unexpected field "x"'),
        (
            {"h": [{"gpu": 0, "instances": [{"profile": "1g.10gb", "start": "0"}]}]},
            'status: mig["h"][0].instances[0].start: expected a non-negative integer, got "0"',
        ),
        (
            {"h": [{"gpu": 0, "instances": [{"profile": "1g.10gb", "start": 0, "workload": "w"}]}]},
            'status: mig["h"][0].instances[0].workload: expected namespace/name or null',
        ),
        (
            {"h": [{"gpu": 1, "instances": []}, {"gpu": 1, "instances": []}]},
            'mig["h"][1].gpu: GPU 1 of host h',
        ),
    ],
)
def test_a_malformed_recorded_layout_is_an_error_naming_the_field(data: Any, field: str) -> None:
    with pytest.raises(MigLayoutError) as error:
        parse_mig_layouts(data, "status: mig")
    assert field in str(error.value)


# --- GPU units from machines ------------------------------------------------------------------------


def test_gpu_units_carry_mig_capability_from_the_agent_and_the_catalogue() -> None:
    (capable,) = a100_hosts(1, gpus=2)
    (forty,) = a100_hosts(1, gpus=1, memory="40 GB")
    (plain,) = a100_hosts(1, gpus=1, mig_capable=False)
    units = gpu_units([capable])
    assert [(u.index, u.mig_capable, u.model) for u in units] == [
        (0, True, "GA100 [A100 SXM4 80GB]"),
        (1, True, "GA100 [A100 SXM4 80GB]"),
    ]
    assert units[0].memory_bytes == 81920 * 2**20
    assert gpu_units([plain])[0].mig_capable is False
    assert gpu_units([forty])[0].mig_capable is True
    mixed = discover(
        [
            edge_host(
                "uid-mixed",
                gpus=[
                    {
                        "vendor": "NVIDIA",
                        "model": "A100 80GB",
                        "gpuCount": 4,
                        "memory": "80 GB",
                        "migCapable": True,
                    },
                    {"vendor": "NVIDIA", "model": "Tesla T4", "gpuCount": 1, "memory": "16 GB"},
                ],
            )
        ]
    ).machines
    assert [u.mig_capable for u in gpu_units(mixed)] == [False] * 4  # device indices are not known
    t4 = discover(
        [
            edge_host(
                "uid-t4", gpus=[{"vendor": "NVIDIA", "model": "Tesla T4", "gpuCount": 1, "migCapable": True}]
            )
        ]
    ).machines
    assert [u.mig_capable for u in gpu_units(t4)] == [False]


# --- gpuLimits --------------------------------------------------------------------------------------


@pytest.mark.parametrize("gpu_type", CATALOGUE, ids=lambda t: t.key)
def test_limits_count_mig_instances_by_one_rule_for_a_family_and_its_gpus(gpu_type: MigGpuType) -> None:
    rng = random.Random(gpu_type.key)
    for _ in range(50):
        request = {
            name: rng.randint(1, 9) for name in rng.sample(sorted(gpu_type.profiles), rng.randint(1, 3))
        }
        assert family_gpu_equivalents(gpu_type.family, request) == gpu_equivalents(gpu_type, request)
        mig = tuple(MigRequest(gpu_type.family, name, n) for name, n in sorted(request.items()))
        whole = WorkloadRequest((NS, "w"), whole={gpu_type.family: 2}, mig=mig)
        assert whole.limit_counts() == {gpu_type.family: 2 + gpu_equivalents(gpu_type, request)}


def test_limits_round_mig_slices_up_to_gpus() -> None:
    assert family_gpu_equivalents(A100, {"1g.10gb": 7}) == 1
    assert family_gpu_equivalents(A100, {"1g.10gb": 1, "3g.40gb": 1}) == 1
    assert family_gpu_equivalents(A100, {"3g.40gb": 3}) == 2
    assert family_gpu_equivalents(A30, {"1g.6gb": 5}) == 2
    pool = mixed_pool(1, gpu_limits={A100: 1})
    one = Pass(pool, [want("over", p3g_40gb=3), want("under", p1g_10gb=7)])
    assert one.decision("over").reason is Reason.GPU_LIMIT_EXCEEDED
    assert one.action("under") is WorkloadAction.ADMIT


# --- properties -------------------------------------------------------------------------------------

PROFILES = ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")


@st.composite
def tenants(draw: st.DrawFn, prefix: str) -> list[WorkloadRequest]:
    out: list[WorkloadRequest] = []
    for n in range(draw(st.integers(1, 5))):
        whole = draw(st.integers(0, 3))
        profiles = draw(st.lists(st.sampled_from(PROFILES), max_size=2, unique=True))
        mig = tuple(MigRequest(A100, p, draw(st.integers(1, 3))) for p in sorted(profiles))
        if not whole and not mig:
            whole = 1
        out.append(
            WorkloadRequest(
                (NS, f"{prefix}{n}"),
                priority=draw(st.integers(0, 1)),
                whole={A100: whole} if whole else {},
                mig=mig,
            )
        )
    return out


def small_pool(gpus_per_host: Sequence[int]) -> PoolState:
    units = tuple(
        GpuUnit(f"uid-h{h}", f"h{h}", i, A100, mig_capable=True, memory_bytes=80 * 10**9)
        for h, n in enumerate(gpus_per_host)
        for i in range(n)
    )
    return PoolState((NS, "p"), gpus=units, mig_strategy="mixed")


def _signature(p: Pass) -> tuple[Any, ...]:
    decisions = sorted(
        (k, d.action, d.reason, d.message, d.gpus, d.mig) for k, d in p.result.workloads.items()
    )
    return (decisions, p.outcome.mig, p.outcome.mig_config, p.result.capacity)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(1, 4), min_size=1, max_size=3),
    tenants("a"),
    tenants("b"),
    st.sets(st.integers(0, 4)),
    st.randoms(use_true_random=False),
)
def test_passes_keep_bindings_and_frozen_layouts_and_do_not_depend_on_document_order(
    hosts: list[int],
    first: list[WorkloadRequest],
    newcomers: list[WorkloadRequest],
    gone: set[int],
    rng: random.Random,
) -> None:
    pool = small_pool(hosts)
    one = Pass(pool, first)
    stay = [w for n, w in enumerate(first) if n not in gone]
    two = Pass(pool, stay + newcomers, before=one)
    staying = {w.key for w in stay}
    held = {r.host_uid for p in two.previous if p.key in staying for r in p.gpus}
    held |= {i.host_uid for p in two.previous if p.key in staying for i in p.mig}
    held_gpus = {(i.host_uid, i.gpu) for p in two.previous if p.key in staying for i in p.mig}
    assert {(r.host_uid, r.index) for r in two.outcome.frozen_gpus} == held_gpus
    assert two.outcome.frozen_hosts <= held
    for host, gpu in held_gpus:
        assert two.placements(host)[gpu] == one.placements(host)[gpu], "a frozen layout changed"
    for w in stay:
        earlier = one.result.workloads[w.key]
        if earlier.action is WorkloadAction.ADMIT:
            assert two.result.workloads[w.key].action is WorkloadAction.ADMITTED
            assert two.result.workloads[w.key].mig == earlier.mig
            assert two.result.workloads[w.key].gpus == earlier.gpus
    # The same inputs in another order decide the same.
    shuffled = stay + newcomers
    rng.shuffle(shuffled)
    previous = list(two.previous)
    rng.shuffle(previous)
    recorded = json.loads(json.dumps(one.outcome.mig))
    hosts_order = list(recorded.items())
    rng.shuffle(hosts_order)
    again = Pass(pool, shuffled, layouts=dict(hosts_order), previous=previous)
    assert _signature(again) == _signature(two)


# --- per-GPU freeze, one host per replica, refusals -------------------------------------------------


def test_a_busy_hosts_free_whole_gpus_count_and_its_held_gpus_are_named() -> None:
    pool = mixed_pool(1)
    one = Pass(pool, [want("train", 2), want("serve", p3g_40gb=1)])
    two = Pass(pool, [want("train", 2), want("serve", p3g_40gb=1), want("wide", p7g_80gb=7)], before=one)
    refused = two.decision("wide")
    assert (refused.action, refused.reason) == (WorkloadAction.PENDING, Reason.POOL_CAPACITY_EXCEEDED)
    assert "can take 5 of 7 7g.80gb now" in refused.message
    assert "5 whole NVIDIA-A100 GPUs free to switch to MIG" in refused.message
    assert "held: gpu-0 GPUs 1-2 (whole)" in refused.message  # serve's 3g is on GPU 0, train has 1-2
    assert "gpu-0 GPU 0 keep their layouts" in refused.message
    # The replica's 7 instances go on one host: a new host must bring all 7 GPUs.
    assert refused.message.endswith("or the pool grows by 7 NVIDIA-A100 GPUs")


def test_one_replica_goes_on_one_host_the_best_one_ties_to_the_earlier() -> None:
    pool = mixed_pool(2)
    planner = PoolMigPlanner(pool, (), (), [want("a", p3g_40gb=2)])
    free = list(pool.gpus)
    placed = planner.place((NS, "a"), want("a", p3g_40gb=2).mig, free, ["uid-gpu-1", "uid-gpu-0"])
    assert not isinstance(placed, MigRefusal)
    assert {(i.host_uid, i.gpu) for i in placed.instances} == {("uid-gpu-1", 0)}
    too_many = want("b", p7g_80gb=9)
    refused = planner.place((NS, "b"), too_many.mig, free, ["uid-gpu-0", "uid-gpu-1"])
    assert isinstance(refused, MigRefusal) and refused.reason is Reason.NO_FITTING_LAYOUT
    assert "no single host holds them" in refused.message
    assert refused.message.endswith("or the pool grows by 9 NVIDIA-A100 GPUs")
    free = [u for u in free if u.ref not in placed.switched]
    on_one = planner.place((NS, "b"), want("b", p7g_80gb=8).mig, free, ["uid-gpu-1"])
    assert isinstance(on_one, MigRefusal) and on_one.reason is Reason.POOL_CAPACITY_EXCEEDED
    assert "; host gpu-1 can take 7 of 8 7g.80gb now" in on_one.message
    assert "held: gpu-1 GPU 0 (MIG, full)" in on_one.message


def test_a_refusal_is_remembered_until_the_state_changes_and_rollback_undoes_placements() -> None:
    pool = mixed_pool(1)
    planner = PoolMigPlanner(pool, (), (), [want("a", p7g_80gb=1), want("b", p7g_80gb=9)])
    free = list(pool.gpus)
    first = planner.place((NS, "b"), want("b", p7g_80gb=9).mig, free)
    assert isinstance(first, MigRefusal)
    assert planner.place((NS, "b"), want("b", p7g_80gb=9).mig, free) is first
    token = planner.checkpoint()
    placed = planner.place((NS, "a"), want("a", p7g_80gb=1).mig, free)
    assert not isinstance(placed, MigRefusal) and len(placed.switched) == 1
    again = planner.place(
        (NS, "b"), want("b", p7g_80gb=9).mig, [u for u in free if u.ref not in placed.switched]
    )
    assert isinstance(again, MigRefusal) and again is not first and "can take 7 of 9" in again.message
    planner.rollback(token)
    assert planner.mig_mode() == frozenset()


def test_relayout_lines_name_changed_and_untouched_gpus_by_host_name() -> None:
    assert index_ranges([4, 5, 6, 7]) == "GPUs 4-7" and index_ranges([3]) == "GPU 3"
    assert index_ranges([0, 1, 3, 5, 6]) == "GPUs 0-1, 3, 5-6"
    summary = relayout_summary([f"h{n}: GPU 0 re-laid out" for n in range(7)])
    assert summary.startswith("MIG layout: h0: GPU 0 re-laid out | h1") and summary.endswith(
        "and 2 more hosts"
    )


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(1, 4), min_size=1, max_size=3),
    st.lists(tenants("w"), min_size=2, max_size=4),
    st.lists(st.sets(st.integers(0, 4)), min_size=3, max_size=3),
)
def test_a_bound_gpus_layout_never_changes_across_admissions_and_removals(
    hosts: list[int], arrivals: list[list[WorkloadRequest]], leaving: list[set[int]]
) -> None:
    pool = small_pool(hosts)
    present: list[WorkloadRequest] = []
    before: Pass | None = None
    for n, newcomers in enumerate(arrivals):
        renamed = [replace(w, key=(NS, f"p{n}-{w.key[1]}")) for w in newcomers]
        gone = leaving[n % len(leaving)]
        present = [w for k, w in enumerate(present) if k not in gone] + renamed
        now = Pass(pool, present, before=before)
        if before is not None:
            staying = {f"{w.key[0]}/{w.key[1]}" for w in present}
            for gpu in before.outcome.gpus:
                holders = {i.workload for i in gpu.instances or ()} & staying
                if holders:  # an instance is held by a workload that is still there: the layout stays
                    assert now.placements(gpu.host)[gpu.index] == before.placements(gpu.host)[gpu.index]
                if gpu.bound in staying:
                    assert (gpu.host, gpu.index) in {
                        (u.host_uid, u.index) for u in now.decision(gpu.bound.split("/")[1]).gpus
                    }
        before = now
