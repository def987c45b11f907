"""Builders of machines, clusters and desired states for the allocation and plan tests."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from reconciler.inventory import HostState, Inventory, Machine, Role
from reconciler.model.desired import DesiredState, Loaded, SourceRef
from reconciler.model.gpu import canonical_family
from reconciler.model.observed import ManagedCluster, cluster_name, managed_labels
from reconciler.model.pools import POOL_MODE_LABEL, pool_cluster_labels
from reconciler.model.resources import (
    AIWorkload,
    ComputePool,
    ComputeProfile,
    MLPlatform,
    Project,
    Resource,
    Settings,
    WorkloadProfile,
)
from reconciler.plan import Plan, make_plan

NS = "project-a"

R = TypeVar("R", bound=Resource)


def resource(
    model: type[R],
    api_version: str,
    name: str,
    spec: Mapping[str, Any] | None,
    *,
    ns: str = NS,
    **metadata: Any,
) -> R:
    """``model`` validated from its document (kind: the model's name): metadata ``name`` in ``ns`` and any
    other ``metadata`` (labels=, annotations=); no spec key when ``spec`` is None."""
    document: dict[str, Any] = {
        "apiVersion": api_version,
        "kind": model.__name__,
        "metadata": {"name": name, "namespace": ns, **metadata},
    }
    if spec is not None:
        document["spec"] = dict(spec)
    return model.model_validate(document)


def gpu_requests(gpus: Mapping[str, int] | None) -> list[dict[str, Any]]:
    """The ``spec.gpus`` list of ``{family: count}``."""
    return [{"family": f, "count": c} for f, c in (gpus or {}).items()]


def machine(
    name: str,
    gpus: int = 0,
    family: str | None = "NVIDIA-H100",
    *,
    arch: str = "amd64",
    role: Role | None = None,
    tagged: bool = False,
    groups: Mapping[str, str] | None = None,
    state: HostState = HostState.AVAILABLE,
    cpus: int = 16,
) -> Machine:
    """A machine named (and with uid) ``name``; the role follows the discovery rules unless given."""
    if role is None:
        role = Role.WORKER if tagged or gpus > 0 else Role.CONTROL_PLANE
    return Machine(
        uid=name,
        name=name,
        arch=arch,
        cpus=cpus,
        gpu_family=canonical_family(family) if gpus > 0 and family else None,
        gpu_count=gpus,
        gpu_memory_bytes=None,
        role=role,
        worker_tagged=tagged,
        resource_groups=dict(groups or {}),
        state=state,
    )


def cps(n: int, prefix: str = "cp", **kw: Any) -> list[Machine]:
    return [machine(f"{prefix}-{i}", 0, None, **kw) for i in range(n)]


def inventory(machines: Iterable[Machine]) -> Inventory:
    return Inventory(machines=tuple(machines))


def profile(
    name: str = "edge-compute-profile",
    *,
    ns: str = NS,
    node_count: int = 1,
    min_workers: int | None = None,
    limits: Mapping[str, int] | None = None,
    edge: Mapping[str, Any] | None = None,
) -> ComputeProfile:
    spec: dict[str, Any] = {"controlPlaneDefaults": {"nodeCount": node_count}}
    if edge is not None:
        spec["edge"] = dict(edge)
    if min_workers is not None:
        spec["minWorkerNodes"] = min_workers
    if limits:
        spec["gpuLimits"] = dict(limits)
    return resource(ComputeProfile, "palette.ai/v1alpha1", name, spec, ns=ns)


def workload(name: str = "wp", *, ns: str = NS, min_nodes: str | None = None) -> WorkloadProfile:
    labels = {"palette.ai/min-nodes": min_nodes} if min_nodes is not None else {}
    return resource(WorkloadProfile, "mural.spectrocloud.com/v1alpha1", name, None, ns=ns, labels=labels)


def project(ns: str = NS, profile_name: str = "edge-compute-profile") -> Project:
    return resource(
        Project,
        "mural.sh/v1alpha1",
        ns,
        {"computeProfileRef": {"name": profile_name}, "settingsRef": {"name": "palette"}},
        ns=ns,
    )


INFRA_PROFILE_UID = "6651a2b3c4d5e6f708192a3b"


def settings(ns: str = NS, cluster_profiles: Iterable[str] = (INFRA_PROFILE_UID,)) -> Settings:
    """The namespace's Settings ``palette``: every cluster is built from ``cluster_profiles``."""
    palette = {
        "hostUrl": "https://api.spectrocloud.com",
        "defaultProjectID": "6514216503b1d1cd4f1bdc44",
        "apiKeySecretRef": {"env": "PALETTE_API_KEY"},
        "clusterProfiles": [{"uid": uid} for uid in cluster_profiles],
    }
    return resource(Settings, "mural.sh/v1alpha1", "palette", {"palette": palette}, ns=ns)


def platform(
    name: str,
    gpus: Mapping[str, int] | None = None,
    *,
    ns: str = NS,
    profile_name: str | None = None,
    override_min: int | None = None,
    workload_name: str | None = None,
    groups: Mapping[str, str] | None = None,
    mode: str = "dedicated",
    suspend: bool = False,
    annotations: Mapping[str, str] | None = None,
    pool_name: str | None = None,
) -> MLPlatform:
    spec: dict[str, Any] = {
        "mode": mode,
        "gpus": gpu_requests(gpus),
        "suspend": suspend,
    }
    ref: dict[str, Any] = {}
    if profile_name is not None:
        ref["name"] = profile_name
    if override_min is not None:
        ref["override"] = {"minWorkerNodes": override_min}
    if ref:
        spec["computeProfileRef"] = ref
    if workload_name is not None:
        spec["workloadProfileRef"] = {"name": workload_name}
    if groups:
        spec["resourceGroups"] = dict(groups)
    if pool_name is not None:
        spec["computePoolRef"] = {"name": pool_name}
    return resource(MLPlatform, "palette.ai/v1alpha1", name, spec, ns=ns, annotations=dict(annotations or {}))


def desired(*resources: Resource, revision: str | None = "abc123", complete: bool = True) -> DesiredState:
    """A desired state of ``resources``; a Project, profile and Settings (with an infrastructure cluster
    profile) are added for namespaces lacking them."""
    state = DesiredState(revision=revision, complete=complete)
    items = list(resources)
    namespaces = {r.metadata.namespace for r in items if isinstance(r, (MLPlatform, ComputePool, AIWorkload))}
    for ns in sorted(namespaces):
        if not any(isinstance(r, Project) and r.metadata.namespace == ns for r in items):
            items.append(project(ns))
        if not any(isinstance(r, ComputeProfile) and r.metadata.namespace == ns for r in items):
            items.append(profile(ns=ns))
        if not any(isinstance(r, Settings) and r.metadata.namespace == ns for r in items):
            items.append(settings(ns))
    for i, r in enumerate(items):
        key = (r.kind, r.metadata.namespace, r.metadata.name)
        state.resources[key] = Loaded(r, SourceRef(f"{r.metadata.namespace}/{r.kind.lower()}.yaml", i + 1, 1))
    return state


def cluster(
    name: str,
    control_plane: Iterable[str],
    workers: Iterable[str],
    *,
    ns: str = NS,
    state: str = "Running",
    arch: str | None = None,
    uid: str | None = None,
) -> ManagedCluster:
    return ManagedCluster(
        uid=uid or f"uid-{ns}-{name}",
        name=cluster_name(ns, name),
        namespace=ns,
        platform=name,
        state=state,
        control_plane=tuple(sorted(control_plane)),
        workers=tuple(sorted(workers)),
        arch=arch,
        labels=managed_labels(ns, name),
    )


def pool(
    name: str,
    gpus: Mapping[str, int] | None = None,
    *,
    ns: str = NS,
    mode: str = "shared",
    profile_name: str | None = None,
    min_workers: int | None = None,
    workload_name: str | None = None,
    groups: Mapping[str, str] | None = None,
    suspend: bool = False,
    scaling_policy: str | None = None,
) -> ComputePool:
    spec: dict[str, Any] = {
        "mode": mode,
        "gpus": gpu_requests(gpus),
        "suspend": suspend,
    }
    if profile_name is not None:
        spec["computeProfileRef"] = {"name": profile_name}
    if min_workers is not None:
        spec["minWorkerNodes"] = min_workers
    if workload_name is not None:
        spec["workloadProfileRef"] = {"name": workload_name}
    if groups:
        spec["resourceGroups"] = dict(groups)
    if scaling_policy is not None:
        spec["scalingPolicyRef"] = {"name": scaling_policy}
    return resource(ComputePool, "spectrocloud.com/v1alpha1", name, spec, ns=ns)


def ai_workload(
    name: str,
    pool_name: str,
    gpus: Mapping[str, int] | None = None,
    *,
    ns: str = NS,
    priority: int = 0,
    suspend: bool = False,
    workload_name: str | None = None,
    replicas: int | None = None,
) -> AIWorkload:
    spec: dict[str, Any] = {
        "computePoolRef": {"name": pool_name},
        "gpus": gpu_requests(gpus),
        "priority": priority,
        "suspend": suspend,
    }
    if replicas is not None:
        spec["replicas"] = replicas
    if workload_name is not None:
        spec["workloadProfileRef"] = {"name": workload_name}
    return resource(AIWorkload, "spectrocloud.com/v1alpha1", name, spec, ns=ns)


def pool_cluster(
    name: str,
    control_plane: Iterable[str],
    workers: Iterable[str],
    *,
    ns: str = NS,
    mode: str | None = "shared",
    state: str = "Running",
) -> ManagedCluster:
    """A managed cluster of a ComputePool (labelled with its kind and, unless None, its mode)."""
    labels = pool_cluster_labels(ns, name, mode or "shared")
    if mode is None:
        labels.pop(POOL_MODE_LABEL)
    return ManagedCluster(
        uid=f"uid-pool-{ns}-{name}",
        name=cluster_name(ns, name),
        namespace=ns,
        platform=name,
        state=state,
        control_plane=tuple(sorted(control_plane)),
        workers=tuple(sorted(workers)),
        labels=labels,
    )


def plans_in_two_orders(
    machines: Sequence[Machine], resources: Sequence[Resource], rnd: random.Random
) -> tuple[Plan, Plan]:
    """The plan of ``resources`` on ``machines`` as given, and again with both shuffled by ``rnd``."""
    first = make_plan(desired(*resources), Inventory(tuple(machines)), [])
    shuffled_m, shuffled_r = list(machines), list(resources)
    rnd.shuffle(shuffled_m)
    rnd.shuffle(shuffled_r)
    return first, make_plan(desired(*shuffled_r), Inventory(tuple(shuffled_m)), [])
