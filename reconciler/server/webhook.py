"""``POST /hooks/git``: verify a forge's delivery, then start a pass through ``on_webhook``.

Every delivery proves it knows a shared secret, in its forge's way (:mod:`reconciler.forges`): GitHub's
``X-Hub-Signature-256`` and Bitbucket's ``X-Hub-Signature`` (``sha256=<hex HMAC-SHA256 of the raw
body>``), Gitea's and Forgejo's bare-hex signature of the JSON payload, GitLab's signing token (Standard
Webhooks: ``webhook-signature`` over id, timestamp and body, refused outside the replay window of the
injected ``clock``; an id accepted once in the window is answered ``duplicate``) or its older
``X-Gitlab-Token`` (the secret itself), GitHub's legacy SHA-1 ``X-Hub-Signature`` only when
``allow_sha1``; each compared in constant time. Without a secret the endpoint is off (404): an
unauthenticated trigger is never offered.

A webhook body must arrive within ``body_timeout`` seconds, and only :data:`MAX_WEBHOOKS_IN_FLIGHT`
bodies are read at once (the excess waits ``queue_timeout`` seconds for a slot, then gets 503); the
probes and ``/metrics`` never queue behind this cap.

The endpoint never reconciles anything itself: a verified push only calls ``on_webhook(payload)``,
which the controller uses to start a pass at once (it must return quickly, for instance by setting an
event). A burst is coalesced, never refused: a push that arrives while a call for the same refs waits
for its worker thread rides on that call, and a push that finds a pass already pending
(``on_webhook`` answers :data:`COALESCED`) is answered 202 ``{"status": "coalesced"}``. A standby
(another instance holds the writer lease) starts nothing.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal
from urllib.parse import parse_qs

from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from reconciler.forges import Credential, Replays, Verifier, credential, event_of, push_ref, push_refs
from reconciler.logging import get_logger, register_secret
from reconciler.metrics import Metrics
from reconciler.readiness import lease_state
from reconciler.runtime.lease import Lease

MAX_WEBHOOK_BODY: Final = 1024 * 1024
"""Largest webhook body accepted, in bytes (GitHub caps its payloads at 25 MB; a push is far smaller)."""

BODY_TIMEOUT: Final = 10.0
"""Seconds a webhook delivery has to send its body once its headers are in (408 after that)."""

MAX_WEBHOOKS_IN_FLIGHT: Final = 16
"""Webhook bodies read and verified at once; more wait for a slot (probes and ``/metrics`` never do)."""

QUEUE_TIMEOUT: Final = 5.0
"""Seconds a webhook delivery waits for one of the :data:`MAX_WEBHOOKS_IN_FLIGHT` slots; 503 after that."""

COALESCED: Final = "coalesced"
"""What ``on_webhook`` answers when a pass was already pending: the delivery is answered 202 coalesced."""

WebhookOutcome = bool | Literal["coalesced"] | None
"""``on_webhook``'s answer: True or None, a pass was requested; :data:`COALESCED`, one was already
pending (it will read this push); False, no pass starts (another branch, a tag)."""

_log = get_logger(component="server")


class _BodyTooLarge(Exception):
    pass


class Webhook:
    """The webhook endpoint of one :class:`~reconciler.server.app.Server`: :meth:`endpoint` answers
    each delivery and counts it in ``metrics``."""

    def __init__(
        self,
        metrics: Metrics,
        *,
        secret: bytes | None,
        on_webhook: Callable[[dict[str, Any]], WebhookOutcome],
        lease: Lease | None,
        body_timeout: float,
        queue_timeout: float,
        allow_sha1: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``clock``: Unix seconds now, for the replay window of signed timestamps (injected by tests)."""
        self._metrics = metrics
        self._lease = lease
        self._body_timeout = body_timeout
        self._queue_timeout = queue_timeout
        self._slots: asyncio.Semaphore | None = None  # made in the server's event loop (each start)
        self._dispatch_lock = threading.Lock()  # the event loop and the worker threads of _dispatch
        self._waiting: dict[tuple[str, ...], _Waiting] = {}
        self._secret = secret or None
        self._verifier = Verifier(self._secret, allow_sha1) if self._secret is not None else None
        if self._secret is not None:
            register_secret(self._secret)
        self._clock = clock
        self._replays = Replays()  # only the event loop's thread reads and writes it
        self._on_webhook = on_webhook

    @property
    def enabled(self) -> bool:
        """False without a secret: the endpoint answers 404."""
        return self._verifier is not None

    def new_loop(self) -> None:
        """The server starts a new event loop: the slots are made afresh in it."""
        self._slots = None

    async def endpoint(self, request: Request) -> Response:
        if self._verifier is None:
            result, response = "disabled", _error(404, "webhook disabled: no secret configured")
        else:
            if self._slots is None:  # only the event loop's thread runs this: no lock needed
                self._slots = asyncio.Semaphore(MAX_WEBHOOKS_IN_FLIGHT)
            try:
                async with asyncio.timeout(self._queue_timeout):
                    await self._slots.acquire()
            except TimeoutError:
                received: _Verified | tuple[str, Response] = (
                    "busy",
                    _error(503, "too many webhook deliveries at once; retry"),
                )
            else:
                try:
                    received = await self._receive(request, self._verifier)
                finally:
                    self._slots.release()  # the cap bounds bodies being read, not dispatches
            if isinstance(received, tuple):
                result, response = received
            else:
                result, response = await self._handle_event(request, received.body)
                if received.replay_key is not None and result != "error":  # a failed one may be retried
                    self._replays.remember(received.replay_key, self._clock())
        self._metrics.on_webhook(result)
        return response

    async def _receive(self, request: Request, verifier: Verifier) -> _Verified | tuple[str, Response]:
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
        now = self._clock()
        refusal = verifier.refusal(proof, _signed(body, request.headers.get("content-type", "")), now)
        if refusal is not None:
            _log.warning("webhook rejected", reason=refusal.reason, forge=proof.forge, client=client)
            return "unauthorized", _error(401, refusal.message)
        key = _replay_key(proof)
        if key is not None and self._replays.seen(key, now):
            _log.info("webhook duplicate", forge=proof.forge, delivery=key, client=client)
            return "duplicate", JSONResponse(
                {"status": "duplicate", "reason": "this webhook-id was already accepted; nothing starts"}
            )
        return _Verified(body, key)

    async def _handle_event(self, request: Request, body: bytes) -> tuple[str, Response]:
        """Answer a verified delivery by its event; a push goes to :meth:`_dispatch`."""
        event = event_of(request.headers)
        if event.kind == "ping":
            _log.info("webhook ping", forge=event.forge, delivery=event.delivery)
            return "ping", JSONResponse({"status": "pong"})
        if event.kind != "push":
            _log.info("webhook ignored", forge=event.forge, forge_event=event.name, delivery=event.delivery)
            return "ignored", JSONResponse({"status": "ignored", "event": event.name})
        standing_by, _line = lease_state(self._lease)
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


@dataclass(frozen=True, slots=True)
class _Verified:
    """A delivery whose proof holds: its body, and the signed id a replay of it would repeat (or None)."""

    body: bytes
    replay_key: str | None


def _replay_key(proof: Credential) -> str | None:
    """The signed ``webhook-id`` of a Standard Webhooks delivery (an unsigned delivery id proves nothing)."""
    return proof.message_id if proof.scheme == "standard" else None


@dataclass(slots=True)
class _Waiting:
    """A call of ``on_webhook`` submitted to the thread pool; ``started`` once its thread runs it."""

    future: asyncio.Future[WebhookOutcome]
    started: bool = False


_NO_PROOF: Final = (
    "missing or malformed X-Hub-Signature-256 (or X-Gitea-Signature / X-Forgejo-Signature, "
    "webhook-signature, X-Gitlab-Token, Bitbucket's X-Hub-Signature: sha256=...)"
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
