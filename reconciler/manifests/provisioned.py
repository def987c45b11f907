"""Pools provisioned for a workload (pure; docs/bundles.md, "A pool of its own").

An AIWorkload with a Fullstack ProfileBundle that names neither ``spec.computePoolRef`` nor
``spec.environmentRef`` gets a dedicated pool of its own. This module is the one place that derives it:
:func:`with_provisioned_pools` adds to the desired state, for each such workload, a ComputePool of the
workload's name (its cluster is ``<namespace>-<name>``), mode ``dedicated``, built from the workload's
bundle on the namespace's Project ComputeProfile, asking the workload's GPUs times its replicas, labelled
``palette.ai/provisioned-for: AIWorkload``, with the workload's annotations (the pool has no document of
its own: ``palette.ai/allow-replace`` on the workload lets its pool's cluster be replaced); and points
the workload's ``computePoolRef`` at it. From then on the pool is planned, applied, scaled, counted
against the quota and reported as any dedicated pool. Removing the workload removes the pool from the
desired state, so its cluster is pruned with it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from reconciler.model.base import LocalRef, ObjectMeta
from reconciler.model.bundle import FULLSTACK, ProfileBundle
from reconciler.model.desired import DesiredState, Identity, Loaded
from reconciler.model.pools import POOL_KIND, PROVISIONED_LABEL
from reconciler.model.resources import AIWorkload, ComputePool, ComputePoolSpec, GpuRequest


def provisions_pool(workload: AIWorkload, bundle: ProfileBundle | None) -> bool:
    """Whether the workload gets a pool of its own: a Fullstack bundle and neither pool reference."""
    spec = workload.spec
    return (
        bundle is not None
        and bundle.spec.type == FULLSTACK
        and spec.profile_bundle_ref is not None
        and spec.compute_pool_ref is None
        and spec.environment_ref is None
    )


def provisioned_pool(workload: AIWorkload) -> ComputePool:
    """The dedicated pool a workload provisions (see :func:`provisions_pool`): its name, its bundle, its
    whole GPUs per family times its replicas (the Project's ComputeProfile, as any pool without a
    ``computeProfileRef``)."""
    spec = workload.spec
    counts: Counter[str] = Counter()
    for request in spec.gpus:
        counts[request.family] += request.count * spec.replicas
    return ComputePool(
        api_version="spectrocloud.com/v1alpha1",
        kind="ComputePool",
        metadata=ObjectMeta(
            name=workload.metadata.name,
            namespace=workload.metadata.namespace,
            labels={PROVISIONED_LABEL: "AIWorkload"},
            annotations=dict(workload.metadata.annotations),  # the pool has no document of its own
        ),
        spec=ComputePoolSpec(
            mode="dedicated",
            profile_bundle_ref=spec.profile_bundle_ref,
            gpus=[GpuRequest(family=f, count=n) for f, n in counts.items()],
        ),
    )


def with_provisioned_pools(state: DesiredState) -> DesiredState:
    """``state`` with the pool of every workload that provisions one, and the workload pointed at it
    (unchanged when none does). The pool's source is the workload's document."""
    added: dict[Identity, Loaded] = {}
    for workload in state.of_kind(AIWorkload):
        ns, name = workload.metadata.namespace, workload.metadata.name
        ref = workload.spec.profile_bundle_ref
        bundle = state.get(ProfileBundle, ns, ref.name) if ref is not None else None
        if not provisions_pool(workload, bundle) or (POOL_KIND, ns, name) in state.resources:
            continue
        loaded = state.resources[("AIWorkload", ns, name)]
        pointed = workload.model_copy(
            update={"spec": workload.spec.model_copy(update={"compute_pool_ref": LocalRef(name=name)})}
        )
        added[("AIWorkload", ns, name)] = Loaded(resource=pointed, source=loaded.source)
        added[(POOL_KIND, ns, name)] = Loaded(resource=provisioned_pool(workload), source=loaded.source)
    if not added:
        return state
    return replace(state, resources={**state.resources, **added})
