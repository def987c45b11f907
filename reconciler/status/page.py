"""``reconciler status --html FILE``: one self-contained page that draws the inventory (pure).

Read top to bottom it answers, in order: when and from what it was made, how many hosts are
unavailable and why (:mod:`reconciler.status.page_summary`), what needs attention and why (grouped by
reason with counts; failures first, then what waits), how full each pool is (GPUs admitted and free per
family, waiting workloads, MIG slices, the scaling decision), the free capacity per family, every
resource, and the hosts. Colours say health, never who: Running green, Provisioning/Pending/Deleting amber,
Degraded/Failed/Rejected/Invalid red, free or unused grey. Hosts are grouped by role, GPU family and
resource group, then by holder, in ``<details>`` that start closed when large, so 10,000 hosts fit in a
few screens. No script, font or stylesheet is fetched; a viewport meta makes it readable on a phone.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from reconciler.inventory import HostState, Machine
from reconciler.status.basis import Basis
from reconciler.status.details import admitted, capacity, mig_slices_text, pool_of, scaling_text
from reconciler.status.page_hosts import OPEN_LIMIT, Hosts, e, unobserved_block
from reconciler.status.page_style import STYLE
from reconciler.status.page_summary import attention_block, basis_line, unavailable_block
from reconciler.status.view import ResourceRow, health

_e = e


def _why(row: ResourceRow) -> str:
    return ": ".join(_e(part) for part in (row.reason, row.message) if part) or "no reason recorded"


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
    waiting = [w for w in workloads if pool_of(w) == pool.key and w.phase == "Pending"]
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
    basis: Basis | None = None,
    made: str | None = None,
) -> str:
    """The page: ``rows`` say who holds which host and how healthy it is; ``machines`` are the
    discovered hosts; ``mig`` maps a host uid to its MIG GPUs (``pools[].mig`` of ``plan --format json``);
    ``basis`` what the page was made from (the status commit and its time, the config revision) and
    ``made`` when (ISO 8601), both in its header."""
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
    hosts = unobserved_block(unobserved, holder) + Hosts(holder, tenants, mig or {}, health_of).draw(machines)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_e(title)}</title><style>{STYLE}</style></head><body>
<h1>{_e(title)}</h1>{basis_line(basis, made, revision)}
<p>revision <code>{_e(revision or "unknown")}</code> · {len(machines) + len(unobserved)} hosts ·
{len(rows)} resources</p><ul class="chips" id="health">{chips}</ul>{unavailable_block(machines)}
<h2>Needs attention</h2>{attention_block(rows)}
<h2>Pools</h2>{_pools(rows)}
<h2>Free capacity</h2>{_capacity(machines, holder)}
<h2>Resources</h2>{_resources(rows)}
<h2>Hosts</h2>{_LEGEND}{hosts}
</body></html>
"""
