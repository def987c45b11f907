"""The emulator's error answers, in Palette's ``V1Error`` shape."""

from __future__ import annotations

import hashlib
from typing import Any


class ApiError(Exception):
    """An error answer: HTTP status plus ``{"code", "message", "details", "ref"}``."""

    def __init__(self, status: int, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details or {}

    def body(self) -> dict[str, Any]:
        ref = hashlib.sha1(f"{self.status}{self.code}{self.message}".encode()).hexdigest()[:12]
        return {"code": self.code, "message": self.message, "details": self.details, "ref": f"ref-{ref}"}
