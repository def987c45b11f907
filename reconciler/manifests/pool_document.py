"""Per-document validation rules of compute pools, workloads and platforms on the plain data, those a
JSON Schema cannot say well (like ``rules.check_document``; docs/validation.md): family names parse and
are listed once, a tenant asks for at least one GPU of each family, a platform's mode agrees with its
``computePoolRef``. The rules across documents are :mod:`reconciler.manifests.pool_rules`'.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.manifests.schema import Problem
from reconciler.model.gpu import canonical_family


def check_pool_document(kind: str, data: Mapping[str, Any]) -> list[Problem]:
    """Rules of one ComputePool, AIWorkload or MLPlatform document that a JSON Schema cannot say well."""
    spec = data.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    if kind == "ComputePool":
        return _family_entries(spec.get("gpus"), with_mig=False, tenant=False)
    if kind == "AIWorkload":
        return _family_entries(spec.get("gpus"), with_mig=True, tenant=True)
    if kind == "MLPlatform":
        return _platform_mode(spec)
    return []


def _platform_mode(spec: Mapping[str, Any]) -> list[Problem]:
    mode = spec.get("mode", "dedicated")
    has_pool = spec.get("computePoolRef") is not None
    if mode == "shared":
        problems = []
        if not has_pool:
            problems.append(
                Problem(
                    ("spec", "mode"),
                    "spec.computePoolRef: required with mode shared: a shared platform is a tenant of a "
                    "ComputePool of its namespace; set spec.computePoolRef.name",
                )
            )
        # The family names themselves (and duplicates) are checked by the MLPlatform rules.
        gpus = spec.get("gpus")
        for i, gpu in enumerate(gpus if isinstance(gpus, list) else []):
            count = gpu.get("count") if isinstance(gpu, dict) else None
            if count == 0 and not isinstance(count, bool):
                problems.append(_zero_count(i))
        return problems
    if mode == "dedicated" and has_pool:
        return [
            Problem(
                ("spec", "computePoolRef"),
                "spec.computePoolRef: only with mode shared; a dedicated platform gets its own cluster "
                "(set spec.mode: shared to run it on the pool, or remove spec.computePoolRef)",
                at_key=True,
            )
        ]
    return []


def _zero_count(i: int) -> Problem:
    return Problem(
        ("spec", "gpus", i, "count"),
        f"spec.gpus[{i}].count: a workload needs at least 1 GPU of each family it lists; got 0 "
        "(remove the entry instead)",
    )


def _family_entries(gpus: Any, with_mig: bool, tenant: bool) -> list[Problem]:
    """Family names parse; (family, MIG profile) is listed once; a tenant asks for at least 1 of each."""
    problems: list[Problem] = []
    seen: dict[tuple[str, str | None], int] = {}
    for i, entry in enumerate(gpus if isinstance(gpus, list) else []):
        if not isinstance(entry, dict):
            continue  # the schema layer reports it
        name, mig = entry.get("family"), entry.get("mig") if with_mig else None
        count = entry.get("count")
        if tenant and count == 0 and not isinstance(count, bool):
            problems.append(_zero_count(i))
        if not isinstance(name, str) or not name:
            continue
        where = f"spec.gpus[{i}].family"
        try:
            family = canonical_family(name)
        except ValueError:
            hint = "use letters, digits, '.', '+' and separators, e.g. NVIDIA-A100"
            problems.append(
                Problem(("spec", "gpus", i, "family"), f"{where}: {name!r} is not a GPU family name; {hint}")
            )
            continue
        key = (str(family), mig if isinstance(mig, str) else None)
        if key in seen:
            what = f"GPU family {family}" + (f" with MIG profile {key[1]}" if key[1] else "")
            problems.append(
                Problem(
                    ("spec", "gpus", i, "family"),
                    f"{where}: {what} is listed twice (spec.gpus[{seen[key]}] and spec.gpus[{i}]); "
                    "names compare case-insensitively with ' ', '-' and '_' equivalent; add the counts up",
                )
            )
        seen.setdefault(key, i)
    return problems
