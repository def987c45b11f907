"""A synchronous httpx client of Prometheus's range queries.

- One call, ``query_range``, with a timeout; no retries: a pass that cannot read utilisation simply does
  not scale down (docs/scaling.md), and the next pass asks again.
- A sample whose value is NaN or infinite (Prometheus's answer to ``0/0``, say) is left out: it reads
  as missing, so a series whose latest step is NaN is stale and one with only NaN has no data.
- Errors are typed: :class:`PrometheusUnavailable` (no answer, timeout, HTTP 5xx, an answer that is not
  Prometheus's JSON) and :class:`PrometheusQueryError` (Prometheus refused the query: ``bad_data``).
- The bearer token is referenced (``bearerTokenSecretRef: {env|file}``), registered with the log
  redactor when read, and scrubbed from every error text; it is never part of a message.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx

from reconciler.logging import register_secret
from reconciler.model.resources import SecretRef

QUERY_RANGE = "/api/v1/query_range"


class PrometheusError(Exception):
    """Base of every error of this package; the text never holds the bearer token."""


class PrometheusUnavailable(PrometheusError):
    """No usable answer: connection refused, timeout, HTTP 5xx or a body that is not Prometheus's JSON."""


class PrometheusQueryError(PrometheusError):
    """Prometheus answered and refused the query (HTTP 400/422, ``status: error``)."""


@dataclass(frozen=True, slots=True)
class RangeSeries:
    """One series of a matrix answer: its labels and ``(unix seconds, value)`` per step."""

    labels: Mapping[str, str]
    points: tuple[tuple[float, float], ...]


@dataclass(frozen=True, slots=True)
class RangeResult:
    series: tuple[RangeSeries, ...]
    warnings: tuple[str, ...] = ()


def bearer_token(ref: SecretRef, environ: Mapping[str, str] | None = None) -> str:
    """The token a ``bearerTokenSecretRef`` points at (environment variable or file), registered as secret."""
    env = os.environ if environ is None else environ
    if ref.env:
        token = env.get(ref.env, "").strip()
        if not token:
            raise PrometheusError(f"Prometheus bearer token: environment variable {ref.env} is not set")
    elif ref.file:
        try:
            token = Path(ref.file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise PrometheusError(
                f"Prometheus bearer token: file {ref.file} cannot be read ({exc.strerror or exc})"
            ) from None
        if not token:
            raise PrometheusError(f"Prometheus bearer token: file {ref.file} is empty")
    else:
        raise PrometheusError("Prometheus bearer token: bearerTokenSecretRef names neither env nor file")
    register_secret(token)
    return token


class PrometheusClient:
    """Use as a context manager (or call :meth:`close`) to release connections."""

    def __init__(
        self,
        base_url: str,
        bearer_token: str | None = None,
        *,
        timeout: float = 5.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._token = bearer_token or ""
        headers = {"Accept": "application/json"}
        if bearer_token:
            headers["Authorization"] = f"Bearer {bearer_token}"
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(
            base_url=self.base_url, headers=headers, timeout=timeout, transport=transport
        )
        self.queries = 0  # range queries sent (the bench counts them)

    def __repr__(self) -> str:
        return f"PrometheusClient({self.base_url!r})"

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def query_range(self, query: str, start: float, end: float, step: float) -> RangeResult:
        """``query`` evaluated at ``start, start + step, ... <= end`` (Prometheus's ``query_range``)."""
        form = {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
        self.queries += 1
        try:
            response = self._http.post(QUERY_RANGE, data=form)
        except httpx.TimeoutException:
            raise PrometheusUnavailable(f"{self.base_url}: no answer within the timeout") from None
        except httpx.HTTPError as exc:
            detail = self._scrub(str(exc)) or type(exc).__name__
            raise PrometheusUnavailable(f"{self.base_url}: {detail}") from None
        body = self._json(response)
        if response.status_code >= 500 or (response.status_code != 200 and body is None):
            raise PrometheusUnavailable(f"{self.base_url}: HTTP {response.status_code}{self._detail(body)}")
        if body is None:
            raise PrometheusUnavailable(f"{self.base_url}: the answer is not Prometheus's JSON")
        if response.status_code != 200 or body.get("status") != "success":
            raise PrometheusQueryError(f"query refused: HTTP {response.status_code}{self._detail(body)}")
        return _range_result(body, self.base_url)

    def _json(self, response: httpx.Response) -> dict[str, Any] | None:
        try:
            body = response.json()
        except ValueError:
            return None
        return body if isinstance(body, dict) else None

    def _detail(self, body: Mapping[str, Any] | None) -> str:
        if not body:
            return ""
        kind, error = body.get("errorType"), body.get("error")
        text = ": ".join(str(x) for x in (kind, error) if x)
        return f": {self._scrub(text)[:300]}" if text else ""

    def _scrub(self, text: str) -> str:
        return text.replace(self._token, "***") if self._token else text


def _range_result(body: Mapping[str, Any], where: str) -> RangeResult:
    data = body.get("data")
    if not isinstance(data, Mapping) or data.get("resultType") != "matrix":
        raise PrometheusUnavailable(f"{where}: the answer to a range query is not a matrix")
    series: list[RangeSeries] = []
    for item in data.get("result") or []:
        metric = item.get("metric") if isinstance(item, Mapping) else None
        values = item.get("values") if isinstance(item, Mapping) else None
        if not isinstance(metric, Mapping) or not isinstance(values, list):
            raise PrometheusUnavailable(f"{where}: a series of the answer has no metric or values")
        points: list[tuple[float, float]] = []
        for pair in values:
            try:
                t, v = float(pair[0]), float(pair[1])
            except (TypeError, ValueError, IndexError):
                raise PrometheusUnavailable(f'{where}: a sample is not [time, "value"]') from None
            if math.isfinite(t) and math.isfinite(v):  # NaN (0/0), +-Inf: no usable sample at t
                points.append((t, v))
        series.append(RangeSeries({str(k): str(v) for k, v in metric.items()}, tuple(points)))
    warnings = tuple(str(w) for w in body.get("warnings") or [])
    return RangeResult(tuple(series), warnings)
