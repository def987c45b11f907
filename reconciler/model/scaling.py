"""The ``ScalingPolicy`` kind (``spectrocloud.com/v1alpha1``, docs/scaling.md).

PaletteAI's field names; durations are Go duration strings parsed by :mod:`reconciler.model.duration`;
thresholds are percentages. Rules inside one object (up above down, ``min <= max``) are validators
here; rules that span the spec (at least one of ``cpu``/``gpu``, a bound for every ``gpu`` family, a
family once, windows of at least one step) are checked on the document's data by
:mod:`reconciler.manifests.scaling_rules`, so they are reported even when a field is wrong.
Defaults (written down in docs/scaling.md): both scale
durations 5m up / 10m down, cooldown 15m, abort 30m, step 15s, and the queries below.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from reconciler.model.base import NonNegativeInt, ObjectMeta, Strict
from reconciler.model.duration import DURATION_HINT, DURATION_PATTERN, parse_duration
from reconciler.model.gpu import GpuFamily, canonical_family

# DCGM_FI_DEV_GPU_UTIL reads 0 on MIG instances (NVIDIA/dcgm-exporter #216); the graphics-engine
# activity is reported for whole GPUs and MIG instances alike, as a ratio 0-1.
DEFAULT_GPU_QUERY = '100 * avg(DCGM_FI_PROF_GR_ENGINE_ACTIVE{cluster="$cluster"})'
DEFAULT_CPU_QUERY = '100 * (1 - avg(rate(node_cpu_seconds_total{mode="idle",cluster="$cluster"}[2m])))'
DEFAULT_STEP = "15s"
DEFAULT_SCALE_UP_DURATION = "5m"
DEFAULT_SCALE_DOWN_DURATION = "10m"
DEFAULT_COOLDOWN = "15m"
DEFAULT_ABORT = "30m"


def _positive_duration(text: str) -> str:
    try:
        seconds = parse_duration(text)
    except ValueError:
        raise PydanticCustomError("duration", DURATION_HINT) from None
    if seconds <= 0:
        raise PydanticCustomError("duration", "must be a positive duration such as 30s, 5m or 1h30m")
    return text


# The pattern is for the JSON Schema only: the validator gives the readable message.
Duration = Annotated[
    str,
    Field(description="A Go duration: 30s, 5m, 1h30m.", json_schema_extra={"pattern": DURATION_PATTERN}),
    AfterValidator(_positive_duration),
]
Percent = Annotated[float, Field(ge=0, le=100, description="A percentage, 0-100.")]


def _family(name: str) -> str:
    try:
        canonical_family(name)
    except ValueError:
        raise PydanticCustomError("family", "not a GPU family name") from None
    return name


Family = Annotated[str, Field(min_length=1), AfterValidator(_family)]


class _Thresholds(Strict):
    scale_up_threshold: Percent
    scale_down_threshold: Percent
    scale_up_duration: Duration = DEFAULT_SCALE_UP_DURATION
    scale_down_duration: Duration = DEFAULT_SCALE_DOWN_DURATION

    @field_validator("scale_down_threshold")
    @classmethod
    def _below_up(cls, value: float, info: ValidationInfo) -> float:
        up = info.data.get("scale_up_threshold")
        if isinstance(up, float | int) and value >= up:
            raise PydanticCustomError(
                "thresholds",
                "must be below scaleUpThreshold ({up}), or every value would both scale up and down",
                {"up": f"{up:g}"},
            )
        return value


class CpuScaling(_Thresholds):
    """CPU utilisation of the pool's workers, percent."""


class GpuScaling(_Thresholds):
    """GPU utilisation of one family, percent (the one GPU query of the pool; see docs/scaling.md)."""

    family: Family

    @property
    def canonical(self) -> GpuFamily:
        return canonical_family(self.family)


class CpuResourceBounds(Strict):
    min_cpu_count: NonNegativeInt = Field(alias="minCPUCount", description="Cores of the pool's workers.")
    max_cpu_count: NonNegativeInt = Field(alias="maxCPUCount")

    @field_validator("max_cpu_count")
    @classmethod
    def _max_at_least_min(cls, value: int, info: ValidationInfo) -> int:
        low = info.data.get("min_cpu_count")
        if isinstance(low, int) and value < low:
            raise PydanticCustomError("bounds", "must be at least minCPUCount ({low})", {"low": low})
        return value


class GpuResourceBounds(Strict):
    family: Family
    min_gpu_count: NonNegativeInt = Field(alias="minGPUCount")
    max_gpu_count: NonNegativeInt = Field(alias="maxGPUCount")

    @field_validator("max_gpu_count")
    @classmethod
    def _max_at_least_min(cls, value: int, info: ValidationInfo) -> int:
        low = info.data.get("min_gpu_count")
        if isinstance(low, int) and value < low:
            raise PydanticCustomError("bounds", "must be at least minGPUCount ({low})", {"low": low})
        return value

    @property
    def canonical(self) -> GpuFamily:
        return canonical_family(self.family)


class ScalingMetrics(Strict):
    gpu_query: str = Field(
        default=DEFAULT_GPU_QUERY, min_length=1, description="PromQL; $cluster is replaced."
    )
    cpu_query: str = Field(
        default=DEFAULT_CPU_QUERY, min_length=1, description="PromQL; $cluster is replaced."
    )
    step: Duration = DEFAULT_STEP


class ScalingPolicySpec(Strict):
    cpu: CpuScaling | None = None
    cpu_resource_bounds: CpuResourceBounds | None = Field(default=None, alias="cpuResourceBounds")
    gpu: list[GpuScaling] = Field(default_factory=list)
    gpu_resource_bounds: list[GpuResourceBounds] = Field(default_factory=list, alias="gpuResourceBounds")
    cooldown_duration: Duration = DEFAULT_COOLDOWN
    abort_duration: Duration = DEFAULT_ABORT
    metrics: ScalingMetrics = Field(default_factory=ScalingMetrics)

    def bound_for(self, family: GpuFamily) -> GpuResourceBounds | None:
        return next((b for b in self.gpu_resource_bounds if b.canonical == family), None)


class ScalingPolicy(Strict):
    api_version: Literal["spectrocloud.com/v1alpha1"]
    kind: Literal["ScalingPolicy"]
    metadata: ObjectMeta
    spec: ScalingPolicySpec
