"""Quantities: GPU memory with the units of the PaletteAI device tags."""

from __future__ import annotations

import re

# M, MB, G, GB are decimal; MiB, GiB binary (docs/allocation.md). Case-insensitive. Mi and Gi are the
# Kubernetes spellings of MiB and GiB (section 10: agents report GPU memory as "80Gi" too).
_UNITS = {
    "m": 10**6,
    "mb": 10**6,
    "mi": 2**20,
    "mib": 2**20,
    "g": 10**9,
    "gb": 10**9,
    "gi": 2**30,
    "gib": 2**30,
}
_QUANTITY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]+)\s*$")


def parse_memory_bytes(text: str) -> int:
    """Parse ``80G``, ``81920 MiB``, ``80gb`` ... into bytes. Raises ValueError on anything else."""
    match = _QUANTITY.match(text)
    if not match:
        raise ValueError(
            f"not a memory quantity: {text!r} (expected a number and one of M, MB, Mi, MiB, G, GB, Gi, GiB)"
        )
    number, unit = match.groups()
    factor = _UNITS.get(unit.lower())
    if factor is None:
        raise ValueError(
            f"unknown memory unit {unit!r} in {text!r} (allowed: M, MB, Mi, MiB, G, GB, Gi, GiB)"
        )
    return int(float(number) * factor)
