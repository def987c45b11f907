"""What ``reconciler status`` says about pools and workloads beyond the table (pure: rows in, text out).

A pool's status file records its capacity per GPU family, the workloads admitted to it, its MIG layout
(per host and GPU, each instance with the workload bound to it), the MIG slices used, free and stranded,
and the scaling decision. The table command adds a POOLS section (one line per pool and family) and a
NEEDS ATTENTION section (what is failing, then what waits, each with its reason); ``status NS/NAME``
of a pool or a workload lists all of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reconciler.status.view import ResourceRow, host_label, needs_attention


def _aligned(lines: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines]


def capacity(row: ResourceRow) -> dict[str, dict[str, int]]:
    """``{family: {total, admitted, free}}`` of a pool row (empty for other kinds)."""
    found: dict[str, dict[str, int]] = {}
    recorded = row.status.get("capacity")
    if isinstance(recorded, Mapping):
        for family, counts in sorted(recorded.items()):
            if isinstance(counts, Mapping):
                found[str(family)] = {
                    k: int(v) for k in ("total", "admitted", "free") if isinstance(v := counts.get(k), int)
                }
    return found


def admitted(row: ResourceRow) -> list[str]:
    return [str(w) for w in row.status.get("admitted") or []]


def pool_of(row: ResourceRow) -> str | None:
    """``namespace/pool`` of a workload row (an AIWorkload or a shared MLPlatform), else None."""
    pool = row.status.get("pool")
    return f"{row.namespace}/{pool}" if pool else None


def scaling_decision(row: ResourceRow) -> tuple[str, str | None, str | None] | None:
    """(decision, reason, message) of a pool's ``status.scaling``: a recorded block nests them under
    ``decision`` (``{decision: {decision, reason, message}, size, ...}``), the plan's entry has them at
    its top level. None without a scaling block."""
    scaling = row.status.get("scaling")
    if not isinstance(scaling, Mapping):
        return None
    inner = scaling.get("decision")
    found = inner if isinstance(inner, Mapping) else scaling
    decision = found.get("decision")
    reason, message = found.get("reason"), found.get("message")
    return (
        str(decision) if isinstance(decision, str) and decision else "none",
        str(reason) if reason else None,
        " ".join(str(message).split()) if message else None,
    )


def scaling_text(row: ResourceRow) -> str:
    """``hold (ScalingLimited)``: the decision and its reason, never the block's mapping."""
    found = scaling_decision(row)
    if found is None:
        return "-"
    decision, reason, _ = found
    return f"{decision} ({reason})" if reason else decision


def mig_slices_text(row: ResourceRow) -> str:
    slices = row.status.get("migSlices")
    if not isinstance(slices, Mapping):
        return "-"
    return f"{slices.get('used', 0)} used, {slices.get('free', 0)} free, {slices.get('stranded', 0)} stranded"


def _waiting(pool: ResourceRow, workloads: Sequence[ResourceRow]) -> list[ResourceRow]:
    """The pool's workloads that wait for it (``Pending``); an invalid, rejected or suspended workload
    waits for a change of its own, not for capacity, and is listed under NEEDS ATTENTION instead."""
    return [w for w in workloads if pool_of(w) == pool.key and w.phase == "Pending"]


def pools_section(found: Sequence[ResourceRow]) -> str:
    """One line per pool and GPU family: mode, total/admitted/free GPUs, workloads, MIG, scaling."""
    pools = [r for r in found if r.kind == "ComputePool"]
    if not pools:
        return ""
    workloads = [r for r in found if pool_of(r) is not None]
    lines: list[tuple[str, ...]] = [
        ("POOL", "MODE", "FAMILY", "TOTAL", "ADMITTED", "FREE", "WORKLOADS", "MIG SLICES", "SCALING")
    ]
    for pool in pools:
        waiting = len(_waiting(pool, workloads))
        who = f"{len(admitted(pool))} admitted" + (f", {waiting} waiting" if waiting else "")
        families = capacity(pool) or {"-": {}}
        for family, counts in families.items():
            lines.append(
                (
                    pool.key,
                    str(pool.status.get("mode") or "-"),
                    family,
                    *(str(counts.get(k, "-")) for k in ("total", "admitted", "free")),
                    who,
                    mig_slices_text(pool),
                    scaling_text(pool),
                )
            )
    return "\n".join(_aligned(lines))


def attention_section(found: Sequence[ResourceRow]) -> str:
    """What is failing, then what waits, each with its reason and message (one line each)."""
    rows = needs_attention(list(found))
    if not rows:
        return ""
    lines: list[tuple[str, ...]] = [("KIND", "RESOURCE", "PHASE", "WHY")]
    for row in rows:
        why = ": ".join(part for part in (row.reason, row.message) if part) or "-"
        lines.append((row.kind, row.key, row.phase or "-", " ".join(why.split())))
    return "\n".join(_aligned(lines))


def _mig_lines(mig: Mapping[str, Any], names: Mapping[str, str]) -> list[str]:
    lines = []
    for uid, gpus in sorted(mig.items()):
        host = host_label(uid, names)
        for gpu in gpus if isinstance(gpus, list) else []:
            if not isinstance(gpu, Mapping):
                continue
            instances = ", ".join(
                f"{i.get('profile')}@{i.get('start')} {i.get('workload') or 'free'}"
                for i in gpu.get("instances") or []
                if isinstance(i, Mapping)
            )
            lines.append(f"    {host} GPU {gpu.get('gpu')}: {instances or '-'}")
    return lines


def _pool_details(row: ResourceRow, found: Sequence[ResourceRow], names: Mapping[str, str]) -> list[str]:
    lines = [f"mode: {row.status.get('mode') or '-'}", "capacity:"]
    for family, counts in capacity(row).items():
        lines.append(
            f"    {family}: {counts.get('total', 0)} total, {counts.get('admitted', 0)} admitted, "
            f"{counts.get('free', 0)} free"
        )
    lines.append(f"admitted: {', '.join(admitted(row)) or '-'}")
    for w in _waiting(row, [r for r in found if pool_of(r) is not None]):
        lines.append(f"waiting: {w.key} {w.phase or '-'} ({w.reason or '-'}): {w.message or '-'}")
    mig = row.status.get("mig")
    if isinstance(mig, Mapping) and mig:
        lines.append(f"MIG ({mig_slices_text(row)} slices):")
        lines += _mig_lines(mig, names)
    else:
        lines.append("MIG: none (every GPU whole)")
    scaling = row.status.get("scaling")
    decided = scaling_decision(row)
    if isinstance(scaling, Mapping) and decided is not None:
        policy = scaling.get("policy") or "no policy"
        lines.append(f"scaling: {scaling_text(row)}, {policy}: {decided[2] or '-'}")
        size = scaling.get("size")
        if isinstance(size, Mapping) and size:
            lines.append(
                "    size: " + ", ".join(f"{family}={count}" for family, count in sorted(size.items()))
            )
    return lines


def _bound_host(item: Mapping[str, Any], names: Mapping[str, str]) -> str:
    """``gpu-a100-01 (edge-...)`` of a binding: its recorded ``hostName``, else the inventory's name."""
    uid = str(item.get("host") or "-")
    name = item.get("hostName")
    return host_label(uid, {uid: str(name)} if name else names)


def _workload_details(row: ResourceRow, names: Mapping[str, str]) -> list[str]:
    lines = [f"pool: {pool_of(row)}"]
    allocation = row.status.get("allocation")
    if isinstance(allocation, Mapping):
        # With several replicas, each line says which replica it is (each replica is on one host).
        several = isinstance(allocation.get("replicas"), int) and allocation["replicas"] > 1

        def number(item: Mapping[str, Any]) -> int:
            value = item.get("replica")
            return value if isinstance(value, int) else 0

        def replica(item: Mapping[str, Any]) -> str:
            return f"replica {number(item)}: " if several else ""

        bound: dict[tuple[int, str], list[str]] = {}
        for b in allocation.get("bound") or []:
            if isinstance(b, Mapping):
                host = _bound_host(b, names)
                bound.setdefault((number(b), host), []).append(str(b.get("gpu")))
        for (which, host), gpus in sorted(bound.items()):
            prefix = f"replica {which}: " if several else ""
            lines.append(f"{prefix}whole GPUs: {host} GPU {', '.join(gpus)}")
        for m in allocation.get("mig") or []:
            if isinstance(m, Mapping):
                lines.append(
                    f"{replica(m)}MIG instance: {_bound_host(m, names)} GPU {m.get('gpu')} "
                    f"{m.get('profile')}@{m.get('start')}"
                )
    return lines


def details(
    row: ResourceRow, found: Sequence[ResourceRow], names: Mapping[str, str] | None = None
) -> list[str]:
    """The lines ``status NAMESPACE/NAME`` prints under the table row of ``row``; ``names`` maps host
    uids to host names (from the branch's inventory snapshots)."""
    lines = [f"{row.reason}: {row.message}" if row.reason and row.message else (row.message or "")]
    if row.kind == "ComputePool":
        lines += _pool_details(row, found, names or {})
    elif pool_of(row) is not None:
        lines += _workload_details(row, names or {})
    return [line for line in lines if line]
