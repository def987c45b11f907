"""Retries: the backoff object alone, and the client against the emulator's injected faults."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from reconciler.emulator import FaultRule
from reconciler.palette import (
    ClientError,
    PaletteClient,
    RateLimitedError,
    ServerError,
    TransportError,
)
from reconciler.palette.endpoints import parse_retry_after
from reconciler.palette.pacing import RateLimits
from reconciler.retry import RetryPolicy
from tests._git_support import free_port, silent_server
from tests._palette_support import INFRA_UID, KEY, FakeClock, admin, client, fast_retry, running

SEARCH = "/v1/dashboard/edgehosts/search"
CREATE = "/v1/spectroclusters/edge-native"


def _create_body(host_uid: str = "edge-cp-1") -> dict:
    return {
        "metadata": {"name": "c", "labels": {}},
        "spec": {
            "machinepoolconfig": [
                {
                    "cloudConfig": {"edgeHosts": [{"hostUid": host_uid}]},
                    "poolConfig": {
                        "name": "cp",
                        "isControlPlane": True,
                        "labels": ["control-plane"],
                        "size": 1,
                    },
                }
            ],
            "profiles": [{"uid": INFRA_UID}],
        },
    }


# --- the backoff object --------------------------------------------------------------------------


def test_delays_use_full_jitter_under_an_exponential_ceiling() -> None:
    policy = RetryPolicy(
        max_attempts=6, base_delay=1.0, max_delay=4.0, total_timeout=1e9, rng=random.Random(7)
    )
    backoff = policy.backoff()
    delays = [backoff.next_delay() for _ in range(6)]
    ceilings = [1.0, 2.0, 4.0, 4.0, 4.0]
    assert all(d is not None and 0 <= d <= c for d, c in zip(delays[:5], ceilings, strict=True))
    assert delays[5] is None  # six attempts failed: no seventh
    assert len(set(delays[:5])) == 5  # jittered, not fixed


def test_attempts_stop_at_the_total_time_budget() -> None:
    clock = FakeClock(0.0)
    policy = RetryPolicy(max_attempts=100, base_delay=1.0, max_delay=1.0, total_timeout=3.0, clock=clock)
    backoff = policy.backoff()
    clock.advance(2.5)
    assert backoff.next_delay(retry_after=0.4) == 0.4
    assert backoff.next_delay(retry_after=0.6) is None  # 2.5 + 0.6 > 3


def test_retry_after_replaces_the_jittered_delay() -> None:
    backoff = RetryPolicy(max_attempts=3, base_delay=0.0, total_timeout=100).backoff()
    assert backoff.next_delay(retry_after=7.0) == 7.0


@pytest.mark.parametrize(
    ("value", "expected"),
    [("3", 3.0), ("1.5", 1.5), ("-2", 0.0), ("", None), (None, None), ("soon", None)],
)
def test_parse_retry_after_seconds(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value) == expected


def test_parse_retry_after_http_date() -> None:
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:10 GMT", now=1445412480.0) == 10.0


# --- against the emulator ------------------------------------------------------------------------


def test_429_burst_is_retried_and_succeeds() -> None:
    with (
        running(faults=[FaultRule(path="edgehosts/search", burst_429=3)]) as server,
        client(server) as palette,
    ):
        assert len(palette.search_edge_hosts()) == 9
        assert server.stats.count("POST", SEARCH, 429) == 3
        assert server.stats.count("POST", SEARCH, 200) == 1


def test_server_errors_are_retried_and_succeed() -> None:
    fault = FaultRule(path="spectroclusters", error_next=2, error_status=503)
    with running(faults=[fault]) as server, client(server) as palette:
        assert palette.get_cluster("missing") is None
        assert server.stats.count("GET", "/v1/spectroclusters/{uid}", 503) == 2


def test_dropped_connections_are_retried_for_reads() -> None:
    with running(faults=[FaultRule(path="edgehosts", drop_next=2)]) as server, client(server) as palette:
        assert len(palette.search_edge_hosts()) == 9
        assert server.stats.count("POST", SEARCH, 0) == 2


def test_persistent_failure_ends_in_a_typed_error_within_the_time_bound() -> None:
    clock = FakeClock(0.0)  # the budget runs on the back-off's waits alone, however slow the machine
    retry = RetryPolicy(
        max_attempts=50, base_delay=0.05, max_delay=0.2, total_timeout=1.0, clock=clock, sleep=clock.advance
    )
    with (
        running(faults=[FaultRule(error_rate=1.0)]) as server,
        client(server, retry=retry) as palette,
        pytest.raises(ServerError) as caught,
    ):
        palette.search_edge_hosts()
    assert caught.value.status == 500 and caught.value.transient
    assert clock() <= 1.0, "no wait goes past the total budget"
    assert 2 <= server.stats.count(status=500) < 50


def test_persistent_rate_limit_ends_in_rate_limited_error_after_max_attempts() -> None:
    with (
        running(faults=[FaultRule(burst_429=100)]) as server,
        client(server, retry=fast_retry(max_attempts=4)) as palette,
    ):
        with pytest.raises(RateLimitedError) as caught:
            palette.search_edge_hosts()
        assert caught.value.code == "TooManyRequests"
        assert server.stats.count(status=429) == 4


def test_retry_after_header_is_honoured() -> None:
    slept: list[float] = []
    retry = RetryPolicy(
        max_attempts=5, base_delay=0.001, max_delay=0.01, total_timeout=30, sleep=slept.append
    )
    with (
        running(faults=[FaultRule(burst_429=2, retry_after=1.5)]) as server,
        client(server, retry=retry) as palette,
    ):
        palette.search_edge_hosts()
    assert slept == [1.5, 1.5]


def test_retry_after_beyond_the_time_budget_gives_up_at_once() -> None:
    slept: list[float] = []
    retry = RetryPolicy(max_attempts=5, total_timeout=2.0, sleep=slept.append)
    with (
        running(faults=[FaultRule(burst_429=1, retry_after=60)]) as server,
        client(server, retry=retry) as palette,
        pytest.raises(RateLimitedError) as caught,
    ):
        palette.search_edge_hosts()
    assert slept == [] and caught.value.retry_after == 60


def test_create_is_not_resent_after_a_dropped_connection() -> None:
    with running(faults=[FaultRule(path="edge-native$", drop_next=1)]) as server, client(server) as palette:
        with pytest.raises(TransportError):
            palette.create_edge_native_cluster(_create_body())
        assert server.stats.count("POST", CREATE) == 1


def test_create_is_not_resent_after_a_server_error() -> None:
    with running(faults=[FaultRule(path="edge-native$", error_next=1)]) as server, client(server) as palette:
        with pytest.raises(ServerError):
            palette.create_edge_native_cluster(_create_body())
        assert server.stats.count("POST", CREATE) == 1


def test_create_is_retried_on_429() -> None:
    with running(faults=[FaultRule(path="edge-native$", burst_429=2)]) as server, client(server) as palette:
        uid = palette.create_edge_native_cluster(_create_body())
        assert palette.get_cluster(uid) is not None
        assert server.stats.count("POST", CREATE, 201) == 1


def test_connection_refused_is_retried_then_a_transport_error() -> None:
    port = free_port()  # nothing listens there
    attempts: list[int] = []
    palette = PaletteClient(
        f"http://127.0.0.1:{port}",
        KEY,
        retry=fast_retry(max_attempts=3),
        on_request=lambda m, p, s: attempts.append(s),
    )
    with palette, pytest.raises(TransportError) as caught:
        palette.create_edge_native_cluster(_create_body())
    assert attempts == [0, 0, 0]
    assert caught.value.status == 0


@contextmanager
def silent_palette(**kwargs: Any) -> Iterator[PaletteClient]:
    """A client of a Palette that accepts connections and never answers (without a cut: for ever)."""
    with (
        silent_server() as address,
        PaletteClient(f"http://{address}", KEY, rate_limits=RateLimits.off(), **kwargs) as palette,
    ):
        yield palette


def test_timeouts_are_bounded_per_call() -> None:
    with silent_palette(timeout=0.1, retry=fast_retry(max_attempts=2)) as palette:
        started = time.monotonic()
        with pytest.raises(TransportError) as caught:
            palette.search_edge_hosts()
        assert "timeout" in str(caught.value)
        # Two attempts cut at 0.1 s; without the per-call timeout the first would never end.
        assert time.monotonic() - started < 60  # a hang bound, however slow the machine


def test_faults_can_be_switched_at_run_time() -> None:
    with running() as server, client(server, retry=fast_retry(max_attempts=1)) as palette:
        admin(server, "POST", "faults", {"path": "edgehosts", "error_next": 1})
        with pytest.raises(ServerError):
            palette.search_edge_hosts()
        admin(server, "POST", "faults", {"path": "edgehosts", "error_rate": 1.0})
        admin(server, "DELETE", "faults")
        assert len(palette.search_edge_hosts()) == 9


def test_non_string_error_code_is_tolerated() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(405, json={"code": 405, "message": "method GET is not allowed, but [POST] are"})

    with (
        PaletteClient("http://palette.test", KEY, transport=httpx.MockTransport(handler)) as palette,
        pytest.raises(ClientError) as caught,
    ):
        palette.get_cloud_config("x")
    assert caught.value.code == "405" and caught.value.status == 405
    assert "not allowed" in str(caught.value)


def test_a_slow_answer_cannot_outlive_the_total_budget() -> None:
    retry = fast_retry(max_attempts=5, total_timeout=0.3)
    with silent_palette(timeout=600.0, retry=retry) as palette:
        started = time.monotonic()
        with pytest.raises(TransportError):
            palette.search_edge_hosts()
        # Cut at the 0.3 s budget; without it the first attempt alone would wait its 600 s timeout.
        assert time.monotonic() - started < 60  # a hang bound, however slow the machine
