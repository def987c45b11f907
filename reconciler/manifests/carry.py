"""What a revision that cannot be read whole still says about the resources it hides (pure).

Invalid is not absent: a resource whose document stops parsing is reported invalid and keeps what it
holds; it is never taken for a removal.
"""

from __future__ import annotations

from reconciler.model.desired import DesiredState
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
