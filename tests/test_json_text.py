"""``dumps_indented`` writes what ``json.dumps(value, indent=2)`` writes, for any JSON value."""

from __future__ import annotations

import enum
import json
import math
from collections import OrderedDict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.commands.json_text import dumps_indented

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
keys = st.text() | st.integers() | st.booleans() | st.none() | st.floats(allow_nan=False)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.lists(inner, max_size=5).map(tuple)
        | st.dictionaries(keys, inner, max_size=5)
    ),
    max_leaves=40,
)


@settings(max_examples=400, deadline=None)
@given(values)
def test_the_same_text_as_the_standard_library(value: Any) -> None:
    assert dumps_indented(value) == json.dumps(value, indent=2)


class Colour(enum.StrEnum):
    red = "red"


class Size(enum.IntEnum):
    big = 3


def test_subclasses_and_special_floats() -> None:
    value = {
        "e": Colour.red,
        Colour.red: [Size.big, math.inf, -math.inf, math.nan, 1e16, -0.0],
        "o": OrderedDict(b=1, a=[OrderedDict()]),
        "u": "snow \u2603 \U0001f600 \x00",
        1.5: (),
    }
    assert dumps_indented(value) == json.dumps(value, indent=2)
    assert dumps_indented(OrderedDict(x=[])) == json.dumps(OrderedDict(x=[]), indent=2)


def test_not_json_is_refused() -> None:
    with pytest.raises(TypeError):
        dumps_indented({"a": {1, 2}})
    with pytest.raises(TypeError):
        dumps_indented({(1, 2): 3})
