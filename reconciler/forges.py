"""What a forge's webhook delivery says: who sent it, how it proves itself, which event it is, which refs.

Pure (no I/O, no clock: the moment is passed in): :mod:`reconciler.server.webhook` reads the request and
asks this module. Each forge as its own documentation describes it:

- GitHub: ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body>``; event ``X-GitHub-Event``
  (``push``, ``ping``); delivery ``X-GitHub-Delivery``. GitHub also sends the legacy
  ``X-Hub-Signature: sha1=<hex HMAC-SHA1>`` "for compatibility" and recommends SHA-256; so a delivery
  with ``X-Hub-Signature-256`` is judged by it alone, and a SHA-1-only delivery (an old GitHub Enterprise
  Server, a relay that imitates it) is accepted only when :attr:`Verifier.allow_sha1` says so.
- Gitea, Forgejo, Gogs: ``X-Gitea-Signature`` (``X-Forgejo-``, ``X-Gogs-``), the bare hex HMAC-SHA256 of
  the JSON payload (also when posted as a form); event ``X-Gitea-Event``; delivery ``X-Gitea-Delivery``.
- GitLab: a signing token (Standard Webhooks): ``webhook-id``, ``webhook-timestamp`` (Unix seconds) and
  ``webhook-signature: v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<raw body>">`` (several space-separated
  entries during a rotation), keyed by the token's bytes (``whsec_<base64>``: the decoded key), refused
  outside :data:`REPLAY_WINDOW` of now; or the older ``X-Gitlab-Token: <the secret token itself>`` (no
  signature; compared in constant time). A delivery that carries a signature is judged by it. Event
  ``X-Gitlab-Event`` (``Push Hook``, ``Tag Push Hook``); delivery ``X-Gitlab-Event-UUID``.
- Bitbucket Cloud and Data Center: ``X-Hub-Signature: sha256=<hex HMAC-SHA256 of the raw body>``; event
  ``X-Event-Key`` (``repo:push`` on Cloud, ``repo:refs_changed`` on Data Center, ``diagnostics:ping``
  for Data Center's "Test connection"); delivery ``X-Request-UUID`` (Cloud) or ``X-Request-Id``.

A push names its refs differently too: GitHub, Gitea and GitLab send ``ref``; Bitbucket Cloud sends
``push.changes[].new|old.{type, name}``; Bitbucket Data Center sends ``changes[].refId``
(:func:`push_refs`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

__all__ = [
    "REPLAY_WINDOW",
    "Credential",
    "Event",
    "Refusal",
    "Replays",
    "Verifier",
    "credential",
    "event_of",
    "push_ref",
    "push_refs",
    "sign_body",
    "sign_standard",
]

REPLAY_WINDOW: Final = 300.0
"""Seconds a signed ``webhook-timestamp`` may be from this server's clock, either way (the Standard
Webhooks recommendation); a delivery outside it is refused as a replay (or a sender's skewed clock)."""

_SHA256: Final = "sha256="
_SHA1: Final = "sha1="
_HEX: Final = frozenset("0123456789abcdef")
_WHSEC: Final = b"whsec_"

# Forges that send GitHub-shaped headers of their own name (Gitea also sends X-GitHub-Event).
_GITHUB_LIKE: Final = ("github", "gitea", "forgejo", "gogs")
_GITLAB_PUSHES: Final = frozenset({"Push Hook", "Tag Push Hook"})
_BITBUCKET_PUSHES: Final = frozenset({"repo:push", "repo:refs_changed"})
_BITBUCKET_PINGS: Final = frozenset({"diagnostics:ping"})

Scheme = Literal["sha256", "sha1", "token", "standard"]


def sign_body(secret: bytes, body: bytes) -> str:
    """``sha256=<hex HMAC-SHA256>`` of ``body``: what GitHub (``X-Hub-Signature-256``) and Bitbucket
    (``X-Hub-Signature``) send; Gitea and Forgejo send the hex alone."""
    return _SHA256 + hmac.new(secret, body, hashlib.sha256).hexdigest()


def _standard_key(secret: bytes) -> bytes:
    """The HMAC key of a Standard Webhooks secret: ``whsec_<base64>`` is its decoded bytes (GitLab's
    signing tokens have that form), any other secret its own bytes."""
    if secret.startswith(_WHSEC):
        try:
            return base64.b64decode(secret[len(_WHSEC) :], validate=True)
        except (binascii.Error, ValueError):
            return secret
    return secret


def sign_standard(secret: bytes, message_id: str, timestamp: str, body: bytes) -> str:
    """``v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">``: one ``webhook-signature`` entry."""
    signed = f"{message_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(_standard_key(secret), signed, hashlib.sha256).digest()).decode()


@dataclass(frozen=True, slots=True)
class Credential:
    """How a delivery proves it knows the secret: hex HMAC digests of what it signed (``sha256``,
    ``sha1``), the secret token itself (``token``, GitLab), or Standard Webhooks signatures (``standard``:
    base64 digests over ``message_id``, ``timestamp`` and the body)."""

    forge: str
    scheme: Scheme
    values: tuple[str, ...]
    header: str
    message_id: str | None = None
    timestamp: str | None = None


def _hex(value: str) -> str | None:
    value = value.strip().lower()
    return value if value and set(value) <= _HEX else None


def _standard(headers: Mapping[str, str]) -> Credential | None:
    signatures = headers.get("webhook-signature")
    if signatures is None:
        return None
    entries = tuple(e[3:] for e in signatures.split() if e.startswith("v1,"))  # other versions: not ours
    forge = "gitlab" if "x-gitlab-event" in headers else "standard-webhooks"
    stamp, message = headers.get("webhook-timestamp"), headers.get("webhook-id")
    return Credential(forge, "standard", entries, "webhook-signature", message, stamp)


def credential(headers: Mapping[str, str]) -> Credential | None:
    """The delivery's proof, from headers keyed in lower case; None when it carries none we read."""
    github = headers.get("x-hub-signature-256", "")
    if github.startswith(_SHA256):
        return Credential("github", "sha256", (github[len(_SHA256) :],), "X-Hub-Signature-256")
    for forge in ("forgejo", "gitea", "gogs"):
        bare = _hex(headers.get(f"x-{forge}-signature", ""))
        if bare is not None:
            return Credential(forge, "sha256", (bare,), f"X-{forge.capitalize()}-Signature")
    standard = _standard(headers)
    if standard is not None:
        return standard
    token = headers.get("x-gitlab-token")
    if token:
        return Credential("gitlab", "token", (token,), "X-Gitlab-Token")
    hub = headers.get("x-hub-signature", "")
    if hub.startswith(_SHA256):
        return Credential("bitbucket", "sha256", (hub[len(_SHA256) :],), "X-Hub-Signature")
    if hub.startswith(_SHA1):
        return Credential("github", "sha1", (hub[len(_SHA1) :],), "X-Hub-Signature")
    return None


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a delivery is refused: ``reason`` for the log, ``message`` for the answer (neither holds a
    secret, a token or a signature)."""

    reason: str
    message: str


def _matches(given: Sequence[str], expected: bytes) -> bool:
    """Whether any of ``given`` equals ``expected``, each compared in constant time."""
    found = False
    for value in given:
        found |= hmac.compare_digest(value.strip().encode("utf-8", "surrogateescape"), expected)
    return found


@dataclass(frozen=True, slots=True)
class Verifier:
    """Checks a delivery's proof against the shared ``secret``: every comparison in constant time, a
    signed timestamp within ``window`` seconds of the moment given, SHA-1 only when ``allow_sha1``."""

    secret: bytes
    allow_sha1: bool = False
    window: float = REPLAY_WINDOW

    def refusal(self, proof: Credential, signed: Sequence[bytes], now: float) -> Refusal | None:
        """None when ``proof`` shows the secret, else why not. ``signed``: what the sender may have
        signed (the raw body, and a form delivery's ``payload`` field); ``now``: Unix seconds."""
        if proof.scheme == "token":
            if _matches(proof.values, self.secret):
                return None
            return Refusal("token mismatch", f"{proof.header}: token mismatch")
        if proof.scheme == "standard":
            return self._standard(proof, signed, now)
        if proof.scheme == "sha1" and not self.allow_sha1:
            return Refusal(
                "sha1 refused",
                "X-Hub-Signature: SHA-1 signatures are not accepted (GitHub also sends X-Hub-Signature-256; "
                "SHA-1 is accepted only when the reconciler is configured for it)",
            )
        digest = hashlib.sha256 if proof.scheme == "sha256" else hashlib.sha1
        given = [v.lower() for v in proof.values]
        if any(_matches(given, hmac.new(self.secret, b, digest).hexdigest().encode()) for b in signed):
            return None
        return Refusal("signature mismatch", f"{proof.header}: signature mismatch")

    def _standard(self, proof: Credential, signed: Sequence[bytes], now: float) -> Refusal | None:
        if proof.message_id is None or proof.timestamp is None:
            return Refusal(
                "incomplete signature",
                "webhook-signature needs webhook-id and webhook-timestamp beside it",
            )
        stamp = proof.timestamp.strip()
        if not stamp.isdigit() or len(stamp) > 12:
            return Refusal("bad timestamp", "webhook-timestamp: not a Unix time in whole seconds")
        skew = now - int(stamp)
        if abs(skew) > self.window:
            return Refusal(
                "outside the replay window",
                f"webhook-timestamp: {abs(skew):.0f} s {'behind' if skew > 0 else 'ahead of'} this server's "
                f"clock, outside the {self.window:g} s replay window",
            )
        body = signed[0] if signed else b""  # the raw body: Standard Webhooks signs nothing else
        if _matches(proof.values, sign_standard(self.secret, proof.message_id, stamp, body)[3:].encode()):
            return None
        return Refusal("signature mismatch", "webhook-signature: signature mismatch")


class Replays:
    """The ``webhook-id`` of each signed delivery accepted while its timestamp can still pass: a second
    delivery of one id then is a replay (or a sender's retry of a delivery already answered). An id is
    kept ``window`` seconds from its acceptance, twice :data:`REPLAY_WINDOW` by default (a timestamp up to
    300 s ahead of the clock is accepted, and passes until 300 s after it); older ids are forgotten (their
    timestamps are refused anyway). At most ``limit`` are kept, the oldest giving way, so that a flood of
    distinct ids cannot grow the memory: memory per replica, lost on a restart (docs/operations.md)."""

    def __init__(self, window: float = 2 * REPLAY_WINDOW, limit: int = 10_000) -> None:
        self._window = window
        self._limit = limit
        self._seen: dict[str, float] = {}

    def seen(self, message_id: str, now: float) -> bool:
        """Whether ``message_id`` was accepted within the window before ``now``."""
        self._expire(now)
        return message_id in self._seen

    def remember(self, message_id: str, now: float) -> None:
        self._seen.pop(message_id, None)
        self._seen[message_id] = now
        while len(self._seen) > self._limit:
            del self._seen[next(iter(self._seen))]

    def _expire(self, now: float) -> None:
        for key, at in list(self._seen.items()):
            if now - at <= self._window:
                break
            del self._seen[key]


@dataclass(frozen=True, slots=True)
class Event:
    """What a delivery is about: ``kind`` is ``push``, ``ping`` or ``other`` (the forge's own name in
    ``name``); ``delivery`` is the forge's id of this delivery, for the logs."""

    forge: str
    kind: Literal["push", "ping", "other"]
    name: str
    delivery: str | None


def event_of(headers: Mapping[str, str]) -> Event:
    """The delivery's event. A GitHub-shaped delivery without an event header counts as a push."""
    gitlab = headers.get("x-gitlab-event")
    if gitlab:
        kind: Literal["push", "ping", "other"] = "push" if gitlab in _GITLAB_PUSHES else "other"
        return Event("gitlab", kind, gitlab, headers.get("x-gitlab-event-uuid"))
    bitbucket = headers.get("x-event-key")
    if bitbucket:
        kind = "push" if bitbucket in _BITBUCKET_PUSHES else "other"
        kind = "ping" if bitbucket in _BITBUCKET_PINGS else kind
        delivery = headers.get("x-request-uuid") or headers.get("x-request-id")
        return Event("bitbucket", kind, bitbucket, delivery)
    for forge in _GITHUB_LIKE:
        name = headers.get(f"x-{forge}-event")
        if name:
            kind = "push" if name == "push" else "ping" if name == "ping" else "other"
            return Event(forge, kind, name, headers.get(f"x-{forge}-delivery"))
    return Event("github", "push", "push", headers.get("x-github-delivery"))


def _bitbucket_cloud_ref(side: object) -> str | None:
    if not isinstance(side, Mapping):
        return None
    name, kind = side.get("name"), side.get("type")
    if not isinstance(name, str) or not name:
        return None
    if kind == "branch" or kind == "named_branch":
        return f"refs/heads/{name}"
    if kind == "tag":
        return f"refs/tags/{name}"
    return None


def _bitbucket_refs(payload: Mapping[str, Any]) -> list[str]:
    refs: list[str] = []
    push = payload.get("push")
    cloud = push.get("changes") if isinstance(push, Mapping) else None
    for change in cloud if isinstance(cloud, list) else []:
        if isinstance(change, Mapping):
            refs.extend(r for side in ("new", "old") if (r := _bitbucket_cloud_ref(change.get(side))))
    server = payload.get("changes")
    for change in server if isinstance(server, list) else []:
        if not isinstance(change, Mapping):
            continue
        ref = change.get("refId")
        nested = change.get("ref")
        if not isinstance(ref, str) and isinstance(nested, Mapping):
            ref = nested.get("id")
        if isinstance(ref, str) and ref:
            refs.append(ref)
    return refs


def push_refs(payload: Mapping[str, Any]) -> tuple[str, ...]:
    """Every ref a push payload names (``refs/heads/main``), in order, once each; empty when it names
    none. One Bitbucket push may change several branches."""
    ref = payload.get("ref")
    found = [ref] if isinstance(ref, str) and ref else _bitbucket_refs(payload)
    return tuple(dict.fromkeys(found))


def push_ref(payload: Mapping[str, Any]) -> str | None:
    """The first ref a push payload names, or None (see :func:`push_refs`)."""
    refs = push_refs(payload)
    return refs[0] if refs else None
