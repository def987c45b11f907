"""From parsed files to a DesiredState: schema layer, per-resource rules, then cross-resource rules.

Every problem of every document is collected before anything is reported, so one run shows all errors
of a tree. Positions inside a document are looked up only for documents that have problems.
"""

from __future__ import annotations

import difflib
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from reconciler import resolve
from reconciler.manifests.locate import FileNodes
from reconciler.manifests.parse import Document, ParsedFile, parse_file
from reconciler.manifests.pool_rules import check_pool_document, check_pools
from reconciler.manifests.rules import check_document, named_references
from reconciler.manifests.schema import PathElem, Problem, did_you_mean, field_path, validate_document
from reconciler.model.conditions import Reason
from reconciler.model.desired import DesiredState, Identity, Loaded, SourceRef
from reconciler.model.diagnostics import UNKNOWN_GPU_FAMILY, Diagnostic, Severity
from reconciler.model.gpu import KNOWN_FAMILIES, canonical_family
from reconciler.model.resources import (
    KINDS,
    Compute,
    ComputeProfile,
    MLPlatform,
    Project,
    Resource,
)
from reconciler.profiles import profile_warnings

# Enough to fix a document by; a hostile one with 100,000 unknown keys must not cost 100,000 lookups.
MAX_PROBLEMS_PER_DOCUMENT = 50


@dataclass(eq=False)
class _Doc:
    file: ParsedFile
    doc: Document
    kind: str | None = None
    namespace: str | None = None
    name: str | None = None
    resource: Resource | None = None
    problems: list[Problem] = field(default_factory=list)
    # Not errors: the resource stays valid, but what it asks for will be refused later.
    warnings: list[Problem] = field(default_factory=list)
    # Certainly not one of our resources (another API group, or no apiVersion and no kind at all, like a
    # CI workflow): still reported, but it cannot hide a platform, so it does not block pruning.
    foreign: bool = False

    @property
    def identity(self) -> Identity | None:
        if self.kind is None or self.namespace is None or self.name is None:
            return None
        return (self.kind, self.namespace, self.name)

    @property
    def where(self) -> str:
        return f"{self.file.path}:{self.doc.line}"

    def label(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


_OUR_GROUPS = frozenset(api.split("/", 1)[0] for api, _model in KINDS.values())


def _identify(item: _Doc) -> None:
    """Read kind, namespace and name if they are there, then validate against the kind's model."""
    data: Any = item.doc.data
    if not isinstance(data, dict):
        what = "a list" if isinstance(data, list) else f"a {type(data).__name__} scalar"
        item.problems.append(
            Problem((), f"document is {what}; expected a mapping with apiVersion, kind, metadata and spec")
        )
        return
    kind, api = data.get("kind"), data.get("apiVersion")
    meta = data.get("metadata")
    if isinstance(meta, dict):
        name, namespace = meta.get("name"), meta.get("namespace")
        item.name = name if isinstance(name, str) and name else None
        item.namespace = namespace if isinstance(namespace, str) and namespace else None
    if not isinstance(kind, str) or kind not in KINDS:
        group = api.split("/", 1)[0] if isinstance(api, str) and "/" in api else None
        item.foreign = (kind is None and api is None) or (group is not None and group not in _OUR_GROUPS)
        known = ", ".join(f"{k} ({v[0]})" for k, v in sorted(KINDS.items()))
        if kind is None:
            message = f"kind: required field is missing; known kinds: {known}"
        else:
            close = did_you_mean(kind[:80], list(KINDS))
            shown = f"{repr(kind)[:80]} (apiVersion {str(api)[:80]!r})"
            message = f"kind: unknown kind {shown}{close}; known kinds: {known}"
        item.problems.append(Problem(("kind",), message))
        return
    item.kind = kind
    resource, problems = validate_document(kind, data)
    item.resource = resource
    item.problems.extend(problems)
    reported = {p.path for p in problems}
    item.problems.extend(p for p in check_document(kind, data) if p.path not in reported)
    item.problems.extend(p for p in check_pool_document(kind, data) if p.path not in reported)


def _ref_problem(path: tuple[PathElem, ...], kind: str, name: str, namespace: str) -> Problem:
    return Problem(
        path,
        f"ReferenceNotFound: {_dotted(path)}: {kind} '{name}' not found in namespace {namespace}",
        reason=Reason.REFERENCE_NOT_FOUND,
    )


def _dotted(path: tuple[PathElem, ...]) -> str:
    return ".".join(str(p) for p in path)


class _Index:
    """Documents by identity, split into the valid ones and the ones that failed."""

    def __init__(self, items: list[_Doc]) -> None:
        self.valid: dict[Identity, _Doc] = {}
        self.failed: set[Identity] = set()
        for item in items:
            ident = item.identity
            if ident is None:
                continue
            if item.problems or item.resource is None:
                self.failed.add(ident)
            else:
                self.valid[ident] = item
        self.project_namespaces = {ident[1] for ident in (*self.valid, *self.failed) if ident[0] == "Project"}
        self._projects: dict[str, Project] = {}
        for ident in sorted(i for i in self.valid if i[0] == "Project"):
            resource = self.valid[ident].resource
            if isinstance(resource, Project):
                self._projects.setdefault(ident[1], resource)

    def project(self, namespace: str) -> Project | None:
        """The namespace's valid Project (the first by name when there are several)."""
        return self._projects.get(namespace)

    def status(self, ident: Identity) -> str:
        if ident in self.valid:
            return "valid"
        return "invalid" if ident in self.failed else "missing"


def _check_duplicates(items: list[_Doc]) -> None:
    groups: dict[Identity, list[_Doc]] = defaultdict(list)
    for item in items:
        if item.identity is not None:
            groups[item.identity].append(item)
    for group in groups.values():
        if len(group) < 2:
            continue
        # At most three places each: a hostile file with thousands of copies must not make the work or
        # the messages grow with the square of their number.
        wheres = [o.where for o in group[:4]]
        for i, item in enumerate(group):
            places = [w for j, w in enumerate(wheres) if j != i][:3]
            more = len(group) - 1 - len(places)
            others = ", ".join(places) + (f" and {more} more" if more > 0 else "")
            item.problems.append(
                Problem(
                    ("metadata", "name"),
                    f"metadata.name: duplicate {item.label()}: also defined at {others}; "
                    "(kind, namespace, name) must be unique",
                )
            )


def _check_projects(items: list[_Doc]) -> None:
    """One Project per namespace: it is the namespace's fallback for references."""
    by_ns: dict[str, list[_Doc]] = defaultdict(list)
    for item in items:
        if isinstance(item.resource, Project) and not item.problems:
            by_ns[item.resource.metadata.namespace].append(item)
    for group in by_ns.values():
        group.sort(key=lambda d: d.name or "")
        first = group[0]
        for item in group[1:]:
            item.problems.append(
                Problem(
                    ("metadata", "name"),
                    f"metadata.name: namespace {item.namespace} already has Project '{first.name}' "
                    f"({first.where}); one Project per namespace",
                )
            )


def _check_references(items: list[_Doc]) -> None:
    """References resolve inside the namespace; platforms depending on invalid resources are invalid."""
    index = _Index(items)
    for item in items:
        res = item.resource
        if res is None or item.problems or isinstance(res, MLPlatform):
            continue
        ns = res.metadata.namespace
        refs: list[tuple[tuple[PathElem, ...], str, str]] = []
        if isinstance(res, Project):
            profile_name = res.spec.compute_profile_ref.name
            refs.append((("spec", "computeProfileRef", "name"), "ComputeProfile", profile_name))
            if res.spec.settings_ref is not None:
                refs.append((("spec", "settingsRef", "name"), "Settings", res.spec.settings_ref.name))
        elif isinstance(res, ComputeProfile | Compute) and res.spec.settings_ref is not None:
            refs.append((("spec", "settingsRef", "name"), "Settings", res.spec.settings_ref.name))
        for path, kind, name in refs:
            if index.status((kind, ns, name)) == "missing":
                item.problems.append(_ref_problem(path, kind, name, ns))
    index = _Index(items)
    for item in items:
        res = item.resource
        if isinstance(res, MLPlatform) and not item.problems:
            item.problems.extend(_platform_refs(res, index))
    for item in items:  # refused by the schema: its references are still reported in the same run
        if item.resource is None and item.kind is not None and item.namespace is not None:
            reported = {p.path for p in item.problems}
            for path, kind, name in named_references(item.kind, item.doc.data):
                if path not in reported and index.status((kind, item.namespace, name)) == "missing":
                    item.problems.append(_ref_problem(path, kind, name, item.namespace))


def _platform_refs(platform: MLPlatform, index: _Index) -> list[Problem]:
    ns = platform.metadata.namespace
    problems: list[Problem] = []
    ref = platform.spec.compute_profile_ref
    if ref is not None and ref.name:
        _need(problems, index, ("spec", "computeProfileRef", "name"), "ComputeProfile", ns, ref.name)
    else:
        project = index.project(ns)
        if ns not in index.project_namespaces:
            problems.append(
                Problem(
                    ("spec",),
                    f"ReferenceNotFound: spec.computeProfileRef: not set, and namespace {ns} has no Project "
                    "whose spec.computeProfileRef could be used; set spec.computeProfileRef.name",
                    reason=Reason.REFERENCE_NOT_FOUND,
                )
            )
        elif project is None:
            problems.append(
                Problem(
                    ("spec",),
                    f"spec.computeProfileRef: not set, and the Project of namespace {ns} is invalid; "
                    "fix the Project (this platform is kept as it is until then)",
                )
            )
        else:
            name = resolve.compute_profile_name(platform, project)
            if name is not None:
                _need(problems, index, ("spec",), "ComputeProfile", ns, name, via="Project fallback")
    if platform.spec.workload_profile_ref is not None:
        name = platform.spec.workload_profile_ref.name
        _need(problems, index, ("spec", "workloadProfileRef", "name"), "WorkloadProfile", ns, name)
    return problems


def _need(
    problems: list[Problem],
    index: _Index,
    path: tuple[PathElem, ...],
    kind: str,
    ns: str,
    name: str,
    via: str | None = None,
) -> None:
    where = f"spec.computeProfileRef ({via})" if via else _dotted(path)
    status = index.status((kind, ns, name))
    if status == "missing":
        message = f"ReferenceNotFound: {where}: {kind} '{name}' not found in namespace {ns}"
        problems.append(Problem(path, message, reason=Reason.REFERENCE_NOT_FOUND))
    elif status == "invalid":
        problems.append(
            Problem(
                path,
                f"{where}: {kind} {ns}/{name} is invalid (see its errors); this platform is kept as it is "
                "until it is fixed",
            )
        )


def _raw_vip(item: _Doc) -> str | None:
    """The own ``spec.edge.vip`` of a platform document that failed validation, if it states one."""
    data = item.doc.data
    spec = data.get("spec") if isinstance(data, dict) else None
    edge = spec.get("edge") if isinstance(spec, dict) else None
    vip = edge.get("vip") if isinstance(edge, dict) else None
    return vip if isinstance(vip, str) and vip else None


def _check_vips(items: list[_Doc], index: _Index) -> None:
    """Two clusters never share a VIP: the first platform (namespace, name order) keeps it.

    Invalid platforms keep their clusters, so a VIP they state still counts as taken.
    """
    owners: dict[str, _Doc] = {}
    platforms = [i for i in items if i.kind == "MLPlatform" and i.identity is not None]
    platforms.sort(key=lambda d: (d.namespace or "", d.name or ""))
    for item in platforms:
        platform = item.resource
        if isinstance(platform, MLPlatform) and platform.spec.mode == "shared":
            continue  # a tenant of a pool: no cluster of its own
        if item.problems or not isinstance(platform, MLPlatform):
            vip = _raw_vip(item)
            if vip is not None:
                owners.setdefault(vip, item)
            continue
        found = resolve.vip(platform, _profile_of(platform, index))
        if found is None:
            continue
        vip = found.address
        path: tuple[PathElem, ...] = ("spec", "edge", "vip")
        if not found.from_platform:
            has_ref = platform.spec.compute_profile_ref is not None
            path = ("spec", "computeProfileRef") if has_ref else ("spec",)
        first = owners.setdefault(vip, item)
        if first is item:
            continue
        source = "spec.edge.vip" if found.from_platform else "the ComputeProfile's spec.edge.vip"
        state = " (invalid, but its cluster is kept)" if first.problems else ""
        item.problems.append(
            Problem(
                path,
                f"{field_path(path)}: VIP {vip} (from {source}) is already used by MLPlatform "
                f"{first.namespace}/{first.name}{state} ({first.where}); two clusters never share a VIP, "
                "give this platform its own spec.edge.vip",
            )
        )


def _profile_of(platform: MLPlatform, index: _Index) -> ComputeProfile | None:
    ns = platform.metadata.namespace
    name = resolve.compute_profile_name(platform, index.project(ns))
    found = index.valid.get(("ComputeProfile", ns, name)) if name else None
    return found.resource if found is not None and isinstance(found.resource, ComputeProfile) else None


def _check_admission(items: list[_Doc], index: _Index) -> None:
    """Warn about valid platforms that allocation will refuse whatever the inventory holds.

    A request above the ComputeProfile's ``gpuLimits`` is rejected with GPULimitExceeded
    (docs/allocation.md). Saying so at validation time lets a pull request catch it; the platform itself stays
    valid (a rejection keeps an existing cluster). A shared-mode platform is a tenant of its pool: the
    pool rules (``pool_rules``) warn about what admission will refuse.
    """
    for item in items:
        platform = item.resource
        if item.problems or not isinstance(platform, MLPlatform):
            continue
        for i, request in enumerate(platform.spec.gpus):
            family = canonical_family(request.family)
            if family not in KNOWN_FAMILIES:
                item.warnings.append(
                    Problem(
                        ("spec", "gpus", i, "family"),
                        f"spec.gpus[{i}].family: {family} is not a known GPU family{_did_you_mean(family)}; "
                        f"only hosts tagged gpu-family: {family} can serve it",
                        reason=UNKNOWN_GPU_FAMILY,
                    )
                )
        if platform.spec.mode == "shared":
            continue  # its limits are its pool's: reconciler.manifests.pool_rules warns about them
        profile = _profile_of(platform, index)
        if profile is None:
            continue
        for breach in resolve.limit_breaches(platform, profile):
            i = breach.index
            item.warnings.append(
                Problem(
                    ("spec", "gpus", i, "count"),
                    f"spec.gpus[{i}].count: {breach.count} {breach.family} GPUs exceed the limit of "
                    f"{breach.limit} in ComputeProfile {profile.metadata.namespace}/{profile.metadata.name}; "
                    "this platform will be rejected with GPULimitExceeded",
                    reason=Reason.GPU_LIMIT_EXCEEDED,
                )
            )


def _did_you_mean(family: str) -> str:
    close = difflib.get_close_matches(family, sorted(KNOWN_FAMILIES), n=1, cutoff=0.75)
    return f" (did you mean {close[0]}?)" if close else ""


def build_desired(files: Iterable[ParsedFile], revision: str | None) -> DesiredState:
    """Validate every document of every file and return the desired state of one revision."""
    state = DesiredState(revision=revision)
    items: list[_Doc] = []
    diagnostics: list[Diagnostic] = []
    for parsed in files:
        diagnostics.extend(parsed.diagnostics)
        if not parsed.complete:
            state.complete = False
        for doc in parsed.documents:
            item = _Doc(file=parsed, doc=doc)
            _identify(item)
            item.problems.extend(doc.problems)
            items.append(item)
    _check_duplicates(items)
    _check_projects(items)
    _check_references(items)
    check_pools(items)
    index = _Index(items)
    _check_vips(items, index)
    _check_admission(items, index)

    nodes: dict[str, FileNodes] = {}
    for item in items:
        ident = item.identity
        if item.warnings:
            found = nodes.get(item.file.path)
            if found is None:
                found = nodes[item.file.path] = FileNodes(item.file.text)
            for warning in item.warnings:
                diagnostics.append(replace(_diagnostic(item, warning, found), severity=Severity.WARNING))
        if not item.problems and item.resource is not None and ident is not None:
            source = SourceRef(item.file.path, item.doc.line, item.doc.column)
            state.resources[ident] = Loaded(resource=item.resource, source=source)
            continue
        if ident is None and not item.foreign:
            state.complete = False
        found = nodes.get(item.file.path)
        if found is None:
            found = nodes[item.file.path] = FileNodes(item.file.text)
        problems = item.problems
        if len(problems) > MAX_PROBLEMS_PER_DOCUMENT:
            more = len(problems) - MAX_PROBLEMS_PER_DOCUMENT
            problems = [
                *problems[:MAX_PROBLEMS_PER_DOCUMENT],
                Problem((), f"{more} more errors in this document are not shown; fix the ones above first"),
            ]
        diags = [_diagnostic(item, problem, found) for problem in problems]
        diagnostics.extend(diags)
        if ident is not None:
            state.invalid.setdefault(ident, []).extend(diags)
    diagnostics.extend(profile_warnings(state))  # plan and run will reject these (docs/validation.md)
    state.diagnostics = sorted(diagnostics, key=Diagnostic.sort_key)
    return state


def _diagnostic(item: _Doc, problem: Problem, nodes: FileNodes) -> Diagnostic:
    position = problem.at
    if position is None and problem.path:
        position = nodes.locate(item.doc.index, problem.path, problem.at_key)
    line, column = position if position is not None else (item.doc.line, item.doc.column)
    return Diagnostic(
        file=item.file.path,
        line=line,
        column=column,
        message=problem.message,
        kind=item.kind,
        namespace=item.namespace,
        name=item.name,
        field=field_path(problem.path) or None,
        reason=problem.reason,
    )


def load_files(files: Iterable[tuple[str, bytes]], revision: str | None = None) -> DesiredState:
    """Parse and validate ``(path, bytes)`` pairs: the whole pipeline for callers without a cache."""
    return build_desired((parse_file(path, data) for path, data in files), revision)
