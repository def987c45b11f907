"""Chaining pure passes: plan a revision, carry the plan out on a simulated Palette, feed what the status
branch would record (admissions, MIG layouts, pool modes) into the next plan. No I/O, no clock.

A :class:`World` is the state between passes: machines (their in-use state follows the clusters),
managed clusters, and the records of the last pass. ``World.step`` plans a desired state with
:func:`reconciler.plan.plan_targets` exactly as ``run`` does and returns the merged plan and the world
after it is applied (deletions done, creates and scales done, profiles attached as the shell would).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import yaml

from reconciler.inventory import HostState, Inventory, Machine, discover
from reconciler.manifests import load_files
from reconciler.model.conditions import Reason
from reconciler.model.desired import DesiredState
from reconciler.model.observed import ManagedCluster
from reconciler.model.pools import POOL_KIND, PoolKey, WorkloadKey
from reconciler.placement.admission_types import PreviousAdmission, WorkloadAction
from reconciler.placement.mig_layouts import GpuLayout, parse_mig_layouts
from reconciler.plan import Action, Observed, Plan, PlatformPlan, merge, plan_targets
from reconciler.resolve import Target, route
from tests._allocate_support import cluster, pool_cluster
from tests._inventory_support import edge_host

URL = "inventory:chain"
PROJECT = "6514216503b1d1cd4f1bdc44"


def a100_mig_hosts(n: int, prefix: str = "gpu") -> list[Machine]:
    """Hosts ``gpu-0``.. with 8 MIG-capable A100 80GB each, as discovery reads the agent's report."""
    entry = {"vendor": "NVIDIA", "model": "GA100 [A100 SXM4 80GB]", "gpuCount": 8, "memory": "81920 MiB"}
    hosts = [
        edge_host(f"uid-{prefix}-{h}", name=f"{prefix}-{h}", gpus=[{**entry, "migCapable": True}])
        for h in range(n)
    ]
    hosts += [edge_host(f"uid-cp-{h}", name=f"cp-{h}") for h in range(n)]
    return list(discover(hosts).machines)


def load(files: Mapping[str, Any], revision: str = "r") -> DesiredState:
    """The desired state of ``files`` (path -> a document, a list of documents, or raw text)."""
    raw: list[tuple[str, bytes]] = []
    for path, content in sorted(files.items()):
        if isinstance(content, str):
            raw.append((path, content.encode()))
        elif isinstance(content, list):
            raw.append((path, yaml.safe_dump_all(content, sort_keys=False).encode()))
        else:
            raw.append((path, yaml.safe_dump(content, sort_keys=False).encode()))
    return load_files(raw, revision=revision)


@dataclass(frozen=True)
class Binding:
    """What a workload holds after a pass: pool, GPUs, MIG instances and attached profile uids."""

    pool: str | None
    gpus: tuple[tuple[str, int], ...]
    mig: tuple[tuple[str, int, str, int], ...]
    profiles: tuple[str, ...]


@dataclass(frozen=True)
class World:
    machines: tuple[Machine, ...]
    clusters: tuple[ManagedCluster, ...] = ()
    previous: Mapping[PoolKey, tuple[PreviousAdmission, ...]] = field(default_factory=dict)
    layouts: Mapping[PoolKey, tuple[GpuLayout, ...]] = field(default_factory=dict)
    modes: Mapping[PoolKey, str] = field(default_factory=dict)
    attached: Mapping[WorkloadKey, tuple[str, tuple[str, ...]]] = field(default_factory=dict)

    def plan(self, desired: DesiredState, max_deletions: int = 1, approved: int | None = None) -> Plan:
        routing = route(desired, URL)
        targets = set(routing.targets) or {Target(URL, PROJECT)}
        observed = {t: Observed(Inventory(self.machines), self.clusters) for t in targets}
        plans = plan_targets(
            desired,
            routing,
            observed,
            max_deletions=max_deletions,
            previous=self.previous,
            pool_modes=self.modes,
            previous_layouts=self.layouts,
            approved_deletions=approved,
        )
        return merge(desired.revision, plans, desired.diagnostics)

    def step(
        self, desired: DesiredState, max_deletions: int = 1, approved: int | None = None
    ) -> tuple[Plan, World]:
        plan = self.plan(desired, max_deletions, approved)
        return plan, self.applied(plan)

    def applied(self, plan: Plan) -> World:
        clusters: list[ManagedCluster] = []
        entries: list[tuple[PlatformPlan, str | None]] = [(p, None) for p in plan.platforms]
        entries += [(p.cluster, p.mode) for p in plan.pools]
        for entry, mode in entries:
            if entry.action is Action.DELETE or not (entry.control_plane or entry.workers):
                continue
            if entry.kind == POOL_KIND:
                clusters.append(
                    pool_cluster(
                        entry.name,
                        entry.control_plane,
                        entry.workers,
                        ns=entry.namespace,
                        mode=mode or "shared",
                    )
                )
            else:
                clusters.append(cluster(entry.name, entry.control_plane, entry.workers, ns=entry.namespace))
        used = {u for c in clusters for u in c.hosts}
        machines = tuple(
            replace(m, state=HostState.IN_USE if m.uid in used else HostState.AVAILABLE)
            for m in self.machines
        )
        previous: dict[PoolKey, list[PreviousAdmission]] = {}
        attached: dict[WorkloadKey, tuple[str, tuple[str, ...]]] = {}
        running = {p.key for p in plan.pools}
        for w in plan.workloads:
            if w.action is WorkloadAction.REMOVE or w.pool is None:
                continue
            if w.gpus or w.mig:
                held = PreviousAdmission(w.key, tuple(u.ref for u in w.gpus), tuple(sorted(w.mig)), w.kind)
                previous.setdefault((w.namespace, w.pool), []).append(held)
            holds = w.action in (WorkloadAction.ADMIT, WorkloadAction.ADMITTED) or bool(w.gpus or w.mig)
            if not holds or (w.namespace, w.pool) not in running:
                continue
            blocked = w.reason is Reason.PRUNE_BLOCKED  # held back by the deletion guard: as it was
            if w.action in (WorkloadAction.ADMIT, WorkloadAction.ADMITTED) and w.pool_running and not blocked:
                attached[w.key] = (w.pool, tuple(sorted(r.uid for r in w.cluster_profiles)))
            elif w.key in self.attached:
                attached[w.key] = self.attached[w.key]  # the shell keeps what was attached
        layouts = {p.key: parse_mig_layouts(dict(p.mig) or None) for p in plan.pools if p.mig}
        modes = {p.key: p.mode for p in plan.pools if p.mode is not None}
        return World(
            machines,
            tuple(_running(c) for c in clusters),
            {k: tuple(v) for k, v in previous.items()},
            layouts,
            modes,
            attached,
        )

    def bindings(self, plan: Plan) -> dict[WorkloadKey, Binding]:
        """Per workload holding something after ``plan``: its pool, GPUs, MIG instances, profiles."""
        after = self.applied(plan)
        out: dict[WorkloadKey, Binding] = {}
        for w in plan.workloads:
            if w.action is WorkloadAction.REMOVE or not (w.gpus or w.mig):
                continue
            out[w.key] = Binding(
                w.pool,
                tuple(sorted((u.host_uid, u.index) for u in w.gpus)),
                tuple(sorted((m.host_uid, m.gpu, m.profile, m.start) for m in w.mig)),
                after.attached.get(w.key, ("", ()))[1],
            )
        return out


def _running(c: ManagedCluster) -> ManagedCluster:
    return replace(c, state="Running")


def hosts_of(plan: Plan) -> dict[tuple[str, str, str], tuple[tuple[str, ...], tuple[str, ...]]]:
    """(kind, namespace, name) -> (control plane, workers) of every cluster entry of ``plan`` that holds
    hosts."""
    out = {("MLPlatform", *p.key): (p.control_plane, p.workers) for p in plan.platforms}
    out |= {(POOL_KIND, *p.key): (p.cluster.control_plane, p.cluster.workers) for p in plan.pools}
    return {k: v for k, v in out.items() if v != ((), ())}


NS = "project-a"
PROFILE_UIDS = ("66f1a2b3c4d5e6f7a8b9c0d1",)


def _doc(kind: str, api: str, name: str, ns: str = NS, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": ns}, "spec": spec}


def _workload(name: str, gpus: list[dict[str, Any]], kind: str = "AIWorkload") -> dict[str, Any]:
    api = "spectrocloud.com/v1alpha1" if kind == "AIWorkload" else "palette.ai/v1alpha1"
    extra = {"mode": "shared"} if kind == "MLPlatform" else {}
    refs = {"computePoolRef": {"name": "shared-a100"}, "workloadProfileRef": {"name": "vllm"}}
    return _doc(kind, api, name, **extra, **refs, gpus=gpus)


def mig_pool_files() -> dict[str, Any]:
    """A namespace with a MIG pool (16 A100, a scaling policy) holding a whole-GPU workload, a MIG
    workload and a shared-mode platform, each with a WorkloadProfile's cluster profiles. Pair with
    :func:`a100_mig_hosts` (3)."""
    a100 = "NVIDIA-A100"
    rule = {"family": a100, "scaleUpThreshold": 80, "scaleDownThreshold": 30}
    rule |= {"scaleUpDuration": "5m", "scaleDownDuration": "15m"}
    palette = {"hostUrl": "https://api.spectrocloud.com", "defaultProjectID": PROJECT}
    palette |= {
        "apiKeySecretRef": {"env": "PALETTE_API_KEY"},
        "clusterProfiles": [{"uid": "6651a2b3c4d5e6f708192a3b"}],
    }
    return {
        "project-a/project.yaml": _doc(
            "Project",
            "mural.sh/v1alpha1",
            NS,
            computeProfileRef={"name": "edge"},
            settingsRef={"name": "palette"},
        ),
        "project-a/settings.yaml": _doc("Settings", "mural.sh/v1alpha1", "palette", palette=palette),
        "project-a/computeprofile.yaml": _doc(
            "ComputeProfile",
            "palette.ai/v1alpha1",
            "edge",
            controlPlaneDefaults={"nodeCount": 1},
            gpuLimits={a100: 16},
        ),
        "project-a/workloadprofile.yaml": _doc(
            "WorkloadProfile",
            "mural.spectrocloud.com/v1alpha1",
            "vllm",
            clusterProfiles=[{"uid": u} for u in PROFILE_UIDS],
        ),
        "project-a/scalingpolicy.yaml": _doc(
            "ScalingPolicy",
            "spectrocloud.com/v1alpha1",
            "gpu-autoscale",
            gpu=[rule],
            gpuResourceBounds=[{"family": a100, "minGPUCount": 8, "maxGPUCount": 24}],
        ),
        "project-a/pool.yaml": _doc(
            "ComputePool",
            "spectrocloud.com/v1alpha1",
            "shared-a100",
            mode="shared",
            gpus=[{"family": a100, "count": 16}],
            mig={"strategy": "mixed"},
            scalingPolicyRef={"name": "gpu-autoscale"},
        ),
        "project-a/workloads/whole.yaml": _workload("whole", [{"family": a100, "count": 2}]),
        "project-a/workloads/sliced.yaml": _workload(
            "sliced", [{"family": a100, "mig": "3g.40gb", "count": 1}]
        ),
        "project-a/workloads/tenant.yaml": _workload("tenant", [{"family": a100, "count": 1}], "MLPlatform"),
    }
