"""Profile Bundles: their validation rules, the catalogue rules of the plan, and what a bundle deploys
(docs/bundles.md). Pure: documents through the real loader, plans through the real planner."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from reconciler.allocate import allow_replace
from reconciler.bundles import bundle_problem, catalogue_of
from reconciler.inventory import HostState, Inventory
from reconciler.manifests import load_files
from reconciler.model.base import LocalRef
from reconciler.model.bundle import ProfileBundle
from reconciler.model.catalogue import ProfileCatalogue
from reconciler.model.conditions import Reason
from reconciler.model.desired import DesiredState
from reconciler.model.diagnostics import Diagnostic, Severity
from reconciler.model.resources import AIWorkload, ComputePool
from reconciler.placement.admission_types import PreviousAdmission, WorkloadAction
from reconciler.placement.units import GpuRef
from reconciler.plan import Action, make_plan
from reconciler.profiles import platform_cluster_profiles
from reconciler.resolve import workload_profile
from tests._allocate_support import cps, inventory, machine, pool_cluster
from tests._manifests_support import documents, namespace_yaml

NS = "project-a"
INFRA, GPU_INFRA, DCGM, VLLM, FULL = "infra-1", "infra-2", "addon-dcgm", "addon-vllm", "full-1"
CATALOGUE = {INFRA: "infra", GPU_INFRA: "infra", DCGM: "add-on", VLLM: "add-on", FULL: "full"}

PROFILES = """\
apiVersion: mural.spectrocloud.com/v1alpha1
kind: WorkloadProfile
metadata: {name: vllm, namespace: project-a}
spec: {type: Model, clusterProfiles: [{uid: addon-vllm}]}
---
apiVersion: mural.spectrocloud.com/v1alpha1
kind: WorkloadProfile
metadata: {name: notebook, namespace: project-a, labels: {palette.ai/min-nodes: "2"}}
spec: {}
---
apiVersion: mural.spectrocloud.com/v1alpha1
kind: WorkloadProfile
metadata: {name: drivers, namespace: project-a, labels: {palette.ai/min-nodes: "3"}}
spec: {type: Infrastructure}
"""


def base(gpu_quota: dict[str, int] | None = None) -> str:
    """The namespace (Settings building clusters from ``INFRA``) and its WorkloadProfiles."""
    return documents(namespace_yaml(NS, cluster_profiles=[INFRA], gpu_quota=gpu_quota), PROFILES)


BASE = base()


def bundle(name: str, kind: str, uids: list[str], workloads: list[str] | None = None) -> str:
    return f"""\
apiVersion: spectrocloud.com/v1beta1
kind: ProfileBundle
metadata: {{name: {name}, namespace: project-a}}
spec:
  type: {kind}
  clusterProfiles: [{", ".join("{uid: " + u + "}" for u in uids)}]
  workloadProfiles: [{", ".join("{name: " + w + "}" for w in workloads or [])}]
"""


def pool(name: str, bundle_name: str | None, extra: str = "") -> str:
    ref = f"  profileBundleRef: {{name: {bundle_name}}}\n" if bundle_name else ""
    return f"""\
apiVersion: spectrocloud.com/v1alpha1
kind: ComputePool
metadata: {{name: {name}, namespace: project-a}}
spec:
  mode: shared
  gpus: [{{family: NVIDIA-H100, count: 8}}]
{ref}{extra}"""


def workload(name: str, pool_name: str, bundle_name: str, model: bool = False) -> str:
    labels = "\n  labels: {palette.ai/aiworkload-type: model}" if model else ""
    return f"""\
apiVersion: spectrocloud.com/v1alpha1
kind: AIWorkload
metadata:
  name: {name}
  namespace: project-a{labels}
spec:
  computePoolRef: {{name: {pool_name}}}
  profileBundleRef: {{name: {bundle_name}}}
  gpus: [{{family: NVIDIA-H100, count: 2}}]
"""


def load(*docs: str) -> DesiredState:
    files = [("base.yaml", BASE.encode()), *((f"doc{i}.yaml", d.encode()) for i, d in enumerate(docs))]
    return load_files(files, revision="r1")


def errors(state: DesiredState, name: str) -> list[Diagnostic]:
    return [d for d in state.diagnostics if d.name == name and d.severity is Severity.ERROR]


# --- validation --------------------------------------------------------------------------------------


def test_valid_bundles_of_each_type_load_and_workload_profile_type_defaults_to_application() -> None:
    state = load(
        bundle("infra", "Infrastructure", [GPU_INFRA, DCGM], ["drivers"]),
        bundle("app", "Application", [VLLM], ["vllm"]),
        bundle("full", "Fullstack", [FULL, VLLM], ["notebook"]),
    )
    assert not state.has_errors, state.diagnostics
    assert {b.metadata.name for b in state.of_kind(ProfileBundle)} == {"infra", "app", "full"}
    notebook = next(w for w in state.resources.values() if w.resource.metadata.name == "notebook")
    assert notebook.resource.spec.type == "Application"  # type: ignore[union-attr]


def test_a_uid_listed_twice_is_an_error_at_its_line_and_column() -> None:
    state = load(bundle("twice", "Infrastructure", [GPU_INFRA, DCGM, DCGM]))
    (error,) = errors(state, "twice")
    assert (error.file, error.line, error.field) == ("doc0.yaml", 6, "spec.clusterProfiles[2].uid")
    assert error.column > 1
    assert "addon-dcgm is listed twice (spec.clusterProfiles[1] and spec.clusterProfiles[2])" in error.message


def test_bundle_workload_profiles_resolve_and_their_types_follow_the_bundle_type() -> None:
    state = load(
        bundle("missing", "Application", [VLLM], ["nope"]),
        bundle("infra-with-app", "Infrastructure", [GPU_INFRA], ["drivers", "notebook"]),
        bundle("app-without", "Application", [VLLM], ["drivers"]),
        bundle("empty-infra", "Fullstack", [], ["notebook"]),
    )
    (missing,) = errors(state, "missing")
    assert missing.reason == Reason.REFERENCE_NOT_FOUND and missing.field == "spec.workloadProfiles[0].name"
    assert "WorkloadProfile 'nope' not found in namespace project-a" in missing.message
    (infra,) = errors(state, "infra-with-app")
    assert infra.field == "spec.workloadProfiles[1].name" and infra.reason == Reason.INVALID_SPEC
    assert "of type Application; an Infrastructure bundle holds no Application or Model" in infra.message
    (app,) = errors(state, "app-without")
    assert "at least one WorkloadProfile of type Application or Model" in app.message
    (empty,) = errors(state, "empty-infra")
    assert empty.field == "spec.type" and "spec.clusterProfiles lists none" in empty.message


def test_who_may_use_which_bundle_and_a_model_deployment_needs_a_model_profile() -> None:
    state = load(
        bundle("app", "Application", [VLLM], ["notebook"]),
        bundle("infra", "Infrastructure", [GPU_INFRA]),
        pool("on-app", "app"),
        pool("ok", "infra"),
        workload("w-infra", "ok", "infra"),
        workload("w-model", "ok", "app", model=True),
        workload("w-gone", "ok", "nope"),
    )
    (on_app,) = errors(state, "on-app")
    assert on_app.field == "spec.profileBundleRef.name" and on_app.reason == Reason.INVALID_SPEC
    assert (
        "profile bundle app is of type Application; a ComputePool uses an Infrastructure or "
        in on_app.message
    )
    (w_infra,) = errors(state, "w-infra")
    assert "an AIWorkload uses an Application or Fullstack bundle" in w_infra.message
    (w_model,) = errors(state, "w-model")
    assert (
        "needs a bundle with a WorkloadProfile of type Model; profile bundle app has none" in w_model.message
    )
    (gone,) = errors(state, "w-gone")
    assert gone.reason == Reason.REFERENCE_NOT_FOUND
    assert not errors(state, "ok")


def test_a_bundle_beside_a_workload_profile_ref_is_an_error() -> None:
    state = load(
        bundle("infra", "Infrastructure", [GPU_INFRA]),
        pool("both", "infra", "  workloadProfileRef: {name: vllm}\n"),
    )
    (error,) = errors(state, "both")
    assert error.field == "spec.profileBundleRef" and "not with spec.workloadProfileRef" in error.message


def test_an_invalid_bundle_makes_its_users_invalid_not_absent() -> None:
    state = load(bundle("bad", "Infrastructure", [GPU_INFRA], ["nope"]), pool("p", "bad"))
    assert ("ComputePool", NS, "p") in state.invalid
    (error,) = errors(state, "p")
    assert "ProfileBundle project-a/bad is invalid (see its errors); this resource is kept" in error.message


def test_unknown_kind_spelt_close_to_profile_bundle_gets_a_did_you_mean() -> None:
    state = load(
        bundle("b", "Infrastructure", [GPU_INFRA]).replace("kind: ProfileBundle", "kind: ProfileBundel")
    )
    (error,) = errors(state, "b")
    assert "did you mean ProfileBundle?" in error.message


# --- the catalogue (plan time) -----------------------------------------------------------------------


def _bundle(kind: str, uids: list[str]) -> ProfileBundle:
    state = load(bundle("b", kind, uids, ["vllm"] if kind == "Application" else []))
    found = state.get(ProfileBundle, NS, "b")
    assert found is not None, state.diagnostics
    return found


def test_catalogue_rules_name_the_bundle_and_the_uid() -> None:
    assert bundle_problem(_bundle("Infrastructure", [GPU_INFRA, DCGM]), CATALOGUE) is None
    assert bundle_problem(_bundle("Fullstack", [FULL, VLLM]), CATALOGUE) is None
    late = bundle_problem(_bundle("Fullstack", [VLLM, FULL]), CATALOGUE)
    assert late is not None and "cluster profile full-1 is its full profile and comes first" in late
    assert bundle_problem(_bundle("Application", [VLLM]), CATALOGUE) is None
    unknown = bundle_problem(_bundle("Infrastructure", [GPU_INFRA, "66aa01"]), CATALOGUE)
    assert unknown == "profile bundle b: cluster profile 66aa01 unknown to Palette"
    two = bundle_problem(_bundle("Fullstack", [FULL, INFRA]), CATALOGUE)
    assert two is not None and "cluster profile infra-1 is a second infra or full profile" in two
    none = bundle_problem(_bundle("Infrastructure", [DCGM]), CATALOGUE)
    assert none is not None and "addon-dcgm is of type add-on" in none
    app = bundle_problem(_bundle("Application", [VLLM, INFRA]), CATALOGUE)
    assert app is not None and "cluster profile infra-1 is of type infra; an Application bundle" in app
    assert catalogue_of(None) is None
    whole = catalogue_of([{"uid": "a"}, {"uid": "b", "type": "add-on"}])
    assert whole == ProfileCatalogue((("a", "infra"), ("b", "add-on")))


def _inventory(catalogue: dict[str, str] | None = CATALOGUE, used: bool = False, more: int = 0) -> Inventory:
    state = HostState.IN_USE if used else HostState.AVAILABLE
    extra = [machine(f"cpu-{i}", 0, None, tagged=True) for i in range(more)]
    inv = inventory([*cps(1, state=state), machine("g8", 8, state=state), *extra])
    return replace(inv, catalogue=ProfileCatalogue.of(catalogue) if catalogue is not None else None)


def test_a_pool_is_built_from_its_bundle_and_its_workload_attaches_only_the_add_ons() -> None:
    state = load(
        bundle("infra", "Infrastructure", [GPU_INFRA, DCGM], ["drivers"]),
        bundle("full", "Fullstack", [GPU_INFRA, VLLM], ["vllm"]),
        pool("p", "infra"),
        workload("w", "p", "full", model=True),
    )
    assert not state.has_errors, state.diagnostics
    p = state.get(ComputePool, NS, "p")
    assert p is not None
    assert [r.uid for r in platform_cluster_profiles(state, p)] == [GPU_INFRA, DCGM]  # not the Settings'
    found = workload_profile(state, p)
    assert found is not None and found.metadata.name == "drivers"  # its min-nodes applies to the pool
    plan = make_plan(state, _inventory(more=2), [])
    entry = plan.get_pool(NS, "p")
    assert entry is not None and entry.action is Action.CREATE
    assert len(entry.cluster.workers) == 3  # palette.ai/min-nodes: 3 of the bundle's WorkloadProfile
    (w,) = plan.workloads
    assert w.action is WorkloadAction.ADMIT
    assert [r.uid for r in w.cluster_profiles] == [VLLM]  # the pool's own infra is never attached again


def test_a_bundle_unknown_to_palette_rejects_every_user_and_keeps_what_runs() -> None:
    state = load(
        bundle("infra", "Infrastructure", [GPU_INFRA, "66aa-unknown"]),
        pool("new", "infra"),
        pool("running", "infra"),
    )
    running = pool_cluster("running", ["cp-0"], ["g8"])
    plan = make_plan(state, _inventory(used=True), [running])
    new, kept = plan.get_pool(NS, "new"), plan.get_pool(NS, "running")
    assert new is not None and kept is not None
    assert (new.action, new.reason) == (Action.REJECTED, Reason.INVALID_SPEC)
    assert new.cluster.message.startswith(
        "profile bundle infra: cluster profile 66aa-unknown unknown to Palette"
    )
    assert (kept.action, kept.reason) == (Action.REJECTED, Reason.INVALID_SPEC)
    assert kept.cluster.workers == ("g8",) and not kept.cluster.mutating  # keeps its cluster as it is
    # Without a catalogue in the observation nothing is checked here (Palette answers for itself).
    unchecked = make_plan(state, _inventory(None), [])
    found = unchecked.get_pool(NS, "new")
    assert found is not None and found.action is Action.CREATE


def test_a_fullstack_workload_whose_infra_is_not_the_pools_is_rejected() -> None:
    state = load(
        bundle("infra", "Infrastructure", [GPU_INFRA]),
        bundle("full", "Fullstack", [INFRA, VLLM], ["vllm"]),
        pool("p", "infra"),
        workload("w", "p", "full"),
    )
    plan = make_plan(state, _inventory(), [])
    (w,) = plan.workloads
    assert (w.action, w.reason) == (WorkloadAction.REJECTED, Reason.INVALID_SPEC)
    assert (
        "profile bundle full: infrastructure profile infra-1 does not match the one of pool p (infra-2)"
        in (w.message)
    )


def test_a_running_pools_bundle_change_is_an_in_place_update_or_held_when_its_infra_changes() -> None:
    state = load(bundle("infra", "Infrastructure", [GPU_INFRA, DCGM]), pool("p", "infra"))
    running = pool_cluster("p", ["cp-0"], ["g8"])
    inv = _inventory(used=True)

    def entry(recorded: tuple[str, ...]) -> Any:
        found = make_plan(state, inv, [running], pool_profiles={(NS, "p"): recorded}).get_pool(NS, "p")
        assert found is not None
        return found

    same = entry((GPU_INFRA, DCGM))
    assert same.action is Action.UNCHANGED and same.own_profiles == (GPU_INFRA, DCGM)
    added = entry((GPU_INFRA,))
    assert (added.action, added.reason) == (Action.UPDATE, Reason.PROVISIONED)
    assert added.cluster.workers == ("g8",) and not added.cluster.add_workers  # no host moved
    assert added.to_json()["profiles"] == {"attach": [DCGM], "detach": []}
    removed = entry((GPU_INFRA, DCGM, VLLM))
    assert removed.to_json()["profiles"] == {"attach": [], "detach": [VLLM]}
    held = entry((INFRA, DCGM))
    assert (held.action, held.reason) == (Action.REJECTED, Reason.REPLACE_BLOCKED)
    assert held.message == (
        f"infrastructure profile of running pool changes from {INFRA} to {GPU_INFRA}: needs a new cluster "
        "(palette.ai/allow-replace)"
    )
    assert held.own_profiles == (INFRA, DCGM) and not held.cluster.mutating
    assert "profiles" not in same.to_json()


# --- a pool of its own ---------------------------------------------------------------------------------


def own_pool_workload(name: str, bundle_name: str, replicas: int = 2, mig: bool = False) -> str:
    gpus = "{family: NVIDIA-H100, mig: 3g.40gb, count: 1}" if mig else "{family: NVIDIA-H100, count: 2}"
    return f"""\
apiVersion: spectrocloud.com/v1alpha1
kind: AIWorkload
metadata: {{name: {name}, namespace: project-a}}
spec:
  profileBundleRef: {{name: {bundle_name}}}
  replicas: {replicas}
  gpus: [{gpus}]
"""


def test_a_fullstack_workload_without_a_pool_provisions_a_dedicated_pool_of_its_own() -> None:
    state = load(bundle("full", "Fullstack", [FULL, VLLM], ["vllm"]), own_pool_workload("chat", "full"))
    assert not state.has_errors, state.diagnostics
    own = state.get(ComputePool, NS, "chat")
    assert own is not None
    assert own.metadata.labels == {"palette.ai/provisioned-for": "AIWorkload"}
    assert (own.spec.mode, own.spec.profile_bundle_ref, own.spec.compute_profile_ref) == (
        "dedicated",
        LocalRef(name="full"),
        None,  # the Project's ComputeProfile, as any pool without a computeProfileRef
    )
    assert [(g.family, g.count) for g in own.spec.gpus] == [("NVIDIA-H100", 4)]  # 2 GPUs x 2 replicas
    chat = state.get(AIWorkload, NS, "chat")
    assert chat is not None and chat.spec.compute_pool_ref == LocalRef(name="chat")
    assert (
        state.resources[("ComputePool", NS, "chat")].source
        == state.resources[("AIWorkload", NS, "chat")].source
    )

    plan = make_plan(state, _inventory(), [])
    entry = plan.get_pool(NS, "chat")
    assert entry is not None and entry.action is Action.CREATE
    assert entry.to_json()["provisionedFor"] == "chat" and entry.to_json()["mode"] == "dedicated"
    assert entry.labels["palette.ai/provisioned-for"] == "AIWorkload"
    assert [r.uid for r in platform_cluster_profiles(state, own)][:1] == [FULL]
    (w,) = plan.workloads
    assert (w.pool, w.action) == ("chat", WorkloadAction.ADMIT)
    other = plan.get_pool(NS, "chat")
    assert other is not None and "provisionedFor" not in replace(other, provisioned_for=None).to_json()


def test_a_pool_of_its_own_takes_the_workloads_annotations_so_it_may_be_replaced() -> None:
    """The provisioned pool has no document a user could annotate: the workload's annotations are its
    (without them, a change of the bundle's infrastructure profile would be ReplaceBlocked for good)."""
    annotated = own_pool_workload("chat", "full").replace(
        "metadata: {name: chat, namespace: project-a}",
        'metadata: {name: chat, namespace: project-a, annotations: {palette.ai/allow-replace: "true"}}',
    )
    state = load(bundle("full", "Fullstack", [FULL, VLLM], ["vllm"]), annotated)
    assert not state.has_errors, state.diagnostics
    own = state.get(ComputePool, NS, "chat")
    assert own is not None and allow_replace(own)
    plain = load(bundle("full", "Fullstack", [FULL, VLLM], ["vllm"]), own_pool_workload("chat", "full"))
    bare = plain.get(ComputePool, NS, "chat")
    assert bare is not None and not allow_replace(bare)


def test_an_own_pool_name_colliding_with_a_pool_or_platform_is_an_error_naming_both() -> None:
    state = load(
        bundle("full", "Fullstack", [FULL]),
        bundle("infra", "Infrastructure", [GPU_INFRA]),
        pool("chat", "infra"),
        own_pool_workload("chat", "full"),
    )
    (error,) = errors(state, "chat")
    assert (error.kind, error.file, error.field) == ("AIWorkload", "doc3.yaml", "metadata.name")
    assert error.message == (
        "metadata.name: AIWorkload project-a/chat provisions a pool of its own named chat (cluster "
        "project-a-chat), which collides with ComputePool project-a/chat; rename one of the two"
    )
    # Only a Fullstack bundle provisions a pool; MIG instances need a pool with spec.mig.
    other = load(
        bundle("app", "Application", [VLLM], ["vllm"]),
        bundle("full", "Fullstack", [FULL]),
        own_pool_workload("a", "app"),
        own_pool_workload("m", "full", mig=True),
    )
    (app,) = errors(other, "a")
    assert "spec.computePoolRef: required" in app.message and "of type Application" in app.message
    (mig,) = errors(other, "m")
    assert mig.field == "spec.gpus[0].mig"


def test_removing_the_workload_removes_its_pool_counted_as_one_deletion() -> None:
    kept = load(bundle("full", "Fullstack", [FULL]))
    cluster = pool_cluster("chat", ["cp-0"], ["g8"], mode="dedicated")
    cluster = replace(cluster, labels={**cluster.labels, "palette.ai/provisioned-for": "AIWorkload"})
    previous = {(NS, "chat"): [PreviousAdmission((NS, "chat"), (GpuRef("g8", 0), GpuRef("g8", 1)))]}
    plan = make_plan(kept, _inventory(used=True), [cluster], previous=previous, max_deletions=1)
    entry = plan.get_pool(NS, "chat")
    assert entry is not None and entry.action is Action.DELETE, entry
    assert entry.provisioned_for == "chat"
    (w,) = plan.workloads
    assert w.action is WorkloadAction.REMOVE
    # An ordinary pool and its workload removed together are two deletions.
    plain = replace(cluster, labels=pool_cluster("chat", [], [], mode="dedicated").labels)
    blocked = make_plan(kept, _inventory(used=True), [plain], previous=previous, max_deletions=1)
    held = blocked.get_pool(NS, "chat")
    assert held is not None and (held.action, held.reason) == (Action.UNCHANGED, Reason.PRUNE_BLOCKED)


def test_the_project_quota_counts_a_pool_of_its_own() -> None:
    files = [
        ("base.yaml", base(gpu_quota={"NVIDIA-H100": 2}).encode()),
        ("full.yaml", bundle("full", "Fullstack", [FULL]).encode()),
        ("chat.yaml", own_pool_workload("chat", "full").encode()),
    ]
    plan = make_plan(load_files(files, revision="r1"), _inventory(), [])
    entry = plan.get_pool(NS, "chat")
    assert entry is not None and (entry.action, entry.reason) == (Action.REJECTED, Reason.QUOTA_EXCEEDED)
    # Counted as any dedicated pool: the GPUs of the hosts it would take (the one 8-GPU host for its 4).
    assert entry.message == "needs 8 NVIDIA-H100 GPUs; project-a uses 0 of 2"
