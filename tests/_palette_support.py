"""Shared helpers of the Palette client and emulator tests: hosts, snapshots, fake clock, a server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import jsonschema

from reconciler.emulator import EmulatorServer, FaultRule
from reconciler.model.resources import ComputeProfile, WorkloadProfile
from reconciler.palette import PaletteClient
from reconciler.palette.pacing import RateLimits
from reconciler.retry import RetryPolicy
from reconciler.snapshots import Snapshot

KEY = "pk-test-5ecr3t-k3y-0123456789abcdef"
PROJECT_A = "6514216503b1d1cd4f1bdc44"
PROJECT_B = "6514216503b1d1cd4f1bdc45"

# One shared plain HTTP client: creating an httpx.Client costs ~40 ms (it loads the CA bundle).
HTTP = httpx.Client(timeout=5)

GPU_MODELS = {"H100": "GH100 [H100 SXM5 80GB]", "A100": "GA100 [A100 SXM4 80GB]", "L4": "AD104GL [L4]"}


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = 1_780_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def host(
    uid: str,
    *,
    name: str | None = None,
    labels: dict[str, str] | None = None,
    gpus: int = 0,
    family: str = "H100",
    cores: int = 4,
    arch: str = "amd64",
    state: str = "ready",
    health: str = "healthy",
    project: str | None = None,
    nic: bool = True,
) -> dict[str, Any]:
    """An edge host as ``POST /v1/dashboard/edgehosts/search`` returns it; ``nic``: the agent reports
    its network interface (``spec.device.nics``)."""
    device: dict[str, Any] = {"archType": arch, "cpu": {"cores": cores}}
    address = f"10.0.0.{len(uid)}"
    if nic:
        device["nics"] = [
            {
                "nicName": "ens160",
                "ip": address,
                "subnet": "255.255.255.0",
                "gateway": "10.0.0.1",
                "isDefault": True,
            }
        ]
    if gpus:
        device["gpus"] = [
            {"vendor": "NVIDIA", "model": GPU_MODELS[family], "gpuCount": gpus, "memory": "80 GB"}
        ]
    spec: dict[str, Any] = {
        "type": "edge-native",
        "device": device,
        "host": {"hostAddress": address},
    }
    if project:
        spec["projectMeta"] = {"name": f"project-{project[-2:]}", "uid": project}
    return {
        "metadata": {"uid": uid, "name": name or uid, "labels": {"palette.ai": "true", **(labels or {})}},
        "spec": spec,
        "status": {"state": state, "health": {"state": health, "message": ""}, "inUseClustersRef": []},
    }


def fleet() -> list[dict[str, Any]]:
    """A small mixed fleet: 3 CPU control-plane candidates, 2 H100 x 8, one worker-tagged CPU host,
    one unhealthy and one unpaired host, one ARM host."""
    return [
        host("edge-cp-1", cores=4),
        host("edge-cp-2", cores=4),
        host("edge-cp-3", cores=4, labels={"palette.ai/control-plane": "true"}),
        host("edge-h100-1", gpus=8, cores=64, labels={"palette.ai.rg/network-pool": "3"}),
        host("edge-h100-2", gpus=8, cores=64),
        host("edge-worker-1", cores=32, labels={"palette.ai/worker": "true"}),
        host("edge-sick-1", health="unhealthy"),
        host("edge-new-1", state="unpaired"),
        host("edge-arm-1", arch="arm64", labels={"site": "spectro__tag"}),
    ]


def fast_retry(**overrides: Any) -> RetryPolicy:
    """Retries with tiny real delays so tests stay fast."""
    values: dict[str, Any] = {"max_attempts": 5, "base_delay": 0.001, "max_delay": 0.01, "total_timeout": 5.0}
    values.update(overrides)
    return RetryPolicy(**values)


@contextmanager
def running(
    hosts: list[dict[str, Any]] | None = None,
    *,
    clusters: list[dict[str, Any]] | None = None,
    clock: FakeClock | None = None,
    provision_seconds: float = 3.0,
    delete_seconds: float = 2.0,
    faults: list[FaultRule] | None = None,
    seed: int = 0,
    profiles: list[dict[str, Any]] | None = None,
    rate_limits: RateLimits | None = None,
) -> Iterator[EmulatorServer]:
    """An emulator over ``hosts`` (default :func:`fleet`) on loopback, without Palette's rate limits
    unless a test is about them; ``profiles`` is its cluster profile catalogue (None: no catalogue, any
    uid is an infrastructure profile)."""
    snapshot = Snapshot(
        edge_hosts=fleet() if hosts is None else hosts, clusters=clusters or [], cluster_profiles=profiles
    )
    server = EmulatorServer.from_snapshot(
        snapshot,
        KEY,
        provision_seconds=provision_seconds,
        delete_seconds=delete_seconds,
        clock=clock or FakeClock(),
        faults=faults or [],
        seed=seed,
        rate_limits=rate_limits or RateLimits.off(),
    )
    with server:
        yield server


def client(server: EmulatorServer, **kwargs: Any) -> PaletteClient:
    kwargs.setdefault("retry", fast_retry())
    kwargs.setdefault("rate_limits", RateLimits.off())  # pacing is tested on its own
    key = kwargs.pop("api_key", KEY)
    return PaletteClient(server.url, key, kwargs.pop("project_uid", None), **kwargs)


def admin(server: EmulatorServer, method: str, path: str, body: Any = None) -> Any:
    """Call an admin endpoint (no key needed)."""
    response = HTTP.request(method, server.url + "/__emulator/" + path, json=body, timeout=5)
    response.raise_for_status()
    return json.loads(response.content) if response.content else None


class Recorder(httpx.BaseTransport):
    """A transport that records every request and response body passing through it."""

    def __init__(self) -> None:
        self._inner = httpx.HTTPTransport()
        self.exchanges: list[tuple[str, str, Any, int, Any]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self._inner.handle_request(request)
        response.read()
        sent = json.loads(request.content) if request.content else None
        received = json.loads(response.content) if response.content else None
        self.exchanges.append((request.method, request.url.path, sent, response.status_code, received))
        return response

    def close(self) -> None:
        self._inner.close()


# --- Palette's swagger subset as strict JSON Schema (see tests/data/palette/SOURCE.md) ---------------

SPEC: dict[str, Any] = json.loads(
    (Path(__file__).parent / "data" / "palette" / "palette-openapi-subset.json").read_text()
)


def _strict(node: Any) -> Any:
    if isinstance(node, dict):
        out = {k: _strict(v) for k, v in node.items()}
        if "properties" in out and "additionalProperties" not in out and "$ref" not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(node, list):
        return [_strict(v) for v in node]
    return node


DEFINITIONS = _strict(SPEC["definitions"])


def validator(definition: str) -> jsonschema.Draft4Validator:
    return jsonschema.Draft4Validator({"$ref": f"#/definitions/{definition}", "definitions": DEFINITIONS})


def assert_valid(definition: str, document: Any, what: str) -> None:
    errors = sorted(validator(definition).iter_errors(document), key=lambda e: list(e.absolute_path))
    details = "; ".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:5])
    assert not errors, f"{what} does not match {definition}: {details}"


# --- resources the entity and conformance tests build bodies from --------------------------------

PROFILE = ComputeProfile.model_validate(
    {
        "apiVersion": "palette.ai/v1alpha1",
        "kind": "ComputeProfile",
        "metadata": {"name": "edge-compute-profile", "namespace": "project-a"},
        "spec": {
            "sshKeys": ["ssh-rsa AAAAB3Nza... test-user@test-machine"],
            "edge": {
                "vip": "10.10.189.24",
                "ntpServers": ["time.google.com"],
                "networkOverlayConfig": {"enabled": False, "staticIp": True, "cidr": "192.168.1.0/24"},
                "isTwoNode": False,
            },
            "controlPlaneDefaults": {
                "nodeCount": 1,
                "workerNodeEligible": False,
                "labels": {"palette.ai": "true"},
                "annotations": {"kubernetes.io/description": "Control plane node"},
                "taints": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}],
            },
            "workerPoolDefaults": {
                "labels": {"palette.ai": "true"},
                "taints": [{"key": "worker-taint", "value": "true", "effect": "NoSchedule"}],
            },
        },
    }
)
INFRA_UID = "6651a2b3c4d5e6f708192a3b"
ADDON_UID = "66a1b2c3d4e5f6a7b8c9d0e1"
CATALOGUE = [
    {"uid": INFRA_UID, "name": "edge-infra", "type": "infra"},
    {"uid": ADDON_UID, "name": "clearml", "type": "add-on"},
    {"uid": "66a1b2c3d4e5f6a7b8c9d0e2", "name": "monitoring", "type": "add-on"},
    {"uid": "66a1b2c3d4e5f6a7b8c9d0f0", "name": "edge-full-stack", "type": "full"},
]
WORKLOAD = WorkloadProfile.model_validate(
    {
        "apiVersion": "mural.spectrocloud.com/v1alpha1",
        "kind": "WorkloadProfile",
        "metadata": {"name": "clearml", "namespace": "project-a"},
        "spec": {
            "clusterProfiles": [{"uid": "66a1b2c3d4e5f6a7b8c9d0e1", "packValues": [{"name": "clearml"}]}]
        },
    }
)
