"""GPU family names in one canonical form.

DESIGN.md section 4: family names compare case-insensitively, with spaces, ``-`` and ``_`` equivalent.
The canonical form is upper case with runs of separators collapsed into one ``-``
(``nvidia h100`` -> ``NVIDIA-H100``), which is also the spelling shown in plans and status files.
"""

from __future__ import annotations

import re
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
