"""Fault injection: 5xx rates, 429 bursts, latency and dropped connections, per path pattern.

Rules are matched in order against the request path (``re.search``) and, optionally, the method. Rates
draw from one seeded RNG, so a test with a seed sees the same faults every run; the ``*_next`` counters
("the next N matching requests") are fully deterministic.
"""

from __future__ import annotations

import json
import random
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from reconciler.emulator.errors import ApiError


@dataclass
class FaultRule:
    """One rule. Probabilities are in [0, 1]; ``latency`` is in seconds."""

    path: str = ".*"
    methods: tuple[str, ...] = ()
    error_rate: float = 0.0
    error_next: int = 0
    error_status: int = 500
    burst_429: int = 0
    retry_after: float | None = None
    latency: float = 0.0
    drop_rate: float = 0.0
    drop_next: int = 0
    # Odd answers (served with 200): "empty" lists nothing; "drop-one" leaves out the first item of
    # each page; "drop-refs", "string-refs" and "null-gpu-count" spoil a share (``corrupt_share``) of
    # the items of a search answer.
    corrupt: str = ""
    corrupt_next: int = 0
    corrupt_share: float = 0.3
    # Lost answers: the next N matching requests are carried out, then answered ``error_status`` (a
    # 503 after Palette acted, or an answer the client gave up on: it never learns what happened).
    lost_next: int = 0
    # Late delivery: the next N matching requests are answered ``error_status`` at once (the client
    # gave up) and carried out ``late_by`` seconds later on the emulator's clock (at the first request
    # after that), as a request stuck in a proxy would be.
    late_next: int = 0
    late_by: float = 0.0
    _pattern: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            self._pattern = re.compile(self.path)
        except re.error as exc:
            raise ValueError(f"fault path {self.path!r} is not a regular expression: {exc}") from None
        self.methods = tuple(m.upper() for m in self.methods)
        if self.corrupt not in CORRUPTIONS:
            raise ValueError(f"corrupt must be one of {', '.join(sorted(c for c in CORRUPTIONS if c))}")
        for name in ("error_rate", "drop_rate", "corrupt_share"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1")
        if not 500 <= self.error_status <= 599:
            raise ValueError("error_status must be a 5xx status")
        counts = (self.error_next, self.burst_429, self.drop_next, self.corrupt_next, self.lost_next)
        if min(*counts, self.late_next) < 0 or min(self.latency, self.late_by) < 0:
            raise ValueError("counts and latency must not be negative")

    @classmethod
    def from_json(cls, data: Any) -> FaultRule:
        if not isinstance(data, Mapping):
            raise ValueError("a fault rule is a JSON object")
        known = {f for f in cls.__dataclass_fields__ if not f.startswith("_")}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown fault fields: {', '.join(sorted(unknown))}")
        values = dict(data)
        if "methods" in values:
            values["methods"] = tuple(values["methods"] or ())
        try:
            return cls(**values)
        except TypeError as exc:
            raise ValueError(str(exc)) from None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("_pattern", None)
        data["methods"] = list(self.methods)
        return data

    def applies(self, method: str, path: str) -> bool:
        return (not self.methods or method.upper() in self.methods) and bool(self._pattern.search(path))


@dataclass(frozen=True)
class Decision:
    """What to do with one request: wait ``latency``, then drop it, answer an error, or serve it."""

    latency: float = 0.0
    drop: bool = False
    status: int = 0
    retry_after: float | None = None
    corrupt: str = ""
    share: float = 0.0
    seed: int = 0
    lost: int = 0  # carry the request out, then answer this status instead of Palette's answer
    late_by: float | None = None  # answer ``lost`` now, carry the request out this much later


def parse_rules(text: str | None) -> list[FaultRule]:
    """Rules from the ``--faults`` JSON: one rule object or a list of them."""
    if not text:
        return []
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--faults is not valid JSON: {exc}") from None
    items = data if isinstance(data, list) else [data]
    return [FaultRule.from_json(item) for item in items]


class Faults:
    """The active rules and the seeded RNG they draw from."""

    def __init__(self, rules: Iterable[FaultRule] = (), seed: int = 0) -> None:
        self._lock = threading.Lock()
        self._rules = list(rules)
        self._rng = random.Random(seed)

    def add(self, rules: Iterable[FaultRule]) -> None:
        with self._lock:
            self._rules.extend(rules)

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def reseed(self, seed: int) -> None:
        with self._lock:
            self._rng = random.Random(seed)

    def rules(self) -> list[dict[str, Any]]:
        with self._lock:
            return [r.to_json() for r in self._rules]

    def decide(self, method: str, path: str) -> Decision:
        latency = 0.0
        with self._lock:
            for rule in self._rules:
                if not rule.applies(method, path):
                    continue
                latency += rule.latency
                if rule.drop_next > 0:
                    rule.drop_next -= 1
                    return Decision(latency, drop=True)
                if rule.drop_rate and self._rng.random() < rule.drop_rate:
                    return Decision(latency, drop=True)
                if rule.burst_429 > 0:
                    rule.burst_429 -= 1
                    return Decision(latency, status=429, retry_after=rule.retry_after)
                if rule.error_next > 0:
                    rule.error_next -= 1
                    return Decision(latency, status=rule.error_status)
                if rule.error_rate and self._rng.random() < rule.error_rate:
                    return Decision(latency, status=rule.error_status)
                if rule.lost_next > 0:
                    rule.lost_next -= 1
                    return Decision(latency, lost=rule.error_status)
                if rule.late_next > 0:
                    rule.late_next -= 1
                    return Decision(latency, lost=rule.error_status, late_by=rule.late_by)
                if rule.corrupt and rule.corrupt_next > 0:
                    rule.corrupt_next -= 1
                    seed = self._rng.randrange(2**32)
                    return Decision(latency, corrupt=rule.corrupt, share=rule.corrupt_share, seed=seed)
        return Decision(latency)


CORRUPTIONS = frozenset({"", "empty", "drop-one", "drop-refs", "string-refs", "null-gpu-count"})


def corrupt_answer(body: bytes, decision: Decision) -> bytes:
    """A search answer spoiled as ``decision`` says (the items as JSON; anything else is left alone)."""
    try:
        doc = json.loads(body)
    except ValueError:
        return body
    items = doc.get("items") if isinstance(doc, dict) else None
    if not isinstance(items, list):
        return body
    if decision.corrupt == "empty":
        doc["items"] = []
        meta = doc.get("listmeta")
        if isinstance(meta, dict):
            meta.update({"count": 0, "continue": ""})
        return json.dumps(doc).encode()
    if decision.corrupt == "drop-one":  # consistent with itself: the count says one fewer too
        doc["items"] = items[1:]
        meta = doc.get("listmeta")
        if isinstance(meta, dict) and isinstance(meta.get("count"), int) and items:
            meta["count"] -= 1
        return json.dumps(doc).encode()
    rng = random.Random(decision.seed)
    for item in items:
        if isinstance(item, dict) and rng.random() < decision.share:
            _spoil(item, decision.corrupt)
    return json.dumps(doc).encode()


def _spoil(item: dict[str, Any], how: str) -> None:
    status = item.get("status")
    if how == "drop-refs" and isinstance(status, dict):
        status.pop("inUseClustersRef", None)
    elif how == "string-refs" and isinstance(status, dict) and status.get("inUseClustersRef"):
        status["inUseClustersRef"] = "spoiled"
    elif how == "null-gpu-count":
        gpus = ((item.get("spec") or {}).get("device") or {}).get("gpus")
        for gpu in gpus if isinstance(gpus, list) else []:
            if isinstance(gpu, dict):
                gpu["gpuCount"] = None


def fault_error(decision: Decision, method: str, path: str) -> ApiError:
    if decision.status == 429:
        return ApiError(429, "TooManyRequests", f"Too Many Requests, [{method}] {path}")
    return ApiError(decision.status, "InternalError", "injected server error")
