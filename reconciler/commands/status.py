"""``reconciler status``: what the status branch says (docs/status-branch.md).

The table of every resource the branch holds (platforms, Computes, pools, workloads, scaling policies),
then the pools (capacity per family, admitted and waiting workloads, MIG slices, scaling decision) and
what needs attention with its reason; one resource (``NAMESPACE/NAME``, or ``NAMESPACE/KIND/NAME`` when
several kinds share the name) with its details; its changes with ``--history`` (each status commit that
changed its file, with the config commit that caused it: the ``Source-Revision`` trailer, and
``Source-Subject``/``Source-Author`` from the trailers or, for commits written before those trailers
existed, from the config commit itself when the repository has it), also of a resource whose file is gone;
``--format json``; ``--html FILE`` draws the inventory. Every output starts with its basis (the status
commit read, its time, the config revision it reports; JSON ``basis``); the status branch is fetched
first, ``--no-fetch`` reads a clone's copy as it is and the basis says so. Reads git only: no Palette,
no key.
Exit codes: 0 shown, 2 no status branch, unknown resource, or a git error.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reconciler.inventory import Machine, discover
from reconciler.snapshots import parse_snapshot
from reconciler.source.errors import GitError
from reconciler.source.status_reader import StatusBranch, utc_iso
from reconciler.status.basis import Basis
from reconciler.status.details import attention_section, details, pools_section
from reconciler.status.page import render
from reconciler.status.quota_view import quota_rows, quota_section
from reconciler.status.view import (
    PLURAL_OF,
    SHOWN_KINDS,
    ResourceRow,
    load_yaml,
    recorded_revision,
    row_of,
    rows,
    table,
)

EXIT_OK = 0
EXIT_ERROR = 2


class _CommandError(Exception):
    pass


def _parse_resource(resource: str) -> tuple[str, str | None, str]:
    """(namespace, kind or None, name) of ``NAMESPACE/NAME`` or ``NAMESPACE/KIND/NAME`` (the kind as
    ``Compute`` or its plural ``computes``, any case)."""
    parts = resource.split("/")
    if len(parts) == 2 and all(parts):
        return parts[0], None, parts[1]
    if len(parts) == 3 and all(parts):
        wanted = parts[1].lower()
        for plural, kind in SHOWN_KINDS.items():
            if wanted in (plural, kind.lower()):
                return parts[0], kind, parts[2]
        raise _CommandError(f"unknown kind {parts[1]!r} (one of {', '.join(SHOWN_KINDS.values())})")
    raise _CommandError(f"expected NAMESPACE/NAME or NAMESPACE/KIND/NAME, got {resource!r}")


def _matches(found: list[ResourceRow], resource: str) -> list[ResourceRow]:
    namespace, kind, name = _parse_resource(resource)
    return [
        row
        for row in found
        if row.namespace == namespace and row.name == name and (kind is None or row.kind == kind)
    ]


def _select(found: list[ResourceRow], resource: str) -> ResourceRow:
    matches = _matches(found, resource)
    if not matches:
        raise _CommandError(f"no status for {resource} on the status branch")
    if len(matches) > 1:
        kinds = ", ".join(f"{row.namespace}/{row.kind}/{row.name}" for row in matches)
        raise _CommandError(f"{resource} names several resources; name one of: {kinds}")
    return matches[0]


def _gone(branch: StatusBranch, resource: str) -> ResourceRow:
    """A resource whose status file is gone at the tip: its last recorded row, phase ``Deleted``."""
    namespace, kind, name = _parse_resource(resource)
    kinds = [kind] if kind is not None else list(SHOWN_KINDS.values())
    candidates = []
    for k in kinds:
        path = f"{namespace}/{PLURAL_OF[k]}/{name}.yaml"
        commits = branch.history(path)
        if commits:
            candidates.append((path, commits))
    if not candidates:
        raise _CommandError(f"no status for {resource} on the status branch, now or in its history")
    if len(candidates) > 1:
        named = ", ".join(f"{namespace}/{SHOWN_KINDS[p.split('/')[1]]}/{name}" for p, _ in candidates)
        raise _CommandError(f"{resource} named several resources; name one of: {named}")
    path, commits = candidates[0]
    then = None
    for commit in commits:
        data = branch.read(path, commit.sha)
        if data is not None:
            then = row_of(path, data)
            break
    return ResourceRow(
        kind=SHOWN_KINDS[path.split("/")[1]],
        namespace=namespace,
        name=name,
        phase="Deleted",
        reason=None,
        message=f"its status file was removed by status commit {commits[0].sha[:12]}",
        cluster=then.cluster if then is not None else None,
        since=commits[0].time,
        path=path,
    )


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


def _write_page(out: Path, found: list[ResourceRow], files: Mapping[str, bytes], basis: Basis) -> None:
    made = utc_iso(int(time.time()))
    page = render(found, _machines(files), revision=basis.revision, mig=_mig(files), basis=basis, made=made)
    try:
        out.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise _CommandError(f"cannot write {out}: {exc.strerror or exc}") from None
    print(f"wrote {out} ({len(found)} resources; {basis.header()})", file=sys.stderr)


def _show(branch: StatusBranch, resource: str | None, history: bool, fmt: str, html_out: Path | None) -> int:
    if branch.ref is None:
        raise _CommandError(f"no status branch {branch.branch!r} in the repository (has a pass run yet?)")
    files = branch.record()  # a sharded branch's shards/*.yaml read as one record
    found = rows(files)
    revision = recorded_revision(files)
    if revision is None:
        tip_commits = branch.history(".")
        revision = tip_commits[0].trailers.get("Source-Revision") if tip_commits else None
    basis = branch.basis(revision, "none")
    if html_out is not None:
        _write_page(html_out, found, files, basis)
        if resource is None and not history:
            return EXIT_OK
    every = list(found)
    if history and resource is None:
        raise _CommandError("--history needs NAMESPACE/NAME")
    if resource is not None:
        matches = _matches(found, resource)
        if history:
            row = _select(found, resource) if matches else _gone(branch, resource)
            entries = _history(branch, row)
            if fmt == "json":
                doc = {"basis": basis.to_json(), "resource": row.to_json(), "history": entries}
                print(json.dumps(doc, indent=2))
            else:
                print(basis.header() + "\n\n" + _history_text(row, entries))
            return EXIT_OK
        if not matches:
            gone = _gone(branch, resource)
            raise _CommandError(f"{resource} has no status any more: {gone.message}; see --history")
        found = matches
    if fmt == "json":
        listed: dict[str, Any] = {"revision": revision, "basis": basis.to_json()}
        listed["resources"] = [row.to_json() for row in found]
        listed["quotas"] = quota_rows(files)
        print(json.dumps(listed, indent=2))
    elif resource is not None:
        print(basis.header() + "\n")
        print(table(found))
        names = {m.uid: m.name for m in _machines(files)}
        for row in found:
            print("\n" + "\n".join(details(row, every, names)))
    else:
        sections = (
            basis.header(),
            table(found),
            pools_section(found),
            quota_section(quota_rows(files)),
            attention_section(found),
        )
        print("\n\n".join(part for part in sections if part))
    return EXIT_OK


def run(
    repo: str,
    status_branch: str,
    resource: str | None,
    history: bool,
    fmt: str,
    html_out: Path | None,
    fetch: bool = True,
) -> int:
    """``fetch=False`` (``--no-fetch``) reads a clone's copy of the status branch as it is; the header
    says so."""
    try:
        with StatusBranch(repo, status_branch, fetch=fetch) as branch:
            return _show(branch, resource, history, fmt, html_out)
    except (GitError, _CommandError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
