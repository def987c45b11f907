"""Typed Palette errors, sorted by what a caller can do about them.

Each error carries the HTTP status, Palette's V1Error ``code``/``message`` when the body had one, and the
request method and path. None of them ever holds the API key: the key lives only in the client's request
headers and is scrubbed from any server text that echoes it back.
"""

from __future__ import annotations


class PaletteError(Exception):
    """Base of every error raised by :class:`reconciler.palette.PaletteClient`."""

    transient = False  # True when the same call may succeed later without any change

    def __init__(
        self,
        message: str,
        *,
        status: int = 0,
        code: str | None = None,
        method: str = "",
        path: str = "",
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.method = method
        self.path = path

    def __str__(self) -> str:
        where = f"{self.method} {self.path}".strip()
        status = f"HTTP {self.status}" if self.status else "no response"
        code = f" {self.code}" if self.code else ""
        return f"{where}: {status}{code}: {self.message}" if where else f"{status}{code}: {self.message}"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(status={self.status}, code={self.code!r}, "
            f"method={self.method!r}, path={self.path!r}, message={self.message!r})"
        )


class NotFoundError(PaletteError):
    """HTTP 404: the resource does not exist (in this project scope)."""


class UnauthorizedError(PaletteError):
    """HTTP 401 or 403: the API key is missing, wrong, or lacks the permission."""


class RateLimitedError(PaletteError):
    """HTTP 429 after the retry budget was spent."""

    transient = True

    def __init__(
        self,
        message: str,
        *,
        status: int = 429,
        code: str | None = None,
        method: str = "",
        path: str = "",
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, status=status, code=code, method=method, path=path)
        self.retry_after = retry_after


class ServerError(PaletteError):
    """HTTP 5xx after the retry budget was spent (or on a create, which is never retried blindly)."""

    transient = True


class TransportError(PaletteError):
    """No usable response: connection refused or dropped, or a timeout."""

    transient = True


class ClientError(PaletteError):
    """Any other 4xx: the request itself is wrong (a bad body, a conflict such as a host in use)."""
