"""The desired state: every valid resource of one revision, plus what was wrong with the rest."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from reconciler.model.bundle import ProfileBundle
from reconciler.model.diagnostics import Diagnostic, Severity
from reconciler.model.environment import Environment
from reconciler.model.pools import WorkloadRequest, workload_request
from reconciler.model.resources import (
    AIWorkload,
    Compute,
    ComputePool,
    ComputeProfile,
    MLPlatform,
    Project,
    Resource,
    Settings,
    WorkloadProfile,
)

# (kind, namespace, name)
Identity = tuple[str, str, str]
# (namespace, name) of an MLPlatform
PlatformKey = tuple[str, str]

R = TypeVar(
    "R",
    Compute,
    ComputeProfile,
    MLPlatform,
    Project,
    Settings,
    WorkloadProfile,
    ComputePool,
    AIWorkload,
    ProfileBundle,
    Environment,
)


@dataclass(frozen=True, slots=True)
class SourceRef:
    """Where a document starts: file path relative to the repository root, 1-based line and column."""

    file: str
    line: int
    column: int


@dataclass(frozen=True, slots=True)
class Loaded:
    resource: Resource
    source: SourceRef
    # A tenant's admission request as its document's check read it (``pools.workload_request``), or None.
    request: WorkloadRequest | None = None


@dataclass
class DesiredState:
    """The outcome of loading and validating one revision of the config repository.

    ``resources`` holds only documents that passed every layer of validation. ``invalid`` holds the
    identities of documents that were recognisable (kind, namespace and name could be read) but failed
    validation, so that their clusters are kept and reported ``Invalid`` rather than pruned.
    ``complete`` is False when some document could not even be identified (a YAML syntax error, a
    document that is not a mapping, an unreadable file): then nothing may be pruned in this pass,
    because the unidentified document might be the platform whose cluster would be deleted.
    """

    revision: str | None
    resources: dict[Identity, Loaded] = field(default_factory=dict)
    invalid: dict[Identity, list[Diagnostic]] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    complete: bool = True
    # (kind -> identities in order), rebuilt when ``resources`` changes size: resources are added or
    # removed while loading, never swapped one for one afterwards. Not part of equality.
    _by_kind: dict[str, list[Identity]] = field(default_factory=dict, init=False, repr=False, compare=False)
    # namespace -> its Project (the first by name), rebuilt with ``_by_kind``.
    _projects: dict[str, Project] = field(default_factory=dict, init=False, repr=False, compare=False)
    _indexed_size: int = field(default=-1, init=False, repr=False, compare=False)
    # class -> its valid resources by (namespace, name), in order (:meth:`by_key`), made on first use,
    # rebuilt with ``_by_kind``: a pass asks for the same kinds many times over.
    _by_key: dict[type, dict[tuple[str, str], Resource]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    @property
    def has_errors(self) -> bool:
        return any(d.severity is Severity.ERROR for d in self.diagnostics)

    def get(self, cls: type[R], namespace: str, name: str) -> R | None:
        loaded = self.resources.get((cls.__name__, namespace, name))
        if loaded is None or not isinstance(loaded.resource, cls):
            return None
        return loaded.resource

    def request_of(self, tenant: AIWorkload | MLPlatform) -> WorkloadRequest:
        """``pools.workload_request(tenant)``: the one its document's check read when ``tenant`` is the
        resource loaded (thousands of tenants: not read twice)."""
        loaded = self.resources.get((type(tenant).__name__, tenant.metadata.namespace, tenant.metadata.name))
        if loaded is not None and loaded.resource is tenant and loaded.request is not None:
            return loaded.request
        return workload_request(tenant)

    def of_kind(self, cls: type[R]) -> Iterator[R]:
        """Valid resources of one kind, in (namespace, name) order."""
        return iter(self.by_key(cls).values())

    def by_key(self, cls: type[R]) -> Mapping[tuple[str, str], R]:
        """Valid resources of one kind by (namespace, name), in that order (the state's own: not to be
        changed)."""
        self._index()
        found = self._by_key.get(cls)
        if found is None:
            found = self._by_key[cls] = {}
            for identity in self._by_kind.get(cls.__name__, []):
                resource = self.resources[identity].resource
                if isinstance(resource, cls):
                    found[identity[1], identity[2]] = resource
        return found  # type: ignore[return-value]  # each one is a ``cls``

    def _index(self) -> None:
        if self._indexed_size == len(self.resources):
            return
        self._by_kind, self._by_key = {}, {}
        for identity in sorted(self.resources):
            self._by_kind.setdefault(identity[0], []).append(identity)
        self._projects = {}
        for identity in self._by_kind.get("Project", []):
            project = self.resources[identity].resource
            if isinstance(project, Project):
                self._projects.setdefault(identity[1], project)
        self._indexed_size = len(self.resources)

    def platforms(self) -> list[MLPlatform]:
        return list(self.of_kind(MLPlatform))

    def invalid_platforms(self) -> list[PlatformKey]:
        return sorted((ns, name) for (kind, ns, name) in self.invalid if kind == "MLPlatform")

    # -- reference resolution (docs/validation.md): always inside the resource's own namespace --

    def project(self, namespace: str) -> Project | None:
        """The namespace's Project (the first by name if there are several)."""
        self._index()
        return self._projects.get(namespace)
