"""Which cluster profiles a platform's cluster is built from, and what happens when there are none."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from reconciler.manifests import load_files
from reconciler.model.base import ClusterProfileRef
from reconciler.model.conditions import Reason
from reconciler.model.diagnostics import Severity
from reconciler.model.resources import ComputeProfile, Settings, WorkloadProfile
from reconciler.plan import Action, make_plan
from reconciler.profiles import (
    NO_CLUSTER_PROFILE,
    cluster_profiles,
    platform_cluster_profiles,
    reject_unbuildable,
)
from tests._allocate_support import (
    INFRA_PROFILE_UID,
    NS,
    cluster,
    cps,
    desired,
    inventory,
    machine,
    platform,
    profile,
    resource,
    settings,
)
from tests._manifests_support import namespace_yaml


def _workload(*uids: str, name: str = "wp") -> WorkloadProfile:
    spec = {"clusterProfiles": [{"uid": u, "packValues": [{"name": u}]} for u in uids]}
    return resource(WorkloadProfile, "mural.spectrocloud.com/v1alpha1", name, spec)


def _uids(refs: tuple[ClusterProfileRef, ...]) -> list[str]:
    return [r.uid for r in refs]


def test_settings_profiles_come_first_then_the_workload_profiles() -> None:
    refs = cluster_profiles(
        settings(cluster_profiles=["infra-1", "infra-2"]), _workload("addon-1", "addon-2")
    )
    assert _uids(refs) == ["infra-1", "infra-2", "addon-1", "addon-2"]
    assert refs[2].pack_values == [{"name": "addon-1"}]


def test_either_source_alone_is_enough_and_neither_is_empty() -> None:
    assert _uids(cluster_profiles(settings(cluster_profiles=["infra"]), None)) == ["infra"]
    assert _uids(cluster_profiles(None, _workload("full"))) == ["full"]
    assert cluster_profiles(None, None) == ()
    assert cluster_profiles(settings(cluster_profiles=[]), _workload()) == ()


@given(
    st.lists(st.sampled_from("abcdef"), max_size=6),
    st.lists(st.sampled_from("abcdef"), max_size=6),
)
def test_every_named_uid_is_sent_once_in_first_mention_order(first: list[str], second: list[str]) -> None:
    refs = cluster_profiles(settings(cluster_profiles=first), _workload(*second))
    assert _uids(refs) == list(dict.fromkeys(first + second))


def test_a_platform_uses_the_settings_of_its_compute_profile_else_its_project() -> None:
    own = Settings.model_validate(
        {
            **settings(cluster_profiles=["own-infra"]).model_dump(by_alias=True),
            "metadata": {"name": "own", "namespace": NS},
        }
    )
    base = profile()
    routed = ComputeProfile.model_validate(
        {
            **base.model_dump(by_alias=True, exclude_none=True),
            "spec": {
                **base.spec.model_dump(by_alias=True, exclude_none=True),
                "settingsRef": {"name": "own"},
            },
        }
    )
    p = platform("p")
    on_project = desired(p, settings(cluster_profiles=["project-infra"]))
    assert _uids(platform_cluster_profiles(on_project, p)) == ["project-infra"]
    assert _uids(platform_cluster_profiles(desired(p, routed, own, settings()), p)) == ["own-infra"]


def test_plan_rejects_a_platform_without_any_cluster_profile_as_invalid_spec() -> None:
    p = platform("p")
    plan = make_plan(desired(p, settings(cluster_profiles=[])), inventory(cps(1)), [])
    [entry] = plan.platforms
    assert entry.action is Action.INVALID
    assert entry.reason is Reason.INVALID_SPEC
    assert entry.message.startswith(NO_CLUSTER_PROFILE)
    assert not plan.placeable


def test_a_rejected_platform_keeps_its_cluster_and_leaves_free_hosts_to_others() -> None:
    bare = platform("bare", {"NVIDIA-H100": 8}, workload_name="none")
    good = platform("good", {"NVIDIA-H100": 8}, workload_name="stack")
    machines = [*cps(2), machine("gpu-1", 8)]
    existing = cluster("bare", ["cp-0"], [])
    state = desired(
        bare, good, settings(cluster_profiles=[]), _workload(name="none"), _workload("x", name="stack")
    )
    plan = make_plan(state, inventory(machines), [existing])
    by_name = {e.name: e for e in plan.platforms}
    assert by_name["bare"].action is Action.INVALID
    assert by_name["bare"].existing == existing and by_name["bare"].control_plane == ("cp-0",)
    assert by_name["good"].action is Action.CREATE and by_name["good"].workers == ("gpu-1",)


def test_suspended_platforms_are_left_alone_not_rejected() -> None:
    p = platform("p", suspend=True)
    state = desired(p, settings(cluster_profiles=[]))
    assert reject_unbuildable(state) is state
    [entry] = make_plan(state, inventory(cps(1)), []).platforms
    assert entry.action is Action.SUSPENDED


def test_the_plan_carries_the_machines_it_was_made_from() -> None:
    machines = inventory([*cps(1), machine("gpu-1", 8)])
    plan = make_plan(desired(platform("p", {"NVIDIA-H100": 8})), machines, [])
    assert plan.machines == machines.by_uid()


NAMESPACE = namespace_yaml("a", cluster_profiles=())  # Settings without clusterProfiles
PLATFORM = """\
apiVersion: palette.ai/v1alpha1
kind: MLPlatform
metadata: {name: p, namespace: a}
spec: {}
"""


def test_validate_warns_about_a_platform_without_cluster_profiles_and_keeps_it_valid() -> None:
    state = load_files([("ns.yaml", NAMESPACE.encode()), ("platforms/p.yaml", PLATFORM.encode())])
    assert not state.invalid and len(state.platforms()) == 1
    [warning] = state.diagnostics
    assert warning.severity is Severity.WARNING
    assert (warning.file, warning.line, warning.kind, warning.name) == (
        "platforms/p.yaml",
        1,
        "MLPlatform",
        "p",
    )
    assert NO_CLUSTER_PROFILE in warning.message
    with_profiles = namespace_yaml("a", cluster_profiles=[INFRA_PROFILE_UID])
    state = load_files([("ns.yaml", with_profiles.encode()), ("platforms/p.yaml", PLATFORM.encode())])
    assert state.diagnostics == []
    assert isinstance(state.get(Settings, "a", "palette"), Settings)
