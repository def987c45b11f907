"""What a revision that cannot be read whole still says about the resources it hides (pure).

Invalid is not absent: a resource whose document stops parsing is reported invalid and keeps what it
holds; it is never taken for a removal.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from reconciler.model.desired import DesiredState, Identity
from reconciler.model.diagnostics import Diagnostic, Severity


def _unreadable(diag: Diagnostic) -> bool:
    """An error that names no resource: a file or document that could not be identified."""
    return diag.severity is Severity.ERROR and diag.kind is None and diag.name is None


def has_unreadable(state: DesiredState) -> bool:
    """Whether some document of the revision could not even be identified (kind and name unknown)."""
    return any(_unreadable(d) for d in state.diagnostics)


def carry_unreadable(previous: DesiredState | None, current: DesiredState) -> DesiredState:
    """Resources last seen in a file that no longer parses are Invalid, not absent.

    A YAML syntax error hides which resources a file holds. The previous revision's desired state says
    which ones were there; they are marked invalid (so their clusters are kept and their status says
    Invalid) instead of looking deleted. ``current`` is updated in place and returned.
    """
    if previous is None:
        return current
    broken: dict[str, list[Diagnostic]] = {}
    for diag in current.diagnostics:
        if _unreadable(diag):
            broken.setdefault(diag.file, []).append(diag)
    if not broken:
        return current
    last_file = {identity: loaded.source.file for identity, loaded in previous.resources.items()}
    for identity, diags in previous.invalid.items():
        if diags:
            last_file[identity] = diags[0].file
    for identity, file in last_file.items():
        problems = broken.get(file)
        if problems and identity not in current.resources and identity not in current.invalid:
            current.invalid[identity] = list(problems)
    return current


_WORKLOAD_KINDS = frozenset({"AIWorkload", "MLPlatform"})


def _namespaces(state: DesiredState) -> set[str]:
    """Namespaces that exist in a revision: those with a Project document (valid or not)."""
    return {ns for kind, ns, _ in [*state.resources, *state.invalid] if kind == "Project"}


def carry_held(
    state: DesiredState, clusters: Iterable[Identity], admitted: Iterable[Identity]
) -> DesiredState:
    """Resources that hold something and are absent from ``state`` are Invalid, not absent, when the
    revision does not say they were removed.

    ``clusters``: (kind, namespace, name) of platforms and pools that have a cluster; ``admitted``: those
    of workloads that hold GPUs in a pool (the status branch's admissions). One of them is carried as
    invalid, with what hides it as its error, when

    - a document of its kind and name now sits in a namespace that does not exist (no Project): a
      namespace typo is an invalid document, never the removal of the old one; or
    - it is a workload and the revision is incomplete (some document could not be read or identified):
      it may be that document.

    A new state is returned; ``state`` is not changed.
    """
    existing = _namespaces(state)
    moved: dict[tuple[str, str], tuple[Identity, list[Diagnostic]]] = {}
    for identity, problems in sorted(state.invalid.items()):
        if identity[1] not in existing:
            moved.setdefault((identity[0], identity[2]), (identity, problems))
    unreadable = [d for d in state.diagnostics if _unreadable(d)]
    workloads = set(admitted)
    carried: dict[Identity, list[Diagnostic]] = {}
    held = {*clusters, *workloads}
    absent = [i for i in held if i not in state.resources and i not in state.invalid]
    for identity in sorted(absent):  # (what is present is most of it: not sorted)
        kind, ns, name = identity
        found = moved.get((kind, name))
        if found is not None:
            (_, to, _), problems = found
            where = problems[0].file if problems else ""
            message = (
                f"{kind} {ns}/{name} moved to namespace {to}, which does not exist (no Project there); "
                "it is kept as it is until the document is fixed"
            )
            carried[identity] = [Diagnostic(where, 0, 0, message, kind=kind, namespace=ns, name=name)]
        elif not state.complete and identity in workloads and kind in _WORKLOAD_KINDS:
            where = unreadable[0].file if unreadable else ""
            message = (
                f"{kind} {ns}/{name} is not in this revision, and some documents of it could not be read: "
                "it is kept as it is until every document can be read"
            )
            carried[identity] = [Diagnostic(where, 0, 0, message, kind=kind, namespace=ns, name=name)]
    if not carried:
        return state
    return replace(state, invalid={**state.invalid, **carried})
