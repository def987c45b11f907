"""One invalid document named with ``..`` or in namespace ``.git`` never stops the status writes of the
others: its status is kept under a path built from a digest, and a file another writer added stays."""

from __future__ import annotations

from pathlib import Path

from reconciler.emulator import EmulatorServer
from tests._e2e_support import controller, status_doc
from tests._git_support import RemoteRepo, git

BAD = {
    "project-a/platforms/dotdot.yaml": (
        "apiVersion: mural.sh/v1alpha1\nkind: MLPlatform\nmetadata: {name: '..', namespace: project-a}\n"
        "spec: {}\n"
    ),
    "project-a/platforms/dotgit.yaml": (
        "apiVersion: mural.sh/v1alpha1\nkind: MLPlatform\nmetadata: {name: x, namespace: .git}\nspec: {}\n"
    ),
}


def tree(remote: RemoteRepo) -> list[str]:
    return git("ls-tree", "-r", "--name-only", "reconciler/status", cwd=remote.bare).split()


def test_invalid_names_keep_every_status_write_going(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path
) -> None:
    ctl = controller(remote, emulator, tmp_path)
    ctl.reconcile_once()
    before = tree(remote)
    assert "project-a/mlplatforms/notebooks.yaml" in before
    remote.commit(BAD, "two documents with names no path may hold")

    result = ctl.reconcile_once()
    after = tree(remote)
    ctl.close()
    assert result.commit is not None, result.error
    assert all(".." not in path.split("/") and not path.startswith(".git") for path in after)
    invalid = [p for p in after if "_invalid" in p]
    assert invalid, after
    assert set(before) - {p for p in before if p.startswith("inventory/")} <= set(after)
    assert status_doc(remote, "project-a/mlplatforms/notebooks.yaml")["kind"] == "MLPlatform"
