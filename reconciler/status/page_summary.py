"""The top of the status page (pure): what it was made from and when, what is unavailable, and what
needs attention grouped by reason.

- Basis: the time the page was written (given, never read from a clock here) and the status commit,
  its time and the config revision it reports (:class:`reconciler.status.basis.Basis`), so a page kept
  as an artifact or mailed says how old it is.
- Unavailable hosts (unhealthy, unpaired, not ready) are counted by why, at the top: they are never
  placed, and a fleet losing hosts should not have to be found inside opened groups.
- Needs attention: resources with the same health, kind, phase and reason form one entry with their
  count; inside it each distinct message is one line naming its resources (the first
  :data:`NAMES_SHOWN`, the rest behind a closed ``<details>``). Problems first, then what waits.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from reconciler.inventory import HostState, Machine
from reconciler.status.basis import Basis
from reconciler.status.page_hosts import e
from reconciler.status.view import ResourceRow, health, needs_attention

NAMES_SHOWN = 12
"""Resources named per message of an attention entry; the rest are counted behind a ``<details>``."""


def basis_line(basis: Basis | None, made: str | None, revision: str | None) -> str:
    """``made 2026-12-02T09:00:00Z from status 9f8e7d6 of 2026-12-02T08:10:00Z (config 1a2b3c4)``."""
    made_text = f"made {e(made)}" if made else "made at an unrecorded time"
    source = e(basis.header()) if basis is not None else f"config <code>{e(revision or 'unknown')}</code>"
    return f'<p id="basis">{made_text} from {source}</p>'


def unavailable_counts(machines: Sequence[Machine]) -> dict[str, int]:
    """How many hosts are unavailable, by why (``health is unhealthy``, ``state is unpaired ...``)."""
    counts: dict[str, int] = defaultdict(int)
    for m in machines:
        if m.state is HostState.UNAVAILABLE:
            counts[m.unavailable_reason or "not ready"] += 1
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def unavailable_block(machines: Sequence[Machine]) -> str:
    counts = unavailable_counts(machines)
    if not counts:
        return '<p id="unavailable">No host is unavailable.</p>'
    total = sum(counts.values())
    chips = "".join(
        f'<li class="chip problem" data-why="{e(why)}" data-count="{n}">{n} {e(why)}</li>'
        for why, n in counts.items()
    )
    return (
        f'<p id="unavailable-total"><b>{total}</b> host{"s" if total != 1 else ""} unavailable '
        f'(never placed until healthy and ready):</p><ul class="chips" id="unavailable">{chips}</ul>'
    )


@dataclass
class _Group:
    health: str
    kind: str
    phase: str
    reason: str
    by_message: dict[str, list[ResourceRow]] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return sum(len(rows) for rows in self.by_message.values())


def attention_groups(found: Sequence[ResourceRow]) -> list[_Group]:
    """The attention entries: grouped by (health, kind, phase, reason), in the order of their first
    resource in :func:`needs_attention` (problems, then what waits)."""
    groups: dict[tuple[str, str, str, str], _Group] = {}
    for row in needs_attention(list(found)):
        key = (health(row), row.kind, row.phase or "-", row.reason or "")
        group = groups.setdefault(key, _Group(*key))
        message = " ".join((row.message or "").split())
        group.by_message.setdefault(message, []).append(row)
    return list(groups.values())


def _names(rows: Sequence[ResourceRow]) -> str:
    def chip(r: ResourceRow) -> str:
        return f'<span class="who" data-resource="{e(r.key)}" data-kind="{e(r.kind)}">{e(r.key)}</span>'

    shown, rest = rows[:NAMES_SHOWN], rows[NAMES_SHOWN:]
    text = " ".join(chip(r) for r in shown)
    if rest:
        text += f"<details><summary>{len(rest)} more</summary>{' '.join(chip(r) for r in rest)}</details>"
    return text


def _why(reason: str, message: str) -> str:
    return ": ".join(e(part) for part in (reason, message) if part) or "no reason recorded"


def attention_block(found: Sequence[ResourceRow]) -> str:
    groups = attention_groups(found)
    if not groups:
        return '<p id="attention">Nothing needs attention.</p>'
    items = []
    for g in groups:
        lines = "".join(
            f'<li><span class="why">{_why(g.reason, message)} <small class="count">({len(rows)})</small>'
            f"</span>{_names(rows)}</li>"
            for message, rows in sorted(g.by_message.items(), key=lambda item: -len(item[1]))
        )
        items.append(
            f'<li class="{e(g.health)}" data-reason="{e(g.reason)}" data-count="{g.count}">'
            f"<b>{g.count} {e(g.kind)}</b> · {e(g.phase)} · {e(g.reason or '-')}"
            f'<ul class="messages">{lines}</ul></li>'
        )
    return f'<ul class="attention" id="attention">{"".join(items)}</ul>'
