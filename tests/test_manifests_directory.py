"""A directory as a source: which files are read, and what is refused."""

from __future__ import annotations

import os
from pathlib import Path

from reconciler.manifests import MAX_FILE_BYTES
from reconciler.source.directory import load_directory, read_directory

COMPUTE = "apiVersion: palette.ai/v1alpha1\nkind: Compute\nmetadata: {{name: {name}, namespace: ns}}\n"


def _tree(root: Path) -> None:
    (root / "a" / "b").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "top.yaml").write_text(COMPUTE.format(name="top"))
    (root / "a" / "b" / "deep.yml").write_text(COMPUTE.format(name="deep"))
    (root / ".git" / "config.yaml").write_text("not: read")
    (root / "inventory.json").write_text('{"edgeHosts": []}')
    (root / "notes.txt").write_text("kind: nothing")


def test_reads_every_yaml_file_with_relative_slash_paths(tmp_path: Path) -> None:
    _tree(tmp_path)
    files, diagnostics = read_directory(tmp_path)
    assert [p for p, _ in files] == ["a/b/deep.yml", "top.yaml"]
    assert diagnostics == []
    state = load_directory(tmp_path, revision="abc")
    assert state.revision == "abc" and state.complete
    assert sorted(state.resources) == [("Compute", "ns", "deep"), ("Compute", "ns", "top")]
    assert state.resources[("Compute", "ns", "deep")].source.file == "a/b/deep.yml"


def test_symlinks_are_never_followed(tmp_path: Path) -> None:
    _tree(tmp_path)
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (outside / "secret.yaml").write_text(COMPUTE.format(name="outside"))
    os.symlink(outside / "secret.yaml", tmp_path / "link.yaml")
    os.symlink(outside, tmp_path / "linked-dir")
    files, diagnostics = read_directory(tmp_path)
    assert [p for p, _ in files] == ["a/b/deep.yml", "top.yaml"]
    assert [(d.file, d.message) for d in diagnostics] == [
        ("link.yaml", "symbolic link not followed; put the manifest itself in the repository"),
        ("linked-dir", "symbolic link not followed; put the manifest itself in the repository"),
    ]
    state = load_directory(tmp_path)
    assert not state.complete
    assert ("Compute", "ns", "outside") not in state.resources


def test_oversized_file_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "big.yaml").write_bytes(b"#" * (MAX_FILE_BYTES + 1))
    files, diagnostics = read_directory(tmp_path)
    assert files == []
    assert diagnostics[0].file == "big.yaml" and "limit is 1048576" in diagnostics[0].message


def test_a_single_file_is_validated_on_its_own(tmp_path: Path) -> None:
    path = tmp_path / "one.yaml"
    path.write_text(COMPUTE.format(name="one"))
    files, diagnostics = read_directory(path)
    assert [p for p, _ in files] == ["one.yaml"] and diagnostics == []
    assert list(load_directory(path).resources) == [("Compute", "ns", "one")]


def test_a_symlink_given_as_the_path_is_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "real.yaml"
    target.write_text(COMPUTE.format(name="real"))
    os.symlink(target, tmp_path / "link.yaml")
    files, diagnostics = read_directory(tmp_path / "link.yaml")
    assert files == [] and len(diagnostics) == 1
