"""Palette's cluster states read as the reconciler knows them (pure)."""

from __future__ import annotations

from reconciler.model.observed import ClusterState


def test_a_state_is_read_whatever_its_case_and_surrounding_spaces() -> None:
    for state in ClusterState:
        assert ClusterState.parse(state) is state
        assert ClusterState.parse(state.value) is state
        assert ClusterState.parse(f"  {state.value.upper()}\n") is state
        assert ClusterState.parse(state.value.lower()) is state


def test_a_state_it_does_not_know_is_unknown() -> None:
    for text in ("", None, "Runnin", "Running!", "Provisioning Failed", 3):
        assert ClusterState.parse(text) is ClusterState.UNKNOWN
