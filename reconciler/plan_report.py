"""Plans for people: markdown for pull-request comments and plain text for CI logs (pure).

Both render the ``plan --format json`` object of docs/planning.md, so every output format says the
same thing. Markdown puts a summary table first and the details in collapsed sections (problems first),
shows host names beside uids, and never exceeds ``limit`` characters (GitHub refuses comments over
65,536): rows that do not fit are counted in a closing line, never cut mid-table. Text prints one line
per entry with nothing folded, so uids stay greppable in a CI log.

``plan --changes-only`` filters the JSON itself (:func:`changes_only`), so every format leaves out the
same entries. Free capacity (not part of the JSON contract) comes in as ``(kind, hosts, GPUs)`` rows.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from reconciler.allocate import ALLOW_REPLACE_ANNOTATION
from reconciler.deletions import ALLOW_DELETIONS_TRAILER, UNREADABLE_REVISION
from reconciler.placement.mig_outcome import RELAYOUT_PREFIX

MARKDOWN_LIMIT = 60_000

# Sections in the order they matter to a reviewer: what fails, what changes, what stays.
_PROBLEMS = ("rejected", "invalid", "pending")
_CHANGES = ("create", "replace", "scale", "delete", "admit", "remove")
_QUIET = ("suspended", "unchanged", "admitted")
_ORDER = _PROBLEMS + _CHANGES + _QUIET
_SECTIONS = (("platforms", "Platforms"), ("pools", "Pools"), ("workloads", "Workloads"))
# Entries with nothing to do: what ``--changes-only`` leaves out (docs/planning.md).
UNCHANGED_ACTIONS = frozenset({"unchanged", "admitted"})
# Held is not unchanged: an entry a guard holds back stays (a grow held by its Project's GPU quota).
HELD_REASONS = frozenset({"QuotaExceeded"})

FreeRow = tuple[str, int, int]  # (kind: a GPU family, "cpu-worker" or "control-plane", free hosts, free GPUs)


def changes_only(plan: Mapping[str, Any]) -> dict[str, Any]:
    """``plan`` without its unchanged entries (``unchanged``, ``admitted``) except those a guard holds
    (:func:`held_fix`): held is not unchanged. Every list stays present."""
    out = dict(plan)
    for key, _label in _SECTIONS:
        if isinstance(out.get(key), list):
            out[key] = [
                e
                for e in out[key]
                if str(e.get("action")) not in UNCHANGED_ACTIONS or held_fix(key, e, plan) is not None
            ]
    return out


PRUNE_BLOCKED = "PruneBlocked"
REPLACE_BLOCKED = "ReplaceBlocked"
_AT_BOUND = frozenset({"ScalingLimited", "WorkloadsWouldNotFit"})  # a hold at a bound, not a steady pool


def held_fix(section: str, entry: Mapping[str, Any], plan: Mapping[str, Any]) -> str | None:
    """What a guard holds back in ``entry`` and how to let it through, or None when nothing is held:
    a blocked deletion (``PruneBlocked``), an invalid resource kept as it is, a MIG re-layout of a pool,
    a scaling hold at a bound, a blocked replace (``ReplaceBlocked``)."""
    reason, action = entry.get("reason"), str(entry.get("action"))
    if reason == PRUNE_BLOCKED:
        if UNREADABLE_REVISION in str(entry.get("message")):
            return "make every document of the revision readable: nothing is deleted while one is not"
        n = held_deletions(plan)
        return (
            f"approve the {n} removal{'s' if n != 1 else ''} with the commit trailer "
            f"`{ALLOW_DELETIONS_TRAILER}: {n}` in the head commit's message, or split the change"
        )
    if reason in HELD_REASONS:  # a grow the project's GPU quota holds back
        return "raise the Project's spec.gpuQuota, or free GPUs of the namespace's dedicated clusters"
    if reason == REPLACE_BLOCKED:
        return f'set the annotation `{ALLOW_REPLACE_ANNOTATION}: "true"` to replace the cluster, or revert it'
    if action == "invalid" and any(entry.get(k) for k in ("controlPlane", "workers", "gpus", "mig", "bound")):
        return "fix the document (see its errors): until then what it holds is kept as it is"
    if section == "pools":
        if RELAYOUT_PREFIX in str(entry.get("message")):
            return (
                "the MIG re-layout of these GPUs is carried out by the merge's pass; nothing held there moves"
            )
        scaling = entry.get("scaling")
        if (
            isinstance(scaling, Mapping)
            and scaling.get("decision") == "hold"
            and scaling.get("reason") in _AT_BOUND
        ):
            return (
                f"the scaling policy is held ({scaling.get('reason')}: {scaling.get('message')}): "
                "raise its bound or free what its workloads hold to scale further"
            )
    return None


def held_deletions(plan: Mapping[str, Any]) -> int:
    """How many removals the deletion guard holds back in ``plan`` (clusters and admitted workloads)."""
    return sum(
        1 for key, _label in _SECTIONS for e in plan.get(key) or [] if e.get("reason") == PRUNE_BLOCKED
    )


def held(plan: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any], str]]:
    """Every held entry of ``plan`` with its section and its fix, in section then name order."""
    out = []
    for key, _label in _SECTIONS:
        for e in plan.get(key) or []:
            fix = held_fix(key, e, plan)
            if fix is not None:
                out.append((key, e, fix))
    return out


def _free_text(free: Sequence[FreeRow]) -> str:
    shown = []
    for kind, hosts, gpus in free:
        shown.append(f"{kind}: {hosts} host{'s' if hosts != 1 else ''}" + (f", {gpus} GPUs" if gpus else ""))
    return "; ".join(shown) or "nothing"


def _empty_text(changes: bool) -> str:
    if changes:
        return "No changes: nothing would be created, scaled, replaced, admitted or deleted."
    return "Nothing to plan: the repository has no platforms, pools or workloads."


# Everything in a plan's rows comes from YAML or Palette (names, messages, host names), so the markdown
# renders none of it as markup: every character that could open emphasis, a link, an image, HTML, an
# entity or a table cell is backslash-escaped, and the URL and e-mail shapes GitHub links by themselves
# are broken by an invisible zero-width space.
_MARKUP = frozenset("\\`*_[]<>!|~&{}")
_ZWSP = "\u200b"
_AUTOLINK = re.compile(r"(?i)(:/|www\.|@)")


def _md(text: object) -> str:
    """``text`` as literal markdown text on one line (see above)."""
    flat = " ".join(str(text).splitlines())
    escaped = "".join(f"\\{c}" if c in _MARKUP else c for c in flat)
    return _AUTOLINK.sub(
        lambda m: m.group(1)[:-1] + _ZWSP + m.group(1)[-1] if m.group(1) != "@" else "@" + _ZWSP, escaped
    )


def _code(text: object) -> str:
    """``text`` as a code span (rendered literally: no markup, no links) that stays inside its table
    cell: a fence longer than any run of backticks in it, pipes escaped, one line."""
    flat = " ".join(str(text).splitlines()).replace("|", "\\|")
    fence = "`" * (max((len(run) for run in re.findall("`+", flat)), default=0) + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def _gpus(gpus: Mapping[str, int] | None) -> str:
    return ", ".join(f"{count} x {family}" for family, count in sorted((gpus or {}).items())) or "-"


def _hosts(entry: Mapping[str, Any], names: Mapping[str, str], *, markdown: bool) -> str:
    parts = []
    for role, key in (("control plane", "controlPlane"), ("workers", "workers")):
        uids = entry.get(key) or []
        if not uids:
            continue
        if markdown:
            shown = ", ".join(f"{_md(names.get(u, '?'))} ({_code(u)})" for u in uids)
        else:
            shown = ",".join(f"{names[u]}={u}" if u in names else u for u in uids)
        parts.append(f"{role}: {shown}")
    for bound in entry.get("bound") or []:  # a workload's whole GPUs, one host per replica
        if isinstance(bound, Mapping) and bound.get("host"):
            host = names.get(bound["host"], bound["host"])
            gpus = ",".join(str(g) for g in bound.get("gpus") or [])
            shown = f"replica {bound.get('replica')}: {host}/gpu{gpus}"
            parts.append(_md(shown) if markdown else shown)
    for binding in entry.get("mig") or []:
        if isinstance(binding, Mapping) and binding.get("host"):
            host = names.get(binding["host"], binding["host"])
            shown = f"{binding.get('profile')} on {host}/gpu{binding.get('gpu')}"
            parts.append(
                _md(shown) if markdown else f"{binding.get('profile')}@{host}/gpu{binding.get('gpu')}"
            )
    return ("<br>" if markdown else "; ").join(parts)


def _why(entry: Mapping[str, Any]) -> str:
    """``reason: message``; a pending workload's reason carries its place in its pool's queue."""
    reason, message = entry.get("reason"), entry.get("message") or ""
    if entry.get("position") is not None:
        reason = f"{reason} (#{entry['position']} in queue)"
    return f"{reason}: {message}" if reason else str(message)


def _counts(entries: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for entry in entries:
        counts[str(entry.get("action"))] = counts.get(str(entry.get("action")), 0) + 1
    return counts


def _sorted(entries: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    rank = {action: i for i, action in enumerate(_ORDER)}
    return sorted(
        entries,
        key=lambda e: (
            rank.get(str(e.get("action")), len(rank)),
            str(e.get("namespace")),
            str(e.get("name")),
        ),
    )


def _summary_line(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{counts[a]} {a}" for a in _ORDER if counts.get(a)) or "nothing"


def render_markdown(
    plan: Mapping[str, Any],
    names: Mapping[str, str],
    *,
    limit: int = MARKDOWN_LIMIT,
    title: str | None = None,
    note: str | None = None,
    free: Sequence[FreeRow] = (),
    changes: bool = False,
    basis: str | None = None,
) -> str:
    """The pull-request comment of ``plan`` (the JSON contract), at most ``limit`` characters.

    ``basis`` is its first line (what it was planned against), ``note`` a line under the heading,
    ``free`` the capacity left after the plan, ``changes`` says that unchanged entries were left out
    (``--changes-only``). What a guard holds comes first, under "Held", each with its fix.
    """
    present = [(key, label, plan.get(key) or []) for key, label in _SECTIONS]
    diagnostics = plan.get("diagnostics") or []
    head = _markdown_head(plan, present, diagnostics, title=title, note=note, free=free, changes=changes)
    comment = _Comment((f"{_md(basis)}\n\n" if basis else "") + head, limit)
    _add_held(comment, plan)
    _add_quotas(comment, plan)
    for key, label, entries in present:
        if entries:
            _add_section(comment, key, label, _sorted(entries), names)
    if diagnostics:
        _add_diagnostics(comment, diagnostics)
    if comment.omitted:
        rerun = "run `reconciler plan --format json`"
        comment.text += f"\n_{comment.omitted} more entries do not fit in one comment: {rerun}._\n"
    return comment.text


class _Comment:
    """The comment as it grows: a block is added only while it fits in ``limit`` with room left for the
    closing line; what does not fit is counted in ``omitted``."""

    FOOTER_ROOM = 200

    def __init__(self, text: str, limit: int) -> None:
        self.text = text
        self.limit = limit
        self.omitted = 0

    def add(self, block: str) -> bool:
        if len(self.text) + len(block) + self.FOOTER_ROOM > self.limit:
            return False
        self.text += block
        return True


def _markdown_head(
    plan: Mapping[str, Any],
    present: Sequence[tuple[str, str, Sequence[Mapping[str, Any]]]],
    diagnostics: Sequence[Mapping[str, Any]],
    *,
    title: str | None,
    note: str | None,
    free: Sequence[FreeRow],
    changes: bool,
) -> str:
    """The heading, the table of actions by section, the free capacity and the diagnostics' count."""
    revision = plan.get("revision")
    head = title or f"### Reconciler plan for {_code(str(revision)[:12]) if revision else 'the working tree'}"
    lines = [head, ""]
    if note:
        lines += [_md(note), ""]
    actions = [a for a in _ORDER if any(_counts(e).get(a) for _, _, e in present)]
    if actions:
        lines.append("| | " + " | ".join(actions) + " |")
        lines.append("|---|" + "---:|" * len(actions))
        for _key, label, entries in present:
            if entries:
                counts = _counts(entries)
                lines.append(f"| {label} | " + " | ".join(str(counts.get(a, 0)) for a in actions) + " |")
    else:
        lines.append(_empty_text(changes))
    if free:
        lines += ["", f"Free after this plan: {_md(_free_text(free))}."]
    if diagnostics:
        errors = sum(1 for d in diagnostics if d.get("severity") == "error")
        lines.append("")
        lines.append(f"{errors} errors and {len(diagnostics) - errors} warnings in the manifests.")
    return "\n".join(lines) + "\n"


def _add_held(comment: _Comment, plan: Mapping[str, Any]) -> None:
    """The "Held" block: each entry a guard holds back, with its fix (never folded). Held entries are
    in their sections' tables too, so what does not fit here is said, not counted again."""
    entries = held(plan)
    if not entries:
        return
    intro = f"\n#### Held\n\n{len(entries)} held back by a guard; each says how to let it through.\n\n"
    if not comment.add(intro):
        return
    for index, (key, entry, fix) in enumerate(entries):
        resource = f"{entry.get('namespace')}/{entry.get('name')}"
        line = f"- {_code(resource)} ({key[:-1]}, {_md(entry.get('action'))}): {_md(_why(entry))}\n"
        line += f"  - fix: {_md(fix)}\n"
        if entry.get("reason") == PRUNE_BLOCKED and UNREADABLE_REVISION not in str(entry.get("message")):
            line += f"\n    ```\n    {ALLOW_DELETIONS_TRAILER}: {held_deletions(plan)}\n    ```\n"
        if not comment.add(line):
            comment.add(f"- and {len(entries) - index} more held (in the tables below)\n")
            return


def _quotas(plan: Mapping[str, Any]) -> list[tuple[str, str, int, int]]:
    """The plan's ``quotas`` as (namespace, family, used, quota), as the plan leaves them."""
    return [
        (str(q.get("namespace")), str(q.get("family")), int(q.get("used") or 0), int(q.get("quota") or 0))
        for q in plan.get("quotas") or []
    ]


def _quota_text(used: int, quota: int) -> str:
    return f"{used} of {quota} GPUs" + (" (over quota: nothing grows)" if used > quota else "")


def _add_quotas(comment: _Comment, plan: Mapping[str, Any]) -> None:
    """The "GPU quotas" block: each Project's quota per family as the plan leaves it."""
    rows = _quotas(plan)
    if not rows:
        return
    block = "\n#### GPU quotas\n\n| namespace | family | used |\n|---|---|---|\n"
    block += "".join(f"| {_code(ns)} | {_md(family)} | {_quota_text(u, q)} |\n" for ns, family, u, q in rows)
    if not comment.add(block):
        comment.omitted += len(rows)


def _resource(key: str, entry: Mapping[str, Any]) -> str:
    """``namespace/name``; a workload adds its pool (``→ pool``) and the Environment it came through."""
    resource = f"{entry.get('namespace')}/{entry.get('name')}"
    if key == "workloads" and entry.get("pool"):
        resource += f" → {entry.get('pool')}"
    if key == "workloads" and entry.get("environment"):
        resource += f" (environment {entry.get('environment')})"
    return resource


def _add_section(
    comment: _Comment, key: str, label: str, rows: Sequence[Mapping[str, Any]], names: Mapping[str, str]
) -> None:
    """One section's entries as a table in a collapsible block (open when an entry needs a look)."""
    opened = f"\n<details{' open' if any(str(e.get('action')) in _PROBLEMS for e in rows) else ''}>"
    opened += f"<summary><b>{label}</b>: {_summary_line(_counts(rows))}</summary>\n\n"
    header = "| action | resource | GPUs | hosts | reason |\n|---|---|---|---|---|\n"
    if not comment.add(opened + header):
        comment.omitted += len(rows)
        return
    for index, entry in enumerate(rows):
        resource = _resource(key, entry)
        row = (
            f"| {_md(entry.get('action'))} | {_code(resource)} | {_md(_gpus(entry.get('gpus')))} | "
            f"{_hosts(entry, names, markdown=True) or '-'} | {_md(_why(entry)) or '-'} |\n"
        )
        if not comment.add(row):
            comment.omitted += len(rows) - index
            break
    comment.text += "\n</details>\n"


def _add_diagnostics(comment: _Comment, diagnostics: Sequence[Mapping[str, Any]]) -> None:
    if not comment.add("\n<details open><summary><b>Diagnostics</b></summary>\n\n"):
        comment.omitted += len(diagnostics)
        return
    for index, d in enumerate(diagnostics):
        where = f"{d.get('file')}:{d.get('line')}:{d.get('column')}"
        if not comment.add(f"- {_code(where)} {_md(d.get('severity'))}: {_md(d.get('message'))}\n"):
            comment.omitted += len(diagnostics) - index
            break
    comment.text += "\n</details>\n"


def render_text(
    plan: Mapping[str, Any],
    names: Mapping[str, str],
    *,
    note: str | None = None,
    free: Sequence[FreeRow] = (),
    changes: bool = False,
    basis: str | None = None,
) -> str:
    """One line per entry (``KIND ACTION NAMESPACE/NAME GPUS HOSTS REASON``), nothing folded or cut;
    ``basis`` is the first line; an entry a guard holds ends with ``[held: its fix]``, and the count of
    held entries comes first."""
    revision = plan.get("revision") or "(working tree)"
    lines = [basis] if basis else []
    lines.append(f"Plan for revision {revision}")
    if note:
        lines.append(note)
    if kept := held(plan):
        lines.append(f"Held: {len(kept)} held back by a guard (each says its fix)")
    if not any(plan.get(key) for key, _label in _SECTIONS):
        lines.append(_empty_text(changes))
    for key, label in _SECTIONS:
        entries = plan.get(key) or []
        if not entries:
            continue
        lines.append(f"{label}: {_summary_line(_counts(entries))}")
        rows = [
            (
                str(e.get("action")),
                f"{e.get('namespace')}/{e.get('name')}",
                _gpus(e.get("gpus")).replace(" x ", "x").replace(", ", ","),
                _hosts(e, names, markdown=False) or "-",
                (_why(e) or "-") + (f" [held: {fix}]" if (fix := held_fix(key, e, plan)) else ""),
            )
            for e in entries
        ]
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        for r in rows:
            lines.append(f"  {r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}  {r[4]}")
    for d in plan.get("diagnostics") or []:
        lines.append(
            f"{d.get('file')}:{d.get('line')}:{d.get('column')}: {d.get('severity')}: {d.get('message')}"
        )
    for ns, family, used, quota in _quotas(plan):
        lines.append(f"Quota {ns} {family}: {_quota_text(used, quota)}")
    if free:
        lines.append(f"Free after this plan: {_free_text(free)}")
    return "\n".join(lines) + "\n"
