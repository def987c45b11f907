"""Which Palette cluster profiles a platform's cluster is built from (pure; docs/validation.md).

Palette builds an edge-native cluster from at least one infrastructure (or full) cluster profile. The
rule lives in :func:`cluster_profiles`: the Settings' ``spec.palette.clusterProfiles`` (the
infrastructure stack of every cluster of that Palette project) followed by the WorkloadProfile's
``spec.clusterProfiles``. The other functions only find the Settings and WorkloadProfile of a platform
and apply the rule where validation and planning need it.

Decisions the design leaves open, written down here:

- A uid named twice (in the Settings and again in the WorkloadProfile) is sent once, at its first place,
  with the pack values of that first mention: Palette attaches a profile to a cluster once.
- A platform's Settings are those of its ComputeProfile's ``settingsRef``, else its Project's: the same
  Settings whose Palette the platform's cluster lives in (the controller's routing).
- A suspended platform is left alone: it is never created, so it is not rejected for lacking profiles.
- A ComputePool's cluster follows the same rule (its Settings, then its own WorkloadProfile), unless it
  names a Profile Bundle (``spec.profileBundleRef``): then the bundle's cluster profiles, in the bundle's
  order, in place of both (docs/bundles.md).
- A shared-mode MLPlatform has no cluster (its profiles are add-ons attached to its pool's cluster), so it
  is never rejected for lacking one.
"""

from __future__ import annotations

from reconciler.model.base import ClusterProfileRef
from reconciler.model.bundle import ProfileBundle
from reconciler.model.desired import DesiredState, SourceRef
from reconciler.model.diagnostics import Diagnostic, Severity
from reconciler.model.resources import (
    AIWorkload,
    ComputePool,
    ComputeProfile,
    MLPlatform,
    Settings,
    WorkloadProfile,
)
from reconciler.resolve import (
    Clustered,
    compute_profile,
    is_tenant,
    platform_settings_name,
    profile_name,
    workload_profile,
)

NO_CLUSTER_PROFILE = "no cluster profile: Palette cannot build the cluster"


def cluster_profiles(
    settings: Settings | None, workload: WorkloadProfile | None
) -> tuple[ClusterProfileRef, ...]:
    """The cluster profiles of one cluster, in the order Palette gets them; empty when there are none."""
    named: list[ClusterProfileRef] = []
    if settings is not None:
        named.extend(settings.spec.palette.cluster_profiles)
    if workload is not None and workload.spec is not None:
        named.extend(workload.spec.cluster_profiles)
    return _once(named)


def bundle_cluster_profiles(desired: DesiredState, bundle: ProfileBundle) -> tuple[ClusterProfileRef, ...]:
    """What a Profile Bundle deploys: its own cluster profiles in their order, then those of its
    WorkloadProfiles in theirs (a bundle of one WorkloadProfile deploys exactly what a
    ``workloadProfileRef`` to it does); each uid once."""
    ns = bundle.metadata.namespace
    named: list[ClusterProfileRef] = list(bundle.spec.cluster_profiles)
    for ref in bundle.spec.workload_profiles:
        found = desired.get(WorkloadProfile, ns, ref.name)
        if found is not None and found.spec is not None:
            named.extend(found.spec.cluster_profiles)
    return _once(named)


def _once(named: list[ClusterProfileRef]) -> tuple[ClusterProfileRef, ...]:
    seen: set[str] = set()
    out: list[ClusterProfileRef] = []
    for ref in named:
        if ref.uid not in seen:
            seen.add(ref.uid)
            out.append(ref)
    return tuple(out)


def platform_settings(desired: DesiredState, platform: Clustered) -> Settings | None:
    """The Settings of the Palette the platform's cluster lives in: the routing's rule (resolve.py)."""
    namespace = platform.metadata.namespace
    name = platform_settings_name(compute_profile(desired, platform), desired.project(namespace))
    return desired.get(Settings, namespace, name) if name else None


def has_cluster_profile(
    desired: DesiredState, namespace: str, profile_ref: str | None, workload_ref: str | None
) -> bool:
    """Whether the cluster of a platform or pool with these references would have a cluster profile:
    :func:`platform_cluster_profiles` from the references alone (the only inputs it reads)."""
    project = desired.project(namespace)
    profile_name_ = profile_name(profile_ref, project)
    profile = desired.get(ComputeProfile, namespace, profile_name_) if profile_name_ else None
    settings_name = platform_settings_name(profile, project)
    settings = desired.get(Settings, namespace, settings_name) if settings_name else None
    workload = desired.get(WorkloadProfile, namespace, workload_ref) if workload_ref else None
    return bool(cluster_profiles(settings, workload))


def profile_bundle(desired: DesiredState, resource: ComputePool | AIWorkload) -> ProfileBundle | None:
    """The Profile Bundle a pool or workload names (None without one, or when it is not in ``desired``)."""
    ref = resource.spec.profile_bundle_ref
    return desired.get(ProfileBundle, resource.metadata.namespace, ref.name) if ref is not None else None


def platform_cluster_profiles(desired: DesiredState, platform: Clustered) -> tuple[ClusterProfileRef, ...]:
    """:func:`cluster_profiles` of a platform or pool of ``desired``."""
    bundle = profile_bundle(desired, platform) if isinstance(platform, ComputePool) else None
    if bundle is not None:
        return bundle_cluster_profiles(desired, bundle)
    return cluster_profiles(platform_settings(desired, platform), workload_profile(desired, platform))


def workload_cluster_profiles(
    desired: DesiredState, tenant: AIWorkload | MLPlatform, pool: ComputePool | None
) -> tuple[ClusterProfileRef, ...]:
    """The profiles a tenant attaches to its pool's cluster while it is admitted: its WorkloadProfile's,
    or its bundle's less those the pool's cluster is built from (a Fullstack bundle's infrastructure
    profile is the pool's own, never attached twice, never detached with the workload)."""
    bundle = profile_bundle(desired, tenant) if isinstance(tenant, AIWorkload) else None
    if bundle is None:
        ref = tenant.spec.workload_profile_ref
        found = desired.get(WorkloadProfile, tenant.metadata.namespace, ref.name) if ref is not None else None
        return cluster_profiles(None, found)
    own = {r.uid for r in platform_cluster_profiles(desired, pool)} if pool is not None else set()
    return tuple(r for r in bundle_cluster_profiles(desired, bundle) if r.uid not in own)


def unbuildable(desired: DesiredState) -> list[Clustered]:
    """Valid, non-suspended dedicated platforms and pools whose cluster would have no cluster profile."""
    clustered: list[Clustered] = [p for p in desired.platforms() if not is_tenant(p)]
    clustered += list(desired.of_kind(ComputePool))
    # The profiles depend on the namespace and the two references only: thousands of platforms of a
    # namespace share a few answers.
    known: dict[tuple[str, str | None, str | None], bool] = {}
    out: list[Clustered] = []
    for p in clustered:
        if p.spec.suspend or (isinstance(p, ComputePool) and p.spec.profile_bundle_ref is not None):
            continue  # a bundle's profiles: an Infrastructure or Fullstack bundle always lists some
        ref, workload = p.spec.compute_profile_ref, p.spec.workload_profile_ref
        key = (
            p.metadata.namespace,
            ref.name if ref is not None and ref.name else None,
            workload.name if workload is not None else None,
        )
        has = known.get(key)
        if has is None:
            has = known[key] = has_cluster_profile(desired, *key)
        if not has:
            out.append(p)
    return out


def _diagnostic(desired: DesiredState, platform: Clustered, severity: Severity) -> Diagnostic:
    meta = platform.metadata
    loaded = desired.resources.get((platform.kind, meta.namespace, meta.name))
    source = loaded.source if loaded is not None else SourceRef("", 0, 0)
    return no_profile_diagnostic((platform.kind, meta.namespace, meta.name), source, severity)


def no_profile_diagnostic(
    identity: tuple[str, str, str], source: SourceRef, severity: Severity
) -> Diagnostic:
    """The diagnostic of a platform or pool whose cluster would have no cluster profile."""
    message = (
        f"{NO_CLUSTER_PROFILE}: name one in Settings spec.palette.clusterProfiles or in the "
        "WorkloadProfile's spec.clusterProfiles"
    )
    kind, namespace, name = identity
    return Diagnostic(source.file, source.line, source.column, message, severity, kind, namespace, name)


def profile_warnings(desired: DesiredState) -> list[Diagnostic]:
    """``validate`` warnings: one per platform or pool that ``plan`` and ``run`` will reject for lack of
    profiles."""
    return [_diagnostic(desired, p, Severity.WARNING) for p in unbuildable(desired)]


def reject_unbuildable(desired: DesiredState) -> DesiredState:
    """``desired`` with every platform lacking a cluster profile moved to ``invalid`` (reason InvalidSpec:
    its cluster, if any, is kept as it is and nothing is sent to Palette for it). Unchanged when every
    platform has one."""
    bad = unbuildable(desired)
    if not bad:
        return desired
    keys: set[tuple[str, str, str]] = {(p.kind, p.metadata.namespace, p.metadata.name) for p in bad}
    invalid = dict(desired.invalid)
    for p in bad:
        identity = (p.kind, p.metadata.namespace, p.metadata.name)
        invalid[identity] = [*invalid.get(identity, []), _diagnostic(desired, p, Severity.ERROR)]
    return DesiredState(
        revision=desired.revision,
        resources={k: v for k, v in desired.resources.items() if k not in keys},
        invalid=invalid,
        diagnostics=list(desired.diagnostics),
        complete=desired.complete,
    )
