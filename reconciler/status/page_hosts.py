"""The hosts of the status page (pure): one tile per host, coloured by the health of its holder, in
nested groups (role and GPU family, resource group, holder) that start closed when large."""

from __future__ import annotations

import html
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from reconciler.inventory import HostState, Machine, Role
from reconciler.status.view import ResourceRow, health

OPEN_LIMIT = 48
"""A group of hosts with more tiles than this starts collapsed."""


def e(value: object) -> str:
    """HTML-escaped text (attributes too): every name on the page comes from YAML or Palette."""
    return html.escape(str(value), quote=True)


_e = e


def _hosts_count(n: int) -> str:
    return f"{n} host" if n == 1 else f"{n} hosts"


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


def details_block(summary: str, body: str, count: int, attrs: str = "") -> str:
    opened = " open" if count <= OPEN_LIMIT else ""
    return f"<details{attrs}{opened}><summary>{summary}</summary>{body}</details>"


class Hosts:
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
            details_block(
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
                    details_block(
                        f"{_e(rg)} — {_hosts_count(len(hosts))} {self.chips(hosts)}",
                        self.by_holder(hosts),
                        len(hosts),
                    )
                    for rg, hosts in sorted(by_rg.items())
                )
                title = f"{_e(role)} · {_e(family)}"
            summary = f"{title} — {_hosts_count(len(members))} {self.chips(members)}"
            out.append(details_block(summary, body, len(members), ' class="group"'))
        return "".join(out)


def unobserved_block(hosts: Sequence[str], holder: Mapping[str, ResourceRow]) -> str:
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
    return details_block(summary, f'<div class="tiles">{tiles}</div>', len(hosts), ' class="group"')
