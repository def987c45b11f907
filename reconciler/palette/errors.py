"""Typed Palette errors, sorted by what a caller can do about them.

Each error carries the HTTP status, Palette's V1Error ``code``/``message`` when the body had one, and the
request method and path. None of them ever holds the API key: the key lives only in the client's request
headers and is scrubbed from any server text that echoes it back.

The three classes (docs/palette.md) live here and only here: :func:`classify` sorts any exception,
:func:`error_for_status` turns an HTTP answer into its typed error, and the client's retry loop and the
controller both read the class rather than status codes.
"""

from __future__ import annotations

from enum import StrEnum

from reconciler.palette.credentials import MissingAPIKey


class ErrorClass(StrEnum):
    """What a caller can do about a failed Palette call."""

    TRANSIENT = "transient"  # 429, 5xx, no response: the same call may succeed later (retry, back off)
    UNAUTHORIZED = "unauthorized"  # 401/403: nothing helps until the key or the Settings change
    REQUEST = "request"  # any other 4xx: this request is wrong; report it on what it concerns


class PaletteError(Exception):
    """Base of every error raised by :class:`reconciler.palette.PaletteClient`."""

    error_class = ErrorClass.REQUEST

    @property
    def transient(self) -> bool:
        """True when the same call may succeed later without any change."""
        return self.error_class is ErrorClass.TRANSIENT

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
    """HTTP 401 or 403: the API key is missing, wrong, or lacks the permission. Never retried: the pass
    stops for that target (``PaletteUnauthorized``) until the key or the Settings change."""

    error_class = ErrorClass.UNAUTHORIZED


class RateLimitedError(PaletteError):
    """HTTP 429 after the retry budget was spent."""

    error_class = ErrorClass.TRANSIENT

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

    error_class = ErrorClass.TRANSIENT


class TransportError(PaletteError):
    """No usable response: connection refused or dropped, or a timeout."""

    error_class = ErrorClass.TRANSIENT


class DoubtfulAnswer(PaletteError):
    """Successful answers that are not believed (an incomplete listing, a sudden change not yet seen
    twice): the target is read as unavailable for the pass, and read again next pass."""

    error_class = ErrorClass.TRANSIENT

    def __str__(self) -> str:
        return self.message


class ClientError(PaletteError):
    """Any other 4xx: the request itself is wrong (a bad body, a conflict such as a host in use)."""


def error_for_status(
    status: int,
    message: str,
    *,
    code: str | None = None,
    method: str = "",
    path: str = "",
    retry_after: float | None = None,
) -> PaletteError:
    """The typed error of an HTTP error answer (status >= 400)."""
    if status == 429:
        return RateLimitedError(
            message,
            status=status,
            code=code or "TooManyRequests",
            method=method,
            path=path,
            retry_after=retry_after,
        )
    cls: type[PaletteError]
    if status in (401, 403):
        cls = UnauthorizedError
    elif status >= 500:
        cls = ServerError
    elif status == 404:
        cls = NotFoundError
    else:
        cls = ClientError
    return cls(message, status=status, code=code, method=method, path=path)


def classify(error: BaseException) -> ErrorClass:
    """The class of any exception met while talking to Palette. A missing API key is unauthorized (only
    a new key helps); anything else that is not a typed Palette error (an ``OSError`` from below the
    client, say) counts as transient: retrying it is safe."""
    if isinstance(error, PaletteError):
        return error.error_class
    if isinstance(error, MissingAPIKey):
        return ErrorClass.UNAUTHORIZED
    return ErrorClass.TRANSIENT
