"""GitLab and Bitbucket push hooks on the real server (loopback), with each forge's documented headers and
payloads, the same cases as GitHub's and Gitea's (tests/test_server_endpoints.py): a verified push
triggers, a wrong or missing proof is refused, a test delivery is a ping, other events are ignored, the
results are counted, and neither the secret nor a signature reaches the logs. The forges' header rules
themselves (:mod:`reconciler.forges`) are pure and tested directly."""

from __future__ import annotations

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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.forges import Verifier, credential, event_of, push_ref, push_refs, sign_body
from reconciler.logging import configure_logging
from reconciler.metrics import Metrics
from reconciler.server.app import Server
from tests._server_support import Recorder

SECRET = b"forge-webhook-secret-2d7e"
AFTER = "da1560886d4f094c3e6c9ef40349f7d38b5d27d7"

# GitLab's push event (docs.gitlab.com, "Webhook events": Push events), trimmed to what identifies it.
GITLAB_PUSH = {
    "object_kind": "push",
    "event_name": "push",
    "before": "95790bf891e76fee5e1747ab589903a6a1f80f22",
    "after": AFTER,
    "ref": "refs/heads/main",
    "ref_protected": True,
    "checkout_sha": AFTER,
    "user_username": "jsmith",
    "project_id": 15,
    "project": {"id": 15, "path_with_namespace": "platform/compute-config", "default_branch": "main"},
    "commits": [{"id": AFTER, "message": "notebooks: 6 H100", "added": [], "modified": ["a.yaml"]}],
    "total_commits_count": 1,
}
GITLAB_TAG_PUSH = {
    **GITLAB_PUSH,
    "object_kind": "tag_push",
    "event_name": "tag_push",
    "ref": "refs/tags/v1.0.0",
}

# Bitbucket Cloud's repo:push (developer.atlassian.com, "Event payloads": Push).
BITBUCKET_CLOUD_PUSH = {
    "actor": {"display_name": "J Smith", "type": "user"},
    "repository": {"full_name": "platform/compute-config", "type": "repository"},
    "push": {
        "changes": [
            {
                "new": {"type": "branch", "name": "main", "target": {"type": "commit", "hash": AFTER}},
                "old": {"type": "branch", "name": "main", "target": {"type": "commit", "hash": "95790bf8"}},
                "created": False,
                "closed": False,
                "forced": False,
                "truncated": False,
            }
        ]
    },
}
# Bitbucket Data Center's repo:refs_changed (confluence.atlassian.com, "Event payload": Push).
BITBUCKET_DC_PUSH = {
    "eventKey": "repo:refs_changed",
    "date": "2026-12-02T10:00:00+0000",
    "actor": {"name": "jsmith"},
    "repository": {"slug": "compute-config", "project": {"key": "PLAT"}},
    "changes": [
        {
            "ref": {"id": "refs/heads/main", "displayId": "main", "type": "BRANCH"},
            "refId": "refs/heads/main",
            "fromHash": "95790bf891e76fee5e1747ab589903a6a1f80f22",
            "toHash": AFTER,
            "type": "UPDATE",
        }
    ],
}


def gitlab_headers(token: str = SECRET.decode(), event: str = "Push Hook") -> dict[str, str]:
    return {
        "X-Gitlab-Event": event,
        "X-Gitlab-Token": token,
        "X-Gitlab-Event-UUID": "13792a34-cac6-4fda-95a8-c58e00a3954e",
        "X-Gitlab-Instance": "https://gitlab.example.com",
        "Content-Type": "application/json",
    }


def bitbucket_headers(body: bytes, *, secret: bytes = SECRET, event: str = "repo:push") -> dict[str, str]:
    return {
        "X-Event-Key": event,
        "X-Hub-Signature": sign_body(secret, body),
        "X-Request-UUID": "0b8e5e0c-5c52-4a38-9d0f-1f7a6c5b6f1e",
        "X-Hook-UUID": "{3c9b6f1a-4d2e-4f3a-9a8b-2c1d0e9f8a7b}",
        "X-Attempt-Number": "1",
        "Content-Type": "application/json",
    }


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def client(recorder: Recorder) -> Iterator[httpx.Client]:
    with (
        Server(Metrics(), webhook_secret=SECRET, on_webhook=recorder) as server,
        httpx.Client(base_url=server.url, timeout=10) as http,
    ):
        yield http


def _post(client: httpx.Client, payload: dict[str, Any], headers: dict[str, str]) -> httpx.Response:
    return client.post("/hooks/git", content=json.dumps(payload).encode(), headers=headers)


# --- GitLab -------------------------------------------------------------------------------------------


def test_a_gitlab_push_with_the_token_triggers_the_callback(client: httpx.Client, recorder: Recorder) -> None:
    answer = _post(client, GITLAB_PUSH, gitlab_headers())
    assert answer.status_code == 202, answer.text
    assert answer.json() == {"status": "accepted"}
    assert recorder.payloads == [GITLAB_PUSH]


@pytest.mark.parametrize("token", ["wrong-token", SECRET.decode()[:-1], SECRET.decode() + "x", "x"])
def test_a_gitlab_push_with_another_token_is_refused(
    client: httpx.Client, recorder: Recorder, token: str
) -> None:
    answer = _post(client, GITLAB_PUSH, gitlab_headers(token=token))
    assert answer.status_code == 401
    assert answer.json() == {"error": "X-Gitlab-Token: token mismatch"}
    assert recorder.payloads == []


def test_a_gitlab_push_without_a_token_is_refused(client: httpx.Client, recorder: Recorder) -> None:
    headers = gitlab_headers()
    del headers["X-Gitlab-Token"]
    answer = _post(client, GITLAB_PUSH, headers)
    assert answer.status_code == 401 and "X-Gitlab-Token" in answer.json()["error"]
    assert recorder.payloads == []


def test_a_gitlab_tag_push_reaches_the_callback_which_decides(
    client: httpx.Client, recorder: Recorder
) -> None:
    """A tag push is a push (the controller ignores refs it does not follow, by ``ref``)."""
    assert _post(client, GITLAB_TAG_PUSH, gitlab_headers(event="Tag Push Hook")).status_code == 202
    assert [push_ref(p) for p in recorder.payloads] == ["refs/tags/v1.0.0"]


def test_other_gitlab_events_are_ignored(client: httpx.Client, recorder: Recorder) -> None:
    payload = {"object_kind": "merge_request", "object_attributes": {"iid": 3, "action": "open"}}
    answer = _post(client, payload, gitlab_headers(event="Merge Request Hook"))
    assert answer.status_code == 200
    assert answer.json() == {"status": "ignored", "event": "Merge Request Hook"}
    assert recorder.payloads == []


# --- Bitbucket ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "event"),
    [(BITBUCKET_CLOUD_PUSH, "repo:push"), (BITBUCKET_DC_PUSH, "repo:refs_changed")],
    ids=["cloud", "data-center"],
)
def test_a_signed_bitbucket_push_triggers_the_callback(
    client: httpx.Client, recorder: Recorder, payload: dict[str, Any], event: str
) -> None:
    body = json.dumps(payload).encode()
    answer = client.post("/hooks/git", content=body, headers=bitbucket_headers(body, event=event))
    assert answer.status_code == 202, answer.text
    assert recorder.payloads == [payload]
    assert push_refs(recorder.payloads[0]) == ("refs/heads/main",)


def test_a_bitbucket_push_signed_with_another_secret_or_body_is_refused(
    client: httpx.Client, recorder: Recorder
) -> None:
    body = json.dumps(BITBUCKET_CLOUD_PUSH).encode()
    wrong = client.post("/hooks/git", content=body, headers=bitbucket_headers(body, secret=b"other"))
    assert wrong.status_code == 401
    assert wrong.json() == {"error": "X-Hub-Signature: signature mismatch"}
    tampered = body.replace(b'"main"', b'"evil"')
    assert client.post("/hooks/git", content=tampered, headers=bitbucket_headers(body)).status_code == 401
    assert recorder.payloads == []


@pytest.mark.parametrize("signature", [None, "", "sha1=abc", "0" * 64])
def test_a_bitbucket_push_without_a_sha256_signature_is_refused(
    client: httpx.Client, recorder: Recorder, signature: str | None
) -> None:
    """A hook without a secret sends no signature; GitHub's legacy SHA-1 form is not accepted either."""
    body = json.dumps(BITBUCKET_CLOUD_PUSH).encode()
    headers = bitbucket_headers(body)
    del headers["X-Hub-Signature"]
    if signature is not None:
        headers["X-Hub-Signature"] = signature
    assert client.post("/hooks/git", content=body, headers=headers).status_code == 401
    assert recorder.payloads == []


def test_bitbucket_data_centers_test_connection_is_a_ping(client: httpx.Client, recorder: Recorder) -> None:
    body = json.dumps({"test": True}).encode()
    headers = bitbucket_headers(body, event="diagnostics:ping")
    del headers["X-Request-UUID"]
    headers["X-Request-Id"] = "5ad1e9a9-7c3e-4e2f-8f0e-2c5d6b7a8f9e"
    answer = client.post("/hooks/git", content=body, headers=headers)
    assert answer.status_code == 200 and answer.json() == {"status": "pong"}
    assert recorder.payloads == []


def test_other_bitbucket_events_are_ignored(client: httpx.Client, recorder: Recorder) -> None:
    body = json.dumps({"pullrequest": {"id": 3}}).encode()
    answer = client.post(
        "/hooks/git", content=body, headers=bitbucket_headers(body, event="pullrequest:created")
    )
    assert answer.status_code == 200
    assert answer.json() == {"status": "ignored", "event": "pullrequest:created"}
    assert recorder.payloads == []


# --- both ---------------------------------------------------------------------------------------------


def test_forge_results_are_counted_in_the_metrics(client: httpx.Client) -> None:
    body = json.dumps(BITBUCKET_CLOUD_PUSH).encode()
    _post(client, GITLAB_PUSH, gitlab_headers())
    _post(client, GITLAB_PUSH, gitlab_headers(token="nope"))
    client.post("/hooks/git", content=body, headers=bitbucket_headers(body))
    client.post("/hooks/git", content=body, headers=bitbucket_headers(body, secret=b"nope"))
    text = client.get("/metrics").text
    assert 'reconciler_webhooks_total{result="accepted"} 2.0' in text
    assert 'reconciler_webhooks_total{result="unauthorized"} 2.0' in text


def test_the_gitlab_token_and_bitbucket_signatures_never_reach_the_logs(recorder: Recorder) -> None:
    stream = io.StringIO()
    configure_logging("debug", stream=stream)
    body = json.dumps(BITBUCKET_CLOUD_PUSH).encode()
    try:
        with (
            Server(Metrics(), webhook_secret=SECRET, on_webhook=recorder) as server,
            httpx.Client(base_url=server.url) as http,
        ):
            _post(http, GITLAB_PUSH, gitlab_headers())
            _post(http, GITLAB_PUSH, gitlab_headers(token="a-wrong-token-77"))
            http.post("/hooks/git", content=body, headers=bitbucket_headers(body))
    finally:
        configure_logging()
    output = stream.getvalue()
    assert "webhook accepted" in output and "webhook rejected" in output and '"forge": "gitlab"' in output
    assert SECRET.decode() not in output and "a-wrong-token-77" not in output
    assert sign_body(SECRET, body).removeprefix("sha256=") not in output


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(token=st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=64))
def test_property_any_other_gitlab_token_never_triggers(
    client: httpx.Client, recorder: Recorder, token: str
) -> None:
    if token == SECRET.decode():
        return
    assert _post(client, GITLAB_PUSH, gitlab_headers(token=token)).status_code == 401
    assert recorder.payloads == []


# --- the rules, pure ----------------------------------------------------------------------------------


def test_each_forges_proof_is_read_from_its_own_header() -> None:
    digest = "a" * 64
    assert credential({"x-hub-signature-256": f"sha256={digest}", "x-hub-signature": "sha1=b"}) == (
        credential({"x-hub-signature-256": f"sha256={digest}"})
    )
    read = {
        "github": {"x-hub-signature-256": f"sha256={digest}"},
        "gitea": {"x-gitea-signature": digest},
        "forgejo": {"x-forgejo-signature": digest, "x-gitea-signature": digest},
        "gitlab": {"x-gitlab-token": "tok"},
        "bitbucket": {"x-hub-signature": f"sha256={digest}"},
    }
    assert {forge: getattr(credential(headers), "forge", None) for forge, headers in read.items()} == {
        forge: forge for forge in read
    }
    legacy = credential({"x-hub-signature": "sha1=" + "b" * 40})
    assert legacy is not None and (legacy.forge, legacy.scheme) == ("github", "sha1")
    assert credential({}) is None


def test_a_gitlab_token_is_the_secret_not_a_signature_of_the_body() -> None:
    proof = credential({"x-gitlab-token": SECRET.decode()})
    assert proof is not None and proof.scheme == "token"
    assert Verifier(SECRET).refusal(proof, [b"any body"], 0.0) is None
    assert Verifier(SECRET + b"!").refusal(proof, [b"any body"], 0.0) is not None
    signed = credential({"x-gitlab-token": sign_body(SECRET, b"body")})
    assert signed is not None and Verifier(SECRET).refusal(signed, [b"body"], 0.0) is not None


def test_events_by_forge() -> None:
    assert event_of({"x-gitlab-event": "Push Hook"}).kind == "push"
    assert event_of({"x-gitlab-event": "Tag Push Hook"}).kind == "push"
    assert event_of({"x-gitlab-event": "Pipeline Hook"}).kind == "other"
    assert event_of({"x-event-key": "repo:push", "x-request-uuid": "u"}).delivery == "u"
    assert event_of({"x-event-key": "repo:refs_changed"}).kind == "push"
    assert event_of({"x-event-key": "diagnostics:ping"}).kind == "ping"
    assert event_of({"x-gitea-event": "push", "x-github-event": "push"}).forge == "github"
    assert event_of({}).kind == "push"


def test_push_refs_of_each_payload_shape() -> None:
    assert push_refs(GITLAB_PUSH) == ("refs/heads/main",)
    assert push_refs(BITBUCKET_DC_PUSH) == ("refs/heads/main",)
    several = {
        "push": {
            "changes": [
                {"new": {"type": "branch", "name": "feature"}, "old": None},
                {"new": None, "old": {"type": "branch", "name": "main"}},  # main deleted
                {"new": {"type": "tag", "name": "v2"}, "old": None},
            ]
        }
    }
    assert push_refs(several) == ("refs/heads/feature", "refs/heads/main", "refs/tags/v2")
    assert push_refs({"push": {"changes": "junk"}, "changes": [None, {"ref": "x"}]}) == ()
    assert push_ref({}) is None


def test_the_operations_guide_curl_examples_trigger_as_written(recorder: Recorder) -> None:
    """docs/operations.md's script of each forge's headers, run by bash against a server on loopback
    (only its URL is this server's)."""
    if shutil.which("curl") is None or shutil.which("openssl") is None:
        pytest.skip("curl and openssl run the documented example")
    guide = (Path(__file__).resolve().parents[1] / "docs" / "operations.md").read_text()
    section = guide[guide.index("### Webhook setup") :]
    script = section[section.index("```bash\n") + 8 : section.index("\n```", section.index("```bash"))]
    assert script.count("curl ") == 3
    with Server(Metrics(), webhook_secret=SECRET, on_webhook=recorder) as server:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script.replace("http://127.0.0.1:9090", server.url)],
            env={**os.environ, "RECONCILER_WEBHOOK_SECRET": SECRET.decode()},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count('{"status":"accepted"}') == 3, done.stdout
    assert [push_refs(p) for p in recorder.payloads] == [("refs/heads/main",)] * 3
