"""Error classes (docs/palette.md): transient ones are retried, 401/403 and other 4xx never are."""

from __future__ import annotations

import httpx
import pytest

from reconciler.emulator import FaultRule
from reconciler.palette import PaletteClient
from reconciler.palette.credentials import MissingAPIKey
from reconciler.palette.errors import (
    ClientError,
    ErrorClass,
    NotFoundError,
    PaletteError,
    RateLimitedError,
    ServerError,
    TransportError,
    UnauthorizedError,
    classify,
    error_for_status,
)
from tests._palette_support import KEY, client, fast_retry, running

SEARCH = "/v1/dashboard/edgehosts/search"


@pytest.mark.parametrize(
    ("status", "cls", "klass"),
    [
        (400, ClientError, ErrorClass.REQUEST),
        (401, UnauthorizedError, ErrorClass.UNAUTHORIZED),
        (403, UnauthorizedError, ErrorClass.UNAUTHORIZED),
        (404, NotFoundError, ErrorClass.REQUEST),
        (409, ClientError, ErrorClass.REQUEST),
        (422, ClientError, ErrorClass.REQUEST),
        (429, RateLimitedError, ErrorClass.TRANSIENT),
        (500, ServerError, ErrorClass.TRANSIENT),
        (503, ServerError, ErrorClass.TRANSIENT),
    ],
)
def test_each_status_has_one_error_type_and_class(
    status: int, cls: type[PaletteError], klass: ErrorClass
) -> None:
    error = error_for_status(status, "no", method="GET", path="/v1/x")
    assert type(error) is cls
    assert classify(error) is klass
    assert error.transient is (klass is ErrorClass.TRANSIENT)


def test_failures_without_an_http_answer_are_classified_too() -> None:
    assert classify(TransportError("connection refused")) is ErrorClass.TRANSIENT
    assert classify(MissingAPIKey("no key")) is ErrorClass.UNAUTHORIZED
    assert classify(OSError("reset")) is ErrorClass.TRANSIENT


def test_a_401_is_not_retried() -> None:
    with running() as server:
        palette = client(server, api_key="wrong-key", retry=fast_retry(max_attempts=5))
        with palette, pytest.raises(UnauthorizedError) as caught:
            palette.search_edge_hosts()
        assert server.stats.count(path=SEARCH) == 1
    assert classify(caught.value) is ErrorClass.UNAUTHORIZED


def test_a_503_is_retried_until_it_succeeds() -> None:
    faults = [FaultRule(path="edgehosts/search", error_next=2, error_status=503)]
    with running(faults=faults) as server:
        with client(server, retry=fast_retry(max_attempts=5)) as palette:
            hosts = palette.search_edge_hosts()
        assert server.stats.count(path=SEARCH, status=503) == 2
        assert server.stats.count(path=SEARCH, status=200) == 1
    assert hosts


@pytest.mark.parametrize(("status", "cls"), [(403, UnauthorizedError), (422, ClientError)])
def test_403_and_other_4xx_are_sent_once(status: int, cls: type[PaletteError]) -> None:
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(status, json={"code": "No", "message": "no", "details": {}, "ref": "r"})

    palette = PaletteClient(
        "http://palette.test", KEY, transport=httpx.MockTransport(handler), retry=fast_retry(max_attempts=5)
    )
    with palette, pytest.raises(cls):
        palette.search_edge_hosts()
    assert len(sent) == 1
