"""Shards share one status branch (real bare repositories): a writer with ``owned`` keeps every file it
does not own, on every attempt, so two shards racing never drop or revert each other's files."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import yaml

from reconciler.resolve import NamespaceSelector
from reconciler.source.status_shard import ShardStatusStore
from reconciler.source.status_store import StatusStore
from reconciler.status.store import push_retry, shard_owns
from tests._git_support import RemoteRepo, git

BRANCH = "reconciler/status"
ROUNDS = 25


@pytest.fixture
def remote(tmp_path: Path) -> RemoteRepo:
    repo = RemoteRepo(tmp_path)
    repo.commit({"project-a/platform.yaml": "kind: MLPlatform\n"}, "config")
    return repo


def tree_at(remote: RemoteRepo, commit: str) -> dict[str, str]:
    names = git("ls-tree", "-r", "--name-only", commit, cwd=remote.bare).split()
    return {name: git("show", f"{commit}:{name}", cwd=remote.bare) for name in names}


def shard_files(ns: str, round_: int) -> dict[str, bytes]:
    """One writer's tree at ``round_``: a counter, and a file that comes and goes (exercises removal)."""
    files = {f"{ns}/mlplatforms/counter.yaml": f"round: {round_}\n".encode()}
    if round_ % 3:
        files[f"{ns}/mlplatforms/sometimes.yaml"] = f"round: {round_}\n".encode()
    return files


def test_two_writers_with_disjoint_owned_racing_never_lose_or_revert_each_others_files(
    remote: RemoteRepo, tmp_path: Path
) -> None:
    errors: list[BaseException] = []
    start = threading.Barrier(2)
    stores = [
        StatusStore(str(remote.bare), workdir=tmp_path / ns, retry=push_retry(50, base_delay=0.005))
        for ns in ("team-a", "team-b")
    ]

    def writer(store: StatusStore, ns: str) -> None:
        try:
            start.wait()
            for i in range(ROUNDS):
                store.write(shard_files(ns, i), f"{ns} round {i}", {}, owned=lambda p: p.startswith(ns + "/"))
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [
        threading.Thread(target=writer, args=(s, ns))
        for s, ns in zip(stores, ("team-a", "team-b"), strict=True)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors

    history = git("rev-list", "--reverse", BRANCH, cwd=remote.bare).split()
    assert len(history) == 2 * ROUNDS  # every round of both writers is one commit: nothing was lost
    last = {"team-a": -1, "team-b": -1}
    for commit in history:
        files = tree_at(remote, commit)
        for ns in last:
            counter = files.get(f"{ns}/mlplatforms/counter.yaml")
            if counter is None:
                assert last[ns] == -1, f"{commit}: {ns}'s files were dropped"
                continue
            seen = int(yaml.safe_load(counter)["round"])
            assert seen >= last[ns], f"{commit}: {ns} reverted from round {last[ns]} to {seen}"
            last[ns] = seen
            expected = {p: d.decode() for p, d in shard_files(ns, seen).items()}
            assert {p: d for p, d in files.items() if p.startswith(ns + "/")} == expected
    assert last == {"team-a": ROUNDS - 1, "team-b": ROUNDS - 1}
    for store in stores:
        store.close()


def test_a_shard_reads_its_record_as_reconciler_yaml_and_writes_it_under_shards(
    remote: RemoteRepo, tmp_path: Path
) -> None:
    selector = NamespaceSelector.parse("team-a-*")
    other = StatusStore(str(remote.bare), workdir=tmp_path / "other")
    other.write(
        {
            "team-b/mlplatforms/x.yaml": b"b\n",
            "shards/b.yaml": b"branch: main\n",
            "inventory/palette-p1.json": b"{}\n",
            "inventory/elsewhere-p2.json": b"{}\n",  # a target only shard b observes
            "reconciler.yaml": b"branch: old\n",  # an unsharded instance's record, from before sharding
        },
        "shard b",
        {},
    )
    shard = ShardStatusStore(str(remote.bare), workdir=tmp_path / "a", shard="a", namespaces=selector)
    assert shard.read() == {}
    record = b"branch: main\ntargets:\n- {url: https://palette, projectUid: p1}\n"
    shard.write({"team-a-1/mlplatforms/y.yaml": b"a\n", "reconciler.yaml": record}, "shard a", {})
    assert shard.read() == {
        "inventory/palette-p1.json": b"{}\n",  # shard b's snapshot of a target shard a records
        "team-a-1/mlplatforms/y.yaml": b"a\n",
        "reconciler.yaml": record,
    }
    assert tree_at(remote, BRANCH) == {
        "team-b/mlplatforms/x.yaml": "b\n",
        "shards/b.yaml": "branch: main\n",
        "shards/a.yaml": record.decode(),
        "inventory/palette-p1.json": "{}\n",
        "inventory/elsewhere-p2.json": "{}\n",
        "reconciler.yaml": "branch: old\n",
        "team-a-1/mlplatforms/y.yaml": "a\n",
    }
    # A file the shard no longer writes is removed: it is its own. The shared inventory is not.
    shard.write({"reconciler.yaml": b"branch: main\n"}, "shard a", {})
    assert "team-a-1/mlplatforms/y.yaml" not in tree_at(remote, BRANCH)
    assert "inventory/palette-p1.json" in tree_at(remote, BRANCH)
    with pytest.raises(ValueError, match="may not write team-b"):
        shard.write({"team-b/mlplatforms/x.yaml": b"taken\n"}, "shard a", {})
    shard.close()
    other.close()


def test_shard_owns_its_namespaces_and_its_record_only() -> None:
    selector = NamespaceSelector.parse("team-a-*,ml-prod")
    assert shard_owns("team-a-1/mlplatforms/x.yaml", "a", selector)
    assert shard_owns("ml-prod/computes/c.yaml", "a", selector)
    assert shard_owns("shards/a.yaml", "a", selector)
    for path in ("team-b/mlplatforms/x.yaml", "shards/b.yaml", "reconciler.yaml", "inventory/h-p.json"):
        assert not shard_owns(path, "a", selector), path
