"""``reconciler status --html FILE``: one self-contained page that draws the inventory (pure).

Read top to bottom it answers, in order: what needs attention and why (failures first, then what waits,
each with its reason and message), how full each pool is (GPUs admitted and free per family, waiting
workloads, MIG slices, the scaling decision), the free capacity per family, every resource, and the
hosts. Colours say health, never who: Running green, Provisioning/Pending/Deleting amber,
Degraded/Failed/Rejected/Invalid red, free or unused grey. Hosts are grouped by role, GPU family and
resource group, then by holder, in ``<details>`` that start closed when large, so 10,000 hosts fit in a
few screens. No script, font or stylesheet is fetched; a viewport meta makes it readable on a phone.
"""

from __future__ import annotations

import html
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from reconciler.inventory import HostState, Machine, Role
from reconciler.status.details import admitted, capacity, mig_slices_text, pool_of, scaling_text
from reconciler.status.page_style import STYLE
from reconciler.status.view import ResourceRow, health, needs_attention

OPEN_LIMIT = 48
"""A group of hosts with more tiles than this starts collapsed."""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _why(row: ResourceRow) -> str:
    return ": ".join(_e(part) for part in (row.reason, row.message) if part) or "no reason recorded"


ATTENTION_SHOWN = 20
"""Entries of "Needs attention" drawn open; the rest are in a closed ``<details>``."""


def _attention(found: Sequence[ResourceRow]) -> str:
    rows = needs_attention(list(found))
    if not rows:
        return '<p id="attention">Nothing needs attention.</p>'

    def items(some: Sequence[ResourceRow]) -> str:
        return "".join(
            f'<li class="{health(r)}" data-resource="{_e(r.key)}" data-kind="{_e(r.kind)}">'
            f"<b>{_e(r.kind)} {_e(r.key)}</b> · {_e(r.phase or '-')}"
            f'<span class="why">{_why(r)}</span></li>'
            for r in some
        )

    shown, rest = rows[:ATTENTION_SHOWN], rows[ATTENTION_SHOWN:]
    more = (
        f'<details><summary>{len(rest)} more</summary><ul class="attention">{items(rest)}</ul></details>'
        if rest
        else ""
    )
    return f'<ul class="attention" id="attention">{items(shown)}</ul>{more}'


def _pool_card(pool: ResourceRow, workloads: Sequence[ResourceRow]) -> str:
    bars = []
    for family, counts in capacity(pool).items():
        total, used = counts.get("total", 0), counts.get("admitted", 0)
        width = 100 * used / total if total else 0
        bars.append(
            f"<p>{_e(family)}: <b>{used}</b> of {total} GPUs admitted, {counts.get('free', 0)} free</p>"
            f'<div class="bar" role="img" aria-label="{used} of {total} admitted">'
            f'<span class="used" style="width:{width:.1f}%"></span></div>'
        )
    waiting = [w for w in workloads if pool_of(w) == pool.key and w.phase != "Running"]
    waits = "".join(f'<p class="waiting">waiting: <b>{_e(w.key)}</b> · {_why(w)}</p>' for w in waiting)
    return (
        f'<div class="pool" data-pool="{_e(pool.key)}"><h3>{_e(pool.key)} '
        f"<small>{_e(pool.status.get('mode') or '')}</small> "
        f'<span class="chip {health(pool)}">{_e(pool.phase or "-")}</span></h3>'
        + (f'<p class="why">{_why(pool)}</p>' if health(pool) != "ok" else "")
        + "".join(bars)
        + f"<p>admitted: {_e(', '.join(admitted(pool)) or '-')}</p>{waits}"
        + f"<p>MIG slices: {_e(mig_slices_text(pool))}</p><p>scaling: {_e(scaling_text(pool))}</p></div>"
    )


def _pools(found: Sequence[ResourceRow]) -> str:
    pools = [r for r in found if r.kind == "ComputePool"]
    if not pools:
        return "<p>No compute pools.</p>"
    workloads = [r for r in found if pool_of(r) is not None]
    return f'<div class="pools" id="pools">{"".join(_pool_card(p, workloads) for p in pools)}</div>'


def _resources(found: Sequence[ResourceRow]) -> str:
    body = "".join(
        f'<tr><td>{_e(r.kind)}</td><td>{_e(r.key)}</td><td class="phase {health(r)}">{_e(r.phase or "-")}'
        f"</td><td>{_e(r.reason or '-')}</td><td>{_e(r.cluster or '-')}</td><td>{len(r.hosts)}</td></tr>"
        for r in found
    )
    table = (
        '<div class="scroll"><table id="resources"><tr><th>kind</th><th>resource</th><th>phase</th>'
        f"<th>reason</th><th>cluster</th><th>hosts</th></tr>{body}</table></div>"
    )
    opened = " open" if len(found) <= OPEN_LIMIT else ""
    return f"<details{opened}><summary>{len(found)} resources</summary>{table}</details>"


def _mig_strip(gpus: Sequence[Mapping[str, Any]], health_of: Mapping[str, str]) -> str:
    """A host's MIG GPUs: 8 memory slices each, instances drawn at their start (no text: the tile's
    line under it says which profiles, so nothing is too small to read)."""
    out, labels = [], []
    for gpu in gpus:
        cells = []
        for inst in gpu.get("instances") or []:
            profile = str(inst.get("profile", "?"))
            start = int(inst.get("start", 0))
            size = int(profile.split("g", 1)[0]) if profile[:1].isdigit() else 1
            size = 8 if size == 7 else (4 if size in (3, 4) else size)
            who = inst.get("workload")
            cls = health_of.get(str(who), "ok") if who else "free"
            cells.append(
                f'<span class="mig {cls}" style="grid-column:{start + 1} / span {size}" '
                f'title="{_e(profile)} @ {start}: {_e(who or "free")}"></span>'
            )
            labels.append(f"{profile}{'' if who else ' free'}")
        out.append(f'<div class="gpu" data-gpu="{_e(gpu.get("gpu"))}">{"".join(cells)}</div>')
    text = f"<small>MIG: {_e(', '.join(labels))}</small>" if labels else ""
    return "".join(out) + text


def _idle(machine: Machine) -> tuple[str, str]:
    if machine.state is HostState.UNAVAILABLE:
        return "neutral", f"unavailable: {machine.unavailable_reason or 'not ready'}"
    if machine.state is HostState.IN_USE:
        return "other", "in use by another cluster"
    return "neutral", "free"


def _tile(m: Machine, who: ResourceRow | None, tenants: Sequence[str], mig: str) -> str:
    cls, text = (health(who), who.key) if who is not None else _idle(m)
    unavailable = " unavailable" if m.state is HostState.UNAVAILABLE else ""
    gpus = f"{m.gpu_count} GPU" if m.gpu_count else f"{m.cpus} CPU"
    return (
        f'<div class="host {cls}{unavailable}" data-host="{_e(m.uid)}" '
        f'data-holder="{_e(who.key if who else "")}" title="{_e(m.uid)}"><b>{_e(m.name)}</b>'
        f"<small>{_e(gpus)}</small><small>{_e(text)}</small>"
        + "".join(f'<small class="tenant">{_e(t)}</small>' for t in tenants)
        + f"{mig}</div>"
    )


_RANK = {"problem": 0, "progress": 1, "ok": 2, "neutral": 3}


def _bucket(m: Machine, who: ResourceRow | None) -> tuple[int, str, str]:
    """(order, label, class) of the sub-group a host is drawn in: its holder, else why it is idle."""
    if who is not None:
        return _RANK.get(health(who), 3), f"{who.kind} {who.key} · {who.phase or '-'}", health(who)
    if m.state is HostState.UNAVAILABLE:
        return 6, "unavailable", "neutral"
    if m.state is HostState.IN_USE:
        return 5, "in use by another cluster", "other"
    return 4, "free", "neutral"


def _details(summary: str, body: str, count: int, attrs: str = "") -> str:
    opened = " open" if count <= OPEN_LIMIT else ""
    return f"<details{attrs}{opened}><summary>{summary}</summary>{body}</details>"


class _Hosts:
    """Draws hosts in nested groups: role and GPU family, then resource group, then holder. A group of
    at most :data:`OPEN_LIMIT` hosts is drawn open and its tiles directly (holders side by side);
    a larger one is a closed ``<details>`` whose summary counts its hosts by health."""

    def __init__(
        self,
        holder: Mapping[str, ResourceRow],
        tenants: Mapping[str, Sequence[str]],
        mig: Mapping[str, Sequence[Mapping[str, Any]]],
        health_of: Mapping[str, str],
    ) -> None:
        self.holder, self.tenants, self.mig, self.health_of = holder, tenants, mig, health_of

    def _key(self, m: Machine) -> tuple[tuple[int, str, str], str]:
        return _bucket(m, self.holder.get(m.uid)), m.name

    def tiles(self, hosts: Sequence[Machine]) -> str:
        return (
            '<div class="tiles">'
            + "".join(
                _tile(
                    m,
                    self.holder.get(m.uid),
                    sorted(self.tenants.get(m.uid, ())),
                    _mig_strip(self.mig.get(m.uid, ()), self.health_of),
                )
                for m in sorted(hosts, key=self._key)
            )
            + "</div>"
        )

    def chips(self, hosts: Sequence[Machine]) -> str:
        counts: dict[str, int] = defaultdict(int)
        for m in hosts:
            counts[_bucket(m, self.holder.get(m.uid))[2]] += 1
        order = ("problem", "progress", "ok", "neutral", "other")
        return " ".join(f'<span class="chip {c}">{counts[c]}</span>' for c in order if counts[c])

    def by_holder(self, hosts: Sequence[Machine]) -> str:
        if len(hosts) <= OPEN_LIMIT:
            return self.tiles(hosts)
        buckets: dict[tuple[int, str, str], list[Machine]] = defaultdict(list)
        for m in hosts:
            buckets[_bucket(m, self.holder.get(m.uid))].append(m)
        return "".join(
            _details(
                f'<span class="chip {cls}">{len(members)}</span> {_e(label)}',
                self.tiles(members),
                len(members),
            )
            for (_, label, cls), members in sorted(buckets.items())
        )

    def draw(self, machines: Sequence[Machine]) -> str:
        groups: dict[tuple[str, str], dict[str, list[Machine]]] = defaultdict(lambda: defaultdict(list))
        for m in machines:
            rg = ", ".join(f"{k}={v}" for k, v in sorted(m.resource_groups.items())) or "no resource group"
            role = "control plane" if m.role is Role.CONTROL_PLANE else "worker"
            groups[(role, str(m.gpu_family or "no GPU"))][rg].append(m)
        out = []
        for (role, family), by_rg in sorted(groups.items()):
            members = [m for hosts in by_rg.values() for m in hosts]
            if len(by_rg) == 1:
                ((rg, _),) = by_rg.items()
                body, title = self.by_holder(members), f"{_e(role)} · {_e(family)} · {_e(rg)}"
            else:
                body = "".join(
                    _details(
                        f"{_e(rg)} — {len(hosts)} hosts {self.chips(hosts)}",
                        self.by_holder(hosts),
                        len(hosts),
                    )
                    for rg, hosts in sorted(by_rg.items())
                )
                title = f"{_e(role)} · {_e(family)}"
            summary = f"{title} — {len(members)} hosts {self.chips(members)}"
            out.append(_details(summary, body, len(members), ' class="group"'))
        return "".join(out)


def _unobserved(hosts: Sequence[str], holder: Mapping[str, ResourceRow]) -> str:
    """Held hosts that no inventory snapshot of the branch has (written before snapshots were)."""
    if not hosts:
        return ""
    tiles = "".join(
        f'<div class="host {health(holder[uid])}" data-host="{_e(uid)}" data-holder="{_e(holder[uid].key)}" '
        f'title="{_e(uid)}"><b>{_e(uid)}</b><small>not in a snapshot</small>'
        f"<small>{_e(holder[uid].key)}</small></div>"
        for uid in hosts
    )
    summary = f"held hosts without an inventory snapshot ({len(hosts)})"
    return _details(summary, f'<div class="tiles">{tiles}</div>', len(hosts), ' class="group"')


def _capacity(machines: Sequence[Machine], holder: Mapping[str, ResourceRow]) -> str:
    free: dict[str, int] = defaultdict(int)
    total: dict[str, int] = defaultdict(int)
    for m in machines:
        if m.gpu_family:
            total[str(m.gpu_family)] += m.gpu_count
            if m.uid not in holder and m.state is HostState.AVAILABLE:
                free[str(m.gpu_family)] += m.gpu_count
    body = "".join(
        f'<tr class="capacity"><td>{_e(f)}</td><td>{free[f]}</td><td>{total[f]}</td></tr>'
        for f in sorted(total)
    )
    return (
        '<div class="scroll"><table id="capacity"><tr><th>family</th><th>free GPUs</th>'
        f"<th>total GPUs</th></tr>{body}</table></div>"
    )


_LEGEND = (
    '<ul class="chips"><li class="chip ok">Running</li><li class="chip progress">Provisioning, Pending, '
    'Deleting</li><li class="chip problem">Degraded, Failed, Rejected, Invalid</li>'
    '<li class="chip neutral">free, suspended, unavailable (dashed)</li>'
    '<li class="chip other">in use by another cluster</li></ul>'
)


def render(
    rows: Sequence[ResourceRow],
    machines: Iterable[Machine],
    *,
    revision: str | None,
    mig: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    title: str = "PaletteAI inventory",
) -> str:
    """The page: ``rows`` say who holds which host and how healthy it is; ``machines`` are the
    discovered hosts; ``mig`` maps a host uid to its MIG GPUs (``pools[].mig`` of ``plan --format json``)."""
    # A host's holder is the platform or pool whose cluster it is in; the workloads bound to it inside a
    # pool are named on the tile as well.
    holder: dict[str, ResourceRow] = {}
    tenants: dict[str, list[str]] = defaultdict(list)
    for row in sorted(rows, key=lambda r: r.kind == "AIWorkload" or not r.cluster):
        if row.kind in ("Compute", "ScalingPolicy"):
            continue  # a Compute lists hosts it offers, not hosts it holds
        for host in row.hosts:
            if row.kind == "AIWorkload" or (row.kind == "MLPlatform" and host in holder):
                tenants[host].append(row.key)
            else:
                holder.setdefault(host, row)
    machines = list(machines)
    known = {m.uid for m in machines}
    unobserved = sorted(host for host in holder if host not in known)
    health_of = {r.key: health(r) for r in rows if r.kind != "Compute"}
    counts: dict[str, int] = defaultdict(int)
    for r in rows:
        if r.kind != "Compute":
            counts[health(r)] += 1
    chips = "".join(
        f'<li class="chip {c}">{counts[c]} {w}</li>'
        for c, w in (
            ("problem", "failing"),
            ("progress", "in progress"),
            ("ok", "running"),
            ("neutral", "other"),
        )
        if counts[c]
    )
    hosts = _unobserved(unobserved, holder) + _Hosts(holder, tenants, mig or {}, health_of).draw(machines)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_e(title)}</title><style>{STYLE}</style></head><body>
<h1>{_e(title)}</h1>
<p>revision <code>{_e(revision or "unknown")}</code> · {len(machines) + len(unobserved)} hosts ·
{len(rows)} resources</p><ul class="chips" id="health">{chips}</ul>
<h2>Needs attention</h2>{_attention(rows)}
<h2>Pools</h2>{_pools(rows)}
<h2>Free capacity</h2>{_capacity(machines, holder)}
<h2>Resources</h2>{_resources(rows)}
<h2>Hosts</h2>{_LEGEND}{hosts}
</body></html>
"""
