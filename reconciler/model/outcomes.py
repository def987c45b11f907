"""What applying one pass's actions did, as the apply stage reports it to the status report (pure).

The types live here, below both, so that applying needs nothing of the status layer that renders them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Outcome:
    """What applying one platform's action did (None fields: nothing was attempted)."""

    ok: bool
    cluster_uid: str | None = None
    error: str | None = None
    unauthorized: bool = False  # Palette refused the key (401/403): the target stalls


@dataclass(frozen=True, slots=True)
class WorkloadOutcome:
    """What applying one workload's profiles did: the profile uids attached for it after the pass."""

    attached: tuple[str, ...] = ()
    ok: bool = True
    error: str | None = None
