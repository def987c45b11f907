"""A cache of parsed files keyed by git blob id and path: an unchanged file is never parsed twice."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Generic, Protocol, TypeVar

T = TypeVar("T")
Key = tuple[str, str]  # (blob id, path)
Reader = Callable[[Sequence[Key]], Mapping[Key, bytes]]  # the bytes of some files, all at once


def blob_id(data: bytes) -> str:
    """The git blob id of ``data`` (what ``git hash-object`` prints), so files on disk and blobs in git
    share one cache key."""
    hasher = hashlib.sha1(b"blob %d\0" % len(data), usedforsecurity=False)
    hasher.update(data)  # no copy of header + data
    return hasher.hexdigest()


class Store(Protocol[T]):
    """What backs a :class:`ParseCache` across processes (the loop's
    :class:`~reconciler.source.documents.DocumentCache`): the parse of each of ``wanted``, in order,
    ``known`` ones as they are; the others from the store, else parsed from ``read(keys)``."""

    def checked(self, wanted: Sequence[Key], read: Reader, known: Mapping[Key, T]) -> list[T]: ...


class ParseCache(Generic[T]):
    """Least-recently-used map of (blob id, path) -> parse result, with hit and miss counters.

    The path is part of the key because diagnostics name the file they come from. With a ``store``,
    :meth:`get_all` asks it for what memory lacks (a restarted loop reads its files from disk).
    """

    def __init__(
        self, parse: Callable[[str, bytes], T], max_entries: int = 100_000, store: Store[T] | None = None
    ) -> None:
        self._parse = parse
        self._entries: OrderedDict[Key, T] = OrderedDict()
        self._max_entries = max(1, max_entries)
        self.store = store
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
        self._add(key, parsed)
        return parsed

    def get_all(self, keys: Sequence[Key], read: Reader) -> list[T]:
        """The parse of each of ``keys`` (distinct), in order: from memory (a steady pass asks nothing
        else), else from the store, else parsed from ``read(missing)`` (the bytes of all of them)."""
        known: dict[Key, T] = {}
        entries = self._entries
        for key in keys:
            if key in entries:
                entries.move_to_end(key)
                known[key] = entries[key]
        self.hits += len(known)
        if len(known) == len(keys):
            return [known[key] for key in keys]
        self.misses += len(keys) - len(known)
        if self.store is not None:
            out = self.store.checked(keys, read, known)
        else:
            data = read([key for key in keys if key not in known])
            out = [known[key] if key in known else self._parse(key[1], data[key]) for key in keys]
        for key, parsed in zip(keys, out, strict=True):
            if key not in known:
                self._add(key, parsed)
        return out

    def _add(self, key: Key, parsed: T) -> None:
        self._entries[key] = parsed
        if len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)
