"""Rules a JSON Schema cannot say well: per-resource rules on typed models (the third layer).

Cross-resource rules (duplicates, references, VIP clashes) need every document and live in
``reconciler.manifests.loader``.
"""

from __future__ import annotations

from reconciler.manifests.schema import Problem
from reconciler.model.gpu import canonical_family
from reconciler.model.resources import ComputeProfile, MLPlatform, Resource, Settings, WorkloadProfile

MIN_NODES_LABEL = "palette.ai/min-nodes"


def check_resource(resource: Resource) -> list[Problem]:
    """Per-resource rules of DESIGN.md section 3, after the model accepted the document."""
    if isinstance(resource, ComputeProfile):
        return _compute_profile(resource)
    if isinstance(resource, MLPlatform):
        return _platform(resource)
    if isinstance(resource, WorkloadProfile):
        return _workload_profile(resource)
    if isinstance(resource, Settings):
        return _settings(resource)
    return []


def _compute_profile(profile: ComputeProfile) -> list[Problem]:
    problems: list[Problem] = []
    spec = profile.spec
    two_node = spec.edge is not None and spec.edge.is_two_node
    count = spec.control_plane_defaults.node_count
    if count == 2 and not two_node:
        problems.append(
            Problem(
                ("spec", "controlPlaneDefaults", "nodeCount"),
                "spec.controlPlaneDefaults.nodeCount: 2 is allowed only when spec.edge.isTwoNode is true; "
                "use 1, 3 or 5",
            )
        )
    elif two_node and count != 2:
        problems.append(
            Problem(
                ("spec", "controlPlaneDefaults", "nodeCount"),
                "spec.controlPlaneDefaults.nodeCount: must be 2 when spec.edge.isTwoNode is true; "
                f"got {count}",
            )
        )
    problems.extend(_families(("spec", "gpuLimits"), list(spec.gpu_limits), at_key=True))
    return problems


def _platform(platform: MLPlatform) -> list[Problem]:
    families = [g.family for g in platform.spec.gpus]
    return _families(("spec", "gpus"), families, at_key=False)


def _families(base: tuple[str, ...], names: list[str], at_key: bool) -> list[Problem]:
    """Family names must be canonicalisable, and must not name one family twice."""
    problems: list[Problem] = []
    seen: dict[str, str] = {}
    for i, name in enumerate(names):
        path: tuple[str | int, ...] = (*base, name) if at_key else (*base, i, "family")
        where = f"{'.'.join(base)}.{name}" if at_key else f"{'.'.join(base)}[{i}].family"
        try:
            canonical = canonical_family(name)
        except ValueError:
            problems.append(
                Problem(
                    path,
                    f"{where}: {name!r} is not a GPU family name; use letters, digits, '.', '+' and "
                    "separators, e.g. NVIDIA-H100",
                    at_key=at_key,
                )
            )
            continue
        if canonical in seen:
            problems.append(
                Problem(
                    path,
                    f"{where}: GPU family {canonical} is listed twice ({seen[canonical]!r} and {name!r}); "
                    "names compare case-insensitively with ' ', '-' and '_' equivalent",
                    at_key=at_key,
                )
            )
        seen[canonical] = name
    return problems


def _workload_profile(profile: WorkloadProfile) -> list[Problem]:
    value = profile.metadata.labels.get(MIN_NODES_LABEL)
    if value is None:
        return []
    if not (value.isascii() and value.isdigit() and int(value) > 0):
        return [
            Problem(
                ("metadata", "labels", MIN_NODES_LABEL),
                f"metadata.labels.{MIN_NODES_LABEL}: must be a positive integer such as '3'; got {value!r}",
            )
        ]
    return []


def _settings(settings: Settings) -> list[Problem]:
    ref = settings.spec.palette.api_key_secret_ref
    if (ref.env is None) == (ref.file is None):
        which = "both" if ref.env is not None else "neither"
        return [
            Problem(
                ("spec", "palette", "apiKeySecretRef"),
                f"spec.palette.apiKeySecretRef: has {which} of env and file; set exactly one: "
                "{env: NAME} or {file: PATH}",
            )
        ]
    return []
