"""The loop's checked files on disk (``<cache dir>/documents``, ``runtime/wiring.document_cache``): a
restarted pipeline checks only the blobs no earlier run checked, plans the same as with a cold cache, and
goes on (warning once) when the cache is corrupt or cannot be written; a steady pass asks it nothing."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from reconciler.emulator import EmulatorServer
from reconciler.manifests import build_desired, check_bytes
from reconciler.metrics import PassOutcome
from reconciler.runtime.outcome import PassResult
from reconciler.runtime.pipeline import Pipeline
from reconciler.source import DirectorySource, GitSource
from reconciler.source import documents as documents_module
from reconciler.source.documents import DocumentCache
from tests._e2e_support import API_KEY, controller, sample_files
from tests._git_support import RemoteRepo

NOTEBOOKS = "project-a/platforms/notebooks.yaml"


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths the document cache checks (parses and validates), in order."""
    seen: list[str] = []

    def counting(path: str, data: bytes) -> Any:
        seen.append(path)
        return check_bytes(path, data)

    monkeypatch.setattr(documents_module, "check_bytes", counting)
    return seen


@pytest.fixture
def pack_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The packs the document cache opens, by name."""
    opened: list[str] = []
    load = documents_module._load_pack

    def counting(path: Path, wanted: set[tuple[str, str]]) -> Any:
        opened.append(path.name)
        return load(path, wanted)

    monkeypatch.setattr(documents_module, "_load_pack", counting)
    return opened


def yaml_count(remote: RemoteRepo) -> int:
    return sum(1 for p in remote.work.rglob("*.y*ml") if ".git" not in p.parts)


def scale(remote: RemoteRepo, count: int) -> str:
    doc = yaml.safe_load((remote.work / NOTEBOOKS).read_text())
    doc["spec"]["gpus"][0]["count"] = count
    return remote.commit({NOTEBOOKS: yaml.safe_dump(doc)}, "scale notebooks")


def one_pass(make: Callable[[], Pipeline]) -> PassResult:
    ctl = make()
    try:
        return ctl.reconcile_once()
    finally:
        ctl.close()


def plans(result: PassResult) -> list[Any]:
    return sorted((str(t.url), p.to_json()) for t, p in result.plans.items())


def packs(cache: Path) -> Iterator[Path]:
    return (cache / "documents").glob("*/*.pack")


def test_a_restarted_loop_checks_only_the_changed_file_and_plans_the_same(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path, checks: list[str]
) -> None:
    files = yaml_count(remote)
    first = one_pass(lambda: controller(remote, emulator, tmp_path, dry_run=True))
    assert first.outcome is not PassOutcome.ERROR
    assert len(checks) == files and len(list(packs(tmp_path / "cache"))) == 1  # written at once

    scale(remote, 2)
    checks.clear()
    warm = one_pass(lambda: controller(remote, emulator, tmp_path, dry_run=True))
    assert checks == [NOTEBOOKS], "a restart checks only the blob no earlier run checked"

    checks.clear()
    cold = one_pass(lambda: controller(remote, emulator, tmp_path / "cold", dry_run=True))
    assert len(checks) == files
    assert warm.outcome == cold.outcome and warm.revision == cold.revision
    assert plans(warm) == plans(cold) and plans(warm)
    assert plans(warm) != plans(first)  # the edit is seen


def test_a_steady_loop_reads_no_pack_and_a_new_revision_none_it_read(
    remote: RemoteRepo,
    emulator: EmulatorServer,
    tmp_path: Path,
    checks: list[str],
    pack_reads: list[str],
) -> None:
    one_pass(lambda: controller(remote, emulator, tmp_path, dry_run=True))  # writes the first pack
    ctl = controller(remote, emulator, tmp_path, dry_run=True)
    try:
        ctl.reconcile_once()
        assert checks[yaml_count(remote) :] == [] and len(pack_reads) == 1  # the restart reads it
        ctl.reconcile_once()
        assert len(pack_reads) == 1, "a steady pass asks the disk nothing"
        scale(remote, 2)
        checked = len(checks)
        ctl.reconcile_once()
        assert checks[checked:] == [NOTEBOOKS]
        assert len(pack_reads) == 1, "no pack read twice: what it held is in memory"
    finally:
        ctl.close()
    assert len(list(packs(tmp_path / "cache"))) == 2  # the new blob, written at once


def test_a_corrupt_cache_is_ignored_and_told_once(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path, checks: list[str]
) -> None:
    expected = plans(one_pass(lambda: controller(remote, emulator, tmp_path, dry_run=True)))
    (pack,) = packs(tmp_path / "cache")
    pack.write_bytes(pack.read_bytes()[:200])  # truncated
    (pack.parent / "0000.pack").write_bytes(b"\x80\x05not a pickle")
    checks.clear()
    with capture_logs() as logs:
        result = one_pass(lambda: controller(remote, emulator, tmp_path, dry_run=True))
    assert result.outcome is not PassOutcome.ERROR and plans(result) == expected
    assert len(checks) == yaml_count(remote)
    told = [e for e in logs if e["event"] == "document cache not used"]
    assert len(told) == 1 and "not read" in told[0]["reason"]


def test_an_unwritable_cache_never_fails_a_pass(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path
) -> None:
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "documents").write_text("a file where the directory goes")
    ctl = controller(remote, emulator, tmp_path, dry_run=True)
    try:
        with capture_logs() as logs:
            first = ctl.reconcile_once()
            scale(remote, 2)
            second = ctl.reconcile_once()
    finally:
        ctl.close()
    assert first.outcome is not PassOutcome.ERROR and second.outcome is not PassOutcome.ERROR
    told = [e for e in logs if e["event"] == "document cache not used"]
    assert len(told) == 1 and "cannot write" in told[0]["reason"]


def test_nothing_secret_is_written(remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path) -> None:
    ctl = controller(remote, emulator, tmp_path)  # applies: the API key is used
    try:
        ctl.reconcile_once()
    finally:
        ctl.close()
    written = list(packs(tmp_path / "cache"))
    assert written and all(API_KEY.encode() not in p.read_bytes() for p in written)


EDITS = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 40), st.integers(0, 9)), min_size=1, max_size=4)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(EDITS, min_size=1, max_size=3))
def test_a_source_reads_the_same_with_and_without_the_cache(tmp_path_factory: Any, edits: Any) -> None:
    """Property: over random edits and restarts, a source backed by the disk cache gives the same
    desired state as one that parses everything."""
    root = tmp_path_factory.mktemp("prop")
    (root / "git").mkdir()
    remote = RemoteRepo(root / "git")
    remote.commit(sample_files(), "sample")
    documents = root / "documents"
    for n, revision in enumerate(edits):
        tree = sorted(p.relative_to(remote.work).as_posix() for p in remote.work.rglob("*.yaml"))
        tree = [p for p in tree if not p.startswith(".git/")]
        change: dict[str, str | None] = {}
        for what, which, number in revision:
            path = tree[which % len(tree)]
            if what == 0:
                text = (remote.work / path).read_text()
                change[path] = text.replace("count: ", f"count: {number}", 1)
            elif what == 1:
                change[path] = "kind: MLPlatform\nmetadata: {name: [\n"
            else:
                change[f"copies/{n}-{number}.yaml"] = (remote.work / path).read_text()
        sha = remote.commit(change)
        cached = GitSource(
            str(remote.bare), cache_dir=root / f"a{n}", parse=check_bytes, store=DocumentCache(documents)
        )
        plain = GitSource(str(remote.bare), cache_dir=root / f"b{n}", parse=check_bytes)
        with cached, plain:
            got = build_desired(cached.read_parsed(cached.sync()), sha)
            want = build_desired(plain.read_parsed(plain.sync()), sha)
        assert (got.resources, got.invalid, got.diagnostics, got.complete) == (
            want.resources,
            want.invalid,
            want.diagnostics,
            want.complete,
        )
    shutil.rmtree(root)


def test_a_restarted_directory_source_checks_nothing_unchanged(tmp_path: Path, checks: list[str]) -> None:
    directory = tmp_path / "config"
    for rel, data in sample_files().items():
        (directory / rel).parent.mkdir(parents=True, exist_ok=True)
        (directory / rel).write_bytes(data)
    results = []
    for _restart in range(2):
        source = DirectorySource(directory, parse=check_bytes, store=DocumentCache(tmp_path / "documents"))
        revision = source.sync()
        results.append(build_desired(source.read_parsed(revision), revision).resources)
    assert len(checks) == len(sample_files()), "the second start read every file from the cache"
    assert results[0] == results[1]
