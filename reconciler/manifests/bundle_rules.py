"""Validation rules of Profile Bundles and of the pools and workloads that use them (docs/bundles.md).

Two entry points, each called with one line from the loader, as the pool rules are:

- ``check_bundle_document(kind, data)``: rules of one document on its plain data (a uid listed twice, a
  bundle reference beside a ``workloadProfileRef``, a workload with no pool to go to);
- ``check_bundles(docs)``: rules across documents (the bundle's WorkloadProfiles resolve and have the types
  its own type allows; a pool uses an Infrastructure or Fullstack bundle, a workload an Application or
  Fullstack one; a Model Deployment's bundle holds a Model WorkloadProfile).

What needs Palette's catalogue of cluster profiles (the type of each uid) is not known offline: it is a
plan-time rule, in :mod:`reconciler.bundles`. Offline, a bundle that must hold an infrastructure profile
but lists no cluster profile at all is already an error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from reconciler.manifests.references import MISSING, DocIndex, PoolDoc, reference_problem
from reconciler.manifests.schema import PathElem, Problem, field_path
from reconciler.model.bundle import APPLICATION, FULLSTACK, INFRASTRUCTURE, ProfileBundle
from reconciler.model.conditions import Reason
from reconciler.model.resources import ComputePool, WorkloadProfile

if TYPE_CHECKING:
    from reconciler.manifests.record import Facts

BUNDLE_KIND = "ProfileBundle"
MODEL_LABEL = "palette.ai/aiworkload-type"
DEPLOYING_TYPES = ("Application", "Model")  # WorkloadProfile types an App or Model Deployment runs
NO_POOL = (
    "required: name the ComputePool it runs on (or an Environment in spec.environmentRef); only a "
    "workload with a Fullstack bundle gets a pool of its own without one"
)

# --- per document ------------------------------------------------------------------------------------


def check_bundle_document(kind: str, data: Mapping[str, Any]) -> list[Problem]:
    spec = data.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    if kind == BUNDLE_KIND:
        return _listed_once(spec, "clusterProfiles", "uid", "cluster profile") + _listed_once(
            spec, "workloadProfiles", "name", "WorkloadProfile"
        )
    given = {
        k for k, v in spec.items() if v is not None
    }  # a null field is an absent one (as the model reads it)
    if kind in ("ComputePool", "AIWorkload") and {"profileBundleRef", "workloadProfileRef"} <= given:
        return [
            Problem(
                ("spec", "profileBundleRef"),
                "spec.profileBundleRef: not with spec.workloadProfileRef; name the WorkloadProfile in the "
                "bundle's spec.workloadProfiles instead",
                at_key=True,
            )
        ]
    return []


def _listed_once(spec: Mapping[str, Any], field: str, key: str, what: str) -> list[Problem]:
    items = spec.get(field)
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(items if isinstance(items, list) else []):
        value = item.get(key) if isinstance(item, dict) else None
        if not isinstance(value, str) or not value:
            continue  # the schema layer reports it
        if value in seen:
            problems.append(
                Problem(
                    ("spec", field, i, key),
                    f"spec.{field}[{i}].{key}: {what} {value} is listed twice (spec.{field}[{seen[value]}] "
                    f"and spec.{field}[{i}]); each at most once",
                )
            )
        seen.setdefault(value, i)
    return problems


# --- across documents --------------------------------------------------------------------------------


def check_bundles(docs: Sequence[PoolDoc]) -> None:
    """Cross-resource rules of bundles, then of the pools and workloads naming one."""
    bundles = [d for d in docs if d.kind == BUNDLE_KIND]
    users = [d for d in docs if _bundle_ref(d) is not None]
    if not bundles and not users:
        return
    index = DocIndex(docs)
    for doc in bundles:
        if isinstance(doc.resource, ProfileBundle) and not doc.problems:
            doc.problems.extend(bundle_problems(doc.resource, index))
    index = DocIndex(docs)
    for doc in users:
        name = _bundle_ref(doc)
        if doc.problems or doc.namespace is None or name is None:
            continue
        doc.problems.extend(_user_problems(doc, name, index))


def _bundle_ref(doc: PoolDoc) -> str | None:
    if isinstance(doc.resource, ComputePool):
        ref = doc.resource.spec.profile_bundle_ref
        return ref.name if ref is not None else None
    if doc.kind == "AIWorkload" and doc.facts is not None:
        return doc.facts.bundle_ref
    return None


def workload_profile_type(profile: WorkloadProfile) -> str:
    """A WorkloadProfile's ``spec.type`` (Application when it has no spec)."""
    return profile.spec.type if profile.spec is not None else "Application"


def bundle_problems(bundle: ProfileBundle, index: DocIndex) -> list[Problem]:
    """The rules of one bundle that its namespace's documents decide."""
    ns = bundle.metadata.namespace
    spec = bundle.spec
    problems: list[Problem] = []
    types: list[tuple[int, str]] = []
    for i, ref in enumerate(spec.workload_profiles):
        path: tuple[PathElem, ...] = ("spec", "workloadProfiles", i, "name")
        found = index.typed(WorkloadProfile, ns, ref.name)
        if found is None:
            status = index.status("WorkloadProfile", ns, ref.name)
            problem = reference_problem(status, path, "WorkloadProfile", ns, ref.name, subject="bundle")
            problems.extend([problem] if problem is not None else [])
            continue
        types.append((i, workload_profile_type(found)))
    if spec.type in (INFRASTRUCTURE, FULLSTACK) and not spec.cluster_profiles:
        problems.append(
            Problem(
                ("spec", "type"),
                f"spec.type: a {spec.type} bundle holds exactly one infrastructure (infra or full) cluster "
                "profile; spec.clusterProfiles lists none",
                reason=Reason.INVALID_SPEC,
            )
        )
    if spec.type == INFRASTRUCTURE:
        for i, kind in types:
            if kind in DEPLOYING_TYPES:
                problems.append(
                    Problem(
                        ("spec", "workloadProfiles", i, "name"),
                        f"spec.workloadProfiles[{i}].name: WorkloadProfile {spec.workload_profiles[i].name} "
                        f"is of type {kind}; an Infrastructure bundle holds no Application or Model "
                        "WorkloadProfile (use type Fullstack)",
                        reason=Reason.INVALID_SPEC,
                    )
                )
    complete = len(types) == len(spec.workload_profiles)
    if spec.type == APPLICATION and complete and not any(kind in DEPLOYING_TYPES for _i, kind in types):
        problems.append(
            Problem(
                ("spec", "workloadProfiles"),
                "spec.workloadProfiles: an Application bundle holds at least one WorkloadProfile of "
                "type Application or Model",
                reason=Reason.INVALID_SPEC,
            )
        )
    return problems


def _user_problems(doc: PoolDoc, name: str, index: DocIndex) -> list[Problem]:
    ns = doc.namespace or ""
    path: tuple[PathElem, ...] = ("spec", "profileBundleRef", "name")
    bundle = index.typed(ProfileBundle, ns, name)
    if bundle is None:
        problem = reference_problem(index.status(BUNDLE_KIND, ns, name), path, BUNDLE_KIND, ns, name)
        return [problem] if problem is not None else []
    kind = bundle.spec.type
    if doc.kind == "ComputePool":
        if kind == APPLICATION:
            return [_type_problem(path, name, kind, "a ComputePool", "Infrastructure or Fullstack")]
        return []
    facts = doc.facts
    problems: list[Problem] = []
    if facts is not None and facts.pool_ref is None and facts.environment_ref is None:
        problems.extend(_own_pool_problems(ns, doc.name or "", facts, kind, index))
    if kind == INFRASTRUCTURE:
        problems.append(_type_problem(path, name, kind, "an AIWorkload", "Application or Fullstack"))
    if facts is not None and facts.model and not _has_model(bundle, index):
        problems.append(
            Problem(
                path,
                f"{field_path(path)}: a Model Deployment (label {MODEL_LABEL}: model) needs a bundle with a "
                f"WorkloadProfile of type Model; profile bundle {name} has none",
                reason=Reason.INVALID_SPEC,
            )
        )
    return problems


def _own_pool_problems(ns: str, name: str, facts: Facts, kind: str, index: DocIndex) -> list[Problem]:
    """Rules of a workload that names no pool: only a Fullstack bundle provisions one, of whole GPUs, whose
    name (the workload's) is no ComputePool's or MLPlatform's of the namespace (their clusters would
    share the name ``<namespace>-<name>``)."""
    if kind != FULLSTACK:
        return [Problem(("spec",), f"spec.computePoolRef: {NO_POOL} (profile bundle is of type {kind})")]
    for other in ("ComputePool", "MLPlatform"):
        if index.status(other, ns, name) != MISSING:
            return [
                Problem(
                    ("metadata", "name"),
                    f"metadata.name: AIWorkload {ns}/{name} provisions a pool of its own named {name} "
                    f"(cluster {ns}-{name}), which collides with {other} {ns}/{name}; rename one of the two",
                    reason=Reason.INVALID_SPEC,
                )
            ]
    if facts.first_mig is not None:
        i = facts.first_mig
        return [
            Problem(
                ("spec", "gpus", i, "mig"),
                f"spec.gpus[{i}].mig: a pool provisioned for the workload is sized in whole GPUs; run MIG "
                "instances in a ComputePool with spec.mig (spec.computePoolRef)",
                reason=Reason.INVALID_SPEC,
            )
        ]
    return []


def _type_problem(path: tuple[PathElem, ...], name: str, kind: str, user: str, allowed: str) -> Problem:
    return Problem(
        path,
        f"{field_path(path)}: profile bundle {name} is of type {kind}; {user} uses an {allowed} bundle",
        reason=Reason.INVALID_SPEC,
    )


def _has_model(bundle: ProfileBundle, index: DocIndex) -> bool:
    ns = bundle.metadata.namespace
    for ref in bundle.spec.workload_profiles:
        found = index.typed(WorkloadProfile, ns, ref.name)
        if found is not None and workload_profile_type(found) == "Model":
            return True
    return False
