"""Utilisation of the emulator's clusters, exported for a stock Prometheus to scrape (docs/scaling.md).

``PATCH /__emulator/clusters/{uid}/utilization`` (``{"gpu": 0.9, "cpu": 0.5}``, ratios 0-1) sets a
cluster's utilisation; ``GET /metrics/clusters`` (Prometheus text format, no key, like the admin
endpoints) exports, for every Running cluster, with the label ``cluster`` (the cluster's name):

- ``DCGM_FI_PROF_GR_ENGINE_ACTIVE{cluster, Hostname, gpu}``: a gauge per host and GPU, the set GPU ratio
  (DCGM reports this ratio for whole GPUs and MIG instances alike);
- ``node_cpu_seconds_total{cluster, instance, cpu, mode}``: counters per host, core and mode (``idle``,
  ``user``) as node_exporter's, advancing on the state's clock by ``elapsed x share`` of the set CPU
  ratio, so the default query's ``avg(rate(...{mode="idle"}[2m]))`` is ``1 - ratio``.

Unset utilisation is 0. The counters are integrated at each change and each scrape, so a change of the
ratio never makes a counter jump or go back.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from reconciler.emulator.errors import ApiError
from reconciler.emulator.hosts import host_cores, host_gpu_count
from reconciler.emulator.records import Cluster
from reconciler.emulator.state import EmulatorState

METRICS_PATH = "/metrics/clusters"
UTILIZATION_PATH = "/__emulator/clusters/{uid}/utilization"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
MODES = ("idle", "user")


class _Usage:
    """One cluster's set ratios and its per-core CPU counters per (host, mode), integrated up to ``at``."""

    def __init__(self, at: float) -> None:
        self.gpu = 0.0
        self.cpu = 0.0
        self.at = at
        self.counters: dict[tuple[str, str], float] = {}

    def advance(self, now: float, hosts: Iterable[str]) -> None:
        """Integrate every core's counters (all cores of a host alike) from ``self.at`` to ``now``."""
        elapsed = max(now - self.at, 0.0)
        for host in hosts:
            for mode, share in (("idle", 1.0 - self.cpu), ("user", self.cpu)):
                key = (host, mode)
                self.counters[key] = self.counters.get(key, 0.0) + elapsed * share
        self.at = max(now, self.at)


class Utilization(Collector):
    """The per-cluster utilisation of one emulator, its HTTP routes and its Prometheus collector."""

    def __init__(self, state: EmulatorState) -> None:
        self.state = state
        self._lock = threading.Lock()
        self._usage: dict[str, _Usage] = {}
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(self)

    def _hosts(self, cluster: Cluster) -> list[dict[str, Any]]:
        return [self.state.hosts[uid] for uid in cluster.host_uids() if uid in self.state.hosts]

    @staticmethod
    def _name(host: Mapping[str, Any]) -> str:
        meta = host.get("metadata") or {}
        return str(meta.get("name") or meta.get("uid"))

    def _cores(self, cluster: Cluster) -> dict[str, int]:
        return {self._name(h): host_cores(h) for h in self._hosts(cluster)}

    def set(self, uid: str, body: Any) -> dict[str, Any]:
        """Set a cluster's ratios (either or both); 404 for an unknown cluster, 400 for a bad body."""
        if not isinstance(body, dict) or not body or set(body) - {"gpu", "cpu"}:
            raise ApiError(
                400, "InvalidRequest", 'the body must be {"gpu": RATIO, "cpu": RATIO} (either or both)'
            )
        for key, value in body.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
                raise ApiError(400, "InvalidRequest", f"{key}: must be a ratio between 0 and 1")
        with self.state.lock, self._lock:
            cluster = self.state.clusters.get(uid)
            if cluster is None:
                raise ApiError(404, "ResourceNotFound", f"no cluster {uid}")
            now = self.state.clock()
            usage = self._usage.setdefault(uid, _Usage(now))
            usage.advance(now, self._cores(cluster))
            usage.gpu = float(body.get("gpu", usage.gpu))
            usage.cpu = float(body.get("cpu", usage.cpu))
            return {"cluster": cluster.name, "gpu": usage.gpu, "cpu": usage.cpu}

    def collect(self) -> Iterator[Metric]:
        gpu = GaugeMetricFamily(
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
            "Ratio of time the graphics engine is active (emulated).",
            labels=["cluster", "Hostname", "gpu"],
        )
        cpu = CounterMetricFamily(
            "node_cpu_seconds_total",
            "Seconds the CPUs spent in each mode (emulated).",
            labels=["cluster", "instance", "cpu", "mode"],
        )
        with self.state.lock, self._lock:
            now = self.state.clock()
            for uid, cluster in sorted(self.state.clusters.items()):
                if self.state.cluster_state(cluster, now) != "Running":
                    continue
                usage = self._usage.setdefault(uid, _Usage(now))
                cores = self._cores(cluster)
                usage.advance(now, cores)
                for host in self._hosts(cluster):
                    name = self._name(host)
                    for index in range(host_gpu_count(host)):
                        gpu.add_metric([cluster.name, name, str(index)], usage.gpu)
                    for core in range(cores[name]):
                        for mode in MODES:
                            value = usage.counters.get((name, mode), 0.0)
                            cpu.add_metric([cluster.name, name, str(core), mode], value)
        yield gpu
        yield cpu

    def exposition(self) -> bytes:
        return generate_latest(self._registry)

    def routes(self) -> list[Route]:
        async def metrics(_request: Request) -> Response:
            return Response(self.exposition(), media_type=CONTENT_TYPE)

        async def patch(request: Request) -> Response:
            raw = await request.body()
            try:
                body = json.loads(raw) if raw.strip() else None
                return JSONResponse(self.set(request.path_params["uid"], body))
            except ApiError as error:
                return JSONResponse(error.body(), status_code=error.status)
            except (ValueError, UnicodeDecodeError):
                bad = ApiError(400, "InvalidRequest", "the body is not valid JSON")
                return JSONResponse(bad.body(), status_code=bad.status)

        return [
            Route(METRICS_PATH, metrics, methods=["GET"]),
            Route(UTILIZATION_PATH, patch, methods=["PATCH"]),
        ]
