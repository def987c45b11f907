"""The only package that talks to Palette: an httpx client of the API subset, its wire models and errors.

Everything Palette-shaped (paths, bodies, paging, retries) lives here so the rest of the reconciler sees
plain dictionaries and ``ManagedCluster`` values and could swap the transport without noticing.

The names below are loaded on first use: the pure readers of this package (``observe``, ``edgehost``
shapes, credentials) are imported by offline commands (``plan --inventory``) that must not pay for
httpx.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reconciler.palette.client import PaletteClient
    from reconciler.palette.errors import (
        ClientError,
        NotFoundError,
        PaletteError,
        RateLimitedError,
        ServerError,
        TransportError,
        UnauthorizedError,
    )

_WHERE = {
    "PaletteClient": "client",
    "ClientError": "errors",
    "NotFoundError": "errors",
    "PaletteError": "errors",
    "RateLimitedError": "errors",
    "ServerError": "errors",
    "TransportError": "errors",
    "UnauthorizedError": "errors",
}

__all__ = [
    "ClientError",
    "NotFoundError",
    "PaletteClient",
    "PaletteError",
    "RateLimitedError",
    "ServerError",
    "TransportError",
    "UnauthorizedError",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
