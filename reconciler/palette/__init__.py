"""The only package that talks to Palette: an httpx client of the API subset, its wire models and errors.

Everything Palette-shaped (paths, bodies, paging, retries) lives here so the rest of the reconciler sees
plain dictionaries and ``ManagedCluster`` values and could swap the transport without noticing.
"""

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
from reconciler.palette.retry import RetryPolicy

__all__ = [
    "ClientError",
    "NotFoundError",
    "PaletteClient",
    "PaletteError",
    "RateLimitedError",
    "RetryPolicy",
    "ServerError",
    "TransportError",
    "UnauthorizedError",
]
