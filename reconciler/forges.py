"""What a forge's webhook delivery says: who sent it, how it proves itself, which event it is, which refs.

Pure (no I/O): :mod:`reconciler.server.webhook` reads the request and asks this module. Each forge as its own
documentation describes it:

- GitHub: ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body>``; event ``X-GitHub-Event``
  (``push``, ``ping``); delivery ``X-GitHub-Delivery``.
- Gitea, Forgejo, Gogs: ``X-Gitea-Signature`` (``X-Forgejo-``, ``X-Gogs-``), the bare hex HMAC-SHA256 of
  the JSON payload (also when posted as a form); event ``X-Gitea-Event``; delivery ``X-Gitea-Delivery``.
- GitLab: ``X-Gitlab-Token: <the secret token itself>`` (no signature; compared in constant time); event
  ``X-Gitlab-Event`` (``Push Hook``, ``Tag Push Hook``); delivery ``X-Gitlab-Event-UUID``.
- Bitbucket Cloud and Data Center: ``X-Hub-Signature: sha256=<hex HMAC-SHA256 of the raw body>``; event
  ``X-Event-Key`` (``repo:push`` on Cloud, ``repo:refs_changed`` on Data Center, ``diagnostics:ping``
  for Data Center's "Test connection"); delivery ``X-Request-UUID`` (Cloud) or ``X-Request-Id``.

A push names its refs differently too: GitHub, Gitea and GitLab send ``ref``; Bitbucket Cloud sends
``push.changes[].new|old.{type, name}``; Bitbucket Data Center sends ``changes[].refId``
(:func:`push_refs`). GitHub's legacy SHA-1 ``X-Hub-Signature`` is not accepted.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

__all__ = ["Credential", "Event", "authentic", "credential", "event_of", "push_ref", "push_refs", "sign_body"]

_SHA256: Final = "sha256="
_HEX: Final = frozenset("0123456789abcdef")

# Forges that send GitHub-shaped headers of their own name (Gitea also sends X-GitHub-Event).
_GITHUB_LIKE: Final = ("github", "gitea", "forgejo", "gogs")
_GITLAB_PUSHES: Final = frozenset({"Push Hook", "Tag Push Hook"})
_BITBUCKET_PUSHES: Final = frozenset({"repo:push", "repo:refs_changed"})
_BITBUCKET_PINGS: Final = frozenset({"diagnostics:ping"})


def sign_body(secret: bytes, body: bytes) -> str:
    """``sha256=<hex HMAC-SHA256>`` of ``body``: what GitHub (``X-Hub-Signature-256``) and Bitbucket
    (``X-Hub-Signature``) send; Gitea and Forgejo send the hex alone."""
    return _SHA256 + hmac.new(secret, body, hashlib.sha256).hexdigest()


@dataclass(frozen=True, slots=True)
class Credential:
    """How a delivery proves it knows the secret: an HMAC-SHA256 hex digest of what it signed, or
    (GitLab) the secret token itself."""

    forge: str
    kind: Literal["hmac", "token"]
    value: str
    header: str


@dataclass(frozen=True, slots=True)
class Event:
    """What a delivery is about: ``kind`` is ``push``, ``ping`` or ``other`` (the forge's own name in
    ``name``); ``delivery`` is the forge's id of this delivery, for the logs."""

    forge: str
    kind: Literal["push", "ping", "other"]
    name: str
    delivery: str | None


def _hex(value: str) -> str | None:
    value = value.strip().lower()
    return value if value and set(value) <= _HEX else None


def credential(headers: Mapping[str, str]) -> Credential | None:
    """The delivery's proof, from headers keyed in lower case; None when it carries none we accept."""
    github = headers.get("x-hub-signature-256", "")
    if github.startswith(_SHA256):
        return Credential("github", "hmac", github[len(_SHA256) :], "X-Hub-Signature-256")
    for forge in ("forgejo", "gitea", "gogs"):
        bare = _hex(headers.get(f"x-{forge}-signature", ""))
        if bare is not None:
            return Credential(forge, "hmac", bare, f"X-{forge.capitalize()}-Signature")
    token = headers.get("x-gitlab-token")
    if token:
        return Credential("gitlab", "token", token, "X-Gitlab-Token")
    bitbucket = headers.get("x-hub-signature", "")
    if bitbucket.startswith(_SHA256):
        return Credential("bitbucket", "hmac", bitbucket[len(_SHA256) :], "X-Hub-Signature")
    return None


def authentic(proof: Credential, secret: bytes, signed: list[bytes]) -> bool:
    """True when ``proof`` shows the secret: a token equal to it, or an HMAC of one of ``signed`` (the
    raw body, and a form delivery's ``payload`` field). Every comparison is in constant time."""
    given = proof.value.encode("utf-8", "surrogateescape")
    if proof.kind == "token":
        return hmac.compare_digest(given, secret)
    return any(
        hmac.compare_digest(hmac.new(secret, body, hashlib.sha256).hexdigest().encode(), given)
        for body in signed
    )


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
