"""Which Palette each resource talks to: the ComputeProfile's (or Compute's) Settings, else the Project's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reconciler.manifests import load_files
from reconciler.resolve import Target
from reconciler.runtime import wiring
from reconciler.runtime.options import ControllerOptions

PROJECT = """apiVersion: mural.sh/v1alpha1
kind: Project
metadata: {name: team, namespace: team}
spec: {computeProfileRef: {name: main}, settingsRef: {name: prod}}
"""
SETTINGS = """apiVersion: mural.sh/v1alpha1
kind: Settings
metadata: {{name: {name}, namespace: team}}
spec:
  palette: {{hostUrl: "{url}", defaultProjectID: "{project}", apiKeySecretRef: {{env: {env}}}}}
"""
PROFILE = """apiVersion: palette.ai/v1alpha1
kind: ComputeProfile
metadata: {{name: {name}, namespace: team}}
spec:
  controlPlaneDefaults: {{nodeCount: 1}}
{extra}"""
PLATFORM = """apiVersion: palette.ai/v1alpha1
kind: MLPlatform
metadata: {{name: {name}, namespace: team}}
spec:
  computeProfileRef: {{name: {profile}}}
  edge: {{vip: {vip}}}
{extra}"""
COMPUTE = """apiVersion: palette.ai/v1alpha1
kind: Compute
metadata: {{name: {name}, namespace: team}}
spec: {spec}
"""


def routed(tmp_path: Path, palette_url: str | None = None) -> Any:
    files = {
        "project.yaml": PROJECT,
        "prod.yaml": SETTINGS.format(name="prod", url="https://prod.example", project="p1", env="PROD_KEY"),
        "lab.yaml": SETTINGS.format(name="lab", url="https://lab.example/", project="p2", env="LAB_KEY"),
        "main.yaml": PROFILE.format(name="main", extra=""),
        "labprofile.yaml": PROFILE.format(name="labprofile", extra="  settingsRef: {name: lab}\n"),
        "a.yaml": PLATFORM.format(name="a", profile="main", vip="10.0.0.1", extra=""),
        "b.yaml": PLATFORM.format(name="b", profile="labprofile", vip="10.0.0.2", extra=""),
        "broken.yaml": PLATFORM.format(
            name="broken", profile="labprofile", vip="10.0.0.3", extra="  bogus: 1\n"
        ),
        "c1.yaml": COMPUTE.format(name="c1", spec="{}"),
        "c2.yaml": COMPUTE.format(name="c2", spec="{settingsRef: {name: lab}}"),
    }
    desired = load_files([(k, v.encode()) for k, v in files.items()], revision="r1")
    assert ("MLPlatform", "team", "broken") in desired.invalid
    options = ControllerOptions(repo=str(tmp_path / "unused.git"), palette_url=palette_url)
    return wiring.build(options, environ={}).parts.observer.route(desired)


def test_platforms_follow_their_compute_profile_settings_else_the_project(tmp_path: Path) -> None:
    routing = routed(tmp_path)
    prod, lab = Target("https://prod.example", "p1"), Target("https://lab.example", "p2")
    assert routing.platforms == {prod: {("team", "a"), ("team", "broken")}, lab: {("team", "b")}}
    assert routing.computes == {("team", "c1"): prod, ("team", "c2"): lab}
    assert routing.unavailable == {}


def test_palette_flag_points_every_resource_at_one_endpoint_keeping_project_scopes(tmp_path: Path) -> None:
    routing = routed(tmp_path, palette_url="http://127.0.0.1:8080")
    targets = set(routing.platforms)
    assert targets == {Target("http://127.0.0.1:8080", "p1"), Target("http://127.0.0.1:8080", "p2")}
