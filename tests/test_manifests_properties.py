"""Invariants of the loader over generated input: it never raises, and its fast path builds the same
data as PyYAML's safe loader."""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.manifests import load_files, parse_file
from tests._manifests_support import sample_files

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
data = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(min_size=1, max_size=10), inner, max_size=4)
    ),
    max_leaves=25,
)
SAMPLE = dict(sample_files())


@given(st.dictionaries(st.text(min_size=1, max_size=10), data, min_size=1, max_size=6))
@settings(max_examples=200, deadline=None)
def test_parsed_data_equals_pyyaml_safe_load(value: dict[str, Any]) -> None:
    text = yaml.safe_dump(value, allow_unicode=True)
    parsed = parse_file("f.yaml", text.encode())
    assert parsed.diagnostics == ()
    assert [d.data for d in parsed.documents] == [yaml.safe_load(text)]


@given(st.binary(max_size=400))
@settings(max_examples=300, deadline=None)
def test_arbitrary_bytes_never_raise(blob: bytes) -> None:
    state = load_files([("f.yaml", blob)])
    assert state.complete or state.has_errors


@given(
    st.sampled_from(sorted(SAMPLE)),
    st.integers(min_value=0, max_value=2000),
    st.integers(min_value=0, max_value=40),
    st.text(max_size=12),
)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_mangled_manifests_are_reported_not_raised(name: str, at: int, cut: int, insert: str) -> None:
    """Cut a span of a valid file and insert text there: either still valid, or diagnostics that point
    inside the file."""
    original = SAMPLE[name].decode()
    at = min(at, len(original))
    text = original[:at] + insert + original[at + cut :]
    state = load_files([(name, text.encode())])
    lines = len(text.splitlines()) + 1  # YAML also breaks lines at \r, NEL, LS and PS
    for diag in state.diagnostics:
        assert 0 <= diag.line <= lines + 1
        assert diag.message
    if not state.diagnostics:
        assert state.complete and len(state.resources) == 1
