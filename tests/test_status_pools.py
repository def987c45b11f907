"""Status documents of pools and workloads, and reading them back for the next pass (pure)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import yaml

from reconciler.model.conditions import Reason
from reconciler.model.gpu import GpuFamily
from reconciler.model.outcomes import WorkloadOutcome
from reconciler.placement.admission_types import PreviousAdmission, WorkloadAction
from reconciler.placement.units import GpuRef, GpuUnit, MigInstance
from reconciler.plan import WorkloadPlan
from reconciler.status.pools import (
    pending_since,
    read_pool_records,
    scaling_blocks,
    unreachable_document,
    workload_document,
)
from reconciler.status.render import dump, parse_previous

A100 = GpuFamily("NVIDIA-A100")
NOW = "2026-12-01T12:00:00Z"


def plan(
    action: WorkloadAction = WorkloadAction.ADMITTED, *, running: bool = True, **kw: object
) -> WorkloadPlan:
    defaults: dict[str, object] = {
        "gpus": (GpuUnit("uid-h1", "h1", 0, A100), GpuUnit("uid-h1", "h1", 3, A100)),
        "mig": (MigInstance("uid-h2", 1, "3g.40gb", 4),),
        "pool_running": running,
    }
    defaults.update(kw)
    return WorkloadPlan(
        "project-a",
        "llm",
        "AIWorkload",
        "shared-a100",
        action,
        Reason.ADMITTED,
        "admitted",
        **defaults,  # type: ignore[arg-type]
    )


def render(
    w: WorkloadPlan, attached: tuple[str, ...] = ("p1",), outcome: WorkloadOutcome | None = None
) -> dict:  # type: ignore[type-arg]
    _phase, doc = workload_document(
        w, revision="abc", inputs="i1", outcome=outcome, attached=attached, previous=None, now=NOW
    )
    return doc


def test_a_workload_status_reads_back_as_its_previous_admission_and_attached_profiles() -> None:
    doc = render(plan())
    files = {"project-a/aiworkloads/llm.yaml": dump(doc)}
    records = read_pool_records(parse_previous(files))
    assert records.previous == {
        ("project-a", "shared-a100"): [
            PreviousAdmission(
                ("project-a", "llm"),
                (GpuRef("uid-h1", 0), GpuRef("uid-h1", 3)),
                (MigInstance("uid-h2", 1, "3g.40gb", 4),),
                "AIWorkload",
            )
        ]
    }
    assert records.attached == {("project-a", "llm"): ("shared-a100", ("p1",))}


def test_an_admitted_workload_is_running_only_on_a_running_pool_cluster() -> None:
    running = render(plan())["status"]
    assert (running["phase"], running["conditions"][0]["status"]) == ("Running", "True")
    waiting = render(plan(WorkloadAction.ADMIT, running=False), attached=())["status"]
    assert waiting["phase"] == "Pending"
    assert waiting["conditions"][0]["reason"] == "PoolNotReady"
    assert waiting["allocation"]["gpus"] == {"NVIDIA-A100": 2}  # admitted: its GPUs are bound already


def test_a_failed_attach_leaves_the_workload_pending_and_a_failed_detach_deleting() -> None:
    failed = WorkloadOutcome((), ok=False, error="503")
    attach = render(plan(WorkloadAction.ADMIT), attached=(), outcome=failed)["status"]
    assert (attach["phase"], attach["conditions"][0]["reason"]) == ("Pending", "PaletteUnavailable")
    gone = plan(WorkloadAction.REMOVE, gpus=(), mig=())
    detach = render(gone, attached=("p1",), outcome=WorkloadOutcome(("p1",), ok=False, error="503"))["status"]
    assert detach["phase"] == "Deleting" and detach["attachedProfiles"] == ["p1"]


def test_pool_mode_and_mig_layouts_are_read_back_and_a_bad_layout_is_a_problem_not_a_crash() -> None:
    pool = {
        "status": {
            "mode": "shared",
            "mig": {
                "uid-h2": [{"gpu": 1, "instances": [{"profile": "3g.40gb", "start": 4, "workload": None}]}]
            },
        }
    }
    bad = {"status": {"mode": "dedicated", "mig": {"uid-h3": "not a list"}}}
    files = {
        "ns/computepools/a.yaml": yaml.safe_dump(pool).encode(),
        "ns/computepools/b.yaml": yaml.safe_dump(bad).encode(),
    }
    records = read_pool_records(parse_previous(files))
    assert records.modes == {("ns", "a"): "shared", ("ns", "b"): "dedicated"}
    assert [layout.host_uid for layout in records.layouts[("ns", "a")]] == ["uid-h2"]
    assert ("ns", "b") not in records.layouts
    assert len(records.problems) == 1 and "ns/computepools/b.yaml" in records.problems[0]


def test_an_unreachable_workload_keeps_its_admission_and_attached_profiles() -> None:
    before = render(plan())
    _phase, doc = unreachable_document(
        "AIWorkload",
        "project-a",
        "llm",
        previous=before,
        reason=Reason.PALETTE_UNAVAILABLE,
        message="down",
        now=NOW,
    )
    status = doc["status"]
    assert doc["kind"] == "AIWorkload"
    assert status["phase"] == "Running"
    assert status["allocation"] == before["status"]["allocation"]
    assert status["attachedProfiles"] == ["p1"] and status["pool"] == "shared-a100"
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Ready"]["status"] == "Unknown"
    assert conditions["PaletteReachable"]["status"] == "False"


def test_pending_since_is_the_ready_transition_of_workloads_waiting_for_capacity() -> None:
    short = render(
        replace(plan(WorkloadAction.PENDING, gpus=(), mig=()), reason=Reason.POOL_CAPACITY_EXCEEDED)
    )
    waiting = render(plan(WorkloadAction.PENDING, running=False, gpus=(), mig=()))
    admitted = render(plan())
    docs = {
        "project-a/aiworkloads/short.yaml": short,
        "project-a/aiworkloads/waiting.yaml": waiting,
        "project-a/aiworkloads/llm.yaml": admitted,
    }
    assert pending_since(docs) == {("project-a", "short"): datetime(2026, 12, 1, 12, tzinfo=UTC).timestamp()}


def test_scaling_blocks_are_the_recorded_ones_not_the_plans_entry() -> None:
    entry = {"policy": "p", "decision": "none", "reason": "NotEvaluated", "message": "m"}
    record = {"policy": "p", "size": {"NVIDIA-A100": 8}, "decision": {"decision": "hold"}}
    docs = {
        "ns/computepools/planned.yaml": {"status": {"scaling": entry}},
        "ns/computepools/scaled.yaml": {"status": {"scaling": record}},
        "ns/computepools/broken.yaml": {"status": {"scaling": "x"}},
        "ns/computepools/none.yaml": {"status": {}},
        "ns/aiworkloads/w.yaml": {"status": {"scaling": record}},
    }
    assert scaling_blocks(docs) == {
        ("ns", "scaled"): ("ns/computepools/scaled.yaml", record),
        ("ns", "broken"): ("ns/computepools/broken.yaml", "x"),
    }


def test_each_replicas_host_and_gpus_are_recorded_and_read_back_for_stickiness() -> None:
    from reconciler.placement.admission import admit_pool
    from reconciler.placement.admission_types import PoolState
    from reconciler.plan import WorkloadPlan as Entry
    from tests._admission_support import hosts, want

    pool = PoolState(("project-a", "shared-a100"), gpus=hosts(4, 4))
    first = admit_pool(pool, [want("llm", 3, replicas=2)]).workloads[("project-a", "llm")]
    entry = Entry(
        "project-a", "llm", "AIWorkload", "shared-a100", first.action, first.reason, first.message,
        first.gpus, first.mig, replicas=2, gpu_replicas=first.gpu_replicas,
    )  # fmt: skip
    doc = render(entry)
    allocation = doc["status"]["allocation"]
    assert allocation["replicas"] == 2 and allocation["gpus"] == {"NVIDIA-A100": 6}
    assert {(b["replica"], b["hostName"]) for b in allocation["bound"]} == {(0, "host-0"), (1, "host-1")}
    records = read_pool_records(parse_previous({"project-a/aiworkloads/llm.yaml": dump(doc)}))
    (held,) = records.previous[("project-a", "shared-a100")]
    assert held == first.previous()
    again = admit_pool(pool, [want("llm", 3, replicas=2)], [held]).workloads[("project-a", "llm")]
    assert (again.action, again.bound()) == (WorkloadAction.ADMITTED, first.bound())


def test_an_old_status_file_without_replicas_reads_as_replica_zero() -> None:
    doc = render(plan())
    for item in doc["status"]["allocation"]["bound"] + doc["status"]["allocation"]["mig"]:
        item.pop("replica")
    doc["status"]["allocation"].pop("replicas")
    records = read_pool_records(parse_previous({"project-a/aiworkloads/llm.yaml": dump(doc)}))
    (held,) = records.previous[("project-a", "shared-a100")]
    assert held.replica_of() == {GpuRef("uid-h1", 0): 0, GpuRef("uid-h1", 3): 0}
    assert [i.replica for i in held.mig] == [0]


def test_reconciler_status_shows_where_each_replica_is() -> None:
    from reconciler.status.details import details
    from reconciler.status.view import row_of

    entry = plan(gpu_replicas=(0, 1), replicas=2, mig=(MigInstance("uid-h2", 1, "3g.40gb", 4, replica=1),))
    row = row_of("project-a/aiworkloads/llm.yaml", dump(render(entry)))
    assert row is not None
    assert details(row, [row])[-3:] == [
        "replica 0: whole GPUs: h1 (uid-h1) GPU 0",
        "replica 1: whole GPUs: h1 (uid-h1) GPU 3",
        "replica 1: MIG instance: uid-h2 GPU 1 3g.40gb@4",
    ]
