"""One document, checked alone and reduced to what the cross-resource rules read (pure).

A tree of 100,000 manifests is mostly platforms and workloads: the documents other documents refer to
(Projects, ComputeProfiles, Settings, WorkloadProfiles, ComputePools, ScalingPolicies, Computes) are few.
So each document is read, validated and checked on its own as soon as it is parsed, and what is kept for
the rules that need every document is a :class:`Record`: its identity, where it starts, its problems,
and for platforms and workloads the few fields those rules read (:class:`Facts`). The validated resource
is kept for the documents others refer to, and for every document only when the caller needs the
desired state (``plan``, ``run``); ``validate`` drops it, with the YAML data, when the document is done.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from sys import intern
from typing import Any, NamedTuple

from reconciler.manifests.bundle_rules import MODEL_LABEL, check_bundle_document
from reconciler.manifests.environment_rules import check_environment_document
from reconciler.manifests.parse import Document
from reconciler.manifests.pool_document import check_pool_document
from reconciler.manifests.rules import check_document, named_references
from reconciler.manifests.schema import Problem, did_you_mean, validate_document
from reconciler.model.desired import Identity
from reconciler.model.pickling import by_fields
from reconciler.model.pools import WorkloadRequest, pool_ref_of, workload_request
from reconciler.model.resources import KINDS, AIWorkload, MLPlatform, Resource

_OUR_GROUPS = frozenset(api.split("/", 1)[0] for api, _model in KINDS.values())
_KIND_NAMES = {kind: kind for kind in KINDS}
# Names that thousands of records repeat (namespaces, referenced names, GPU families, GPU lists) are kept
# once: ``sys.intern`` for strings, this table for the lists (a tree asks for a handful of distinct ones).
_GPU_LISTS: dict[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]] = {}
_GPU_LISTS_MAX = 10_000


def _shared(gpus: tuple[tuple[str, int], ...]) -> tuple[tuple[str, int], ...]:
    found = _GPU_LISTS.get(gpus)
    if found is not None:
        return found
    if len(_GPU_LISTS) < _GPU_LISTS_MAX:
        _GPU_LISTS[gpus] = gpus
    return gpus


class Facts(NamedTuple):
    """What the cross-resource rules read of a valid MLPlatform or AIWorkload (a tuple: one is built
    per document, and a tuple is the cheapest record to build and to keep)."""

    mode: str  # an MLPlatform's spec.mode; "shared" for an AIWorkload (always a tenant)
    suspend: bool
    profile_ref: str | None  # spec.computeProfileRef.name
    has_profile_ref: bool  # spec.computeProfileRef is there (possibly with an override only)
    workload_ref: str | None  # spec.workloadProfileRef.name
    pool_ref: str | None  # the pool a tenant runs on (model.pools.pool_ref_of)
    vip: str | None  # spec.edge.vip as written
    has_edge: bool
    has_resource_groups: bool
    gpus: tuple[tuple[str, int], ...]  # an MLPlatform's spec.gpus: (family as written, count)
    request: WorkloadRequest | None  # a tenant's admission request, when its own document has no problem
    first_mig: int | None  # an AIWorkload's first spec.gpus entry with a MIG profile
    environment_ref: str | None = None  # an AIWorkload's spec.environmentRef.name
    bundle_ref: str | None = None  # an AIWorkload's spec.profileBundleRef.name
    model: bool = False  # an AIWorkload labelled palette.ai/aiworkload-type: model (a Model Deployment)


@by_fields
@dataclass(eq=False, slots=True)
class Record:
    """One document of the tree, for the rules that need every document."""

    file: str
    doc: int  # the document's index in its file (``Document.index``), to find positions again
    line: int
    column: int
    kind: str | None = None
    namespace: str | None = None
    name: str | None = None
    schema_ok: bool = False  # the kind's model accepted it
    resource: Resource | None = None  # see the module's docstring for when it is kept
    facts: Facts | None = None
    problems: list[Problem] = field(default_factory=list)
    # Not errors: the resource stays valid, but what it asks for will be refused later.
    warnings: list[Problem] = field(default_factory=list)
    # Certainly not one of our resources (another API group, or no apiVersion and no kind at all, like a
    # CI workflow): still reported, but it cannot hide a platform, so it does not block pruning.
    foreign: bool = False
    # Of a document the schema refused: the references it spells out and its own VIP, still checked.
    refs: tuple[tuple[tuple[str, ...], str, str], ...] = ()
    raw_vip: str | None = None
    identity: Identity | None = None  # (kind, namespace, name) when all three could be read

    @property
    def valid(self) -> bool:
        return self.schema_ok and not self.problems

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def label(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"

    def fresh(self) -> Record:
        """A copy with lists of its own: the cross-resource rules add problems and warnings to it, and
        a record kept by a cache (``loader.CheckedFile``) stays as it was checked alone."""
        return Record(
            self.file,
            self.doc,
            self.line,
            self.column,
            self.kind,
            self.namespace,
            self.name,
            self.schema_ok,
            self.resource,
            self.facts,
            list(self.problems),
            list(self.warnings),
            self.foreign,
            self.refs,
            self.raw_vip,
            self.identity,
        )


def examine(path: str, document: Document, keep_resource: bool) -> Record:
    """Identify, validate and check one document alone (``keep_resource``: keep every resource)."""
    record = Record(path, document.index, document.line, document.column)
    data: Any = document.data
    _identify(record, data, keep_resource)
    record.problems.extend(document.problems)
    if record.kind is not None and record.namespace is not None and record.name is not None:
        record.identity = (record.kind, record.namespace, record.name)
    return record


def _identify(record: Record, data: Any, keep_resource: bool) -> None:
    """Read kind, namespace and name if they are there, then validate against the kind's model."""
    if not isinstance(data, dict):
        what = "a list" if isinstance(data, list) else f"a {type(data).__name__} scalar"
        record.problems.append(
            Problem((), f"document is {what}; expected a mapping with apiVersion, kind, metadata and spec")
        )
        return
    kind, api = data.get("kind"), data.get("apiVersion")
    meta = data.get("metadata")
    if isinstance(meta, dict):
        name, namespace = meta.get("name"), meta.get("namespace")
        record.name = name if isinstance(name, str) and name else None
        record.namespace = intern(namespace) if isinstance(namespace, str) and namespace else None
    if not isinstance(kind, str) or kind not in KINDS:
        record.problems.append(_unknown_kind(record, kind, api))
        return
    record.kind = _KIND_NAMES[kind]  # one string object for every document of a kind
    resource, problems = validate_document(kind, data)
    extra = check_document(kind, data) + check_pool_document(kind, data)
    extra += check_environment_document(kind, data) + check_bundle_document(kind, data)
    if extra:  # where the schema layer already reported a field, the rules stay silent about it
        reported = {p.path for p in problems}
        problems.extend(p for p in extra if p.path not in reported)
    record.problems = problems
    if resource is None:
        record.refs = tuple(named_references(kind, data))
        record.raw_vip = _raw_vip(data) if kind == "MLPlatform" else None
        return
    record.schema_ok = True
    if isinstance(resource, MLPlatform | AIWorkload):
        record.facts = facts_of(resource, with_request=not problems)
        record.raw_vip = record.facts.vip or None
        if keep_resource:
            record.resource = resource
    else:
        record.resource = resource


def _unknown_kind(record: Record, kind: Any, api: Any) -> Problem:
    group = api.split("/", 1)[0] if isinstance(api, str) and "/" in api else None
    record.foreign = (kind is None and api is None) or (group is not None and group not in _OUR_GROUPS)
    known = ", ".join(f"{k} ({v[0]})" for k, v in sorted(KINDS.items()))
    if kind is None:
        return Problem(("kind",), f"kind: required field is missing; known kinds: {known}")
    close = did_you_mean(kind[:80] if isinstance(kind, str) else str(kind)[:80], list(KINDS))
    shown = f"{repr(kind)[:80]} (apiVersion {str(api)[:80]!r})"
    return Problem(("kind",), f"kind: unknown kind {shown}{close}; known kinds: {known}")


def _raw_vip(data: dict[str, Any]) -> str | None:
    """The own ``spec.edge.vip`` of a platform document that failed validation, if it states one."""
    spec = data.get("spec")
    edge = spec.get("edge") if isinstance(spec, dict) else None
    vip = edge.get("vip") if isinstance(edge, dict) else None
    return vip if isinstance(vip, str) and vip else None


def facts_of(resource: MLPlatform | AIWorkload, with_request: bool) -> Facts:
    """The :class:`Facts` of a validated platform or workload (``with_request``: its family names are
    known to be valid, so its admission request can be read)."""
    pool = pool_ref_of(resource)
    pool = intern(pool) if pool is not None else None
    request = workload_request(resource) if with_request and pool is not None else None
    if isinstance(resource, AIWorkload):
        wspec = resource.spec
        first_mig = next((i for i, g in enumerate(wspec.gpus) if g.mig), None)
        workload = intern(wspec.workload_profile_ref.name) if wspec.workload_profile_ref is not None else None
        env = intern(wspec.environment_ref.name) if wspec.environment_ref is not None else None
        bundle = wspec.profile_bundle_ref
        return Facts(
            mode="shared",
            suspend=wspec.suspend,
            profile_ref=None,
            has_profile_ref=False,
            workload_ref=workload,
            pool_ref=pool,
            vip=None,
            has_edge=False,
            has_resource_groups=False,
            gpus=(),
            request=request,
            first_mig=first_mig,
            environment_ref=env,
            bundle_ref=intern(bundle.name) if bundle is not None else None,
            model=resource.metadata.labels.get(MODEL_LABEL) == "model",
        )
    spec = resource.spec
    edge = spec.edge
    profile_ref, workload_ref = spec.compute_profile_ref, spec.workload_profile_ref
    return Facts(
        mode=spec.mode,
        suspend=spec.suspend,
        profile_ref=intern(profile_ref.name) if profile_ref is not None and profile_ref.name else None,
        has_profile_ref=profile_ref is not None,
        workload_ref=intern(workload_ref.name) if workload_ref is not None else None,
        pool_ref=pool,
        vip=edge.vip if edge is not None else None,
        has_edge=edge is not None,
        has_resource_groups=bool(spec.resource_groups),
        gpus=_shared(tuple([(intern(g.family), g.count) for g in spec.gpus])),
        request=request,
        first_mig=None,
    )
