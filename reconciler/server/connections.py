"""Connections that cannot starve the probes: a deadline for each request's line and headers.

Every connection must send a request's line and headers within ``header_timeout`` seconds (after
connecting, and again after each answer), and headers are capped at :data:`MAX_HEADER_BYTES` (the
cap is uvicorn's setting, made by :class:`~reconciler.server.app.Server`).
"""

from __future__ import annotations

import asyncio
from typing import Final

from uvicorn.protocols.http.h11_impl import H11Protocol

from reconciler.logging import get_logger

HEADER_TIMEOUT: Final = 10.0
"""Seconds a connection has to send a request's line and headers (after connecting or an answer)."""

MAX_HEADER_BYTES: Final = 16 * 1024
"""Largest request line plus headers (h11's incomplete-event limit); more is a 400."""

_log = get_logger(component="server")


class DeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline for a request's line and headers.

    The deadline runs from the connection (and from the end of each answer on a kept-alive
    connection) until the next request's headers are complete; a client that has not sent them by then
    is disconnected. uvicorn alone waits forever, so a few hundred slow clients held every connection.
    """

    header_timeout: float = HEADER_TIMEOUT
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        self._arm()

    def on_response_complete(self) -> None:
        self._arm()  # before handle_events below may parse a pipelined request
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        super().connection_lost(exc)

    def _arm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = self.loop.call_later(self.header_timeout, self._expire, self.cycle)

    def _expire(self, waiting: object) -> None:
        # A new request's headers arrived since the deadline was set: it has a cycle of its own.
        if self.cycle is waiting and not self.transport.is_closing():
            _log.debug("http connection closed: no request headers in time", client=self.client)
            self.transport.close()


def deadline_protocol(header_timeout: float) -> type[DeadlineProtocol]:
    """The protocol class uvicorn builds for each connection, with this deadline."""
    return type("DeadlineProtocol", (DeadlineProtocol,), {"header_timeout": header_timeout})
