"""Where the Palette API key comes from: the environment, never a command-line flag value.

``$PALETTE_API_KEY`` holds the key; ``$PALETTE_API_KEY_FILE`` names a file holding it (a mounted
secret, as containers usually get it). Every key read here is registered with the log redactor.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

API_KEY_ENV = "PALETTE_API_KEY"
API_KEY_FILE_ENV = "PALETTE_API_KEY_FILE"


class MissingAPIKey(LookupError):
    """No key where one was expected; the message says where it looked, never a value."""


def read_key_file(path: str) -> str:
    try:
        key = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise MissingAPIKey(f"API key file {path} cannot be read ({exc.strerror or exc})") from None
    if not key:
        raise MissingAPIKey(f"API key file {path} is empty")
    _register(key)
    return key


def api_key_from_env(environ: Mapping[str, str] | None = None, *, name: str = API_KEY_ENV) -> str:
    """The key from ``$name``, else from the file ``$PALETTE_API_KEY_FILE`` names."""
    env = os.environ if environ is None else environ
    key = env.get(name, "").strip()
    if key:
        _register(key)
        return key
    if env.get(API_KEY_FILE_ENV):
        return read_key_file(env[API_KEY_FILE_ENV])
    raise MissingAPIKey(f"no Palette API key: set {name} (or {API_KEY_FILE_ENV} to a file holding it)")


def _register(key: str) -> None:
    """Hand a key to the log redactor (imported here: offline commands never read a key nor log)."""
    from reconciler.logging import register_secret

    register_secret(key)
