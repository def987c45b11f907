"""Signed deliveries with a timestamp and the legacy SHA-1 signature, on the real server (loopback):

- GitLab's signing token (Standard Webhooks: ``webhook-id``, ``webhook-timestamp``, ``webhook-signature:
  v1,<base64 HMAC-SHA256 of "id.timestamp.body">``) is verified against the webhook secret, a timestamp
  outside the replay window of the server's injected clock is refused, and an id accepted once in the
  window is answered ``duplicate`` (nothing starts);
- GitHub's legacy ``X-Hub-Signature: sha1=...`` is refused unless the server is told to accept it, and
  then only when no ``X-Hub-Signature-256`` is sent (SHA-256 alone judges a delivery that has it);
- neither the secret nor a signature reaches the logs.
The rules themselves are pure (:mod:`reconciler.forges`) and tested directly, with the published
Standard Webhooks test vector."""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from reconciler.forges import REPLAY_WINDOW, Replays, Verifier, credential, sign_body, sign_standard
from reconciler.logging import configure_logging
from reconciler.metrics import Metrics
from reconciler.server.app import Server
from reconciler.server.config import ServerError, webhook_allow_sha1_from_env
from tests._server_support import Recorder

# A signing token as GitLab makes them: whsec_ and the base64 of 32 random bytes.
SIGNING = b"whsec_Lz5vQ0hH3m8yYk2xR9cV1nB7tP4wE6uA0sD3fG5hJ8k="
NOW = 1_796_300_000.0
MESSAGE = "2f0a6c83-5e3b-4c47-9a1d-7b8e0c1f2a3d"


class Clock:
    """The server's clock, moved by the test."""

    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def signed_headers(
    body: bytes,
    *,
    secret: bytes = SIGNING,
    message: str = MESSAGE,
    at: float = NOW,
    signature: str | None = None,
) -> dict[str, str]:
    """What GitLab sends for a push with a signing token (and its usual headers)."""
    stamp = str(int(at))
    return {
        "X-Gitlab-Event": "Push Hook",
        "X-Gitlab-Event-UUID": "13792a34-cac6-4fda-95a8-c58e00a3954e",
        "X-Gitlab-Instance": "https://gitlab.example.com",
        "Idempotency-Key": message,
        "webhook-id": message,
        "webhook-timestamp": stamp,
        "webhook-signature": signature or sign_standard(secret, message, stamp, body),
        "Content-Type": "application/json",
    }


# GitLab's push event (docs.gitlab.com, "Webhook events": Push events), trimmed.
GITLAB_PUSH = {
    "object_kind": "push",
    "event_name": "push",
    "before": "95790bf891e76fee5e1747ab589903a6a1f80f22",
    "after": "da1560886d4f094c3e6c9ef40349f7d38b5d27d7",
    "ref": "refs/heads/main",
    "project": {"id": 15, "path_with_namespace": "platform/compute-config", "default_branch": "main"},
}
BODY = json.dumps(GITLAB_PUSH).encode()


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def client(recorder: Recorder, clock: Clock) -> Iterator[httpx.Client]:
    with (
        Server(Metrics(), webhook_secret=SIGNING, on_webhook=recorder, clock=clock) as server,
        httpx.Client(base_url=server.url, timeout=10) as http,
    ):
        yield http


def _post(client: httpx.Client, headers: dict[str, str], body: bytes = BODY) -> httpx.Response:
    return client.post("/hooks/git", content=body, headers=headers)


# --- GitLab's signing token -----------------------------------------------------------------------------


def test_a_gitlab_push_signed_with_the_signing_token_triggers(
    client: httpx.Client, recorder: Recorder
) -> None:
    answer = _post(client, signed_headers(BODY))
    assert answer.status_code == 202, answer.text
    assert answer.json() == {"status": "accepted"}
    assert recorder.payloads == [GITLAB_PUSH]


def test_during_a_rotation_any_v1_signature_of_the_header_may_match(
    client: httpx.Client, recorder: Recorder
) -> None:
    right = sign_standard(SIGNING, MESSAGE, str(int(NOW)), BODY)
    several = f"v1a,c2lnbmF0dXJl v1,{sign_body(b'old', BODY)[7:]} {right}"
    assert _post(client, signed_headers(BODY, signature=several)).status_code == 202
    assert len(recorder.payloads) == 1


@pytest.mark.parametrize(
    "change",
    ["secret", "body", "id", "timestamp", "no v1"],
)
def test_a_signature_of_anything_else_is_refused(
    client: httpx.Client, recorder: Recorder, change: str
) -> None:
    headers = signed_headers(BODY, secret=b"whsec_" + b"A" * 44 if change == "secret" else SIGNING)
    body = BODY.replace(b'"main"', b'"evil"') if change == "body" else BODY
    if change == "id":
        headers["webhook-id"] = "another-delivery"
    if change == "timestamp":
        headers["webhook-timestamp"] = str(int(NOW) - 1)
    if change == "no v1":
        headers["webhook-signature"] = "v1a," + headers["webhook-signature"][3:]
    answer = _post(client, headers, body)
    assert answer.status_code == 401
    assert answer.json() == {"error": "webhook-signature: signature mismatch"}
    assert recorder.payloads == []


@pytest.mark.parametrize("missing", ["webhook-id", "webhook-timestamp"])
def test_a_signature_without_its_id_or_timestamp_is_refused(
    client: httpx.Client, recorder: Recorder, missing: str
) -> None:
    headers = signed_headers(BODY)
    del headers[missing]
    answer = _post(client, headers)
    assert answer.status_code == 401 and "webhook-id and webhook-timestamp" in answer.json()["error"]
    assert recorder.payloads == []


def test_a_delivery_outside_the_replay_window_is_refused_either_way(
    client: httpx.Client, recorder: Recorder, clock: Clock
) -> None:
    clock.now = NOW + REPLAY_WINDOW + 1  # sent six minutes ago
    late = _post(client, signed_headers(BODY))
    assert late.status_code == 401
    assert late.json() == {
        "error": "webhook-timestamp: 301 s behind this server's clock, outside the 300 s replay window"
    }
    clock.now = NOW - REPLAY_WINDOW - 1  # from the future
    assert "301 s ahead of" in _post(client, signed_headers(BODY)).json()["error"]
    not_a_time = signed_headers(BODY)
    not_a_time["webhook-timestamp"] = "2026-12-03T10:00:00Z"
    assert _post(client, not_a_time).json() == {
        "error": "webhook-timestamp: not a Unix time in whole seconds"
    }
    assert recorder.payloads == []
    clock.now = NOW + REPLAY_WINDOW  # the edge of the window is inside it
    assert _post(client, signed_headers(BODY)).status_code == 202
    assert len(recorder.payloads) == 1


def test_a_replayed_delivery_starts_nothing_and_is_refused_once_the_window_is_over(
    client: httpx.Client, recorder: Recorder, clock: Clock
) -> None:
    headers = signed_headers(BODY)
    assert _post(client, headers).status_code == 202
    clock.now = NOW + 60
    again = _post(client, headers)
    assert again.status_code == 200 and again.json()["status"] == "duplicate", again.text
    other = signed_headers(BODY, message="5d9c2b1a-0e4f-4a3b-8c7d-6e5f4a3b2c1d", at=NOW + 60)
    assert _post(client, other).status_code == 202  # another delivery of the same push is one
    clock.now = NOW + REPLAY_WINDOW + 60
    assert _post(client, headers).status_code == 401  # its timestamp is too old now
    assert len(recorder.payloads) == 2
    text = client.get("/metrics").text
    assert 'reconciler_webhooks_total{result="duplicate"} 1.0' in text
    assert 'reconciler_webhooks_total{result="accepted"} 2.0' in text


def test_an_id_is_remembered_while_its_timestamp_still_passes(
    client: httpx.Client, recorder: Recorder, clock: Clock
) -> None:
    """A timestamp 300 s ahead of the server's clock is accepted, and passes until 300 s after it: a
    replay of it 450 s after its acceptance is still a duplicate."""
    headers = signed_headers(BODY, at=NOW + REPLAY_WINDOW)
    assert _post(client, headers).status_code == 202
    clock.now = NOW + 1.5 * REPLAY_WINDOW
    again = _post(client, headers)
    assert again.status_code == 200 and again.json()["status"] == "duplicate", again.text
    clock.now = NOW + 2 * REPLAY_WINDOW + 1
    assert _post(client, headers).status_code == 401  # its timestamp too old now, the id forgotten
    assert len(recorder.payloads) == 1


def test_a_delivery_whose_handling_failed_is_taken_when_retried(clock: Clock) -> None:
    """A sender retries a failed delivery with the same id: that is no replay."""
    calls: list[dict[str, Any]] = []

    def flaky(payload: dict[str, Any]) -> None:
        calls.append(payload)
        if len(calls) == 1:
            raise RuntimeError("the controller is busy")

    with (
        Server(Metrics(), webhook_secret=SIGNING, on_webhook=flaky, clock=clock) as server,
        httpx.Client(base_url=server.url, timeout=10) as http,
    ):
        assert _post(http, signed_headers(BODY)).status_code == 500
        clock.now = NOW + 10
        assert _post(http, signed_headers(BODY)).status_code == 202
    assert len(calls) == 2


def test_a_signature_is_judged_before_the_secret_token(client: httpx.Client, recorder: Recorder) -> None:
    """A hook with both a secret token and a signing token: the signature decides."""
    headers = signed_headers(BODY, secret=b"whsec_" + b"B" * 44)
    headers["X-Gitlab-Token"] = SIGNING.decode()
    assert _post(client, headers).status_code == 401
    token_only = {k: v for k, v in headers.items() if not k.startswith("webhook-")}
    assert _post(client, token_only).status_code == 202  # the older secret token alone still works
    assert len(recorder.payloads) == 1


def test_a_plain_secret_signs_with_its_own_bytes(recorder: Recorder, clock: Clock) -> None:
    plain = b"forge-webhook-secret-2d7e"
    with (
        Server(Metrics(), webhook_secret=plain, on_webhook=recorder, clock=clock) as server,
        httpx.Client(base_url=server.url, timeout=10) as http,
    ):
        assert _post(http, signed_headers(BODY, secret=plain)).status_code == 202
    assert len(recorder.payloads) == 1


# --- GitHub's legacy SHA-1 ------------------------------------------------------------------------------


SECRET = b"github-webhook-secret-81c4"
GITHUB_PUSH = json.dumps({"ref": "refs/heads/main", "after": "da15608"}).encode()


def sha1_of(body: bytes, secret: bytes = SECRET) -> str:
    return "sha1=" + hmac.new(secret, body, hashlib.sha1).hexdigest()


def github_headers(*, sha256: str | None, sha1: str | None) -> dict[str, str]:
    headers = {"X-GitHub-Event": "push", "X-GitHub-Delivery": "72d3162e", "Content-Type": "application/json"}
    if sha256 is not None:
        headers["X-Hub-Signature-256"] = sha256
    if sha1 is not None:
        headers["X-Hub-Signature"] = sha1
    return headers


@pytest.fixture
def github(recorder: Recorder) -> Iterator[tuple[httpx.Client, httpx.Client]]:
    """Two servers on loopback: one as configured by default, one that accepts SHA-1."""
    with (
        Server(Metrics(), webhook_secret=SECRET, on_webhook=recorder) as strict,
        Server(Metrics(), webhook_secret=SECRET, on_webhook=recorder, webhook_allow_sha1=True) as legacy,
        httpx.Client(base_url=strict.url, timeout=10) as strict_http,
        httpx.Client(base_url=legacy.url, timeout=10) as legacy_http,
    ):
        yield strict_http, legacy_http


def test_a_sha1_only_delivery_is_refused_by_default_and_accepted_when_configured(
    github: tuple[httpx.Client, httpx.Client], recorder: Recorder
) -> None:
    strict, legacy = github
    headers = github_headers(sha256=None, sha1=sha1_of(GITHUB_PUSH))
    refused = strict.post("/hooks/git", content=GITHUB_PUSH, headers=headers)
    assert refused.status_code == 401 and "SHA-1 signatures are not accepted" in refused.json()["error"]
    assert recorder.payloads == []
    assert legacy.post("/hooks/git", content=GITHUB_PUSH, headers=headers).status_code == 202
    wrong = github_headers(sha256=None, sha1=sha1_of(GITHUB_PUSH, b"other"))
    answer = legacy.post("/hooks/git", content=GITHUB_PUSH, headers=wrong)
    assert answer.status_code == 401 and answer.json() == {"error": "X-Hub-Signature: signature mismatch"}
    assert len(recorder.payloads) == 1


def test_with_both_headers_sha256_alone_decides(
    github: tuple[httpx.Client, httpx.Client], recorder: Recorder
) -> None:
    """What GitHub sends: both signatures. A wrong SHA-256 is not rescued by a right SHA-1."""
    strict, legacy = github
    both = github_headers(sha256=sign_body(SECRET, GITHUB_PUSH), sha1=sha1_of(GITHUB_PUSH))
    assert strict.post("/hooks/git", content=GITHUB_PUSH, headers=both).status_code == 202
    forged = github_headers(sha256=sign_body(b"other", GITHUB_PUSH), sha1=sha1_of(GITHUB_PUSH))
    for client in (strict, legacy):
        answer = client.post("/hooks/git", content=GITHUB_PUSH, headers=forged)
        assert answer.json() == {"error": "X-Hub-Signature-256: signature mismatch"}
    assert len(recorder.payloads) == 1


def test_the_allow_sha1_setting_is_read_from_the_environment() -> None:
    assert webhook_allow_sha1_from_env({}) is False
    assert webhook_allow_sha1_from_env({"RECONCILER_WEBHOOK_ALLOW_SHA1": "true"}) is True
    assert webhook_allow_sha1_from_env({"RECONCILER_WEBHOOK_ALLOW_SHA1": "0"}) is False
    with pytest.raises(ServerError, match="RECONCILER_WEBHOOK_ALLOW_SHA1 must be true or false"):
        webhook_allow_sha1_from_env({"RECONCILER_WEBHOOK_ALLOW_SHA1": "sometimes"})


# --- logs -----------------------------------------------------------------------------------------------


def test_neither_secret_nor_signature_reaches_the_logs(recorder: Recorder, clock: Clock) -> None:
    stream = io.StringIO()
    configure_logging("debug", stream=stream)
    headers = signed_headers(BODY)
    try:
        with (
            Server(Metrics(), webhook_secret=SIGNING, on_webhook=recorder, clock=clock) as server,
            httpx.Client(base_url=server.url) as http,
        ):
            _post(http, headers)
            _post(http, headers)  # a duplicate
            _post(http, signed_headers(BODY, secret=b"whsec_" + b"C" * 44))
            clock.now += 3600
            _post(http, headers)
    finally:
        configure_logging()
    output = stream.getvalue()
    assert "webhook accepted" in output and "webhook duplicate" in output
    assert "signature mismatch" in output and "outside the replay window" in output
    assert SIGNING.decode() not in output and SIGNING.decode()[6:] not in output
    assert headers["webhook-signature"][3:] not in output


# --- the rules, pure ------------------------------------------------------------------------------------


def test_the_published_standard_webhooks_vector_verifies() -> None:
    secret = b"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    body = b'{"test": 2432232314}'
    expected = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    assert sign_standard(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", body) == expected
    headers = {
        "webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
        "webhook-timestamp": "1614265330",
        "webhook-signature": f"v1,bm9wZQ== {expected}",
    }
    proof = credential(headers)
    assert proof is not None and (proof.forge, proof.scheme) == ("standard-webhooks", "standard")
    assert Verifier(secret).refusal(proof, [body], 1614265330.0) is None
    assert Verifier(secret).refusal(proof, [body + b" "], 1614265330.0) is not None
    assert Verifier(secret).refusal(proof, [body], 1614265330.0 + 301) is not None


def test_replays_are_remembered_for_the_window_only() -> None:
    replays = Replays(window=300.0, limit=2)
    replays.remember("a", 0.0)
    assert replays.seen("a", 300.0) and not replays.seen("b", 300.0)
    assert not replays.seen("a", 301.0)
    for key in ("x", "y", "z"):
        replays.remember(key, 400.0)
    assert [k for k in ("x", "y", "z") if replays.seen(k, 400.0)] == ["y", "z"]  # the oldest gives way


def test_a_flood_of_distinct_ids_keeps_the_newest_up_to_the_cap() -> None:
    replays = Replays(limit=100)
    assert not replays.seen("first", 0.0)
    replays.remember("first", 0.0)
    assert replays.seen("first", 2 * REPLAY_WINDOW)  # by default kept twice the timestamp window
    ids = [f"flood-{i}" for i in range(1000)]
    for key in ids:
        replays.remember(key, 1.0)
    kept = [k for k in ["first", *ids] if replays.seen(k, 1.0)]
    assert kept == ids[-100:]  # the oldest gave way: at most the cap is kept, whatever the flood
    assert not replays.seen(ids[-1], 1.0 + 2 * REPLAY_WINDOW + 1)


def test_the_operations_guide_signing_token_example_triggers_as_written(recorder: Recorder) -> None:
    """docs/operations.md's curl of a signed GitLab push, run by bash against a server on loopback at the
    wall clock (only its URL is this server's)."""
    if not all(shutil.which(tool) for tool in ("curl", "openssl", "base64", "od")):
        pytest.skip("curl, openssl, base64 and od run the documented example")
    guide = (Path(__file__).resolve().parents[1] / "docs" / "operations.md").read_text()
    section = guide[guide.index("GitLab with a signing token") :]
    script = section[section.index("```bash\n") + 8 : section.index("\n```", section.index("```bash"))]
    with Server(Metrics(), webhook_secret=SIGNING, on_webhook=recorder) as server:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script.replace("http://127.0.0.1:9090", server.url)],
            env={**os.environ, "RECONCILER_WEBHOOK_SECRET": SIGNING.decode()},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout == '{"status":"accepted"}', done.stdout
    assert recorder.payloads == [{"object_kind": "push", "ref": "refs/heads/main"}]
