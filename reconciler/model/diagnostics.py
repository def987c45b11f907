"""Diagnostics: one problem found in the desired state, with where it is."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from reconciler.model.pickling import by_fields

# Diagnostic reasons that are not condition reasons (those are in reconciler.model.conditions.Reason).
UNKNOWN_GPU_FAMILY = "UnknownGPUFamily"
REFERENCE_INVALID = "ReferenceInvalid"
"""The reason of an error that only follows from another document's: it references one that is invalid.
Such cascade errors sort after every root cause, so the first error a reader sees is one to fix."""


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"


@by_fields
@dataclass(frozen=True, slots=True)
class Diagnostic:
    """A problem in one file. ``line`` and ``column`` are 1-based; 0 when unknown.

    ``field`` is the path of the offending field (``spec.gpus[0].count``) when there is one; it is
    part of the text output and of ``message`` where it helps, not of the JSON contract.
    ``reason`` says what kind of problem it is for programs (a condition reason such as
    ``ReferenceNotFound``, or :data:`UNKNOWN_GPU_FAMILY`), so nothing ever matches on the wording.
    """

    file: str
    line: int
    column: int
    message: str
    severity: Severity = Severity.ERROR
    kind: str | None = None
    namespace: str | None = None
    name: str | None = None
    field: str | None = None
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The shape of ``validate --format json`` (docs/planning.md)."""
        return {
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "severity": str(self.severity),
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "message": self.message,
        }

    def sort_key(self) -> tuple[bool, str, int, int, str]:
        """Root causes first, then cascades (:data:`REFERENCE_INVALID`); each by file and position."""
        return (self.reason == REFERENCE_INVALID, self.file, self.line, self.column, self.message)
