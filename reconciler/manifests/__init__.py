"""Manifest loading and validation (pure): YAML syntax, schema, rules -> DesiredState."""

from reconciler.manifests.loader import CheckedFile, build_desired, check_bytes, load_files
from reconciler.manifests.parse import MAX_FILE_BYTES, Document, ParsedFile, parse_file

__all__ = [
    "MAX_FILE_BYTES",
    "CheckedFile",
    "Document",
    "ParsedFile",
    "build_desired",
    "check_bytes",
    "load_files",
    "parse_file",
]
