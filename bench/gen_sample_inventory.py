"""Write sample-repo/inventory.json: the Palette inventory snapshot behind the sample repository.

Items have the shape of ``POST /v1/dashboard/edgehosts/search`` results (v1EdgeHostsMetadata). The
seed's Compute example is in it with the seed's machine names (6 control-plane hosts, 3 H100 x 8 and
3 A100 x 8 workers in network-pool 3), plus the hosts every sample MLPlatform needs and a few that
discovery must exclude. Every host reports its network interface (``spec.device.nics``), so clusters of
a static-IP ComputeProfile are sent with their addresses. ``clusterProfiles`` is the emulator's cluster
profile catalogue: the infrastructure profiles the sample Settings name and the add-on profiles of the
sample WorkloadProfiles. The sample ComputePools each reserve their hosts with the resource group
``palette.ai.rg/pool: <pool>`` (shared-a100: cp-12 and gpu-a100-03; finetune-l40s: cp-13 and
gpu-l40s-02), so the five platforms are placed where they were before pools were planned: pools and
platforms are placed in one (namespace, name) order. cp-13 comes last, so no other host's address moves;
then cp-14 and gpu-l40s-03, tagged for the pool the workload whisper provisions (it is placed last by name,
and takes the tagged hosts once the untagged ones are gone).
Usage: ``python bench/gen_sample_inventory.py [OUT]``.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gen_inventory import edge_host_item

PROJECT = {"name": "ml-project", "uid": "6514216503b1d1cd4f1bdc44"}
RG_A100 = {"palette.ai.rg/network-pool": "3", "palette.ai.rg/storage-tier": "high-performance"}
RG_POOL = "palette.ai.rg/pool"  # the hosts a sample ComputePool reserves for itself

SEED_CONTROL_PLANE = [
    "edge-5db0384219cfa0fa4ef97d53bf291b2e",
    "edge-228638428bf0078309b65730b24101ee",
    "edge-a94a384220dc840fa080ae0eb47894e0",
    "edge-2d463842d409106c40b0db6aa2cec28f",
    "edge-99193842f541279ef93982b6023c32b4",
    "edge-afac3842736c2b11fd82b93eac60e742",
]
SEED_H100 = [
    "edge-e078384256765be6e92fc1118aa9f283",
    "edge-71bb3842c85b1731c37665c3d2ed0d10",
    "edge-d9673842ab48f990d65c11f504f13183",
]
SEED_A100 = [
    "edge-9baf38425dacad857c70ccdbabb48028",
    "edge-16a53842616769ab26a99001b0124419",
    "edge-a48938427145a5a6118034c9a54deb8b",
]

H100 = ("NVIDIA", "GH100 [H100 SXM5 80GB]", "80 GB")
A100 = ("NVIDIA", "GA100 [A100 SXM4 80GB]", "80 GB")
L40S = ("NVIDIA", "AD102GL [L40S]", "48 GB")

# uid, name, type: the Settings' infrastructure profiles first, then the WorkloadProfiles' add-ons.
CLUSTER_PROFILES = [
    ("6651a2b3c4d5e6f708192a3b", "edge-ubuntu-k8s-infra", "infra"),
    ("6651a2b3c4d5e6f708192a3c", "edge-ubuntu-k8s-gpu-infra", "infra"),
    ("66f1a2b3c4d5e6f7a8b9c0d1", "kubeflow-training", "add-on"),
    ("66f1a2b3c4d5e6f7a8b9c0d2", "kubeflow-training-operator", "add-on"),
    ("66f1a2b3c4d5e6f7a8b9c0e1", "triton-inference-server", "add-on"),
    ("66f1a2b3c4d5e6f7a8b9c0f1", "dcgm-exporter", "add-on"),  # of the Profile Bundles
]


def uid_for(name: str) -> str:
    """A stable edge-host uid (``edge-<32 hex>``) for hosts the seed does not name."""
    return "edge-" + hashlib.sha256(f"sample-repo/{name}".encode()).hexdigest()[:32]


def host(
    name: str,
    n: int,
    *,
    uid: str | None = None,
    cores: int = 4,
    gpu: tuple[str, str, str] | None = None,
    gpu_count: int = 0,
    tags: dict[str, str] | None = None,
    state: str = "ready",
    health: str = "healthy",
    in_use: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    labels = {"palette.ai": "true", **(tags or {})}
    gpus = [{"vendor": gpu[0], "model": gpu[1], "gpuCount": gpu_count, "memory": gpu[2]}] if gpu else []
    device = {
        "archType": "amd64",
        "cpu": {"cores": cores},
        "memory": {"sizeInMB": 32768 if not gpu else 524288},
        "gpus": gpus,
        "os": {"family": "ubuntu", "version": "22.04"},
        "hostType": "appliance",
    }
    address = {"hostAddress": f"10.10.135.{10 + n}", "macAddress": f"00:50:56:b8:87:{n:02x}"}
    device["nics"] = [
        {
            "nicName": "ens160",
            "macAddr": address["macAddress"],
            "ip": address["hostAddress"],
            "subnet": "255.255.255.0",
            "gateway": "10.10.135.1",
            "dns": ["10.10.135.2"],
            "isDefault": True,
        }
    ]
    return edge_host_item(uid or uid_for(name), name, labels, device, address, PROJECT, state, health, in_use)


def edge_hosts() -> list[dict[str, Any]]:
    hosts: list[dict[str, Any]] = []
    n = 0

    def add(name: str, **kw: Any) -> None:
        nonlocal n
        n += 1
        hosts.append(host(name, n, **kw))

    # Control plane: the seed's six, four more, and two in network-pool 3 for project-b/training.
    for i, uid in enumerate(SEED_CONTROL_PLANE, start=1):
        add(f"cp-{i:02d}", uid=uid)
    for i in range(7, 11):
        add(f"cp-{i:02d}")
    add("cp-11", tags={"palette.ai.rg/network-pool": "3"})
    add("cp-12", tags={"palette.ai.rg/network-pool": "3", RG_POOL: "shared-a100"})
    # GPU workers: the seed's H100 x 8 and A100 x 8 hosts, smaller H100 hosts, L40S inference hosts.
    for i, uid in enumerate(SEED_H100, start=1):
        add(f"gpu-h100-{i:02d}", uid=uid, cores=64, gpu=H100, gpu_count=8)
    for i, uid in enumerate(SEED_A100, start=1):
        pool = {RG_POOL: "shared-a100"} if i == 3 else {}
        add(f"gpu-a100-{i:02d}", uid=uid, cores=64, gpu=A100, gpu_count=8, tags={**RG_A100, **pool})
    add("gpu-h100-04", cores=32, gpu=H100, gpu_count=4)
    add("gpu-h100-05", cores=32, gpu=H100, gpu_count=4)
    add("gpu-h100-06", cores=16, gpu=H100, gpu_count=2)
    add("gpu-l40s-01", cores=32, gpu=L40S, gpu_count=2)
    add("gpu-l40s-02", cores=32, gpu=L40S, gpu_count=4, tags={RG_POOL: "finetune-l40s"})
    # CPU hosts that may serve as workers (palette.ai/worker), used to meet minimum worker counts.
    for i in range(1, 5):
        add(f"cpu-worker-{i:02d}", cores=16, tags={"palette.ai/worker": "true"})
    # Hosts discovery must not place: unhealthy, in use by a cluster we do not manage, a bad tag.
    add("gpu-h100-07", cores=32, gpu=H100, gpu_count=8, health="unhealthy")
    add(
        "gpu-a100-04",
        cores=64,
        gpu=A100,
        gpu_count=8,
        state="in-use",
        in_use=[{"name": "legacy-training", "uid": "6790a1b2c3d4e5f6a7b8c9d0"}],
    )
    add("gpu-t4-01", cores=8, tags={"gpus": "1", "gpu-family": "nvidia-t4", "gpu-memory": "16 GX"})
    # The control plane of the dedicated pool finetune-l40s (added last: the addresses above stay).
    add("cp-13", tags={RG_POOL: "finetune-l40s"})
    # The hosts of the pool the workload whisper provisions for itself (after cp-13, for the same reason).
    add("cp-14", tags={RG_POOL: "whisper"})
    add("gpu-l40s-03", cores=32, gpu=L40S, gpu_count=2, tags={RG_POOL: "whisper"})
    return hosts


def main() -> None:
    out = (
        Path(sys.argv[1])
        if len(sys.argv) > 1
        else Path(__file__).parent.parent / "sample-repo" / "inventory.json"
    )
    profiles = [{"uid": uid, "name": name, "type": kind} for uid, name, kind in CLUSTER_PROFILES]
    document = {"edgeHosts": edge_hosts(), "clusterProfiles": profiles}
    out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
