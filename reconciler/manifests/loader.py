"""From parsed files to a DesiredState: schema layer, per-resource rules, then cross-resource rules.

Every problem of every document is collected before anything is reported, so one run shows all errors
of a tree. Files are consumed one at a time: each document is checked alone as soon as it is parsed and
kept as a compact :class:`~reconciler.manifests.record.Record` for the cross-resource rules, so the YAML
data of a tree is never all in memory at once. Positions inside a document are looked up only for
documents that have problems.
"""

from __future__ import annotations

import difflib
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from reconciler import resolve
from reconciler.manifests.bundle_rules import check_bundles
from reconciler.manifests.environment_rules import check_environments
from reconciler.manifests.locate import FileNodes
from reconciler.manifests.parse import ParsedFile, parse_file
from reconciler.manifests.pool_rules import check_pools
from reconciler.manifests.provisioned import with_provisioned_pools
from reconciler.manifests.record import Facts, Record, examine
from reconciler.manifests.schema import PathElem, Problem, field_path
from reconciler.model.conditions import Reason
from reconciler.model.desired import DesiredState, Identity, Loaded, SourceRef
from reconciler.model.diagnostics import REFERENCE_INVALID, UNKNOWN_GPU_FAMILY, Diagnostic, Severity
from reconciler.model.gpu import KNOWN_FAMILIES, canonical_family
from reconciler.model.resources import Compute, ComputePool, ComputeProfile, Project
from reconciler.profiles import has_cluster_profile, no_profile_diagnostic

# Enough to fix a document by; a hostile one with 100,000 unknown keys must not cost 100,000 lookups.
MAX_PROBLEMS_PER_DOCUMENT = 50


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

    def __init__(self, items: list[Record]) -> None:
        self.valid: dict[Identity, Record] = {}
        self.failed: set[Identity] = set()
        self._profiles: dict[tuple[str, str | None], ComputeProfile | None] = {}
        for item in items:
            ident = item.identity
            if ident is None:
                continue
            if item.problems or not item.schema_ok:
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

    def profile_of(self, ns: str, platform: Facts) -> ComputeProfile | None:
        """The valid ComputeProfile a platform uses (thousands of platforms share a few answers)."""
        key = (ns, platform.profile_ref)
        if key in self._profiles:
            return self._profiles[key]
        name = resolve.profile_name(platform.profile_ref, self.project(ns))
        found = self.valid.get(("ComputeProfile", ns, name)) if name else None
        resource = found.resource if found is not None else None
        profile = self._profiles[key] = resource if isinstance(resource, ComputeProfile) else None
        return profile

    def status(self, ident: Identity) -> str:
        if ident in self.valid:
            return "valid"
        return "invalid" if ident in self.failed else "missing"


def _check_duplicates(items: list[Record]) -> None:
    groups: dict[Identity, list[Record]] = defaultdict(list)
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


def _check_projects(items: list[Record]) -> None:
    """One Project per namespace: it is the namespace's fallback for references."""
    by_ns: dict[str, list[Record]] = defaultdict(list)
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


def _check_references(items: list[Record]) -> None:
    """References resolve inside the namespace; platforms depending on invalid resources are invalid."""
    index = _Index(items)
    for item in items:
        res = item.resource
        if res is None or item.problems or item.kind == "MLPlatform":
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
        if item.kind == "MLPlatform" and item.facts is not None and not item.problems:
            item.problems.extend(_platform_refs(item.namespace or "", item.facts, index))
    for item in items:  # refused by the schema: its references are still reported in the same run
        if not item.schema_ok and item.kind is not None and item.namespace is not None:
            reported = {p.path for p in item.problems}
            for path, kind, name in item.refs:
                if path not in reported and index.status((kind, item.namespace, name)) == "missing":
                    item.problems.append(_ref_problem(path, kind, name, item.namespace))


def _platform_refs(ns: str, platform: Facts, index: _Index) -> list[Problem]:
    problems: list[Problem] = []
    if platform.profile_ref:
        path: tuple[PathElem, ...] = ("spec", "computeProfileRef", "name")
        _need(problems, index, path, "ComputeProfile", ns, platform.profile_ref)
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
            name = resolve.profile_name(platform.profile_ref, project)
            if name is not None:
                _need(problems, index, ("spec",), "ComputeProfile", ns, name, via="Project fallback")
    if platform.workload_ref is not None:
        name = platform.workload_ref
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
    status = index.status((kind, ns, name))
    if status == "valid":
        return
    where = f"spec.computeProfileRef ({via})" if via else _dotted(path)
    if status == "missing":
        message = f"ReferenceNotFound: {where}: {kind} '{name}' not found in namespace {ns}"
        problems.append(Problem(path, message, reason=Reason.REFERENCE_NOT_FOUND))
    elif status == "invalid":
        problems.append(
            Problem(
                path,
                f"{where}: {kind} {ns}/{name} is invalid (see its errors); this platform is kept as it is "
                "until it is fixed",
                reason=REFERENCE_INVALID,
            )
        )


def _check_vips(items: list[Record], index: _Index) -> None:
    """Two clusters never share a VIP: the first platform (namespace, name order) keeps it.

    Invalid platforms keep their clusters, so a VIP they state still counts as taken.
    """
    owners: dict[str, Record] = {}
    platforms = [i for i in items if i.kind == "MLPlatform" and i.identity is not None]
    platforms.sort(key=lambda d: (d.namespace or "", d.name or ""))
    for item in platforms:
        platform = item.facts
        if platform is not None and platform.mode == "shared":
            continue  # a tenant of a pool: no cluster of its own
        if item.problems or platform is None:
            if item.raw_vip is not None:
                owners.setdefault(item.raw_vip, item)
            continue
        found = resolve.vip_of(platform.vip, index.profile_of(item.namespace or "", platform))
        if found is None:
            continue
        vip = found.address
        path: tuple[PathElem, ...] = ("spec", "edge", "vip")
        if not found.from_platform:
            has_ref = platform.has_profile_ref
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


def _check_admission(items: list[Record], index: _Index) -> None:
    """Warn about valid platforms that allocation will refuse whatever the inventory holds.

    A request above the ComputeProfile's ``gpuLimits`` is rejected with GPULimitExceeded
    (docs/allocation.md). Saying so at validation time lets a pull request catch it; the platform itself stays
    valid (a rejection keeps an existing cluster). A shared-mode platform is a tenant of its pool: the
    pool rules (``pool_rules``) warn about what admission will refuse.
    """
    breaches: dict[tuple[int, tuple[tuple[str, int], ...]], list[resolve.LimitBreach]] = {}
    for item in items:
        platform = item.facts
        if item.problems or platform is None or item.kind != "MLPlatform":
            continue
        for i, (name, _count) in enumerate(platform.gpus):
            family = canonical_family(name)
            if family not in KNOWN_FAMILIES:
                item.warnings.append(
                    Problem(
                        ("spec", "gpus", i, "family"),
                        f"spec.gpus[{i}].family: {family} is not a known GPU family{_did_you_mean(family)}; "
                        f"only hosts tagged gpu-family: {family} can serve it",
                        reason=UNKNOWN_GPU_FAMILY,
                    )
                )
        if platform.mode == "shared":
            continue  # its limits are its pool's: reconciler.manifests.pool_rules warns about them
        profile = index.profile_of(item.namespace or "", platform)
        if profile is None:
            continue
        # Platforms ask for a handful of distinct GPU lists: the answer is kept per (profile, list).
        key = (id(profile), platform.gpus)
        found = breaches.get(key)
        if found is None:
            found = breaches[key] = resolve.gpu_limit_breaches(platform.gpus, profile)
        for breach in found:
            i = breach.index
            item.warnings.append(
                Problem(
                    ("spec", "gpus", i, "count"),
                    f"spec.gpus[{i}].count: {breach.count} {breach.family} GPUs exceed the limit of "
                    f"{breach.limit} in ComputeProfile {profile.metadata.namespace}/{profile.metadata.name}; "
                    "this platform is rejected with GPULimitExceeded: a new one is not created, a running "
                    "one is kept as it is (Degraded, not scaled) until the request or the limit changes",
                    reason=Reason.GPU_LIMIT_EXCEEDED,
                )
            )


def _did_you_mean(family: str) -> str:
    close = difflib.get_close_matches(family, sorted(KNOWN_FAMILIES), n=1, cutoff=0.75)
    return f" (did you mean {close[0]}?)" if close else ""


@dataclass(frozen=True, slots=True)
class CheckedFile:
    """One file parsed and each of its documents checked alone (:func:`check_file`): a pure function of
    its path and bytes, so a cache may keep it by git blob id and hand it to :func:`build_desired`
    again instead of the file. Its records are never changed: the cross-resource rules work on copies.
    """

    path: str
    diagnostics: tuple[Diagnostic, ...]
    complete: bool
    text: str  # to find positions again when a cross-resource rule reports a problem
    records: tuple[Record, ...]


def check_file(parsed: ParsedFile, keep_resources: bool = True) -> CheckedFile:
    """``parsed`` with each document identified, validated and checked alone (``examine``)."""
    records = tuple(examine(parsed.path, doc, keep_resources) for doc in parsed.documents)
    return CheckedFile(parsed.path, parsed.diagnostics, parsed.complete, parsed.text, records)


def check_bytes(path: str, data: bytes) -> CheckedFile:
    """:func:`check_file` of the bytes of one file (what a cache of validated files computes on a miss)."""
    return check_file(parse_file(path, data))


@dataclass
class Verdict:
    """What ``validate`` reports of a tree: every diagnostic, and how much was read."""

    diagnostics: list[Diagnostic]
    resources: int  # distinct identities, valid or not
    files: list[str]  # the files holding a valid resource or a diagnostic about one
    complete: bool


def build_desired(files: Iterable[ParsedFile | CheckedFile], revision: str | None) -> DesiredState:
    """Validate every document of every file and return the desired state of one revision (a
    :class:`CheckedFile` from a cache is taken as it is: only the cross-resource rules run again)."""
    state = DesiredState(revision=revision)
    _load(files, state, keep_resources=True)
    return with_provisioned_pools(state)


def validate_files(files: Iterable[ParsedFile], text_of: Callable[[str], str] | None = None) -> Verdict:
    """Validate every document of every file, as :func:`build_desired`, keeping only what is reported.

    ``files`` is consumed one file at a time; the resources of platforms and workloads are not kept.
    ``text_of(path)`` gives a file's text again, to find positions in the documents that have problems;
    without it every file's text is kept until the end.
    """
    state = DesiredState(revision=None)
    records = _load(files, state, keep_resources=False, text_of=text_of)
    valid = {item.identity: item.file for item in records if item.valid and item.identity is not None}
    named = {*valid.values(), *(d.file for d in state.diagnostics if d.kind)}
    return Verdict(state.diagnostics, len(valid) + len(state.invalid), sorted(named), state.complete)


def _load(
    files: Iterable[ParsedFile | CheckedFile],
    state: DesiredState,
    keep_resources: bool,
    text_of: Callable[[str], str] | None = None,
) -> list[Record]:
    """Fill ``state`` (its resources: see :mod:`reconciler.manifests.record`); return the records."""
    items: list[Record] = []
    diagnostics: list[Diagnostic] = []
    texts: dict[str, str] = {}  # to find positions again for the documents that have problems
    for unit in files:
        diagnostics.extend(unit.diagnostics)
        if not unit.complete:
            state.complete = False
        if isinstance(unit, CheckedFile):
            items.extend([record.fresh() for record in unit.records])
            has_documents = bool(unit.records)
        else:
            items.extend([examine(unit.path, doc, keep_resources) for doc in unit.documents])
            has_documents = bool(unit.documents)
        if has_documents and text_of is None:
            texts[unit.path] = unit.text
    _check_duplicates(items)
    _check_projects(items)
    _check_references(items)
    check_pools(items)
    check_bundles(items)
    check_environments(items)
    index = _Index(items)
    _check_vips(items, index)
    _check_admission(items, index)
    nodes = _Positions(text_of or texts.__getitem__)
    for item in items:
        ident = item.identity
        if item.warnings:
            found = nodes.of(item.file)
            for warning in item.warnings:
                diagnostics.append(replace(_diagnostic(item, warning, found), severity=Severity.WARNING))
        if item.valid and ident is not None:
            if item.resource is not None:
                source = SourceRef(item.file, item.line, item.column)
                state.resources[ident] = Loaded(resource=item.resource, source=source)
            continue
        if ident is None and not item.foreign:
            state.complete = False
        found = nodes.of(item.file)
        diags = [_diagnostic(item, problem, found) for problem in _shown(item.problems)]
        diagnostics.extend(diags)
        if ident is not None:
            state.invalid.setdefault(ident, []).extend(diags)
    diagnostics.extend(_profile_warnings(items, state))  # plan and run will reject these
    state.diagnostics = sorted(diagnostics, key=Diagnostic.sort_key)
    return items


class _Positions:
    """The node trees of the files that have problems, composed again once each."""

    def __init__(self, text_of: Callable[[str], str]) -> None:
        self._text_of = text_of
        self._files: dict[str, FileNodes] = {}

    def of(self, path: str) -> FileNodes:
        found = self._files.get(path)
        if found is None:
            found = self._files[path] = FileNodes(self._text_of(path))
        return found


def _shown(problems: list[Problem]) -> list[Problem]:
    if len(problems) <= MAX_PROBLEMS_PER_DOCUMENT:
        return problems
    more = len(problems) - MAX_PROBLEMS_PER_DOCUMENT
    return [
        *problems[:MAX_PROBLEMS_PER_DOCUMENT],
        Problem((), f"{more} more errors in this document are not shown; fix the ones above first"),
    ]


def _profile_warnings(items: list[Record], state: DesiredState) -> list[Diagnostic]:
    """One warning per valid, non-suspended dedicated platform or pool whose cluster would have no
    cluster profile (``reconciler.profiles``; ``state`` holds the valid Settings and profiles)."""
    known: dict[tuple[str, str | None, str | None], bool] = {}
    out: list[Diagnostic] = []
    for item in items:
        ident = item.identity
        if not item.valid or ident is None:
            continue
        if item.kind == "MLPlatform" and item.facts is not None:
            if item.facts.mode == "shared" or item.facts.suspend:
                continue
            key = (ident[1], item.facts.profile_ref or None, item.facts.workload_ref)
        elif isinstance(item.resource, ComputePool):
            spec = item.resource.spec
            if spec.suspend or spec.profile_bundle_ref is not None:
                continue  # built from its bundle's profiles (docs/bundles.md)
            profile = spec.compute_profile_ref.name if spec.compute_profile_ref is not None else None
            workload = spec.workload_profile_ref.name if spec.workload_profile_ref is not None else None
            key = (ident[1], profile or None, workload)
        else:
            continue
        has = known.get(key)
        if has is None:
            has = known[key] = has_cluster_profile(state, *key)
        if not has:
            source = SourceRef(item.file, item.line, item.column)
            out.append(no_profile_diagnostic(ident, source, Severity.WARNING))
    return out


def _diagnostic(item: Record, problem: Problem, nodes: FileNodes) -> Diagnostic:
    position = problem.at
    if position is None and problem.path:
        position = nodes.locate(item.doc, problem.path, problem.at_key)
    line, column = position if position is not None else (item.line, item.column)
    return Diagnostic(
        file=item.file,
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
