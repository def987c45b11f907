"""A snapshot file read host by host (``plan --inventory``) reads as the whole parse does: the same
hosts, clusters and catalogue, and the same error for whatever the whole parse refuses."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler import snapshots
from reconciler.snapshots import ReadSnapshot, parse_snapshot, read_snapshot_of, read_snapshot_text
from tests._palette_support import host


def _whole(text: str) -> ReadSnapshot | str:
    try:
        return read_snapshot_of(parse_snapshot(text, json_first=True))
    except ValueError as exc:
        return str(exc)


def _streamed(text: str) -> ReadSnapshot | str:
    try:
        return read_snapshot_text(text, json_first=True)
    except ValueError as exc:
        return str(exc)


odd_values = st.one_of(st.none(), st.integers(-2, 3), st.text(max_size=4), st.just([]), st.just({}))
hosts = st.one_of(
    st.builds(
        host,
        st.sampled_from(["edge-a", "edge-b", "edge-c"]),
        gpus=st.integers(0, 8),
        project=st.sampled_from([None, "pa"]),
        labels=st.dictionaries(st.sampled_from(["palette.ai", "palette.ai/worker", "gpus"]), st.just("true")),
    ),
    st.just({"metadata": {"name": "no-uid"}}),
    odd_values,
)
documents = st.fixed_dictionaries(
    {},
    optional={
        "edgeHosts": st.one_of(st.lists(hosts, max_size=4), odd_values),
        "clusters": st.one_of(st.lists(st.just({"metadata": {"uid": "c1"}}), max_size=2), odd_values),
        "clusterProfiles": st.one_of(
            st.lists(st.fixed_dictionaries({"uid": st.sampled_from(["p1", ""]), "type": st.just("infra")})),
            odd_values,
        ),
        "other": odd_values,
    },
)
layouts = st.sampled_from([{}, {"indent": 1}, {"indent": 2}, {"separators": (",", ":")}])


def _edited(text: str, edit: str, at: int) -> str:
    """The text with one typo a hand-edited file may carry (or none)."""
    at = at % (len(text) + 1)
    return {
        "none": text,
        "truncated": text[:at],
        "comma": text[:at] + "," + text[at:],
        "brace": text[:at] + "}" + text[at:],
        "bom": "\ufeff" + text,
        "extra": text + " {}",
        "trailing comma": text.replace("}", ",}", 1),
        "not an object": f"[{text}]",
        "null": "null",
    }[edit]


@settings(max_examples=300, deadline=None)
@given(
    document=documents,
    layout=layouts,
    edit=st.sampled_from(["none", "none", "truncated", "comma", "brace", "bom", "extra", "trailing comma"]),
    at=st.integers(0, 10_000),
)
def test_reading_host_by_host_equals_the_whole_parse_errors_included(
    document: dict[str, Any], layout: dict[str, Any], edit: str, at: int
) -> None:
    text = _edited(json.dumps(document, **layout), edit, at)
    assert _streamed(text) == _whole(text)


@pytest.mark.parametrize("edit", ["not an object", "null"])
def test_documents_that_are_no_object_read_as_the_whole_parse_reads_them(edit: str) -> None:
    text = _edited(json.dumps({"edgeHosts": [host("edge-a")]}), edit, 0)
    assert _streamed(text) == _whole(text)


def test_a_key_given_twice_reads_as_the_whole_parse_the_last_one() -> None:
    a, b = json.dumps(host("edge-a")), json.dumps(host("edge-b"))
    text = f'{{"edgeHosts": [{a}], "edgeHosts": [{b}]}}'
    read = _streamed(text)
    assert isinstance(read, ReadSnapshot) and [f.uid for f in read.hosts] == ["edge-b"]
    assert read == _whole(text)


def test_an_ordinary_file_is_read_without_parsing_it_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    def whole(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("parsed whole")

    monkeypatch.setattr(snapshots, "parse_snapshot", whole)
    text = json.dumps({"edgeHosts": [host("edge-a", gpus=8), host("edge-b")], "clusters": []}, indent=1)
    read = read_snapshot_text(text, json_first=True)
    assert [f.uid for f in read.hosts] == ["edge-a", "edge-b"]
    assert read.hosts[0].gpus[0].count == 8
