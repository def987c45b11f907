"""``reconciler schemas --out DIR``: one JSON Schema (draft 2020-12) per kind, from the models.

The files are committed under ``schemas/`` for editors (``yaml-language-server``) and other tools
(``check-jsonschema``); a test fails when they drift from the models.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from reconciler.commands import schema_reference
from reconciler.model.resources import KINDS

DIALECT = "https://json-schema.org/draft/2020-12/schema"


def schema_for(kind: str) -> dict[str, Any]:
    """The JSON Schema of one kind, as validated by the loader (camelCase field names)."""
    api_version, model = KINDS[kind]
    generated = model.model_json_schema(by_alias=True, mode="validation")
    return {
        "$schema": DIALECT,
        "title": kind,
        "description": f"{kind} ({api_version}); generated from the models by `reconciler schemas`.",
        **{k: v for k, v in generated.items() if k not in ("title", "description")},
    }


def render(kind: str) -> str:
    return json.dumps(schema_for(kind), indent=2, sort_keys=False) + "\n"


def run(out: Path, reference: Path | None = None) -> int:
    """Write every kind's schema to ``out`` and, with ``reference``, its field reference page there
    (:mod:`reconciler.commands.schema_reference`). Exit 0 done, 2 when a directory cannot be written."""
    target = out
    try:
        out.mkdir(parents=True, exist_ok=True)
        for kind in sorted(KINDS):
            (out / f"{kind.lower()}.json").write_text(render(kind), encoding="utf-8")
        if reference is not None:
            target = reference
            reference.mkdir(parents=True, exist_ok=True)
            for kind in sorted(KINDS):
                text = schema_reference.page(kind, schema_for(kind))
                (reference / f"{kind.lower()}.md").write_text(text, encoding="utf-8")
            (reference / "README.md").write_text(schema_reference.index(sorted(KINDS)), encoding="utf-8")
    except OSError as exc:
        print(f"error: cannot write {target}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    return 0
