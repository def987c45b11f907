"""``git ls-tree -r -l -z`` records as the source reads them: paths decoded as UTF-8 each on its own
(invalid bytes replaced), a tab inside a path kept, a malformed record an error naming the commit."""

from __future__ import annotations

import pytest

from reconciler.source.errors import SourceError
from reconciler.source.git import _tree_records

BLOB = "0123456789abcdef0123456789abcdef01234567"


def test_each_path_decodes_as_it_would_alone() -> None:
    paths = [b"a/ok.yaml", b"caf\xc3\xa9.yaml", b"bad-\xff.yaml", b"cut-\xe2\x82", b"tab\there.yml"]
    raw = b"".join(b"100644 blob " + BLOB.encode() + b"     12\t" + p + b"\0" for p in paths)
    records = list(_tree_records(raw, "c0ffee"))
    assert [r[3] for r in records] == [p.decode("utf-8", "replace") for p in paths]
    assert {r[:3] for r in records} == {("100644", BLOB, "12")}


def test_a_malformed_record_names_the_commit() -> None:
    with pytest.raises(SourceError, match="unexpected git ls-tree output for c0ffee"):
        list(_tree_records(b"100644 blob\tx.yaml\0", "c0ffee"))
