"""Cross-resource rules of the core kinds, run by the loader once every document is identified
(docs/validation.md): one document per identity, Projects, the references of platforms, platform VIPs
and what admission needs. The pool, bundle and environment rules run between the two entry points.
"""

from __future__ import annotations

import difflib
from collections import defaultdict

from reconciler import resolve
from reconciler.manifests.record import Facts, Record
from reconciler.manifests.references import MISSING, DocIndex, compute_profile_problems, need
from reconciler.manifests.schema import PathElem, Problem, field_path
from reconciler.model.conditions import Reason
from reconciler.model.desired import Identity
from reconciler.model.diagnostics import UNKNOWN_GPU_FAMILY
from reconciler.model.gpu import KNOWN_FAMILIES, canonical_family
from reconciler.model.resources import Compute, ComputeProfile, Project


def check_identities(items: list[Record]) -> None:
    """Duplicate identities, Projects and the references of platforms (before the pool rules)."""
    _check_duplicates(items)
    _check_projects(items)
    _check_references(items)


def check_platform_vips_and_admission(items: list[Record]) -> None:
    """Platform VIPs and admission, on an index of what is still valid after every other rule."""
    index = _Index(items)
    _check_vips(items, index)
    _check_admission(items, index)


def _ref_problem(path: tuple[PathElem, ...], kind: str, name: str, namespace: str) -> Problem:
    return Problem(
        path,
        f"ReferenceNotFound: {field_path(path)}: {kind} '{name}' not found in namespace {namespace}",
        reason=Reason.REFERENCE_NOT_FOUND,
    )


class _Index(DocIndex):
    """The revision's documents (:class:`DocIndex`), with the ComputeProfile each platform uses cached."""

    def __init__(self, items: list[Record]) -> None:
        super().__init__(items)
        self._profiles: dict[tuple[str, str | None], ComputeProfile | None] = {}

    def profile_of(self, ns: str, platform: Facts) -> ComputeProfile | None:
        """The valid ComputeProfile a platform uses (thousands of platforms share a few answers)."""
        key = (ns, platform.profile_ref)
        if key not in self._profiles:
            name = resolve.profile_name(platform.profile_ref, self.project(ns))
            self._profiles[key] = self.typed(ComputeProfile, ns, name) if name else None
        return self._profiles[key]


def _check_duplicates(items: list[Record]) -> None:
    groups: dict[Identity, list[Record]] = defaultdict(list)
    for item in items:
        if item.identity is not None:
            groups[item.identity].append(item)
    for group in groups.values():
        if len(group) < 2:
            continue
        # At most three places each: a hostile file with thousands of copies must not make the work or
        # the messages grow with the square of their number.
        wheres = [o.where for o in group[:4]]
        for i, item in enumerate(group):
            places = [w for j, w in enumerate(wheres) if j != i][:3]
            more = len(group) - 1 - len(places)
            others = ", ".join(places) + (f" and {more} more" if more > 0 else "")
            item.problems.append(
                Problem(
                    ("metadata", "name"),
                    f"metadata.name: duplicate {item.label()}: also defined at {others}; "
                    "(kind, namespace, name) must be unique",
                )
            )


def _check_projects(items: list[Record]) -> None:
    """One Project per namespace: it is the namespace's fallback for references."""
    by_ns: dict[str, list[Record]] = defaultdict(list)
    for item in items:
        if isinstance(item.resource, Project) and not item.problems:
            by_ns[item.resource.metadata.namespace].append(item)
    for group in by_ns.values():
        group.sort(key=lambda d: d.name or "")
        first = group[0]
        for item in group[1:]:
            item.problems.append(
                Problem(
                    ("metadata", "name"),
                    f"metadata.name: namespace {item.namespace} already has Project '{first.name}' "
                    f"({first.where}); one Project per namespace",
                )
            )


def _check_references(items: list[Record]) -> None:
    """References resolve inside the namespace; platforms depending on invalid resources are invalid."""
    index = _Index(items)
    for item in items:
        res = item.resource
        if res is None or item.problems or item.kind == "MLPlatform":
            continue
        ns = res.metadata.namespace
        refs: list[tuple[tuple[PathElem, ...], str, str]] = []
        if isinstance(res, Project):
            profile_name = res.spec.compute_profile_ref.name
            refs.append((("spec", "computeProfileRef", "name"), "ComputeProfile", profile_name))
            if res.spec.settings_ref is not None:
                refs.append((("spec", "settingsRef", "name"), "Settings", res.spec.settings_ref.name))
        elif isinstance(res, ComputeProfile | Compute) and res.spec.settings_ref is not None:
            refs.append((("spec", "settingsRef", "name"), "Settings", res.spec.settings_ref.name))
        for path, kind, name in refs:
            if index.status(kind, ns, name) == MISSING:
                item.problems.append(_ref_problem(path, kind, name, ns))
    index = _Index(items)
    for item in items:
        if item.kind == "MLPlatform" and item.facts is not None and not item.problems:
            item.problems.extend(_platform_refs(item.namespace or "", item.facts, index))
    for item in items:  # refused by the schema: its references are still reported in the same run
        if not item.schema_ok and item.kind is not None and item.namespace is not None:
            reported = {p.path for p in item.problems}
            for path, kind, name in item.refs:
                if path not in reported and index.status(kind, item.namespace, name) == MISSING:
                    item.problems.append(_ref_problem(path, kind, name, item.namespace))


def _platform_refs(ns: str, platform: Facts, index: _Index) -> list[Problem]:
    problems = compute_profile_problems(platform.profile_ref, ns, index, subject="platform")
    if platform.workload_ref is not None:
        path = ("spec", "workloadProfileRef", "name")
        need(problems, index, path, "WorkloadProfile", ns, platform.workload_ref, subject="platform")
    return problems


def _check_vips(items: list[Record], index: _Index) -> None:
    """Two clusters never share a VIP: the first platform (namespace, name order) keeps it.

    Invalid platforms keep their clusters, so a VIP they state still counts as taken.
    """
    owners: dict[str, Record] = {}
    platforms = [i for i in items if i.kind == "MLPlatform" and i.identity is not None]
    platforms.sort(key=lambda d: (d.namespace or "", d.name or ""))
    for item in platforms:
        platform = item.facts
        if platform is not None and platform.mode == "shared":
            continue  # a tenant of a pool: no cluster of its own
        if item.problems or platform is None:
            if item.raw_vip is not None:
                owners.setdefault(item.raw_vip, item)
            continue
        found = resolve.vip_of(platform.vip, index.profile_of(item.namespace or "", platform))
        if found is None:
            continue
        vip = found.address
        path: tuple[PathElem, ...] = ("spec", "edge", "vip")
        if not found.from_platform:
            has_ref = platform.has_profile_ref
            path = ("spec", "computeProfileRef") if has_ref else ("spec",)
        first = owners.setdefault(vip, item)
        if first is item:
            continue
        source = "spec.edge.vip" if found.from_platform else "the ComputeProfile's spec.edge.vip"
        state = " (invalid, but its cluster is kept)" if first.problems else ""
        item.problems.append(
            Problem(
                path,
                f"{field_path(path)}: VIP {vip} (from {source}) is already used by MLPlatform "
                f"{first.namespace}/{first.name}{state} ({first.where}); two clusters never share a VIP, "
                "give this platform its own spec.edge.vip",
            )
        )


def _check_admission(items: list[Record], index: _Index) -> None:
    """Warn about valid platforms that allocation will refuse whatever the inventory holds.

    A request above the ComputeProfile's ``gpuLimits`` is rejected with GPULimitExceeded
    (docs/allocation.md). Saying so at validation time lets a pull request catch it; the platform itself stays
    valid (a rejection keeps an existing cluster). A shared-mode platform is a tenant of its pool: the
    pool rules (``pool_rules``) warn about what admission will refuse.
    """
    breaches: dict[tuple[int, tuple[tuple[str, int], ...]], list[resolve.LimitBreach]] = {}
    for item in items:
        platform = item.facts
        if item.problems or platform is None or item.kind != "MLPlatform":
            continue
        for i, (name, _count) in enumerate(platform.gpus):
            family = canonical_family(name)
            if family not in KNOWN_FAMILIES:
                item.warnings.append(
                    Problem(
                        ("spec", "gpus", i, "family"),
                        f"spec.gpus[{i}].family: {family} is not a known GPU family{_did_you_mean(family)}; "
                        f"only hosts tagged gpu-family: {family} can serve it",
                        reason=UNKNOWN_GPU_FAMILY,
                    )
                )
        if platform.mode == "shared":
            continue  # its limits are its pool's: reconciler.manifests.pool_rules warns about them
        profile = index.profile_of(item.namespace or "", platform)
        if profile is None:
            continue
        # Platforms ask for a handful of distinct GPU lists: the answer is kept per (profile, list).
        key = (id(profile), platform.gpus)
        found = breaches.get(key)
        if found is None:
            found = breaches[key] = resolve.gpu_limit_breaches(platform.gpus, profile)
        for breach in found:
            i = breach.index
            item.warnings.append(
                Problem(
                    ("spec", "gpus", i, "count"),
                    f"spec.gpus[{i}].count: {breach.count} {breach.family} GPUs exceed the limit of "
                    f"{breach.limit} in ComputeProfile {profile.metadata.namespace}/{profile.metadata.name}; "
                    "this platform is rejected with GPULimitExceeded: a new one is not created, a running "
                    "one is kept as it is (Degraded, not scaled) until the request or the limit changes",
                    reason=Reason.GPU_LIMIT_EXCEEDED,
                )
            )


def _did_you_mean(family: str) -> str:
    close = difflib.get_close_matches(family, sorted(KNOWN_FAMILIES), n=1, cutoff=0.75)
    return f" (did you mean {close[0]}?)" if close else ""
