"""The cache of checked documents (``reconciler.source.documents``) is invisible: plans are the same with
it and without it, on random edits of a repository; only changed files are checked again; a corrupt,
foreign or deleted cache is ignored."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.manifests import build_desired, check_bytes
from reconciler.model.desired import DesiredState
from reconciler.plan import merge
from reconciler.resolve import Target, route
from reconciler.runtime.stages.plan import plan_pass, snapshot_observation
from reconciler.scaling.stage import NoSamples
from reconciler.snapshots import load_snapshot, read_snapshot_of, scoped
from reconciler.source.documents import DocumentCache, checked_files, read_checked
from reconciler.status.records import NO_RECORDS
from tests._contract_support import SAMPLE_INVENTORY, SAMPLE_REPO, git, make_config_repo
from tests._manifests_support import WHAT_IF_WORKLOAD

URL = "inventory:sample"
SNAPSHOT = load_snapshot(SAMPLE_INVENTORY)
FILES = sorted(
    (p.relative_to(SAMPLE_REPO).as_posix(), p.read_bytes())
    for p in SAMPLE_REPO.rglob("*.yaml")
    if "inventory" not in p.parts
)


def plan_of(desired: DesiredState) -> dict[str, Any]:
    routing = route(desired, URL)
    targets = routing.targets or {Target(URL, None)}
    observed = {t: snapshot_observation(read_snapshot_of(scoped(SNAPSHOT, t))) for t in targets}
    planned = plan_pass(desired, routing, observed, NO_RECORDS, samples=NoSamples(), now=0.0)
    return merge(desired.revision, planned.plans, desired.diagnostics).to_json()


def summary(desired: DesiredState) -> tuple[Any, ...]:
    return (desired.resources, desired.invalid, desired.diagnostics, desired.complete)


def edited(files: list[tuple[str, bytes]], edits: list[tuple[int, int, int]]) -> list[tuple[str, bytes]]:
    """``files`` after each edit (what, which file, a number): a count changed, a file broken, removed,
    copied under a new name (duplicate identities), or a document appended from another file."""
    tree = dict(files)
    for what, which, number in edits:
        if not tree:
            break
        path = sorted(tree)[which % len(tree)]
        data = tree[path]
        if what == 0:
            tree[path] = data.replace(b"count: ", f"count: {number % 9}".encode(), 1)
        elif what == 1:
            tree[path] = data[: number % (len(data) + 1)] + b"\n  - [unclosed\n"
        elif what == 2:
            del tree[path]
        elif what == 3:
            tree[f"copies/{number}-{path.rsplit('/', 1)[-1]}"] = data
        else:
            other = tree[sorted(tree)[number % len(tree)]]
            tree[path] = data + b"\n---\n" + other
    return sorted(tree.items())


EDITS = st.lists(st.tuples(st.integers(0, 4), st.integers(0, 50), st.integers(0, 400)), max_size=6)
SHARED_CACHE: list[Path] = []


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=EDITS, second=EDITS)
def test_plans_are_the_same_with_and_without_the_cache(
    tmp_path_factory: Any, first: Any, second: Any
) -> None:
    if not SHARED_CACHE:  # one cache across examples: earlier revisions' packs are there, as in use
        SHARED_CACHE.append(tmp_path_factory.mktemp("documents"))
    cache = DocumentCache(SHARED_CACHE[0])
    for files in (edited(FILES, first), edited(edited(FILES, first), second)):
        uncached = build_desired([check_bytes(path, data) for path, data in files], "rev")
        cached = build_desired(checked_files(files, cache), "rev")
        assert summary(cached) == summary(uncached)
        assert plan_of(cached) == plan_of(uncached)
        again = build_desired(checked_files(files, cache), "rev")  # every file a hit now
        assert cache.misses == 0
        assert summary(again) == summary(uncached)


def test_duplicate_problems_do_not_pile_up_on_cached_records(tmp_path: Path) -> None:
    files = edited(FILES, [(3, 0, 1), (3, 0, 2)])  # the same file three times: duplicate identities
    cache = DocumentCache(tmp_path)
    states = [build_desired(checked_files(files, cache), None) for _ in range(3)]
    assert states[0].diagnostics and all(s.diagnostics == states[0].diagnostics for s in states)


def test_only_changed_files_are_checked_again_and_what_if_files_are_added(tmp_path: Path) -> None:
    repo = make_config_repo(tmp_path / "config")
    cache = DocumentCache(tmp_path / "cache")
    sha, first = read_checked(str(repo.work), cache=cache)
    assert cache.misses == len(first) > 3 and cache.hits == 0
    _sha, second = read_checked(str(repo.work), cache=cache)
    assert (cache.hits, cache.misses) == (len(first), 0)
    assert build_desired(second, sha).resources == build_desired(first, sha).resources
    notebooks = repo.work / "project-a" / "platforms" / "notebooks.yaml"
    notebooks.write_text(notebooks.read_text().replace("count: 4", "count: 2", 1))
    git("commit", "-qam", "fewer GPUs", cwd=repo.work)
    extra = [("project-b/what-if.yaml", WHAT_IF_WORKLOAD.encode())]
    _sha, third = read_checked(str(repo.work), cache=cache, extra=extra)
    assert (cache.misses, len(third)) == (2, len(first) + 1)  # the edited file and the what-if file
    assert [f.path for f in third] == sorted(f.path for f in third)


def test_a_corrupt_or_deleted_cache_is_ignored(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    cache = DocumentCache(root)
    expected = summary(build_desired(checked_files(FILES, cache), None))
    assert cache.directory is not None
    packs = sorted(cache.directory.glob("*.pack"))
    assert len(packs) == 1
    data = packs[0].read_bytes()
    packs[0].write_bytes(data[: len(data) // 2])  # truncated
    (cache.directory / "0000.pack").write_bytes(b"not a pickle")
    assert summary(build_desired(checked_files(FILES, cache), None)) == expected
    assert cache.misses == len(FILES)
    shutil.rmtree(root)
    assert summary(build_desired(checked_files(FILES, DocumentCache(root)), None)) == expected


def test_a_cache_directory_others_may_write_is_not_read(tmp_path: Path) -> None:
    cache = DocumentCache(tmp_path)
    checked_files(FILES, cache)
    assert cache.directory is not None
    os.chmod(cache.directory, 0o777)
    checked_files(FILES, cache)
    assert cache.hits == 0 and cache.misses == len(FILES)


def test_past_the_pack_limit_one_pack_replaces_them(tmp_path: Path) -> None:
    cache = DocumentCache(tmp_path)
    for n in range(12):
        checked_files([*FILES, (f"extra-{n}.yaml", FILES[0][1])], cache)
    assert cache.directory is not None
    assert 1 <= len(list(cache.directory.glob("*.pack"))) <= 8
    checked_files(FILES, cache)
    assert cache.misses == 0
