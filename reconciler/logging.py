"""Structured logs (structlog): JSON lines for machines, readable lines for people, never a secret.

Every line carries an ISO-8601 UTC timestamp, the level, and whatever context is bound: the controller
binds the revision of the pass (:func:`bind_pass`) and the resource a line is about
(:func:`bind_resource`), so a reader can follow one revision or one platform through the log.

Redaction is a processor that runs on every event before it is rendered, including the text of
formatted exceptions and records that come from the standard ``logging`` module (uvicorn, GitPython):
values under secret-sounding keys and every occurrence of a registered secret become ``***``.
"""

from __future__ import annotations

import contextvars
import logging as stdlib_logging
import re
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Final, ParamSpec, TextIO, TypeVar, cast

import structlog
from structlog.typing import EventDict, FilteringBoundLogger, Processor, WrappedLogger

__all__ = [
    "REDACTED",
    "bind_pass",
    "bind_resource",
    "configure_logging",
    "get_logger",
    "pass_context",
    "redact",
    "register_secret",
    "resource_context",
    "unbind_pass",
    "with_log_context",
]

_P = ParamSpec("_P")
_R = TypeVar("_R")

REDACTED: Final = "***"

_LEVELS: Final[Mapping[str, int]] = {
    "debug": stdlib_logging.DEBUG,
    "info": stdlib_logging.INFO,
    "warning": stdlib_logging.WARNING,
    "warn": stdlib_logging.WARNING,
    "error": stdlib_logging.ERROR,
    "critical": stdlib_logging.CRITICAL,
}

# Compared against the key with case, "-" and "_" removed, as substrings: "X-Api-Key", "apiKey",
# "access_token" and "webhook_secret" all match. Over-redacting a harmless value is the cheap mistake.
_SECRET_KEY_PARTS: Final = (
    "apikey",
    "token",
    "secret",
    "password",
    "passwd",
    "authorization",
    "credential",
    "cookie",
    "privatekey",
    "signature",
)
_KEY_NORMALISER: Final = re.compile(r"[-_\s]")

# Secrets shorter than this are redacted where they are a whole value but not inside longer text: a
# two-letter test secret would otherwise blank out every word containing it. Real keys are far longer.
_MIN_SUBSTRING_SECRET: Final = 6

_secrets_lock = threading.Lock()
_secrets: set[str] = set()
_secrets_pattern: re.Pattern[str] | None = None


def register_secret(value: str | bytes | None) -> None:
    """Redact ``value`` from all log output from now on: as a whole value, and inside any text.

    Call it as soon as a secret is read (the Palette API key, the webhook secret). Empty values are
    ignored: they would match everywhere and there is nothing to hide.
    """
    global _secrets_pattern
    if value is None:
        return
    text = value.decode("utf-8", errors="replace") if isinstance(value, bytes) else value
    if not text:
        return
    with _secrets_lock:
        if text in _secrets:
            return
        _secrets.add(text)
        # Longest first, so that a secret containing another one is replaced whole.
        ordered = sorted((s for s in _secrets if len(s) >= _MIN_SUBSTRING_SECRET), key=len, reverse=True)
        whole = sorted((s for s in _secrets if len(s) < _MIN_SUBSTRING_SECRET), key=len, reverse=True)
        alternatives = [re.escape(s) for s in ordered] + [rf"\A{re.escape(s)}\Z" for s in whole]
        _secrets_pattern = re.compile("|".join(alternatives))


def _forget_secrets() -> None:
    """Drop all registered secrets (for tests that need a clean slate)."""
    global _secrets_pattern
    with _secrets_lock:
        _secrets.clear()
        _secrets_pattern = None


def _is_secret_key(key: object) -> bool:
    if not isinstance(key, str):
        return False
    normalised = _KEY_NORMALISER.sub("", key).lower()
    return any(part in normalised for part in _SECRET_KEY_PARTS)


def _scrub_text(text: str, pattern: re.Pattern[str] | None) -> str:
    return text if pattern is None else pattern.sub(REDACTED, text)


def _scrub(value: object, pattern: re.Pattern[str] | None) -> object:
    """Redact one value, recursing into containers; other objects become their (scrubbed) text."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return _scrub_text(value, pattern)
    if isinstance(value, bytes):
        return _scrub_text(value.decode("utf-8", errors="replace"), pattern)
    if isinstance(value, Mapping):
        # Keys become text too: JSON has no tuple keys, and a secret can hide in a key as well as a value.
        return {
            _scrub_text(str(k), pattern): REDACTED if _is_secret_key(k) else _scrub(v, pattern)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple | set | frozenset):
        return [_scrub(v, pattern) for v in value]
    if isinstance(value, BaseException):
        return _scrub_text(f"{type(value).__name__}: {value}", pattern)
    # Any other object would be rendered later through str()/repr(), out of the redactor's sight.
    return _scrub_text(str(value), pattern)


# Bookkeeping keys of structlog's stdlib bridge: objects it still needs, never rendered.
_PASSTHROUGH_KEYS: Final = frozenset({"_record", "_from_structlog"})


def redact(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """structlog processor: replace secrets anywhere in the event dict by ``***``."""
    pattern = _secrets_pattern
    redacted: EventDict = {}
    for key, value in event_dict.items():
        if key in _PASSTHROUGH_KEYS:
            redacted[key] = value
        elif _is_secret_key(key):
            redacted[key] = REDACTED
        else:
            redacted[key] = _scrub(value, pattern)
    return redacted


def _drop_color_message(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """uvicorn adds a duplicate of its message with terminal colour codes; keep the plain one only."""
    event_dict.pop("color_message", None)
    return event_dict


_LEADING_KEYS: Final = ("timestamp", "level", "event")


def _leading_keys_first(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """Put timestamp, level and message first in JSON lines, where people scanning raw logs look."""
    ordered: EventDict = {key: event_dict[key] for key in _LEADING_KEYS if key in event_dict}
    ordered.update(event_dict)
    return ordered


class _StderrProxy:
    """Writes to whatever ``sys.stderr`` is at the time of writing (pytest swaps it per test)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return sys.stderr.isatty()


class _LockedWriter:
    """Serialises whole lines from several threads (the server thread, the controller, workers)."""

    def __init__(self, stream: TextIO | _StderrProxy) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def msg(self, message: str) -> None:
        with self._lock:
            self._stream.write(message + "\n")
            self._stream.flush()

    log = debug = info = warn = warning = error = critical = exception = fatal = msg


class _WriterHandler(stdlib_logging.Handler):
    """Hands standard-library records to the same locked writer, so lines of both never interleave."""

    def __init__(self, writer: _LockedWriter) -> None:
        super().__init__()
        self._writer = writer

    def emit(self, record: stdlib_logging.LogRecord) -> None:
        try:
            self._writer.msg(self.format(record))
        except Exception:
            self.handleError(record)


class _WriterFactory:
    def __init__(self, writer: _LockedWriter) -> None:
        self._writer = writer

    def __call__(self, *_args: Any) -> _LockedWriter:
        return self._writer


_HANDLER_MARK: Final = "_reconciler_handler"


def configure_logging(level: str = "info", *, json: bool | None = None, stream: TextIO | None = None) -> None:
    """Set up structlog and route the standard ``logging`` module through the same pipeline.

    ``json=None`` picks JSON lines unless ``stream`` (default: standard error, so that standard output
    stays free for command output such as ``plan --format json``) is a terminal. Safe to call again: the
    last call wins.
    """
    try:
        threshold = _LEVELS[level.lower()]
    except KeyError:
        raise ValueError(f"unknown log level {level!r}; expected one of {', '.join(_LEVELS)}") from None
    target: TextIO | _StderrProxy = _StderrProxy() if stream is None else stream
    isatty = getattr(target, "isatty", None)
    on_terminal = callable(isatty) and bool(isatty())
    if json is None:
        json = not on_terminal

    # Exceptions are turned into plain text (no local variables) before redaction, so that neither
    # their messages nor the renderer's pretty tracebacks can carry a secret past it.
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
        structlog.processors.format_exc_info,
        _drop_color_message,
        redact,
    ]
    renderer: Processor
    if json:
        json_renderer = structlog.processors.JSONRenderer()

        def renderer(logger: WrappedLogger, method: str, event_dict: EventDict) -> str:
            return cast(str, json_renderer(logger, method, _leading_keys_first(logger, method, event_dict)))

    else:
        renderer = structlog.dev.ConsoleRenderer(
            colors=on_terminal, exception_formatter=structlog.dev.plain_traceback
        )

    writer = _LockedWriter(target)
    structlog.configure(
        processors=[*shared, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(threshold),
        logger_factory=_WriterFactory(writer),
        cache_logger_on_first_use=False,
    )

    handler = _WriterHandler(writer)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        )
    )
    setattr(handler, _HANDLER_MARK, True)
    root = stdlib_logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _HANDLER_MARK, False)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(threshold)
    # Libraries are chatty at INFO (uvicorn's startup banner, GitPython's commands); they speak up on
    # problems only, unless the operator asks for debug.
    library_level = threshold if threshold <= stdlib_logging.DEBUG else max(threshold, stdlib_logging.WARNING)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "git", "httpx", "httpcore", "watchfiles"):
        stdlib_logging.getLogger(name).setLevel(library_level)


def get_logger(**bind: Any) -> FilteringBoundLogger:
    """A logger with ``bind`` attached to every line.

    It is a lazy proxy that follows the latest :func:`configure_logging`, so module-level loggers are
    fine; but binding more on it (``.bind(...)``) fixes the configuration of that moment, so bind per
    pass or per call, or use the context helpers below.
    """
    return cast(FilteringBoundLogger, structlog.get_logger(**bind))


def bind_pass(revision: str | None) -> None:
    """Attach ``revision`` to every following line of this thread/task (until :func:`unbind_pass`)."""
    structlog.contextvars.bind_contextvars(revision=revision)


def unbind_pass() -> None:
    """Forget the pass context set by :func:`bind_pass` and any resource bound with it."""
    structlog.contextvars.unbind_contextvars("revision", "kind", "namespace", "name")


def bind_resource(namespace: str, name: str, kind: str | None = None) -> None:
    """Attach the resource a run of lines is about (kind is optional: most lines are about MLPlatforms)."""
    values: dict[str, Any] = {"namespace": namespace, "name": name}
    if kind is not None:
        values["kind"] = kind
    structlog.contextvars.bind_contextvars(**values)


@contextmanager
def pass_context(revision: str | None) -> Iterator[None]:
    """Bind ``revision`` for the lines logged inside the block, restoring the previous context after."""
    with structlog.contextvars.bound_contextvars(revision=revision):
        yield


@contextmanager
def resource_context(namespace: str, name: str, kind: str | None = None) -> Iterator[None]:
    """Bind the resource for the lines logged inside the block, restoring the previous context after."""
    values: dict[str, Any] = {"namespace": namespace, "name": name}
    if kind is not None:
        values["kind"] = kind
    with structlog.contextvars.bound_contextvars(**values):
        yield


def with_log_context(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """Wrap ``fn`` so that it logs with the caller's bound context (revision, resource) in any thread.

    Context variables do not follow work into a ``ThreadPoolExecutor``: without this, lines logged by
    worker threads lose the revision of the pass. Each call runs in its own copy of the context captured
    here, so concurrent calls neither clash nor see each other's bindings.
    """
    captured = contextvars.copy_context()

    def run(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        return captured.copy().run(fn, *args, **kwargs)

    return run


# Redaction must be in place before the first line anyone logs, even in code paths (tests, library use)
# that never call configure_logging(); structlog's own default has no redactor and writes to stdout.
if not structlog.is_configured():
    configure_logging()
