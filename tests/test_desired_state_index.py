"""The desired state's index of resources by kind follows what is loaded (pure)."""

from __future__ import annotations

from reconciler.model.desired import Loaded, SourceRef
from reconciler.model.resources import AIWorkload, MLPlatform
from tests._allocate_support import desired, platform


def test_of_kind_lists_what_was_added_after_an_earlier_question() -> None:
    state = desired(platform("b", {"NVIDIA-H100": 1}))
    assert [p.metadata.name for p in state.of_kind(MLPlatform)] == ["b"]
    assert list(state.of_kind(AIWorkload)) == []
    added = platform("a", {"NVIDIA-H100": 2})
    state.resources[("MLPlatform", added.metadata.namespace, "a")] = Loaded(added, SourceRef("a.yaml", 1, 1))
    assert [p.metadata.name for p in state.of_kind(MLPlatform)] == ["a", "b"]
    assert [p.metadata.name for p in state.platforms()] == ["a", "b"]
    del state.resources[("MLPlatform", added.metadata.namespace, "b")]
    assert [p.metadata.name for p in state.of_kind(MLPlatform)] == ["a"]


def test_by_key_is_of_kind_by_namespace_and_name() -> None:
    state = desired(platform("b", {"NVIDIA-H100": 1}), platform("a", {"NVIDIA-H100": 2}))
    by_key = state.by_key(MLPlatform)
    assert list(by_key.values()) == list(state.of_kind(MLPlatform))
    assert list(by_key) == [(p.metadata.namespace, p.metadata.name) for p in state.of_kind(MLPlatform)]
