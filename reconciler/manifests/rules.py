"""Rules a JSON Schema cannot say well (the third layer), checked on the document's plain data.

They run on the data rather than on the typed model so that they are reported together with the schema
layer's errors of the same document (every error of a tree at once); where the schema layer already
reported a field, the rule stays silent about it. Cross-resource rules (duplicates, references, VIP
clashes) need every document and live in ``reconciler.manifests.loader``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.manifests.scaling_rules import check_scaling_policy
from reconciler.manifests.schema import PathElem, Problem
from reconciler.model.gpu import canonical_family
from reconciler.resolve import MIN_NODES_LABEL, min_nodes_problem, parse_min_nodes, vip_problem


def check_document(kind: str, data: Mapping[str, Any]) -> list[Problem]:
    """Per-resource rules of docs/validation.md for one document of a known kind."""
    spec = data.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    if kind == "ComputeProfile":
        limits = _families(("spec", "gpuLimits"), _keys(spec.get("gpuLimits")), at_key=True)
        return _node_count(spec) + limits + _vip(spec)
    if kind == "MLPlatform":
        gpus = spec.get("gpus")
        families = [g.get("family") for g in gpus if isinstance(g, dict)] if isinstance(gpus, list) else []
        return _families(("spec", "gpus"), families, at_key=False) + _vip(spec)
    if kind == "WorkloadProfile":
        return _min_nodes(data.get("metadata"))
    if kind == "Settings":
        palette = spec.get("palette")
        return _secret_ref(palette.get("apiKeySecretRef")) if isinstance(palette, dict) else []
    if kind == "ScalingPolicy":
        return check_scaling_policy(data)
    return []


# The fields of each kind that name another resource of the namespace (field path, referenced kind).
REFERENCE_FIELDS: dict[str, tuple[tuple[tuple[str, ...], str], ...]] = {
    "Project": ((("spec", "computeProfileRef", "name"), "ComputeProfile"),
                (("spec", "settingsRef", "name"), "Settings")),
    "ComputeProfile": ((("spec", "settingsRef", "name"), "Settings"),),
    "Compute": ((("spec", "settingsRef", "name"), "Settings"),),
    "MLPlatform": ((("spec", "computeProfileRef", "name"), "ComputeProfile"),
                   (("spec", "workloadProfileRef", "name"), "WorkloadProfile"),
                   (("spec", "computePoolRef", "name"), "ComputePool")),
    "ComputePool": ((("spec", "computeProfileRef", "name"), "ComputeProfile"),
                    (("spec", "workloadProfileRef", "name"), "WorkloadProfile"),
                    (("spec", "scalingPolicyRef", "name"), "ScalingPolicy"),
                    (("spec", "profileBundleRef", "name"), "ProfileBundle")),
    "AIWorkload": ((("spec", "computePoolRef", "name"), "ComputePool"),
                   (("spec", "environmentRef", "name"), "Environment"),
                   (("spec", "workloadProfileRef", "name"), "WorkloadProfile"),
                   (("spec", "profileBundleRef", "name"), "ProfileBundle")),
}  # fmt: skip


def named_references(kind: str, data: Mapping[str, Any]) -> list[tuple[tuple[str, ...], str, str]]:
    """(field path, referenced kind, name) of every reference a document's data spells out: for a
    document the schema refused, whose references are still worth checking in the same run."""
    found = []
    for path, target in REFERENCE_FIELDS.get(kind, ()):
        value: Any = data
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        if isinstance(value, str) and value:
            found.append((path, target, value))
    return found


def _keys(value: Any) -> list[Any]:
    return list(value) if isinstance(value, dict) else []


def _node_count(spec: Mapping[str, Any]) -> list[Problem]:
    edge = spec.get("edge")
    two_node = isinstance(edge, dict) and edge.get("isTwoNode") is True
    defaults = spec.get("controlPlaneDefaults")
    count = defaults.get("nodeCount") if isinstance(defaults, dict) else None
    if not isinstance(count, int) or isinstance(count, bool) or count not in (1, 2, 3, 5):
        return []  # missing or not allowed at all: the schema layer says so
    path = ("spec", "controlPlaneDefaults", "nodeCount")
    if count == 2 and not two_node:
        message = "2 is allowed only when spec.edge.isTwoNode is true; use 1, 3 or 5"
        return [Problem(path, f"spec.controlPlaneDefaults.nodeCount: {message}")]
    if two_node and count != 2:
        message = f"must be 2 when spec.edge.isTwoNode is true; got {count}"
        return [Problem(path, f"spec.controlPlaneDefaults.nodeCount: {message}")]
    return []


def _families(base: tuple[str, ...], names: list[Any], at_key: bool) -> list[Problem]:
    """Family names must be canonicalisable, and must not name one family twice."""
    problems: list[Problem] = []
    seen: dict[str, str] = {}
    for i, name in enumerate(names):
        if not isinstance(name, str) or not name:
            continue  # the schema layer reports a missing or non-string family
        path: tuple[PathElem, ...] = (*base, name) if at_key else (*base, i, "family")
        where = f"{'.'.join(base)}.{name}" if at_key else f"{'.'.join(base)}[{i}].family"
        try:
            canonical = canonical_family(name)
        except ValueError:
            hint = "use letters, digits, '.', '+' and separators, e.g. NVIDIA-H100"
            problems.append(Problem(path, f"{where}: {name!r} is not a GPU family name; {hint}", at_key))
            continue
        if canonical in seen:
            message = (
                f"{where}: GPU family {canonical} is listed twice ({seen[canonical]!r} and {name!r}); "
                "names compare case-insensitively with ' ', '-' and '_' equivalent"
            )
            problems.append(Problem(path, message, at_key))
        seen[canonical] = name
    return problems


def _min_nodes(metadata: Any) -> list[Problem]:
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    value = labels.get(MIN_NODES_LABEL) if isinstance(labels, dict) else None
    if not isinstance(value, str):
        return []  # absent, or not a string: the schema layer reports the latter
    if parse_min_nodes(value) is not None:
        return []
    message = f"metadata.labels.{MIN_NODES_LABEL}: {min_nodes_problem(value)}"
    return [Problem(("metadata", "labels", MIN_NODES_LABEL), message)]


def _vip(spec: Mapping[str, Any]) -> list[Problem]:
    edge = spec.get("edge")
    value = edge.get("vip") if isinstance(edge, dict) else None
    if not isinstance(value, str):
        return []  # absent, or not a string: the schema layer reports the latter
    problem = vip_problem(value)
    if problem is None:
        return []
    return [Problem(("spec", "edge", "vip"), f"spec.edge.vip: {problem}")]


def _secret_ref(ref: Any) -> list[Problem]:
    if not isinstance(ref, dict):
        return []
    has_env, has_file = ref.get("env") is not None, ref.get("file") is not None
    if has_env != has_file:
        return []
    which = "both" if has_env else "neither"
    message = (
        f"spec.palette.apiKeySecretRef: has {which} of env and file; set exactly one: "
        "{env: NAME} or {file: PATH}"
    )
    return [Problem(("spec", "palette", "apiKeySecretRef"), message)]
