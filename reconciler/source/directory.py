"""A directory (or one file) of manifests as a source: for ``reconciler validate`` and tests.

Mirrors what the git source guarantees: the manifests the rule of :mod:`reconciler.source.select`
chooses (``.yaml``/``.yml``, no dot path such as ``.git`` or ``.github``, under ``--path``, not in the
root's ``.reconcilerignore``), paths relative to the root with ``/``, symbolic links never followed (a
link could point anywhere on the machine) and files over 1 MiB not read. A file named directly is read
whatever its name: it is what the user asked for.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

from reconciler.manifests import MAX_FILE_BYTES, build_desired
from reconciler.model.desired import DesiredState
from reconciler.model.diagnostics import Diagnostic
from reconciler.source.documents import DocumentCache, checked_files
from reconciler.source.overlay import overlay
from reconciler.source.select import IGNORE_FILE, SUFFIXES, FileSelection, SelectionError

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _too_big(rel: str, size: int) -> Diagnostic:
    return Diagnostic(rel, 0, 0, f"file is {size} bytes; the limit is {MAX_FILE_BYTES} (1 MiB); not read")


def _link(rel: str) -> Diagnostic:
    return Diagnostic(rel, 0, 0, "symbolic link not followed; put the manifest itself in the repository")


class MissingSubtree(SelectionError):
    """``--path`` names no directory under the root that is read: an error, never an empty repository."""


def read_directory(root: Path, subtree: str = "") -> tuple[list[tuple[str, bytes]], list[Diagnostic]]:
    """Every manifest file under ``root`` as ``(relative path, bytes)``, and what could not be read.

    Raises :class:`MissingSubtree` when ``subtree`` is not a directory under ``root`` that is read.
    """
    stream, diagnostics = stream_directory(root, subtree)
    files = list(stream)
    diagnostics.sort(key=Diagnostic.sort_key)
    return files, diagnostics


def stream_directory(root: Path, subtree: str = "") -> tuple[Iterator[tuple[str, bytes]], list[Diagnostic]]:
    """:func:`read_directory`, one file at a time, in path order: the files are read as the iterator is
    consumed, and what cannot be read is added to the returned (unsorted) list meanwhile."""
    diagnostics: list[Diagnostic] = []
    info = os.lstat(root)
    if not stat.S_ISDIR(info.st_mode):
        files: list[tuple[str, bytes]] = []
        _read_one(root, root.name, info, files, diagnostics)
        return iter(files), diagnostics
    return _read_each(_list_directory(root, subtree, diagnostics), diagnostics), diagnostics


def _read_each(paths: list[tuple[str, str]], diagnostics: list[Diagnostic]) -> Iterator[tuple[str, bytes]]:
    for rel, path in paths:
        found: list[tuple[str, bytes]] = []
        _read_file(path, rel, found, diagnostics)
        yield from found


def _list_directory(root: Path, subtree: str, diagnostics: list[Diagnostic]) -> list[tuple[str, str]]:
    """The selected files under ``root``: (relative path, path to open), sorted by relative path."""
    files: list[tuple[str, str]] = []
    try:
        selection = FileSelection(_ignore_text(root, diagnostics), subtree)
    except SelectionError as exc:
        raise MissingSubtree(str(exc)) from None
    if selection.subtree:
        start = root / selection.subtree
        if start.is_symlink() or not start.is_dir():
            raise MissingSubtree(f"--path {selection.subtree}: no such directory in {root}")
    stack = [(root, "")]
    while stack:
        directory, prefix = stack.pop()
        with os.scandir(directory) as entries:
            for entry in entries:
                rel = f"{prefix}{entry.name}"
                if entry.is_dir(follow_symlinks=False):
                    if selection.enters(rel):
                        stack.append((Path(entry.path), f"{rel}/"))
                elif selection.excludes(rel):
                    continue
                elif entry.is_symlink():
                    if entry.name.lower().endswith(SUFFIXES) or entry.is_dir(follow_symlinks=True):
                        diagnostics.append(_link(rel))
                elif selection.selects(rel) and entry.is_file(follow_symlinks=False):
                    files.append((rel, entry.path))
    files.sort()
    return files


def _ignore_text(root: Path, diagnostics: list[Diagnostic]) -> str:
    """The root's ``.reconcilerignore``; one that cannot be read is an error (nothing is ignored then)."""
    path = root / IGNORE_FILE
    if not path.is_symlink() and not path.exists():
        return ""
    found: list[tuple[str, bytes]] = []
    notes: list[Diagnostic] = []
    _read_one(path, IGNORE_FILE, os.lstat(path), found, notes)
    if not found:
        reason = "; ".join(n.message for n in notes)
        diagnostics.append(Diagnostic(IGNORE_FILE, 0, 0, f"{IGNORE_FILE} not applied: {reason}"))
        return ""
    return found[0][1].decode("utf-8", "replace")


def _read_one(
    path: Path, rel: str, info: os.stat_result, files: list[tuple[str, bytes]], diagnostics: list[Diagnostic]
) -> None:
    if stat.S_ISLNK(info.st_mode):
        diagnostics.append(_link(rel))
    else:
        _read_file(str(path), rel, files, diagnostics)


def _read_file(path: str, rel: str, files: list[tuple[str, bytes]], diagnostics: list[Diagnostic]) -> None:
    """Read at most 1 MiB + 1 byte; more than 1 MiB is refused without reading the rest."""
    try:
        # O_NOFOLLOW: the file cannot be swapped for a link between the listing and the read.
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW)
        try:
            chunks: list[bytes] = []
            size = 0
            while size <= MAX_FILE_BYTES:
                chunk = os.read(fd, MAX_FILE_BYTES + 1 - size)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
        finally:
            os.close(fd)
    except OSError as exc:
        diagnostics.append(Diagnostic(rel, 0, 0, f"cannot read file: {exc.strerror}"))
        return
    if size > MAX_FILE_BYTES:
        diagnostics.append(_too_big(rel, os.stat(path, follow_symlinks=False).st_size))
    else:
        files.append((rel, chunks[0] if len(chunks) == 1 else b"".join(chunks)))


def load_directory(
    root: Path,
    revision: str | None = None,
    subtree: str = "",
    extra: Sequence[tuple[str, bytes]] = (),
    cache: DocumentCache | None = None,
) -> DesiredState:
    """Load and validate a directory tree (or a single file) of manifests (``subtree``: ``--path``;
    ``extra``: what-if files added to it, see :mod:`reconciler.source.overlay`), each file checked
    through ``cache`` (:mod:`reconciler.source.documents`; default: the user's cache directory).

    A manifest that could not be read may hide a resource, so the state is then marked incomplete.
    """
    files, diagnostics = read_directory(root, subtree)
    if extra:
        files = overlay(files, extra)
    state = build_desired(checked_files(files, cache), revision)
    if diagnostics:
        state.complete = False
        state.diagnostics = sorted([*state.diagnostics, *diagnostics], key=Diagnostic.sort_key)
    return state
