"""The base of every resource model: camelCase aliases, unknown fields forbidden, immutable; the metadata
and references each kind shares (docs/validation.md). The kinds are in :mod:`reconciler.model.resources`
and in modules of their own (``bundle``, ``environment``, ``scaling``), each built on these.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from reconciler.model.pickling import reduce_model

DNS1123_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"

Name = Annotated[str, Field(min_length=1, max_length=63, pattern=DNS1123_LABEL)]
NonNegativeInt = Annotated[int, Field(ge=0)]


class Strict(BaseModel):
    """Base of every model: camelCase aliases, unknown fields forbidden, immutable.

    ``strict`` makes the models agree with the generated JSON Schemas: ``count: "8"`` is an error in both.
    """

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        defer_build=True,
    )

    def __reduce__(self) -> tuple[Any, ...]:  # the cache of checked documents keeps tens of thousands
        return reduce_model(self)


class ObjectMeta(Strict):
    name: Name
    namespace: Name
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class LocalRef(Strict):
    """A reference to a resource of the same namespace."""

    name: Name


class ClusterProfileRef(Strict):
    uid: str = Field(min_length=1)
    pack_values: list[dict[str, object]] | None = None
