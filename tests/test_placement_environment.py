"""The Environment's choice of pool (docs/environments.md): pure, against real pool admission."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.model.conditions import Reason
from reconciler.model.environment import Environment
from reconciler.model.pools import PoolKey, WorkloadRequest
from reconciler.model.resources import ComputePool
from reconciler.placement.admission import admit_pool
from reconciler.placement.admission_types import PoolAdmission, PoolState, PreviousAdmission, WorkloadAction
from reconciler.placement.environment import EnvRequest, candidates, route
from tests._admission_support import hosts, previous_of, want

NS = "project-a"


def pools(**sizes: Sequence[int]) -> dict[PoolKey, PoolState]:
    return {
        (NS, name): PoolState((NS, name), gpus=hosts(*counts, prefix=name)) for name, counts in sizes.items()
    }


def trial_of(  # type: ignore[no-untyped-def]
    states: Mapping[PoolKey, PoolState], previous: Mapping[PoolKey, list[PreviousAdmission]] | None = None
):
    def trial(key: PoolKey, tenants: Sequence[WorkloadRequest]) -> PoolAdmission | None:
        state = states.get(key)
        held = (previous or {}).get(key, [])
        return admit_pool(state, tenants, held) if state is not None else None

    return trial


def env(request: WorkloadRequest, *names: str, order: str = "listed") -> EnvRequest:
    return EnvRequest(request, "a100-east", names, order)


def test_the_first_candidate_that_can_hold_it_takes_it() -> None:
    states = pools(**{"shared-a100-1": [8], "shared-a100-2": [8]})
    fixed = {(NS, "shared-a100-1"): [want("big", 6)]}
    routing = route([env(want("serve", 4), "shared-a100-1", "shared-a100-2")], fixed, trial_of(states))
    choice = routing.choices[(NS, "serve")]
    assert choice.pool == (NS, "shared-a100-2")
    assert [(c.pool, c.reason) for c in choice.candidates] == [
        ("shared-a100-1", Reason.POOL_CAPACITY_EXCEEDED),
        ("shared-a100-2", Reason.ADMITTED),
    ]
    assert [r.key for r in routing.assigned[(NS, "shared-a100-2")]] == [(NS, "serve")]


def test_later_candidates_are_not_tried_once_one_admits() -> None:
    states = pools(**{"a": [8], "b": [8]})
    choice = route([env(want("serve", 2), "a", "b")], {}, trial_of(states)).choices[(NS, "serve")]
    assert choice.pool == (NS, "a")
    assert [(c.pool, c.reason) for c in choice.candidates] == [("a", Reason.ADMITTED), ("b", None)]


def test_pending_names_every_candidate_and_why() -> None:
    states = pools(**{"shared-a100-1": [8], "shared-a100-2": [4, 4]})
    fixed = {(NS, "shared-a100-1"): [want("big", 8)]}
    choice = route(
        [env(want("train", 8), "shared-a100-1", "shared-a100-2")], fixed, trial_of(states)
    ).choices[(NS, "train")]
    assert choice.pool is None and choice.action is WorkloadAction.PENDING
    assert choice.message.startswith("shared-a100-1: needs 8 NVIDIA-A100 GPUs, 0 free; shared-a100-2: ")
    # shared-a100-2 has 8 free but no host holds 8: the nearest candidate, so its reason is the workload's
    assert choice.reason is Reason.NO_FITTING_LAYOUT
    assert choice.position == 1


def test_the_brief_message_names_the_family_once() -> None:
    states = pools(**{"shared-a100-1": [8], "shared-a100-2": [8]})
    fixed = {(NS, "shared-a100-1"): [want("a", 8)], (NS, "shared-a100-2"): [want("b", 4)]}
    choice = route(
        [env(want("train", 8), "shared-a100-1", "shared-a100-2")], fixed, trial_of(states)
    ).choices[(NS, "train")]
    assert choice.message == "shared-a100-1: needs 8 NVIDIA-A100 GPUs, 0 free; shared-a100-2: needs 8, 4 free"
    assert choice.reason is Reason.POOL_CAPACITY_EXCEEDED


def test_no_candidate_is_pending_reference_not_found() -> None:
    choice = route([env(want("serve", 2))], {}, trial_of({})).choices[(NS, "serve")]
    assert (choice.action, choice.reason) == (WorkloadAction.PENDING, Reason.REFERENCE_NOT_FOUND)
    missing = route([env(want("serve", 2), "gone")], {}, trial_of({})).choices[(NS, "serve")]
    assert missing.reason is Reason.REFERENCE_NOT_FOUND and "gone" in missing.message


def test_rejected_when_every_candidate_rejects_it() -> None:
    states = {(NS, "a"): PoolState((NS, "a"), gpus=hosts(8, prefix="a"), gpu_limits={hosts(1)[0].family: 2})}
    choice = route([env(want("serve", 4), "a")], {}, trial_of(states)).choices[(NS, "serve")]
    assert (choice.action, choice.reason) == (WorkloadAction.REJECTED, Reason.GPU_LIMIT_EXCEEDED)


def test_most_free_tries_the_pool_with_most_free_gpus_first() -> None:
    states = pools(**{"a": [8], "b": [8]})
    fixed = {(NS, "a"): [want("x", 4)]}
    choice = route([env(want("serve", 2), "a", "b", order="mostFree")], fixed, trial_of(states)).choices[
        (NS, "serve")
    ]
    assert choice.pool == (NS, "b")


def test_routed_workloads_go_in_admission_order_priority_first() -> None:
    states = pools(**{"a": [8], "b": [8]})
    low, high = want("aaa", 8), want("zzz", 8, priority=5)
    routing = route([env(low, "a", "b"), env(high, "a", "b")], {}, trial_of(states))
    assert routing.choices[(NS, "zzz")].pool == (NS, "a")
    assert routing.choices[(NS, "aaa")].pool == (NS, "b")


def test_a_dedicated_pool_owned_by_another_is_skipped() -> None:
    states = pools(b=[8])
    states[(NS, "a")] = PoolState((NS, "a"), mode="dedicated", gpus=hosts(8, prefix="a"))
    fixed = {(NS, "a"): [want("owner", 4)]}
    choice = route([env(want("serve", 2), "a", "b")], fixed, trial_of(states)).choices[(NS, "serve")]
    assert choice.pool == (NS, "b") and choice.candidates[0].reason is Reason.POOL_DEDICATED


def test_candidates_of_a_selector_are_the_matching_pools_by_name() -> None:
    def pool(name: str, labels: dict[str, str]) -> ComputePool:
        return ComputePool.model_validate(
            {
                "apiVersion": "spectrocloud.com/v1alpha1",
                "kind": "ComputePool",
                "metadata": {"name": name, "namespace": NS, "labels": labels},
            }
        )

    environment = Environment.model_validate(
        {
            "apiVersion": "spectrocloud.com/v1beta1",
            "kind": "Environment",
            "metadata": {"name": "east", "namespace": NS},
            "spec": {"poolSelector": {"matchLabels": {"region": "east"}}},
        }
    )
    found = [pool("z", {"region": "east"}), pool("m", {"region": "west"}), pool("b", {"region": "east"})]
    assert candidates(environment, found) == ("b", "z")


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 8), min_size=2, max_size=3),
    asks=st.lists(st.tuples(st.integers(1, 8), st.integers(-1, 1)), min_size=1, max_size=6),
    later=st.lists(st.integers(1, 8), max_size=4),
)
def test_the_chosen_pool_never_changes_while_the_workload_runs(
    sizes: list[int], asks: list[tuple[int, int]], later: list[int]
) -> None:
    """Route, record what each pool holds, then plan again with newcomers of higher priority whose
    candidates come in the other order: a workload admitted in a pool is that pool's fixed tenant (the
    status branch's record) and stays admitted there, on the same GPUs."""
    names = [f"p{i}" for i in range(len(sizes))]
    states = {(NS, n): PoolState((NS, n), gpus=hosts(s, prefix=n)) for n, s in zip(names, sizes, strict=True)}
    first = [env(want(f"w{i}", n, priority=p), *names) for i, (n, p) in enumerate(asks)]
    routing = route(first, {}, trial_of(states))
    held = {k: admit_pool(states[k], routing.assigned.get(k, ())) for k in states}
    previous = {k: previous_of(r) for k, r in held.items()}
    placed = {
        key: (pool, held[pool].workloads[key].gpus)
        for key, c in routing.choices.items()
        if (pool := c.pool) is not None and held[pool].workloads[key].action is WorkloadAction.ADMIT
    }
    fixed: dict[PoolKey, list[WorkloadRequest]] = {}
    for e in first:
        if e.request.key in placed:
            fixed.setdefault(placed[e.request.key][0], []).append(e.request)
    newcomers = [env(want(f"n{i}", n, priority=9), *reversed(names)) for i, n in enumerate(later)]
    again = route(newcomers, fixed, trial_of(states, previous))
    for key, (pool, gpus) in placed.items():
        tenants = [*fixed.get(pool, []), *again.assigned.get(pool, ())]
        result = admit_pool(states[pool], tenants, previous[pool])
        assert result.workloads[key].action is WorkloadAction.ADMITTED
        assert result.workloads[key].gpus == gpus
