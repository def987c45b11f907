"""The deletion guard (pure): deliberate removals pass, accidental ones do not.

A pass removes clusters (of platforms and pools) and admitted workloads (a workload holding GPUs or MIG
instances in a pool that is gone from the repository). When it would remove more of them than
``--max-deletions`` allows, or when the revision is incomplete, it removes none: every cluster entry is
kept with reason ``PruneBlocked``, every held-back workload stays admitted, profiles attached, with
reason ``PruneBlocked``.

A commit may approve more: the trailer ``Reconciler-Allow-Deletions: N`` in the message of the config
commit being applied raises the limit to N for that revision only (never lowers it); the status commit
of the pass names the approval.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

ALLOW_DELETIONS_TRAILER = "Reconciler-Allow-Deletions"

_TRAILER = re.compile(rf"^{ALLOW_DELETIONS_TRAILER}:[ \t]*(\d{{1,9}})[ \t]*$", re.IGNORECASE)


def approved_deletions(message: str | None) -> int | None:
    """The N of a ``Reconciler-Allow-Deletions: N`` trailer in a commit message (its last paragraph, as
    git reads trailers; the last such line wins), else None."""
    if not message:
        return None
    paragraphs = [p for p in re.split(r"\n[ \t]*\n", message.strip()) if p.strip()]
    if len(paragraphs) < 2:
        return None  # a subject alone carries no trailer
    found = [m.group(1) for line in paragraphs[-1].splitlines() if (m := _TRAILER.match(line.strip()))]
    return int(found[-1]) if found else None


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


# The blocked-deletion message of a revision with unreadable documents (the plan report keys its hint on it).
UNREADABLE_REVISION = "some documents of this revision could not be read"


@dataclass(frozen=True, slots=True)
class DeletionGuard:
    """``max_deletions``: the operator's limit (``--max-deletions``); ``approved``: the revision's
    ``Reconciler-Allow-Deletions`` trailer, if any; ``revision``: the config commit it is read from."""

    max_deletions: int = 1
    approved: int | None = None
    revision: str | None = None

    @property
    def limit(self) -> int:
        return max(self.max_deletions, self.approved or 0)

    def _limit_text(self) -> str:
        if self.approved is not None and self.approved > self.max_deletions:
            return f"more than the {self.approved} approved by {ALLOW_DELETIONS_TRAILER}"
        return f"more than --max-deletions {self.max_deletions}"

    def blocked(self, clusters: Collection[str], workloads: int, complete: bool) -> str:
        """Why none of this pass's removals may happen, or "" when they may. ``clusters``: the kind of each
        cluster it would delete (MLPlatform or ComputePool); ``workloads``: admitted workloads it would
        remove. Counted over the whole pass."""
        deletions = len(clusters) + workloads
        if not deletions:
            return ""
        what = _what(clusters, workloads)
        if not complete:
            return f"would {what}, but {UNREADABLE_REVISION}; nothing is deleted"
        if deletions > self.limit:
            trailer = f"{ALLOW_DELETIONS_TRAILER}: {deletions}"
            fix = f"approve with the commit trailer {trailer}, or split the change"
            return f"would {what}, {self._limit_text()}; nothing is deleted ({fix})"
        return ""

    def note(self, clusters: Collection[str], workloads: int, blocked: str) -> str | None:
        """The status commit's sentence about an approval (None without a trailer, or when the pass
        removes nothing)."""
        if self.approved is None or not (clusters or workloads):
            return None
        at = f" in {self.revision[:7]}" if self.revision else ""
        approval = f"{ALLOW_DELETIONS_TRAILER}: {self.approved}{at}"
        deletions = len(clusters) + workloads
        if blocked:
            return f"{approval} does not cover this pass: it {blocked.removeprefix('would ')}"
        if deletions > self.max_deletions:
            return f"deletions approved by {approval}: {_what(clusters, workloads, done=True)}"
        return f"{approval} (not needed: {deletions} within --max-deletions {self.max_deletions})"


def _what(clusters: Collection[str], workloads: int, done: bool = False) -> str:
    """ "delete 3 platform clusters", "delete 1 platform or pool cluster(s) and remove 2 admitted
    workloads" (the wording the guard's messages have always had for clusters alone)."""
    parts: list[str] = []
    if clusters:
        pools = any(kind == "ComputePool" for kind in clusters)
        kind = "platform or pool" if pools else "platform"
        parts.append(("deletes " if done else "delete ") + f"{len(clusters)} {kind} clusters")
    if workloads:
        parts.append(("removes " if done else "remove ") + _plural(workloads, "admitted workload"))
    return " and ".join(parts)
