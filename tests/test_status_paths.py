"""Status file paths come only from valid names; an invalid document's path can never escape or clash."""

from __future__ import annotations

import pytest

from reconciler.status.render import INVALID_DIR, is_status_path, load, parse_previous, status_path
from reconciler.status.store import RECORD_FILE, reconciler_owns


def test_valid_names_give_the_documented_path() -> None:
    assert status_path("MLPlatform", "project-a", "clearml-prod") == "project-a/mlplatforms/clearml-prod.yaml"
    assert status_path("Compute", "project-a", "edge") == "project-a/computes/edge.yaml"
    assert is_status_path("project-a/mlplatforms/clearml-prod.yaml")


@pytest.mark.parametrize(
    ("namespace", "name"),
    [
        ("project-a", ".."),
        ("project-a", "../../x"),
        ("project-a", "A_B"),
        ("project-a", "x" * 64),
        ("project-a", ""),
    ],
)
def test_an_invalid_name_is_keyed_by_a_digest_in_its_namespace(namespace: str, name: str) -> None:
    path = status_path("MLPlatform", namespace, name)
    assert path.startswith("project-a/mlplatforms/_invalid-") and path.count("/") == 2
    assert ".." not in path.split("/") and is_status_path(path)
    assert path != status_path("MLPlatform", namespace, name + "y"), "two bad names, two files"


@pytest.mark.parametrize("namespace", [".git", "..", "a/b", "", "Project"])
def test_an_invalid_namespace_is_keyed_under_the_invalid_directory(namespace: str) -> None:
    path = status_path("MLPlatform", namespace, "x")
    assert path.startswith(f"{INVALID_DIR}/mlplatforms/") and path.count("/") == 2 and is_status_path(path)


@pytest.mark.parametrize(
    "path",
    ["README.md", "project-a/notes/x.yaml", "project-a/mlplatforms/x.txt", "a/b/c/d.yaml", "shards/s.yaml"],
)
def test_other_writers_files_are_not_the_reconcilers(path: str) -> None:
    assert not is_status_path(path) and not reconciler_owns(path)


def test_the_reconciler_owns_its_record_snapshots_and_resource_files() -> None:
    for path in (RECORD_FILE, "inventory/api.example.com-tenant.json", "project-a/computes/edge.yaml"):
        assert reconciler_owns(path)
    assert not reconciler_owns("inventory/deep/x.json")


def test_json_is_parsed_as_json_and_inventory_is_no_status_document() -> None:
    assert load("inventory/x.json", b'{"edgeHosts": [], "a": 1e400}') == {"edgeHosts": [], "a": float("inf")}
    assert load("a.yaml", b"a: [") is None and load("a.json", b"{") is None
    docs = parse_previous({"inventory/x.json": b"{}", "p/mlplatforms/x.yaml": b"status: {phase: Running}\n"})
    assert docs == {"p/mlplatforms/x.yaml": {"status": {"phase": "Running"}}}
