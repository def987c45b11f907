"""Run the emulator with uvicorn, in a background thread (tests, ``reconciler demo``) or in the foreground."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterable
from types import TracebackType
from typing import Self

import uvicorn

from reconciler.emulator.app import EmulatorApp, create_app
from reconciler.emulator.faults import FaultRule
from reconciler.emulator.records import Clock
from reconciler.emulator.state import EmulatorState
from reconciler.palette.pacing import RateLimits
from reconciler.snapshots import Snapshot


def _bind(host: str, port: int) -> socket.socket:
    """Bind ourselves so the port (0 = any free one) is known before uvicorn starts."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted sockets inherit this; without it Nagle + delayed ACK add 40 ms to every answer, because
    # uvicorn writes the headers and the body separately.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


class EmulatorServer:
    """A Palette emulator listening on ``host``:``port`` (port 0: a free port); ``url`` says where.

    >>> with EmulatorServer.from_snapshot(snapshot, "key") as server:
    ...     PaletteClient(server.url, "key").search_edge_hosts()
    """

    def __init__(
        self,
        state: EmulatorState,
        api_key: str,
        *,
        faults: Iterable[FaultRule] = (),
        seed: int = 0,
        host: str = "127.0.0.1",
        port: int = 0,
        rate_limits: RateLimits | None = None,
    ) -> None:
        self.app: EmulatorApp = create_app(state, api_key, faults=faults, seed=seed, rate_limits=rate_limits)
        self.state = state
        self.faults = self.app.faults
        self.stats = self.app.stats
        self._host = host
        self._port = port
        self._socket: socket.socket | None = None
        self._url: str | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @classmethod
    def from_snapshot(
        cls,
        snapshot: Snapshot,
        api_key: str,
        *,
        provision_seconds: float = 5.0,
        delete_seconds: float = 2.0,
        clock: Clock = time.time,
        faults: Iterable[FaultRule] = (),
        seed: int = 0,
        host: str = "127.0.0.1",
        port: int = 0,
        rate_limits: RateLimits | None = None,
    ) -> EmulatorServer:
        state = EmulatorState(
            snapshot, provision_seconds=provision_seconds, delete_seconds=delete_seconds, clock=clock
        )
        return cls(state, api_key, faults=faults, seed=seed, host=host, port=port, rate_limits=rate_limits)

    def __repr__(self) -> str:
        running = self._thread is not None
        return f"EmulatorServer(url={self._url!r}, running={running})"

    @property
    def url(self) -> str:
        """Where it listens (kept after :meth:`stop`, so a test can show that nothing answers there)."""
        if self._url is None:
            raise RuntimeError("the emulator has not been started")
        return self._url

    def _config(self) -> uvicorn.Config:
        return uvicorn.Config(
            self.app,
            log_level="warning",
            lifespan="off",
            access_log=False,
            timeout_keep_alive=30,
            date_header=False,  # the app dates its answers by the emulator's clock
        )

    def start(self, timeout: float = 10.0) -> Self:
        """Start serving in a daemon thread and wait until it accepts connections."""
        if self._thread is not None:
            return self
        self._socket = _bind(self._host, self._port)
        host, port = self._socket.getsockname()[:2]
        self._url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
        self._server = uvicorn.Server(self._config())
        sockets = [self._socket]
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": sockets}, name="palette-emulator", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the emulator did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._socket is not None:
            self._socket.close()
        self._socket = None
        self._server = None
        self._thread = None

    def wait(self) -> None:
        """Block until the server stops (Ctrl-C raises KeyboardInterrupt here, in the main thread)."""
        while self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout=0.5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
