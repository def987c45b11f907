"""GPU family names in one canonical form.

docs/allocation.md: family names compare case-insensitively, with spaces, ``-`` and ``_`` equivalent.
The canonical form is upper case with runs of separators collapsed into one ``-``
(``nvidia h100`` -> ``NVIDIA-H100``), which is also the spelling shown in plans and status files.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import NewType

GpuFamily = NewType("GpuFamily", str)

_SEPARATORS = re.compile(r"[\s_\-]+")
_VALID = re.compile(r"^[A-Z0-9][A-Z0-9.+]*(-[A-Z0-9.+]+)*$")


@lru_cache(maxsize=4096)
def canonical_family(name: str) -> GpuFamily:
    """Return the canonical form of a GPU family name (raises ValueError when it is empty or odd).

    Cached: a large tree names the same few families thousands of times.
    """
    folded = _SEPARATORS.sub("-", name.strip()).strip("-").upper()
    if not folded or not _VALID.match(folded):
        raise ValueError(f"not a GPU family name: {name!r}")
    return GpuFamily(folded)


def is_valid_family(name: str) -> bool:
    try:
        canonical_family(name)
    except ValueError:
        return False
    return True


# Model tokens as agents and nvidia-smi/rocm-smi spell them ("GH100 [H100 PCIe]", "NVIDIA A100-SXM4-80GB",
# "TU104GL [Tesla T4]", "Aqua Vanjaram [Instinct MI300X]") -> canonical family. A model string is split
# into upper-case alphanumeric tokens; the bracketed marketing name is tried first, then the whole string,
# and the first token found here wins. Tokens match whole, so L40S never reads as L40 nor GB200 as B200.
GPU_MODEL_FAMILIES: Mapping[str, GpuFamily] = {
    token: canonical_family(family)
    for token, family in {
        # NVIDIA data-centre
        "B100": "NVIDIA-B100",
        "B200": "NVIDIA-B200",
        "B300": "NVIDIA-B300",
        "GB200": "NVIDIA-GB200",
        "GB300": "NVIDIA-GB300",
        "H100": "NVIDIA-H100",
        "H200": "NVIDIA-H200",
        "H800": "NVIDIA-H800",
        "GH200": "NVIDIA-GH200",
        "A100": "NVIDIA-A100",
        "A800": "NVIDIA-A800",
        "A40": "NVIDIA-A40",
        "A30": "NVIDIA-A30",
        "A16": "NVIDIA-A16",
        "A10": "NVIDIA-A10",
        "A10G": "NVIDIA-A10G",
        "A2": "NVIDIA-A2",
        "L40S": "NVIDIA-L40S",
        "L40": "NVIDIA-L40",
        "L20": "NVIDIA-L20",
        "L4": "NVIDIA-L4",
        "T4": "NVIDIA-T4",
        "V100": "NVIDIA-V100",
        "V100S": "NVIDIA-V100S",
        "P100": "NVIDIA-P100",
        "P40": "NVIDIA-P40",
        # AMD Instinct
        "MI325X": "AMD-MI325X",
        "MI300X": "AMD-MI300X",
        "MI300A": "AMD-MI300A",
        "MI250X": "AMD-MI250X",
        "MI250": "AMD-MI250",
        "MI210": "AMD-MI210",
        "MI100": "AMD-MI100",
    }.items()
}
# Every family a known GPU model belongs to: a requested family outside it that no host has either is
# most likely a typo (``NVIDIA-H1OO``), which validation and plan warn about.
KNOWN_FAMILIES: frozenset[GpuFamily] = frozenset(GPU_MODEL_FAMILIES.values())
