"""``reconciler status``: what the status branch says (DESIGN.md section 8).

The table of every platform, pool and workload; one resource (``NAMESPACE/NAME``); its changes with
``--history`` (each status commit that changed its file, with the config commit that caused it: the
``Source-Revision`` trailer, and ``Source-Subject``/``Source-Author`` from the trailers or, for commits
written before those trailers existed, from the config commit itself when the repository has it);
``--format json``; ``--html FILE`` draws the inventory. Reads git only: no Palette, no key.
Exit codes: 0 shown, 2 no status branch, unknown resource, or a git error.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reconciler.inventory import Machine, discover
from reconciler.palette.observe import parse_snapshot
from reconciler.source._gitutil import GitError
from reconciler.status.page import render
from reconciler.status.reader import StatusBranch
from reconciler.status.render import whole_record
from reconciler.status.view import ResourceRow, load_yaml, recorded_revision, row_of, rows, table

EXIT_OK = 0
EXIT_ERROR = 2


class _CommandError(Exception):
    pass


def _select(found: list[ResourceRow], resource: str) -> ResourceRow:
    namespace, sep, name = resource.partition("/")
    if not sep or not namespace or not name:
        raise _CommandError(f"expected NAMESPACE/NAME, got {resource!r}")
    matches = [row for row in found if row.namespace == namespace and row.name == name]
    if not matches:
        raise _CommandError(f"no status for {resource} on the status branch")
    if len(matches) > 1:
        kinds = ", ".join(row.kind for row in matches)
        raise _CommandError(f"{resource} names several resources ({kinds}); they are shown in the table")
    return matches[0]


def _history(branch: StatusBranch, row: ResourceRow) -> list[dict[str, Any]]:
    entries = []
    for commit in branch.history(row.path):
        data = branch.read(row.path, commit.sha)
        then = row_of(row.path, data) if data is not None else None
        source = commit.trailers.get("Source-Revision")
        subject = commit.trailers.get("Source-Subject")
        author = commit.trailers.get("Source-Author")
        if source and (subject is None or author is None):
            found = branch.config_commit(source)
            if found is not None:
                subject = subject if subject is not None else found[0]
                author = author if author is not None else found[1]
        entries.append(
            {
                "commit": commit.sha,
                "time": commit.time,
                "sourceRevision": source,
                "sourceSubject": subject,
                "sourceAuthor": author,
                "phase": then.phase if then else "Deleted",
                "reason": then.reason if then else None,
                "message": then.message if then else "the status file was removed",
            }
        )
    return entries


def _history_text(row: ResourceRow, entries: list[dict[str, Any]]) -> str:
    lines = [f"{row.kind} {row.key}: {row.phase or '-'} ({row.reason or '-'})"]
    for entry in entries:
        source = (entry["sourceRevision"] or "-")[:12]
        who = f" ({entry['sourceAuthor']})" if entry["sourceAuthor"] else ""
        lines.append(
            f"{entry['time']}  {entry['commit'][:12]}  {entry['phase'] or '-':<12} "
            f"{entry['reason'] or '-':<22} {source}  {entry['sourceSubject'] or '-'}{who}"
        )
    return "\n".join(lines)


def _machines(files: Mapping[str, bytes]) -> list[Machine]:
    machines: dict[str, Machine] = {}
    for path, data in sorted(files.items()):
        if path.startswith("inventory/") and path.endswith(".json"):
            try:
                snapshot = parse_snapshot(data.decode("utf-8"), json_first=True)
            except (ValueError, UnicodeDecodeError):
                continue
            for machine in discover(snapshot.edge_hosts).machines:
                machines.setdefault(machine.uid, machine)
    return list(machines.values())


def _mig(files: Mapping[str, bytes]) -> dict[str, list[Mapping[str, Any]]]:
    layouts: dict[str, list[Mapping[str, Any]]] = {}
    for path, data in files.items():
        if "/computepools/" not in path:
            continue
        doc = load_yaml(data)
        status = doc.get("status") if isinstance(doc, Mapping) else None
        mig = status.get("mig") if isinstance(status, Mapping) else None
        if isinstance(mig, Mapping):
            for host, gpus in mig.items():
                if isinstance(gpus, list):
                    layouts.setdefault(str(host), []).extend(g for g in gpus if isinstance(g, Mapping))
    return layouts


def _show(branch: StatusBranch, resource: str | None, history: bool, fmt: str, html_out: Path | None) -> int:
    if branch.ref is None:
        raise _CommandError(f"no status branch {branch.branch!r} in the repository (has a pass run yet?)")
    files = whole_record(branch.files())  # a sharded branch's shards/*.yaml read as one record
    found = rows(files)
    revision = recorded_revision(files)
    if revision is None:
        tip_commits = branch.history(".")
        revision = tip_commits[0].trailers.get("Source-Revision") if tip_commits else None
    if html_out is not None:
        page = render(found, _machines(files), revision=revision, mig=_mig(files))
        try:
            html_out.write_text(page, encoding="utf-8")
        except OSError as exc:
            raise _CommandError(f"cannot write {html_out}: {exc.strerror or exc}") from None
        print(f"wrote {html_out} ({len(found)} resources)", file=sys.stderr)
        if resource is None and not history:
            return EXIT_OK
    if history and resource is None:
        raise _CommandError("--history needs NAMESPACE/NAME")
    if resource is not None:
        row = _select(found, resource)
        if history:
            entries = _history(branch, row)
            if fmt == "json":
                print(json.dumps({"resource": row.to_json(), "history": entries}, indent=2))
            else:
                print(_history_text(row, entries))
            return EXIT_OK
        found = [row]
    if fmt == "json":
        print(json.dumps({"revision": revision, "resources": [row.to_json() for row in found]}, indent=2))
    else:
        print(table(found))
        if resource is not None and found[0].message:
            print(f"\n{found[0].message}")
        if resource is not None and found[0].replicas:
            print("\n" + "\n".join(found[0].replicas))
    return EXIT_OK


def run(
    repo: str,
    status_branch: str,
    resource: str | None,
    history: bool,
    fmt: str,
    html_out: Path | None,
) -> int:
    try:
        with StatusBranch(repo, status_branch) as branch:
            return _show(branch, resource, history, fmt, html_out)
    except (GitError, _CommandError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
