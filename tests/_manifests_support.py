"""Shared fixtures of the manifest tests: the seed's examples, verbatim from the PaletteAI documentation."""

from __future__ import annotations

from pathlib import Path

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


def sample_files() -> list[tuple[str, bytes]]:
    """Every manifest of the sample repository as (relative path, bytes)."""
    return sorted(
        (p.relative_to(SAMPLE_REPO).as_posix(), p.read_bytes())
        for p in SAMPLE_REPO.rglob("*")
        if p.suffix in (".yaml", ".yml")
    )
