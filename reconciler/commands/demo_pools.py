"""The demo's pools and workloads, read from the status branch: waiting until they settle, their table,
and the lines on Profile Bundles and Environments (``reconciler demo``; docs/demo.md)."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from rich.console import Console
from rich.table import Table

from reconciler.runtime.outcome import PassResult
from reconciler.source.status_reader import StatusBranch
from reconciler.status.view import ResourceRow, load_yaml, rows

_POOL_KINDS = ("ComputePool", "AIWorkload")
_SETTLED = {"Running", "Pending", "Rejected", "Invalid", "Suspended"}


def _pool_rows(remote: Path) -> list[ResourceRow]:
    """The pools and workloads (AIWorkloads, shared MLPlatforms) the status branch reports."""
    branch = StatusBranch(str(remote))
    files = branch.files()
    shared = {p for p, d in files.items() if "/mlplatforms/" in p and b"\n  pool: " in d}
    return [r for r in rows(files) if r.kind in _POOL_KINDS or (r.kind == "MLPlatform" and r.path in shared)]


def pool_modes(remote: Path) -> dict[str, str]:
    """Pool status path -> its mode (shared | dedicated)."""
    out: dict[str, str] = {}
    for path, data in StatusBranch(str(remote)).files().items():
        if "/computepools/" in path:
            doc = load_yaml(data)
            status = doc.get("status") if isinstance(doc, dict) else None
            if isinstance(status, dict) and status.get("mode"):
                out[path] = str(status["mode"])
    return out


def _pools_settled(found: list[ResourceRow]) -> bool:
    """Every pool Running; every workload Running, or waiting for a reason other than its pool."""
    pools = [r for r in found if r.kind == "ComputePool"]
    workloads = [r for r in found if r.kind != "ComputePool"]
    return (
        bool(pools)
        and all(r.phase == "Running" for r in pools)
        and all(r.phase in _SETTLED and r.reason != "PoolNotReady" for r in workloads)
    )


def converge_pools(
    passes: queue.Queue[PassResult],
    stop: threading.Event,
    remote: Path,
    latest: list[PassResult],
    timeout: float,
) -> tuple[bool, list[ResourceRow]]:
    """After the platforms: wait until the pools are Running and their workloads settled (their
    profiles are attached once the pool cluster runs, which may take another pass)."""
    found = _pool_rows(remote)
    started = time.monotonic()
    while not stop.is_set() and time.monotonic() - started < timeout:
        if _pools_settled(found):
            return True, found
        try:
            latest.append(passes.get(timeout=0.5))
        except queue.Empty:
            continue
        found = _pool_rows(remote)
    return _pools_settled(found), found


def pool_summary(console: Console, ok: bool, found: list[ResourceRow], modes: Mapping[str, str]) -> None:
    if not found:
        return
    table = Table(title="pools and workloads")
    for column in ("resource", "kind", "phase", "cluster", "GPUs", "reason"):
        table.add_column(column)
    for r in sorted(found, key=lambda r: (r.kind != "ComputePool", r.namespace, r.name)):
        gpus = ", ".join(f"{family} x{n}" for family, n in sorted(r.gpus.items())) or "-"
        reason = r.reason or ""
        if r.phase == "Pending" and r.message:
            reason = f"{reason}: {r.message}"
        kind = f"{r.kind} ({modes[r.path]})" if r.path in modes else r.kind
        table.add_row(r.key, kind, r.phase or "-", r.cluster or "-", gpus, reason)
    console.print(table)
    pools = sum(1 for r in found if r.kind == "ComputePool")
    running = sum(1 for r in found if r.kind != "ComputePool" and r.phase == "Running")
    pending = sum(1 for r in found if r.kind != "ComputePool" and r.phase == "Pending")
    if ok:
        console.print(
            f"[green]all {pools} pools Running[/green], {running} workloads Running, {pending} pending"
        )
    else:
        console.print("[red]not every pool reached Running[/red]")


def bundle_lines(files: Mapping[str, bytes]) -> list[str]:
    """Which pools are built from a Profile Bundle (and which a workload provisioned for itself), and from
    which cluster profiles (docs/bundles.md)."""
    out: list[str] = []
    for path, data in sorted(files.items()):
        parts = path.split("/")
        if len(parts) != 3 or parts[1] != "computepools":
            continue
        doc = load_yaml(data)
        status = doc.get("status") if isinstance(doc, dict) else None
        profiles = status.get("profiles") if isinstance(status, dict) else None
        if isinstance(profiles, list) and profiles:
            name = f"{parts[0]}/{parts[2].removesuffix('.yaml')}"
            owner = status.get("provisionedFor") if isinstance(status, dict) else None
            what = f"provisioned for AIWorkload {parts[0]}/{owner} and " if owner else ""
            out.append(
                f"pool {name} is {what}built from its profile bundle: cluster profiles {', '.join(profiles)}"
            )
    return out


def environment_lines(files: Mapping[str, bytes]) -> list[str]:
    """Where each Environment placed its workloads, from its status file (docs/environments.md)."""
    out: list[str] = []
    for path, data in sorted(files.items()):
        parts = path.split("/")
        if len(parts) != 3 or parts[1] != "environments":
            continue
        doc = load_yaml(data)
        status = doc.get("status") if isinstance(doc, dict) else None
        if not isinstance(status, dict):
            continue
        candidates = ", ".join(str(c) for c in status.get("candidates") or []) or "none"
        placed = status.get("workloads")
        placed = placed if isinstance(placed, dict) else {}
        where = "; ".join(f"{w} -> {p or 'no pool yet'}" for w, p in sorted(placed.items())) or "no workload"
        out.append(
            f"environment {parts[0]}/{parts[2].removesuffix('.yaml')} (candidates {candidates}): {where}"
        )
    return out
