"""Property: any valid status tree written by StatusStore is a tree git itself would write."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.source.status_store import StatusStore
from tests._git_support import RemoteRepo, git

component = st.text(alphabet="ab-._0Z", min_size=1, max_size=4).filter(
    lambda c: c not in (".", "..") and c.lower() != ".git"
)
paths = st.lists(component, min_size=1, max_size=3).map("/".join)


def _no_file_dir_clash(files: dict[str, bytes]) -> bool:
    return not any(other.startswith(path + "/") for path in files for other in files)


trees = st.dictionaries(paths, st.binary(max_size=64), min_size=0, max_size=12).filter(_no_file_dir_clash)
_example = itertools.count()


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> RemoteRepo:
    remote = RemoteRepo(tmp_path_factory.mktemp("status-tree"))
    remote.commit({"config.yaml": "a: 1\n"})
    return remote


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first=trees, second=trees)
def test_written_trees_are_valid_git_trees_and_read_back_unchanged(
    shared: RemoteRepo, first: dict[str, bytes], second: dict[str, bytes]
) -> None:
    n = next(_example)
    branch = f"status/example-{n}"
    work: Path = shared.bare.parent / f"store-{n}"
    with StatusStore(str(shared.bare), branch, work) as store:
        # A writer owning every path: the second tree replaces the first whole.
        one = store.write(first, "first", {"Source-Revision": "1" * 40}, owned=lambda _path: True)
        two = store.write(second, "second", {"Source-Revision": "2" * 40}, owned=lambda _path: True)
        assert one is not None
        assert (two is None) == (first == second)
        tip = two or one
        assert git("rev-parse", branch, cwd=shared.bare).strip() == tip
        listed = git("ls-tree", "-r", "-z", "--name-only", tip, cwd=shared.bare).split("\0")
        assert sorted(p for p in listed if p) == sorted(second)
        with StatusStore(str(shared.bare), branch, work.with_name(f"reader-{n}")) as reader:
            assert reader.read() == second
        assert store.tree_id(second) == git("rev-parse", f"{tip}^{{tree}}", cwd=shared.bare).strip()
    git("fsck", "--strict", "--no-dangling", cwd=shared.bare)
