"""Rate limits: the token bucket (injected clock), the resync rule, the client's pacing and the emulator's
429s against each other on loopback."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.commands import emulator as emulator_command
from reconciler.palette.pacing import (
    DASHBOARD,
    OTHER,
    Limit,
    Pacer,
    RateLimits,
    TokenBucket,
    path_class,
    resync_interval,
)
from tests._palette_support import KEY, FakeClock, client, running

SEARCH = "/v1/dashboard/edgehosts/search"


def test_bucket_serves_the_burst_at_once_then_one_token_per_interval() -> None:
    clock = FakeClock(0.0)
    bucket = TokenBucket(Limit(rate=10.0, burst=5), clock)
    assert [bucket.reserve() for _ in range(5)] == [0.0] * 5
    waits = [bucket.reserve() for _ in range(3)]  # booked one after another: 0.1, 0.2, 0.3 s
    assert waits == pytest.approx([0.1, 0.2, 0.3])
    clock.advance(10.0)  # a long pause refills to the burst, never beyond it
    assert [bucket.reserve() for _ in range(5)] == [0.0] * 5
    assert bucket.reserve() == pytest.approx(0.1)


def test_try_take_refuses_when_empty_and_says_when_the_next_token_comes() -> None:
    clock = FakeClock(0.0)
    bucket = TokenBucket(Limit(rate=10.0, burst=2), clock)
    assert bucket.try_take() is None and bucket.try_take() is None
    assert bucket.try_take() == pytest.approx(0.1)
    clock.advance(0.05)
    assert bucket.try_take() == pytest.approx(0.05)
    assert bucket.try_take(tolerance=0.05) is None  # within the tolerance: served


def test_bucket_shared_by_threads_never_exceeds_its_rate() -> None:
    clock = FakeClock(0.0)
    bucket = TokenBucket(Limit(rate=10.0, burst=5), clock)
    waits: list[float] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(25):
            wait = bucket.reserve()
            with lock:
                waits.append(wait)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # 100 requests at t=0: 5 from the burst, then one every 0.1 s; every booking has its own slot.
    assert sorted(waits) == pytest.approx([0.0] * 5 + [0.1 * k for k in range(1, 96)])


def test_pacer_waits_only_on_the_limited_class_and_adds_up_the_wait() -> None:
    clock = FakeClock(0.0)
    slept: list[float] = []
    pacer = Pacer(RateLimits(dashboard=Limit(10.0, 1), other=None), clock=clock, sleep=slept.append)
    assert pacer.acquire(SEARCH) == 0.0
    assert pacer.acquire("/v1/spectroclusters/abc") == 0.0
    assert pacer.acquire(SEARCH) == pytest.approx(0.1)
    assert slept == pytest.approx([0.1]) and pacer.waited == pytest.approx({DASHBOARD: 0.1})


def test_path_classes_follow_palettes_prefixes() -> None:
    assert path_class("/v1/dashboard/edgehosts/search") == DASHBOARD
    assert path_class("/v1/dashboard/spectroclusters/search") == DASHBOARD
    assert path_class("/v1/spectroclusters/edge-native") == OTHER
    assert path_class("/v1/cloudconfigs/edge-native/x/machinePools") == OTHER
    assert path_class("/v1/dashboardish") == OTHER


def test_rate_limits_parse_palette_and_off_only() -> None:
    assert RateLimits.parse("palette") == RateLimits(Limit(10.0, 5), Limit(50.0, 5))
    assert RateLimits.parse("off") == RateLimits(None, None)
    with pytest.raises(ValueError, match="palette"):
        RateLimits.parse("fast")


def test_resync_interval_keeps_idle_passes_within_a_quarter_of_the_dashboard_budget() -> None:
    assert resync_interval(3, floor=30.0) == 30.0  # cheap passes: the configured resync
    assert resync_interval(200, floor=30.0) == 80.0  # 200 requests / (0.25 * 10/s)
    assert resync_interval(200, floor=30.0, limit=None) == 30.0  # no limits, no stretching


@given(
    requests=st.integers(min_value=0, max_value=100_000),
    floor=st.floats(min_value=1.0, max_value=3600.0),
    rate=st.floats(min_value=0.5, max_value=100.0),
)
def test_resync_interval_is_the_floor_or_just_enough(requests: int, floor: float, rate: float) -> None:
    interval = resync_interval(requests, floor=floor, limit=Limit(rate, 5))
    assert interval >= floor
    assert requests / interval <= 0.25 * rate + 1e-9
    if interval > floor:  # no longer than needed (up to the 0.1 s rounding)
        assert requests / (interval - 0.1) > 0.25 * rate - 1e-9


def test_paced_client_keeps_a_burst_under_the_emulators_limit_with_no_429() -> None:
    """The client's pacer and the emulator's buckets share one fake clock, moved only by the pacer's
    sleep: how long a request takes on a loaded machine cannot shift one against the other."""
    clock = FakeClock()
    pacer = Pacer(RateLimits.palette(), clock=clock, sleep=clock.advance)
    started = clock()
    with running(rate_limits=RateLimits.palette(), clock=clock) as server:
        with client(server, pacer=pacer) as palette:
            for _ in range(15):
                palette.search_edge_hosts()
            waited = palette.seconds_waited()
        assert server.stats.count(path=SEARCH, status=429) == 0
        assert server.stats.count(path=SEARCH, status=200) == 15
    # 5 from the burst, then 10 more at 10/s: the client waited a tenth of a second for each of them.
    assert waited == pytest.approx(1.0)
    assert clock() - started == pytest.approx(1.0)


def test_unpaced_burst_gets_429_too_many_requests_with_retry_after() -> None:
    clock = FakeClock()  # the emulator's clock stands still: no token comes back during the burst

    def post(key: str = KEY) -> httpx.Response:
        return httpx.post(server.url + SEARCH, json={}, headers={"ApiKey": key}, timeout=5)

    with running(rate_limits=RateLimits.palette(), clock=clock) as server:
        statuses = [post().status_code for _ in range(7)]
        refused = post()
        other_key = post("other")
        clock.advance(0.1)  # one token back
        again = [post().status_code for _ in range(2)]
    assert statuses == [200] * 5 + [429] * 2  # the burst of 5, then nothing
    body = refused.json()
    assert refused.status_code == 429 and body["code"] == "TooManyRequests"
    assert set(body) == {"code", "message", "details", "ref"}
    assert int(refused.headers["Retry-After"]) >= 1
    assert other_key.status_code == 401  # another key has its own bucket (and then fails auth)
    assert again == [200, 429]


def test_emulator_without_limits_serves_any_burst() -> None:
    with running(rate_limits=RateLimits.off()) as server:
        statuses = {
            httpx.post(server.url + SEARCH, json={}, headers={"ApiKey": KEY}, timeout=5).status_code
            for _ in range(30)
        }
    assert statuses == {200}


def test_emulator_command_refuses_unknown_rate_limits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inventory = tmp_path / "inventory.json"
    inventory.write_text('{"edgeHosts": []}')
    code = emulator_command.run(inventory, "127.0.0.1", 0, KEY, 1.0, 1.0, None, 0, "fast")
    assert code == 2
    assert "--rate-limits" in capsys.readouterr().err
