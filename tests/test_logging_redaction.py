"""Structured logging: JSON off a terminal, readable on one, context on every line, secrets never."""

from __future__ import annotations

import io
import json
import logging
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import structlog
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler import logging as rlog
from reconciler.logging import (
    bind_pass,
    bind_resource,
    configure_logging,
    get_logger,
    pass_context,
    register_secret,
    resource_context,
    unbind_pass,
    with_log_context,
)

API_KEY = "pk-4f9d0c1e8b7a6d5c4b3a29180706f5e4"


class TerminalStream(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def clean_logging() -> Iterator[None]:
    """Each test starts with no registered secret and no bound context, and leaves defaults behind."""
    rlog._forget_secrets()
    structlog.contextvars.clear_contextvars()
    yield
    rlog._forget_secrets()
    structlog.contextvars.clear_contextvars()
    configure_logging()


def json_lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line]


def test_json_lines_when_the_stream_is_not_a_terminal() -> None:
    stream = io.StringIO()
    configure_logging(stream=stream)
    get_logger(component="test").info("pass finished", created=2)
    [line] = json_lines(stream)
    assert line["event"] == "pass finished"
    assert line["level"] == "info"
    assert line["component"] == "test"
    assert line["created"] == 2
    assert list(line)[:3] == ["timestamp", "level", "event"]


def test_timestamps_are_iso_utc() -> None:
    stream = io.StringIO()
    configure_logging(stream=stream)
    get_logger().info("tick")
    [line] = json_lines(stream)
    assert line["timestamp"].endswith("Z")
    parsed = datetime.fromisoformat(line["timestamp"].replace("Z", "+00:00"))
    assert parsed.utcoffset() == timedelta(0)


def test_readable_console_lines_on_a_terminal() -> None:
    stream = TerminalStream()
    configure_logging(stream=stream)
    get_logger().info("pass finished", revision="abc123")
    text = stream.getvalue()
    assert "pass finished" in text
    assert "revision" in text and "abc123" in text
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)


def test_json_can_be_forced_on_a_terminal() -> None:
    stream = TerminalStream()
    configure_logging(stream=stream, json=True)
    get_logger().info("forced")
    assert json_lines(stream)[0]["event"] == "forced"


def test_level_filters_lower_lines() -> None:
    stream = io.StringIO()
    configure_logging("warning", stream=stream)
    log = get_logger()
    log.info("quiet")
    log.warning("loud")
    assert [line["event"] for line in json_lines(stream)] == ["loud"]


def test_unknown_level_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown log level"):
        configure_logging("chatty", stream=io.StringIO())


def test_module_level_loggers_follow_a_later_configuration() -> None:
    early = get_logger(component="early")
    stream = io.StringIO()
    configure_logging(stream=stream)
    early.info("after")
    assert json_lines(stream)[0]["component"] == "early"


def test_pass_and_resource_context_name_every_line() -> None:
    stream = io.StringIO()
    configure_logging(stream=stream)
    log = get_logger()
    with pass_context("c0ffee"):
        log.info("pass started")
        with resource_context("project-a", "clearml-prod", kind="MLPlatform"):
            log.info("cluster created")
        log.info("pass finished")
    log.info("idle")
    lines = json_lines(stream)
    assert [line.get("revision") for line in lines] == ["c0ffee", "c0ffee", "c0ffee", None]
    assert lines[1]["namespace"] == "project-a"
    assert lines[1]["name"] == "clearml-prod"
    assert lines[1]["kind"] == "MLPlatform"
    assert "namespace" not in lines[2]


def test_bind_pass_lasts_until_unbound() -> None:
    stream = io.StringIO()
    configure_logging(stream=stream)
    bind_pass("rev1")
    bind_resource("ns", "p1")
    get_logger().info("one")
    unbind_pass()
    get_logger().info("two")
    first, second = json_lines(stream)
    assert (first["revision"], first["namespace"], first["name"]) == ("rev1", "ns", "p1")
    assert "revision" not in second and "name" not in second


def test_context_does_not_leak_between_threads() -> None:
    stream = io.StringIO()
    configure_logging(stream=stream)
    bind_pass("main-thread")
    worker = threading.Thread(target=lambda: get_logger().info("from worker"))
    worker.start()
    worker.join()
    assert "revision" not in json_lines(stream)[0]


def test_worker_threads_log_with_the_callers_context_when_wrapped() -> None:
    stream = io.StringIO()
    configure_logging(stream=stream)
    log = get_logger()

    def work(name: str) -> str:
        with resource_context("project-a", name):
            log.info("applied")
        return name

    with pass_context("rev-42"), ThreadPoolExecutor(max_workers=4) as pool:
        done = list(pool.map(with_log_context(work), [f"p{i}" for i in range(8)]))
    assert done == [f"p{i}" for i in range(8)]
    lines = json_lines(stream)
    assert len(lines) == 8
    assert all(line["revision"] == "rev-42" for line in lines)
    assert sorted(line["name"] for line in lines) == done


def test_concurrent_lines_from_structlog_and_stdlib_never_interleave() -> None:
    stream = io.StringIO()
    configure_logging(stream=stream)
    log = get_logger()
    stdlib = logging.getLogger("reconciler.test")

    def chatter(worker: int) -> None:
        for i in range(200):
            log.info("structlog line", worker=worker, i=i, pad="x" * 200)
            stdlib.warning("stdlib line %d %d %s", worker, i, "y" * 200)

    threads = [threading.Thread(target=chatter, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    lines = json_lines(stream)
    assert len(lines) == 6 * 200 * 2


def test_registered_secret_never_appears_anywhere_in_json_output() -> None:
    stream = io.StringIO()
    configure_logging(stream=stream)
    register_secret(API_KEY)
    log = get_logger()
    log.info(f"calling Palette with {API_KEY}")
    log.info("headers", headers={"ProjectUid": "p1", "X-Custom": f"ApiKey {API_KEY}"})
    log.info("nested", detail=[{"deep": (API_KEY, 1)}], raw=API_KEY.encode(), path=Path(f"/tmp/{API_KEY}"))
    log.info("exception object", error=RuntimeError(f"401 for key {API_KEY}"))
    try:
        raise PermissionError(f"key {API_KEY} refused")
    except PermissionError:
        log.exception("request failed")
    output = stream.getvalue()
    assert API_KEY not in output
    assert output.count("***") >= 6
    assert len(json_lines(stream)) == 5


def test_registered_secret_never_appears_in_console_output() -> None:
    stream = TerminalStream()
    configure_logging(stream=stream)
    register_secret(API_KEY.encode())
    try:
        raise ConnectionError(f"reset while sending {API_KEY}")
    except ConnectionError:
        get_logger().exception("failed", key_hint=API_KEY[:4], value=API_KEY)
    output = stream.getvalue()
    assert API_KEY not in output
    assert "ConnectionError" in output


@pytest.mark.parametrize(
    "key",
    [
        "api_key",
        "apiKey",
        "ApiKey",
        "X-Api-Key",
        "token",
        "access_token",
        "secret",
        "password",
        "Authorization",
    ],
)
def test_secret_sounding_keys_are_redacted_even_unregistered(key: str) -> None:
    stream = io.StringIO()
    configure_logging(stream=stream)
    get_logger().info("with field", **{key: "plain-value-1234", "nested": {key: "plain-value-5678"}})
    output = stream.getvalue()
    assert "plain-value" not in output
    [line] = json_lines(stream)
    assert line[key] == "***"
    assert line["nested"][key] == "***"


def test_secret_used_as_a_mapping_key_and_odd_keys_are_rendered_safely() -> None:
    stream = io.StringIO()
    configure_logging(stream=stream)
    register_secret(API_KEY)
    get_logger().info("odd keys", by_key={API_KEY: 1, ("a", 1): 2, 3: 4})
    assert API_KEY not in stream.getvalue()
    [line] = json_lines(stream)
    assert line["by_key"] == {"***": 1, "('a', 1)": 2, "3": 4}


def test_short_secret_is_redacted_as_a_whole_value_without_blanking_words() -> None:
    stream = io.StringIO()
    configure_logging(stream=stream)
    register_secret("k")
    get_logger().info("webhook ok", value="k")
    [line] = json_lines(stream)
    assert line["event"] == "webhook ok"
    assert line["value"] == "***"


def test_empty_secret_is_ignored() -> None:
    stream = io.StringIO()
    configure_logging(stream=stream)
    register_secret("")
    register_secret(None)
    get_logger().info("nothing to hide")
    assert json_lines(stream)[0]["event"] == "nothing to hide"


def test_standard_library_records_go_through_the_same_pipeline() -> None:
    stream = io.StringIO()
    configure_logging(stream=stream)
    register_secret(API_KEY)
    logging.getLogger("reconciler.test").warning("stdlib says %s", API_KEY)
    try:
        raise ValueError(API_KEY)
    except ValueError:
        logging.getLogger("reconciler.test").exception("stdlib failure")
    output = stream.getvalue()
    assert API_KEY not in output
    first, second = json_lines(stream)
    assert first["event"] == "stdlib says ***"
    assert first["logger"] == "reconciler.test"
    assert first["level"] == "warning"
    assert "ValueError: ***" in second["exception"]


def test_reconfiguring_replaces_the_stdlib_handler_instead_of_adding_one() -> None:
    first, second = io.StringIO(), io.StringIO()
    configure_logging(stream=first)
    configure_logging(stream=second)
    logging.getLogger("reconciler.test").warning("once")
    assert first.getvalue() == ""
    assert len(json_lines(second)) == 1


_secret_text = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_./+=", min_size=12, max_size=40).map(
    lambda s: "Zq" + s
)
_payload = st.recursive(
    st.none() | st.integers() | st.sampled_from(["SECRET", "prefix SECRET suffix", "plain"]),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.sampled_from(["a", "b", "c"]), children)
    ),
    max_leaves=8,
)


def _plant(value: object, secret: str) -> object:
    if isinstance(value, str):
        return value.replace("SECRET", secret)
    if isinstance(value, list):
        return [_plant(v, secret) for v in value]
    if isinstance(value, dict):
        return {k: _plant(v, secret) for k, v in value.items()}
    return value


@settings(max_examples=60, deadline=None)
@given(secret=_secret_text, payload=_payload)
def test_property_a_registered_secret_never_reaches_the_output(secret: str, payload: object) -> None:
    rlog._forget_secrets()
    stream = io.StringIO()
    configure_logging(stream=stream)
    register_secret(secret)
    get_logger().info(f"message with {secret}", payload=_plant(payload, secret))
    assert secret not in stream.getvalue()
    json.loads(stream.getvalue())
