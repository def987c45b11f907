"""A real Prometheus server for tests: generated config, storage in a temp dir, loopback, stopped after;
and an in-process HTTP server answering Prometheus's range API with set values (for the stage's own rules).

Debian's ``prometheus`` package provides the binary (CI installs it); tests that need it are skipped,
with that reason, only when it is absent.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Self
from urllib.parse import parse_qs

import httpx
import pytest

from reconciler.emulator import EmulatorServer, EmulatorState
from reconciler.emulator.utilization import METRICS_PATH
from tests._git_support import free_port, serving, stop_process

BINARY = shutil.which("prometheus")
needs_prometheus = pytest.mark.skipif(
    BINARY is None, reason="the prometheus binary is not installed (apt-get install prometheus)"
)


class PrometheusServer:
    """``prometheus`` scraping ``target`` (host:port) at ``metrics_path`` every ``interval`` seconds."""

    def __init__(self, workdir: Path, target: str, metrics_path: str, interval: float = 1.0) -> None:
        assert BINARY is not None
        self.workdir = workdir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        workdir.mkdir(parents=True, exist_ok=True)
        self.config = workdir / "prometheus.yml"
        self.config.write_text(
            "global:\n"
            f"  scrape_interval: {interval:g}s\n"
            f"  scrape_timeout: {interval:g}s\n"
            "scrape_configs:\n"
            "  - job_name: emulator\n"
            "    honor_labels: true\n"
            f"    metrics_path: {metrics_path}\n"
            f"    static_configs: [{{targets: ['{target}']}}]\n",
            encoding="utf-8",
        )
        self._process: subprocess.Popen[bytes] | None = None
        self._log = workdir / "prometheus.log"

    def start(self, timeout: float = 60.0) -> Self:
        assert BINARY is not None
        log = self._log.open("wb")
        self._process = subprocess.Popen(
            [
                BINARY,
                f"--config.file={self.config}",
                f"--storage.tsdb.path={self.workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"prometheus exited: {self._log.read_text(errors='replace')[-2000:]}")
            try:
                if httpx.get(f"{self.url}/-/ready", timeout=1.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError("prometheus did not become ready")

    def stop(self) -> None:
        if self._process is None:
            return
        stop_process(self._process, 15)
        self._process = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


@dataclass
class Answers:
    """What the server answers: a value per query text (matched by substring), or an HTTP status."""

    values: dict[str, float] = field(default_factory=dict)
    status: int = 200
    requests: list[dict[str, Any]] = field(default_factory=list)


class FakePrometheus:
    """An HTTP server on loopback that answers ``POST /api/v1/query_range`` as Prometheus does."""

    def __init__(self) -> None:
        self.answers = Answers()
        answers = self.answers

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
                answers.requests.append(
                    {"path": self.path, "auth": self.headers.get("Authorization"), **form}
                )
                if answers.status != 200:
                    self._send(answers.status, {"status": "error", "error": "unavailable"})
                    return
                start, end, step = float(form["start"]), float(form["end"]), float(form["step"])
                value = next((v for q, v in answers.values.items() if q in form["query"]), None)
                result = []
                if value is not None:
                    count = round((end - start) / step)
                    points = [[start + k * step, str(value)] for k in range(count + 1)]
                    result = [{"metric": {}, "values": points}]
                self._send(200, {"status": "success", "data": {"resultType": "matrix", "result": result}})

            def _send(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._serving = ExitStack()

    def __enter__(self) -> FakePrometheus:
        self._serving.enter_context(serving(self.server))
        return self

    def __exit__(self, *_exc: object) -> None:
        self._serving.close()


@pytest.fixture(scope="module", name="emulator")
def hot_and_cold_emulator() -> Iterator[EmulatorServer]:
    """An emulator whose cluster ``pool-hot`` runs at 91% GPU / 90% CPU and ``pool-cold`` at 10% / 5%."""
    from tests._scaling_support import two_cluster_snapshot

    state = EmulatorState(two_cluster_snapshot(), provision_seconds=0.0)
    with EmulatorServer(state, "e2e-key") as server:
        for name, ratios in (
            ("pool-hot", {"gpu": 0.91, "cpu": 0.9}),
            ("pool-cold", {"gpu": 0.1, "cpu": 0.05}),
        ):
            uid = next(c.uid for c in state.clusters.values() if c.name == name)
            response = httpx.patch(f"{server.url}/__emulator/clusters/{uid}/utilization", json=ratios)
            assert response.status_code == 200
        yield server


@pytest.fixture(scope="module", name="prometheus")
def prometheus_of_emulator(
    emulator: EmulatorServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PrometheusServer]:
    """A real Prometheus scraping the module's ``emulator`` fixture."""
    target = emulator.url.removeprefix("http://")
    with PrometheusServer(tmp_path_factory.mktemp("prometheus"), target, METRICS_PATH) as server:
        yield server
