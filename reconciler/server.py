"""The reconciler's HTTP side: the git webhook, ``/healthz``, ``/readyz`` and ``/metrics``.

``/healthz`` is liveness: 503 once passes have failed continuously for longer than a bound, so that an
orchestrator restarts a wedged process. ``/readyz`` is readiness: 503 with the reason before the first
successful pass and while the instance must not act (its status branch follows another config branch).
A standby (another instance holds the writer lease) is ready: it serves ``/metrics``, its webhook
starts nothing, and a rollout of two replicas completes. Whether this instance holds the lease is the
``reconciler_lease_held`` gauge and a line of ``/readyz?verbose`` (:func:`judge_readiness`), not
readiness.

Slow or hostile clients cannot starve the probes: every connection must send a request's line and
headers within ``header_timeout`` seconds (after connecting, and again after each answer), a webhook
body within ``body_timeout`` seconds, headers are capped at 16 KiB, and only the webhook has a
concurrency cap on the bodies it is reading at once (its excess gets 503); ``/healthz``, ``/readyz``
and ``/metrics`` never queue behind it.

A Starlette app served by uvicorn in a background thread, so that the controller's loop stays plain
synchronous code. The server never reconciles anything itself: a verified push only calls
``on_webhook(payload)``, which the controller uses to start a pass at once (it must return quickly,
for instance by setting an event). A burst is coalesced, never refused: a push that arrives while a
call for the same refs waits for its worker thread rides on that call, and a push that finds a pass
already pending (``on_webhook`` answers :data:`COALESCED`) is answered 202 ``{"status": "coalesced"}``.

Every delivery proves it knows a shared secret, in its forge's way (:mod:`reconciler.forges`): GitHub's
``X-Hub-Signature-256`` and Bitbucket's ``X-Hub-Signature`` (``sha256=<hex HMAC-SHA256 of the raw
body>``), Gitea's and Forgejo's bare-hex signature of the JSON payload, GitLab's ``X-Gitlab-Token``
(the secret itself), each compared in constant time. Without a secret the endpoint is off (404): an
unauthenticated trigger is never offered. The secret comes from the environment
(:func:`webhook_secret_from_env`), never from a command-line value, and is registered for redaction.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal
from urllib.parse import parse_qs

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from uvicorn.protocols.http.h11_impl import H11Protocol

from reconciler.forges import authentic, credential, event_of, push_ref, push_refs, sign_body
from reconciler.logging import get_logger, register_secret
from reconciler.metrics import CONTENT_TYPE, Metrics
from reconciler.runtime.lease import Lease

__all__ = [
    "BODY_TIMEOUT",
    "COALESCED",
    "HEADER_TIMEOUT",
    "MAX_WEBHOOKS_IN_FLIGHT",
    "MAX_WEBHOOK_BODY",
    "QUEUE_TIMEOUT",
    "WEBHOOK_SECRET_ENV",
    "WEBHOOK_SECRET_FILE_ENV",
    "Readiness",
    "Server",
    "ServerError",
    "WebhookOutcome",
    "judge_readiness",
    "parse_listen",
    "push_ref",
    "push_refs",
    "sign_body",
    "webhook_secret_from_env",
]

MAX_WEBHOOK_BODY: Final = 1024 * 1024
"""Largest webhook body accepted, in bytes (GitHub caps its payloads at 25 MB; a push is far smaller)."""

HEADER_TIMEOUT: Final = 10.0
"""Seconds a connection has to send a request's line and headers (after connecting or an answer)."""

BODY_TIMEOUT: Final = 10.0
"""Seconds a webhook delivery has to send its body once its headers are in (408 after that)."""

MAX_WEBHOOKS_IN_FLIGHT: Final = 16
"""Webhook bodies read and verified at once; more wait for a slot (probes and ``/metrics`` never do)."""

QUEUE_TIMEOUT: Final = 5.0
"""Seconds a webhook delivery waits for one of the :data:`MAX_WEBHOOKS_IN_FLIGHT` slots; 503 after that."""

MAX_HEADER_BYTES: Final = 16 * 1024
"""Largest request line plus headers (h11's incomplete-event limit); more is a 400."""

COALESCED: Final = "coalesced"
"""What ``on_webhook`` answers when a pass was already pending: the delivery is answered 202 coalesced."""

WebhookOutcome = bool | Literal["coalesced"] | None
"""``on_webhook``'s answer: True or None, a pass was requested; :data:`COALESCED`, one was already
pending (it will read this push); False, no pass starts (another branch, a tag)."""

WEBHOOK_SECRET_ENV: Final = "RECONCILER_WEBHOOK_SECRET"
WEBHOOK_SECRET_FILE_ENV: Final = "RECONCILER_WEBHOOK_SECRET_FILE"

_START_TIMEOUT_SECONDS: Final = 10.0
_STOP_TIMEOUT_SECONDS: Final = 10.0

_log = get_logger(component="server")


class ServerError(RuntimeError):
    """The server could not start or stop."""


class _BodyTooLarge(Exception):
    pass


def webhook_secret_from_env(environ: Mapping[str, str] | None = None) -> bytes | None:
    """The webhook secret from ``$RECONCILER_WEBHOOK_SECRET`` or the file ``$RECONCILER_WEBHOOK_SECRET_FILE``.

    The file form suits container secrets mounted as files; a trailing newline is dropped. An empty
    value counts as unset (an HMAC with an empty key is no authentication). The secret is registered
    for log redaction before it is returned.
    """
    env = os.environ if environ is None else environ
    value: str | None = env.get(WEBHOOK_SECRET_ENV) or None
    path = env.get(WEBHOOK_SECRET_FILE_ENV)
    if value is None and path:
        try:
            with open(path, encoding="utf-8") as handle:
                value = handle.read().rstrip("\r\n") or None
        except OSError as exc:
            raise ServerError(
                f"cannot read the webhook secret file named by {WEBHOOK_SECRET_FILE_ENV}: {exc}"
            ) from None
    if value is None:
        return None
    register_secret(value)
    return value.encode("utf-8")


def parse_listen(address: str) -> tuple[str, int]:
    """Split a ``--listen`` value: ``HOST:PORT``, ``[IPv6]:PORT`` or ``:PORT`` (all interfaces)."""
    host, sep, port_text = address.rpartition(":")
    if not sep or not port_text.isdigit():
        raise ValueError(f"listen address {address!r} is not HOST:PORT")
    port = int(port_text)
    if port > 65535:
        raise ValueError(f"listen address {address!r}: port out of range")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return (host or "0.0.0.0", port)


@dataclass(frozen=True, slots=True)
class Readiness:
    """What ``/readyz`` answers: ready or not, and one line per check for ``/readyz?verbose``."""

    ready: bool
    lines: tuple[str, ...]

    def text(self, verbose: bool) -> str:
        if verbose:
            verdict = "readyz check passed" if self.ready else "readyz check failed"
            return "\n".join((*self.lines, verdict)) + "\n"
        if self.ready:
            return "ready\n"
        reasons = [line.split(": ", 1)[1] for line in self.lines if line.startswith("[-]")]
        return f"not ready: {'; '.join(reasons)}\n"


def judge_readiness(*, passed: bool, problem: str | None, lease: Lease | None) -> tuple[Readiness, bool]:
    """The one readiness rule, and whether this instance stands by.

    ``passed``: a pass has succeeded (or the instance stood by) since the process started;
    ``problem``: the controller's reason not to act (its status branch follows another config branch).
    Ready iff there is no problem and a pass has succeeded or another instance holds the writer lease.
    Holding the lease is never a condition: the ``lease`` line only informs (lines as Kubernetes'
    ``/readyz?verbose``: ``[+]name ok`` or ``[-]name failed: reason``).
    """
    standing_by, lease_line = _lease_state(lease)
    lines = [lease_line]
    if passed or standing_by:
        lines.append(
            "[+]first-pass ok" + (": standing by, nothing to do" if standing_by and not passed else "")
        )
    else:
        lines.append("[-]first-pass failed: no successful pass yet")
    lines.append("[+]branch ok" if problem is None else f"[-]branch failed: {problem}")
    ready = problem is None and (passed or standing_by)
    return Readiness(ready, tuple(lines)), standing_by


def _lease_state(lease: Lease | None) -> tuple[bool, str]:
    """(standing by, the ``/readyz?verbose`` line) for the writer lease."""
    if lease is None:
        return False, "[+]lease ok: none (this instance writes)"
    if lease.holds():
        return False, f"[+]lease ok: held by this instance ({lease.identity}); reconciler_lease_held 1"
    holder = lease.holder()
    if holder is None or holder == lease.identity:
        return False, "[+]lease ok: not held yet, taking it; reconciler_lease_held 0"
    return True, (
        f"[+]lease ok: standing by, held by {holder}; this instance writes nothing; reconciler_lease_held 0"
    )


class _DeadlineProtocol(H11Protocol):
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


def _protocol(header_timeout: float) -> type[_DeadlineProtocol]:
    return type("DeadlineProtocol", (_DeadlineProtocol,), {"header_timeout": header_timeout})


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
    ) -> None:
        """``health`` and ``readiness`` answer None when all is well, else the reason (the controller's
        :meth:`~reconciler.runtime.pipeline.Pipeline.health` and ``readiness``); they must be quick.
        ``lease`` is the writer lease, for the ``/readyz?verbose`` line and the webhook of a standby."""
        self._metrics = metrics
        self._health = health
        self._readiness = readiness
        self._lease = lease
        self._header_timeout = header_timeout
        self._body_timeout = body_timeout
        self._queue_timeout = queue_timeout
        self._slots: asyncio.Semaphore | None = None  # made in the server's event loop (each start)
        self._dispatch_lock = threading.Lock()  # the event loop and the worker threads of _dispatch
        self._waiting: dict[tuple[str, ...], _Waiting] = {}
        self._secret = webhook_secret or None
        if self._secret is not None:
            register_secret(self._secret)
        self._on_webhook = on_webhook
        self._host = host
        self._requested_port = port
        self._ready = threading.Event()
        self._socket: socket.socket | None = None
        self._uvicorn: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.app = Starlette(
            routes=[
                Route("/hooks/git", self._webhook, methods=["POST"]),
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
            http=_protocol(self._header_timeout),
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
        self._slots = None
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
        _log.info("http server listening", url=self.url, webhook=self._secret is not None)

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

    async def _webhook(self, request: Request) -> Response:
        if self._secret is None:
            result, response = "disabled", _error(404, "webhook disabled: no secret configured")
        else:
            if self._slots is None:  # only the event loop's thread runs this: no lock needed
                self._slots = asyncio.Semaphore(MAX_WEBHOOKS_IN_FLIGHT)
            try:
                async with asyncio.timeout(self._queue_timeout):
                    await self._slots.acquire()
            except TimeoutError:
                received: bytes | tuple[str, Response] = (
                    "busy",
                    _error(503, "too many webhook deliveries at once; retry"),
                )
            else:
                try:
                    received = await self._receive(request, self._secret)
                finally:
                    self._slots.release()  # the cap bounds bodies being read, not dispatches
            if isinstance(received, tuple):
                result, response = received
            else:
                result, response = await self._handle_event(request, received)
        self._metrics.on_webhook(result)
        return response

    async def _receive(self, request: Request, secret: bytes) -> bytes | tuple[str, Response]:
        """Read and verify one delivery: its body, or the result label and the answer that refuses it."""
        client = _client(request)
        proof = credential(request.headers)
        if proof is None:
            _log.warning("webhook rejected", reason="missing signature", client=client)
            return "unauthorized", _error(401, _NO_PROOF)
        declared = request.headers.get("content-length")
        if declared is not None:
            if not declared.isdigit():
                return "bad_request", _error(400, "invalid Content-Length")
            if int(declared) > MAX_WEBHOOK_BODY:
                _log.warning("webhook rejected", reason="body too large", size=int(declared), client=client)
                return "too_large", _error(413, f"body larger than {MAX_WEBHOOK_BODY} bytes")
        try:
            async with asyncio.timeout(self._body_timeout):
                body = await _read_capped(request, MAX_WEBHOOK_BODY)
        except TimeoutError:
            _log.warning("webhook rejected", reason="body too slow", client=client)
            return "timeout", _error(408, f"body not received within {self._body_timeout:g} s")
        except _BodyTooLarge:
            _log.warning("webhook rejected", reason="body too large", client=client)
            return "too_large", _error(413, f"body larger than {MAX_WEBHOOK_BODY} bytes")
        except ClientDisconnect:
            return "bad_request", _error(400, "client disconnected")
        if not authentic(proof, secret, _signed(body, request.headers.get("content-type", ""))):
            what = "token" if proof.kind == "token" else "signature"
            _log.warning("webhook rejected", reason=f"{what} mismatch", forge=proof.forge, client=client)
            return "unauthorized", _error(401, f"{proof.header}: {what} mismatch")
        return body

    async def _handle_event(self, request: Request, body: bytes) -> tuple[str, Response]:
        """Answer a verified delivery by its event; a push goes to :meth:`_dispatch`."""
        event = event_of(request.headers)
        if event.kind == "ping":
            _log.info("webhook ping", forge=event.forge, delivery=event.delivery)
            return "ping", JSONResponse({"status": "pong"})
        if event.kind != "push":
            _log.info("webhook ignored", forge=event.forge, forge_event=event.name, delivery=event.delivery)
            return "ignored", JSONResponse({"status": "ignored", "event": event.name})
        standing_by, _line = _lease_state(self._lease)
        if standing_by:  # the writer polls; a standby starts nothing
            holder = self._lease.holder() if self._lease is not None else None
            _log.info("webhook ignored: standing by", holder=holder, delivery=event.delivery)
            return "standby", JSONResponse(
                {"status": "ignored", "reason": f"standing by: the writer lease is held by {holder}"}
            )
        try:
            payload = _decode_payload(body, request.headers.get("content-type", ""))
        except ValueError as exc:
            return "bad_request", _error(400, str(exc))
        try:
            outcome, joined = await self._dispatch(payload)
        except Exception:
            _log.exception("webhook handler failed", delivery=event.delivery)
            return "error", _error(500, "webhook handler failed")
        ref = push_ref(payload)
        if outcome is False:  # a push to another branch, or a tag: no pass starts, and the answer says so
            _log.info("webhook ignored", ref=ref, forge=event.forge, delivery=event.delivery)
            return "ignored", JSONResponse(
                {"status": "ignored", "ref": ref, "reason": "not the followed branch"}
            )
        if joined or outcome == COALESCED:
            _log.debug("webhook coalesced", ref=ref, forge=event.forge, delivery=event.delivery)
            return "coalesced", JSONResponse(
                {"status": "coalesced", "reason": "a pass is already pending; it reads this push"},
                status_code=202,
            )
        _log.info("webhook accepted", ref=ref, forge=event.forge, delivery=event.delivery)
        return "accepted", JSONResponse({"status": "accepted"}, status_code=202)

    async def _dispatch(self, payload: dict[str, Any]) -> tuple[WebhookOutcome, bool]:
        """``on_webhook(payload)`` in a worker thread, once per burst: a push arriving while a call for
        the same refs waits for its thread rides on that call (its pass starts after both pushes), and
        is told so (``(outcome, True)``). A call already running is never joined: its pass may have
        read the branch before this push."""
        key = push_refs(payload)
        with self._dispatch_lock:
            waiting = self._waiting.get(key)
            if waiting is not None and not waiting.started:
                joined = waiting
            else:
                joined = None
                mine = _Waiting(asyncio.get_running_loop().create_future())
                self._waiting[key] = mine
        if joined is not None:
            return await asyncio.shield(joined.future), True

        def call() -> WebhookOutcome:
            with self._dispatch_lock:
                mine.started = True  # from now on no delivery joins this call
                if self._waiting.get(key) is mine:
                    del self._waiting[key]
            return self._on_webhook(payload)

        try:
            outcome = await run_in_threadpool(call)
        except Exception as exc:
            mine.future.set_exception(exc)
            mine.future.exception()  # retrieved: joiners may be none
            raise
        mine.future.set_result(outcome)
        return outcome, False


@dataclass(slots=True)
class _Waiting:
    """A call of ``on_webhook`` submitted to the thread pool; ``started`` once its thread runs it."""

    future: asyncio.Future[WebhookOutcome]
    started: bool = False


_NO_PROOF: Final = (
    "missing or malformed X-Hub-Signature-256 (or X-Gitea-Signature / X-Forgejo-Signature, "
    "X-Gitlab-Token, Bitbucket's X-Hub-Signature: sha256=...)"
)


async def _read_capped(request: Request, limit: int) -> bytes:
    """Read the body, giving up as soon as it exceeds ``limit`` (a chunked body has no Content-Length)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _BodyTooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def _signed(body: bytes, content_type: str) -> list[bytes]:
    """What the sender may have signed: the raw body (GitHub), and for a form delivery also its JSON
    ``payload`` field, which is what Gitea and Forgejo sign."""
    candidates = [body]
    if content_type.split(";", 1)[0].strip().lower() == "application/x-www-form-urlencoded":
        try:
            fields = parse_qs(body.decode("utf-8"), strict_parsing=False)
        except UnicodeDecodeError:
            return candidates
        if "payload" in fields:
            candidates.append(fields["payload"][0].encode("utf-8"))
    return candidates


def _decode_payload(body: bytes, content_type: str) -> dict[str, Any]:
    """GitHub sends JSON, or a form with a ``payload`` field when the hook's content type is form."""
    try:
        if content_type.split(";", 1)[0].strip().lower() == "application/x-www-form-urlencoded":
            fields = parse_qs(body.decode("utf-8"), strict_parsing=False)
            if "payload" not in fields:
                raise ValueError("form body without a payload field")
            document = json.loads(fields["payload"][0])
        else:
            document = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"payload is not JSON: {exc.__class__.__name__}") from None
    except RecursionError:  # a signed but absurdly nested document; a push payload nests a few levels
        raise ValueError("payload nests too deeply") from None
    if not isinstance(document, dict):
        raise ValueError("payload is not a JSON object")
    return document


def _error(status: int, message: str) -> Response:
    return JSONResponse({"error": message}, status_code=status)


def _client(request: Request) -> str | None:
    return request.client.host if request.client is not None else None
