"""The Prometheus client's failure paths and bearer token handling, over real sockets."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from reconciler.logging import redact
from reconciler.model.resources import SecretRef
from reconciler.prometheus import PrometheusClient, PrometheusError, PrometheusUnavailable, bearer_token
from reconciler.scaling.queries import RangeQuery
from reconciler.scaling.series import Availability, Metric
from tests._git_support import free_port

TOKEN = "s3cr3t-prometheus-token-42"


@pytest.fixture
def silent_server() -> Iterator[tuple[str, list[bytes]]]:
    """Accepts connections and reads requests, and never answers (a hung Prometheus)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    received: list[bytes] = []
    stop = threading.Event()
    conns: list[socket.socket] = []

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            conns.append(conn)
            conn.settimeout(2.0)
            with contextlib.suppress(TimeoutError):
                received.append(conn.recv(65536))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}", received
    stop.set()
    thread.join(timeout=5)
    for conn in conns:
        conn.close()
    listener.close()


def test_a_hung_prometheus_times_out_as_unavailable_and_the_token_was_sent_not_shown(
    silent_server: tuple[str, list[bytes]],
) -> None:
    url, received = silent_server
    with PrometheusClient(url, TOKEN, timeout=0.5) as client, pytest.raises(PrometheusUnavailable) as hung:
        client.query_range("up", 0, 10, 1)
    assert "no answer within the timeout" in str(hung.value)
    assert received and f"authorization: bearer {TOKEN}".encode() in received[0].lower()
    assert b"POST /api/v1/query_range" in received[0]
    assert TOKEN not in str(hung.value)


def test_a_refused_connection_is_unavailable_without_the_token() -> None:
    with PrometheusClient(f"http://127.0.0.1:{free_port()}", TOKEN) as client:
        with pytest.raises(PrometheusUnavailable) as refused:
            client.query_range("up", 0, 10, 1)
        assert TOKEN not in repr(client)
    assert TOKEN not in str(refused.value) and TOKEN not in repr(refused.value)


def test_the_bearer_token_comes_from_env_or_file_and_is_redacted_in_logs(tmp_path: Path) -> None:
    assert bearer_token(SecretRef(env="PROM_TOKEN"), {"PROM_TOKEN": TOKEN}) == TOKEN
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    assert bearer_token(SecretRef(file=str(path))) == TOKEN
    event = redact(None, "info", {"event": f"calling with {TOKEN}"})  # type: ignore[arg-type]
    assert TOKEN not in str(event)


def test_a_missing_token_names_where_it_looked_and_nothing_else(tmp_path: Path) -> None:
    with pytest.raises(PrometheusError, match="environment variable PROM_TOKEN is not set"):
        bearer_token(SecretRef(env="PROM_TOKEN"), {})
    with pytest.raises(PrometheusError, match="cannot be read"):
        bearer_token(SecretRef(file=str(tmp_path / "absent")))
    (tmp_path / "empty").write_text("")
    with pytest.raises(PrometheusError, match="is empty"):
        bearer_token(SecretRef(file=str(tmp_path / "empty")))


def test_nan_and_infinite_samples_read_as_missing() -> None:
    """Prometheus answers NaN for 0/0 (a pool with no GPUs, say): such a step has no sample, so a
    series whose latest value is NaN is stale, and one of NaN only has no data, never "available"."""
    values = [[100.0, "0.5"], [130.0, "NaN"], [160.0, "+Inf"], [190.0, "NaN"]]

    def answer(_request: httpx.Request) -> httpx.Response:
        data = {"resultType": "matrix", "result": [{"metric": {}, "values": values}]}
        return httpx.Response(200, json={"status": "success", "data": data})

    query = RangeQuery(Metric.GPU, "q", 100.0, 190.0, 30.0)
    with PrometheusClient("http://prometheus", transport=httpx.MockTransport(answer)) as client:
        (series,) = client.query_range("q", 100, 190, 30).series
        assert series.points == ((100.0, 0.5),)
        assert query.answer(series.points).availability(190.0)[0] is Availability.STALE
        values[:] = [[100.0, "NaN"], [190.0, "NaN"]]
        (series,) = client.query_range("q", 100, 190, 30).series
        assert series.points == ()
        assert query.answer(series.points).availability(190.0)[0] is Availability.NO_DATA
