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
                    _read_one(Path(entry.path), rel, entry.stat(follow_symlinks=False), files, diagnostics)
    files.sort()
    diagnostics.sort(key=Diagnostic.sort_key)
    return files, diagnostics


def _read_one(
    path: Path, rel: str, info: os.stat_result, files: list[tuple[str, bytes]], diagnostics: list[Diagnostic]
) -> None:
    if stat.S_ISLNK(info.st_mode):
        diagnostics.append(_link(rel))
    elif info.st_size > MAX_FILE_BYTES:
        diagnostics.append(_too_big(rel, info.st_size))
    else:
        try:
            # O_NOFOLLOW: the file cannot be swapped for a link between the listing and the read.
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
            with os.fdopen(fd, "rb") as handle:
                data = handle.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            diagnostics.append(Diagnostic(rel, 0, 0, f"cannot read file: {exc.strerror}"))
            return
        files.append((rel, data))


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
