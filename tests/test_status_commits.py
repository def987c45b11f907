"""Status commits against real git and the emulator (docs/status-branch.md): a merge touches only the
status files of the resources it changed, the message names them, and the trailers name the config
commit (sha, subject, author) so that "which pull request caused this" is one ``git log`` away."""

from __future__ import annotations

import time
from pathlib import Path

import yaml

from reconciler.emulator import EmulatorServer
from reconciler.runtime.pipeline import Pipeline
from tests._e2e_support import controller, status_doc, status_tip
from tests._git_support import RemoteRepo, git

STATUS = "reconciler/status"
A_FILES = [
    "project-a/mlplatforms/clearml-prod.yaml",
    "project-a/mlplatforms/cpu-sandbox.yaml",
    "project-a/mlplatforms/notebooks.yaml",
    "project-a/computes/edge-compute.yaml",
]
MERGE = "Merge pull request #12 from team/pause-inference"
MERGER = "Pat Merger <pat@example.com>"


def settle(ctl: Pipeline) -> None:
    """Passes until every platform is Running and a pass commits nothing."""
    for _ in range(40):
        result = ctl.reconcile_once()
        if result.phases and {str(p) for p in result.phases.values()} == {"Running"} and not result.commit:
            return
        time.sleep(0.2)
    raise AssertionError("the platforms did not settle at Running")


def merge_pull_request(
    remote: RemoteRepo, branch: str, edits: dict[str, dict[str, object]], subject: str
) -> str:
    """Commit ``edits`` (spec fields per file) on ``branch`` and merge it into main with ``--no-ff`` as
    :data:`MERGER`, as a forge merges a pull request; push; return the merge commit."""
    work = remote.work
    git("checkout", "-q", "-b", branch, cwd=work)
    for rel, change in edits.items():
        doc = yaml.safe_load((work / rel).read_text())
        doc["spec"].update(change)
        (work / rel).write_text(yaml.safe_dump(doc))
    git("commit", "-qam", f"edit {', '.join(edits)}", cwd=work)
    git("checkout", "-q", "main", cwd=work)
    git("merge", "-q", "--no-ff", "--no-commit", branch, cwd=work)
    git("commit", "-q", f"--author={MERGER}", "-m", subject, cwd=work)
    git("push", "-q", "origin", "main", cwd=work)
    return remote.head()


def history(remote: RemoteRepo, path: str) -> list[str]:
    return git("log", "--format=%H", STATUS, "--", path, cwd=remote.bare).split()


def message(remote: RemoteRepo, rev: str = STATUS) -> str:
    return git("log", "-1", "--format=%B", rev, cwd=remote.bare)


def trailer(remote: RemoteRepo, key: str, rev: str = STATUS) -> str:
    return git("log", "-1", f"--format=%(trailers:key={key},valueonly)", rev, cwd=remote.bare).strip()


def test_a_merge_touches_only_the_files_of_what_it_changed(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path
) -> None:
    first = remote.head()
    ctl = controller(remote, emulator, tmp_path)
    try:
        created = ctl.reconcile_once()
        assert created.commit is not None
        # 5 platforms, 3 pools, 6 workloads; the phase-less files are counted by kind
        assert message(remote).splitlines()[0] == (
            "14 created, 2 Compute updated, 1 Environment updated, 1 Project updated"
        )
        settle(ctl)
        before = {path: history(remote, path) for path in A_FILES}
        assert all(before.values())
        training = status_doc(remote, "project-b/mlplatforms/training.yaml")["status"]

        merge = merge_pull_request(
            remote, "pause-inference", {"project-b/platforms/inference.yaml": {"suspend": True}}, MERGE
        )
        result = ctl.reconcile_once()
        assert result.commit is not None and result.revision == merge

        # Nothing about project-a changed: none of its files was touched.
        assert {path: history(remote, path) for path in A_FILES} == before
        assert status_doc(remote, "project-b/mlplatforms/training.yaml")["status"] == training
        inference = status_doc(remote, "project-b/mlplatforms/inference.yaml")["status"]
        assert isinstance(inference, dict) and isinstance(training, dict)
        assert (inference["phase"], inference["observedRevision"]) == ("Suspended", merge)
        assert training["observedRevision"] == first
        changed = git("diff-tree", "--no-commit-id", "--name-only", "-r", result.commit, cwd=remote.bare)
        assert set(changed.split()) == {"reconciler.yaml", "project-b/mlplatforms/inference.yaml"}

        # The message names the change; the trailers name the config commit as git itself reads it.
        text = message(remote)
        assert text.splitlines()[0] == "project-b/inference: Running -> Suspended"
        assert "MLPlatform project-b/inference: Running -> Suspended (Suspended); observes " in text
        assert trailer(remote, "Source-Revision") == merge
        config = git("log", "-1", "--format=%s%n%an <%ae>", merge, cwd=remote.bare).splitlines()
        assert trailer(remote, "Source-Subject") == config[0] == MERGE
        assert trailer(remote, "Source-Author") == config[1] == MERGER

        # An idle pass commits nothing.
        tip = status_tip(remote)
        assert ctl.reconcile_once().commit is None
        assert status_tip(remote) == tip
    finally:
        ctl.close()


def test_three_changes_are_named_and_each_gets_a_body_line(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path
) -> None:
    ctl = controller(remote, emulator, tmp_path)
    try:
        settle(ctl)
        names = ("clearml-prod", "cpu-sandbox", "notebooks")
        edits = {f"project-a/platforms/{n}.yaml": {"suspend": True} for n in names}
        merge = merge_pull_request(remote, "pause-a", edits, "Merge pull request #13 from team/pause-a")
        assert ctl.reconcile_once().commit is not None
        subject, _, rest = message(remote).partition("\n\n")
        assert subject == (
            "project-a/clearml-prod, project-a/cpu-sandbox, project-a/notebooks: Running -> Suspended"
        )
        body = [line for line in rest.splitlines() if line.startswith("MLPlatform ")]
        assert body == [
            f"MLPlatform project-a/{n}: Running -> Suspended (Suspended); observes {merge[:12]}"
            for n in names
        ]
        assert trailer(remote, "Source-Subject") == "Merge pull request #13 from team/pause-a"
    finally:
        ctl.close()
