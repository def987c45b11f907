"""Shared fixtures of the manifest tests: the seed's examples, verbatim from the PaletteAI documentation, and
builders of a namespace's YAML documents (Project, Settings, ComputeProfile) as a repository holds them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from tests._allocate_support import INFRA_PROFILE_UID

REPO = Path(__file__).resolve().parent.parent
SAMPLE_REPO = REPO / "sample-repo"
SCHEMAS = REPO / "schemas"

SEED_COMPUTE_PROFILE = """\
apiVersion: palette.ai/v1alpha1
kind: ComputeProfile
metadata:
  name: edge-compute-profile
  namespace: project-a
spec:
  # SSH keys for node access
  sshKeys:
    - 'ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABgQC7... test-user@test-machine'
    - 'ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABgQC8... admin@admin-machine'

  # Edge configuration for edge deployments
  edge:
    vip: '10.10.189.24'
    ntpServers:
      - 'time.google.com'
      - 'time2.google.com'
    networkOverlayConfig:
      enabled: false
      staticIp: true
      cidr: '192.168.1.0/24'
      overlayNetworkType: 'VXLAN'
    isTwoNode: false

  # Control plane defaults - required field
  controlPlaneDefaults:
    nodeCount: 3 # Must be 1, 3, or 5 to maintain quorum
    workerNodeEligible: false
    labels:
      'palette.ai': 'true'
    annotations:
      'control-plane-annotation': 'control-plane-value'
      'kubernetes.io/description': 'Control plane node'
    taints:
      - key: 'node-role.kubernetes.io/control-plane'
        effect: 'NoSchedule'

  # Worker pool defaults
  workerPoolDefaults:
    labels:
      'palette.ai': 'true'
    annotations:
      'worker-annotation': 'worker-value'
      'kubernetes.io/description': 'Worker node'
    taints:
      - key: 'worker-taint'
        value: 'true'
        effect: 'NoExecute'

  # Minimum number of worker nodes that must be provisioned
  minWorkerNodes: 2

  # GPU limits per GPU family that may be requested by an MLPlatform
  gpuLimits:
    'NVIDIA-H100': 6
    'NVIDIA-A100': 6
"""

SEED_WORKLOAD_PROFILE = """\
apiVersion: mural.spectrocloud.com/v1alpha1
kind: WorkloadProfile
metadata:
  name: clearml-workload-profile
  namespace: project-a
  labels:
    palette.ai/platform: clearml
    palette.ai/platform-version: 7.14.5
    palette.ai/min-nodes: '3' # Requires minimum 3 worker nodes
spec:
  # WorkloadProfile specification...
"""

# An AIWorkload the sample repository does not hold, on its shared-a100 pool: what a ``--what-if`` adds.
WHAT_IF_WORKLOAD = """\
apiVersion: spectrocloud.com/v1alpha1
kind: AIWorkload
metadata: {name: what-if-train, namespace: project-b}
spec:
  computePoolRef: {name: shared-a100}
  workloadProfileRef: {name: pytorch-training-profile}
  gpus: [{family: NVIDIA-A100, count: 2}]
"""


def sample_files() -> list[tuple[str, bytes]]:
    """Every manifest of the sample repository as (relative path, bytes)."""
    return sorted(
        (p.relative_to(SAMPLE_REPO).as_posix(), p.read_bytes())
        for p in SAMPLE_REPO.rglob("*")
        if p.suffix in (".yaml", ".yml")
    )


DEFAULT_PROJECT_ID = "6514216503b1d1cd4f1bdc44"


def _flow(mapping: Mapping[str, int]) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in mapping.items()) + "}"


def documents(*docs: str) -> str:
    """One file of several YAML documents."""
    return "---\n".join(docs)


def project_yaml(ns: str, *, gpu_quota: Mapping[str, int] | None = None) -> str:
    """The namespace's Project: ComputeProfile ``prof``, Settings ``palette``, and a GPU quota if given."""
    quota = f"  gpuQuota: {_flow(gpu_quota)}\n" if gpu_quota else ""
    return f"""\
apiVersion: mural.sh/v1alpha1
kind: Project
metadata: {{name: {ns}, namespace: {ns}}}
spec:
  computeProfileRef: {{name: prof}}
  settingsRef: {{name: palette}}
{quota}"""


def settings_yaml(
    ns: str,
    *,
    cluster_profiles: Sequence[str] = (INFRA_PROFILE_UID,),
    project_id: str | None = DEFAULT_PROJECT_ID,
    tenant: str | None = None,
) -> str:
    """The namespace's Settings ``palette`` (no clusterProfiles line when ``cluster_profiles`` is empty)."""
    lines = ["    hostUrl: https://api.spectrocloud.com"]
    if tenant is not None:
        lines.append(f"    tenant: {tenant}")
    if project_id is not None:
        lines.append(f'    defaultProjectID: "{project_id}"')
    lines.append("    apiKeySecretRef: {env: PALETTE_API_KEY}")
    if cluster_profiles:
        lines.append(f"    clusterProfiles: [{', '.join('{uid: ' + uid + '}' for uid in cluster_profiles)}]")
    body = "".join(line + "\n" for line in lines)
    return f"""\
apiVersion: mural.sh/v1alpha1
kind: Settings
metadata: {{name: palette, namespace: {ns}}}
spec:
  palette:
{body}"""


def compute_profile_yaml(
    ns: str, *, vip: str | None = None, gpu_limits: Mapping[str, int] | None = None
) -> str:
    """The namespace's ComputeProfile ``prof``: one control-plane node, edge VIP and GPU limits if given."""
    edge = f"  edge: {{vip: {vip}}}\n" if vip else ""
    limits = f"  gpuLimits: {_flow(gpu_limits)}\n" if gpu_limits else ""
    return f"""\
apiVersion: palette.ai/v1alpha1
kind: ComputeProfile
metadata: {{name: prof, namespace: {ns}}}
spec:
{edge}  controlPlaneDefaults: {{nodeCount: 1}}
{limits}"""


def namespace_yaml(
    ns: str,
    *,
    vip: str | None = None,
    gpu_limits: Mapping[str, int] | None = None,
    gpu_quota: Mapping[str, int] | None = None,
    cluster_profiles: Sequence[str] = (INFRA_PROFILE_UID,),
    project_id: str | None = DEFAULT_PROJECT_ID,
    tenant: str | None = None,
) -> str:
    """A namespace as one file: its Project, Settings and ComputeProfile, in that order."""
    return documents(
        project_yaml(ns, gpu_quota=gpu_quota),
        settings_yaml(ns, cluster_profiles=cluster_profiles, project_id=project_id, tenant=tenant),
        compute_profile_yaml(ns, vip=vip, gpu_limits=gpu_limits),
    )
