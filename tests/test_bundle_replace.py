"""A running bundle-built pool whose infrastructure profile changes (docs/bundles.md): held without
``palette.ai/allow-replace``, a ``replace`` with it; a pool scaled while its add-ons change keeps what its
cluster has in its status until the next pass updates it. Pure: the real loader and planner."""

from __future__ import annotations

from dataclasses import replace

from reconciler.inventory import HostState, Inventory
from reconciler.model.catalogue import ProfileCatalogue
from reconciler.model.conditions import Reason
from reconciler.plan import Action, PoolPlan, make_plan
from tests._allocate_support import cps, inventory, machine, pool_cluster
from tests.test_bundles import CATALOGUE, DCGM, GPU_INFRA, INFRA, NS, bundle, load

RUNNING = pool_cluster("p", ["cp-0"], ["g8"])


def pool(gpus: int = 8, allow_replace: bool = False) -> str:
    annotations = '\n  annotations: {palette.ai/allow-replace: "true"}' if allow_replace else ""
    return f"""\
apiVersion: spectrocloud.com/v1alpha1
kind: ComputePool
metadata:
  name: p
  namespace: project-a{annotations}
spec:
  mode: shared
  gpus: [{{family: NVIDIA-H100, count: {gpus}}}]
  profileBundleRef: {{name: stack}}
"""


def _inventory() -> Inventory:
    """The running pool's hosts (in use) and one more free 8-GPU host to scale onto."""
    used = [*cps(1, state=HostState.IN_USE), machine("g8", 8, state=HostState.IN_USE)]
    inv = inventory([*used, machine("g8b", 8)])
    return replace(inv, catalogue=ProfileCatalogue.of(CATALOGUE))


def planned(recorded: tuple[str, ...], *, gpus: int = 8, allow: bool = False) -> PoolPlan:
    state = load(bundle("stack", "Infrastructure", [GPU_INFRA, DCGM]), pool(gpus, allow))
    assert not state.has_errors, state.diagnostics
    plan = make_plan(state, _inventory(), [RUNNING], pool_profiles={(NS, "p"): recorded})
    found = plan.get_pool(NS, "p")
    assert found is not None
    return found


def test_with_allow_replace_an_infrastructure_change_replaces_the_cluster_on_its_hosts() -> None:
    entry = planned((INFRA, DCGM), allow=True)
    assert (entry.action, entry.reason) == (Action.REPLACE, Reason.PROVISIONING)
    assert entry.message == (
        f"replace cluster {RUNNING.name}: its infrastructure profile changes from {INFRA} to {GPU_INFRA} "
        "(palette.ai/allow-replace); deleted now, created from the bundle once it is gone"
    )
    cluster = entry.cluster
    assert cluster.mutating and cluster.existing == RUNNING
    assert (cluster.remove_workers, cluster.remove_control_plane) == (("g8",), ("cp-0",))
    assert (cluster.workers, cluster.control_plane) == (("g8",), ("cp-0",))
    assert entry.own_profiles == (INFRA, DCGM)  # what the old cluster has, until it is gone
    assert entry.to_json()["action"] == "replace"


def test_without_the_annotation_it_is_held_even_while_the_pool_would_scale() -> None:
    held = planned((INFRA, DCGM), gpus=16)
    assert (held.action, held.reason) == (Action.REJECTED, Reason.REPLACE_BLOCKED)
    assert "needs a new cluster (palette.ai/allow-replace)" in held.message
    assert held.cluster.workers == ("g8",) and not held.cluster.mutating  # kept as it is, not scaled
    assert held.own_profiles == (INFRA, DCGM)


def test_a_scale_with_an_add_on_change_keeps_the_recorded_profiles_for_the_next_pass_to_update() -> None:
    scaled = planned((GPU_INFRA,), gpus=16)
    assert scaled.action is Action.SCALE and scaled.cluster.add_workers == ("g8b",)
    assert scaled.own_profiles == (GPU_INFRA,)  # not yet attached: the next pass attaches DCGM
    settled = planned((GPU_INFRA,))
    assert settled.action is Action.UPDATE and settled.to_json()["profiles"]["attach"] == [DCGM]
