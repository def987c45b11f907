"""The committed JSON Schemas: in sync with the models, and usable by other tools."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from reconciler.commands import schemas
from reconciler.model.resources import KINDS
from tests._manifests_support import SAMPLE_REPO, SCHEMAS

CORPUS = Path(__file__).parent / "data" / "manifests"
MODELINE = re.compile(r"^# yaml-language-server: \$schema=(\S+)$", re.MULTILINE)


def test_committed_schemas_are_up_to_date(tmp_path: Path) -> None:
    assert schemas.run(tmp_path) == 0
    generated = {p.name: p.read_text() for p in tmp_path.iterdir()}
    committed = {p.name: p.read_text() for p in SCHEMAS.glob("*.json")}
    assert generated == committed, "schemas/ is out of date: run `reconciler schemas --out schemas`"
    assert sorted(generated) == sorted(f"{kind.lower()}.json" for kind in KINDS)


def test_the_field_reference_is_generated_from_the_models(tmp_path: Path) -> None:
    """docs/reference/ is what `reconciler schemas --reference` writes: it cannot drift from the models."""
    reference = Path(__file__).resolve().parent.parent / "docs" / "reference"
    assert schemas.run(tmp_path / "schemas", tmp_path / "reference") == 0
    generated = {p.name: p.read_text() for p in (tmp_path / "reference").iterdir()}
    committed = {p.name: p.read_text() for p in reference.glob("*.md")}
    assert generated == committed, (
        "docs/reference/ is out of date: run `reconciler schemas --reference docs/reference`"
    )
    assert sorted(generated) == sorted([*(f"{kind.lower()}.md" for kind in KINDS), "README.md"])
    pool = generated["computepool.md"]
    for row in ("| `spec.gpus[].family` | string | yes |", '| `spec.mode` | string |  | `"shared"` |'):
        assert row in pool, row
    for kind in KINDS:  # every field of every kind, nested ones included, has a row
        page = generated[f"{kind.lower()}.md"]
        assert "| `metadata.name` | string | yes |" in page and "| `apiVersion` |" in page


def test_schemas_are_draft_2020_12_and_strict() -> None:
    for path in SCHEMAS.glob("*.json"):
        schema = json.loads(path.read_text())
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["additionalProperties"] is False


def _sample_files_by_schema() -> dict[Path, list[Path]]:
    """Every sample manifest, grouped by the schema its modeline names (which must match its kind)."""
    groups: dict[Path, list[Path]] = {}
    for path in sorted(SAMPLE_REPO.rglob("*.yaml")):
        text = path.read_text()
        match = MODELINE.search(text)
        assert match, f"{path} has no yaml-language-server modeline"
        schema = (path.parent / match.group(1)).resolve()
        assert schema.name == f"{yaml.safe_load(text)['kind'].lower()}.json"
        groups.setdefault(schema, []).append(path)
    return groups


def _check_jsonschema(schema: Path, files: list[Path]) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("check-jsonschema")
    cmd = [exe] if exe else [sys.executable, "-m", "check_jsonschema"]
    return subprocess.run(
        [*cmd, "--schemafile", str(schema), *map(str, files)], capture_output=True, text=True, timeout=120
    )


def test_check_jsonschema_accepts_the_sample_repository() -> None:
    groups = _sample_files_by_schema()
    assert len(groups) == len(KINDS)
    for schema, files in groups.items():
        result = _check_jsonschema(schema, files)
        assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("name", "kind", "needle"),
    [
        ("typo-minworkernode.yaml", "ComputeProfile", "minWorkerNode"),
        ("nodecount-4.yaml", "ComputeProfile", "nodeCount"),
        ("settings-secret-ref-both.yaml", "Settings", "apiKeySecretRef"),
        ("name-uppercase.yaml", "Compute", "name"),
    ],
)
def test_check_jsonschema_rejects_a_bad_document(name: str, kind: str, needle: str) -> None:
    result = _check_jsonschema(SCHEMAS / f"{kind.lower()}.json", [CORPUS / name])
    assert result.returncode == 1
    assert needle in result.stdout + result.stderr


@pytest.mark.parametrize("path", sorted(CORPUS.glob("*.yaml")), ids=lambda p: p.name)
def test_json_schema_agrees_with_the_schema_layer_on_single_documents(path: Path) -> None:
    """Where a corpus file is one document of a known kind, the JSON Schema and the models agree
    on everything the schema layer checks (cross-resource and rule-layer errors aside)."""
    from reconciler.manifests.schema import validate_document

    try:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    except yaml.YAMLError:
        return
    if len(docs) != 1 or not isinstance(docs[0], dict) or docs[0].get("kind") not in KINDS:
        return
    kind = docs[0]["kind"]
    schema = json.loads((SCHEMAS / f"{kind.lower()}.json").read_text())
    schema_ok = jsonschema.Draft202012Validator(schema).is_valid(docs[0])
    _resource, problems = validate_document(kind, docs[0])
    model_ok = not problems
    if kind == "Settings" and "secret-ref" in path.name:
        assert not schema_ok  # oneOf env/file: stated in the schema, checked as a rule by the loader
        return
    assert schema_ok == model_ok
