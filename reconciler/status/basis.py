"""What a plan or a status report was made against: its basis (pure; docs/planning.md, "Basis").

A plan names the config revision it planned, the status branch commit it read its records (and, with
``--from-status``, its inventory) from, that commit's time, and where the inventory came from
(``observation``): ``palette`` (``--palette``), ``inventory`` (a snapshot file), ``status`` (the snapshot
the status branch recorded) or ``none`` (``reconciler status``, which observes nothing). ``fetched`` says
whether the status branch was fetched before it was read (``--no-fetch`` reads a clone's copy as it is).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

ObservationKind = Literal["palette", "inventory", "status", "none"]
OBSERVATIONS: tuple[ObservationKind, ...] = ("palette", "inventory", "status", "none")
SHORT = 7  # characters of a sha in a basis line, as git's short form
_MIN_PREFIX = 4  # the shortest sha prefix --expect-status accepts (git's own minimum)


@dataclass(frozen=True, slots=True)
class Basis:
    revision: str | None  # the config commit planned (None: a directory that is not a git work tree)
    status_commit: str | None  # the status branch's tip read (None: no status branch, or --no-status)
    status_time: str | None  # that commit's committer time, ISO 8601 UTC (2026-12-02T08:10:00Z)
    observation: ObservationKind
    fetched: bool = True  # False: the status branch was read as it is (--no-fetch) though it has a remote
    records: bool = True  # False: --no-status, planned as a first start (no records read)

    def __post_init__(self) -> None:
        if self.observation not in OBSERVATIONS:
            raise ValueError(f"observation {self.observation!r} is not one of {', '.join(OBSERVATIONS)}")

    def to_json(self) -> dict[str, Any]:
        """The ``basis`` object of ``plan --format json``."""
        return {
            "revision": self.revision,
            "statusCommit": self.status_commit,
            "statusTime": self.status_time,
            "observation": self.observation,
        }

    def status_text(self) -> str:
        """``status 9f8e7d6 of 2026-12-02T08:10:00Z`` and what else the reader must know about it."""
        if not self.records:
            return "no status (--no-status: planned as a first start, no records read)"
        if self.status_commit is None:
            return "no status branch (a first start: nothing is recorded yet)"
        text = f"status {self.status_commit[:SHORT]}"
        if self.status_time is not None:
            text += f" of {self.status_time}"
        if not self.fetched:
            text += " (not fetched: --no-fetch read the local copy as it is)"
        return text

    def line(self) -> str:
        """The first line of a text or markdown plan:
        ``planned at 1a2b3c4 against status 9f8e7d6 of 2026-12-02T08:10:00Z``."""
        at = self.revision[:SHORT] if self.revision else "the work tree (no commit)"
        return f"planned at {at} against {self.status_text()}"

    def header(self) -> str:
        """The header of ``reconciler status`` and its page: ``status 9f8e7d6 of ... (config 1a2b3c4)``."""
        text = self.status_text()
        if self.revision:
            text += f" (config {self.revision[:SHORT]})"
        return text

    def stale(self, expected: str) -> bool:
        """Whether ``--expect-status expected`` refuses this basis: the status tip is not ``expected``
        (a full sha or a prefix of at least 4 hex digits; case is ignored)."""
        want = expected.strip().lower()
        if self.status_commit is None or len(want) < _MIN_PREFIX:
            return True
        return not self.status_commit.lower().startswith(want)


def stale_message(basis: Basis, expected: str) -> str:
    """Why ``--expect-status`` refused the plan (exit 3)."""
    now = basis.status_commit[:SHORT] if basis.status_commit else "absent"
    return (
        f"stale plan: the status branch is at {now}, not {expected.strip()[:SHORT]}; "
        "it moved since the plan was made: plan again"
    )
