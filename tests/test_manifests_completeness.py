"""Which unreadable documents block pruning: only those that could be one of our resources."""

from __future__ import annotations

import pytest

from reconciler.manifests import load_files


@pytest.mark.parametrize(
    "text",
    [
        b"on: push\njobs:\n  test: {runs-on: ubuntu-latest}\n",  # a CI workflow
        b"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: default}\n",
    ],
)
def test_foreign_documents_are_reported_but_do_not_block_pruning(text: bytes) -> None:
    state = load_files([("other.yaml", text)])
    assert state.complete
    assert [d.file for d in state.diagnostics] == ["other.yaml"]


@pytest.mark.parametrize(
    "text",
    [
        b"apiVersion: palette.ai/v1alpha1\nkind: MLPlatfrom\nmetadata: {name: x, namespace: y}\n",  # a typo
        b"kind: MLPlatform\nmetadata: {namespace: y}\n",  # no name: identity unknown
        b"- a list\n",
        b"apiVersion: palette.ai/v1alpha1\nkind: MLPlatform\nmetadata: {name: [\n",  # syntax error
    ],
)
def test_documents_that_may_be_ours_block_pruning(text: bytes) -> None:
    state = load_files([("maybe.yaml", text)])
    assert not state.complete
    assert state.diagnostics
