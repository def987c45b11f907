"""Every fallback and precedence rule of the resources, and routing to Palette, in one place (pure).

docs/validation.md. Whoever needs one of these answers (validation, allocation, planning, the
controller, the applier) asks here, so a rule is written once:

- ComputeProfile of a platform or ComputePool: its ``computeProfileRef.name``, else its Project's.
- Settings of a platform: its ComputeProfile's ``settingsRef``, else its Project's; of a ComputeProfile or
  Compute: its own, else its Project's. An invalid platform (no usable profile) uses its Project's, so its
  cluster is still found.
- VIP of a platform or pool: its ``spec.edge.vip``, else its ComputeProfile's ``spec.edge.vip``.
- Minimum workers of a platform: the WorkloadProfile's label ``palette.ai/min-nodes`` (a positive
  integer), else ``computeProfileRef.override.minWorkerNodes``, else the profile's ``minWorkerNodes``,
  else 0. Of a ComputePool: its WorkloadProfile's label, else the pool's ``spec.minWorkerNodes``, else
  the profile's ``minWorkerNodes``, else 0.
- GPU limits: a platform's request above ``gpuLimits[family]`` (families compared canonically) is
  refused. A pool's own ``gpus`` have no limit (the limits apply to each of its workloads).
- Modes: a ``dedicated`` platform gets its own cluster; a ``shared`` one is a tenant of its ComputePool
  (:func:`is_tenant`) and is admitted, not placed.
- Routing: which Palette target ``(url, projectUid)`` each platform, pool and Compute talks to, or why
  none. A pool routes like a platform (its ComputeProfile's Settings, else the Project's); a shared
  platform has no cluster and is not routed (its pool is).
  ``plan`` (offline and online) and ``run`` call the same :func:`route`, so they plan the same inputs the
  same way.
- Shards: which namespaces one ``run --namespaces`` instance owns (:class:`NamespaceSelector`): the one
  place that says "is this namespace mine", for resources and for managed clusters alike.

The functions take the resources themselves (and a lookup where a reference must be followed), so
the loader, which works on documents still being validated, and the planner, which works on a
:class:`~reconciler.model.desired.DesiredState`, share them.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from reconciler.model.bundle import ProfileBundle
from reconciler.model.gpu import GpuFamily, canonical_family
from reconciler.model.resources import (
    Compute,
    ComputePool,
    ComputeProfile,
    MLPlatform,
    Project,
    SecretRef,
    Settings,
    WorkloadProfile,
)

if TYPE_CHECKING:  # only for annotations: the model does not depend on this module at import time
    from reconciler.model.desired import DesiredState, PlatformKey

MIN_NODES_LABEL = "palette.ai/min-nodes"
DEDICATED = "dedicated"
SHARED = "shared"

# What gets a cluster of its own: a dedicated MLPlatform or a ComputePool.
Clustered = MLPlatform | ComputePool


def is_tenant(platform: MLPlatform) -> bool:
    """A shared-mode platform is a tenant of a ComputePool: admitted into it, never given a cluster."""
    return platform.spec.mode == SHARED


# --- references and fallbacks --------------------------------------------------------------------


def compute_profile_name(resource: Clustered, project: Project | None) -> str | None:
    """The ComputeProfile a platform or pool uses: its own reference, else its namespace's Project's."""
    ref = resource.spec.compute_profile_ref
    return profile_name(ref.name if ref is not None else None, project)


def profile_name(own: str | None, project: Project | None) -> str | None:
    """:func:`compute_profile_name` from the name a resource's own ``computeProfileRef`` gives."""
    if own:
        return own
    return project.spec.compute_profile_ref.name if project is not None else None


def settings_name(own: str | None, project: Project | None) -> str | None:
    """A Settings reference with the Project fallback (ComputeProfile, Compute, platform)."""
    if own:
        return own
    if project is not None and project.spec.settings_ref is not None:
        return project.spec.settings_ref.name
    return None


def platform_settings_name(profile: ComputeProfile | None, project: Project | None) -> str | None:
    """A platform talks to its ComputeProfile's Settings, else its Project's."""
    own = profile.spec.settings_ref.name if profile is not None and profile.spec.settings_ref else None
    return settings_name(own, project)


def compute_settings_name(compute: Compute, project: Project | None) -> str | None:
    own = compute.spec.settings_ref.name if compute.spec.settings_ref is not None else None
    return settings_name(own, project)


def compute_profile(desired: DesiredState, resource: Clustered) -> ComputeProfile | None:
    ns = resource.metadata.namespace
    name = compute_profile_name(resource, desired.project(ns))
    return desired.get(ComputeProfile, ns, name) if name else None


def workload_profile(desired: DesiredState, resource: Clustered) -> WorkloadProfile | None:
    """The WorkloadProfile whose ``palette.ai/min-nodes`` a platform or pool follows: its
    ``workloadProfileRef``; for a pool built from a Profile Bundle, the bundle's WorkloadProfile asking for
    the most nodes (else its first), as a pool WorkloadProfile's label applies (docs/bundles.md)."""
    ns = resource.metadata.namespace
    bundle_ref = resource.spec.profile_bundle_ref if isinstance(resource, ComputePool) else None
    if bundle_ref is not None:
        bundle = desired.get(ProfileBundle, ns, bundle_ref.name)
        found = (
            [desired.get(WorkloadProfile, ns, r.name) for r in bundle.spec.workload_profiles]
            if bundle
            else []
        )
        profiles = [p for p in found if p is not None]

        def nodes(p: WorkloadProfile) -> int:
            parsed = parse_min_nodes(p.metadata.labels.get(MIN_NODES_LABEL, ""))
            return parsed if parsed is not None else -1

        return max(profiles, key=nodes) if profiles else None
    ref = resource.spec.workload_profile_ref
    return desired.get(WorkloadProfile, ns, ref.name) if ref is not None else None


def settings(desired: DesiredState, namespace: str, own: str | None = None) -> Settings | None:
    """The Settings named ``own`` in ``namespace``, else the Project's (None when neither resolves)."""
    name = settings_name(own, desired.project(namespace))
    return desired.get(Settings, namespace, name) if name else None


# --- VIP -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Vip:
    address: str
    from_platform: bool  # True: the platform's spec.edge.vip; False: its ComputeProfile's


def vip(resource: Clustered, profile: ComputeProfile | None) -> Vip | None:
    """The VIP of a platform's or pool's cluster: its own ``spec.edge.vip`` over its profile's."""
    return vip_of(resource.spec.edge.vip if resource.spec.edge is not None else None, profile)


def vip_of(own: str | None, profile: ComputeProfile | None) -> Vip | None:
    """:func:`vip` from the resource's own ``spec.edge.vip``."""
    if own:
        return Vip(own, True)
    if profile is not None and profile.spec.edge is not None and profile.spec.edge.vip:
        return Vip(profile.spec.edge.vip, False)
    return None


def vip_problem(value: str) -> str | None:
    """Why ``value`` is not a usable VIP (an IPv4 or IPv6 address), or None."""
    text = value.strip()
    if _plain_ipv4(text):
        return None
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return f"{value!r} is not an IP address (e.g. 10.10.189.24)"
    return None


_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])"
_PLAIN_IPV4 = re.compile(rf"{_OCTET}(?:\.{_OCTET}){{3}}", re.ASCII)


def _plain_ipv4(text: str) -> bool:
    """Dotted-quad IPv4 as ``ipaddress`` accepts it (no leading zeros), told without parsing: every
    platform of a tree has a VIP."""
    return _PLAIN_IPV4.fullmatch(text) is not None


# --- minimum workers -----------------------------------------------------------------------------


def parse_min_nodes(text: str) -> int | None:
    """The ``palette.ai/min-nodes`` label: a positive integer such as '3'; None when it is not one."""
    value = text.strip()
    if value.isascii() and value.isdigit() and len(value) <= 6 and int(value) > 0:
        return int(value)
    return None


def min_nodes_problem(text: str) -> str:
    shown = repr(text) if len(text) <= 64 else repr(text[:64]) + "..."
    return f"must be a positive integer such as '3'; got {shown}"


@dataclass(frozen=True, slots=True)
class Invalid:
    """A rule that cannot be applied because its input is wrong (reported as InvalidSpec)."""

    message: str


def _min_nodes_label(workload: WorkloadProfile | None) -> int | Invalid | None:
    label = workload.metadata.labels.get(MIN_NODES_LABEL) if workload is not None else None
    if label is None:
        return None
    parsed = parse_min_nodes(label)
    if parsed is None:
        return Invalid(f"WorkloadProfile label {MIN_NODES_LABEL}: {min_nodes_problem(label)}")
    return parsed


def min_workers(
    platform: MLPlatform, profile: ComputeProfile, workload: WorkloadProfile | None
) -> int | Invalid:
    """Minimum worker nodes, by precedence: label > override > profile > none (0)."""
    label = _min_nodes_label(workload)
    if label is not None:
        return label
    ref = platform.spec.compute_profile_ref
    override = ref.override if ref is not None else None
    if override is not None and override.min_worker_nodes is not None:
        return override.min_worker_nodes
    if profile.spec.min_worker_nodes is not None:
        return profile.spec.min_worker_nodes
    return 0


def pool_min_workers(
    pool: ComputePool, profile: ComputeProfile, workload: WorkloadProfile | None
) -> int | Invalid:
    """Minimum worker nodes of a pool's cluster: its WorkloadProfile's label > the pool's
    ``minWorkerNodes`` > the profile's > none (0) (docs/pools.md)."""
    label = _min_nodes_label(workload)
    if label is not None:
        return label
    if pool.spec.min_worker_nodes is not None:
        return pool.spec.min_worker_nodes
    if profile.spec.min_worker_nodes is not None:
        return profile.spec.min_worker_nodes
    return 0


# --- GPU requests, limits and modes --------------------------------------------------------------


def requested_gpus(resource: Clustered) -> dict[GpuFamily, int] | Invalid:
    """Positive GPU requests per canonical family (requests of one family add up); a pool's ``gpus`` are
    its size."""
    gpus: dict[GpuFamily, int] = {}
    for request in resource.spec.gpus:
        try:
            family = canonical_family(request.family)
        except ValueError:
            return Invalid(f"not a GPU family name: {request.family!r}")
        gpus[family] = gpus.get(family, 0) + request.count
    return {f: c for f, c in sorted(gpus.items()) if c > 0}


def gpu_limits(profile: ComputeProfile) -> dict[GpuFamily, int]:
    limits: dict[GpuFamily, int] = {}
    for key, value in profile.spec.gpu_limits.items():
        try:
            limits[canonical_family(key)] = value
        except ValueError:
            continue  # validation reports it; an unreadable key limits nothing
    return limits


@dataclass(frozen=True, slots=True)
class LimitBreach:
    index: int  # position in spec.gpus
    family: GpuFamily
    count: int
    limit: int

    def message(self, profile: ComputeProfile) -> str:
        return (
            f"requests {self.count} {self.family} GPUs; ComputeProfile {profile.metadata.name} "
            f"allows at most {self.limit}"
        )


def limit_breaches(platform: MLPlatform, profile: ComputeProfile) -> list[LimitBreach]:
    """Requests above the profile's ``gpuLimits`` (a family absent from the limits has none).

    Requests of one family add up before they are compared, as allocation counts them.
    """
    return gpu_limit_breaches([(g.family, g.count) for g in platform.spec.gpus], profile)


def gpu_limit_breaches(gpus: Sequence[tuple[str, int]], profile: ComputeProfile) -> list[LimitBreach]:
    """:func:`limit_breaches` of a platform's ``spec.gpus`` as (family, count) pairs."""
    limits = gpu_limits(profile)
    totals: dict[GpuFamily, tuple[int, int]] = {}
    for i, (name, requested) in enumerate(gpus):
        try:
            family = canonical_family(name)
        except ValueError:
            continue
        first, count = totals.get(family, (i, 0))
        totals[family] = (first, count + requested)
    return [
        LimitBreach(first, family, count, limits[family])
        for family, (first, count) in sorted(totals.items())
        if family in limits and count > limits[family]
    ]


# --- routing -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Target:
    """One Palette endpoint and project scope: the unit that is observed and planned together."""

    url: str
    project_uid: str | None


@dataclass
class Routing:
    """Which Palette target each platform, pool and Compute talks to, and who has none (and why).

    ``keys`` holds, per target, the API key reference of the first Settings routed to it (None: the
    default ``$PALETTE_API_KEY``, as with ``--palette``). Never a key itself. Pools are kept apart from
    platforms (``pools``, ``pool_unavailable``): a pool and a platform of one namespace may never share a
    name, but the callers that report a platform must not see pools.
    """

    platforms: dict[Target, set[PlatformKey]] = field(default_factory=dict)
    computes: dict[tuple[str, str], Target] = field(default_factory=dict)
    unavailable: dict[PlatformKey, str] = field(default_factory=dict)
    keys: dict[Target, SecretRef | None] = field(default_factory=dict)
    pools: dict[Target, set[PlatformKey]] = field(default_factory=dict)
    pool_unavailable: dict[PlatformKey, str] = field(default_factory=dict)

    @property
    def targets(self) -> set[Target]:
        return set(self.platforms) | set(self.pools) | set(self.computes.values())

    def all_platforms(self) -> set[PlatformKey]:
        return {key for keys in self.platforms.values() for key in keys}

    def all_pools(self) -> set[PlatformKey]:
        return {key for keys in self.pools.values() for key in keys}

    def target_of(self, key: PlatformKey) -> Target | None:
        return next((t for t, keys in self.platforms.items() if key in keys), None)

    def target_of_pool(self, key: PlatformKey) -> Target | None:
        return next((t for t, keys in self.pools.items() if key in keys), None)


def target_for(settings: Settings | None, palette_url: str | None, namespace: str) -> Target | str:
    """The target of a Settings (``palette_url`` replaces its ``hostUrl``), or why there is none."""
    url = palette_url or (settings.spec.palette.host_url if settings is not None else None)
    if url is None:
        return f"namespace {namespace} has no Settings and no --palette endpoint was given"
    project_uid = settings.spec.palette.default_project_id if settings is not None else None
    return Target(url.rstrip("/"), project_uid)


def route(desired: DesiredState, palette_url: str | None = None) -> Routing:
    """Route every platform and pool (valid or invalid) and Compute of ``desired`` to its Palette target.

    ``palette_url`` (``--palette``, or a snapshot for an offline plan) replaces every ``hostUrl`` and
    keeps each Settings' project scope; a namespace without Settings then talks to the whole tenant.
    A shared-mode platform has no cluster of its own and is not routed: its pool is.
    """
    routing = Routing()

    def add(
        into: dict[Target, set[PlatformKey]],
        missing: dict[PlatformKey, str],
        key: PlatformKey,
        found: Settings | None,
    ) -> None:
        target = target_for(found, palette_url, key[0])
        if isinstance(target, str):
            missing[key] = target
            return
        into.setdefault(target, set()).add(key)
        if target not in routing.keys:
            ref = found.spec.palette.api_key_secret_ref if found is not None else None
            routing.keys[target] = ref if palette_url is None else None

    def own_settings(resource: Clustered) -> Settings | None:
        ns = resource.metadata.namespace
        name = platform_settings_name(compute_profile(desired, resource), desired.project(ns))
        return desired.get(Settings, ns, name) if name else None

    for platform in desired.platforms():
        if not is_tenant(platform):
            add(
                routing.platforms,
                routing.unavailable,
                (platform.metadata.namespace, platform.metadata.name),
                own_settings(platform),
            )
    for pool in desired.of_kind(ComputePool):
        add(
            routing.pools,
            routing.pool_unavailable,
            (pool.metadata.namespace, pool.metadata.name),
            own_settings(pool),
        )
    for kind, ns, name in sorted(desired.invalid):
        if kind == "MLPlatform" and (ns, name) not in routing.unavailable:
            add(routing.platforms, routing.unavailable, (ns, name), settings(desired, ns))
        elif kind == "ComputePool" and (ns, name) not in routing.pool_unavailable:
            add(routing.pools, routing.pool_unavailable, (ns, name), settings(desired, ns))
    for compute in desired.of_kind(Compute):
        ns = compute.metadata.namespace
        own = compute_settings_name(compute, desired.project(ns))
        found = desired.get(Settings, ns, own) if own else None
        target = target_for(found, palette_url, ns)
        if not isinstance(target, str):
            routing.computes[(ns, compute.metadata.name)] = target
            if target not in routing.keys:
                ref = found.spec.palette.api_key_secret_ref if found is not None else None
                routing.keys[target] = ref if palette_url is None else None
    return routing


def in_scope(thing_project: str | None, target: Target) -> bool:
    """Palette's project scoping (as the emulator implements it): a target with a project sees what
    belongs to that project and what names no project; a tenant-scope target sees everything."""
    return target.project_uid is None or thing_project is None or thing_project == target.project_uid


LookupProfile = Callable[[str, str], ComputeProfile | None]


def profile_via(
    resource: Clustered, projects: Mapping[str, Project], lookup: LookupProfile
) -> ComputeProfile | None:
    """The ComputeProfile of a platform or pool through any lookup (the loader's index, a DesiredState)."""
    ns = resource.metadata.namespace
    name = compute_profile_name(resource, projects.get(ns))
    return lookup(ns, name) if name else None


# --- shards --------------------------------------------------------------------------------------

_PATTERN = re.compile(r"^[a-z0-9*?\[\]!-]+$")


@dataclass(frozen=True, slots=True)
class NamespaceSelector:
    """The namespaces one reconciler owns: shell globs (``team-a-*``, ``ml-prod``), case-sensitive.

    No patterns: every namespace (an unsharded instance). A shard plans, applies and reports only the
    resources of namespaces it owns, and counts as its own only managed clusters whose
    ``palette.ai/namespace`` label it owns: another shard's clusters are never planned or pruned.
    """

    patterns: tuple[str, ...] = ()

    @property
    def everything(self) -> bool:
        return not self.patterns

    def owns(self, namespace: str) -> bool:
        return not self.patterns or any(fnmatch.fnmatchcase(namespace, p) for p in self.patterns)

    @classmethod
    def parse(cls, text: str) -> NamespaceSelector:
        """``team-a-*,ml-prod``: comma-separated globs; ValueError saying what is wrong otherwise."""
        patterns = tuple(part.strip() for part in text.split(","))
        if not any(patterns):
            raise ValueError("--namespaces needs at least one namespace or glob, e.g. 'team-a-*,ml-prod'")
        for pattern in patterns:
            if not pattern:
                raise ValueError(f"--namespaces {text!r} has an empty entry")
            if not _PATTERN.match(pattern):
                raise ValueError(
                    f"--namespaces entry {pattern!r} is not a namespace or glob: use lowercase letters, "
                    "digits, '-' and the glob characters * ? [ ] !"
                )
        return cls(tuple(dict.fromkeys(patterns)))

    def __str__(self) -> str:
        return ",".join(self.patterns) if self.patterns else "*"


EVERY_NAMESPACE = NamespaceSelector()
