"""Modules split or moved keep their old import paths: the names resolve to the same objects."""

from __future__ import annotations

import importlib

import pytest

MOVED = [
    ("reconciler.status.store", "StatusStore", "reconciler.source.status_store"),
    ("reconciler.status.store", "StatusError", "reconciler.source.status_store"),
    ("reconciler.status.store", "StatusConflict", "reconciler.source.status_store"),
    ("reconciler.status.store", "ShardStatusStore", "reconciler.source.status_shard"),
    ("reconciler.status", "StatusStore", "reconciler.source.status_store"),
    ("reconciler.source._gitutil", "GitError", "reconciler.source.errors"),
    ("reconciler.source", "GitError", "reconciler.source.errors"),
    ("reconciler.status.render", "Outcome", "reconciler.model.outcomes"),
    ("reconciler.status.pools", "WorkloadOutcome", "reconciler.model.outcomes"),
    ("reconciler.allocate", "place", "reconciler.allocate.engine"),
    ("reconciler.allocate", "Requirements", "reconciler.allocate.needs"),
    ("reconciler.allocate", "optimal_count_vectors", "reconciler.allocate.knapsack"),
    ("reconciler.placement.mig", "plan_mig_admission", "reconciler.placement.mig.planner"),
    ("reconciler.placement.mig", "PoolGpu", "reconciler.placement.mig.state"),
    ("reconciler.placement.mig", "realise", "reconciler.placement.mig.realise"),
]


@pytest.mark.parametrize(("old", "name", "new"), MOVED)
def test_the_old_import_path_gives_the_same_object(old: str, name: str, new: str) -> None:
    assert getattr(importlib.import_module(old), name) is getattr(importlib.import_module(new), name)


def test_an_unknown_name_of_a_moved_module_is_still_an_attribute_error() -> None:
    store = importlib.import_module("reconciler.status.store")
    with pytest.raises(AttributeError, match="NoSuchThing"):
        _ = store.NoSuchThing
