"""The HTTP server under slow and hostile clients, with real sockets on 127.0.0.1: slow clients do not
take the probes down, a client that never finishes its headers or body is cut off, a deeply nested
signed body is a 400."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from reconciler.forges import sign_body
from reconciler.metrics import Metrics
from reconciler.server.app import Server
from reconciler.server.webhook import MAX_WEBHOOKS_IN_FLIGHT
from tests._loop_support import wait_for

SECRET = b"hardening-webhook-secret-91ac"
SLOW_CLIENTS = 150


@pytest.fixture
def payloads() -> list[dict[str, Any]]:
    return []


@pytest.fixture
def server(payloads: list[dict[str, Any]]) -> Iterator[Server]:
    with Server(Metrics(), webhook_secret=SECRET, on_webhook=payloads.append, body_timeout=1.0) as running:
        yield running


def _slow(port: int, partial: bytes) -> socket.socket:
    conn = socket.create_connection(("127.0.0.1", port), timeout=10)
    conn.sendall(partial)
    return conn


def _closed_by_server(conn: socket.socket, timeout: float) -> bytes:
    """Everything the server sends until it closes the connection (blocks on the socket, no sleeping)."""
    conn.settimeout(timeout)
    received = b""
    while chunk := conn.recv(4096):
        received += chunk
    return received


def test_150_slow_clients_do_not_take_healthz_and_metrics_down() -> None:
    """Slowloris: clients that send part of their headers and then nothing hold their connections until
    the header deadline (here far beyond the test, however slow the machine); meanwhile every probe is
    answered (were the probes queued behind the slow clients, they would wait out that deadline)."""
    with Server(Metrics(), webhook_secret=SECRET, on_webhook=lambda _p: None, header_timeout=600) as server:
        clients = [
            _slow(
                server.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " if i % 2 else b"POST /hooks/git"
            )
            for i in range(SLOW_CLIENTS)
        ]
        try:
            wait_for(lambda: server.connections >= SLOW_CLIENTS, 60, "the slow clients connected")
            with httpx.Client(base_url=server.url, timeout=60) as http:
                for _ in range(5):
                    assert http.get("/healthz").status_code == 200
                    assert http.get("/metrics").status_code == 200
                    assert http.get("/readyz").status_code == 503  # no pass yet: answered, not refused
            assert server.connections >= SLOW_CLIENTS  # the slow ones still wait on their deadline
        finally:
            for conn in clients:
                conn.close()


def test_a_client_that_never_finishes_its_headers_is_disconnected() -> None:
    with Server(Metrics(), webhook_secret=SECRET, on_webhook=lambda _p: None, header_timeout=0.5) as server:
        started = time.monotonic()
        with _slow(server.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n") as conn:
            assert _closed_by_server(conn, 60) == b""
        assert time.monotonic() - started >= 0.4
        # A kept-alive connection gets the same deadline again after each answer.
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as conn:
            conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHo")
            answered = _closed_by_server(conn, 60)
        assert answered.startswith(b"HTTP/1.1 200") and answered.count(b"HTTP/1.1") == 1
        wait_for(lambda: server.connections == 0, 60, "the server dropped both connections")


def test_a_webhook_body_that_never_arrives_gets_408(server: Server, payloads: list[dict[str, Any]]) -> None:
    body = json.dumps({"ref": "refs/heads/main"}).encode()
    head = (
        "POST /hooks/git HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"X-Hub-Signature-256: {sign_body(SECRET, body)}\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    with _slow(server.port, head + body[:5]) as conn:
        conn.settimeout(60)
        answer = conn.recv(4096)
    assert answer.startswith(b"HTTP/1.1 408")
    assert payloads == []
    with httpx.Client(base_url=server.url, timeout=5) as http:
        assert 'reconciler_webhooks_total{result="timeout"} 1.0' in http.get("/metrics").text


def test_a_deeply_nested_signed_body_is_a_bad_request(server: Server, payloads: list[dict[str, Any]]) -> None:
    depth = 100_000
    body = ('{"a":' * depth + "1" + "}" * depth).encode()
    headers = {"X-Hub-Signature-256": sign_body(SECRET, body), "Content-Type": "application/json"}
    with httpx.Client(base_url=server.url, timeout=10) as http:
        answer = http.post("/hooks/git", content=body, headers=headers)
        assert answer.status_code == 400
        assert answer.json() == {"error": "payload nests too deeply"}
        assert http.get("/healthz").status_code == 200
    assert payloads == []


def test_unfinished_headers_over_16_kib_are_refused_without_waiting_for_more(server: Server) -> None:
    """The server buffers at most 16 KiB of an incomplete request line and headers."""
    with _slow(server.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20_000) as conn:
        assert _closed_by_server(conn, 60).startswith(b"HTTP/1.1 400")
    with httpx.Client(base_url=server.url, timeout=5) as http:
        assert http.get("/healthz", headers={"X-Fine": "a" * 8_000}).status_code == 200


def test_webhooks_over_the_cap_wait_for_a_slot_then_get_503_while_probes_answer() -> None:
    """Deliveries whose bodies are still coming hold the webhook's slots; one more waits for a slot up to
    its queue deadline and gets 503 then; probes never wait. Once the slow ones go, deliveries pass."""
    payloads: list[dict[str, Any]] = []
    head = (
        "POST /hooks/git HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"X-Hub-Signature-256: sha256={'0' * 64}\r\nContent-Length: 100\r\n\r\n"
    ).encode()
    body = json.dumps({"ref": "refs/heads/main"}).encode()
    signed = {"X-Hub-Signature-256": sign_body(SECRET, body), "Content-Type": "application/json"}
    with Server(
        Metrics(), webhook_secret=SECRET, on_webhook=payloads.append, body_timeout=60, queue_timeout=0.2
    ) as server:
        holding = [_slow(server.port, head) for _ in range(MAX_WEBHOOKS_IN_FLIGHT)]
        try:
            with httpx.Client(base_url=server.url, timeout=10) as http:

                def refused() -> bool:
                    return http.post("/hooks/git", content=body, headers=signed).status_code == 503

                wait_for(refused, 60, "the webhook cap reached")
                assert http.get("/healthz").status_code == 200
                assert http.get("/metrics").status_code == 200
                assert 'reconciler_webhooks_total{result="busy"}' in http.get("/metrics").text
                assert payloads == []
                for conn in holding:
                    conn.close()

                def accepted() -> bool:
                    return http.post("/hooks/git", content=body, headers=signed).status_code == 202

                wait_for(accepted, 60, "the slots freed by the slow clients' going")
        finally:
            for conn in holding:
                conn.close()
    assert payloads and payloads[0] == {"ref": "refs/heads/main"}


def test_readyz_and_the_webhook_do_not_wait_on_a_lease_renewal_in_flight() -> None:
    """The Kubernetes Lease holds its lock while a renewal waits on the API server (up to its timeout):
    /readyz reads who holds the lease without that lock, so the probe answers at once."""
    from kubernetes import client as k8s

    from reconciler.runtime.kubernetes_lease import KubernetesLease

    lease = KubernetesLease(k8s.ApiClient(), namespace="ns", identity="pod-a")
    with (
        Server(Metrics(), webhook_secret=SECRET, on_webhook=lambda _p: None, lease=lease) as server,
        httpx.Client(base_url=server.url, timeout=5) as http,
        lease._lock,  # an acquire() in flight
    ):
        answer = http.get("/readyz?verbose")
        assert answer.status_code == 503 and "not held yet" in answer.text
        body = json.dumps({"ref": "refs/heads/main"}).encode()
        headers = {"X-Hub-Signature-256": sign_body(SECRET, body), "Content-Type": "application/json"}
        assert http.post("/hooks/git", content=body, headers=headers).status_code == 202
