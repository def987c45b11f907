"""The MIG catalogue: which GPU instance profiles a MIG-capable GPU offers, and where each may start.

docs/mig.md and ``shared/mig/NOTES.md`` section 2. Profile names and sizes depend on the GPU
model *and* its memory (``1g.10gb`` is a doubled-memory 1g on an A100 40GB but the smallest profile on
an A100 80GB), so the catalogue is keyed by (family, memory), never by profile name alone.

Geometry, from ``nvidia-smi mig -lgipp`` (MIG User Guide): a 7-slice GPU has 7 compute and 8 memory
slices; a placement is ``(start, size)`` on the memory-slice axis and instances may not overlap there.
The A30 has 4 compute and 4 memory slices. At most one media-extension (``+me``) instance per GPU.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from reconciler.model.gpu import GpuFamily, canonical_family
from reconciler.model.quantity import parse_memory_bytes

MEDIA_SUFFIX = "+me"
SEVEN_SLICES = 7  # compute slices of every MIG-capable GPU but the A30
_PROFILE_NAME = re.compile(r"^([1-9][0-9]*)g\.[0-9]+gb")


@dataclass(frozen=True, slots=True)
class MigProfile:
    """One GPU instance profile of one GPU type, e.g. ``3g.40gb`` on an A100 80GB."""

    name: str
    compute: int  # compute slices (the ``g`` of the name)
    size: int  # memory slices it occupies
    starts: tuple[int, ...]  # allowed first memory slices

    @property
    def media(self) -> bool:
        """A media-extension profile (``+me``): at most one per GPU."""
        return self.name.endswith(MEDIA_SUFFIX)


@dataclass(frozen=True, slots=True)
class MigGpuType:
    """One catalogue entry: a MIG-capable GPU model with one memory size."""

    key: str  # e.g. "NVIDIA-A100-80GB": stable, used in messages
    family: GpuFamily
    memory_gb: tuple[int, ...]  # nominal memory sizes that select this entry (first is the one NVIDIA names)
    compute_slices: int  # 7, or 4 on A30
    memory_slices: int  # 8, or 4 on A30
    profiles: Mapping[str, MigProfile] = field(hash=False)
    max_media: int = 1  # media-extension instances per GPU

    def profile(self, name: str) -> MigProfile | None:
        return self.profiles.get(name)


def _seven_slice(
    key: str,
    family: str,
    memory_gb: tuple[int, ...],
    small: int,
    double: int,
    quad: int,
    *,
    media: bool = True,
    double_1g: bool = True,
) -> MigGpuType:
    """A 7-compute/8-memory-slice GPU: 1g has ``small`` GB, 1g-doubled and 2g ``double``, 3g and 4g ``quad``.

    NVIDIA rounds each name separately, so the sizes come from NOTES.md section 2.2, not from arithmetic.
    ``media``: NVIDIA lists a ``1g+me`` profile for it; ``double_1g``: it lists a 1g with doubled memory
    (mig-parted's tables for GB200, B300 and GB300 name no ``+me``, GB300 no doubled 1g).
    """
    whole = memory_gb[0]
    table = (
        (f"1g.{small}gb", 1, 1, (0, 1, 2, 3, 4, 5, 6)),
        *([(f"1g.{small}gb{MEDIA_SUFFIX}", 1, 1, (0, 1, 2, 3, 4, 5, 6))] if media else []),
        *([(f"1g.{double}gb", 1, 2, (0, 2, 4, 6))] if double_1g else []),
        (f"2g.{double}gb", 2, 2, (0, 2, 4)),
        (f"3g.{quad}gb", 3, 4, (0, 4)),
        (f"4g.{quad}gb", 4, 4, (0,)),
        (f"7g.{whole}gb", 7, 8, (0,)),
    )
    return _entry(key, family, memory_gb, 7, 8, table)


def _entry(
    key: str,
    family: str,
    memory_gb: tuple[int, ...],
    compute_slices: int,
    memory_slices: int,
    table: tuple[tuple[str, int, int, tuple[int, ...]], ...],
) -> MigGpuType:
    profiles = {name: MigProfile(name, compute, size, starts) for name, compute, size, starts in table}
    return MigGpuType(
        key=key,
        family=canonical_family(family),
        memory_gb=memory_gb,
        compute_slices=compute_slices,
        memory_slices=memory_slices,
        profiles=MappingProxyType(profiles),
    )


CATALOGUE: tuple[MigGpuType, ...] = (
    _seven_slice("NVIDIA-A100-40GB", "NVIDIA-A100", (40,), small=5, double=10, quad=20),
    _seven_slice("NVIDIA-A100-80GB", "NVIDIA-A100", (80,), small=10, double=20, quad=40),
    # A800/H800 80GB share the A100/H100 80GB table (one mig-parted device-filter group).
    _seven_slice("NVIDIA-A800-80GB", "NVIDIA-A800", (80,), small=10, double=20, quad=40),
    _seven_slice("NVIDIA-H100-80GB", "NVIDIA-H100", (80,), small=10, double=20, quad=40),
    _seven_slice("NVIDIA-H800-80GB", "NVIDIA-H800", (80,), small=10, double=20, quad=40),
    # H100 NVL / H800 NVL (94 GB) and the 96 GB parts (H100-96GB, GH200, H20) differ only in the names
    # of 3g, 4g and 7g (mig-parted: all-3g.47gb vs all-3g.48gb); the nearest nominal size decides.
    _seven_slice("NVIDIA-H100-94GB", "NVIDIA-H100", (94,), small=12, double=24, quad=47),
    _seven_slice("NVIDIA-H800-94GB", "NVIDIA-H800", (94,), small=12, double=24, quad=47),
    _seven_slice("NVIDIA-H100-96GB", "NVIDIA-H100", (96,), small=12, double=24, quad=48),
    _seven_slice("NVIDIA-GH200-96GB", "NVIDIA-GH200", (96,), small=12, double=24, quad=48),
    _seven_slice("NVIDIA-H20-96GB", "NVIDIA-H20", (96,), small=12, double=24, quad=48),
    _seven_slice("NVIDIA-GH200-144GB", "NVIDIA-GH200", (144,), small=18, double=36, quad=72),
    # H200 141GB and H200 NVL share one mig-parted device-filter group.
    _seven_slice("NVIDIA-H200-141GB", "NVIDIA-H200", (141,), small=18, double=35, quad=71),
    # B200: 180 GB usable of 192 GB; agents may report either.
    _seven_slice("NVIDIA-B200-180GB", "NVIDIA-B200", (180, 192), small=23, double=45, quad=90),
    # GB200 (HGX, 0x2941): 186 GB usable of 192; B300 (0x3182): 269 of 288; GB300 (0x31C2): 278 of 288.
    _seven_slice("NVIDIA-GB200-186GB", "NVIDIA-GB200", (186, 192), 23, 47, 93, media=False),
    _seven_slice("NVIDIA-B300-269GB", "NVIDIA-B300", (269, 288), 34, 67, 135, media=False),
    _seven_slice("NVIDIA-GB300-278GB", "NVIDIA-GB300", (278, 288), 35, 70, 139, media=False, double_1g=False),
    _entry(
        "NVIDIA-A30-24GB",
        "NVIDIA-A30",
        (24,),
        4,
        4,
        (
            ("1g.6gb", 1, 1, (0, 1, 2, 3)),
            (f"1g.6gb{MEDIA_SUFFIX}", 1, 1, (0, 1, 2, 3)),
            ("2g.12gb", 2, 2, (0, 2)),
            (f"2g.12gb{MEDIA_SUFFIX}", 2, 2, (0, 2)),
            ("4g.24gb", 4, 4, (0,)),
        ),
    ),
    # RTX PRO 6000 Blackwell Server Edition 96GB (0x2BB5): 4 slices, at most 4 instances. Its `+gfx`,
    # `-me` and `+me.all` variants of 1g are not in the catalogue (a request for one is MIGUnsupported).
    # The family is what discovery reads from the model "RTX PRO 6000 Blackwell Server Edition".
    _entry(
        "NVIDIA-RTX-PRO-6000-BLACKWELL-96GB",
        "NVIDIA-RTX-PRO-6000-BLACKWELL-SERVER-EDITION",
        (96,),
        4,
        4,
        (
            ("1g.24gb", 1, 1, (0, 1, 2, 3)),
            ("2g.48gb", 2, 2, (0, 2)),
            ("4g.96gb", 4, 4, (0,)),
        ),
    ),
)

# A reported size matches a nominal one when, read as GB or as GiB, it is within this fraction of it:
# nvidia-smi reports an "80GB" H100 as 81559 MiB (79.6 GiB), an H100 NVL "94GB" as 95830 MiB (93.6 GiB),
# a 96GB H100/GH200 as 97871 MiB (95.6 GiB), an H200 "141GB" as 143771 MiB (140.4 GiB); people write
# "80 GB" or "80Gi". The nearest nominal size of the family wins (94 and 96 are told apart); a size near
# none of the family's is refused (no entry), never named after another part's table.
MEMORY_TOLERANCE = 0.04


def _distance(memory_bytes: int, nominal_gb: int) -> float:
    return min(abs(memory_bytes / unit - nominal_gb) / nominal_gb for unit in (10**9, 2**30))


def memory_bytes_of(memory: str | int) -> int:
    """Bytes of an agent-reported memory value (section 4 units) or of a byte count."""
    if isinstance(memory, bool):
        raise ValueError(f"not a memory quantity: {memory!r}")
    return memory if isinstance(memory, int) else parse_memory_bytes(memory)


def catalogue_entry(family: str, memory: str | int | None, *, mig_capable: bool) -> MigGpuType | None:
    """The catalogue entry of a GPU (family in any spelling, memory as text or bytes), or None.

    None when the agent does not say ``migCapable: true``, when the memory is missing or does not parse,
    or when no entry of that family has that memory.
    """
    if not mig_capable or memory is None:
        return None
    try:
        wanted = canonical_family(family)
        size = memory_bytes_of(memory)
    except (ValueError, OverflowError):
        return None
    best: tuple[float, MigGpuType] | None = None
    for entry in CATALOGUE:
        if entry.family != wanted:
            continue
        distance = min(_distance(size, nominal) for nominal in entry.memory_gb)
        if distance <= MEMORY_TOLERANCE and (best is None or distance < best[0]):
            best = (distance, entry)
    return None if best is None else best[1]


def entry_by_key(key: str) -> MigGpuType:
    """The catalogue entry named ``key`` (``NVIDIA-A100-80GB``); KeyError when there is none."""
    for entry in CATALOGUE:
        if entry.key == key:
            return entry
    raise KeyError(key)


def gpu_equivalents(gpu_type: MigGpuType, request: Mapping[str, int]) -> int:
    """Whole GPUs a MIG request counts as against ``gpuLimits`` (docs/pools.md).

    The sum of the instances' compute slices over the GPU's compute slices, rounded up: 7 x 1g counts 1,
    one 3g counts 1. KeyError for a profile the GPU type does not have.
    """
    compute = sum(gpu_type.profiles[name].compute * count for name, count in request.items())
    return _whole_gpus(compute, gpu_type.compute_slices)


def family_gpu_equivalents(family: str, request: Mapping[str, int]) -> int:
    """``gpu_equivalents`` for a family, before a GPU is chosen: what ``gpuLimits`` counts at admission.

    Every catalogue entry of a family has the same compute slices (7, or 4 on A30) and a profile's
    compute slices are the ``<n>g`` of its name on every entry that offers it, so the family decides.
    A family the catalogue does not know counts 7 slices; a profile name that is not ``<n>g.<m>gb`` is a
    ValueError (validation checks the pattern first).
    """
    slices = family_compute_slices(family)
    return _whole_gpus(sum(profile_compute_slices(name) * count for name, count in request.items()), slices)


def family_compute_slices(family: str) -> int:
    """Compute slices of a MIG-capable GPU of ``family`` (7 unless the catalogue says otherwise)."""
    wanted = canonical_family(family)
    return next((e.compute_slices for e in CATALOGUE if e.family == wanted), SEVEN_SLICES)


def profile_compute_slices(name: str) -> int:
    """``3g.40gb`` -> 3: a profile's compute slices, read from its name."""
    match = _PROFILE_NAME.match(name)
    if match is None:
        raise ValueError(f"not a MIG profile name: {name!r}")
    return int(match.group(1))


def _whole_gpus(compute: int, per_gpu: int) -> int:
    return -(-compute // per_gpu)
