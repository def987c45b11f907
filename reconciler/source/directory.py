"""A directory (or one file) of manifests as a source: for ``reconciler validate`` and tests.

Mirrors what the git source guarantees: every ``.yaml``/``.yml`` file, paths relative to the root with
``/``, ``.git`` skipped, symbolic links never followed (a link could point anywhere on the machine) and
files over 1 MiB not read.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from reconciler.manifests import MAX_FILE_BYTES, build_desired, parse_file
from reconciler.model.desired import DesiredState
from reconciler.model.diagnostics import Diagnostic

SUFFIXES = (".yaml", ".yml")
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _too_big(rel: str, size: int) -> Diagnostic:
    return Diagnostic(rel, 0, 0, f"file is {size} bytes; the limit is {MAX_FILE_BYTES} (1 MiB); not read")


def _link(rel: str) -> Diagnostic:
    return Diagnostic(rel, 0, 0, "symbolic link not followed; put the manifest itself in the repository")


def read_directory(root: Path) -> tuple[list[tuple[str, bytes]], list[Diagnostic]]:
    """Every manifest file under ``root`` as ``(relative path, bytes)``, and what could not be read."""
    files: list[tuple[str, bytes]] = []
    diagnostics: list[Diagnostic] = []
    info = os.lstat(root)
    if not stat.S_ISDIR(info.st_mode):
        _read_one(root, root.name, info, files, diagnostics)
        return files, diagnostics
    stack = [(root, "")]
    while stack:
        directory, prefix = stack.pop()
        with os.scandir(directory) as entries:
            for entry in entries:
                rel = f"{prefix}{entry.name}"
                if entry.is_symlink():
                    if entry.name.endswith(SUFFIXES) or entry.is_dir(follow_symlinks=True):
                        diagnostics.append(_link(rel))
                elif entry.is_dir(follow_symlinks=False):
                    if entry.name != ".git":
                        stack.append((Path(entry.path), f"{rel}/"))
                elif entry.name.endswith(SUFFIXES) and entry.is_file(follow_symlinks=False):
                    _read_file(entry.path, rel, files, diagnostics)
    files.sort()
    diagnostics.sort(key=Diagnostic.sort_key)
    return files, diagnostics


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


def load_directory(root: Path, revision: str | None = None) -> DesiredState:
    """Load and validate a directory tree (or a single file) of manifests.

    A manifest that could not be read may hide a resource, so the state is then marked incomplete.
    """
    files, diagnostics = read_directory(root)
    state = build_desired((parse_file(rel, data) for rel, data in files), revision)
    if diagnostics:
        state.complete = False
        state.diagnostics = sorted([*state.diagnostics, *diagnostics], key=Diagnostic.sort_key)
    return state
