"""The HTTP server of a running reconciler: its routes, ``/healthz``, ``/readyz`` and ``/metrics``, and
uvicorn in a background thread (the webhook is :mod:`reconciler.server.webhook`).

``/healthz`` is liveness: 503 once passes have failed continuously for longer than a bound, so that an
orchestrator restarts a wedged process. ``/readyz`` is readiness: 503 with the reason before the first
successful pass and while the instance must not act (its status branch follows another config branch).
A standby (another instance holds the writer lease) is ready: it serves ``/metrics``, its webhook
starts nothing, and a rollout of two replicas completes. Whether this instance holds the lease is the
``reconciler_lease_held`` gauge and a line of ``/readyz?verbose`` (:func:`judge_readiness`), not
readiness.

Slow or hostile clients cannot starve the probes: each connection has a deadline for its headers
(:mod:`reconciler.server.connections`), and only the webhook has a concurrency cap; ``/healthz``,
``/readyz`` and ``/metrics`` never queue behind it. uvicorn runs in a background thread, so that the
controller's loop stays plain synchronous code.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from typing import Any, Final

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from reconciler.logging import get_logger
from reconciler.metrics import CONTENT_TYPE, Metrics
from reconciler.readiness import Readiness, judge_readiness
from reconciler.runtime.lease import Lease
from reconciler.server.config import ServerError
from reconciler.server.connections import HEADER_TIMEOUT, MAX_HEADER_BYTES, deadline_protocol
from reconciler.server.webhook import BODY_TIMEOUT, QUEUE_TIMEOUT, Webhook, WebhookOutcome

_START_TIMEOUT_SECONDS: Final = 10.0
_STOP_TIMEOUT_SECONDS: Final = 10.0

_log = get_logger(component="server")


class Server:
    """The HTTP endpoints of a running reconciler, served from a background thread."""

    def __init__(
        self,
        metrics: Metrics,
        *,
        webhook_secret: bytes | None,
        on_webhook: Callable[[dict[str, Any]], WebhookOutcome],
        host: str = "127.0.0.1",
        port: int = 0,
        health: Callable[[], str | None] | None = None,
        readiness: Callable[[], str | None] | None = None,
        lease: Lease | None = None,
        header_timeout: float = HEADER_TIMEOUT,
        body_timeout: float = BODY_TIMEOUT,
        queue_timeout: float = QUEUE_TIMEOUT,
        webhook_allow_sha1: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``health`` and ``readiness`` answer None when all is well, else the reason (the controller's
        :meth:`~reconciler.runtime.pipeline.Pipeline.health` and ``readiness``); they must be quick.
        ``lease`` is the writer lease, for the ``/readyz?verbose`` line and the webhook of a standby.
        ``webhook_allow_sha1``: accept GitHub's legacy SHA-1 signature when a delivery has no SHA-256 one;
        ``clock``: Unix seconds now, for the webhook's replay window."""
        self._metrics = metrics
        self._health = health
        self._readiness = readiness
        self._lease = lease
        self._header_timeout = header_timeout
        self._webhook = Webhook(
            metrics,
            secret=webhook_secret,
            on_webhook=on_webhook,
            lease=lease,
            body_timeout=body_timeout,
            queue_timeout=queue_timeout,
            allow_sha1=webhook_allow_sha1,
            clock=clock,
        )
        self._host = host
        self._requested_port = port
        self._ready = threading.Event()
        self._socket: socket.socket | None = None
        self._uvicorn: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.app = Starlette(
            routes=[
                Route("/hooks/git", self._webhook.endpoint, methods=["POST"]),
                Route("/healthz", self._healthz, methods=["GET", "HEAD"]),
                Route("/readyz", self._readyz, methods=["GET", "HEAD"]),
                Route("/metrics", self._metrics_endpoint, methods=["GET", "HEAD"]),
            ]
        )

    @property
    def ready(self) -> bool:
        """True once the controller has finished its first successful pass, or ``/readyz`` found this
        instance standing by (it stays ready when it later takes the lease over)."""
        return self._ready.is_set()

    def mark_ready(self) -> None:
        """Called by the controller after its first successful pass: ``/readyz`` answers 200 from now on
        (unless the controller gives a reason not to act)."""
        self._ready.set()

    def readiness(self) -> Readiness:
        """What ``/readyz`` answers now (see :func:`judge_readiness`)."""
        problem = self._readiness() if self._readiness is not None else None
        verdict, standing_by = judge_readiness(passed=self.ready, problem=problem, lease=self._lease)
        if standing_by:
            self._ready.set()  # a standby that takes over keeps serving: readiness is not the lease
        return verdict

    @property
    def connections(self) -> int:
        """HTTP connections open now (idle, reading headers or answering)."""
        server = self._uvicorn
        return len(server.server_state.connections) if server is not None else 0

    @property
    def port(self) -> int:
        """The port actually bound (useful with ``port=0``)."""
        if self._socket is None:
            raise ServerError("the server is not started")
        return int(self._socket.getsockname()[1])

    @property
    def url(self) -> str:
        """Base URL of the server, without a trailing slash."""
        host = self._host
        if host in ("0.0.0.0", ""):
            host = "127.0.0.1"
        elif host == "::":
            host = "::1"
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    def start(self) -> None:
        """Bind the socket and serve in a daemon thread; returns once the server accepts connections."""
        if self._thread is not None:
            raise ServerError("the server is already started")
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            # Accepted connections inherit this. Without it uvicorn's separate writes of headers and body
            # meet Nagle's algorithm and the client's delayed ACK: every response took ~40 ms on loopback.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.bind((self._host, self._requested_port))
        except OSError as exc:
            sock.close()
            raise ServerError(f"cannot listen on {self._host}:{self._requested_port}: {exc}") from exc
        config = uvicorn.Config(
            self.app,
            log_config=None,  # logging is ours (reconciler.logging), not uvicorn's dictConfig
            access_log=False,
            lifespan="off",
            loop="asyncio",
            ws="none",
            server_header=False,
            http=deadline_protocol(self._header_timeout),
            h11_max_incomplete_event_size=MAX_HEADER_BYTES,
            # No server-wide concurrency limit: idle or slow connections would count against it and
            # turn the probes into 503s. The webhook has its own cap (MAX_WEBHOOKS_IN_FLIGHT).
            limit_concurrency=None,
            timeout_keep_alive=5,
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name="reconciler-http", daemon=True
        )
        self._socket, self._uvicorn, self._thread = sock, server, thread
        self._webhook.new_loop()
        thread.start()
        deadline = time.monotonic() + _START_TIMEOUT_SECONDS
        while not server.started:
            if not thread.is_alive():
                self._reset()
                raise ServerError("the HTTP server stopped while starting")
            if time.monotonic() > deadline:
                self.stop()
                raise ServerError("the HTTP server did not start in time")
            thread.join(0.01)
        _log.info("http server listening", url=self.url, webhook=self._webhook.enabled)

    def stop(self) -> None:
        """Stop serving and wait for the thread to end; a no-op when not started."""
        server, thread = self._uvicorn, self._thread
        if server is None or thread is None:
            return
        server.should_exit = True
        thread.join(_STOP_TIMEOUT_SECONDS)
        if thread.is_alive():
            server.force_exit = True
            thread.join(_STOP_TIMEOUT_SECONDS)
        self._reset()

    def _reset(self) -> None:
        if self._socket is not None:
            self._socket.close()
        self._socket, self._uvicorn, self._thread = None, None, None

    def __enter__(self) -> Server:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    async def _healthz(self, _request: Request) -> Response:
        problem = self._health() if self._health is not None else None
        if problem is not None:
            return PlainTextResponse(f"unhealthy: {problem}\n", status_code=503)
        return PlainTextResponse("ok\n")

    async def _readyz(self, request: Request) -> Response:
        verdict = self.readiness()
        verbose = "verbose" in request.query_params
        return PlainTextResponse(verdict.text(verbose), status_code=200 if verdict.ready else 503)

    async def _metrics_endpoint(self, _request: Request) -> Response:
        return Response(self._metrics.render(), media_type=CONTENT_TYPE)
