"""The ``Environment`` kind (``spectrocloud.com/v1beta1``, docs/environments.md).

An Environment names the ComputePools of its namespace a workload may be admitted into, in order: a list
(``spec.pools``) or a label selector over the namespace's pools (``spec.poolSelector.matchLabels``),
exactly one of the two. ``order: mostFree`` sorts the candidates by free GPUs of the workload's
families instead. Which candidate a workload lands in is decided by
:mod:`reconciler.placement.environment`; the rules that need other documents (duplicates, pools that
do not exist) by :mod:`reconciler.manifests.environment_rules`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from reconciler.model.base import LocalRef, ObjectMeta, Strict

ENVIRONMENT_API_VERSION = "spectrocloud.com/v1beta1"


class PoolSelector(Strict):
    match_labels: dict[str, str] = Field(
        default_factory=dict,
        description="ComputePools of the namespace whose metadata.labels carry all of these, by name.",
    )


class EnvironmentSpec(Strict):
    model_config = ConfigDict(
        json_schema_extra={"oneOf": [{"required": ["pools"]}, {"required": ["poolSelector"]}]},
    )

    pools: list[LocalRef] | None = Field(
        default=None, description="The candidate ComputePools of the namespace, in order."
    )
    pool_selector: PoolSelector | None = Field(
        default=None, description="Or: the namespace's ComputePools whose labels match, by name."
    )
    order: Literal["listed", "mostFree"] = Field(
        default="listed",
        description="listed: in the order given (by name for a selector); mostFree: most free GPUs of the "
        "workload's families first, then by name.",
    )


class Environment(Strict):
    api_version: Literal["spectrocloud.com/v1beta1"]
    kind: Literal["Environment"]
    metadata: ObjectMeta
    spec: EnvironmentSpec
