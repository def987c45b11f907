"""Status files of Environments and of Projects with a GPU quota (docs/environments.md), pure.

- ``<ns>/environments/<name>.yaml``: ``candidates`` (the resolved candidate pools, in order) and
  ``workloads: {name: pool}`` (null for a workload in no pool), for every valid Environment. An invalid
  Environment keeps the file it had (its workloads keep what they hold; their own files say Invalid).
- ``<ns>/projects/<name>.yaml``: ``gpuQuota: {<family>: {quota, used, free}}`` as the pass leaves it, for
  every Project that sets ``spec.gpuQuota``; a family used above its quota (a lowered quota: nothing
  running is shrunk) is named in ``overQuota`` with what that means.

Both start with ``observedRevision`` and ``inputsHash`` like every status, so a file changes only when
something about its own resource changed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from reconciler.model.desired import DesiredState
from reconciler.model.environment import Environment
from reconciler.model.resources import KINDS, ComputePool, Project
from reconciler.placement.admission_types import WorkloadAction
from reconciler.placement.environment import candidates
from reconciler.placement.quota import QuotaUse
from reconciler.plan import Plan
from reconciler.status.render import dump, observed_fields, resource_inputs, status_path


def _doc(kind: str, namespace: str, name: str, status: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": KINDS[kind][0],
        "kind": kind,
        "metadata": {"namespace": namespace, "name": name},
        "status": status,
    }


def environment_files(
    desired: DesiredState,
    plans: Iterable[Plan],
    revision: str | None,
    before: Mapping[str, bytes],
    previous: Mapping[str, Mapping[str, Any]],
) -> dict[str, bytes]:
    """The Environment and Project status files of the pass (module docstring)."""
    every = list(plans)
    files: dict[str, bytes] = {}
    placed: dict[tuple[str, str], dict[str, str | None]] = {}
    for plan in every:
        for w in plan.workloads:
            if w.environment is not None and w.action is not WorkloadAction.REMOVE:
                placed.setdefault((w.namespace, w.environment), {})[w.name] = w.pool
    pools = list(desired.of_kind(ComputePool))
    for env in desired.of_kind(Environment):
        ns, name = env.metadata.namespace, env.metadata.name
        path = status_path("Environment", ns, name)
        status = {
            **observed_fields(
                revision, resource_inputs(desired, "Environment", ns, name), previous.get(path)
            ),
            "candidates": list(candidates(env, [p for p in pools if p.metadata.namespace == ns])),
            "workloads": dict(sorted(placed.get((ns, name), {}).items())),
        }
        files[path] = dump(_doc("Environment", ns, name, status))
    for kind, ns, name in desired.invalid:
        path = status_path(kind, ns, name)
        if kind == "Environment" and path in before:
            files[path] = before[path]
    files.update(_project_files(desired, [q for p in every for q in p.quotas], revision, previous))
    return files


def _project_files(
    desired: DesiredState,
    uses: Iterable[QuotaUse],
    revision: str | None,
    previous: Mapping[str, Mapping[str, Any]],
) -> dict[str, bytes]:
    by_ns: dict[str, dict[str, QuotaUse]] = {}
    for use in uses:
        by_ns.setdefault(use.namespace, {})[use.family] = use
    files: dict[str, bytes] = {}
    for project in desired.of_kind(Project):
        ns, name = project.metadata.namespace, project.metadata.name
        if not project.spec.gpu_quota or desired.project(ns) is not project:
            continue
        path = status_path("Project", ns, name)
        quota = by_ns.get(ns, {})
        status: dict[str, Any] = {
            **observed_fields(revision, resource_inputs(desired, "Project", ns, name), previous.get(path)),
            "gpuQuota": {
                f: {"quota": u.quota, "used": u.used, "free": u.free} for f, u in sorted(quota.items())
            },
        }
        over = {
            f: f"uses {u.used} of {u.quota}: nothing running is shrunk; new clusters and grows of {f} are "
            "refused (QuotaExceeded) until it is back under"
            for f, u in sorted(quota.items())
            if u.used > u.quota
        }
        if over:
            status["overQuota"] = over
        files[path] = dump(_doc("Project", ns, name, status))
    return files
