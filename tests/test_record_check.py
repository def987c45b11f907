"""Recorded admissions are checked before a pass plans with them (pure): a status file that claims a
GPU another workload holds (a bad merge, a hand edit of the status branch) never stops the pass and
never binds a GPU twice. The earlier admission keeps the GPU; the other is placed again."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.placement.admission_types import PreviousAdmission, WorkloadAction
from reconciler.placement.units import GpuRef, MigInstance
from reconciler.plan import Plan
from reconciler.status.pools import read_pool_records
from reconciler.status.record_check import check_admissions
from tests._chain_support import NS, World, a100_mig_hosts, load, mig_pool_files

POOL = (NS, "shared-a100")


def _held(name: str, *gpus: tuple[str, int], mig: tuple[MigInstance, ...] = ()) -> PreviousAdmission:
    return PreviousAdmission((NS, name), tuple(GpuRef(h, i) for h, i in gpus), mig)


def test_the_earlier_admission_keeps_a_gpu_claimed_twice() -> None:
    a, b = _held("a", ("h1", 0), ("h1", 1)), _held("b", ("h1", 1), ("h1", 2))
    since = {(NS, "a"): "2026-12-01T10:00:00Z", (NS, "b"): "2026-12-01T09:00:00Z"}
    kept, repairs = check_admissions({POOL: [a, b]}, since)
    assert kept == {POOL: [_held("a", ("h1", 0)), b]}
    assert [(r.loser, r.winner, r.host, r.gpu) for r in repairs] == [((NS, "a"), (NS, "b"), "h1", 1)]
    assert repairs[0].note == (
        "recorded state repaired: project-a/a claimed GPU 1 of host h1, which project-a/b (admitted "
        "earlier) holds; project-a/a is placed again without it"
    )


def test_without_transition_times_the_order_is_by_name_and_a_whole_loss_drops_the_record() -> None:
    a, b = _held("a", ("h1", 0)), _held("b", ("h1", 0))
    kept, repairs = check_admissions({POOL: [b, a]}, {})
    assert kept == {POOL: [a]} and [r.loser for r in repairs] == [(NS, "b")]


def test_a_whole_gpu_and_mig_instances_of_another_on_it_conflict() -> None:
    sliced = _held("s", mig=(MigInstance("h1", 0, "3g.40gb", 0), MigInstance("h1", 1, "3g.40gb", 0)))
    whole = _held("w", ("h1", 0))
    kept, repairs = check_admissions({POOL: [whole, sliced]}, {(NS, "w"): "1", (NS, "s"): "2"})
    assert kept == {POOL: [whole, _held("s", mig=(MigInstance("h1", 1, "3g.40gb", 0),))]}
    assert repairs[0].what == "MIG instance 3g.40gb@0 of GPU"


def test_one_mig_instance_claimed_twice_stays_with_the_earlier() -> None:
    inst = MigInstance("h1", 0, "1g.10gb", 3)
    kept, repairs = check_admissions({POOL: [_held("a", mig=(inst,)), _held("b", mig=(inst,))]}, {})
    assert kept == {POOL: [_held("a", mig=(inst,))]} and len(repairs) == 1


# --- the property: random edits of a settled pool's workload files -------------------------------------

WORKLOADS = {"whole": "aiworkloads", "sliced": "aiworkloads", "tenant": "mlplatforms"}
HOSTS = [f"uid-gpu-{h}" for h in range(3)] + ["uid-cp-0", "uid-nowhere"]


def _settled() -> tuple[World, Plan]:
    world = World(tuple(a100_mig_hosts(3)))
    plan: Plan | None = None
    for _ in range(3):
        plan, world = world.step(load(mig_pool_files()))
    assert plan is not None
    return world, plan


WORLD, SETTLED = _settled()


def _docs(plan: Plan) -> dict[str, dict[str, Any]]:
    """Workload status files as the pass writes them (the fields read back)."""
    docs: dict[str, dict[str, Any]] = {}
    for w in plan.workloads:
        bound = [{"host": u.host_uid, "gpu": u.index} for u in w.gpus]
        mig = [{"host": m.host_uid, "gpu": m.gpu, "profile": m.profile, "start": m.start} for m in w.mig]
        status = {
            "pool": w.pool,
            "conditions": [{"type": "Ready", "lastTransitionTime": f"2026-12-01T0{len(docs)}:00:00Z"}],
            "allocation": {"bound": bound, "mig": mig},
        }
        docs[f"{NS}/{WORKLOADS[w.name]}/{w.name}.yaml"] = {"status": status}
    return docs


gpu_refs = st.fixed_dictionaries(
    {"host": st.sampled_from(HOSTS), "gpu": st.one_of(st.integers(-1, 9), st.just("0"), st.none())}
)
mig_refs = st.fixed_dictionaries(
    {
        "host": st.sampled_from(HOSTS),
        "gpu": st.integers(0, 8),
        "profile": st.sampled_from(["1g.10gb", "3g.40gb", "7g.80gb", "9g.1tb"]),
        "start": st.integers(-1, 8),
    }
)
edit = st.tuples(
    st.sampled_from(sorted(WORKLOADS)),
    st.one_of(
        st.tuples(st.just("bound"), st.lists(gpu_refs, max_size=4)),
        st.tuples(st.just("mig"), st.lists(mig_refs, max_size=3)),
        st.tuples(st.just("copy"), st.sampled_from(sorted(WORKLOADS))),
        st.tuples(st.just("since"), st.one_of(st.none(), st.just(""), st.just("2026-11-30T00:00:00Z"))),
    ),
)


def _apply(docs: dict[str, dict[str, Any]], edits: list[Any]) -> None:
    def status(name: str) -> dict[str, Any]:
        return docs[f"{NS}/{WORKLOADS[name]}/{name}.yaml"]["status"]

    for name, (op, value) in edits:
        if op == "copy":  # a bad merge: another workload's allocation in this file
            status(name)["allocation"] = dict(status(value)["allocation"])
        elif op == "since":
            status(name)["conditions"][0]["lastTransitionTime"] = value
        else:
            status(name)["allocation"] = dict(status(name)["allocation"], **{op: value})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(edit, min_size=1, max_size=5))
def test_no_edit_of_the_recorded_admissions_fails_the_plan_or_binds_a_gpu_twice(edits: list[Any]) -> None:
    docs = _docs(SETTLED)
    _apply(docs, edits)
    records = read_pool_records(docs)
    world = World(
        WORLD.machines, WORLD.clusters, records.previous, WORLD.layouts, WORLD.modes, WORLD.attached
    )
    plan = world.plan(load(mig_pool_files()))
    holding = [w for w in plan.workloads if w.action is not WorkloadAction.REMOVE]
    whole = Counter((u.host_uid, u.index) for w in holding for u in w.gpus)
    assert [g for g, n in whole.items() if n > 1] == []
    slots = Counter((m.host_uid, m.gpu, m.start) for w in holding for m in w.mig)
    assert [s for s, n in slots.items() if n > 1] == []
    assert not {(m.host_uid, m.gpu) for w in holding for m in w.mig} & set(whole)
    assert {w.name for w in plan.workloads} == set(WORKLOADS)
