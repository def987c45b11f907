"""The cache of recorded observations (``reconciler.runtime.observation_cache``) is invisible: what a
recorded snapshot gives is the same read from it or from the snapshot, on random snapshots; a corrupt,
foreign or deleted file is ignored; a directory others may write is not read; few files are kept."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.resolve import EVERY_NAMESPACE, NamespaceSelector, Target
from reconciler.runtime.observation_cache import MAX_KEPT, ObservationCache
from reconciler.runtime.preview_observe import recorded_observation
from reconciler.status.records import Records
from reconciler.status.render import RECONCILER_FILE
from reconciler.status.snapshot import render_snapshot, target_file
from tests._contract_support import SAMPLE_INVENTORY

URL, PROJECT = "https://palette.example.com", "6514216503b1d1cd4f1bdc44"
TARGET = Target(URL, PROJECT)
HOSTS: list[dict[str, Any]] = json.loads(SAMPLE_INVENTORY.read_text())["edgeHosts"]


def _cluster(uid: str, namespace: str, name: str) -> dict[str, Any]:
    labels = {"palette.ai/managed-by": "reconciler", "palette.ai/namespace": namespace}
    labels["palette.ai/name"] = name
    return {
        "metadata": {"uid": uid, "name": f"{namespace}-{name}", "labels": labels},
        "specSummary": {"cloudConfig": {"uid": f"cc-{uid}"}, "projectMeta": {"uid": PROJECT}},
        "status": {"state": "Running"},
    }


def records_of(hosts: list[dict[str, Any]], members: int) -> Records:
    """The status branch with one target's snapshot: ``hosts``, the first ``members`` of them in a cluster
    of ``project-a``, and a cluster of ``project-b`` with none."""
    in_use = [{"uid": "c-1", "name": "project-a-train"}]
    marked = []
    for n, host in enumerate(hosts):
        host = json.loads(json.dumps(host))
        if n < members:
            host.setdefault("status", {})["inUseClusters"] = in_use
        marked.append(host)
    clusters = [_cluster("c-1", "project-a", "train"), _cluster("c-2", "project-b", "serve")]
    recorded = f"branch: main\nrevision: abc\ntargets:\n  - {{url: '{URL}', projectUid: '{PROJECT}'}}\n"
    return Records(
        files={
            RECONCILER_FILE: recorded.encode(),
            target_file(URL, PROJECT): render_snapshot(marked, clusters),
        }
    )


def observed(records: Records, cache: ObservationCache | None, namespaces: NamespaceSelector) -> Any:
    found = recorded_observation(records, [TARGET], namespaces, cache=cache)
    assert found is not None
    return found[TARGET]


SHARED: list[Path] = []


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    chosen=st.lists(st.integers(0, len(HOSTS) - 1), unique=True, max_size=len(HOSTS)),
    members=st.integers(0, 4),
    only_a=st.booleans(),
)
def test_an_observation_is_the_same_from_the_cache_and_from_the_snapshot(
    tmp_path_factory: Any, chosen: list[int], members: int, only_a: bool
) -> None:
    if not SHARED:  # one cache across examples: other snapshots' files are there, as in use
        SHARED.append(tmp_path_factory.mktemp("observations"))
    records = records_of([HOSTS[i] for i in chosen], members)
    namespaces = NamespaceSelector(("project-a",)) if only_a else EVERY_NAMESPACE
    expected = observed(records, None, namespaces)
    cache = ObservationCache(SHARED[0])
    first = observed(records, cache, namespaces)
    again = observed(records, cache, namespaces)
    assert cache.hit  # the second was read from the cache (the first may be, from another example)
    assert first == expected and again == expected
    assert [c.namespace for c in again.clusters] == [c.namespace for c in expected.clusters]


def test_a_corrupt_or_deleted_cache_is_ignored(tmp_path: Path) -> None:
    records = records_of(HOSTS, 2)
    expected = observed(records, None, EVERY_NAMESPACE)
    cache = ObservationCache(tmp_path / "cache")
    observed(records, cache, EVERY_NAMESPACE)
    assert cache.directory is not None and not cache.hit
    (kept,) = cache.directory.glob("*.pickle")
    kept.write_bytes(kept.read_bytes()[:100])  # truncated
    assert observed(records, cache, EVERY_NAMESPACE) == expected and not cache.hit
    kept.write_bytes(b"\x80\x05K\x01.")  # a pickle, not of an observation
    assert observed(records, cache, EVERY_NAMESPACE) == expected and not cache.hit
    shutil.rmtree(tmp_path / "cache")
    assert observed(records, cache, EVERY_NAMESPACE) == expected and not cache.hit
    assert observed(records, cache, EVERY_NAMESPACE) == expected and cache.hit


def test_a_cache_directory_others_may_write_is_not_read(tmp_path: Path) -> None:
    records = records_of(HOSTS, 1)
    cache = ObservationCache(tmp_path)
    observed(records, cache, EVERY_NAMESPACE)
    assert cache.directory is not None
    os.chmod(cache.directory, 0o777)
    observed(records, cache, EVERY_NAMESPACE)
    assert not cache.hit


def test_only_the_newest_files_are_kept(tmp_path: Path) -> None:
    cache = ObservationCache(tmp_path)
    for n in range(MAX_KEPT + 3):
        observed(records_of(HOSTS[: n + 1], 0), cache, EVERY_NAMESPACE)
    assert cache.directory is not None
    assert len(list(cache.directory.glob("*.pickle"))) == MAX_KEPT
    observed(records_of(HOSTS[: MAX_KEPT + 3], 0), cache, EVERY_NAMESPACE)
    assert cache.hit
