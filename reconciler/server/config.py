"""What configures the HTTP side from outside: the ``--listen`` address, the webhook secret and whether
GitHub's legacy SHA-1 signature is accepted.

The secret comes from the environment (:func:`webhook_secret_from_env`), never from a command-line value,
and is registered for redaction before it is returned.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Final

from reconciler.logging import register_secret

WEBHOOK_SECRET_ENV: Final = "RECONCILER_WEBHOOK_SECRET"
WEBHOOK_SECRET_FILE_ENV: Final = "RECONCILER_WEBHOOK_SECRET_FILE"
WEBHOOK_ALLOW_SHA1_ENV: Final = "RECONCILER_WEBHOOK_ALLOW_SHA1"
_TRUE: Final = frozenset({"1", "true", "yes", "on"})
_FALSE: Final = frozenset({"", "0", "false", "no", "off"})


class ServerError(RuntimeError):
    """The server could not start or stop."""


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


def webhook_allow_sha1_from_env(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``$RECONCILER_WEBHOOK_ALLOW_SHA1`` (``true``/``false``, default false) lets a delivery
    signed only with GitHub's legacy SHA-1 ``X-Hub-Signature`` in (one with ``X-Hub-Signature-256`` is
    always judged by that). Any other value is an error naming the variable."""
    env = os.environ if environ is None else environ
    value = env.get(WEBHOOK_ALLOW_SHA1_ENV, "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ServerError(f"{WEBHOOK_ALLOW_SHA1_ENV} must be true or false, not {value!r}")


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
