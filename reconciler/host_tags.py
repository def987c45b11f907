"""PaletteAI's host tags and GPU family names, parsed (pure).

The tag names of docs/allocation.md's device-tag table, what each tag value must look like, and the
canonical GPU family of an agent-reported model or a ``gpu-family`` tag. :mod:`reconciler.inventory`
applies discovery's rules to what this module parses.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache

from reconciler.model.gpu import GPU_MODEL_FAMILIES, KNOWN_FAMILIES, GpuFamily, canonical_family
from reconciler.model.quantity import parse_memory_bytes

PALETTE_AI_TAG = "palette.ai"
WORKER_TAG = "palette.ai/worker"
CONTROL_PLANE_TAG = "palette.ai/control-plane"
RESOURCE_GROUP_PREFIX = "palette.ai.rg/"
CPUS_TAG = "cpus"
GPUS_TAG = "gpus"
GPU_MEMORY_TAG = "gpu-memory"
GPU_FAMILY_TAG = "gpu-family"
BARE_TAG_VALUE = "spectro__tag"  # Palette's label value for a tag without a value


# --- GPU family names -------------------------------------------------------------------------------


# Vendor strings as agents report them (names or PCI vendor ids) -> the prefix used in fallback names.
_VENDOR_PREFIXES = (
    ("NVIDIA", "NVIDIA"),
    ("10DE", "NVIDIA"),
    ("ADVANCED MICRO", "AMD"),
    ("AMD", "AMD"),
    ("1002", "AMD"),
    ("INTEL", "INTEL"),
    ("8086", "INTEL"),
)
_TOKEN_SPLIT = re.compile(r"[^A-Z0-9]+")
_BRACKETED = re.compile(r"\[([^\]]*)\]")
_NOT_NAME = re.compile(r"[^A-Za-z0-9.+]+")


def _vendor_prefix(vendor: str) -> str:
    upper = vendor.upper()
    for needle, prefix in _VENDOR_PREFIXES:
        if needle in upper:
            return prefix
    return _NOT_NAME.sub(" ", vendor).strip()


def _lookup_tokens(text: str) -> GpuFamily | None:
    for token in _TOKEN_SPLIT.split(text.upper()):
        family = GPU_MODEL_FAMILIES.get(token)
        if family is not None:
            return family
    return None


@lru_cache(maxsize=4096)
def family_from_model(vendor: str, model: str) -> GpuFamily | None:
    """Canonical family of an agent-reported GPU; None when the agent names no model at all."""
    bracketed = _BRACKETED.findall(model)
    for text in (*bracketed, model):
        family = _lookup_tokens(text)
        if family is not None:
            return family
    # Fallback: "<vendor> <model>", preferring the marketing name in brackets over the chip name.
    name = (bracketed[-1] if bracketed and bracketed[-1].strip() else model).strip()
    if not name:
        return None
    prefix = _vendor_prefix(vendor)
    cleaned = _NOT_NAME.sub(" ", name).strip().lstrip(".+")
    if prefix and not cleaned.upper().startswith(prefix.upper()):
        cleaned = f"{prefix} {cleaned}"
    try:
        return canonical_family(cleaned)
    except ValueError:
        return None


@lru_cache(maxsize=1024)
def family_from_tag(value: str) -> GpuFamily:
    """Canonical family of a ``gpu-family`` tag; a bare model ("h100") gets its vendor from the table.

    Raises ValueError when the value is not a family name (the caller turns that into an exclusion).
    """
    family = canonical_family(value)
    if family in KNOWN_FAMILIES:
        return family
    return GPU_MODEL_FAMILIES.get(family, family)


def display_family(family: str) -> str:
    """The spelling of the seed's Compute status ("NVIDIA H100") for a canonical family."""
    return family.replace("-", " ")


# --- tag parsing ------------------------------------------------------------------------------------


class _TagError(ValueError):
    """A tag value that does not parse; the message names the tag and its value."""


def shown(value: str) -> str:
    return repr(value if len(value) <= 64 else value[:61] + "...")


def _parse_bool_tag(tag: str, value: str) -> bool:
    folded = value.strip().lower()
    if folded == "true":
        return True
    if folded == "false":
        return False
    raise _TagError(f"tag {tag}: {shown(value)} is not a boolean (expected true or false)")


def _parse_count_tag(tag: str, value: str, minimum: int) -> int:
    text = value.strip()
    if not (text.isascii() and text.isdigit()) or len(text) > 9 or int(text) < minimum:
        raise _TagError(f"tag {tag}: {shown(value)} is not a whole number of at least {minimum}")
    return int(text)


@lru_cache(maxsize=1024)
def _parse_memory_tag(value: str) -> int:
    try:
        size = parse_memory_bytes(value)
    except (ValueError, OverflowError) as exc:
        raise _TagError(
            f"tag {GPU_MEMORY_TAG}: {shown(value)} does not parse (units M, MB, MiB, G, GB, GiB)"
        ) from exc
    if size <= 0:
        raise _TagError(f"tag {GPU_MEMORY_TAG}: {shown(value)} is not a positive memory size")
    return size


def _parse_family_tag(value: str) -> GpuFamily:
    try:
        return family_from_tag(value)
    except ValueError as exc:
        raise _TagError(f"tag {GPU_FAMILY_TAG}: {shown(value)} is not a GPU family name") from exc


# The resource groups of every host that has none: one shared empty value (read-only, as every
# Machine's are: ``Mapping``), not a dict per host.
_NO_GROUPS: Mapping[str, str] = {}


class Tags:
    """The PaletteAI tags of one host, parsed; ``problems`` lists the ones that did not parse.
    (A plain slots class: made for every host, where a dataclass's default factories cost.)"""

    __slots__ = (
        "control_plane",
        "cpus",
        "gpu_family",
        "gpu_memory",
        "gpus",
        "problems",
        "resource_groups",
        "worker",
    )

    def __init__(self) -> None:
        self.worker = False
        self.control_plane = False
        self.cpus: int | None = None
        self.gpus: int | None = None
        self.gpu_memory: int | None = None
        self.gpu_family: GpuFamily | None = None
        self.resource_groups: Mapping[str, str] = _NO_GROUPS  # a dict once a group is read
        self.problems: list[str] = []


_HARDWARE_AND_ROLE_TAGS = frozenset(
    {WORKER_TAG, CONTROL_PLANE_TAG, CPUS_TAG, GPUS_TAG, GPU_MEMORY_TAG, GPU_FAMILY_TAG}
)


_UNTAGGED = Tags()  # most hosts carry no tag but palette.ai: no object made for them


def _add_resource_group(tags: Tags, key: str, value: str) -> None:
    group = key[len(RESOURCE_GROUP_PREFIX) :]
    if not group:
        tags.problems.append(f"tag {key}: resource group tag without a group name")
    elif not value or value == BARE_TAG_VALUE:
        tags.problems.append(f"tag {key}: resource group tag without a value")
    else:
        if tags.resource_groups is _NO_GROUPS:
            tags.resource_groups = {group: value}
        else:
            tags.resource_groups = {**tags.resource_groups, group: value}


def parse_tags(labels: Mapping[str, str]) -> Tags:
    """The host's PaletteAI tags; :data:`_UNTAGGED` (shared, never changed) when it carries none.

    A fleet's hosts carry few distinct sets of labels: each set is parsed once and its :class:`Tags`
    shared (never changed, as :data:`_UNTAGGED`), its resource groups one dict for all those hosts."""
    key = tuple(labels.items())
    tags = _PARSED.get(key)
    if tags is None:
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()
        tags = _PARSED[key] = _parse_tags(labels)
    return tags


_PARSED: dict[tuple[tuple[str, str], ...], Tags] = {}
_PARSED_MAX = 4096


def _parse_tags(labels: Mapping[str, str]) -> Tags:
    tags = _UNTAGGED
    for key, value in labels.items():
        if key not in _HARDWARE_AND_ROLE_TAGS and not key.startswith(RESOURCE_GROUP_PREFIX):
            continue
        if tags is _UNTAGGED:
            tags = Tags()
        if key not in _HARDWARE_AND_ROLE_TAGS:
            _add_resource_group(tags, key, value)
            continue
        try:
            if key == WORKER_TAG:
                tags.worker = _parse_bool_tag(key, value)
            elif key == CONTROL_PLANE_TAG:
                tags.control_plane = _parse_bool_tag(key, value)
            elif key == CPUS_TAG:
                tags.cpus = _parse_count_tag(key, value, 1)
            elif key == GPUS_TAG:
                tags.gpus = _parse_count_tag(key, value, 0)
            elif key == GPU_MEMORY_TAG:
                tags.gpu_memory = _parse_memory_tag(value)
            else:
                tags.gpu_family = _parse_family_tag(value)
        except _TagError as exc:
            tags.problems.append(str(exc))
    return tags
