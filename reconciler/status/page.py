"""``reconciler status --html FILE``: one self-contained page that draws the inventory (pure).

Every host is a tile, grouped by role, GPU family and resource group, coloured by the platform or pool
that holds it (grey when free, outlined red when unavailable); a pool's MIG layouts are drawn on its
GPUs; a summary gives the free capacity per family. No script, font or stylesheet is fetched: the page
is one file that a browser, a CI artifact viewer or a mail client shows as it is.
"""

from __future__ import annotations

import hashlib
import html
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from reconciler.inventory import HostState, Machine, Role
from reconciler.status.view import ResourceRow

_FREE = "#e5e7eb"


def _colour(holder: str) -> str:
    hue = int(hashlib.sha256(holder.encode()).hexdigest()[:6], 16) % 360
    return f"hsl({hue}, 62%, 58%)"


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _idle(machine: Machine) -> str:
    if machine.state is HostState.UNAVAILABLE:
        return f"unavailable: {machine.unavailable_reason or 'not ready'}"
    return "in use by another cluster" if machine.state is HostState.IN_USE else "free"


def _mig_strip(gpus: Sequence[Mapping[str, Any]]) -> str:
    """A host's MIG GPUs: 8 memory slices each, instances drawn at their start."""
    out = []
    for gpu in gpus:
        cells = []
        for inst in gpu.get("instances") or []:
            profile = str(inst.get("profile", "?"))
            start = int(inst.get("start", 0))
            size = max(1, int(str(profile).split("g", 1)[0]) if profile[:1].isdigit() else 1)
            size = 8 if size == 7 else (4 if size in (3, 4) else size)
            who = inst.get("workload")
            colour = _colour(str(who)) if who else _FREE
            cells.append(
                f'<span class="mig" style="grid-column:{start + 1} / span {size};background:{colour}" '
                f'title="{_e(profile)} @ {start}: {_e(who or "free")}">{_e(profile)}</span>'
            )
        out.append(f'<div class="gpu" data-gpu="{_e(gpu.get("gpu"))}">{"".join(cells)}</div>')
    return "".join(out)


def render(
    rows: Sequence[ResourceRow],
    machines: Iterable[Machine],
    *,
    revision: str | None,
    mig: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    title: str = "PaletteAI inventory",
) -> str:
    """The page: ``rows`` say who holds which host; ``machines`` are the discovered hosts; ``mig`` maps
    a host uid to its MIG GPUs (``pools[].mig`` shape of DESIGN.md section 8)."""
    # A host's holder is the platform or pool whose cluster it is in; the workloads bound to it inside a
    # pool are named on the tile as well.
    holder: dict[str, str] = {}
    tenants: dict[str, list[str]] = defaultdict(list)
    for row in sorted(rows, key=lambda r: r.kind == "AIWorkload" or not r.cluster):
        for host in row.hosts:
            if row.kind == "AIWorkload" or (row.kind == "MLPlatform" and host in holder):
                tenants[host].append(row.key)
            else:
                holder.setdefault(host, row.key)
    mig = mig or {}
    groups: dict[tuple[str, str, str], list[Machine]] = defaultdict(list)
    free: dict[str, int] = defaultdict(int)
    total: dict[str, int] = defaultdict(int)
    machines = list(machines)
    for machine in machines:
        family = machine.gpu_family or "no GPU"
        rg = ", ".join(f"{k}={v}" for k, v in sorted(machine.resource_groups.items())) or "no resource group"
        role = "control plane" if machine.role is Role.CONTROL_PLANE else "worker"
        groups[(role, str(family), rg)].append(machine)
        if machine.gpu_family:
            total[str(machine.gpu_family)] += machine.gpu_count
            if machine.uid not in holder and machine.state is HostState.AVAILABLE:
                free[str(machine.gpu_family)] += machine.gpu_count
    sections = []
    known = {m.uid for m in machines}
    unobserved = sorted({host for host in holder if host not in known})
    if unobserved:  # held, but in no inventory snapshot of the branch (written before snapshots were)
        held_tiles = "".join(
            f'<div class="host" data-host="{_e(uid)}" data-holder="{_e(holder[uid])}" '
            f'style="background:{_colour(holder[uid])}" title="{_e(uid)}">'
            f"<b>{_e(uid)}</b><small>not in a snapshot</small><small>{_e(holder[uid])}</small></div>"
            for uid in unobserved
        )
        sections.append(
            f'<section class="group"><h3>held hosts without an inventory snapshot '
            f'<small>({len(unobserved)})</small></h3><div class="tiles">{held_tiles}</div></section>'
        )
    for (role, family, rg), members in sorted(groups.items()):
        tiles = []
        for m in sorted(members, key=lambda m: m.name):
            who = holder.get(m.uid)
            colour = _colour(who) if who else _FREE
            classes = "host" + (" unavailable" if m.state is HostState.UNAVAILABLE else "")
            gpus = f"{m.gpu_count} GPU" if m.gpu_count else f"{m.cpus} CPU"
            tiles.append(
                f'<div class="{classes}" data-host="{_e(m.uid)}" data-holder="{_e(who or "")}" '
                f'style="background:{colour}" title="{_e(m.uid)}">'
                f"<b>{_e(m.name)}</b><small>{_e(gpus)}</small><small>{_e(who or _idle(m))}</small>"
                + "".join(f'<small class="tenant">{_e(t)}</small>' for t in sorted(tenants.get(m.uid, ())))
                + f"{_mig_strip(mig.get(m.uid, ()))}</div>"
            )
        sections.append(
            f'<section class="group"><h3>{_e(role)} · {_e(family)} · {_e(rg)} '
            f'<small>({len(members)})</small></h3><div class="tiles">{"".join(tiles)}</div></section>'
        )
    legend = "".join(
        f'<li><span class="swatch" style="background:{_colour(k)}"></span>{_e(k)} '
        f"<small>{_e(r.kind)} · {_e(r.phase or '-')}</small></li>"
        for k, r in sorted({r.key: r for r in rows}.items())
    )
    capacity = "".join(
        f'<tr class="capacity"><td>{_e(f)}</td><td>{free[f]}</td><td>{total[f]}</td></tr>'
        for f in sorted(total)
    )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>
<style>
body{{font:14px system-ui,sans-serif;margin:24px;color:#111827;background:#fff}}
h1{{font-size:20px;margin:0 0 4px}} h3{{font-size:14px;margin:16px 0 6px}}
.tiles{{display:flex;flex-wrap:wrap;gap:6px}}
.host{{width:150px;min-height:64px;border-radius:6px;padding:6px;box-sizing:border-box;
display:flex;flex-direction:column;gap:2px;border:2px solid transparent}}
.host b{{font-size:12px;overflow-wrap:anywhere}}
.host small{{font-size:11px;opacity:.85}} .host small.tenant{{font-style:italic}}
.host.unavailable{{border-color:#dc2626;opacity:.7}}
.gpu{{display:grid;grid-template-columns:repeat(8,1fr);gap:1px;margin-top:2px;background:#9ca3af}}
.mig{{font-size:8px;text-align:center;overflow:hidden;white-space:nowrap}}
.legend{{list-style:none;padding:0;display:flex;flex-wrap:wrap;gap:12px}}
.swatch{{display:inline-block;width:12px;height:12px;border-radius:3px;margin-right:4px}}
table{{border-collapse:collapse}} td,th{{padding:2px 10px;border-bottom:1px solid #e5e7eb;text-align:left}}
</style></head><body>
<h1>{_e(title)}</h1>
<p>revision <code>{_e(revision or "unknown")}</code> · {len(machines) + len(unobserved)} hosts ·
{len(rows)} resources</p>
<h2>Free capacity</h2>
<table id="capacity"><tr><th>family</th><th>free GPUs</th><th>total GPUs</th></tr>{capacity}</table>
<h2>Holders</h2><ul class="legend">{legend}</ul>
<h2>Hosts</h2>
{"".join(sections)}
</body></html>
"""
