"""The rules of a ScalingPolicy that span its fields, checked on the document's plain data.

At least one of ``cpu`` and ``gpu``; each rule with its bounds (``cpuResourceBounds`` with ``cpu``, one
``gpuResourceBounds`` entry per ``gpu`` family and none without a rule); a family once per list; every
window at least one ``metrics.step`` long. They run on the data, not in the model, so that a policy with
a wrong field also gets them, in the same ``validate`` run (a model's validators stop at the first
field error). Entries the schema layer refuses (not a mapping, a family that is not a name, a duration
that does not parse) are left to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.manifests.schema import Problem
from reconciler.model.duration import parse_duration
from reconciler.model.gpu import GpuFamily, canonical_family
from reconciler.model.scaling import DEFAULT_SCALE_DOWN_DURATION, DEFAULT_SCALE_UP_DURATION, DEFAULT_STEP


def _family(entry: Any) -> GpuFamily | None:
    name = entry.get("family") if isinstance(entry, Mapping) else None
    if not isinstance(name, str) or not name:
        return None
    try:
        return canonical_family(name)
    except ValueError:
        return None


def _seconds(text: Any) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        return parse_duration(text)
    except ValueError:
        return None


def _entries(spec: Mapping[str, Any], key: str) -> list[Any] | None:
    value = spec.get(key)
    return value if isinstance(value, list) else None


def _twice(key: str, families: list[GpuFamily | None]) -> list[Problem]:
    seen: set[GpuFamily] = set()
    for family in families:
        if family is None:
            continue
        if family in seen:
            message = f"spec.{key}: GPU family {family} appears twice in {key}"
            return [Problem(("spec", key), message)]
        seen.add(family)
    return []


def _bounds(spec: Mapping[str, Any]) -> list[Problem]:
    rules, bounds = _entries(spec, "gpu"), _entries(spec, "gpuResourceBounds")
    problems: list[Problem] = []
    if rules and "gpuResourceBounds" not in spec:
        families = ", ".join(f for f in (_family(r) for r in rules) if f)
        message = f"spec: gpuResourceBounds: required with gpu rules; no bound for GPU family {families}"
        return [Problem(("spec",), message)]
    if rules is None or bounds is None:
        return problems
    ruled = [f for f in (_family(r) for r in rules) if f]
    bounded = [f for f in (_family(b) for b in bounds) if f]
    path = ("spec", "gpuResourceBounds")
    missing = [f for f in dict.fromkeys(ruled) if f not in bounded]
    if missing:
        message = (
            f"spec.gpuResourceBounds: no bound for GPU family {', '.join(missing)}: every gpu family "
            "needs one (family, minGPUCount, maxGPUCount)"
        )
        problems.append(Problem(path, message))
    extra = [f for f in dict.fromkeys(bounded) if f not in ruled]
    if extra:
        message = f"spec.gpuResourceBounds: bound for GPU family {', '.join(extra)} without a gpu rule"
        problems.append(Problem(path, message))
    return problems


def _cpu(spec: Mapping[str, Any]) -> list[Problem]:
    if spec.get("cpu") is not None and "cpuResourceBounds" not in spec:
        return [Problem(("spec",), "spec: cpuResourceBounds: required with a cpu rule")]
    if spec.get("cpuResourceBounds") is not None and spec.get("cpu") is None:
        message = "spec.cpuResourceBounds: is set but there is no cpu rule to scale by"
        return [Problem(("spec", "cpuResourceBounds"), message)]
    return []


def _windows(spec: Mapping[str, Any]) -> list[Problem]:
    metrics = spec.get("metrics")
    step_text = metrics.get("step", DEFAULT_STEP) if isinstance(metrics, Mapping) else DEFAULT_STEP
    step = _seconds(step_text)
    if step is None:
        return []
    rules = [spec.get("cpu"), *(_entries(spec, "gpu") or [])]
    for rule in rules:
        if not isinstance(rule, Mapping):
            continue
        for key, default in (
            ("scaleUpDuration", DEFAULT_SCALE_UP_DURATION),
            ("scaleDownDuration", DEFAULT_SCALE_DOWN_DURATION),
        ):
            window = rule.get(key, default)
            seconds = _seconds(window)
            if seconds is not None and seconds < step:
                message = (
                    f"spec: metrics.step {step_text} is longer than the window {window}: a window needs at "
                    "least one step"
                )
                return [Problem(("spec",), message)]
    return []


def check_scaling_policy(data: Mapping[str, Any]) -> list[Problem]:
    """Every cross-field rule of one ScalingPolicy document (see the module docstring)."""
    spec = data.get("spec")
    if not isinstance(spec, Mapping):
        return []  # the schema layer says what is wrong with it
    if spec.get("cpu") is None and not spec.get("gpu"):
        return [Problem(("spec",), "spec: needs at least one of cpu and gpu")]
    rules, bounds = _entries(spec, "gpu") or [], _entries(spec, "gpuResourceBounds") or []
    return (
        _twice("gpu", [_family(r) for r in rules])
        + _twice("gpuResourceBounds", [_family(b) for b in bounds])
        + _bounds(spec)
        + _cpu(spec)
        + _windows(spec)
    )
