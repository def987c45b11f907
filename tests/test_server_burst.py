"""A burst of signed webhook deliveries on real sockets (127.0.0.1): beyond one pending pass they are
coalesced and answered 202 ``{"status": "coalesced"}``, never 503, also when every body arrives after
its headers. The server calls the run command's own ``on_webhook`` (:func:`push_handler`) over a fake
loop whose ``wake`` no one clears during the burst, as a loop busy with a pass; no sleeps: each client
blocks on its socket until the server answers and closes."""

from __future__ import annotations

import json
import socket
import threading
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest

from reconciler.commands.run import push_handler
from reconciler.forges import sign_body
from reconciler.metrics import Metrics
from reconciler.server.app import Server

SECRET = b"burst-webhook-secret-4b1f"
BURST = 1000


class FakeLoop:
    """The part of the pipeline the webhook handler uses: the wake-up a pass clears when it starts."""

    def __init__(self) -> None:
        self.wake = threading.Event()
        self.requests = 0
        self._lock = threading.Lock()

    def request_pass(self) -> None:
        with self._lock:
            self.requests += 1
        self.wake.set()

    def start_pass(self) -> None:
        """What the loop does before a pass reads the branch."""
        self.wake.clear()


@pytest.fixture
def loop() -> FakeLoop:
    return FakeLoop()


@pytest.fixture
def server(loop: FakeLoop) -> Iterator[Server]:
    with Server(Metrics(), webhook_secret=SECRET, on_webhook=push_handler("main", loop)) as running:
        yield running


def _request(ref: str, index: int) -> tuple[bytes, bytes]:
    body = json.dumps({"ref": ref, "after": f"{index:040x}"}).encode()
    head = (
        "POST /hooks/git HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
        f"X-GitHub-Event: push\r\nX-GitHub-Delivery: d-{index}\r\n"
        f"X-Hub-Signature-256: {sign_body(SECRET, body)}\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    return head, body


def _answer(conn: socket.socket) -> tuple[int, dict[str, object]]:
    """Block until the server has answered and closed the connection; (status, JSON body)."""
    conn.settimeout(60)
    received = b""
    while chunk := conn.recv(65536):
        received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), json.loads(body)


def _burst(port: int, refs: list[str], *, split: bool) -> Counter[tuple[int, str]]:
    """Connect every client, then send every request (``split``: every head first, then every body),
    then collect every answer: (status, answer's status field) -> deliveries."""
    conns = [socket.create_connection(("127.0.0.1", port), timeout=60) for _ in refs]
    try:
        requests = [_request(ref, i) for i, ref in enumerate(refs)]
        if split:
            for conn, (head, _body) in zip(conns, requests, strict=True):
                conn.sendall(head)
            for conn, (_head, body) in zip(conns, requests, strict=True):
                conn.sendall(body)
        else:
            for conn, (head, body) in zip(conns, requests, strict=True):
                conn.sendall(head + body)
        answers = [_answer(conn) for conn in conns]
    finally:
        for conn in conns:
            conn.close()
    return Counter((status, str(body.get("status"))) for status, body in answers)


@pytest.mark.parametrize("split", [False, True], ids=["whole", "body-after-headers"])
def test_a_burst_of_1000_pushes_is_one_pass_and_999_coalesced_answers(
    server: Server, loop: FakeLoop, split: bool
) -> None:
    answers = _burst(server.port, ["refs/heads/main"] * BURST, split=split)
    assert answers == Counter({(202, "accepted"): 1, (202, "coalesced"): BURST - 1})
    assert loop.wake.is_set() and 1 <= loop.requests <= BURST
    with httpx.Client(base_url=server.url, timeout=10) as http:
        text = http.get("/metrics").text
    assert 'reconciler_webhooks_total{result="accepted"} 1.0' in text
    assert f'reconciler_webhooks_total{{result="coalesced"}} {float(BURST - 1)}' in text
    assert 'result="busy"' not in text


def test_a_push_after_the_pending_pass_started_requests_the_next_one(server: Server, loop: FakeLoop) -> None:
    """Coalescing is with a pass that has not read the branch yet, never with one that already has."""
    assert _burst(server.port, ["refs/heads/main"] * 3, split=False) == Counter(
        {(202, "accepted"): 1, (202, "coalesced"): 2}
    )
    loop.start_pass()
    assert _burst(server.port, ["refs/heads/main"], split=False) == Counter({(202, "accepted"): 1})
    assert loop.wake.is_set()


def test_pushes_of_other_refs_in_a_burst_are_ignored_not_coalesced(server: Server, loop: FakeLoop) -> None:
    refs = ["refs/heads/main", "refs/tags/v1.2.0"] * (BURST // 4)
    answers = _burst(server.port, refs, split=False)
    assert answers == Counter(
        {(202, "accepted"): 1, (202, "coalesced"): BURST // 4 - 1, (200, "ignored"): BURST // 4}
    )
