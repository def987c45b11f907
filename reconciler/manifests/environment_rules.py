"""Validation rules of Environments, of workloads placed through them and of Project GPU quotas
(docs/environments.md). Two entry points, as in :mod:`reconciler.manifests.pool_rules`:

- ``check_environment_document(kind, data)``: per-document rules on the plain data: an Environment
  names its pools by list or by selector (exactly one), each listed pool once; an AIWorkload names
  exactly one of ``computePoolRef`` and ``environmentRef`` (neither only with a ``profileBundleRef``,
  whose rules are the bundle's); a Project's ``gpuQuota`` keys are GPU family names, each family once.
- ``check_environments(docs)``: cross-resource rules: a workload's Environment (and, for a workload
  placed through one, its WorkloadProfile) resolves in its namespace; a listed pool that does not exist
  is a warning (the Environment stays valid: its other pools still take workloads; the plan reports
  that candidate ``ReferenceNotFound``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reconciler.manifests.references import DocIndex, PoolDoc, need
from reconciler.manifests.rules import _families, _keys
from reconciler.manifests.schema import Problem
from reconciler.model.environment import Environment


def check_environment_document(kind: str, data: Mapping[str, Any]) -> list[Problem]:
    spec = data.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    if kind == "Environment":
        return _environment_spec(spec)
    if kind == "AIWorkload":
        return _workload_refs(spec)
    if kind == "Project":
        return _families(("spec", "gpuQuota"), _keys(spec.get("gpuQuota")), at_key=True)
    return []


def _environment_spec(spec: Mapping[str, Any]) -> list[Problem]:
    has_list, has_selector = spec.get("pools") is not None, spec.get("poolSelector") is not None
    if has_list and has_selector:
        return [
            Problem(
                ("spec", "poolSelector"),
                "spec.poolSelector: an Environment names its pools by spec.pools or by spec.poolSelector, "
                "not both: remove one",
                at_key=True,
            )
        ]
    if not has_list and not has_selector:
        return [
            Problem(
                ("spec",),
                "spec: an Environment needs spec.pools (its ComputePools, in order) or spec.poolSelector "
                "(matchLabels over the namespace's ComputePools)",
            )
        ]
    pools = spec.get("pools")
    if not isinstance(pools, list):
        return []  # a selector, or a wrong type the schema layer reports
    if not pools:
        return [Problem(("spec", "pools"), "spec.pools: lists no pool; name at least one ComputePool")]
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    for i, entry in enumerate(pools):
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str):
            continue
        if name in seen:
            problems.append(
                Problem(
                    ("spec", "pools", i, "name"),
                    f"spec.pools[{i}].name: ComputePool {name} is listed twice (first at "
                    f"spec.pools[{seen[name]}])",
                )
            )
        seen.setdefault(name, i)
    return problems


def _workload_refs(spec: Mapping[str, Any]) -> list[Problem]:
    has_pool, has_env = spec.get("computePoolRef") is not None, spec.get("environmentRef") is not None
    if has_pool and has_env:
        return [
            Problem(
                ("spec", "environmentRef"),
                "spec.environmentRef: a workload names its ComputePool (spec.computePoolRef) or its "
                "Environment (spec.environmentRef), not both: remove one",
                at_key=True,
            )
        ]
    if not has_pool and not has_env and spec.get("profileBundleRef") is None:
        return [
            Problem(
                ("spec",),
                "spec: a workload needs spec.computePoolRef (its ComputePool) or spec.environmentRef (the "
                "Environment whose first pool that can hold it admits it)",
            )
        ]
    return []


def check_environments(docs: Sequence[PoolDoc]) -> None:
    """Cross-resource rules (see the module docstring); problems and warnings go to the documents."""
    if not any(doc.kind == "Environment" or _env_ref(doc) for doc in docs):
        return
    index = DocIndex(docs)
    for doc in docs:
        env = _env_ref(doc)
        if env is None or doc.problems or doc.namespace is None or doc.facts is None:
            continue
        ns = doc.namespace
        need(doc.problems, index, ("spec", "environmentRef", "name"), "Environment", ns, env)
        if doc.facts.workload_ref is not None:
            name = doc.facts.workload_ref
            need(doc.problems, index, ("spec", "workloadProfileRef", "name"), "WorkloadProfile", ns, name)
    for doc in docs:
        environment = doc.resource
        if not isinstance(environment, Environment) or doc.problems:
            continue
        ns = environment.metadata.namespace
        for i, ref in enumerate(environment.spec.pools or ()):
            if index.status("ComputePool", ns, ref.name) == "missing":
                doc.warnings.append(
                    Problem(
                        ("spec", "pools", i, "name"),
                        f"spec.pools[{i}].name: ComputePool '{ref.name}' not found in namespace {ns}; "
                        "this candidate is skipped (ReferenceNotFound) until it exists",
                    )
                )


def _env_ref(doc: PoolDoc) -> str | None:
    facts = doc.facts
    return facts.environment_ref if facts is not None and doc.kind == "AIWorkload" else None
