"""The schema layer: pydantic validation of one document, errors turned into readable problems.

The JSON Schemas in ``schemas/`` are generated from the same models, so this layer and
``check-jsonschema`` agree; validating with the models directly is much faster than a JSON Schema
validator and yields typed resources in the same step.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from reconciler.model.duration import DURATION_PATTERN
from reconciler.model.resources import KINDS, Resource

PathElem = str | int

_SECRET_WORDS = ("key", "token", "secret", "password", "credential")
_DNS_HINT = (
    "must be a DNS-1123 label: lowercase letters, digits and '-', starting and ending with a letter or "
    "digit, at most 63 characters"
)


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a document: the field path, what is wrong, and whether to point at the key."""

    path: tuple[PathElem, ...]
    message: str
    at_key: bool = False
    at: tuple[int, int] | None = None  # a position known already (no need to look the path up)
    reason: str | None = None  # what kind of problem, for programs (see Diagnostic.reason)


def did_you_mean(word: str, choices: Sequence[str]) -> str:
    """``"; did you mean X?"``: the closest of ``choices`` to a misspelt ``word`` (case aside), or ``""``."""
    by_lower = {choice.lower(): choice for choice in choices}
    close = difflib.get_close_matches(word.lower(), sorted(by_lower), n=1, cutoff=0.6)
    return f"; did you mean {by_lower[close[0]]}?" if close else ""


def field_path(path: Sequence[PathElem]) -> str:
    """``("spec", "gpus", 0, "count")`` -> ``spec.gpus[0].count``."""
    out = ""
    for elem in path:
        if isinstance(elem, int):
            out += f"[{elem}]"
        else:
            out += f".{elem}" if out else str(elem)
    return out


def validate_document(kind: str, data: Mapping[str, Any]) -> tuple[Resource | None, list[Problem]]:
    """Validate a mapping of a known kind against its model (camelCase field names only)."""
    model = KINDS[kind][1]
    try:
        resource = model.__pydantic_validator__.validate_python(data, by_alias=True, by_name=False)
    except ValidationError as exc:
        secret = kind == "Settings"
        return None, [_problem(kind, model, err, secret) for err in exc.errors(include_url=False)]
    return typing.cast(Resource, resource), []


def _problem(kind: str, model: type[BaseModel], err: ErrorDetails, secret: bool) -> Problem:
    path: tuple[PathElem, ...] = tuple(e for e in err["loc"] if e != "[key]")
    at_key = "[key]" in err["loc"]
    where = field_path(path) or "document"
    typ = err["type"]
    last = path[-1] if path else ""
    if typ == "extra_forbidden":
        return _unknown_field(kind, model, path)
    if path[:1] == ("apiVersion",) and typ == "literal_error":
        return Problem(path, f"apiVersion: must be '{KINDS[kind][0]}' for kind {kind}")
    if last == "nodeCount" and typ in ("literal_error", "int_type"):
        message = "must be 1, 3 or 5 (2 only when spec.edge.isTwoNode is true)"
    elif last in ("name", "namespace") and typ.startswith("string_"):
        message = _DNS_HINT
    elif last == "hostUrl" and typ == "string_pattern_mismatch":
        message = "must be an http(s) URL such as https://api.spectrocloud.com"
    elif last == "env" and typ == "string_pattern_mismatch":
        message = "must be an environment variable name (letters, digits and '_') such as PALETTE_API_KEY"
    elif typ == "missing":
        message = "required field is missing"
    elif typ == "greater_than_equal":
        message = f"must be >= {err.get('ctx', {}).get('ge', 0)}"
    elif typ in ("int_type", "int_parsing", "int_from_float"):
        message = "must be an integer"
    elif typ in ("string_type",) and _is_duration(model, path):
        message = "must be a duration with its unit, such as 30s, 5m or 1h30m (a bare number has no unit)"
    elif typ in ("string_type",):
        message = "must be a string (quote values such as 'true' or '3')"
    elif typ in ("dict_type", "model_type", "model_attributes_type"):
        message = "must be a mapping"
    elif typ in ("list_type",):
        message = "must be a list"
    elif typ in ("bool_type", "bool_parsing"):
        message = "must be true or false"
    elif typ == "literal_error":
        message = f"must be {err.get('ctx', {}).get('expected', 'one of the allowed values')}"
    else:
        message = err["msg"][:1].lower() + err["msg"][1:]
    if at_key:
        message = f"key {message}"
    got = err.get("input")
    if not secret and typ != "missing" and isinstance(got, int | float | str) and len(str(got)) <= 64:
        message += f"; got {got!r}"
    return Problem(path, f"{where}: {message}", at_key=at_key)


def _unknown_field(kind: str, model: type[BaseModel], path: tuple[PathElem, ...]) -> Problem:
    where = field_path(path)
    key = str(path[-1]) if path else ""
    secret_like = any(w in key.lower() for w in _SECRET_WORDS)
    if kind == "Settings" and secret_like:
        return Problem(
            path,
            f"{where}: an inline API key or secret is not allowed in Settings (its value is not shown); "
            "use apiKeySecretRef: {env: NAME} or {file: PATH} to reference it",
            at_key=True,
        )
    owner = _model_at(model, path[:-1])
    fields = _aliases(owner) if owner is not None else []
    hint = f"; allowed fields here: {', '.join(fields)}" if fields else ""
    close = did_you_mean(key, fields) if not secret_like else ""
    return Problem(path, f"{where}: unknown field '{key}'{hint}{close}", at_key=True)


def _aliases(model: type[BaseModel]) -> list[str]:
    return [info.alias or name for name, info in model.model_fields.items()]


def _is_duration(model: type[BaseModel], path: Sequence[PathElem]) -> bool:
    """Whether the field at ``path`` is a Go duration (its schema carries the duration pattern): a bare
    number there lacks a unit, which quoting would not fix."""
    owner = _model_at(model, path[:-1]) if path else None
    if owner is None:
        return False
    by_alias = {info.alias or name: info for name, info in owner.model_fields.items()}
    info = by_alias.get(str(path[-1]))
    extra = info.json_schema_extra if info is not None else None
    return isinstance(extra, dict) and extra.get("pattern") == DURATION_PATTERN


def _model_at(model: type[BaseModel], path: Sequence[PathElem]) -> type[BaseModel] | None:
    """The model class that describes the mapping at ``path`` (to list the fields allowed there)."""
    current: Any = model
    for elem in path:
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            by_alias = {info.alias or name: info for name, info in current.model_fields.items()}
            info = by_alias.get(str(elem))
            if info is None:
                return None
            current = info.annotation
        elif typing.get_origin(current) in (list, dict):
            current = typing.get_args(current)[-1]
        else:
            return None
    current = _unwrap(current)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unwrap(annotation: Any) -> Any:
    """Strip ``Optional``/``Annotated`` to the type that describes the value."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(args) != 1:
                return annotation
            annotation = args[0]
        else:
            return annotation
