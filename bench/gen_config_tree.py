"""Generate a large, valid config tree: N documents, one per file, mostly small MLPlatforms.

Each namespace gets a Project, Settings, ComputeProfile and WorkloadProfile so every reference
resolves; every MLPlatform has its own VIP. Usage:
``python bench/gen_config_tree.py OUT [--documents 10000] [--namespaces 10]``.
Other benchmarks can import ``generate``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

FAMILIES = ("NVIDIA-H100", "NVIDIA-A100", "NVIDIA-L40S")

SUPPORT = {
    "project.yaml": """\
apiVersion: mural.sh/v1alpha1
kind: Project
metadata: {{name: {ns}, namespace: {ns}}}
spec:
  computeProfileRef: {{name: edge-profile}}
  settingsRef: {{name: palette}}
""",
    "settings.yaml": """\
apiVersion: mural.sh/v1alpha1
kind: Settings
metadata: {{name: palette, namespace: {ns}}}
spec:
  palette:
    hostUrl: https://api.spectrocloud.com
    tenant: acme
    defaultProjectID: "6514216503b1d1cd4f1bdc44"
    apiKeySecretRef: {{env: PALETTE_API_KEY}}
    clusterProfiles: [{{uid: 6651a2b3c4d5e6f708192a3b}}]
""",
    "computeprofile.yaml": """\
apiVersion: palette.ai/v1alpha1
kind: ComputeProfile
metadata: {{name: edge-profile, namespace: {ns}}}
spec:
  controlPlaneDefaults: {{nodeCount: 3}}
  minWorkerNodes: 1
  gpuLimits: {{NVIDIA-H100: 16, NVIDIA-A100: 16}}
""",
    "workloadprofile.yaml": """\
apiVersion: mural.spectrocloud.com/v1alpha1
kind: WorkloadProfile
metadata:
  name: training
  namespace: {ns}
  labels: {{palette.ai/min-nodes: '2'}}
spec: {{}}
""",
}

PLATFORM = """\
apiVersion: palette.ai/v1alpha1
kind: MLPlatform
metadata:
  name: platform-{i:05d}
  namespace: {ns}
spec:
  computeProfileRef:
    name: edge-profile
  workloadProfileRef:
    name: training
  gpus:
    - family: {family}
      count: {count}
  edge:
    vip: {vip}
"""


def generate(root: Path, documents: int = 10_000, namespaces: int = 10) -> dict[str, list[Path]]:
    """Write the tree; return the files grouped by kind (lowercase), for per-schema tools."""
    by_kind: dict[str, list[Path]] = {}
    for n in range(namespaces):
        ns = f"team-{n:02d}"
        (root / ns / "platforms").mkdir(parents=True, exist_ok=True)
        for name, template in SUPPORT.items():
            path = root / ns / name
            path.write_text(template.format(ns=ns))
            by_kind.setdefault(name.removesuffix(".yaml"), []).append(path)
    for i in range(documents - len(SUPPORT) * namespaces):
        ns = f"team-{i % namespaces:02d}"
        vip = f"10.{100 + i // 62500}.{i // 250 % 250}.{i % 250 + 1}"
        text = PLATFORM.format(i=i, ns=ns, family=FAMILIES[i % 3], count=1 + i % 8, vip=vip)
        path = root / ns / "platforms" / f"platform-{i:05d}.yaml"
        path.write_text(text)
        by_kind.setdefault("mlplatform", []).append(path)
    return by_kind


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", type=Path)
    parser.add_argument("--documents", type=int, default=10_000)
    parser.add_argument("--namespaces", type=int, default=10)
    args = parser.parse_args()
    groups = generate(args.out, args.documents, args.namespaces)
    print(f"wrote {sum(map(len, groups.values()))} files under {args.out}")


if __name__ == "__main__":
    main()
