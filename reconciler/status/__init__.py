"""Status of the reconciled resources, written to a status branch of the config repository.

The names below load on first use: readers of status files (``reconciler.status.pools`` and the like)
are imported by offline commands that must not pay for git.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reconciler.status.store import StatusError, StatusStore, format_message

__all__ = ["StatusError", "StatusStore", "format_message"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.store"), name)
