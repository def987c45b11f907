"""Typed errors: the right class per status, useful fields, and never the API key."""

from __future__ import annotations

import logging

import httpx
import pytest

from reconciler.emulator import FaultRule
from reconciler.palette import (
    ClientError,
    NotFoundError,
    PaletteClient,
    PaletteError,
    RateLimitedError,
    ServerError,
    TransportError,
    UnauthorizedError,
)
from tests._palette_support import KEY, client, fast_retry, running


def _answering(status: int, body: object, headers: dict[str, str] | None = None) -> PaletteClient:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, json=body, headers=headers)

    return PaletteClient(
        "http://palette.test",
        KEY,
        "proj",
        transport=httpx.MockTransport(handler),
        retry=fast_retry(max_attempts=2),
    )


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (400, ClientError),
        (401, UnauthorizedError),
        (403, UnauthorizedError),
        (404, NotFoundError),
        (409, ClientError),
        (422, ClientError),
        (429, RateLimitedError),
        (500, ServerError),
        (503, ServerError),
    ],
)
def test_status_maps_to_error_class(status: int, cls: type[PaletteError]) -> None:
    body = {"code": "SomeCode", "message": "it went wrong", "details": {}, "ref": "ref-1"}
    with _answering(status, body) as palette, pytest.raises(cls) as caught:
        palette.get_cloud_config("cfg-1")
    error = caught.value
    assert (error.status, error.method, error.path) == (status, "GET", "/v1/cloudconfigs/edge-native/cfg-1")
    assert error.code == "SomeCode"
    assert "it went wrong" in str(error)


def test_body_that_is_not_v1error_still_gives_a_typed_error() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(502, text="<html>bad gateway</html>")

    palette = PaletteClient(
        "http://palette.test", KEY, transport=httpx.MockTransport(handler), retry=fast_retry()
    )
    with palette, pytest.raises(ServerError) as caught:
        palette.search_edge_hosts()
    assert caught.value.status == 502 and caught.value.code is None


def test_unexpected_response_shape_is_a_server_error() -> None:
    with _answering(200, {"items": [{"metadata": "not an object"}]}) as palette, pytest.raises(ServerError):
        palette.search_edge_hosts()


def _all_errors() -> list[BaseException]:
    """One real instance of every error the client raises, each provoked against the emulator."""
    errors: list[BaseException] = []
    faults = [FaultRule(path="search", burst_429=100), FaultRule(path="cloudconfigs", error_rate=1.0)]
    with running(faults=faults) as server:
        with client(server, retry=fast_retry(max_attempts=2)) as palette:
            for call in (
                palette.search_edge_hosts,  # 429
                lambda: palette.get_cloud_config("x"),  # 500
                lambda: palette.create_edge_native_cluster({"metadata": {}}),  # 400
            ):
                with pytest.raises(PaletteError) as caught:
                    call()
                errors.append(caught.value)
        with client(server, api_key="wrong-" + KEY) as stranger, pytest.raises(UnauthorizedError) as caught:
            stranger.get_cluster("x")
        errors.append(caught.value)
    with client(server, retry=fast_retry(max_attempts=2)) as palette, pytest.raises(TransportError) as caught:
        palette.get_cluster("x")  # server stopped: connection refused
    errors.append(caught.value)
    with _answering(404, {"code": "ResourceNotFound", "message": f"echoing {KEY}"}) as palette:
        with pytest.raises(NotFoundError) as caught:
            palette.get_cloud_config(KEY)
        errors.append(caught.value)
    return errors


def test_errors_and_client_never_show_the_key(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    errors = _all_errors()
    assert {type(e) for e in errors} == {
        RateLimitedError,
        ServerError,
        ClientError,
        UnauthorizedError,
        TransportError,
        NotFoundError,
    }
    palette = PaletteClient("http://palette.test", KEY, "proj")
    texts = [str(e) for e in errors] + [repr(e) for e in errors] + [str(palette), repr(palette)]
    texts += [str(e.args) for e in errors] + [str(vars(e)) for e in errors]
    for text in texts:
        assert KEY not in text
    assert KEY not in caplog.text
    palette.close()


def test_a_client_needs_a_key() -> None:
    with pytest.raises(ValueError, match="API key"):
        PaletteClient("http://palette.test", "")
