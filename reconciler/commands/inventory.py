"""``reconciler inventory show`` and ``reconciler inventory export``.

``show`` reads edge hosts from Palette (``--palette``) or from a snapshot file (``--inventory``), runs the
same discovery the reconciler runs, and prints the Compute view: a table for people, YAML or JSON (the
Compute status shape of :mod:`reconciler.compute_status`) for machines. ``export`` writes a snapshot
(docs/palette.md) that the emulator and offline ``plan`` read.

Online, every edge host is read (no server-side tag filter): ``palette.ai`` is matched case-insensitively
by discovery, which a ``key:value`` search filter would not do. The API key comes only from
``PALETTE_API_KEY``; it is never printed, and Palette errors arrive already scrubbed of it.
Offline, ``--project-uid`` scopes a snapshot the way the emulator does (by ``spec.projectMeta.uid``).
Exit codes: 0 done, 2 usage, input or Palette error.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

from reconciler.compute_status import (
    compute_status,
    holders,
    in_use_machines,
    summary,
    unavailable_machines,
)
from reconciler.inventory import Inventory, discover
from reconciler.palette import PaletteClient, PaletteError
from reconciler.palette.credentials import MissingAPIKey, api_key_from_env
from reconciler.resolve import Target
from reconciler.snapshots import Snapshot, dump_snapshot, load_snapshot, scoped

EXIT_OK = 0
EXIT_ERROR = 2
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _CommandError(Exception):
    """A problem to report on standard error with exit code 2 (never carries the API key)."""


def _api_key() -> str:
    try:
        return api_key_from_env()
    except MissingAPIKey as exc:
        raise _CommandError(str(exc)) from None


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return EXIT_ERROR


def _read_snapshot(path: Path) -> Snapshot:
    try:
        return load_snapshot(path)
    except OSError as exc:
        raise _CommandError(f"cannot read inventory {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise _CommandError(f"inventory {path}: {exc}") from None


def _read_palette(url: str, project_uid: str | None, *, with_clusters: bool) -> Snapshot:
    """Edge hosts (and, for a snapshot, full cluster objects) from Palette."""
    with PaletteClient(url, _api_key(), project_uid) as client:
        hosts = client.search_edge_hosts()
        clusters: list[dict[str, Any]] = []
        if with_clusters:
            for found in client.search_clusters():
                uid = found.get("metadata", {}).get("uid")
                cluster = client.get_cluster(str(uid)) if uid else None
                if cluster is not None:
                    clusters.append(cluster)
        else:  # the search's summaries carry the labels that say which platform or pool holds a host
            clusters = client.search_clusters()
    return Snapshot(edge_hosts=hosts, clusters=clusters)


def _groups_text(groups: Mapping[str, str] | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in (groups or {}).items())


def _named(uid: str, names: Mapping[str, str]) -> str:
    """A machine as a person reads it: its name beside its uid."""
    name = names.get(uid)
    return f"{name} ({uid})" if name and name != uid else uid


def _render_table(inventory: Inventory, status: Mapping[str, Any], console: Console) -> None:
    names = {m.uid: m.name for m in inventory.machines}
    compute = Table(title="Available compute", title_justify="left")
    for column in ("role", "arch", "cpus", "gpus", "instances", "resource groups", "machines"):
        compute.add_column(column, no_wrap=column == "machines")
    for role, key in (
        ("control plane", "availableControlPlaneCompute"),
        ("worker", "availableWorkerCompute"),
    ):
        for entry in status[key]:
            gpus = (
                f"{entry['gpuCount']} x {entry['family']}"
                if entry.get("family")
                else str(entry.get("gpuCount", ""))
            )
            compute.add_row(
                role,
                entry["architecture"],
                str(entry.get("cpuCount", "")),
                gpus,
                str(entry["instances"]),
                _groups_text(entry.get("resourceGroups")),
                "\n".join(_named(uid, names) for uid in entry["machines"]),
            )
    console.print(compute)
    if status["unavailableMachines"]:
        unavailable = Table(
            title="Unavailable hosts (never placed until healthy and ready)", title_justify="left"
        )
        for column in ("name", "uid", "why"):
            unavailable.add_column(column)
        for host in status["unavailableMachines"]:
            unavailable.add_row(host["name"], host["uid"], host["reason"])
        console.print(unavailable)
    if status["excludedMachines"]:
        excluded = Table(title="Excluded hosts", title_justify="left")
        for column in ("name", "uid", "reason"):
            excluded.add_column(column)
        for host in status["excludedMachines"]:
            excluded.add_row(host["name"], host["uid"], host["reason"])
        console.print(excluded)
    if status["inUseMachines"]:
        held = Table(title="Hosts in use (the platform or pool that holds them)", title_justify="left")
        for column in ("name", "uid", "held by", "cluster"):
            held.add_column(column)
        for host in status["inUseMachines"]:
            by = host.get("heldBy")
            owner = f"{by['kind']} {by['namespace']}/{by['name']}" if by else "-"
            held.add_row(host["name"], host["uid"], owner, host["cluster"])
        console.print(held)
    noted = [m for m in inventory.machines if m.notes]
    for machine in noted:
        console.print(f"note: {machine.name} ({machine.uid}): {'; '.join(machine.notes)}")
    counts = summary(inventory)
    console.print(
        f"{len(inventory.machines)} machines: {counts['available']} available, {counts['in-use']} in use, "
        f"{counts['unavailable']} unavailable; {counts['excluded']} excluded"
    )


def _render(inventory: Inventory, fmt: str, clusters: Sequence[Mapping[str, Any]] = ()) -> str | None:
    """YAML/JSON text, or None after printing the table (rich writes to the console itself).

    Besides the Compute status shape, ``unavailableMachines`` lists the hosts that are counted but
    cannot be placed, each with why (the Compute status itself lists available compute only), and
    ``inUseMachines`` the hosts in a cluster with the platform or pool that holds them.
    """
    status = {
        **compute_status(inventory),
        "unavailableMachines": unavailable_machines(inventory),
        "inUseMachines": in_use_machines(inventory, holders(clusters)),
    }
    if fmt == "json":
        return json.dumps(status, indent=2) + "\n"
    if fmt == "yaml":
        return yaml.safe_dump(status, sort_keys=False, width=1000)
    _render_table(inventory, status, Console(width=max(Console().width, 160)))
    return None


def show(palette: str | None, inventory: Path | None, project_uid: str | None, fmt: str) -> int:
    """Print the Compute view of Palette's edge hosts or of a snapshot file."""
    if (palette is None) == (inventory is None):
        return _fail("give exactly one of --palette URL or --inventory FILE")
    if fmt not in ("table", "yaml", "json"):
        return _fail(f"unknown format {fmt!r} (table, yaml or json)")
    try:
        if inventory is not None:
            # Scoped as Palette (and the emulator) scope a ProjectUid: hosts of that project and hosts
            # that name none, so a plain snapshot works whatever project is set.
            snapshot = scoped(_read_snapshot(inventory), Target("", project_uid))
        elif palette is not None:
            snapshot = _read_palette(palette, project_uid, with_clusters=False)
    except _CommandError as exc:
        return _fail(str(exc))
    except PaletteError as exc:
        return _fail(f"Palette: {exc}")
    text = _render(discover(snapshot.host_facts), fmt, snapshot.clusters)
    if text is not None:
        sys.stdout.write(text)
    return EXIT_OK


def export(palette: str, project_uid: str | None, out: Path | None) -> int:
    """Write ``{edgeHosts, clusters}`` from Palette to ``out`` (YAML; JSON for ``.json``) or stdout."""
    try:
        snapshot = _read_palette(palette, project_uid, with_clusters=True)
    except _CommandError as exc:
        return _fail(str(exc))
    except PaletteError as exc:
        return _fail(f"Palette: {exc}")
    if out is None:
        data = {"edgeHosts": snapshot.edge_hosts, "clusters": snapshot.clusters}
        sys.stdout.write(yaml.dump(data, Dumper=_DUMPER, sort_keys=False))
        return EXIT_OK
    try:
        dump_snapshot(snapshot, out)
    except OSError as exc:
        return _fail(f"cannot write {out}: {exc.strerror or exc}")
    print(
        f"wrote {out}: {len(snapshot.edge_hosts)} edge hosts, {len(snapshot.clusters)} clusters",
        file=sys.stderr,
    )
    return EXIT_OK
