"""``reconciler plan``: what one pass would do, without doing it (docs/planning.md).

This module only reads the arguments and renders: the pass is ``run``'s own, made by
:func:`reconciler.runtime.preview.preview` with read-only ports (the load stage with its carry-over,
the status branch's records, the plan stage), observing through one of ``--inventory FILE`` (a
snapshot, offline), ``--palette URL`` (online, API key from ``PALETTE_API_KEY``) or ``--from-status``
(the inventory of each target last observed by ``run``; no Palette, no key).

The desired state comes from ``--repo``: a directory is read as it is on disk (the work tree of a pull
request); with ``--rev``, or for a bare repository or a URL, the revision is read from git objects;
``--from-status`` without ``--rev`` plans the config branch's head. The records (admissions, MIG
layouts, pool modes and sizes, scaling records, what was last reported) come from the status branch,
fetched first, whenever the repository has one, in every mode; ``--no-status`` plans a first start.
Every output names its basis (:class:`reconciler.status.basis.Basis`). ``--changes-only`` filters the
plan's JSON before any format renders it, keeping what a guard holds. Exit codes: 0 every platform
valid and placeable, 1 something rejected, invalid or held back (a blocked deletion), or some manifest
could not be read at all; 2 an error; 3 ``--expect-status`` names another status tip (a stale plan).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, nullcontext
from dataclasses import dataclass
from pathlib import Path

from reconciler import plan_report as report
from reconciler.deletions import approved_deletions
from reconciler.inventory import ExcludedHost, Inventory, Machine, names_ascending
from reconciler.plan import Observation, free_capacity
from reconciler.process_exit import keep_until_exit, without_collector
from reconciler.resolve import Target
from reconciler.runtime.preview import Preview, PreviewOptions, ReadOnlyObserver, load_revision, preview
from reconciler.runtime.preview_observe import (
    ObserveError,
    PaletteObserver,
    RecordedObserver,
    SnapshotObserver,
    read_snapshot_file,
)
from reconciler.runtime.preview_status import (
    DEFAULT_STATUS_BRANCH,
    InputError,
    StatusRead,
    open_status,
    planned_revision,
    read_status,
)
from reconciler.scaling.stage import NoSamples, SampleSource
from reconciler.status.basis import Basis, ObservationKind, stale_message

EXIT_OK, EXIT_REJECTED, EXIT_ERROR, EXIT_STALE = 0, 1, 2, 3


class PlanError(Exception):
    """A problem that ends the command with exit code 2; its text never carries the API key."""


def _observer(inventory: Path | None, palette: str | None) -> ReadOnlyObserver:
    import os

    if inventory is not None:
        return SnapshotObserver(inventory, read_snapshot_file(inventory))
    if palette is not None:
        return PaletteObserver(palette, os.environ)
    from reconciler.runtime.observation_cache import ObservationCache
    from reconciler.source.documents import cache_root

    return RecordedObserver(cache=ObservationCache(cache_root() / "observations"))


def _samples(prometheus: str | None) -> AbstractContextManager[SampleSource]:
    if prometheus is None:
        return nullcontext(NoSamples())
    from reconciler.prometheus.stage import ScalingStage  # the HTTP stack only when a plan asks it

    return ScalingStage(prometheus)


def whole_inventory(observed: Mapping[Target, Observation]) -> Inventory:
    """Every machine any target sees, once (for the free-capacity table)."""
    if len(observed) == 1:  # one target (a snapshot, most plans): its hosts are already that
        one = next(iter(observed.values())).inventory
        # Discovery keeps one host per uid, sorted by name then uid: checked, as the merge below would
        # dedupe and sort; excluded hosts (a few) are merged as below.
        if len({m.uid for m in one.machines}) == len(one.machines) and names_ascending(one.machines):
            excluded_by_uid = {h.uid: h for h in one.excluded}
            return Inventory(
                one.machines, tuple(sorted(excluded_by_uid.values(), key=lambda h: (h.name, h.uid)))
            )
    machines: dict[str, Machine] = {}
    excluded: dict[str, ExcludedHost] = {}
    for seen in observed.values():
        machines.update((m.uid, m) for m in seen.inventory.machines)
        excluded.update((h.uid, h) for h in seen.inventory.excluded)
    return Inventory(
        tuple(sorted(machines.values(), key=lambda m: (m.name, m.uid))),
        tuple(sorted(excluded.values(), key=lambda h: (h.name, h.uid))),
    )


def json_text(document: object, *, terminal: bool) -> str:
    """The plan as ``--format json`` prints it: indented for a person at a terminal, on one line when
    standard output is a pipe or a file (as ``gh api`` and HTTPie do). The same JSON value either
    way; the compact text is written by the C encoder, where ``indent`` takes the pure-Python one, several
    times slower on a large plan (bench/README.md)."""
    if terminal:
        return json.dumps(document, indent=2) + "\n"
    return json.dumps(document, separators=(",", ":")) + "\n"


def host_names(inventory: Inventory) -> dict[str, str]:
    """Host uid -> name for every host the plan may show (offered or excluded)."""
    names = {h.uid: h.name for h in inventory.excluded}
    names.update((m.uid, m.name) for m in inventory.machines)
    return names


def _files_options(
    repo: str, subtree: str | None, what_if: Sequence[Path]
) -> tuple[str, list[tuple[str, bytes]]]:
    """``--path`` normalised and the ``--what-if`` files read (``reconciler.source.overlay``)."""
    from reconciler.source.overlay import WhatIfError, read_what_if
    from reconciler.source.select import SelectionError, normalize_subtree

    try:
        path = normalize_subtree(subtree)
        checkout = Path(repo) if Path(repo).is_dir() else None
        return path, read_what_if(what_if, checkout, path)
    except (SelectionError, WhatIfError) as exc:
        raise PlanError(str(exc)) from None


def _usage(
    inventory: Path | None, palette: str | None, from_status: bool, branch: str | None, no_status: bool
) -> str | None:
    if (inventory is not None) + (palette is not None) + from_status != 1:
        return "give exactly one of --inventory FILE, --palette URL or --from-status"
    if branch is not None and not from_status:
        return "--branch only applies with --from-status"
    if no_status and from_status:
        return "--no-status cannot be combined with --from-status (it plans against the status branch)"
    return None


@dataclass(frozen=True)
class _Made:
    preview: Preview
    basis: Basis
    complete: bool


def _make(
    repo: str,
    rev: str | None,
    inventory: Path | None,
    palette: str | None,
    max_deletions: int,
    *,
    from_status: bool,
    status_branch: str,
    branch: str | None,
    prometheus: str | None,
    subtree: str | None,
    what_if: Sequence[Path],
    no_status: bool,
    fetch: bool,
    expect_status: str | None,
) -> _Made | int:
    """The preview of the revision and its basis (an exit code when ``--expect-status`` refuses it)."""
    path, extra = _files_options(repo, subtree, what_if)
    with ExitStack() as stack:
        status = None if no_status else open_status(repo, status_branch, fetch=fetch, required=from_status)
        if status is not None:
            stack.callback(status.close)
        read = StatusRead(read=False) if no_status else read_status(status)
        for problem in read.problems:  # planned as run plans them; said as run logs them
            print(f"warning: {problem}", file=sys.stderr)
        if from_status and read.commit is None:
            raise PlanError(
                f"no status branch {status_branch!r} in {repo}: the reconciler has not committed a pass yet"
            )
        revision = planned_revision(
            repo, rev, status, read, from_status=from_status, branch=branch, subtree=path, extra=extra
        )
        observer = _observer(inventory, palette)
        if isinstance(observer, RecordedObserver):
            observer.bind(read.records)
        kind: ObservationKind = observer.kind
        basis = Basis(revision.sha, read.commit, read.time, kind, fetched=read.fetched, records=read.read)
        if expect_status is not None and basis.stale(expect_status):
            print(f"error: {stale_message(basis, expect_status)}", file=sys.stderr)
            return EXIT_STALE
        desired = load_revision(revision, revision.sha, read.records, history=revision.history)
        with _samples(prometheus) as samples:
            options = PreviewOptions(
                max_deletions=max_deletions,
                approved_deletions=approved_deletions(revision.message),
                now=time.time(),
                samples=samples,
            )
            try:
                made = preview(desired, observer, read.records, options)
            except ObserveError as exc:
                raise PlanError(str(exc)) from None
        for warning in observer.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        checked = made.planned.records  # what the observation contradicted, repaired as run repairs it
        for repair in checked.problems[len(read.records.problems) :] if checked is not None else ():
            print(f"warning: {repair}", file=sys.stderr)
    return _Made(made, basis, desired.complete)


@without_collector(until_exit=True)
def run(
    repo: str,
    rev: str | None,
    inventory: Path | None,
    palette: str | None,
    max_deletions: int,
    fmt: str,
    *,
    from_status: bool = False,
    status_branch: str | None = None,
    branch: str | None = None,
    changes_only: bool = False,
    prometheus: str | None = None,
    subtree: str | None = None,
    what_if: Sequence[Path] = (),
    no_status: bool = False,
    fetch: bool = True,
    expect_status: str | None = None,
) -> int:
    """Plan one pass and print it (exit codes: see the module's docstring).

    ``subtree`` (``--path``) reads only that directory; ``what_if`` files are added to the revision.
    The cyclic collector is off meanwhile: one pass over data with few reference cycles, which it would
    only traverse as they are made (about 8% of the time at 100,000 hosts) to free some 250,000 objects
    of cyclic garbage early; the peak memory measured the same without it. A one-shot process leaves it
    off: it exits once the output is flushed, and a collection over the whole heap just before (about
    0.16 s at 100,000 hosts) would free nothing the exit does not."""
    problem = _usage(inventory, palette, from_status, branch, no_status)
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return EXIT_ERROR
    try:
        made = _make(
            repo,
            rev,
            inventory,
            palette,
            max_deletions,
            from_status=from_status,
            status_branch=status_branch or DEFAULT_STATUS_BRANCH,
            branch=branch,
            prometheus=prometheus,
            subtree=subtree,
            what_if=what_if,
            no_status=no_status,
            fetch=fetch,
            expect_status=expect_status,
        )
    except (PlanError, ObserveError, InputError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if isinstance(made, int):
        return made
    plan, basis = made.preview.plan, made.basis
    shown = plan.to_json()
    document = {"revision": shown.pop("revision"), "basis": basis.to_json(), **shown}
    if changes_only:
        document = report.changes_only(document)
    if fmt == "json":
        sys.stdout.write(json_text(document, terminal=sys.stdout.isatty()))
    else:
        machines = whole_inventory(made.preview.observed)
        free = [(c.kind, c.hosts, c.gpus) for c in free_capacity(plan, machines)]
        note = "Unchanged entries are left out; held ones stay." if changes_only else None
        render = report.render_markdown if fmt == "markdown" else report.render_text
        text = render(
            document, host_names(machines), note=note, free=free, changes=changes_only, basis=basis.line()
        )
        sys.stdout.write(text)
    keep_until_exit(made, plan, document)  # freed by the exit, not one by one (cli.main)
    # A document that could not even be identified (a YAML syntax error, say) may be a platform: then
    # not every platform is known to be valid, so the plan cannot say "all placeable" (exit 1). A
    # deletion the guard holds back fails the plan as a rejection does.
    held = report.held_deletions(document)
    return EXIT_OK if plan.placeable and made.complete and not held else EXIT_REJECTED
