"""DirectorySource revisions and snapshots, and watch_directory's change notifications."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from reconciler.source import DirectorySource, SourceError, watch_directory
from tests._git_support import git
from tests._loop_support import wait_for

DOC = "apiVersion: palette.ai/v1alpha1\nkind: MLPlatform\nmetadata: {name: p, namespace: a}\n"


def test_plain_directory_revision_is_a_content_hash(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "p.yaml").write_text(DOC)
    source = DirectorySource(tmp_path)
    first = source.sync()
    assert first.startswith("content-") and len(first) == len("content-") + 16
    assert source.sync() == first, "unchanged content keeps its revision"
    (tmp_path / "a" / "p.yaml").write_text(DOC + "# edited\n")
    assert source.sync() != first
    (tmp_path / "a" / "p.yaml").write_text(DOC)
    assert source.sync() == first, "the revision depends on content only"


def test_git_work_tree_revision_is_head_when_clean_and_dirty_otherwise(tmp_path: Path) -> None:
    git("init", "--quiet", "-b", "main", str(tmp_path), cwd=tmp_path)
    (tmp_path / "p.yaml").write_text(DOC)
    (tmp_path / "notes.txt").write_text("ignored\n")
    git("add", "p.yaml", "notes.txt", cwd=tmp_path)
    git("commit", "--quiet", "-m", "one", cwd=tmp_path)
    head = git("rev-parse", "HEAD", cwd=tmp_path).strip()
    source = DirectorySource(tmp_path)
    assert source.sync() == head
    (tmp_path / "notes.txt").write_text("not a manifest, still clean\n")
    assert source.sync() == head
    (tmp_path / "q.yaml").write_text(DOC.replace("name: p", "name: q"))
    dirty = source.sync()
    assert dirty.startswith(f"{head}-dirty-")
    (tmp_path / "q.yaml").write_text(DOC.replace("name: p", "name: q2"))
    assert source.sync() not in (dirty, head), "each distinct edit is its own revision"
    (tmp_path / "q.yaml").unlink()
    assert source.sync() == head


def test_snapshot_is_stable_and_parsed_once(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(DOC)
    (tmp_path / "q.yml").write_text(DOC.replace("name: p", "name: q"))
    calls: list[str] = []

    def parse(path: str, data: bytes) -> str:
        calls.append(path)
        return path

    source = DirectorySource(tmp_path, parse=parse)
    rev = source.sync()
    assert source.read_parsed(rev) == ["p.yaml", "q.yml"]
    (tmp_path / "p.yaml").write_text(DOC + "# later edit\n")
    assert source.read_tree(rev)[0] == ("p.yaml", DOC.encode()), "a pass reads the snapshot it synced"
    assert source.read_parsed(source.sync()) == ["p.yaml", "q.yml"]
    assert calls == ["p.yaml", "q.yml", "p.yaml"]
    assert (source.parse_hits, source.parse_misses) == (1, 3)
    with pytest.raises(SourceError, match="sync first"):
        source.read_parsed(rev)


def test_symlinks_in_a_directory_are_not_followed(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(DOC)
    (tmp_path / "evil.yaml").symlink_to("/etc/passwd")
    source = DirectorySource(tmp_path)
    rev = source.sync()
    assert [p for p, _ in source.read_tree(rev)] == ["p.yaml"]
    assert [d.file for d in source.diagnostics] == ["evil.yaml"]
    assert not source.complete


def test_missing_directory_raises_source_error(tmp_path: Path) -> None:
    with pytest.raises(SourceError):
        DirectorySource(tmp_path / "gone").sync()


def test_watch_directory_reports_changes_but_not_git_internals(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    changed = threading.Event()
    calls: list[float] = []
    stop = threading.Event()

    def on_change() -> None:
        calls.append(time.monotonic())
        changed.set()

    thread = threading.Thread(
        target=watch_directory, args=(tmp_path, on_change, stop), kwargs={"debounce_ms": 50}
    )
    probes: list[Path] = []

    def probed() -> bool:
        """A manifest appears in one step (a rename: one event, one batch); True once a pass starts."""
        staged = tmp_path / ".git" / "probe"
        staged.write_text(DOC)
        probes.append(tmp_path / f"probe-{len(probes)}.yaml")
        os.replace(staged, probes[-1])
        return changed.wait(0.2)

    thread.start()
    try:
        wait_for(probed, 60, "the watch running")  # not a sleep: the watch may start late on a busy machine
        changed.clear()
        (tmp_path / ".git" / "index").write_text("noise")
        assert not changed.wait(0.8), ".git changes must not start a pass"
        (tmp_path / "p.yaml").write_text(DOC)
        assert changed.wait(60), "a manifest change must start a pass"
    finally:
        stop.set()
        thread.join(60)
    assert not thread.is_alive(), "setting stop ends the watch"
    assert len(calls) >= 1


def test_watch_directory_refuses_a_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(SourceError):
        watch_directory(tmp_path / "missing", lambda: None, threading.Event())
