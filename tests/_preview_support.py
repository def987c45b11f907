"""A fake read-only port for :func:`reconciler.runtime.preview.preview`: fixed observations."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from reconciler.model.desired import DesiredState
from reconciler.plan import Observation
from reconciler.resolve import Routing, Target, route
from reconciler.status.basis import ObservationKind
from reconciler.status.records import Records


@dataclass
class FixedObserver:
    """Routes every namespace to ``url`` and observes ``observed`` (or, given a function, what it makes of
    the routing); counts its calls."""

    url: str
    observed: Mapping[Target, Observation] | None = None
    kind: ObservationKind = "inventory"
    warnings: list[str] = field(default_factory=list)
    calls: int = 0

    def route(self, desired: DesiredState) -> Routing:
        return route(desired, self.url)

    def observe(
        self, desired: DesiredState, routing: Routing, records: Records
    ) -> Mapping[Target, Observation]:
        self.calls += 1
        return self.observed if self.observed is not None else {}
