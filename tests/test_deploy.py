"""The Kubernetes deployment (DESIGN.md section 12): `deploy/base` and the sharded overlay
`deploy/overlays/sharded` built by the real `kubectl kustomize` and checked against Kubernetes'
published schemas (kubernetes-validate ships them), plus the properties the design asks of them.
ServiceMonitor is a CRD that no published Kubernetes schema covers: it is checked against the Service
it scrapes instead. Off CI a missing kubectl skips; on CI it fails."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
BASE = ROOT / "deploy" / "base"
SHARDED = ROOT / "deploy" / "overlays" / "sharded"
K8S_VERSION = "1.32.0"


def _kustomize(path: Path) -> list[dict[str, Any]]:
    if shutil.which("kubectl") is None:
        if os.environ.get("CI"):
            pytest.fail("kubectl is not installed (CI must install it: see .ci/run)")
        pytest.skip("kubectl is not installed")
    done = subprocess.run(
        ["kubectl", "kustomize", str(path)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


@pytest.fixture(scope="module")
def built() -> list[dict[str, Any]]:
    return _kustomize(BASE)


@pytest.fixture(scope="module")
def sharded() -> list[dict[str, Any]]:
    return _kustomize(SHARDED)


def _one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def test_base_has_every_piece_the_design_names(built: list[dict[str, Any]]) -> None:
    kinds = sorted(d["kind"] for d in built)
    assert kinds == sorted(
        ["Namespace", "ServiceAccount", "Role", "RoleBinding", "Deployment", "Service", "ServiceMonitor"]
    )


def test_core_resources_match_the_published_kubernetes_schemas(built: list[dict[str, Any]]) -> None:
    checked = 0
    for doc in built:
        if doc["apiVersion"].startswith("monitoring.coreos.com"):
            continue
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)  # raises on any schema error
        checked += 1
    assert checked == 6


def test_schema_check_rejects_a_misspelt_field(built: list[dict[str, Any]]) -> None:
    deployment = _one(built, "Deployment")
    broken = {**deployment, "spec": {**deployment["spec"], "replica": 2}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


def test_deployment_runs_two_replicas_with_the_kubernetes_lease(built: list[dict[str, Any]]) -> None:
    deployment = _one(built, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = container["args"]
    assert args[0] == "run" and args[args.index("--lease") + 1] == "kubernetes"
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    for secret in ("PALETTE_API_KEY", "RECONCILER_WEBHOOK_SECRET"):
        assert "secretKeyRef" in env[secret]["valueFrom"], f"{secret} must come from a Secret"
        assert "value" not in env[secret]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["resources"]["requests"]["cpu"] and container["resources"]["requests"]["memory"]


def test_pod_runs_as_non_root_on_a_read_only_root_filesystem(built: list[dict[str, Any]]) -> None:
    pod = _one(built, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    container = pod["containers"][0]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    # git needs a writable HOME (its caches) and /tmp on a read-only root filesystem.
    assert {"/var/lib/reconciler", "/tmp"} <= mounts


def test_role_grants_leases_to_the_service_account(built: list[dict[str, Any]]) -> None:
    role, binding = _one(built, "Role"), _one(built, "RoleBinding")
    lease_rules = [r for r in role["rules"] if "coordination.k8s.io" in r["apiGroups"]]
    assert lease_rules and "leases" in lease_rules[0]["resources"]
    assert {"get", "create", "update"} <= set(lease_rules[0]["verbs"])
    account = _one(built, "ServiceAccount")["metadata"]["name"]
    assert binding["subjects"][0]["name"] == account
    assert _one(built, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == account
    assert binding["roleRef"]["name"] == role["metadata"]["name"]


def test_service_and_service_monitor_reach_the_pods(built: list[dict[str, Any]]) -> None:
    deployment, service, monitor = (_one(built, k) for k in ("Deployment", "Service", "ServiceMonitor"))
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    port_names = {p["name"] for p in service["spec"]["ports"]}
    container_ports = {p["name"] for p in deployment["spec"]["template"]["spec"]["containers"][0]["ports"]}
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= container_ports
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert {e["port"] for e in monitor["spec"]["endpoints"]} <= port_names
    assert monitor["spec"]["endpoints"][0]["path"] == "/metrics"


# --- the sharded overlay -------------------------------------------------------------------------


def _env(deployment: dict[str, Any]) -> dict[str, str]:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e["value"] for e in container["env"] if "value" in e}


def test_sharded_overlay_runs_one_deployment_per_shard_with_its_own_lease_and_disjoint_namespaces(
    sharded: list[dict[str, Any]],
) -> None:
    from reconciler.commands.run import shard_options

    deployments = [d for d in sharded if d["kind"] == "Deployment"]
    assert len(deployments) == 2
    shards = {}
    for deployment in deployments:
        env = _env(deployment)
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        assert container["args"][container["args"].index("--lease") + 1] == "kubernetes"
        # The very check `run` makes: both set, a DNS label, globs that parse.
        selector, shard = shard_options(env["RECONCILER_NAMESPACES"], env["RECONCILER_SHARD"])
        assert shard is not None
        shards[shard] = selector
    assert len(shards) == 2, "each shard needs its own name (its Lease paletteai-reconciler-<name>)"
    examples = ["team-a-1", "team-a-ml", "team-b-1", "ml-prod", "ml-dev", "other"]
    for ns in examples:
        assert sum(s.owns(ns) for s in shards.values()) <= 1, f"{ns} is owned by two shards"
    assert any(all(not s.owns(ns) for s in shards.values()) for ns in examples)  # globs do select
    for doc in sharded:
        if not doc["apiVersion"].startswith("monitoring.coreos.com"):
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_sharded_overlay_service_of_each_shard_reaches_only_that_shards_pods(
    sharded: list[dict[str, Any]],
) -> None:
    pods = {
        d["metadata"]["name"]: d["spec"]["template"]["metadata"]["labels"]
        for d in sharded
        if d["kind"] == "Deployment"
    }
    services = [d for d in sharded if d["kind"] == "Service"]
    assert len(services) == 2
    for service in services:
        reached = [
            name for name, labels in pods.items() if service["spec"]["selector"].items() <= labels.items()
        ]
        assert reached == [service["metadata"]["name"]]  # the webhook of a shard reaches that shard
    monitor = _one(sharded, "ServiceMonitor")
    for service in services:
        assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    account = _one(sharded, "ServiceAccount")["metadata"]["name"]
    assert all(
        d["spec"]["template"]["spec"]["serviceAccountName"] == account
        for d in sharded
        if d["kind"] == "Deployment"
    )
