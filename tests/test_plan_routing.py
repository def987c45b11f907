"""``plan`` and ``run`` agree across Palette projects: one routing function, one scoping, one prune guard."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.commands import plan as plan_command
from reconciler.inventory import discover
from reconciler.manifests import load_files
from reconciler.model.conditions import Reason
from reconciler.model.desired import DesiredState
from reconciler.model.observed import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from reconciler.plan import Action, Observed, merge, plan_targets
from reconciler.resolve import Target, route
from reconciler.runtime.preview import PreviewOptions, preview
from reconciler.runtime.preview_observe import SnapshotObserver
from reconciler.snapshots import Snapshot, load_snapshot, managed_clusters, read_snapshot_of
from tests._allocate_support import cluster, cps, desired, inventory, machine, platform
from tests._palette_support import PROJECT_A, PROJECT_B, client, host, running

EAST, WEST = PROJECT_A, PROJECT_B


def namespace_files(ns: str, project: str | None, platforms: dict[str, dict[str, int]]) -> dict[str, str]:
    """A namespace: Project, ComputeProfile (1 control plane), Settings of ``project`` (none if None)."""
    files = {
        f"{ns}/project.yaml": f"""apiVersion: mural.sh/v1alpha1
kind: Project
metadata: {{name: {ns}, namespace: {ns}}}
spec:
  computeProfileRef: {{name: profile}}
{"  settingsRef: {name: palette}" if project else ""}
""",
        f"{ns}/profile.yaml": f"""apiVersion: palette.ai/v1alpha1
kind: ComputeProfile
metadata: {{name: profile, namespace: {ns}}}
spec:
  controlPlaneDefaults: {{nodeCount: 1}}
""",
    }
    if project:
        files[f"{ns}/settings.yaml"] = f"""apiVersion: mural.sh/v1alpha1
kind: Settings
metadata: {{name: palette, namespace: {ns}}}
spec:
  palette:
    hostUrl: https://api.spectrocloud.com
    defaultProjectID: "{project}"
    apiKeySecretRef: {{env: PALETTE_API_KEY}}
    clusterProfiles: [{{uid: infra-profile}}]
"""
    for i, (name, gpus) in enumerate(sorted(platforms.items())):
        requests = "".join(f"\n    - {{family: {f}, count: {c}}}" for f, c in sorted(gpus.items()))
        files[f"{ns}/{name}.yaml"] = f"""apiVersion: palette.ai/v1alpha1
kind: MLPlatform
metadata: {{name: {name}, namespace: {ns}}}
spec:
  gpus:{requests or " []"}
  edge: {{vip: 10.{sum(map(ord, ns)) % 250}.{i}.1}}
"""
    return files


def load(files: dict[str, str]) -> DesiredState:
    return load_files([(path, text.encode()) for path, text in files.items()], revision="r1")


def offline_plan(desired_state: DesiredState, snapshot: Snapshot, max_deletions: int = 1) -> dict[str, Any]:
    """Exactly what ``plan --inventory FILE`` computes (the same entry point, without the printing)."""
    observer = SnapshotObserver(Path("inventory.json"), read_snapshot_of(snapshot))
    options = PreviewOptions(max_deletions=max_deletions)
    return preview(desired_state, observer, options=options).plan.to_json()


def run_plan(desired_state: DesiredState, server_url: str, server: Any) -> dict[str, Any]:
    """What ``run`` plans: route with ``--palette``, read each target through the client (the emulator
    scopes by the ``ProjectUid`` header), plan every target with the one prune guard."""
    routing = route(desired_state, server_url)
    observed: dict[Target, Observed] = {}
    for target in routing.targets:
        with client(server, project_uid=target.project_uid) as palette:
            hosts = palette.search_edge_hosts()
            raw = palette.search_clusters({MANAGED_BY_LABEL: MANAGED_BY_VALUE})
        found = discover(hosts)
        observed[target] = Observed(found, managed_clusters(raw, hosts, found.by_uid()))
    plans = plan_targets(desired_state, routing, observed, max_deletions=1)
    diagnostics = next(iter(plans.values())).diagnostics if plans else desired_state.diagnostics
    return merge(desired_state.revision, plans, diagnostics).to_json()


def test_offline_plan_places_each_namespace_only_on_hosts_of_its_settings_project(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """edge-west asks for MI300X, which only the east project has: rejected, as run rejects it."""
    files = {
        **namespace_files("edge-east", EAST, {"h100": {"NVIDIA-H100": 8}}),
        **namespace_files("edge-west", WEST, {"mi300": {"AMD-MI300X": 8}}),
    }
    for path, text in files.items():
        (tmp_path / "repo" / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "repo" / path).write_text(text)
    mi300 = host("east-mi300", gpus=8, project=EAST)
    mi300["spec"]["device"]["gpus"][0].update(vendor="AMD", model="Aqua Vanjaram [Instinct MI300X]")
    hosts = [
        host("east-cp", project=EAST),
        host("east-h100", gpus=8, project=EAST),
        mi300,
        host("west-cp", project=WEST),
    ]
    snapshot_file = tmp_path / "inventory.json"
    snapshot_file.write_text(json.dumps({"edgeHosts": hosts, "clusters": []}))
    code = plan_command.run(str(tmp_path / "repo"), None, snapshot_file, None, 1, "json")
    out = json.loads(capsys.readouterr().out)
    actions = {(p["namespace"], p["name"]): (p["action"], p["reason"]) for p in out["platforms"]}
    assert actions == {
        ("edge-east", "h100"): ("create", "Provisioning"),
        ("edge-west", "mi300"): ("rejected", "InsufficientCompute"),
    }
    assert code == plan_command.EXIT_REJECTED
    with running(hosts) as server:
        out.pop("basis")
        assert run_plan(load(files), server.url, server) == {**out, "revision": "r1"}


def test_x86_64_hosts_scale_in_place_offline(tmp_path: Path) -> None:
    """archType x86_64 is amd64: a cluster on such hosts scales, it is not a replace."""
    hosts = [host("cp", arch="x86_64"), host("g1", gpus=8, arch="x86_64"), host("g2", gpus=8, arch="x86_64")]
    for h in hosts[:2]:
        h["status"].update(state="in-use", inUseClustersRef=[{"uid": "c1", "name": "team-train"}])
    labels = {MANAGED_BY_LABEL: MANAGED_BY_VALUE, "palette.ai/namespace": "team", "palette.ai/name": "train"}
    clusters = [
        {"metadata": {"uid": "c1", "name": "team-train", "labels": labels}, "status": {"state": "Running"}}
    ]
    state = load(namespace_files("team", "p1", {"train": {"NVIDIA-H100": 16}}))
    out = offline_plan(state, Snapshot(hosts, clusters))
    (entry,) = out["platforms"]
    assert (entry["action"], entry["workers"]) == ("scale", ["g1", "g2"])


def test_prune_guard_message_counts_every_deletion_of_the_pass() -> None:
    """Two orphans in the east project and one in the west: every blocked entry says 3, the pass's count."""
    east, west = Target("https://palette", EAST), Target("https://palette", WEST)
    state = desired(platform("kept", {}))
    routing = route(state, "https://palette")
    machines = [*cps(1), machine("g", 8)]
    observed = {
        east: Observed(inventory(machines), [cluster("a", ["cp-0"], []), cluster("b", ["g"], [])]),
        west: Observed(inventory([]), [cluster("c", [], [], ns="other")]),
    }
    routing.platforms = {east: {("project-a", "kept")}}
    plans = plan_targets(state, routing, observed, max_deletions=1)
    blocked = [p for plan in plans.values() for p in plan.platforms if p.reason is Reason.PRUNE_BLOCKED]
    assert len(blocked) == 3
    assert {p.message for p in blocked} == {
        "would delete 3 platform clusters, more than --max-deletions 1; nothing is deleted"
        " (approve with the commit trailer Reconciler-Allow-Deletions: 3, or split the change)"
    }
    assert not any(p.action is Action.DELETE for plan in plans.values() for p in plan.platforms)


def test_a_platform_whose_namespace_lost_its_settings_keeps_its_cluster() -> None:
    """No Settings (no target) this pass is not "gone from git": its cluster is never an orphan, whatever
    --max-deletions allows."""
    east = Target("https://palette", EAST)
    state = desired(platform("kept", {}), platform("orphaned", {}))
    routing = route(state, "https://palette")
    routing.platforms = {east: {("project-a", "kept")}}
    routing.unavailable = {("project-a", "orphaned"): "namespace project-a has no Settings"}
    observed = {east: Observed(inventory(cps(2)), [cluster("orphaned", ["cp-1"], [])])}
    plans = plan_targets(state, routing, observed, max_deletions=5)
    entries = [p for plan in plans.values() for p in plan.platforms]
    assert not any(p.action is Action.DELETE for p in entries)
    assert ("project-a", "orphaned") not in {p.key for p in entries}


# --- the property: plan with the snapshot == what run plans through the emulator -------------------

PROJECTS = (EAST, WEST)


@st.composite
def fleets(draw: st.DrawFn) -> list[dict[str, Any]]:
    hosts = []
    for i in range(draw(st.integers(1, 12))):
        gpus = draw(st.sampled_from([0, 0, 2, 4, 8]))
        hosts.append(
            host(
                f"h{i:02d}",
                gpus=gpus,
                family=draw(st.sampled_from(["H100", "A100"])),
                arch=draw(st.sampled_from(["amd64", "amd64", "x86_64", "arm64"])),
                project=draw(st.sampled_from([EAST, EAST, WEST, WEST, None])),
                labels=draw(st.sampled_from([{}, {}, {"palette.ai.rg/pool": "1"}])),
                health=draw(st.sampled_from(["healthy"] * 6 + ["unhealthy"])),
            )
        )
    return hosts


@st.composite
def repositories(draw: st.DrawFn) -> dict[str, str]:
    files: dict[str, str] = {}
    for n in range(draw(st.integers(1, 3))):
        platforms = {
            f"p{i}": {
                f: draw(st.sampled_from([1, 4, 8, 12]))
                for f in draw(st.sets(st.sampled_from(["NVIDIA-H100", "NVIDIA-A100"]), max_size=2))
            }
            for i in range(draw(st.integers(0, 3)))
        }
        files.update(namespace_files(f"ns{n}", draw(st.sampled_from([EAST, WEST, None])), platforms))
    return files


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(repositories(), fleets())
def test_property_offline_plan_equals_what_run_plans_through_the_emulator(
    files: dict[str, str], hosts: list[dict[str, Any]]
) -> None:
    state = load(files)
    offline = offline_plan(state, Snapshot(hosts, []))
    with running(hosts) as server:
        online = run_plan(state, server.url, server)
    assert offline == online


# --- the whole thing: `reconciler plan --inventory` (a process) vs `run --once` against the emulator ---


def test_plan_command_shows_exactly_what_the_next_run_pass_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess
    import sys

    from reconciler.emulator import EmulatorServer
    from reconciler.runtime import wiring
    from reconciler.runtime.options import ControllerOptions
    from tests._git_support import RemoteRepo

    files = {
        **namespace_files("edge-east", EAST, {"train": {"NVIDIA-H100": 16}, "small": {"NVIDIA-H100": 4}}),
        **namespace_files("edge-west", WEST, {"mi300": {"AMD-MI300X": 8}, "h100": {"NVIDIA-H100": 8}}),
    }
    mi300 = host("east-mi300", gpus=8, project=EAST)
    mi300["spec"]["device"]["gpus"][0].update(vendor="AMD", model="Aqua Vanjaram [Instinct MI300X]")
    hosts = [
        host("east-cp", project=EAST, arch="x86_64"),
        host("east-a8", gpus=8, project=EAST, arch="x86_64"),
        host("east-b4", gpus=4, project=EAST, arch="x86_64"),
        host("east-c8", gpus=8, project=EAST),
        host("east-cp2", project=EAST),
        mi300,
        host("west-cp", project=WEST),
        host("west-g8", gpus=8, project=WEST),
    ]
    for h in hosts[:3]:
        h["status"].update(state="in-use", inUseClustersRef=[{"uid": "c1", "name": "edge-east-train"}])
    labels = {
        MANAGED_BY_LABEL: MANAGED_BY_VALUE,
        "palette.ai/namespace": "edge-east",
        "palette.ai/name": "train",
    }
    clusters = [
        {
            "metadata": {"uid": "c1", "name": "edge-east-train", "labels": labels},
            "status": {"state": "Running"},
        }
    ]
    snapshot = tmp_path / "inventory.json"
    snapshot.write_text(json.dumps({"edgeHosts": hosts, "clusters": clusters}))
    (tmp_path / "git").mkdir()
    remote = RemoteRepo(tmp_path / "git")
    remote.commit(files, "two projects")

    planned = subprocess.run(
        [
            sys.executable,
            "-m",
            "reconciler.cli",
            "plan",
            "--repo",
            str(remote.bare),
            "--inventory",
            str(snapshot),
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert planned.returncode == plan_command.EXIT_REJECTED, planned.stderr
    shown = {
        (p["namespace"], p["name"]): (p["action"], p["controlPlane"], p["workers"])
        for p in json.loads(planned.stdout)["platforms"]
    }
    assert shown[("edge-east", "train")] == ("scale", ["east-cp"], ["east-a8", "east-c8"])
    assert shown[("edge-west", "mi300")][0] == "rejected"

    key = "plan-equals-apply-key-0123456789"
    monkeypatch.setenv("PALETTE_API_KEY", key)
    with EmulatorServer.from_snapshot(load_snapshot(snapshot), key) as emulator:
        options = ControllerOptions(repo=str(remote.bare), palette_url=emulator.url, cache_dir=tmp_path / "c")
        ctl = wiring.build(options)
        try:
            result = ctl.reconcile_once()
        finally:
            ctl.close()
    done = {p.key: (str(p.action), sorted(p.control_plane), sorted(p.workers)) for p in result.plan}
    assert done == shown
