"""The Kubernetes deployment: `deploy/base`, the sharded overlay `deploy/overlays/sharded` and the
monitored overlay (base plus the optional ServiceMonitor component) built by the real `kubectl kustomize`
and checked against Kubernetes' published schemas (kubernetes-validate ships them, strict), plus the
properties asked of them: no CRD in the base, a PodDisruptionBudget, spreading over nodes, a
NetworkPolicy, secrets and git credentials as files (git itself reads them in a test), and RBAC that
grants exactly the Lease calls the code makes. ServiceMonitor is a CRD that no published Kubernetes
schema covers: it is checked against the Service it scrapes instead. Off CI a missing kubectl skips; on
CI it fails. (`tests/test_deploy_rollout.py` shows the rollouts completing.)"""

from __future__ import annotations

import ast
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
MONITORED = ROOT / "deploy" / "overlays" / "monitored"
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


CORE = ["Namespace", "ServiceAccount", "Role", "RoleBinding", "Deployment", "Service"]


def test_base_has_every_piece_and_no_custom_resource(built: list[dict[str, Any]]) -> None:
    """`kubectl apply -k deploy/base` works on a cluster without the Prometheus Operator's CRDs."""
    kinds = sorted(d["kind"] for d in built)
    assert kinds == sorted([*CORE, "PodDisruptionBudget", "NetworkPolicy"])
    builtin = ("v1", "apps/v1", "policy/v1", "networking.k8s.io/v1", "rbac.authorization.k8s.io/v1")
    assert {d["apiVersion"] for d in built} <= set(builtin)


def test_core_resources_match_the_published_kubernetes_schemas(built: list[dict[str, Any]]) -> None:
    for doc in built:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)  # raises on any schema error


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
    # Secrets are files from Secrets: never an environment value, a secretKeyRef (an env dump shows
    # it) or an argument.
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    for variable in ("PALETTE_API_KEY_FILE", "RECONCILER_WEBHOOK_SECRET_FILE"):
        path = Path(env[variable]["value"])
        assert str(path.parent) == mounts["secrets"]
        assert volumes["secrets"]["secret"]["secretName"] == "reconciler-secrets"
    assert not any("secretKeyRef" in e.get("valueFrom", {}) for e in container["env"])
    assert "PALETTE_API_KEY" not in env and "RECONCILER_WEBHOOK_SECRET" not in env
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


# The Kubernetes API calls of CoordinationV1Api and the RBAC verb each one needs.
_VERBS = {
    "read_namespaced_lease": "get",
    "create_namespaced_lease": "create",
    "replace_namespaced_lease": "update",
    "patch_namespaced_lease": "patch",
    "delete_namespaced_lease": "delete",
    "list_namespaced_lease": "list",
}


def _lease_verbs_the_code_uses() -> set[str]:
    tree = ast.parse((ROOT / "reconciler" / "runtime" / "kubernetes_lease.py").read_text())
    calls = {
        n.func.attr for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
    }
    return {verb for call, verb in _VERBS.items() if call in calls}


def test_role_grants_exactly_the_lease_verbs_the_code_uses(built: list[dict[str, Any]]) -> None:
    role, binding = _one(built, "Role"), _one(built, "RoleBinding")
    assert all(
        r["apiGroups"] == ["coordination.k8s.io"] and r["resources"] == ["leases"] for r in role["rules"]
    )
    granted = {verb for rule in role["rules"] for verb in rule["verbs"]}
    assert granted == _lease_verbs_the_code_uses() == {"get", "create", "update"}
    # get and update only on the Lease the pod uses (create cannot be limited by name).
    named = [r for r in role["rules"] if "resourceNames" in r]
    assert [r["resourceNames"] for r in named] == [["paletteai-reconciler"]]
    assert set(named[0]["verbs"]) == {"get", "update"}
    account = _one(built, "ServiceAccount")["metadata"]["name"]
    assert binding["subjects"][0]["name"] == account
    assert _one(built, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == account
    assert binding["roleRef"]["name"] == role["metadata"]["name"]


def test_monitored_overlay_adds_only_the_service_monitor() -> None:
    monitored = _kustomize(MONITORED)
    assert sorted(d["kind"] for d in monitored) == sorted(
        [*CORE, "PodDisruptionBudget", "NetworkPolicy", "ServiceMonitor"]
    )
    assert _one(monitored, "ServiceMonitor")["metadata"]["namespace"] == "paletteai-reconciler"


def test_service_and_service_monitor_reach_the_pods() -> None:
    built = _kustomize(MONITORED)
    deployment, service, monitor = (_one(built, k) for k in ("Deployment", "Service", "ServiceMonitor"))
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    port_names = {p["name"] for p in service["spec"]["ports"]}
    container_ports = {p["name"] for p in deployment["spec"]["template"]["spec"]["containers"][0]["ports"]}
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= container_ports
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert {e["port"] for e in monitor["spec"]["endpoints"]} <= port_names
    assert monitor["spec"]["endpoints"][0]["path"] == "/metrics"


def test_replicas_spread_over_nodes_and_a_drain_takes_one_at_a_time(built: list[dict[str, Any]]) -> None:
    deployment, budget = _one(built, "Deployment"), _one(built, "PodDisruptionBudget")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert budget["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert budget["spec"]["maxUnavailable"] == 1
    (by_node,) = [
        c
        for c in deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]
        if c["topologyKey"] == "kubernetes.io/hostname"
    ]
    assert (by_node["maxSkew"], by_node["whenUnsatisfiable"]) == (1, "DoNotSchedule")
    assert by_node["labelSelector"]["matchLabels"].items() <= pod_labels.items()
    assert by_node["matchLabelKeys"] == ["pod-template-hash"]  # the surge pod of a rollout fits


def test_network_policy_admits_the_one_port_and_lets_out_dns_git_palette_and_prometheus_only(
    built: list[dict[str, Any]],
) -> None:
    deployment, policy = _one(built, "Deployment"), _one(built, "NetworkPolicy")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert sorted(policy["spec"]["policyTypes"]) == ["Egress", "Ingress"]
    (ingress,) = policy["spec"]["ingress"]
    assert ingress["ports"] == [{"port": "http", "protocol": "TCP"}]  # the webhook and /metrics
    egress = {(port["port"], port["protocol"]) for rule in policy["spec"]["egress"] for port in rule["ports"]}
    assert egress == {(53, "UDP"), (53, "TCP"), (443, "TCP"), (22, "TCP"), (6443, "TCP"), (9090, "TCP")}
    for rule in policy["spec"]["egress"]:
        for peer in rule["to"]:  # no podSelector that kustomize's labels would have rewritten
            assert "podSelector" not in peer


def _git_env(deployment: dict[str, Any], mount: Path) -> dict[str, str]:
    """The container's git settings, with the Secret's mount point moved to ``mount``."""
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    (where,) = [m["mountPath"] for m in container["volumeMounts"] if m["name"] == "git-credentials"]
    values = {e["name"]: e["value"] for e in container["env"] if e["name"].startswith("GIT_")}
    return {name: value.replace(where, str(mount)) for name, value in values.items()}


def _credential(env: dict[str, str], action: str, request: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "credential", action],
        input=request,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )


def test_git_reads_an_https_token_from_the_mounted_secret(
    built: list[dict[str, Any]], tmp_path: Path
) -> None:
    """The real git, configured as the container is, gets the token from the read-only mount; it never
    tries to write it back, and the token is in no argument or environment value of the pod."""
    deployment = _one(built, "Deployment")
    token = "ghp_deploytoken0123456789"
    (tmp_path / "token").write_text(token + "\n")
    tmp_path.chmod(0o555)  # a Secret volume is read-only
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), **_git_env(deployment, tmp_path)}
    try:
        request = "protocol=https\nhost=git.example.com\n\n"
        assert _credential(env, "fill", request).stdout.splitlines()[-2:] == [
            "username=git",
            f"password={token}",
        ]
        tmp_path.chmod(0o755)
        (tmp_path / "username").write_text("reconciler-bot\n")
        tmp_path.chmod(0o555)
        assert "username=reconciler-bot" in _credential(env, "fill", request).stdout.splitlines()
        # After a successful push git "approves" the credential: nothing is written, nothing complains.
        approved = _credential(env, "approve", f"{request[:-1]}username=reconciler-bot\npassword={token}\n\n")
        assert approved.stderr == ""
    finally:
        tmp_path.chmod(0o755)
    assert token not in str(deployment)


def test_ssh_uses_the_mounted_key_and_checks_the_host_against_known_hosts(
    built: list[dict[str, Any]], tmp_path: Path
) -> None:
    if shutil.which("ssh") is None:
        pytest.skip("no ssh client")
    for name in ("ssh-privatekey", "known_hosts"):  # the Secret's keys, as mounted
        (tmp_path / name).write_text("")
        (tmp_path / name).chmod(0o400)
    command = _git_env(_one(built, "Deployment"), tmp_path)["GIT_SSH_COMMAND"].split()
    assert command[0] == "ssh"
    shown = subprocess.run(
        [*command, "-G", "git.example.com"], capture_output=True, text=True, timeout=60, check=True
    ).stdout.splitlines()
    assert f"identityfile {tmp_path}/ssh-privatekey" in shown
    assert f"userknownhostsfile {tmp_path}/known_hosts" in shown
    assert "stricthostkeychecking true" in shown and "batchmode yes" in shown


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
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    # Each shard's Lease, and only those, may be read and renewed.
    named = [r for r in _one(sharded, "Role")["rules"] if "resourceNames" in r]
    assert sorted(named[0]["resourceNames"]) == sorted(f"paletteai-reconciler-{shard}" for shard in shards)


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
    monitor = _one(_kustomize(MONITORED), "ServiceMonitor")
    for service in services:  # the component, added to the sharded overlay, would scrape both shards
        assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    budgets = [d for d in sharded if d["kind"] == "PodDisruptionBudget"]
    for budget in budgets:  # one budget per shard, over that shard's pods only
        reached = [
            n
            for n, labels in pods.items()
            if budget["spec"]["selector"]["matchLabels"].items() <= labels.items()
        ]
        assert reached == [budget["metadata"]["name"]]
    assert len(budgets) == 2
    account = _one(sharded, "ServiceAccount")["metadata"]["name"]
    assert all(
        d["spec"]["template"]["spec"]["serviceAccountName"] == account
        for d in sharded
        if d["kind"] == "Deployment"
    )
