"""Validation rules of compute pools and their tenants across documents (docs/validation.md).

``check_pools(docs)``: cross-resource rules once every document is identified (references inside the
namespace, MLPlatform/ComputePool name clashes, pool VIPs, and warnings about what admission will refuse
whatever the inventory holds), called with one line from the loader. The per-document rules on the plain
data are :func:`reconciler.manifests.pool_document.check_pool_document`'s.

A third rule needs the previous state and is not a validation rule: a pool's ``mode`` cannot change once
its cluster exists. ``pool_mode_change`` says why; the plan calls it with the mode the status branch
reported for the pool (see docs/pools.md).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING

from reconciler.manifests.references import DocIndex, PoolDoc, compute_profile_problems, need
from reconciler.manifests.schema import PathElem, Problem, field_path
from reconciler.model.gpu import GpuFamily, canonical_family
from reconciler.model.pools import WorkloadRequest, canonical_limits
from reconciler.model.resources import ComputePool, ComputeProfile
from reconciler.model.scaling import ScalingPolicy
from reconciler.resolve import profile_name

if TYPE_CHECKING:  # the record module imports the rule modules that import this one
    from reconciler.manifests.record import Facts


# --- across documents --------------------------------------------------------------------------------


def check_pools(docs: Sequence[PoolDoc]) -> None:
    """Cross-resource rules of pools and tenants; problems and warnings are added to the documents."""
    if not any(_pool_related(doc) for doc in docs):
        return  # no pool, workload or tenant: every rule below is about one of them
    _check_name_clashes(docs)
    index = DocIndex(docs)
    for doc in docs:
        if isinstance(doc.resource, ComputePool) and not doc.problems:
            doc.problems.extend(_pool_refs(doc.resource, index))
    index = DocIndex(docs)
    for doc in docs:
        facts = doc.facts
        if doc.problems or facts is None or facts.pool_ref is None or doc.namespace is None:
            continue
        ns = doc.namespace
        need(doc.problems, index, ("spec", "computePoolRef", "name"), "ComputePool", ns, facts.pool_ref)
        if doc.kind == "AIWorkload" and facts.workload_ref is not None:
            name = facts.workload_ref
            need(doc.problems, index, ("spec", "workloadProfileRef", "name"), "WorkloadProfile", ns, name)
    index = DocIndex(docs)
    _check_pool_vips(docs, index)
    _warn_tenants(docs, index)
    _warn_unscaled_families(docs, index)


def _pool_related(doc: PoolDoc) -> bool:
    if doc.kind in ("ComputePool", "AIWorkload"):
        return True
    return doc.facts is not None and doc.facts.pool_ref is not None


def _check_name_clashes(docs: Sequence[PoolDoc]) -> None:
    """An MLPlatform and a ComputePool of one namespace cannot share a name: both would be the cluster
    ``<namespace>-<name>`` (docs/palette.md). Both documents get the error, each naming the other."""
    by_name: dict[tuple[str, str], dict[str, list[PoolDoc]]] = defaultdict(lambda: defaultdict(list))
    for doc in docs:
        if doc.kind in ("MLPlatform", "ComputePool") and doc.namespace and doc.name:
            by_name[(doc.namespace, doc.name)][doc.kind].append(doc)
    for (ns, name), kinds in sorted(by_name.items()):
        if len(kinds) < 2:
            continue
        for doc in (*kinds["MLPlatform"], *kinds["ComputePool"]):
            other_kind = "ComputePool" if doc.kind == "MLPlatform" else "MLPlatform"
            other = kinds[other_kind][0]
            doc.problems.append(
                Problem(
                    ("metadata", "name"),
                    f"metadata.name: {doc.kind} {ns}/{name} ({doc.where}) and {other_kind} {ns}/{name} "
                    f"({other.where}) share a name; both would be the cluster {ns}-{name}: rename one",
                )
            )


def _pool_refs(pool: ComputePool, index: DocIndex) -> list[Problem]:
    ns = pool.metadata.namespace
    ref = pool.spec.compute_profile_ref
    holder = compute_profile_problems(ref.name if ref is not None else None, ns, index, subject="pool")
    if pool.spec.workload_profile_ref is not None:
        name = pool.spec.workload_profile_ref.name
        need(holder, index, ("spec", "workloadProfileRef", "name"), "WorkloadProfile", ns, name)
    if pool.spec.scaling_policy_ref is not None:
        name = pool.spec.scaling_policy_ref.name
        need(holder, index, ("spec", "scalingPolicyRef", "name"), "ScalingPolicy", ns, name)
    return holder


def _pool_vip(pool: ComputePool, index: DocIndex) -> tuple[str | None, tuple[PathElem, ...], str]:
    if pool.spec.edge is not None and pool.spec.edge.vip:
        return pool.spec.edge.vip, ("spec", "edge", "vip"), "spec.edge.vip"
    profile = _profile_of(pool, index)
    vip = profile.spec.edge.vip if profile is not None and profile.spec.edge is not None else None
    path: tuple[PathElem, ...] = ("spec", "computeProfileRef") if pool.spec.compute_profile_ref else ("spec",)
    return vip, path, "the ComputeProfile's spec.edge.vip"


def _profile_of(pool: ComputePool, index: DocIndex) -> ComputeProfile | None:
    ref = pool.spec.compute_profile_ref
    name = profile_name(ref.name if ref is not None else None, index.project(pool.metadata.namespace))
    return index.typed(ComputeProfile, pool.metadata.namespace, name) if name else None


def _platform_vip(ns: str, platform: Facts, index: DocIndex) -> str | None:
    if platform.vip:
        return platform.vip
    name = profile_name(platform.profile_ref, index.project(ns))
    profile = index.resource("ComputeProfile", ns, name) if name else None
    if isinstance(profile, ComputeProfile) and profile.spec.edge is not None:
        return profile.spec.edge.vip
    return None


def _check_pool_vips(docs: Sequence[PoolDoc], index: DocIndex) -> None:
    """Two clusters never share a VIP. Dedicated platforms keep theirs (the platform rules settle clashes
    between platforms); a pool that would take a VIP already used gets the error, and between pools the
    first in (namespace, name) order keeps it."""
    owners: dict[str, str] = {}
    ordered = sorted(docs, key=lambda d: (d.namespace or "", d.name or ""))
    for doc in ordered:
        facts = doc.facts
        if doc.kind == "MLPlatform" and facts is not None and facts.mode == "dedicated" and not doc.problems:
            vip = _platform_vip(doc.namespace or "", facts, index)
            if vip is not None:
                owners.setdefault(vip, f"MLPlatform {doc.namespace}/{doc.name} ({doc.where})")
    for doc in ordered:
        pool = doc.resource
        if not isinstance(pool, ComputePool) or doc.problems:
            continue
        vip, path, source = _pool_vip(pool, index)
        if vip is None:
            continue
        me = f"ComputePool {pool.metadata.namespace}/{pool.metadata.name} ({doc.where})"
        first = owners.setdefault(vip, me)
        if first != me:
            doc.problems.append(
                Problem(
                    path,
                    f"{field_path(path)}: VIP {vip} (from {source}) is already used by {first}; two clusters "
                    "never share a VIP, give this pool its own spec.edge.vip",
                )
            )


def _warn_tenants(docs: Sequence[PoolDoc], index: DocIndex) -> None:
    """Warnings (the tenant stays valid) about what admission will refuse whatever the inventory holds."""
    tenants: dict[tuple[str, str], list[tuple[PoolDoc, WorkloadRequest]]] = defaultdict(list)
    # The warnings depend on the pool and the request's shape only: thousands of tenants, a few answers.
    known: dict[Hashable, tuple[Problem, ...]] = {}
    for doc in docs:
        facts = doc.facts
        if doc.problems or facts is None or facts.pool_ref is None or facts.request is None:
            continue
        pool_name = facts.pool_ref
        if doc.kind == "MLPlatform":
            _warn_ignored_platform_fields(doc, facts)
        ns = doc.namespace or ""
        pool = index.resource("ComputePool", ns, pool_name)
        if isinstance(pool, ComputePool):
            request = facts.request
            tenants[(ns, pool_name)].append((doc, request))
            whole = tuple(request.whole.items())
            shape = (ns, pool_name, doc.kind, facts.first_mig, request.replicas, whole, request.mig)
            warnings = known.get(shape)
            if warnings is None:
                warnings = known[shape] = tuple(_request_warnings(doc.kind, facts, pool, index))
            doc.warnings.extend(warnings)
    for (ns, pool_name), members in sorted(tenants.items()):
        pool = index.resource("ComputePool", ns, pool_name)
        if not isinstance(pool, ComputePool) or pool.spec.mode != "dedicated" or len(members) < 2:
            continue
        members.sort(key=lambda m: (-m[1].priority, m[1].key[1]))
        first = members[0][1].key[1]
        for doc, _res in members[1:]:
            doc.warnings.append(
                Problem(
                    ("spec", "computePoolRef", "name"),
                    f"spec.computePoolRef: ComputePool {ns}/{pool_name} is dedicated and {ns}/{first} comes "
                    "first (priority, then name): unless this one is the workload already admitted (it "
                    f"keeps the pool), it is rejected with PoolDedicated{_WHICH}",
                )
            )


def _warn_unscaled_families(docs: Sequence[PoolDoc], index: DocIndex) -> None:
    """A pool whose ScalingPolicy has no gpu rule for some of the pool's GPU families: those families
    are never scaled (the pool keeps their spec.gpus), which is rarely what was meant."""
    for doc in docs:
        pool = doc.resource
        if doc.problems or not isinstance(pool, ComputePool) or pool.spec.scaling_policy_ref is None:
            continue
        name = pool.spec.scaling_policy_ref.name
        policy = index.resource("ScalingPolicy", pool.metadata.namespace, name)
        if not isinstance(policy, ScalingPolicy):
            continue  # missing or invalid: the reference is an error already
        ruled = {rule.canonical for rule in policy.spec.gpu}
        families = []
        for gpu in pool.spec.gpus:
            try:
                families.append(canonical_family(gpu.family))
            except ValueError:
                continue
        unscaled = sorted({f for f in families if f not in ruled})
        if unscaled:
            doc.warnings.append(
                Problem(
                    ("spec", "scalingPolicyRef", "name"),
                    f"spec.scalingPolicyRef: ScalingPolicy {pool.metadata.namespace}/{name} has no gpu rule "
                    f"for {', '.join(unscaled)}: the pool's {', '.join(unscaled)} GPUs are never scaled "
                    "(they stay as spec.gpus says); add a gpu rule and a gpuResourceBounds entry for each",
                )
            )


def _warn_ignored_platform_fields(doc: PoolDoc, platform: Facts) -> None:
    for present, path in (
        (platform.has_resource_groups, ("spec", "resourceGroups")),
        (platform.has_edge, ("spec", "edge")),
    ):
        if present:
            doc.warnings.append(
                Problem(
                    path,
                    f"{field_path(path)}: ignored with mode shared: the platform runs on its pool's cluster, "
                    "whose hosts and VIP the ComputePool decides",
                    at_key=True,
                )
            )


# validate reads no status: what is admitted keeps its GPUs whatever the rules say now (docs/pools.md,
# "Sticky"), and only a plan knows which workloads are admitted.
_WHICH = " (validate does not know what is admitted: plan --from-status says)"


def _request_warnings(kind: str | None, facts: Facts, pool: ComputePool, index: DocIndex) -> list[Problem]:
    """The warnings of a tenant's request (what it asks of the pool alone: ``facts.request`` and
    ``facts.first_mig``), in order."""
    request = facts.request
    assert request is not None  # the caller checks
    out: list[Problem] = []
    pool_label = f"ComputePool {pool.metadata.namespace}/{pool.metadata.name}"
    strategy = pool.spec.mig.strategy if pool.spec.mig is not None else "none"
    if request.mig and strategy != "mixed" and kind == "AIWorkload" and facts.first_mig is not None:
        i = facts.first_mig
        out.append(
            Problem(
                ("spec", "gpus", i, "mig"),
                f"spec.gpus[{i}].mig: {pool_label} has mig.strategy {strategy}; MIG instances need "
                "mig.strategy: mixed: unless it is already admitted (it then keeps its instances), this "
                f"workload is rejected with MIGUnsupported{_WHICH}",
            )
        )
    pool_families: set[GpuFamily] = set()
    for gpu in pool.spec.gpus:
        try:
            pool_families.add(canonical_family(gpu.family))
        except ValueError:
            continue
    asked = sorted(set(request.whole) | {m.family for m in request.mig})
    missing = [f for f in asked if f not in pool_families]
    if missing:
        out.append(
            Problem(
                ("spec", "gpus"),
                f"spec.gpus: {pool_label} has no {', '.join(missing)} GPUs in its spec.gpus; this workload "
                "will stay pending with PoolCapacityExceeded until the pool has them",
            )
        )
    profile = _profile_of(pool, index)
    if profile is None:
        return out
    limits = canonical_limits(profile.spec.gpu_limits)
    rounded = " (MIG instances rounded up to GPUs)" if request.mig else ""
    for family, count in sorted(request.limit_counts().items()):
        limit = limits.get(family)
        if limit is not None and count > limit:
            out.append(
                Problem(
                    ("spec", "gpus"),
                    f"spec.gpus: {count} {family} GPUs{rounded} exceed the limit "
                    f"of {limit} in ComputeProfile {profile.metadata.namespace}/{profile.metadata.name} of "
                    f"{pool_label}; unless it is already admitted (lowered limits evict nothing), this "
                    f"workload is rejected with GPULimitExceeded{_WHICH}",
                )
            )
    return out


# --- needs the previous state --------------------------------------------------------------------------


def pool_mode_change(pool: ComputePool, reported_mode: str | None, cluster_exists: bool) -> str | None:
    """Why the pool cannot be planned as written, or None: its ``mode`` changed while its cluster exists.

    ``reported_mode`` is the mode the status branch last reported for the pool (None: never reported).
    The plan rejects such a pool with ``InvalidSpec`` and keeps its cluster and admissions as they are.
    """
    if not cluster_exists or reported_mode is None or reported_mode == pool.spec.mode:
        return None
    cluster = f"{pool.metadata.namespace}-{pool.metadata.name}"
    return (
        f"spec.mode: cannot change from {reported_mode} to {pool.spec.mode}: the pool's cluster {cluster} "
        f"exists and its admitted workloads were placed for a {reported_mode} pool; a pool's mode is fixed "
        f"once its cluster exists. Set spec.mode back to {reported_mode}, or create a new {pool.spec.mode} "
        "pool and move the workloads to it"
    )
