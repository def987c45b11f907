"""What a merge's pass did differently from its pull request's plan, and why (pure).

The pull request's plan (``plan --from-status``) was made against the inventory the status branch
recorded; the pass after the merge plans against what it observes now. With the same revision and the
same records, only the inventory can make them differ (hosts taken, freed or gone unhealthy meanwhile);
the status commit's body then says, per entry, what the pull request said and what the pass does.
Scaling decisions are left out: a pull request's plan asks no Prometheus.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reconciler.plan import Plan

SECTIONS = ("platforms", "pools", "workloads")
_COMPARED = ("action", "controlPlane", "workers", "gpus", "mig", "bound")
LIMIT = 20  # lines in a commit body; the rest is counted


def _entries(plan: Plan) -> dict[tuple[str, str, str], list[dict[str, Any]]]:
    document = plan.to_json()
    out: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for section in SECTIONS:
        for entry in document.get(section) or []:
            shown = {k: entry.get(k) for k in _COMPARED if k in entry}
            out.setdefault((section, entry["namespace"], entry["name"]), []).append(shown)
    return out


def _said(entries: Sequence[Mapping[str, Any]] | None) -> str:
    if not entries:
        return "nothing"
    parts = []
    for e in entries:
        hosts = sorted({*e.get("controlPlane", []), *e.get("workers", [])})
        gpus = ", ".join(f"{n} x {f}" for f, n in sorted((e.get("gpus") or {}).items()))
        parts.append(
            " ".join(p for p in (str(e.get("action")), gpus, f"on {', '.join(hosts)}" if hosts else "") if p)
        )
    return "; ".join(parts)


def plan_drift(planned: Plan, done: Plan) -> list[str]:
    """One line per entry the pass does differently from ``planned`` (empty: the merge did as planned)."""
    before, after = _entries(planned), _entries(done)
    lines = [
        f"{namespace}/{name}: the pull request's plan said {_said(before.get(key))}; "
        f"the pass does {_said(after.get(key))}"
        for key in sorted(before.keys() | after.keys())
        if before.get(key) != after.get(key)
        for _section, namespace, name in [key]
    ]
    if len(lines) > LIMIT:
        lines = [*lines[:LIMIT], f"... and {len(lines) - LIMIT} more"]
    return lines


def drift_note(lines: Sequence[str]) -> str | None:
    """The status commit's paragraph about it (None when nothing differs)."""
    if not lines:
        return None
    head = "this pass differs from the plan made against the inventory last recorded (it changed since):"
    return "\n".join([head, *(f"- {line}" for line in lines)])
