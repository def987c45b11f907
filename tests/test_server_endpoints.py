"""The HTTP server: webhook verification and limits, health, readiness and metrics, on real loopback."""

from __future__ import annotations

import io
import json
import socket
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.forges import push_ref, sign_body
from reconciler.logging import configure_logging
from reconciler.metrics import Metrics
from reconciler.server.app import Server
from reconciler.server.config import ServerError, parse_listen, webhook_secret_from_env
from reconciler.server.webhook import MAX_WEBHOOK_BODY
from tests._server_support import Recorder

SECRET = b"test-webhook-secret-6f1c"
PUSH = {"ref": "refs/heads/main", "after": "0123456789abcdef0123456789abcdef01234567"}


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def metrics() -> Metrics:
    return Metrics()


@pytest.fixture
def server(metrics: Metrics, recorder: Recorder) -> Iterator[Server]:
    with Server(metrics, webhook_secret=SECRET, on_webhook=recorder) as running:
        yield running


@pytest.fixture
def client(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=10) as http:
        yield http


def push_headers(body: bytes, *, secret: bytes = SECRET, event: str = "push") -> dict[str, str]:
    return {
        "X-Hub-Signature-256": sign_body(secret, body),
        "X-GitHub-Event": event,
        "Content-Type": "application/json",
    }


def test_signed_push_triggers_the_callback_with_the_payload(client: httpx.Client, recorder: Recorder) -> None:
    body = json.dumps(PUSH).encode()
    response = client.post("/hooks/git", content=body, headers=push_headers(body))
    assert response.status_code == 202
    assert recorder.payloads == [PUSH]


def test_wrong_signature_is_refused_and_triggers_nothing(client: httpx.Client, recorder: Recorder) -> None:
    body = json.dumps(PUSH).encode()
    response = client.post("/hooks/git", content=body, headers=push_headers(body, secret=b"another-secret"))
    assert response.status_code == 401
    assert recorder.payloads == []


def test_signature_of_another_body_is_refused(client: httpx.Client, recorder: Recorder) -> None:
    body = json.dumps(PUSH).encode()
    tampered = json.dumps({**PUSH, "ref": "refs/heads/evil"}).encode()
    response = client.post("/hooks/git", content=tampered, headers=push_headers(body))
    assert response.status_code == 401
    assert recorder.payloads == []


@pytest.mark.parametrize("signature", [None, "", "sha1=abc", "sha256=", "sha256=not-hex"])
def test_missing_or_malformed_signature_is_refused(
    client: httpx.Client, recorder: Recorder, signature: str | None
) -> None:
    headers = {"X-GitHub-Event": "push", "Content-Type": "application/json"}
    if signature is not None:
        headers["X-Hub-Signature-256"] = signature
    response = client.post("/hooks/git", content=json.dumps(PUSH).encode(), headers=headers)
    assert response.status_code == 401
    assert recorder.payloads == []


def test_ping_answers_without_triggering(client: httpx.Client, recorder: Recorder) -> None:
    body = json.dumps({"zen": "Keep it logically awesome.", "hook_id": 1}).encode()
    response = client.post("/hooks/git", content=body, headers=push_headers(body, event="ping"))
    assert response.status_code == 200
    assert recorder.payloads == []


def test_other_events_are_ignored(client: httpx.Client, recorder: Recorder) -> None:
    body = json.dumps({"action": "opened"}).encode()
    response = client.post("/hooks/git", content=body, headers=push_headers(body, event="pull_request"))
    assert response.status_code == 200
    assert response.json()["status"] == "ignored"
    assert recorder.payloads == []


def test_form_encoded_push_is_accepted(client: httpx.Client, recorder: Recorder) -> None:
    body = urlencode({"payload": json.dumps(PUSH)}).encode()
    headers = push_headers(body)
    headers["Content-Type"] = "application/x-www-form-urlencoded"
    response = client.post("/hooks/git", content=body, headers=headers)
    assert response.status_code == 202
    assert recorder.payloads == [PUSH]


@pytest.mark.parametrize("body", [b"not json", b"[1, 2]", b"\xff\xfe"])
def test_signed_body_that_is_not_a_json_object_is_a_bad_request(
    client: httpx.Client, recorder: Recorder, body: bytes
) -> None:
    response = client.post("/hooks/git", content=body, headers=push_headers(body))
    assert response.status_code == 400
    assert recorder.payloads == []


def test_declared_oversized_body_is_refused_before_reading(server: Server, recorder: Recorder) -> None:
    """A Content-Length over the limit gets 413 while the client has sent only its headers."""
    host, port = "127.0.0.1", server.port
    with socket.create_connection((host, port), timeout=10) as conn:
        conn.sendall(
            b"POST /hooks/git HTTP/1.1\r\nHost: x\r\nX-Hub-Signature-256: sha256=00\r\n"
            b"Content-Type: application/json\r\n" + f"Content-Length: {MAX_WEBHOOK_BODY + 1}\r\n\r\n".encode()
        )
        reply = conn.recv(4096).decode("latin-1")
    assert reply.startswith("HTTP/1.1 413")
    assert recorder.payloads == []


def test_streamed_oversized_body_without_length_is_refused(client: httpx.Client, recorder: Recorder) -> None:
    """A chunked body carries no Content-Length: the server counts while reading and stops at the cap."""

    def chunks() -> Iterator[bytes]:
        for _ in range(64):
            yield b" " * (64 * 1024)

    response = client.post(
        "/hooks/git", content=chunks(), headers={"X-Hub-Signature-256": "sha256=" + "0" * 64}
    )
    assert response.status_code == 413
    assert recorder.payloads == []


def test_body_of_exactly_the_limit_is_accepted(client: httpx.Client, recorder: Recorder) -> None:
    prefix = json.dumps(PUSH)[:-1] + ', "pad": "'
    body = (prefix + "x" * (MAX_WEBHOOK_BODY - len(prefix) - 2) + '"}').encode()
    assert len(body) == MAX_WEBHOOK_BODY
    response = client.post("/hooks/git", content=body, headers=push_headers(body))
    assert response.status_code == 202
    assert recorder.payloads[0]["ref"] == "refs/heads/main"


def test_webhook_is_disabled_without_a_secret(metrics: Metrics, recorder: Recorder) -> None:
    body = json.dumps(PUSH).encode()
    with (
        Server(metrics, webhook_secret=None, on_webhook=recorder) as server,
        httpx.Client(base_url=server.url) as http,
    ):
        response = http.post("/hooks/git", content=body, headers=push_headers(body))
        assert response.status_code == 404
        assert http.get("/healthz").status_code == 200
    assert recorder.payloads == []


def test_callback_failure_is_a_server_error(metrics: Metrics) -> None:
    def explode(_payload: dict[str, Any]) -> None:
        raise RuntimeError("controller is gone")

    body = json.dumps(PUSH).encode()
    with (
        Server(metrics, webhook_secret=SECRET, on_webhook=explode) as server,
        httpx.Client(base_url=server.url) as http,
    ):
        assert http.post("/hooks/git", content=body, headers=push_headers(body)).status_code == 500
        assert http.get("/healthz").status_code == 200


def test_webhook_only_accepts_post(client: httpx.Client) -> None:
    assert client.get("/hooks/git").status_code == 405


def test_healthz_answers_while_serving(client: httpx.Client) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200


def test_readyz_is_unavailable_until_marked_ready(server: Server, client: httpx.Client) -> None:
    assert not server.ready
    answer = client.get("/readyz")
    assert (answer.status_code, answer.text) == (503, "not ready: no successful pass yet\n")
    server.mark_ready()
    assert server.ready
    assert client.get("/readyz").status_code == 200


class FakeLease:
    """A writer lease whose state the test sets: held by us, by another instance, or by nobody yet."""

    def __init__(self, holder: str | None, identity: str = "pod-a-1234") -> None:
        self.identity = identity
        self._holder = holder

    def acquire(self) -> bool:
        return self.holds()

    def holds(self) -> bool:
        return self._holder == self.identity

    def release(self) -> None:
        self._holder = None

    def holder(self) -> str | None:
        return self._holder


def test_a_standby_is_ready_and_says_on_readyz_verbose_that_it_stands_by(
    metrics: Metrics, recorder: Recorder
) -> None:
    """The lease is not readiness: a standby answers 200 (a rollout of two replicas completes), and
    /readyz?verbose names the holder; a push delivered to it starts nothing and says why."""
    lease = FakeLease(holder="pod-b-5678")
    with (
        Server(metrics, webhook_secret=SECRET, on_webhook=recorder, lease=lease) as running,
        httpx.Client(base_url=running.url, timeout=10) as http,
    ):
        assert http.get("/readyz").status_code == 200
        verbose = http.get("/readyz", params={"verbose": ""})
        assert verbose.status_code == 200
        assert "[+]lease ok: standing by, held by pod-b-5678" in verbose.text
        assert verbose.text.endswith("readyz check passed\n")
        body = json.dumps(PUSH).encode()
        answer = http.post("/hooks/git", content=body, headers=push_headers(body))
        assert answer.status_code == 200 and answer.json()["status"] == "ignored"
        assert "standing by" in answer.json()["reason"]
        assert recorder.payloads == []
        assert 'reconciler_webhooks_total{result="standby"} 1.0' in http.get("/metrics").text
        # Taking the lease over does not make it unready while its first pass as writer runs.
        lease._holder = lease.identity
        assert http.get("/readyz").status_code == 200
        assert "held by this instance (pod-a-1234)" in http.get("/readyz?verbose").text
        assert http.post("/hooks/git", content=body, headers=push_headers(body)).status_code == 202


def test_a_writer_is_not_ready_before_its_first_pass_nor_while_the_controller_says_why(
    metrics: Metrics, recorder: Recorder
) -> None:
    lease = FakeLease(holder="pod-a-1234")
    problem: list[str] = []
    with (
        Server(
            metrics,
            webhook_secret=SECRET,
            on_webhook=recorder,
            lease=lease,
            readiness=lambda: problem[0] if problem else None,
        ) as running,
        httpx.Client(base_url=running.url, timeout=10) as http,
    ):
        verbose = http.get("/readyz?verbose")
        assert verbose.status_code == 503
        assert "[-]first-pass failed: no successful pass yet" in verbose.text
        assert verbose.text.endswith("readyz check failed\n")
        running.mark_ready()
        assert http.get("/readyz").status_code == 200
        problem.append("the status branch follows the config branch release, not main")
        answer = http.get("/readyz")
        assert answer.status_code == 503 and "follows the config branch release" in answer.text
        assert "[-]branch failed: the status branch follows" in http.get("/readyz?verbose").text


def test_an_instance_that_has_not_tried_the_lease_yet_is_not_a_standby(
    metrics: Metrics, recorder: Recorder
) -> None:
    """Nobody known to hold the lease (the first attempt has not run): it waits for its first pass."""
    with (
        Server(metrics, webhook_secret=SECRET, on_webhook=recorder, lease=FakeLease(None)) as running,
        httpx.Client(base_url=running.url, timeout=10) as http,
    ):
        assert http.get("/readyz").status_code == 503
        assert "not held yet" in http.get("/readyz?verbose").text


def test_metrics_endpoint_serves_the_prometheus_text(metrics: Metrics, client: httpx.Client) -> None:
    metrics.observe_pass("success", 0.5)
    metrics.on_palette_request("POST", "/v1/spectroclusters/edge-native", 201)
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    assert 'reconciler_passes_total{outcome="success"} 1.0' in response.text
    series = 'method="POST",path="/v1/spectroclusters/edge-native",status="201"'
    assert f"reconciler_palette_requests_total{{{series}}} 1.0" in response.text


def test_stop_frees_the_port_and_start_twice_is_refused(metrics: Metrics, recorder: Recorder) -> None:
    server = Server(metrics, webhook_secret=SECRET, on_webhook=recorder)
    server.start()
    port = server.port
    with pytest.raises(ServerError):
        server.start()
    server.stop()
    server.stop()
    with pytest.raises(ServerError):
        _ = server.port
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
    # The same port can be bound again right away (a restarted reconciler keeps its address).
    again = Server(metrics, webhook_secret=SECRET, on_webhook=recorder, port=port)
    with again:
        assert httpx.get(f"{again.url}/healthz", timeout=5).status_code == 200


def test_port_in_use_is_a_clear_error(server: Server, metrics: Metrics, recorder: Recorder) -> None:
    clash = Server(metrics, webhook_secret=SECRET, on_webhook=recorder, port=server.port)
    # SO_REUSEADDR does not allow two listeners on one port on Linux.
    with pytest.raises(ServerError, match="cannot listen"):
        clash.start()


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("127.0.0.1:9090", ("127.0.0.1", 9090)),
        ("0.0.0.0:80", ("0.0.0.0", 80)),
        (":9090", ("0.0.0.0", 9090)),
        ("[::1]:9090", ("::1", 9090)),
        ("localhost:0", ("localhost", 0)),
    ],
)
def test_listen_addresses_parse(address: str, expected: tuple[str, int]) -> None:
    assert parse_listen(address) == expected


@pytest.mark.parametrize("address", ["9090", "host:", "host:http", "host:70000"])
def test_bad_listen_addresses_are_refused(address: str) -> None:
    with pytest.raises(ValueError):
        parse_listen(address)


def test_secret_comes_from_the_environment_or_a_file(tmp_path: Any) -> None:
    assert webhook_secret_from_env({}) is None
    assert webhook_secret_from_env({"RECONCILER_WEBHOOK_SECRET": ""}) is None
    assert webhook_secret_from_env({"RECONCILER_WEBHOOK_SECRET": "from-env-123"}) == b"from-env-123"
    secret_file = tmp_path / "secret"
    secret_file.write_text("from-file-456\n")
    assert webhook_secret_from_env({"RECONCILER_WEBHOOK_SECRET_FILE": str(secret_file)}) == b"from-file-456"
    with pytest.raises(ServerError):
        webhook_secret_from_env({"RECONCILER_WEBHOOK_SECRET_FILE": str(tmp_path / "missing")})


def test_push_ref_names_the_pushed_branch() -> None:
    assert push_ref(PUSH) == "refs/heads/main"
    assert push_ref({}) is None
    assert push_ref({"ref": 3}) is None


def test_webhook_results_are_counted_in_the_metrics(client: httpx.Client) -> None:
    body = json.dumps(PUSH).encode()
    client.post("/hooks/git", content=body, headers=push_headers(body))
    client.post("/hooks/git", content=body, headers=push_headers(body, event="ping"))
    client.post("/hooks/git", content=body, headers=push_headers(body, secret=b"wrong-secret"))
    client.post("/hooks/git", content=body, headers={"Content-Type": "application/json"})
    text = client.get("/metrics").text
    assert 'reconciler_webhooks_total{result="accepted"} 1.0' in text
    assert 'reconciler_webhooks_total{result="ping"} 1.0' in text
    assert 'reconciler_webhooks_total{result="unauthorized"} 2.0' in text


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=st.binary(max_size=512),
    signature=st.one_of(
        st.none(),
        st.text(max_size=80),
        st.binary(min_size=32, max_size=32).map(lambda digest: "sha256=" + digest.hex()),
    ),
)
def test_property_unsigned_or_wrongly_signed_requests_never_trigger(
    client: httpx.Client, recorder: Recorder, body: bytes, signature: str | None
) -> None:
    headers = {"X-GitHub-Event": "push", "Content-Type": "application/json"}
    if signature is not None:
        headers["X-Hub-Signature-256"] = signature
    try:
        response = client.post("/hooks/git", content=body, headers=headers)
    except (httpx.LocalProtocolError, UnicodeEncodeError):
        return  # a header value the client itself refuses to send never reaches the server
    assert response.status_code == 401
    assert recorder.payloads == []


def test_webhook_secret_and_signatures_never_reach_the_logs(metrics: Metrics, recorder: Recorder) -> None:
    stream = io.StringIO()
    configure_logging("debug", stream=stream)
    try:
        body = json.dumps(PUSH).encode()
        with (
            Server(metrics, webhook_secret=SECRET, on_webhook=recorder) as server,
            httpx.Client(base_url=server.url) as http,
        ):
            http.post("/hooks/git", content=body, headers=push_headers(body))
            http.post("/hooks/git", content=body, headers=push_headers(body, secret=b"other-secret"))
            http.post("/hooks/git", content=SECRET, headers=push_headers(SECRET))
    finally:
        configure_logging()
    output = stream.getvalue()
    assert "webhook accepted" in output and "webhook rejected" in output
    assert SECRET.decode() not in output
    assert sign_body(SECRET, body).removeprefix("sha256=") not in output


@pytest.mark.parametrize("header", ["X-Gitea-Signature", "X-Forgejo-Signature"])
def test_gitea_and_forgejo_form_pushes_are_verified_on_the_json_payload_they_sign(
    client: httpx.Client, recorder: Recorder, header: str
) -> None:
    """Gitea and Forgejo sign the JSON payload even when the hook posts it as a form, and send the
    signature as bare hex in their own header."""
    payload = json.dumps(PUSH).encode()
    body = urlencode({"payload": payload.decode()}).encode()
    signature = sign_body(SECRET, payload).removeprefix("sha256=")
    forge = header.split("-")[1]
    headers = {
        header: signature,
        f"X-{forge}-Event": "push",
        "Content-Type": "application/x-www-form-urlencoded",
    }
    response = client.post("/hooks/git", content=body, headers=headers)
    assert response.status_code == 202, response.text
    assert recorder.payloads == [PUSH]


def test_a_forged_gitea_signature_is_refused(client: httpx.Client, recorder: Recorder) -> None:
    payload = json.dumps(PUSH).encode()
    body = urlencode({"payload": payload.decode()}).encode()
    headers = {
        "X-Gitea-Signature": sign_body(b"another secret", payload).removeprefix("sha256="),
        "Content-Type": "application/x-www-form-urlencoded",
    }
    assert client.post("/hooks/git", content=body, headers=headers).status_code == 401
    assert recorder.payloads == []


def test_a_push_that_starts_no_pass_is_answered_as_ignored(metrics: Metrics) -> None:
    """A tag push (or our own status branch) starts no pass: the answer says so instead of 202."""
    seen: list[dict[str, Any]] = []

    def only_main(payload: dict[str, Any]) -> bool:
        seen.append(payload)
        return payload.get("ref") == "refs/heads/main"

    with (
        Server(metrics, webhook_secret=SECRET, on_webhook=only_main) as running,
        httpx.Client(base_url=running.url, timeout=10) as http,
    ):
        tag = json.dumps({"ref": "refs/tags/v1.2.0"}).encode()
        answer = http.post("/hooks/git", content=tag, headers=push_headers(tag))
        assert answer.status_code == 200
        assert answer.json() == {
            "status": "ignored",
            "ref": "refs/tags/v1.2.0",
            "reason": "not the followed branch",
        }
        main = json.dumps(PUSH).encode()
        assert http.post("/hooks/git", content=main, headers=push_headers(main)).status_code == 202
    assert [p["ref"] for p in seen] == ["refs/tags/v1.2.0", "refs/heads/main"]
