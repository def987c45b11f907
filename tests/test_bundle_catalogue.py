"""The catalogue check fed by either source (docs/bundles.md): a snapshot's whole catalogue, or Palette's
answers for the bundles' uids. One rule; a read that failed is never "unknown to Palette". Pure, with a
fake Palette for the reader."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from reconciler.bundles import CatalogueOf, bundle_rejections, bundle_uids, catalogue_of, target_catalogues
from reconciler.inventory import Inventory
from reconciler.model.base import ClusterProfileRef
from reconciler.model.catalogue import ProfileCatalogue
from reconciler.model.outcomes import Outcome
from reconciler.palette.catalogue import REASK_SECONDS, TYPELESS, ProfileMemory, read_catalogue
from reconciler.palette.errors import ServerError, UnauthorizedError
from reconciler.placement.admission_types import WorkloadAction
from reconciler.plan.entries import Action, Plan, PlatformPlan, PoolPlan, WorkloadPlan
from reconciler.plan.environments import resolved
from reconciler.resolve import Routing, Target
from reconciler.runtime.facts import ObservedTarget
from reconciler.runtime.stages.observe import failed_profile_uids
from reconciler.snapshots import parse_snapshot, profile_type
from reconciler.status.snapshot import render_snapshot
from tests.test_bundles import DCGM, GPU_INFRA, INFRA, VLLM, bundle, load, pool, workload

USERS = (bundle("stack", "Infrastructure", [GPU_INFRA, DCGM]), pool("p", "stack"))
POOL = ("ComputePool", "project-a", "p")


NO_CANDIDATES: Any = {}.get  # no Environment in these states


def every(catalogue: ProfileCatalogue | None) -> CatalogueOf:
    """Every user checked against one catalogue (one target's, or a snapshot's)."""
    return lambda _: (catalogue,)


def answer(kind: str | None) -> dict[str, Any]:
    published = {"name": "x"} if kind is None else {"name": "x", "type": kind}
    return {"metadata": {"uid": "x"}, "spec": {"published": published}}


class FakePalette:
    """``GET /v1/clusterprofiles/{uid}``: an answer, None (404) or an error, per uid; counts the asks."""

    def __init__(self, answers: dict[str, dict[str, Any] | Exception | None]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    def get_cluster_profile(self, uid: str) -> dict[str, Any] | None:
        self.asked.append(uid)
        found = self.answers[uid]
        if isinstance(found, Exception):
            raise found
        return found


def test_a_live_catalogue_rejects_only_what_palette_answered_for() -> None:
    state = load(*USERS)
    assert bundle_uids(state) == tuple(sorted([GPU_INFRA, DCGM]))
    found = ProfileCatalogue.of({GPU_INFRA: "infra", DCGM: "add-on"}, [GPU_INFRA, DCGM])
    assert bundle_rejections(state, every(found)) == {}
    missing = ProfileCatalogue.of({GPU_INFRA: "infra"}, [GPU_INFRA, DCGM])  # DCGM: Palette's 404
    assert missing.missing == (DCGM,)
    assert bundle_rejections(state, every(missing)) == {
        POOL: f"profile bundle stack: cluster profile {DCGM} unknown to Palette"
    }
    unread = ProfileCatalogue.of({GPU_INFRA: "infra"}, [GPU_INFRA])  # DCGM's read failed
    assert bundle_rejections(state, every(unread)) == {}
    # The same rule as a snapshot's whole catalogue: a second infrastructure profile.
    two = ProfileCatalogue.of({GPU_INFRA: "infra", DCGM: "infra"}, [GPU_INFRA, DCGM])
    assert "is a second infra or full profile" in bundle_rejections(state, every(two))[POOL]
    assert (
        bundle_rejections(state, every(ProfileCatalogue.of({GPU_INFRA: "infra", DCGM: "infra"})))[POOL]
        == (bundle_rejections(state, every(two))[POOL])
    )


def test_each_user_is_checked_against_the_catalogue_of_its_pools_target() -> None:
    full = bundle("full", "Fullstack", [GPU_INFRA, DCGM])
    state = load(*USERS, pool("q", "stack"), full, workload("w", "q", "full"))
    a, b = Target("https://a.example", None), Target("https://b.example", None)
    routing = Routing(pools={a: {("project-a", "p")}, b: {("project-a", "q")}})
    fine = ProfileCatalogue.of({GPU_INFRA: "infra", DCGM: "add-on"}, [GPU_INFRA, DCGM])
    missing = ProfileCatalogue.of({GPU_INFRA: "infra"}, [GPU_INFRA, DCGM])  # DCGM: b's 404
    unknown = f"profile bundle stack: cluster profile {DCGM} unknown to Palette"
    workload_key = ("AIWorkload", "project-a", "w")
    assert bundle_rejections(state, target_catalogues(routing, {a: fine, b: missing}, NO_CANDIDATES)) == {
        ("ComputePool", "project-a", "q"): unknown,
        workload_key: unknown.replace("stack", "full"),  # in pool q: b's catalogue
    }
    assert bundle_rejections(state, target_catalogues(routing, {a: missing, b: fine}, NO_CANDIDATES)) == {
        POOL: unknown
    }
    assert bundle_rejections(state, target_catalogues(routing, {b: missing}, NO_CANDIDATES)).keys() == {
        ("ComputePool", "project-a", "q"),
        workload_key,
    }  # p's target not observed: p not checked


def candidates_of(state: Any) -> Any:
    """The Environment's candidates, as the pass resolves them."""
    return lambda w: resolved(state, w)[1]


ENV_USERS = (
    pool("p", None),
    pool("q", None),
    pool("r", None),
    bundle("apps", "Application", [DCGM, VLLM], ["vllm"]),
    """\
apiVersion: spectrocloud.com/v1beta1
kind: Environment
metadata: {name: east, namespace: project-a}
spec: {pools: [{name: p}, {name: q}]}
---
apiVersion: spectrocloud.com/v1alpha1
kind: AIWorkload
metadata: {name: chat, namespace: project-a}
spec:
  environmentRef: {name: east}
  profileBundleRef: {name: apps}
  gpus: [{family: NVIDIA-H100, count: 2}]
""",
)
CHAT = ("AIWorkload", "project-a", "chat")


def test_an_environments_workload_is_checked_against_its_candidates_targets_only() -> None:
    state = load(*ENV_USERS)
    assert not [d for d in state.diagnostics if d.severity.name == "ERROR"]
    a, b, c = (Target(f"https://{n}.example", None) for n in "abc")
    routing = Routing(pools={a: {("project-a", "p")}, b: {("project-a", "q")}, c: {("project-a", "r")}})
    both = ProfileCatalogue.of({DCGM: "add-on", VLLM: "add-on"}, [DCGM, VLLM])
    gone = ProfileCatalogue.of({}, [DCGM, VLLM])  # Palette's 404 for both
    only_dcgm = ProfileCatalogue.of({DCGM: "add-on"}, [DCGM, VLLM])
    only_vllm = ProfileCatalogue.of({VLLM: "add-on"}, [DCGM, VLLM])
    unread = ProfileCatalogue.of({}, [])

    def rejected(**by_target: ProfileCatalogue) -> dict[Any, str]:
        catalogues = {Target(f"https://{n}.example", None): cat for n, cat in by_target.items()}
        return bundle_rejections(state, target_catalogues(routing, catalogues, candidates_of(state)))

    unknown = f"profile bundle apps: cluster profile {DCGM} unknown to Palette"
    # r is no candidate: its Palette knowing the profiles does not make them known to p's and q's.
    assert rejected(a=gone, b=gone, c=both) == {CHAT: unknown}
    # No single candidate's Palette knows both uids: neither could deploy the bundle (the first's message).
    assert rejected(a=only_vllm, b=only_dcgm) == {CHAT: unknown}
    assert rejected(a=only_dcgm, b=only_vllm) == {CHAT: unknown.replace(DCGM, VLLM)}
    # One candidate that can deploy it, or one whose Palette could not be read, or not observed: not rejected.
    assert rejected(a=gone, b=both) == {}
    assert rejected(a=gone, b=unread) == {}
    assert rejected(a=gone) == {CHAT: unknown}  # q's target not observed: p's answer alone decides
    assert rejected(c=gone) == {}  # no candidate's target observed: not checked


def test_the_reader_asks_each_uid_once_and_never_reads_a_failure_as_missing() -> None:
    palette = FakePalette(
        {
            GPU_INFRA: answer("infra"),
            DCGM: answer("add-on"),
            "full-1": answer("cluster"),
            "gone": None,
            "down": ServerError("503 Service Unavailable", method="GET", path="/v1/clusterprofiles/{uid}"),
            "denied": UnauthorizedError("403 Forbidden", method="GET", path="/v1/clusterprofiles/{uid}"),
            "typeless": answer(None),
        }
    )
    memory = ProfileMemory()
    read = read_catalogue(palette, list(palette.answers), memory, 0.0)
    assert read.catalogue.by_uid == {GPU_INFRA: "infra", DCGM: "add-on", "full-1": "full"}
    assert read.catalogue.missing == ("gone",)
    assert sorted(read.unread) == ["denied", "down", "typeless"]
    assert not any(read.catalogue.knows(u) for u in read.unread)
    palette.asked.clear()
    again = read_catalogue(palette, list(palette.answers), memory, REASK_SECONDS - 1)
    assert again.catalogue == read.catalogue
    assert sorted(palette.asked) == ["denied", "down", "gone"]  # answers are not asked again while young


def test_an_answer_is_asked_again_once_old_and_a_failed_reask_keeps_the_type() -> None:
    palette = FakePalette({GPU_INFRA: answer("infra"), DCGM: answer("add-on"), "typeless": answer(None)})
    memory = ProfileMemory()
    read_catalogue(palette, list(palette.answers), memory, 0.0)
    palette.answers[GPU_INFRA] = None  # deleted in Palette since
    palette.answers[DCGM] = ServerError("503", method="GET", path="/v1/clusterprofiles/{uid}")
    palette.asked.clear()
    later = read_catalogue(palette, list(palette.answers), memory, REASK_SECONDS)
    assert sorted(palette.asked) == sorted(palette.answers)  # every answer asked again, once
    assert later.catalogue.missing == (GPU_INFRA,)  # the deleted profile is now unknown to Palette
    assert later.catalogue.by_uid == {DCGM: "add-on"} and later.unread == {"typeless": TYPELESS}
    palette.asked.clear()
    read_catalogue(palette, list(palette.answers), memory, REASK_SECONDS + 1)
    assert sorted(palette.asked) == [DCGM, GPU_INFRA]  # the failed re-ask and the 404 again, next pass


def test_an_unread_uid_is_news_once_per_change_of_its_reason() -> None:
    down = ServerError("503", method="GET", path="/v1/clusterprofiles/{uid}")
    palette = FakePalette({"typeless": answer(None), "down": down})
    memory = ProfileMemory()
    first = read_catalogue(palette, list(palette.answers), memory, 0.0)
    assert sorted(first.news) == ["down", "typeless"]
    for now in (1.0, 2.0, REASK_SECONDS + 1):  # the same answers, asked again or not: nothing new
        assert read_catalogue(palette, list(palette.answers), memory, now).news == {}
    palette.answers["down"] = answer("infra")
    assert read_catalogue(palette, list(palette.answers), memory, 3.0 + REASK_SECONDS).news == {}
    palette.answers["down"] = None
    assert read_catalogue(palette, ["typeless"], memory, 4.0 + REASK_SECONDS).news == {}
    assert "down" not in memory.answers  # a uid no bundle names any more is forgotten
    palette.answers["down"] = down
    again = read_catalogue(palette, list(palette.answers), memory, 5.0 + REASK_SECONDS)
    assert again.news == {"down": str(down)}


@pytest.mark.parametrize(
    ("kind", "expected"), [("infra", "infra"), ("add-on", "add-on"), ("cluster", "full"), ("system", None)]
)
def test_palettes_profile_types_as_the_catalogue_names_them(kind: str, expected: str | None) -> None:
    assert profile_type(answer(kind)) == expected


def test_a_recorded_live_catalogue_reads_back_as_the_same_catalogue() -> None:
    live = ProfileCatalogue.of({GPU_INFRA: "infra"}, [GPU_INFRA, DCGM])
    data = render_snapshot([], [], [{"uid": u, "type": t} for u, t in live.types], live.asked)
    assert json.loads(data)["clusterProfilesAsked"] == sorted([DCGM, GPU_INFRA])
    back = parse_snapshot(data.decode(), json_first=True)
    assert catalogue_of(back.cluster_profiles, back.profiles_asked) == live
    nothing_found = ProfileCatalogue.of({}, [DCGM])
    back = parse_snapshot(render_snapshot([], [], [], nothing_found.asked).decode(), json_first=True)
    assert catalogue_of(back.cluster_profiles, back.profiles_asked) == nothing_found
    with pytest.raises(ValueError, match="clusterProfilesAsked must be a list of profile uids"):
        parse_snapshot('{"edgeHosts": [], "clusterProfilesAsked": [1]}', json_first=True)


def test_a_shard_plans_with_the_catalogue_but_leaves_it_out_of_the_shared_snapshot() -> None:
    live = ProfileCatalogue.of({GPU_INFRA: "infra"}, [GPU_INFRA, DCGM])
    seen = ObservedTarget(replace(Inventory(), catalogue=live), [], "fingerprint")
    assert json.loads(seen.snapshot())["clusterProfilesAsked"] == sorted([DCGM, GPU_INFRA])
    shard = replace(seen, records_catalogue=False, _snapshot=None)
    assert shard.inventory.catalogue == live
    assert "clusterProfilesAsked" not in json.loads(shard.snapshot())


def test_a_failed_write_has_its_profiles_asked_again_next_pass() -> None:
    pools = [
        PoolPlan(PlatformPlan("project-a", n, Action.CREATE, None, ""), "dedicated", own_profiles=(u,))
        for n, u in (("p", GPU_INFRA), ("q", INFRA))
    ]
    attach = WorkloadPlan("project-a", "w", "AIWorkload", "q", WorkloadAction.ADMIT, None, "")
    attach = replace(attach, cluster_profiles=(ClusterProfileRef(uid=DCGM),))
    plan = Plan("r1", [], [], pools=pools, workloads=[attach])
    refused = Outcome(ok=False, error="400 ClusterProfileNotFound")
    writes = {("project-a", "p"): refused, ("project-a", "q"): Outcome(ok=True), ("project-a", "w"): refused}
    assert failed_profile_uids(plan, writes) == {GPU_INFRA, DCGM}
    denied = Outcome(ok=False, error="403", unauthorized=True)  # the target stalls instead
    assert failed_profile_uids(plan, {("project-a", "p"): denied}) == set()
    palette = FakePalette({GPU_INFRA: answer("infra"), DCGM: answer("add-on")})
    memory = ProfileMemory()
    read_catalogue(palette, list(palette.answers), memory, 0.0)
    memory.expire(failed_profile_uids(plan, {("project-a", "p"): refused}))
    palette.asked.clear()
    read_catalogue(palette, list(palette.answers), memory, 1.0)
    assert palette.asked == [GPU_INFRA]  # asked again at once, not an hour later
