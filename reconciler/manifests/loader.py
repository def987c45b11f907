"""From parsed files to a DesiredState: schema layer, per-resource rules, then cross-resource rules.

Every problem of every document is collected before anything is reported, so one run shows all errors
of a tree. Files are consumed one at a time: each document is checked alone as soon as it is parsed and
kept as a compact :class:`~reconciler.manifests.record.Record` for the cross-resource rules, so the YAML
data of a tree is never all in memory at once. Positions inside a document are looked up only for
documents that have problems.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from reconciler.manifests.bundle_rules import check_bundles
from reconciler.manifests.core_rules import check_identities, check_platform_vips_and_admission
from reconciler.manifests.environment_rules import check_environments
from reconciler.manifests.locate import FileNodes
from reconciler.manifests.parse import ParsedFile, parse_file
from reconciler.manifests.pool_rules import check_pools
from reconciler.manifests.provisioned import with_provisioned_pools
from reconciler.manifests.record import Record, examine
from reconciler.manifests.schema import Problem, field_path
from reconciler.model.desired import DesiredState, Loaded, SourceRef
from reconciler.model.diagnostics import Diagnostic, Severity
from reconciler.model.pickling import by_fields
from reconciler.model.resources import ComputePool
from reconciler.profiles import has_cluster_profile, no_profile_diagnostic

# Enough to fix a document by; a hostile one with 100,000 unknown keys must not cost 100,000 lookups.
MAX_PROBLEMS_PER_DOCUMENT = 50


@by_fields
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
    check_identities(items)
    check_pools(items)
    check_bundles(items)
    check_environments(items)
    check_platform_vips_and_admission(items)
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
                request = item.facts.request if item.facts is not None else None
                state.resources[ident] = Loaded(resource=item.resource, source=source, request=request)
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
