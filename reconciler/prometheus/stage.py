"""Prometheus as the scaling stage's :class:`~reconciler.scaling.stage.SampleSource` (I/O).

Per pool with a policy: at most one range query per metric (``observe_pool``) at the pool's Prometheus.
The decisions themselves are pure (``reconciler.scaling.stage``); :meth:`ScalingStage.decide` and
:meth:`ScalingStage.run` are the two together, for callers that want one step.

Where Prometheus is: ``--prometheus URL`` (``ScalingStage(prometheus_url=...)``) for every pool, else the
``spec.prometheus.url`` of the pool's Settings, with its bearer token by reference (``{env}`` or
``{file}``, read at each pass, registered with the log redactor, never in a message). No URL, an
unreadable token, an unreachable server: the series carry the error, so the decision says
``PrometheusAvailable=False`` with the reason; there is no scale-down and demand still scales up.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from reconciler.model.pools import PoolKey
from reconciler.prometheus.client import PrometheusClient, PrometheusError, bearer_token
from reconciler.prometheus.observe import observe_pool
from reconciler.scaling.decision_types import Samples
from reconciler.scaling.pools import ScalingSubject
from reconciler.scaling.stage import ScalingOutcome, decide_subject, unmeasured

__all__ = ["NO_PROMETHEUS", "ScalingStage"]

NO_PROMETHEUS = (
    "no Prometheus configured: set spec.prometheus of the pool's Settings or run with --prometheus"
)


class ScalingStage:
    """Prometheus samples for each pool; one per controller (it keeps a client per Prometheus across
    passes); :meth:`close` at the end."""

    def __init__(
        self,
        prometheus_url: str | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        timeout: float = 5.0,
    ) -> None:
        self.prometheus_url = prometheus_url
        self._environ = environ
        self._timeout = timeout
        self._clients: dict[tuple[str, str | None], PrometheusClient] = {}

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()

    def __enter__(self) -> ScalingStage:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @property
    def queries(self) -> int:
        """Range queries sent so far (every client)."""
        return sum(c.queries for c in self._clients.values())

    def run(self, subjects: Iterable[ScalingSubject], now: float) -> dict[PoolKey, ScalingOutcome]:
        """Decide every subject at ``now`` (the pass's clock, unix seconds)."""
        return {s.key: self.decide(s, now) for s in subjects}

    def decide(self, subject: ScalingSubject, now: float) -> ScalingOutcome:
        samples, url = self.samples(subject, now)
        return decide_subject(subject, samples, url, now)

    def samples(self, subject: ScalingSubject, now: float) -> tuple[Samples, str | None]:
        """The pool's utilisation (a missing URL or token, an unreachable server: series with the error)."""
        settings = subject.prometheus
        url = self.prometheus_url or (settings.url if settings is not None else None)
        if url is None:
            return unmeasured(subject, now, NO_PROMETHEUS), None
        token: str | None = None
        if settings is not None and settings.bearer_token_secret_ref is not None:
            try:
                token = bearer_token(settings.bearer_token_secret_ref, self._environ)
            except PrometheusError as exc:
                return unmeasured(subject, now, str(exc)), url
        client = self._clients.get((url, token))
        if client is None:
            client = PrometheusClient(url, token, timeout=self._timeout)
            self._clients[(url, token)] = client
        return observe_pool(client, subject.policy, subject.cluster, now), url
