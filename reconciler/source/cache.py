"""A cache of parsed files keyed by git blob id and path: an unchanged file is never parsed twice."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


def blob_id(data: bytes) -> str:
    """The git blob id of ``data`` (what ``git hash-object`` prints), so files on disk and blobs in git
    share one cache key."""
    hasher = hashlib.sha1(b"blob %d\0" % len(data), usedforsecurity=False)
    hasher.update(data)  # no copy of header + data
    return hasher.hexdigest()


class ParseCache(Generic[T]):
    """Least-recently-used map of (blob id, path) -> parse result, with hit and miss counters.

    The path is part of the key because diagnostics name the file they come from.
    """

    def __init__(self, parse: Callable[[str, bytes], T], max_entries: int = 100_000) -> None:
        self._parse = parse
        self._entries: OrderedDict[tuple[str, str], T] = OrderedDict()
        self._max_entries = max(1, max_entries)
        self.hits = 0
        self.misses = 0

    def get(self, blob: str, path: str, load: Callable[[], bytes]) -> T:
        """The parse of ``path`` at ``blob``; ``load`` is called for the bytes only on a miss."""
        key = (blob, path)
        if key in self._entries:
            self._entries.move_to_end(key)
            self.hits += 1
            return self._entries[key]
        self.misses += 1
        parsed = self._parse(path, load())
        self._entries[key] = parsed
        if len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)
        return parsed

    def __len__(self) -> int:
        return len(self._entries)
