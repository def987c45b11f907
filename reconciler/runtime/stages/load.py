"""The load stage: one revision's manifests -> the desired state (validated, carried, shard-filtered).

Invalid is not absent: resources last seen in a file that no longer parses are carried as Invalid (the
previous revision's desired state says which they were; after a restart, the revision the status branch
last reported). A skipped manifest may hold a resource: such a revision is incomplete and prunes nothing.
A shard validates the whole repository but keeps (and logs) only its namespaces.
"""

from __future__ import annotations

from reconciler.logging import get_logger, pass_context
from reconciler.manifests import build_desired, carry
from reconciler.model.desired import DesiredState
from reconciler.model.diagnostics import Severity
from reconciler.plan import select_namespaces
from reconciler.resolve import NamespaceSelector
from reconciler.runtime.ports import Source
from reconciler.source import GitError
from reconciler.status.records import Records

log = get_logger(component="controller")


def load(
    source: Source,
    head: str | None,
    *,
    previous: DesiredState | None,
    records: Records,
    history: bool,
    namespaces: NamespaceSelector,
    quiet: bool = False,
) -> DesiredState:
    """The desired state of ``head``; ``previous``: the last revision's (None after a start). ``history``:
    whether earlier revisions can be read (git), to carry a broken file over a restart. ``head`` None: a
    directory outside git (no revision). ``quiet``: the diagnostics are not logged (``plan`` prints
    them in its output)."""
    loaded = build_desired(source.read_parsed(head or ""), head)
    loaded.diagnostics.extend(source.diagnostics)
    if not source.complete:  # a skipped manifest may hold a resource: prune nothing
        loaded.complete = False
    if previous is None and history and carry.has_unreadable(loaded):
        previous = last_reported(source, records, head)
    desired = select_namespaces(carry.carry_unreadable(previous, loaded), namespaces)
    if quiet:
        return desired
    with pass_context(head):
        for diag in desired.diagnostics:  # once per revision, not on every resync
            log.warning(
                "invalid manifest" if diag.severity is Severity.ERROR else "manifest warning",
                file=diag.file,
                line=diag.line,
                kind=diag.kind,
                namespace=diag.namespace,
                name=diag.name,
                message=diag.message,
            )
    return desired


def last_reported(source: Source, records: Records, head: str | None) -> DesiredState | None:
    """After a restart: the desired state of the revision the status branch last reported, so that a
    file which stopped parsing meanwhile still reads as Invalid (not absent). None if unknown."""
    revisions = {
        str(doc["status"]["observedRevision"])
        for doc in records.docs.values()
        if isinstance(doc.get("status"), dict) and doc["status"].get("observedRevision")
    }
    # Files keep the revision their inputs last changed at, so several differ: the revision of the last
    # pass that committed (reconciler.yaml) comes first, as the newest.
    recorded = records.recorded.revision
    ordered = ([recorded] if recorded else []) + sorted(revisions)
    for revision in dict.fromkeys(r for r in ordered if r != head):
        try:
            return build_desired(source.read_parsed(revision), revision)
        except GitError:
            continue  # not in the cache (e.g. the branch was rewritten): nothing to carry over
    return None
