"""``reconciler validate PATH [--path DIR] [--format text|json|github]``.

The files read are those of the file rule (``reconciler.source.select``): ``.yaml``/``.yml`` files, no
dot path (``.github/``, ``.gitlab-ci.yml``), nothing the root's ``.reconcilerignore`` ignores, and only
the subtree ``DIR`` of PATH with ``--path``. A file named as PATH is read whatever its name.
"""

from __future__ import annotations

import gc
import json
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from reconciler.manifests import MAX_FILE_BYTES, parse_file
from reconciler.manifests.loader import Verdict, validate_files
from reconciler.model.diagnostics import Diagnostic, Severity
from reconciler.source.directory import MissingSubtree, stream_directory
from reconciler.source.select import SelectionError


def _display_path(root: Path, file: str) -> str:
    """Paths as the user would type them from where they ran the command (useful for annotations)."""
    if root.is_dir():
        return (root / file).as_posix() if file else root.as_posix()
    return root.as_posix()


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def format_text(diag: Diagnostic, file: str) -> str:
    resource = f"{diag.kind} {diag.namespace or '?'}/{diag.name or '?'}: " if diag.kind else ""
    return f"{file}:{diag.line}:{diag.column}: {diag.severity}: {resource}{diag.message}"


def format_github(diag: Diagnostic, file: str) -> str:
    level = "error" if diag.severity is Severity.ERROR else "warning"
    resource = f"{diag.kind} {diag.namespace or '?'}/{diag.name or '?'}: " if diag.kind else ""
    props = f"file={_escape_property(file)},line={diag.line},col={diag.column}"
    return f"::{level} {props}::{_escape_data(resource + diag.message)}"


_UNRESOLVED = "ReferenceNotFound:"
_SINGLE_FILE_NOTE = " (only this file was read; validate its directory to check references)"


def _single_file(diag: Diagnostic) -> Diagnostic:
    """A lone file cannot see its namespace's other resources (a pre-commit hook passes one file at a
    time): an unresolved reference there is a warning, not an error. Validating the directory checks it."""
    if diag.severity is Severity.ERROR and diag.message.startswith(_UNRESOLVED):
        return replace(diag, severity=Severity.WARNING, message=diag.message + _SINGLE_FILE_NOTE)
    return diag


def run(path: Path, fmt: str, subtree: str | None = None) -> int:
    """Validate every manifest under ``path`` (its ``subtree`` only, when given). Exit 0 when valid, 1 on
    errors, 2 when PATH or the subtree is missing (the diagnostic is still printed in the chosen format,
    so an annotation shows it)."""
    # The loaded data is acyclic and short-lived: cyclic garbage collection would only cost time. It
    # stays off until the data is gone: the first collection while it lives would walk all of it.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _run(path, fmt, subtree)
    finally:
        if enabled:
            gc.enable()


def _run(path: Path, fmt: str, subtree: str | None) -> int:
    missing = not path.exists()
    if missing and not path.is_symlink():
        diagnostics = [Diagnostic(path.as_posix(), 0, 0, "no such file or directory")]
        resources = files = 0
    else:
        try:
            verdict = _validate(path, subtree or "")
        except (MissingSubtree, SelectionError) as exc:
            return _unusable(path, str(exc), fmt)
        diagnostics = [replace(d, file=_display_path(path, d.file)) for d in verdict.diagnostics]
        if not path.is_dir():
            diagnostics = [_single_file(d) for d in diagnostics]
        resources, files = verdict.resources, len(verdict.files)
    errors = sum(1 for d in diagnostics if d.severity is Severity.ERROR)
    out = sys.stdout
    if fmt == "json":
        json.dump([d.to_json() for d in diagnostics], out, indent=2)
        out.write("\n")
    elif fmt == "github":
        for d in diagnostics:
            out.write(format_github(d, d.file) + "\n")
    else:
        for d in diagnostics:
            out.write(format_text(d, d.file) + "\n")
        warnings = len(diagnostics) - errors
        noted = f", {warnings} warning{'s' if warnings != 1 else ''}" if warnings else ""
        if errors:
            out.write(f"{errors} error{'s' if errors != 1 else ''}{noted} in {path.as_posix()}\n")
        else:
            out.write(f"{path.as_posix()}: {resources} resources in {files} files, all valid{noted}\n")
    if missing:
        return 2
    return 1 if errors else 0


def _validate(path: Path, subtree: str) -> Verdict:
    """Read, parse and validate one file at a time (what cannot be read is reported with the rest)."""
    # PATH itself is what the user named, so a link there is followed; links inside never are.
    root = path.resolve() if path.is_symlink() else path
    stream, unread = stream_directory(root, subtree=subtree)
    verdict = validate_files((parse_file(rel, data) for rel, data in stream), _text_reader(root))
    if unread:
        verdict.diagnostics = sorted([*verdict.diagnostics, *unread], key=Diagnostic.sort_key)
    return verdict


def _text_reader(root: Path) -> Callable[[str], str]:
    """A file's text read again: only the files with problems are, to point at the line of each (the
    text of every file is not kept while the tree is validated)."""
    directory = root.is_dir()

    def text_of(rel: str) -> str:
        try:  # never through a link, as the first read
            fd = os.open(root / rel if directory else root, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
            with os.fdopen(fd, "rb") as file:
                data = file.read(MAX_FILE_BYTES + 1)
        except OSError:
            return ""
        return data.decode("utf-8", "replace").removeprefix("\ufeff")

    return text_of


def _unusable(path: Path, message: str, fmt: str) -> int:
    """A ``--path`` that names no directory: exit 2, the reason printed in the chosen format."""
    diag = Diagnostic(path.as_posix(), 0, 0, message)
    if fmt == "json":
        sys.stdout.write(json.dumps([diag.to_json()], indent=2) + "\n")
    elif fmt == "github":
        sys.stdout.write(format_github(diag, diag.file) + "\n")
    else:
        sys.stdout.write(format_text(diag, diag.file) + "\n")
    return 2
