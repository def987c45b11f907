"""References between the documents of a revision: which documents a reference may point at, and the
one rule for what a broken reference says (docs/validation.md, "References").

A reference is checked against :class:`DocIndex`, the revision's documents by identity split into the
valid ones and the ones that failed. A target that is *missing* is a root cause
(``ReferenceNotFound``); a target that is *invalid* is a cascade (:data:`REFERENCE_INVALID`, sorted
after every root cause), and the referring document is kept as it is until the target is fixed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

from reconciler.manifests.schema import PathElem, Problem, field_path
from reconciler.model.conditions import Reason
from reconciler.model.diagnostics import REFERENCE_INVALID
from reconciler.model.resources import Project, Resource
from reconciler.resolve import profile_name

if TYPE_CHECKING:  # the record module imports the rule modules that import this one
    from reconciler.manifests.record import Facts

MISSING, INVALID, VALID = "missing", "invalid", "valid"

_R = TypeVar("_R", bound=Resource)


class PoolDoc(Protocol):
    """What the cross-document rules need of one loaded document (the loader's ``Record`` satisfies it).

    ``resource`` is there for the kinds other documents refer to (pools, profiles, policies, Projects);
    of platforms and workloads the rules read ``facts`` only.
    """

    kind: str | None
    namespace: str | None
    name: str | None
    schema_ok: bool
    resource: Resource | None
    facts: Facts | None
    problems: list[Problem]
    warnings: list[Problem]

    @property
    def where(self) -> str: ...


class DocIndex:
    """The documents of a revision by ``(kind, namespace, name)``: the valid ones (schema and own rules
    passed, no problem so far) and the ones that failed; each namespace's valid Project (the first by
    name when there are several)."""

    def __init__(self, docs: Sequence[PoolDoc]) -> None:
        self.valid: dict[tuple[str, str, str], PoolDoc] = {}
        self.failed: set[tuple[str, str, str]] = set()
        self.project_namespaces: set[str] = set()
        self._projects: dict[str, Project] = {}
        for doc in docs:
            if doc.kind is None or doc.namespace is None or doc.name is None:
                continue
            ident = (doc.kind, doc.namespace, doc.name)
            if doc.kind == "Project":
                self.project_namespaces.add(doc.namespace)
            if doc.problems or not doc.schema_ok:
                self.failed.add(ident)
            else:
                self.valid.setdefault(ident, doc)
        for ident in sorted(i for i in self.valid if i[0] == "Project"):
            project = self.valid[ident].resource
            if isinstance(project, Project):
                self._projects.setdefault(ident[1], project)

    def status(self, kind: str, ns: str, name: str) -> str:
        """:data:`VALID`, :data:`INVALID` or :data:`MISSING`."""
        if (kind, ns, name) in self.valid:
            return VALID
        return INVALID if (kind, ns, name) in self.failed else MISSING

    def resource(self, kind: str, ns: str, name: str) -> Resource | None:
        doc = self.valid.get((kind, ns, name))
        return doc.resource if doc is not None else None

    def typed(self, cls: type[_R], ns: str, name: str) -> _R | None:
        """The valid document of kind ``cls.__name__`` as that model, or None."""
        found = self.resource(cls.__name__, ns, name)
        return found if isinstance(found, cls) else None

    def project(self, namespace: str) -> Project | None:
        """The namespace's valid Project (the first by name when there are several)."""
        return self._projects.get(namespace)


def need(
    problems: list[Problem],
    index: DocIndex,
    path: tuple[PathElem, ...],
    kind: str,
    ns: str,
    name: str,
    *,
    subject: str = "resource",
    via: str | None = None,
) -> None:
    """Add the problem of ``path``'s reference to ``kind`` ``ns/name`` when its target is missing or
    invalid. ``subject`` names the referring document in the cascade's advice ("this platform is kept
    as it is"); ``via`` says a reference came from a fallback (``spec.computeProfileRef (via)``)."""
    problem = reference_problem(index.status(kind, ns, name), path, kind, ns, name, subject=subject, via=via)
    if problem is not None:
        problems.append(problem)


def reference_problem(
    status: str,
    path: tuple[PathElem, ...],
    kind: str,
    ns: str,
    name: str,
    *,
    subject: str = "resource",
    via: str | None = None,
) -> Problem | None:
    """What a reference to a target in ``status`` says (None when the target is valid)."""
    where = f"spec.computeProfileRef ({via})" if via else field_path(path)
    if status == MISSING:
        message = f"ReferenceNotFound: {where}: {kind} '{name}' not found in namespace {ns}"
        return Problem(path, message, reason=Reason.REFERENCE_NOT_FOUND)
    if status == INVALID:
        message = (
            f"{where}: {kind} {ns}/{name} is invalid (see its errors); this {subject} is kept as it is until "
            "it is fixed"
        )
        return Problem(path, message, reason=REFERENCE_INVALID)
    return None


def compute_profile_problems(own: str | None, ns: str, index: DocIndex, *, subject: str) -> list[Problem]:
    """The ComputeProfile reference of a platform or pool: its own ``spec.computeProfileRef.name``, or
    else the fallback of its namespace's Project (which must exist, be valid and name a valid profile)."""
    problems: list[Problem] = []
    if own:
        path: tuple[PathElem, ...] = ("spec", "computeProfileRef", "name")
        need(problems, index, path, "ComputeProfile", ns, own, subject=subject)
    elif ns not in index.project_namespaces:
        message = (
            f"ReferenceNotFound: spec.computeProfileRef: not set, and namespace {ns} has no Project whose "
            "spec.computeProfileRef could be used; set spec.computeProfileRef.name"
        )
        problems.append(Problem(("spec",), message, reason=Reason.REFERENCE_NOT_FOUND))
    elif (project := index.project(ns)) is None:
        message = (
            f"spec.computeProfileRef: not set, and the Project of namespace {ns} is invalid; fix the Project "
            f"(this {subject} is kept as it is until then)"
        )
        problems.append(Problem(("spec",), message, reason=REFERENCE_INVALID))
    elif (name := profile_name(None, project)) is not None:
        need(problems, index, ("spec",), "ComputeProfile", ns, name, subject=subject, via="Project fallback")
    return problems
