"""Pydantic models of the resource kinds (docs/validation.md).

Field names are snake_case in Python and camelCase on the wire (aliases). Unknown fields are errors,
so a typo such as ``minWorkerNode`` is reported instead of silently ignored. Cross-field and
cross-resource rules (VIP clashes, references, ``nodeCount`` 2 only for two-node edges ...) live in
``reconciler.manifests.rules``; the constraints here are the ones JSON Schema can express.
"""

from __future__ import annotations

from typing import Literal, TypeAlias

from pydantic import ConfigDict, Field

from reconciler.model.base import ClusterProfileRef, LocalRef, Name, NonNegativeInt, ObjectMeta, Strict
from reconciler.model.bundle import ProfileBundle
from reconciler.model.environment import Environment
from reconciler.model.scaling import ScalingPolicy


class Taint(Strict):
    key: str = Field(min_length=1)
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


# --- ComputeProfile ------------------------------------------------------------------------------


class NetworkOverlayConfig(Strict):
    enabled: bool = False
    static_ip: bool = False
    cidr: str | None = None
    overlay_network_type: str | None = None


class EdgeConfig(Strict):
    vip: str | None = None
    ntp_servers: list[str] = Field(default_factory=list)
    network_overlay_config: NetworkOverlayConfig | None = None
    is_two_node: bool = False


class ControlPlaneDefaults(Strict):
    node_count: Literal[1, 2, 3, 5] = Field(
        description="Control-plane nodes: 1, 3 or 5 for quorum; 2 only when edge.isTwoNode is true."
    )
    worker_node_eligible: bool = False
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    taints: list[Taint] = Field(default_factory=list)


class WorkerPoolDefaults(Strict):
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    taints: list[Taint] = Field(default_factory=list)


class ComputeProfileSpec(Strict):
    ssh_keys: list[str] = Field(default_factory=list)
    settings_ref: LocalRef | None = None
    edge: EdgeConfig | None = None
    control_plane_defaults: ControlPlaneDefaults
    worker_pool_defaults: WorkerPoolDefaults | None = None
    min_worker_nodes: NonNegativeInt | None = None
    gpu_limits: dict[str, NonNegativeInt] = Field(
        default_factory=dict, description="Maximum GPUs an MLPlatform may request, per GPU family."
    )


class ComputeProfile(Strict):
    api_version: Literal["palette.ai/v1alpha1"]
    kind: Literal["ComputeProfile"]
    metadata: ObjectMeta
    spec: ComputeProfileSpec


# --- MLPlatform ----------------------------------------------------------------------------------


class ComputeProfileOverride(Strict):
    min_worker_nodes: NonNegativeInt | None = None


class ComputeProfileRef(Strict):
    name: Name | None = None
    override: ComputeProfileOverride | None = None


class GpuRequest(Strict):
    family: str = Field(min_length=1)
    count: NonNegativeInt


class PlatformEdge(Strict):
    vip: str | None = None


class MLPlatformSpec(Strict):
    mode: Literal["dedicated", "shared"] = Field(
        default="dedicated",
        description="dedicated: its own cluster; shared: a tenant of the ComputePool in computePoolRef.",
    )
    compute_pool_ref: LocalRef | None = Field(
        default=None, description="The ComputePool a shared platform runs on: required with mode shared only."
    )
    compute_profile_ref: ComputeProfileRef | None = None
    workload_profile_ref: LocalRef | None = None
    gpus: list[GpuRequest] = Field(default_factory=list)
    resource_groups: dict[str, str] = Field(default_factory=dict)
    edge: PlatformEdge | None = None
    priority: int = Field(
        default=0,
        ge=-1_000_000_000,
        le=1_000_000_000,
        description="Higher is placed first when not every new platform fits (a shared platform: admitted "
        "first into its pool). A placed platform is never moved for a higher one.",
    )
    suspend: bool = False


class MLPlatform(Strict):
    api_version: Literal["palette.ai/v1alpha1"]
    kind: Literal["MLPlatform"]
    metadata: ObjectMeta
    spec: MLPlatformSpec = Field(default_factory=MLPlatformSpec)


# --- WorkloadProfile -----------------------------------------------------------------------------


class WorkloadProfileSpec(Strict):
    cluster_profiles: list[ClusterProfileRef] = Field(default_factory=list)
    type: Literal["Application", "Model", "Infrastructure"] = Field(
        default="Application",
        description="What it deploys: Application (the default), Model, or Infrastructure (docs/bundles.md).",
    )


class WorkloadProfile(Strict):
    api_version: Literal["mural.spectrocloud.com/v1alpha1"]
    kind: Literal["WorkloadProfile"]
    metadata: ObjectMeta
    # The seed's example has ``spec:`` with only a comment, which YAML reads as null.
    spec: WorkloadProfileSpec | None = None


# --- Project, Settings, Compute ------------------------------------------------------------------


class ProjectSpec(Strict):
    compute_profile_ref: LocalRef
    settings_ref: LocalRef | None = None
    gpu_quota: dict[str, NonNegativeInt] = Field(
        default_factory=dict,
        description="At most this many GPUs per family for the namespace's dedicated MLPlatforms and "
        "ComputePools together (docs/environments.md#project-gpu-quota).",
    )


class Project(Strict):
    api_version: Literal["mural.sh/v1alpha1"]
    kind: Literal["Project"]
    metadata: ObjectMeta
    spec: ProjectSpec


class SecretRef(Strict):
    """Where the API key is: an environment variable or a file. Exactly one of the two.

    The rule is checked by ``reconciler.manifests.rules`` (with a readable message) and also stated in the
    JSON Schema so that editors and ``check-jsonschema`` see it.
    """

    model_config = ConfigDict(
        json_schema_extra={"oneOf": [{"required": ["env"]}, {"required": ["file"]}]},
    )

    env: str | None = Field(default=None, min_length=1, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    file: str | None = Field(default=None, min_length=1)


class PaletteSettings(Strict):
    host_url: str = Field(min_length=1, pattern=r"^https?://\S+$")
    tenant: str | None = None
    default_project_id: str = Field(min_length=1, alias="defaultProjectID")
    api_key_secret_ref: SecretRef
    cluster_profiles: list[ClusterProfileRef] = Field(
        default_factory=list,
        description="Palette cluster profiles (infrastructure stack) every cluster of this project is built "
        "from, before its WorkloadProfile's.",
    )


class PrometheusSettings(Strict):
    """Where scaling policies read utilisation (docs/scaling.md); ``--prometheus URL`` replaces it."""

    url: str = Field(min_length=1, pattern=r"^https?://\S+$")
    bearer_token_secret_ref: SecretRef | None = None


class SettingsSpec(Strict):
    palette: PaletteSettings
    prometheus: PrometheusSettings | None = None


class Settings(Strict):
    api_version: Literal["mural.sh/v1alpha1"]
    kind: Literal["Settings"]
    metadata: ObjectMeta
    spec: SettingsSpec


class ComputeSpec(Strict):
    settings_ref: LocalRef | None = None


class Compute(Strict):
    api_version: Literal["palette.ai/v1alpha1"]
    kind: Literal["Compute"]
    metadata: ObjectMeta
    spec: ComputeSpec = Field(default_factory=ComputeSpec)


# --- ComputePool, AIWorkload (docs/pools.md) ---------------------------------------------------

MIG_PROFILE = r"^[1-8]g\.[0-9]+gb([+-][a-z]+(\.[a-z]+)*)?$"


class PoolMig(Strict):
    strategy: Literal["none", "mixed"] = Field(
        default="none", description="none: every GPU stays whole; mixed: GPUs may hold MIG instances."
    )


class ComputePoolSpec(Strict):
    mode: Literal["shared", "dedicated"] = Field(
        default="shared",
        description="shared: many workloads; dedicated: exactly one. Fixed once the pool's cluster exists.",
    )
    compute_profile_ref: LocalRef | None = None
    workload_profile_ref: LocalRef | None = None
    profile_bundle_ref: LocalRef | None = Field(
        default=None,
        description="An Infrastructure or Fullstack ProfileBundle the pool's cluster is built from, in place "
        "of the Settings' and the WorkloadProfile's cluster profiles; not with workloadProfileRef.",
    )
    resource_groups: dict[str, str] = Field(default_factory=dict)
    gpus: list[GpuRequest] = Field(default_factory=list, description="The pool's GPU capacity per family.")
    min_worker_nodes: NonNegativeInt | None = None
    mig: PoolMig | None = None
    scaling_policy_ref: LocalRef | None = None
    edge: PlatformEdge | None = None
    suspend: bool = False


class ComputePool(Strict):
    api_version: Literal["spectrocloud.com/v1alpha1"]
    kind: Literal["ComputePool"]
    metadata: ObjectMeta
    spec: ComputePoolSpec = Field(default_factory=ComputePoolSpec)


class WorkloadGpuRequest(Strict):
    """Whole GPUs of a family, or (with ``mig``) MIG instances of one profile on GPUs of that family."""

    family: str = Field(min_length=1)
    mig: str | None = Field(default=None, pattern=MIG_PROFILE, description="A MIG profile such as 3g.40gb.")
    count: NonNegativeInt


class AIWorkloadSpec(Strict):
    compute_pool_ref: LocalRef | None = Field(
        default=None, description="The ComputePool it runs on; or spec.environmentRef (exactly one)."
    )
    environment_ref: LocalRef | None = Field(
        default=None, description="The Environment whose first pool that can hold it admits it."
    )
    workload_profile_ref: LocalRef | None = None
    profile_bundle_ref: LocalRef | None = Field(
        default=None,
        description="An Application or Fullstack ProfileBundle whose add-ons are attached to the pool's "
        "cluster while it is admitted; not with workloadProfileRef.",
    )
    replicas: int = Field(
        default=1,
        ge=1,
        le=100_000,
        description="How many pods of this shape it runs; each replica's GPUs are bound on one host.",
    )
    gpus: list[WorkloadGpuRequest] = Field(
        default_factory=list, description="Per replica: whole GPUs and MIG instances of one pod."
    )
    priority: int = Field(
        default=0, ge=-1_000_000_000, le=1_000_000_000, description="Higher is admitted first."
    )
    suspend: bool = False


class AIWorkload(Strict):
    api_version: Literal["spectrocloud.com/v1alpha1"]
    kind: Literal["AIWorkload"]
    metadata: ObjectMeta
    spec: AIWorkloadSpec


Resource: TypeAlias = (
    ComputeProfile
    | MLPlatform
    | WorkloadProfile
    | Project
    | Settings
    | Compute
    | ComputePool
    | AIWorkload
    | ScalingPolicy
    | ProfileBundle
    | Environment
)

# kind -> (apiVersion, model)
KINDS: dict[str, tuple[str, type[Strict]]] = {
    "ComputeProfile": ("palette.ai/v1alpha1", ComputeProfile),
    "MLPlatform": ("palette.ai/v1alpha1", MLPlatform),
    "Compute": ("palette.ai/v1alpha1", Compute),
    "WorkloadProfile": ("mural.spectrocloud.com/v1alpha1", WorkloadProfile),
    "Project": ("mural.sh/v1alpha1", Project),
    "Settings": ("mural.sh/v1alpha1", Settings),
    "ComputePool": ("spectrocloud.com/v1alpha1", ComputePool),
    "AIWorkload": ("spectrocloud.com/v1alpha1", AIWorkload),
    "ScalingPolicy": ("spectrocloud.com/v1alpha1", ScalingPolicy),
    "ProfileBundle": ("spectrocloud.com/v1beta1", ProfileBundle),
    "Environment": ("spectrocloud.com/v1beta1", Environment),
}

# Status files live at <namespace>/<plural>/<name>.yaml (docs/status-branch.md).
PLURALS: dict[str, str] = {
    "ComputeProfile": "computeprofiles",
    "MLPlatform": "mlplatforms",
    "Compute": "computes",
    "WorkloadProfile": "workloadprofiles",
    "Project": "projects",
    "Settings": "settings",
    "ComputePool": "computepools",
    "AIWorkload": "aiworkloads",
    "ScalingPolicy": "scalingpolicies",
    "ProfileBundle": "profilebundles",
    "Environment": "environments",
}
