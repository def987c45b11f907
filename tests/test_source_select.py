"""Which files are manifests: the rule itself (pure), then the same choice from a directory and from git."""

from __future__ import annotations

import os
from pathlib import Path

import git as gitpython
import pytest

from reconciler.source.directory import MissingSubtree, read_directory
from reconciler.source.errors import SourceError
from reconciler.source.git import GitSource, list_yaml_entries
from reconciler.source.revision import read_revision
from reconciler.source.select import FileSelection, SelectionError, normalize_subtree
from tests._git_support import git

IGNORE = """\
# comments and blank lines are ignored

drafts/
*.tmpl.yaml
!keep.tmpl.yaml
/top-only.yaml
archive/**/old-*.yml
"""


@pytest.mark.parametrize(
    ("path", "selected"),
    [
        ("platform.yaml", True),
        ("team/a/platform.YML", True),
        ("README.md", False),
        (".gitlab-ci.yml", False),
        (".pre-commit-config.yaml", False),
        (".github/workflows/reconciler.yml", False),
        ("team/.hidden/platform.yaml", False),
        ("team/.platform.yaml", False),
        ("drafts/platform.yaml", False),
        ("team/drafts/platform.yaml", False),
        ("team/drafts-old/platform.yaml", True),
        ("a.tmpl.yaml", False),
        ("team/keep.tmpl.yaml", True),
        ("top-only.yaml", False),
        ("team/top-only.yaml", True),
        ("archive/2024/q1/old-gpu.yml", False),
        ("archive/2024/q1/new-gpu.yml", True),
    ],
)
def test_the_rule(path: str, selected: bool) -> None:
    assert FileSelection(IGNORE).selects(path) is selected


def test_a_file_in_an_ignored_directory_cannot_be_re_included() -> None:
    """As in git: the directory is never entered, so ``!`` on a file inside it changes nothing."""
    selection = FileSelection("drafts/\n!drafts/keep.yaml\n")
    assert not selection.selects("drafts/keep.yaml")
    assert not selection.enters("drafts")


def test_subtree_reads_only_that_directory() -> None:
    selection = FileSelection("", "./clusters/prod/")
    assert selection.subtree == "clusters/prod"
    assert selection.selects("clusters/prod/a.yaml")
    assert selection.selects("clusters/prod/team/b.yaml")
    assert not selection.selects("clusters/production/a.yaml")
    assert not selection.selects("clusters/a.yaml")
    assert not selection.selects("a.yaml")
    # A walk goes down towards the subtree and into it, nowhere else.
    assert selection.enters("clusters") and selection.enters("clusters/prod")
    assert selection.enters("clusters/prod/team")
    assert not selection.enters("clusters/staging") and not selection.enters("other")


@pytest.mark.parametrize("bad", ["/etc", "../elsewhere", "a/../../b"])
def test_a_subtree_stays_inside_the_repository(bad: str) -> None:
    with pytest.raises(SelectionError):
        normalize_subtree(bad)


def test_whole_tree_spellings() -> None:
    assert normalize_subtree(None) == normalize_subtree(".") == normalize_subtree("./") == ""


# --- the same choice from a directory and from a git tree -----------------------------------------

DOC = b"apiVersion: v1\nkind: ConfigMap\n"
TREE = {
    "platform.yaml": DOC,
    "team/a/platform.yml": DOC,
    "README.md": b"# config\n",
    ".gitlab-ci.yml": b"stages: [validate]\n",
    ".pre-commit-config.yaml": b"repos: []\n",
    ".github/workflows/reconciler.yml": b"on: pull_request\n",
    "drafts/wip.yaml": DOC,
    "team/b.tmpl.yaml": DOC,
    "clusters/prod/p.yaml": DOC,
    "clusters/staging/s.yaml": DOC,
    ".reconcilerignore": b"drafts/\n*.tmpl.yaml\n",
}
SELECTED = ["clusters/prod/p.yaml", "clusters/staging/s.yaml", "platform.yaml", "team/a/platform.yml"]


def _write(root: Path) -> Path:
    for rel, data in TREE.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def _commit(root: Path) -> gitpython.Repo:
    git("init", "-q", "-b", "main", cwd=root)
    git("add", "-A", cwd=root)
    git("commit", "-q", "-m", "config", cwd=root)
    return gitpython.Repo(root)


def test_directory_and_git_choose_the_same_files(tmp_path: Path) -> None:
    root = _write(tmp_path)
    files, diagnostics = read_directory(root)
    assert [rel for rel, _ in files] == SELECTED
    assert diagnostics == []
    repo = _commit(root)
    try:
        entries, skipped = list_yaml_entries(repo, repo.head.commit.hexsha)
    finally:
        repo.close()
    assert [e.path for e in entries] == SELECTED
    assert skipped == []


def test_subtree_from_a_directory_and_from_git(tmp_path: Path) -> None:
    root = _write(tmp_path)
    _commit(root).close()
    files, _ = read_directory(root, "clusters/prod")
    assert [rel for rel, _ in files] == ["clusters/prod/p.yaml"]
    _sha, from_git = read_revision(str(root), subtree="clusters/prod")
    assert [rel for rel, _ in from_git] == ["clusters/prod/p.yaml"]


def test_a_missing_subtree_is_an_error_not_an_empty_repository(tmp_path: Path) -> None:
    """An empty listing would read as "desired = nothing" and prune every cluster."""
    root = _write(tmp_path)
    _commit(root).close()
    with pytest.raises(MissingSubtree):
        read_directory(root, "clusters/typo")
    with pytest.raises(SourceError, match="no such directory"):
        read_revision(str(root), subtree="clusters/typo")


def test_a_subtree_the_rule_never_reads_is_an_error(tmp_path: Path) -> None:
    root = _write(tmp_path)
    _commit(root).close()
    for subtree in ("drafts", ".github"):
        with pytest.raises(MissingSubtree, match="never read"):
            read_directory(root, subtree)
        with pytest.raises(SourceError, match="never read"):
            read_revision(str(root), subtree=subtree)


def test_symlinks_in_ignored_places_are_not_reported(tmp_path: Path) -> None:
    root = _write(tmp_path)
    os.symlink("/etc/hostname", root / "drafts" / "link.yaml")
    os.symlink("/etc/hostname", root / "team" / "link.yaml")
    _files, diagnostics = read_directory(root)
    assert [d.file for d in diagnostics] == ["team/link.yaml"]


def test_an_ignore_file_that_is_a_link_is_an_error_and_ignores_nothing(tmp_path: Path) -> None:
    root = _write(tmp_path)
    (root / ".reconcilerignore").unlink()
    (root / "elsewhere").write_bytes(b"drafts/\n")
    os.symlink("elsewhere", root / ".reconcilerignore")
    files, diagnostics = read_directory(root)
    assert "drafts/wip.yaml" in [rel for rel, _ in files]
    assert [d.file for d in diagnostics] == [".reconcilerignore"]
    repo = _commit(root)
    try:
        _entries, skipped = list_yaml_entries(repo, repo.head.commit.hexsha)
    finally:
        repo.close()
    assert [(s.path, s.severity.value) for s in skipped] == [(".reconcilerignore", "error")]


def test_the_git_source_of_run_reads_the_subtree(tmp_path: Path) -> None:
    root = _write(tmp_path / "config")
    _commit(root).close()
    with GitSource(str(root), "main", tmp_path / "cache", subtree="clusters/prod") as source:
        head = source.sync()
        assert [rel for rel, _ in source.read_tree(head)] == ["clusters/prod/p.yaml"]
