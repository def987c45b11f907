"""``plan --what-if FILE...``: a revision's files as if some files were added to it.

Where a what-if file lands in the repository: at its path relative to the repository's checkout (the
directory given as ``--repo``) when it lies inside it; otherwise under its base name, at the root of the
``--path`` subtree (the repository root without ``--path``). A what-if file at the path of a file of the
revision replaces it. A what-if file is read whatever the file rule says (its name, a dot directory,
``.reconcilerignore``): it was named on purpose.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from reconciler.manifests import MAX_FILE_BYTES


class WhatIfError(ValueError):
    """A what-if file that cannot be read (missing, a directory, over 1 MiB)."""


def overlay(
    files: Iterable[tuple[str, bytes]], extra: Iterable[tuple[str, bytes]]
) -> list[tuple[str, bytes]]:
    """``files`` with ``extra`` added, an extra file replacing the file at its path; sorted by path.

    When ``extra`` names one path twice, the last one wins (as the last of two copies would).
    """
    merged = dict(files)
    merged.update(extra)
    return sorted(merged.items())


def repository_path(file: Path, checkout: Path | None, subtree: str = "") -> str:
    """The path ``file`` takes in the repository (module docstring), with ``/``."""
    resolved = file.resolve()
    if checkout is not None:
        try:
            return resolved.relative_to(checkout.resolve()).as_posix()
        except ValueError:
            pass
    return f"{subtree}/{file.name}" if subtree else file.name


def read_what_if(paths: Sequence[Path], checkout: Path | None, subtree: str = "") -> list[tuple[str, bytes]]:
    """Each what-if file as ``(repository path, bytes)``, in the order given."""
    found: list[tuple[str, bytes]] = []
    for path in paths:
        try:
            size = os.stat(path).st_size
            if size > MAX_FILE_BYTES:
                raise WhatIfError(f"--what-if {path}: {size} bytes; the limit is {MAX_FILE_BYTES} (1 MiB)")
            data = path.read_bytes()
        except IsADirectoryError:
            raise WhatIfError(f"--what-if {path}: a directory; name the files") from None
        except OSError as exc:
            raise WhatIfError(f"--what-if {path}: {exc.strerror or exc}") from None
        found.append((repository_path(path, checkout, subtree), data))
    return found
