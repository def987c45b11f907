"""What a status commit says, and when a status file changes (docs/status-branch.md), tested as pure
functions: the inputs fingerprint behind ``observedRevision``, and the message built from the diff of
two status trees."""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import given
from hypothesis import strategies as st

from reconciler.manifests import build_desired, parse_file
from reconciler.model.desired import DesiredState
from reconciler.status.changes import (
    body_line,
    commit_message,
    source_trailers,
    status_changes,
    subject,
)
from reconciler.status.render import dump, observed_fields, reconciler_document, resource_inputs
from tests._e2e_support import sample_files

# -- observedRevision -------------------------------------------------------------------------------


def desired_of(files: dict[str, bytes], revision: str = "r") -> DesiredState:
    return build_desired([parse_file(path, data) for path, data in sorted(files.items())], revision)


def edited(files: dict[str, bytes], path: str, change: dict[str, Any]) -> dict[str, bytes]:
    doc = yaml.safe_load(files[path])
    doc["spec"].update(change)
    return {**files, path: yaml.safe_dump(doc).encode()}


SAMPLE = sample_files()
A_PLATFORMS = [("project-a", "clearml-prod"), ("project-a", "cpu-sandbox"), ("project-a", "notebooks")]


def fingerprints(files: dict[str, bytes]) -> dict[tuple[str, str, str], str]:
    desired = desired_of(files)
    keys = [("MLPlatform", ns, n) for ns, n in A_PLATFORMS] + [("Compute", "project-a", "edge-compute")]
    return {key: resource_inputs(desired, *key) for key in keys}


def test_a_change_to_another_namespace_leaves_every_fingerprint_alone() -> None:
    changed = edited(SAMPLE, "project-b/platforms/inference.yaml", {"suspend": True})
    assert fingerprints(changed) == fingerprints(SAMPLE)


def test_comments_and_layout_are_not_inputs() -> None:
    path = "project-a/platforms/notebooks.yaml"
    reformatted = {
        **SAMPLE,
        path: b"# a new comment\n" + yaml.safe_dump(yaml.safe_load(SAMPLE[path])).encode(),
    }
    assert fingerprints(reformatted) == fingerprints(SAMPLE)


def test_a_platform_edit_changes_that_platform_only() -> None:
    before = fingerprints(SAMPLE)
    after = fingerprints(edited(SAMPLE, "project-a/platforms/notebooks.yaml", {"suspend": True}))
    assert {k for k in before if before[k] != after[k]} == {("MLPlatform", "project-a", "notebooks")}


def test_a_referenced_document_is_an_input_of_everything_that_resolves_it() -> None:
    before = fingerprints(SAMPLE)
    profile = edited(SAMPLE, "project-a/computeprofile-edge.yaml", {"minWorkerNodes": 1})
    after = fingerprints(profile)
    changed = {k for k in before if before[k] != after[k]}
    # Every project-a platform resolves edge-compute-profile through the Project; the Compute does not.
    assert changed == {("MLPlatform", ns, n) for ns, n in A_PLATFORMS}
    settings = fingerprints(edited(SAMPLE, "project-a/settings.yaml", {"palette": {"hostUrl": "https://x"}}))
    assert all(settings[k] != before[k] for k in before), "Settings resolve for platforms and the Compute"


def test_an_invalid_or_absent_document_has_its_own_fingerprint() -> None:
    path = "project-a/platforms/notebooks.yaml"
    key = ("MLPlatform", "project-a", "notebooks")
    valid = resource_inputs(desired_of(SAMPLE), *key)
    broken = resource_inputs(desired_of({**SAMPLE, path: SAMPLE[path] + b"  bogusField: 1\n"}), *key)
    absent = resource_inputs(desired_of({k: v for k, v in SAMPLE.items() if k != path}), *key)
    assert len({valid, broken, absent}) == 3


def test_observed_revision_stays_while_the_inputs_stay() -> None:
    first = {"status": observed_fields("r1", "h1", None)}
    assert first["status"] == {"observedRevision": "r1", "inputsHash": "h1"}
    assert observed_fields("r2", "h1", first) == {"observedRevision": "r1", "inputsHash": "h1"}
    assert observed_fields("r3", "h2", first) == {"observedRevision": "r3", "inputsHash": "h2"}
    legacy = {"status": {"observedRevision": "r0"}}  # written before inputsHash existed
    assert observed_fields("r4", "h1", legacy)["observedRevision"] == "r4"


# -- commit messages --------------------------------------------------------------------------------


def platform_file(
    phase: str, reason: str, *, hosts: tuple[str, ...] = (), revision: str = "a" * 40, ready: str = "False"
) -> bytes:
    status: dict[str, Any] = {
        "observedRevision": revision,
        "inputsHash": "0" * 16,
        "phase": phase,
        "conditions": [
            {"type": "Ready", "status": ready, "reason": reason, "message": "m", "lastTransitionTime": "t"}
        ],
    }
    if hosts:
        status["allocation"] = {"controlPlane": list(hosts[:1]), "workers": list(hosts[1:]), "gpus": {}}
    return dump({"apiVersion": "palette.ai/v1alpha1", "kind": "MLPlatform", "status": status})


def path(namespace: str, name: str) -> str:
    return f"{namespace}/mlplatforms/{name}.yaml"


ROOT = {"reconciler.yaml": dump(reconciler_document("main", "r1", [("https://p", None)]))}


def test_one_change_is_named_with_its_phases() -> None:
    before = {**ROOT, path("project-a", "clearml-prod"): platform_file("Provisioning", "Provisioning")}
    after = {**ROOT, path("project-a", "clearml-prod"): platform_file("Running", "Provisioned", ready="True")}
    message = commit_message(before, after)
    assert message.splitlines()[0] == "project-a/clearml-prod: Provisioning -> Running"
    assert (
        message.splitlines()[2] == "MLPlatform project-a/clearml-prod: Provisioning -> Running (Provisioned)"
    )


def test_three_changes_are_listed_by_name() -> None:
    names = ("clearml-prod", "cpu-sandbox", "notebooks")
    before = {path("project-a", n): platform_file("Running", "Provisioned", ready="True") for n in names}
    after = {path("project-a", n): platform_file("Suspended", "Suspended") for n in names}
    assert subject(status_changes(before, after)) == (
        "project-a/clearml-prod, project-a/cpu-sandbox, project-a/notebooks: Running -> Suspended"
    )
    after[path("project-a", "notebooks")] = platform_file("Deleting", "Deleting")
    # Different transitions: each is named while the line stays short, else they are counted.
    assert subject(status_changes(before, after)) == "2 suspended, 1 deleting"
    short = {path("a", n): before[path("project-a", n)] for n in names[:2]}
    short_after = {path("a", "clearml-prod"): after[path("project-a", "clearml-prod")]}
    assert subject(status_changes(short, short_after)) == (
        "a/clearml-prod: Running -> Suspended; a/cpu-sandbox: Running -> removed"
    )


def test_many_changes_are_counted_by_what_happened() -> None:
    before: dict[str, bytes] = {path("p", "scaled"): platform_file("Running", "Provisioned", ready="True")}
    after = {
        f"p/mlplatforms/new-{i:02}.yaml": platform_file("Provisioning", "Provisioning") for i in range(12)
    }
    after[path("p", "scaled")] = platform_file("Provisioning", "Scaling")
    after[path("p", "big")] = platform_file("Rejected", "InsufficientCompute")
    after[path("p", "huge")] = platform_file("Rejected", "GPULimitExceeded")
    after["p/computes/edge.yaml"] = dump({"kind": "Compute", "status": {"availableWorkerCompute": []}})
    message = commit_message(before, after)
    assert message.splitlines()[0] == "12 created, 1 scaled, 2 rejected, 1 Compute updated"
    body = message.split("\n\n")[1].splitlines()
    assert len(body) == 16, "one line per changed resource"
    assert "MLPlatform p/big: new -> Rejected (InsufficientCompute)" in body
    assert "MLPlatform p/scaled: Running -> Provisioning (Scaling)" in body


def test_body_lines_say_hosts_added_and_removed_and_the_new_revision() -> None:
    before = {
        path("ns", "a"): platform_file("Running", "Provisioned", hosts=("h1", "h2", "h3"), ready="True")
    }
    after = {
        path("ns", "a"): platform_file(
            "Provisioning", "Scaling", hosts=("h1", "h2", "h4", "h5"), revision="b" * 40
        )
    }
    [change] = status_changes(before, after)
    assert body_line(change) == (
        "MLPlatform ns/a: Running -> Provisioning (Scaling); hosts +h4 +h5 -h3; observes bbbbbbbbbbbb"
    )
    removed = status_changes(before, {})
    assert [body_line(c) for c in removed] == ["MLPlatform ns/a: Running -> removed"]
    assert subject(removed) == "ns/a: Running -> removed"


def test_an_unchanged_phase_says_what_did_change() -> None:
    running = platform_file("Running", "Provisioned", hosts=("h1",), ready="True")
    moved = platform_file("Running", "Provisioned", hosts=("h1",), ready="True", revision="c" * 40)
    assert subject(status_changes({path("n", "a"): running}, {path("n", "a"): moved})) == (
        "n/a: Running, inputs changed"
    )
    blocked = platform_file("Degraded", "PruneBlocked")
    degraded = platform_file("Degraded", "Provisioned")
    assert subject(status_changes({path("n", "a"): degraded}, {path("n", "a"): blocked})) == (
        "n/a: Degraded, Provisioned -> PruneBlocked"
    )


def test_notes_stay_in_the_body_and_a_root_only_change_is_named() -> None:
    notes = ["main moved back from 1234567 to 89abcde"]
    moved = {"reconciler.yaml": dump(reconciler_document("release", "r2", [("https://p", None)]))}
    message = commit_message(ROOT, moved, notes)
    assert message == "follows release (was main)\n\nmain moved back from 1234567 to 89abcde"
    targets = {"reconciler.yaml": dump(reconciler_document("main", "r2", [("https://q", "p1")]))}
    assert commit_message(ROOT, targets) == "Palette targets +1 -1"


def test_trailers_name_the_config_commit_on_single_lines() -> None:
    sha = "f" * 40
    assert source_trailers(sha, ("Merge pull request #7 from team/x", "Pat <pat@example.com>")) == {
        "Source-Revision": sha,
        "Source-Subject": "Merge pull request #7 from team/x",
        "Source-Author": "Pat <pat@example.com>",
    }
    assert source_trailers(sha, None) == {"Source-Revision": sha}
    assert "\n" not in source_trailers(sha, ("a\nb", "c"))["Source-Subject"]


TREES = st.dictionaries(
    st.sampled_from([path("ns", n) for n in "abcdef"] + ["ns/computes/c.yaml", "reconciler.yaml"]),
    st.sampled_from(
        [
            platform_file("Running", "Provisioned", ready="True"),
            platform_file("Pending", "Provisioning"),
            b"x",
        ]
    ),
)


@given(before=TREES, after=TREES)
def test_the_message_names_exactly_the_resource_files_that_differ(
    before: dict[str, bytes], after: dict[str, bytes]
) -> None:
    changed = {c.path for c in status_changes(before, after)}
    differ = {p for p in set(before) | set(after) if before.get(p) != after.get(p) and p != "reconciler.yaml"}
    assert changed == differ
    body = commit_message(before, after).split("\n\n")
    assert len(body[-1].splitlines()) == len(changed) or not changed
    assert status_changes(after, after) == []


def test_a_compute_line_counts_its_available_hosts() -> None:
    def compute(*hosts: str) -> bytes:
        entry = {"architecture": "AMD64", "available": True, "machines": list(hosts)}
        return dump(
            {"kind": "Compute", "status": {"observedRevision": "r", "availableWorkerCompute": [entry]}}
        )

    where = "ns/computes/edge.yaml"
    lines = [body_line(c) for c in status_changes({}, {where: compute("h1", "h2")})]
    assert lines == ["Compute ns/edge: new; 2 available hosts"]
    [change] = status_changes({where: compute("h1", "h2")}, {where: compute("h2", "h3", "h4")})
    assert body_line(change) == "Compute ns/edge: available hosts +2 -1"
    assert subject([change]) == "ns/edge (Compute): hosts +2 -1"


def test_scaling_records_are_body_paragraphs_before_the_changes() -> None:
    before = {path("n", "a"): platform_file("Provisioning", "Provisioning")}
    after = {path("n", "a"): platform_file("Running", "Provisioned", hosts=("h1",), ready="True")}
    record = "scaled up a by 1 NVIDIA-A100 host (8 GPUs): GPU utilisation 91% > 80%\n\npolicy: n/p\n"
    message = commit_message(before, after, scaling=[record])
    plain = commit_message(before, after)
    head, _, rest = plain.partition("\n\n")
    assert message == f"{head}\n\n{record.strip()}\n\n{rest}"


def _pool_file(admitted: list[str], used: int, scaling: dict[str, Any], mig: dict[str, Any]) -> bytes:
    status = {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True", "reason": "Provisioned", "message": "cluster up"}],
        "capacity": {"NVIDIA-A100": {"total": 8, "admitted": used, "free": 8 - used}},
        "admitted": admitted,
        "mig": mig,
        "scaling": scaling,
    }
    return dump({"apiVersion": "palette.ai/v1alpha1", "kind": "ComputePool", "status": status})


def _workload_file(phase: str, reason: str, message: str) -> bytes:
    ready = {"type": "Ready", "status": "False", "reason": reason, "message": message}
    return dump({"kind": "AIWorkload", "status": {"phase": phase, "conditions": [ready], "pool": "p"}})


def test_a_pool_line_says_what_moved_in_it_and_why() -> None:
    hold = {"decision": "none", "reason": "NoPolicy", "message": "no policy"}
    up = {"decision": "up", "reason": "ScaledUp", "message": "utilisation 0.93 above 0.80 for 10m"}
    layout = {"edge-1": [{"gpu": 0, "instances": [{"profile": "3g.40gb", "start": 0, "workload": "ns/w"}]}]}
    before = {"ns/computepools/p.yaml": _pool_file(["ns/a"], 4, hold, {})}
    after = {"ns/computepools/p.yaml": _pool_file(["ns/a", "ns/w"], 8, up, layout)}
    [change] = status_changes(before, after)
    assert body_line(change) == (
        "ComputePool ns/p: Running -> Running (Provisioned); admitted +ns/w; "
        "NVIDIA-A100 admitted 4/8 -> 8/8 GPUs; "
        "scaling up (ScaledUp): utilisation 0.93 above 0.80 for 10m; MIG layout changed on edge-1"
    )
    assert subject([change]) == "ns/p (ComputePool): Running, admitted +ns/w"


def test_a_workload_line_names_the_reason_and_why_it_waits() -> None:
    why = "needs 4 NVIDIA-A100 GPUs, 1 free in pool p (8 total, 7 admitted)"
    after = {"ns/aiworkloads/w.yaml": _workload_file("Pending", "PoolCapacityExceeded", why)}
    [change] = status_changes({}, after)
    assert body_line(change) == f"AIWorkload ns/w: new -> Pending (PoolCapacityExceeded: {why})"
    admitted = {"ns/aiworkloads/w.yaml": _workload_file("Running", "Admitted", "admitted to pool p")}
    [change] = status_changes(after, admitted)
    assert body_line(change) == "AIWorkload ns/w: Pending -> Running (Admitted: admitted to pool p)"


def test_a_new_pool_line_says_what_it_admitted_without_noise() -> None:
    hold = {"decision": "none", "reason": "NoPolicy", "message": "no policy"}
    after = {"ns/computepools/p.yaml": _pool_file(["ns/a"], 4, hold, {})}
    [change] = status_changes({}, after)
    assert body_line(change) == (
        "ComputePool ns/p: new -> Running (Provisioned: cluster up); admitted +ns/a; "
        "NVIDIA-A100 4/8 GPUs admitted"
    )


def test_a_pool_line_names_the_scaling_decision_as_the_status_file_records_it() -> None:
    """``status.scaling.decision`` is a mapping in a pool's file: the line reads it, never prints it raw."""
    from reconciler.status.changes import Change, pool_notes

    decided = {"decision": "up", "reason": "ScaledUp", "message": "scaled up shared-a100 by 1 host"}
    before = {"phase": "Running", "scaling": {"policy": "p", "decision": {"decision": "none", "reason": "-"}}}
    after = {"phase": "Provisioning", "scaling": {"policy": "p", "decision": decided}}
    path = "b/computepools/shared-a100.yaml"
    notes = pool_notes(Change(path, "ComputePool", "b", "shared-a100", before, after))
    assert "scaling up (ScaledUp): scaled up shared-a100 by 1 host" in notes
    assert not any("{" in note for note in notes)
