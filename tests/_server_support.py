"""Shared pieces of the HTTP server tests (webhooks of every forge)."""

from __future__ import annotations

import threading
from typing import Any


class Recorder:
    """Collects the payloads the server hands to the controller (its ``on_webhook``)."""

    def __init__(self) -> None:
        self.payloads: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def __call__(self, payload: dict[str, Any]) -> None:
        with self.lock:
            self.payloads.append(payload)
