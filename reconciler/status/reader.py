"""The status branch, read-only: moved to :mod:`reconciler.source.status_reader` (the status layer does
not import git). The names are found here too, loaded when first used, for code written against this
module."""

from __future__ import annotations

import importlib
from typing import Any

_MOVED = frozenset({"StatusBranch", "StatusCommit", "utc_iso"})


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        return getattr(importlib.import_module("reconciler.source.status_reader"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
