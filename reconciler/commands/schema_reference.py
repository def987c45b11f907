"""The field reference of each kind, rendered from its JSON Schema (``reconciler schemas --reference
DIR``): one Markdown page per kind with every field's path, type, whether it is required, its default
and its constraints, and an index. Generated, never edited: ``tests/test_schemas_sync.py`` fails when
``docs/reference/`` drifts from the models (pure: schema in, text out).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

_CONSTRAINTS = (
    ("minimum", ">= {}"),
    ("exclusiveMinimum", "> {}"),
    ("maximum", "<= {}"),
    ("exclusiveMaximum", "< {}"),
    ("minLength", "at least {} characters"),
    ("maxLength", "at most {} characters"),
    ("minItems", "at least {} items"),
    ("maxItems", "at most {} items"),
    ("pattern", "matches `{}`"),
)


@dataclass(frozen=True, slots=True)
class Field:
    path: str
    type: str
    required: bool
    default: str
    notes: str


def _resolve(node: Mapping[str, Any], defs: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return _resolve(defs[ref.removeprefix("#/$defs/")], defs)
    return node


def _variants(node: Mapping[str, Any], defs: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The non-null alternatives of a node (``Optional[X]`` is ``anyOf: [X, null]``)."""
    node = _resolve(node, defs)
    options = node.get("anyOf") or node.get("oneOf")
    if isinstance(options, list):
        found = [_resolve(o, defs) for o in options if o.get("type") != "null"]
        return [v for o in found for v in _variants(o, defs)]
    return [node]


def _type(node: Mapping[str, Any], defs: Mapping[str, Any]) -> str:
    names = []
    for v in _variants(node, defs):
        if "const" in v:
            names.append(json.dumps(v["const"]))
        elif v.get("type") == "array":
            names.append(f"list of {_type(v.get('items') or {}, defs)}")
        elif v.get("type") == "object" and "properties" in v:
            names.append("mapping")
        elif v.get("type") == "object":
            extra = v.get("additionalProperties")
            names.append(f"map of {_type(extra, defs)}" if isinstance(extra, Mapping) else "mapping")
        elif isinstance(v.get("type"), str):
            names.append(str(v["type"]))
        elif isinstance(v.get("type"), list):
            names.append(" or ".join(str(t) for t in v["type"] if t != "null"))
        else:
            names.append("any")
    return " or ".join(dict.fromkeys(names)) or "any"


def _notes(node: Mapping[str, Any], defs: Mapping[str, Any]) -> str:
    parts = []
    description = _resolve(node, defs).get("description") or node.get("description")
    if description:
        parts.append(" ".join(str(description).split()).rstrip("."))
    for v in _variants(node, defs):
        if isinstance(v.get("enum"), list):
            parts.append("one of " + ", ".join(f"`{e}`" for e in v["enum"]))
        for key, text in _CONSTRAINTS:
            if key == "minLength" and v.get(key) == 1:
                parts.append("not empty")
            elif key in v:
                parts.append(text.format(v[key]))
    return "; ".join(dict.fromkeys(parts)).replace("|", "\\|")


def _default(node: Mapping[str, Any]) -> str:
    if "default" not in node or node["default"] is None:
        return ""
    return f"`{json.dumps(node['default'])}`"


def fields(schema: Mapping[str, Any]) -> Iterator[Field]:
    """Every field of ``schema``, depth first in the schema's order (``spec.gpus[].family``)."""
    defs = schema.get("$defs") or {}

    def walk(node: Mapping[str, Any], prefix: str, seen: frozenset[str]) -> Iterator[Field]:
        for v in _variants(node, defs):
            target = v.get("items") if v.get("type") == "array" else v
            if not isinstance(target, Mapping):
                continue
            suffix = "[]" if v.get("type") == "array" else ""
            for inner in _variants(target, defs):
                title = str(inner.get("title") or "")
                if title in seen:
                    continue
                required = set(inner.get("required") or ())
                props = inner.get("properties") or {}
                for name, child in props.items():
                    path = f"{prefix}{suffix}.{name}" if prefix else name
                    yield Field(
                        path, _type(child, defs), name in required, _default(child), _notes(child, defs)
                    )
                    yield from walk(child, path, seen | {title})

    yield from walk(schema, "", frozenset())


def page(kind: str, schema: Mapping[str, Any]) -> str:
    """The Markdown reference of one kind."""
    lines = [
        f"# {kind}",
        "",
        f"{schema.get('description', '')}",
        "",
        "Generated from the models by `reconciler schemas --reference docs/reference`; do not edit.",
        "",
        "| field | type | required | default | notes |",
        "|---|---|---|---|---|",
    ]
    for f in fields(schema):
        lines.append(f"| `{f.path}` | {f.type} | {'yes' if f.required else ''} | {f.default} | {f.notes} |")
    return "\n".join(lines) + "\n"


def index(kinds: list[str]) -> str:
    lines = [
        "# Field reference",
        "",
        "One page per kind, generated from the models by `reconciler schemas --reference docs/reference`",
        "(the JSON Schemas in `schemas/` come from the same models). Do not edit: a test fails when these",
        "pages drift from the models.",
        "",
    ]
    lines += [f"- [{kind}]({kind.lower()}.md)" for kind in kinds]
    return "\n".join(lines) + "\n"
