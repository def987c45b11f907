"""Validated documents cached on disk by git blob id, so a command re-parses only the files that changed.

A file's :class:`~reconciler.manifests.loader.CheckedFile` (its documents parsed, identified and checked
alone) is a pure function of its path and bytes and of the code that checks it. So it is kept under the
key (blob id, path), in a directory named after a fingerprint of that code (the package's source files,
Python's, pydantic's and PyYAML's versions): another version never reads it. Only the cross-resource
rules run again on every load; they work on copies, so a plan is the same with or without the cache.

On disk (``<cache>/documents/<fingerprint>/``): packs, each a pickle of its keys, then one of
``{(blob, path): CheckedFile}`` (a pack of other files is skipped after its keys; equal frozen models
below a resource, the references and specs thousands of files repeat, are written and loaded once:
``model.pickling.dumps_sharing``), named by the SHA-256 of
its bytes (content-addressed; written to a temporary file and renamed, so a reader
never sees half a pack). A load reads the newest packs until every wanted file is found, checks the rest
and writes them as a new pack; past :data:`MAX_PACKS` packs, one pack of the files of this load replaces
them all. Everything here is best effort: the directory is safe to delete at any time, a pack that
cannot be read (truncated, corrupt, another format) is ignored, a failed write only costs the next load
a parse, and a directory not private to this user (owned by another, writable by group or others) is
not read at all: a pickle is code. A pack holds only what the files' bytes give (their text and checked
records), never anything of the environment (an API key).

The loop (``reconciler run``) backs its sources' in-memory :class:`~reconciler.source.cache.ParseCache`
with one (``read_once``): a steady pass asks it nothing, a restart reads the packs, a new revision checks
only its new blobs and writes them as a pack at once; what goes wrong is told once (``on_error``), then
the loop goes on without (after a failed write, this instance writes no more).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import stat
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from functools import cache, partial
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from reconciler.manifests.loader import CheckedFile, check_bytes
from reconciler.model.pickling import dumps_sharing
from reconciler.model.resources import KINDS
from reconciler.process_exit import after_output, collector_paused
from reconciler.source._gitutil import user_cache_root
from reconciler.source.cache import Key, Reader, blob_id

if TYPE_CHECKING:
    from reconciler.source.git import SkippedEntry

FORMAT = 4
MAX_PACKS = 8


@cache
def code_fingerprint() -> str:
    """What the checked documents depend on besides their bytes: this package's source and the versions
    of Python and of the libraries that parse and validate (any change gives another directory)."""
    import pydantic
    import yaml

    import reconciler

    hasher = hashlib.sha256(f"{FORMAT} {sys.version} {pydantic.VERSION} {yaml.__version__}".encode())
    package = Path(reconciler.__file__).parent
    for path in sorted(package.rglob("*.py")):
        try:
            info = path.stat()
        except OSError:
            continue
        hasher.update(f"{path.relative_to(package)} {info.st_size} {info.st_mtime_ns}\n".encode())
    return hasher.hexdigest()[:24]


def cache_root() -> Path:
    """``$RECONCILER_CACHE_DIR`` (``run --cache-dir``'s variable), else
    ``$XDG_CACHE_HOME/paletteai-reconciler`` (``~/.cache`` without it)."""
    configured = os.environ.get("RECONCILER_CACHE_DIR")
    return Path(configured) if configured else user_cache_root()


def default_root() -> Path:
    """``documents`` under :func:`cache_root`."""
    return cache_root() / "documents"


class DocumentCache:
    """The checked files of one directory of packs (``root`` None: nothing is kept, every file is checked).

    ``hits`` and ``misses`` count the files of the last :meth:`checked` found in a pack and checked.
    ``read_once``: each pack is read at most once by this instance (its caller keeps what it got, as the
    loop's sources do in memory), so a pass over a new revision reads no pack it read before.
    ``on_error(message)``: told once per kind (a pack not read, the directory not private, a failed
    write) that the cache is not used; nothing else changes (a pass never fails for its cache).
    """

    def __init__(
        self,
        root: Path | None,
        *,
        read_once: bool = False,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self.directory = root / code_fingerprint() if root is not None else None
        self.hits = 0
        self.misses = 0
        self._read_once = read_once
        self._examined: set[str] = set()  # pack names (read_once)
        self._on_error = on_error
        self._told: set[str] = set()
        self._writable = True

    def checked(
        self, wanted: Sequence[Key], read: Reader, known: Mapping[Key, CheckedFile] | None = None
    ) -> list[CheckedFile]:
        """The checked file of each ``(blob, path)`` of ``wanted``, in order; ``read(keys)`` gives the
        bytes of the files found in no pack, all at once. ``known``: files the caller has already (not
        looked up; a pack that replaces the others holds them too)."""
        packs = self._packs()
        found: dict[Key, CheckedFile] = dict(known or {})
        looked = set(wanted) - found.keys()
        found.update(self._read(packs, looked))
        self.hits = len(looked & found.keys())
        if self.hits == len(looked):  # every file found (a warm cache): nothing to read or check
            self.misses = 0
            return [found[key] for key in wanted]
        missing = [key for key in dict.fromkeys(wanted) if key not in found]
        data = read(missing)
        new: dict[Key, CheckedFile] = {}
        out: list[CheckedFile] = []
        for key in wanted:
            checked = found.get(key)
            if checked is None:
                checked = new.get(key)
                if checked is None:
                    checked = new[key] = check_bytes(key[1], data[key])
            out.append(checked)
        self.misses = len(new)
        if new and self.directory is not None and self._writable:
            if len(packs) + 1 > MAX_PACKS:
                entries, replaces = dict(zip(wanted, out, strict=True)), packs
            else:
                entries, replaces = new, []
            # Nobody waits for the pack (pickling 10,000 files is about 0.4 s): a one-shot command writes
            # it after its output, in a child (reconciler.process_exit); the loop and tests write it now.
            after_output(partial(self._write, entries, replaces))
        return out

    def _packs(self) -> list[Path]:
        """The packs, newest first; none when the directory is missing or not private to this user."""
        directory = self.directory
        if directory is None:
            return []
        try:
            info = os.stat(directory, follow_symlinks=False)
        except OSError:
            return []
        if not private_to_user(info) or not stat.S_ISDIR(info.st_mode):
            self._tell("private", f"{directory} is not a directory private to this user: not read")
            return []
        dated: list[tuple[int, Path]] = []
        with contextlib.suppress(OSError), os.scandir(directory) as entries:
            for entry in entries:
                if entry.name.endswith(".pack"):
                    with contextlib.suppress(OSError):
                        dated.append((entry.stat(follow_symlinks=False).st_mtime_ns, Path(entry.path)))
        return [path for _mtime, path in sorted(dated, key=lambda d: (-d[0], d[1].name))]

    def _read(self, packs: list[Path], wanted: set[Key]) -> dict[Key, CheckedFile]:
        found: dict[Key, CheckedFile] = {}
        for pack in packs:
            if len(found) == len(wanted):
                break
            if self._read_once:
                if pack.name in self._examined:
                    continue
                self._examined.add(pack.name)
            rest = wanted - found.keys() if found else wanted
            entries, problem = _load_pack(pack, rest)
            if problem is not None:
                self._tell("read", f"{pack} not read, ignored ({problem})")
            found.update(
                (key, checked)
                for key in rest & entries.keys()
                if isinstance(checked := entries[key], CheckedFile) and checked.path == key[1]
            )
        return found

    def _write(self, entries: dict[Key, CheckedFile], replaces: list[Path]) -> None:
        directory = self.directory
        assert directory is not None
        try:
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            if not private_to_user(os.stat(directory, follow_symlinks=False)):
                return
            head = pickle.dumps((FORMAT, frozenset(entries)), protocol=pickle.HIGHEST_PROTOCOL)
            # A resource stays one object each (the plan tells them apart by identity); what they share
            # (the same references, requests, specs) is loaded once.
            data = head + dumps_sharing(entries, tuple(model for _kind, model in KINDS.values()))
            name = directory / f"{hashlib.sha256(data).hexdigest()[:32]}.pack"
            self._examined.add(name.name)  # what it holds, the caller has
            write_whole(name, data)
            for old in replaces:
                if old != name:
                    with contextlib.suppress(OSError):
                        old.unlink()
        except Exception as exc:  # a cache: the next load checks these files again
            self._writable = False
            self._tell("write", f"cannot write to {directory} ({exc}): going on without writing it")

    def _tell(self, kind: str, message: str) -> None:
        if self._on_error is not None and kind not in self._told:
            self._told.add(kind)
            self._on_error(message)


def private_to_user(info: os.stat_result) -> bool:
    """Owned by this user and writable by no one else (a pickle is code: nothing else is read)."""
    return info.st_uid == os.getuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def write_whole(path: Path, data: bytes) -> None:
    """``data`` as the file ``path``, written to a temporary file beside it and renamed: a reader never
    sees half of it."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.suffix[1:]}-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def open_private(path: Path) -> BinaryIO | None:
    """``path`` opened for reading, not following a symbolic link; None when it is missing (removed by
    another process meanwhile). ``OSError`` when it cannot be opened, ``PermissionError`` when it is not
    private to this user."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    file = os.fdopen(fd, "rb")
    try:
        private = private_to_user(os.fstat(file.fileno()))
    except OSError:
        file.close()
        raise
    if not private:
        file.close()
        raise PermissionError("not private to this user")
    return file


def _load_pack(path: Path, wanted: set[Key]) -> tuple[dict[Key, object], str | None]:
    """A pack's entries, when it holds some of ``wanted`` (its first pickle is the format and its keys, so
    a pack of other files is skipped unread); empty when it cannot be read as a pack of this format
    (ignored, not an error), with why when it is not one (truncated, corrupt, not private)."""
    try:
        opened = open_private(path)
    except OSError as exc:  # not private (PermissionError) or not readable
        return {}, str(exc)
    if opened is None:
        return {}, None  # replaced by another load meanwhile
    try:
        with opened as file:
            head = pickle.load(file)
            if not isinstance(head, tuple) or len(head) != 2:
                return {}, "not a pack"
            if head[0] != FORMAT:
                return {}, None  # another format: another version's, not an error
            if not isinstance(head[1], frozenset):
                return {}, "not a pack"
            if head[1].isdisjoint(wanted):
                return {}, None
            with collector_paused():  # unpickling: many small objects, few cycles
                entries = pickle.load(file)
    except Exception as exc:
        return {}, f"{type(exc).__name__}: {exc}"
    return (entries, None) if isinstance(entries, dict) else ({}, "not a pack")


def read_checked(
    repo: str,
    rev: str | None = None,
    *,
    skipped: list[SkippedEntry] | None = None,
    subtree: str = "",
    extra: Sequence[tuple[str, bytes]] = (),
    cache: DocumentCache | None = None,
) -> tuple[str, list[CheckedFile]]:
    """One revision's files checked, as :func:`~reconciler.source.revision.read_revision` reads them and
    with the what-if files ``extra`` added (:func:`~reconciler.source.overlay.overlay`): only the blobs
    no pack of ``cache`` holds are read and checked (default: the cache under :func:`default_root`)."""
    from reconciler.source.git import read_blobs  # GitPython: only here
    from reconciler.source.revision import list_revision, open_repository

    store = cache if cache is not None else DocumentCache(default_root())
    with open_repository(repo) as local:
        sha, entries = list_revision(local, rev or "HEAD", skipped, subtree)
        blobs = {e.path: e.blob for e in entries}
        added = dict(extra)  # the last of two copies of a path wins, as in overlay()
        blobs.update((path, blob_id(data)) for path, data in added.items())

        def read(keys: Sequence[Key]) -> dict[Key, bytes]:
            stored = read_blobs(local, [blob for blob, path in keys if path not in added])
            return {(blob, path): added[path] if path in added else stored[blob] for blob, path in keys}

        return sha, store.checked([(blob, path) for path, blob in sorted(blobs.items())], read)


def checked_files(
    files: Sequence[tuple[str, bytes]], cache: DocumentCache | None = None
) -> list[CheckedFile]:
    """``(path, bytes)`` pairs checked, through ``cache`` (default: the cache under :func:`default_root`)."""
    store = cache if cache is not None else DocumentCache(default_root())
    data = {(blob_id(content), path): content for path, content in files}
    return store.checked(list(data), lambda _keys: data)
