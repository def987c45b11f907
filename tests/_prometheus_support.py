"""A real Prometheus server for tests: generated config, storage in a temp dir, loopback, stopped after.

Debian's ``prometheus`` package provides the binary (CI installs it); tests that need it are skipped,
with that reason, only when it is absent.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Self

import httpx
import pytest

BINARY = shutil.which("prometheus")
needs_prometheus = pytest.mark.skipif(
    BINARY is None, reason="the prometheus binary is not installed (apt-get install prometheus)"
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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

    def start(self, timeout: float = 30.0) -> Self:
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
        self._process.terminate()
        try:
            self._process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout=5)
        self._process = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
