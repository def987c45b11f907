"""Modules split or moved keep their old import paths: the names resolve to the same objects."""

from __future__ import annotations

import importlib

import pytest

MOVED = [
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

