"""Hostile input is an error with a position, never a crash or a hang."""

from __future__ import annotations

import time

import pytest
import yaml

from reconciler.manifests import MAX_FILE_BYTES, load_files, parse_file
from reconciler.manifests.parse import MAX_DEPTH, MAX_DOCUMENTS

COMPUTE = b"apiVersion: palette.ai/v1alpha1\nkind: Compute\nmetadata: {name: edge, namespace: ns}\n"

BILLION_LAUGHS = b"""\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


def _only_error(data: bytes) -> tuple[int, int, str]:
    parsed = parse_file("f.yaml", data)
    assert parsed.documents == ()
    assert not parsed.complete
    assert len(parsed.diagnostics) == 1
    d = parsed.diagnostics[0]
    return d.line, d.column, d.message


def test_file_over_one_mebibyte_is_refused_unparsed() -> None:
    data = COMPUTE + b"#" * MAX_FILE_BYTES
    assert _only_error(data) == (0, 0, f"file is {len(data)} bytes; the limit is {MAX_FILE_BYTES} (1 MiB)")


def test_billion_laughs_is_refused_quickly() -> None:
    start = time.perf_counter()
    line, _col, message = _only_error(BILLION_LAUGHS)
    assert time.perf_counter() - start < 60  # a hang bound: an expanded document would never finish
    assert line == 1
    assert "alias" in message and "refused" in message


def test_two_way_alias_bomb_under_the_alias_count_is_refused_by_expansion() -> None:
    lines = ["l0: &l0 [x, x]"] + [f"l{i}: &l{i} [*l{i - 1}, *l{i - 1}]" for i in range(1, 40)]
    _line, _col, message = _only_error("\n".join(lines).encode())
    assert "expand to more than" in message


def test_too_many_aliases_are_refused() -> None:
    text = "base: &b x\nitems: [" + ", ".join(["*b"] * 150) + "]\n"
    assert "more than 100 YAML aliases" in _only_error(text.encode())[2]


def test_recursive_alias_is_refused() -> None:
    assert "recursive alias" in _only_error(b"a: &a [1, *a]\n")[2]


def test_a_few_aliases_are_fine() -> None:
    text = COMPUTE + b"spec: &s {settingsRef: {name: palette}}\n"
    parsed = parse_file("f.yaml", text)
    assert parsed.diagnostics == () and len(parsed.documents) == 1


@pytest.mark.parametrize(
    "data",
    [
        b"a: " + b"[" * 200_000 + b"]" * 200_000,
        b"a: " + b"{b: " * 100_000 + b"1" + b"}" * 100_000,
        b"a:\n" + b"- " * 300_000 + b"x\n",
    ],
    ids=["flow-sequences", "flow-mappings", "compact-block-sequences"],
)
def test_very_deep_nesting_is_refused_without_crashing(data: bytes) -> None:
    line, column, message = _only_error(data)
    assert message == f"nesting deeper than {MAX_DEPTH} levels; refused"
    assert (line, column) > (0, 0)


def test_nesting_within_the_limit_and_long_lines_parse() -> None:
    text = COMPUTE + b"spec: {settingsRef: {name: palette}}\n# " + b"x" * 5000 + b"\n"
    text += b"---\n" + b"a: " + b"[" * 50 + b"]" * 50 + b"\n"
    parsed = parse_file("f.yaml", text)
    assert parsed.diagnostics == ()
    assert len(parsed.documents) == 2


def test_non_utf8_bytes_are_reported_at_their_position() -> None:
    line, column, message = _only_error(COMPUTE + b"spec:\n  settingsRef: {name: caf\xe9}\n")
    assert (line, column) == (5, 26)
    assert "not valid UTF-8 (byte 0xe9)" in message


def test_utf8_byte_order_mark_is_accepted() -> None:
    parsed = parse_file("f.yaml", b"\xef\xbb\xbf" + COMPUTE)
    assert parsed.diagnostics == () and len(parsed.documents) == 1


def test_tab_indentation_is_reported() -> None:
    assert _only_error(COMPUTE + b"spec:\n\tsettingsRef: {name: x}\n")[:2] == (5, 1)


def test_tabs_inside_values_are_fine() -> None:
    parsed = parse_file("f.yaml", COMPUTE + b"spec: {}   \t# tab before a comment\n")
    assert parsed.diagnostics == ()


def test_empty_and_comment_only_files_are_errors_but_identify_nothing() -> None:
    for data in (b"", b"   \n", b"# just a comment\n", b"---\n...\n"):
        parsed = parse_file("f.yaml", data)
        assert len(parsed.diagnostics) == 1
        assert parsed.complete
    state = load_files([("f.yaml", b"")])
    assert state.complete and state.has_errors


def test_trailing_document_separator_is_skipped() -> None:
    parsed = parse_file("f.yaml", COMPUTE + b"---\n")
    assert parsed.diagnostics == () and len(parsed.documents) == 1


def test_documents_before_a_syntax_error_keep_their_positions() -> None:
    parsed = parse_file("f.yaml", COMPUTE + b"---\n" + COMPUTE + b"---\nkey: [unclosed\n")
    assert [(d.line, d.column) for d in parsed.documents] == [(1, 1), (5, 1)]
    assert not parsed.complete
    assert parsed.diagnostics[0].line == 10


def test_parse_file_is_pure() -> None:
    assert parse_file("f.yaml", COMPUTE) == parse_file("f.yaml", COMPUTE)


def test_unhashable_key_is_a_syntax_error_not_a_crash() -> None:
    parsed = parse_file("f.yaml", b"? [a, b]\n: c\n")
    assert not parsed.complete
    assert parsed.diagnostics[0].line == 1


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\nb: '1'\nc: 0\nd: 012\ne: 0x1f\nf: 1_000\ng: 190:20:30\nh: -3\ni: +4\n",
        "a: yes\nb: No\nc: on\nd: true\ne: ~\nf: null\ng:\nh: 1.5\ni: .inf\nj: 2024-01-01\n",
        "base: &b {x: 1}\nderived:\n  <<: *b\n  y: 2\n",
        "1: int key\ntrue: bool key\n~: null key\n",
        "list: [a, {b: [c, 1, true]}, [], {}]\nstr: !!str 123\nbin: !!binary aGk=\n",
    ],
)
def test_fast_construction_matches_pyyaml_safe_load(text: str) -> None:
    parsed = parse_file("f.yaml", text.encode())
    assert parsed.diagnostics == ()
    assert [d.data for d in parsed.documents] == [yaml.safe_load(text)]


@pytest.mark.parametrize(
    ("text", "column", "message"),
    [
        (b"a: 2024-13-45\n", 4, "reads as YAML type 'timestamp' but is not a valid one"),
        (b"a: " + b"9" * 5000 + b"\n", 4, "reads as YAML type 'int' but is not a valid one"),
        (b"a: !!int abc\n", 4, "reads as YAML type 'int' but is not a valid one"),
        (b"x: &a 1\na: !!float x\n", 1, "a value of this document cannot be read as its YAML type"),
    ],
    ids=["bad-date", "huge-int", "bad-explicit-int", "bad-float-with-anchors"],
)
def test_values_that_do_not_fit_their_yaml_type_are_errors_not_crashes(
    text: bytes, column: int, message: str
) -> None:
    line, col, got = _only_error(text)
    assert (line, col) == (1, column)
    assert message in got
    assert "abc" not in got and "2024-13-45" not in got


def test_python_specific_tags_are_refused() -> None:
    parsed = parse_file("f.yaml", b"a: !!python/object/apply:os.system ['true']\n")
    assert not parsed.complete
    assert "could not determine a constructor" in parsed.diagnostics[0].message


def test_errors_per_document_are_capped_so_hostile_documents_stay_cheap() -> None:
    body = b"".join(b"  k%d: 1\n" % i for i in range(5000))
    start = time.perf_counter()
    state = load_files([("f.yaml", COMPUTE + b"spec:\n" + body)])
    assert time.perf_counter() - start < 60  # a hang bound; the cap itself is the count below
    assert len(state.diagnostics) == 51
    assert state.diagnostics[0].message == (
        "4950 more errors in this document are not shown; fix the ones above first"
    )


def test_thousands_of_duplicates_stay_linear() -> None:
    doc = COMPUTE + b"---\n"
    state = load_files([("f.yaml", doc * 3000)])
    assert len(state.diagnostics) == 3000
    assert "also defined at f.yaml:5, f.yaml:9, f.yaml:13 and 2996 more" in state.diagnostics[0].message


def test_more_than_ten_thousand_documents_in_one_file_is_refused_unparsed() -> None:
    data = COMPUTE + b"---\n" * 100_000  # the file of 100,000 empty documents
    line, column, message = _only_error(data)
    assert (line, column) == (MAX_DOCUMENTS + 3, 1)  # the marker of document 10,001
    assert message == (
        "more than 10,000 YAML documents in one file (document 10,001 starts here); refused: split the file"
    )


def test_ten_thousand_documents_are_read() -> None:
    parsed = parse_file("f.yaml", COMPUTE + (b"---\n" + COMPUTE) * (MAX_DOCUMENTS - 1))
    assert len(parsed.documents) == MAX_DOCUMENTS and parsed.complete
