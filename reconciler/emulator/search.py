"""Palette's search filters and paging, as the emulator understands them (NOTES.md 2.2, 2.3 and 6).

A filter is ``{conjunction, filterGroups: [{conjunction, filters: [item]}]}``; each item names a property
and a typed condition. String conditions take ``eq``/``contains``/``beginsWith``, ``negation``,
``ignoreCase`` and a match ``{conjunction: or|and, values}``. Multi-valued properties (tags) match when any
of their values matches. Date conditions (``v1SearchFilterDateCondition``) take ``eq``/``gt``/``gte``/
``lt``/``lte`` against each ``v1Time`` value, or ``range`` with two values ``[from, to]`` (inclusive: the
spec does not say; this is the emulator's choice). ``sort`` is a list of ``{field, order}`` applied in
order (a stable sort, so the default order breaks ties); an unknown field is a 422, as Palette answers
since 4.10. Paging uses ``limit`` (at most 50), an opaque ``continue`` token and ``offset``.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from reconciler.emulator.errors import ApiError

MAX_LIMIT = 50

# A property's values on one item: strings for string conditions, a bool for bool conditions.
Extractor = Callable[[Mapping[str, Any]], "list[str] | bool"]
Predicate = Callable[[Mapping[str, Any]], bool]
# A sort field's value on one item (a string, a number, or None: sorted last).
SortKey = Callable[[Mapping[str, Any]], Any]

_OPERATORS: dict[str, Callable[[str, str], bool]] = {
    "eq": lambda have, want: have == want,
    "contains": lambda have, want: want in have,
    "beginsWith": lambda have, want: have.startswith(want),
}


_DATE_OPERATORS: dict[str, Callable[[float, float], bool]] = {
    "eq": lambda have, want: have == want,
    "gt": lambda have, want: have > want,
    "gte": lambda have, want: have >= want,
    "lt": lambda have, want: have < want,
    "lte": lambda have, want: have <= want,
}


@functools.lru_cache(maxsize=262_144)
def parse_time(value: Any) -> float | None:
    """A ``v1Time`` (RFC 3339) as epoch seconds; None when absent or unreadable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def _bad(message: str) -> ApiError:
    return ApiError(400, "InvalidFilter", message)


def _combine(conjunction: Any, results: Sequence[bool]) -> bool:
    if conjunction in (None, "", "and"):
        return all(results)
    if conjunction == "or":
        return any(results)
    raise _bad(f"unknown conjunction {conjunction!r}")


def _string_matcher(condition: Mapping[str, Any]) -> Callable[[list[str]], bool]:
    operator = condition.get("operator") or "eq"
    if operator not in _OPERATORS:
        raise _bad(f"unknown string operator {operator!r}")
    compare = _OPERATORS[operator]
    ignore_case = bool(condition.get("ignoreCase"))
    negation = bool(condition.get("negation"))
    match = condition.get("match") or {}
    if not isinstance(match, Mapping):
        raise _bad("condition match must be an object")
    values = match.get("values") or []
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise _bad("condition match values must be a list of strings")
    conjunction = match.get("conjunction")
    _combine(conjunction, [])  # validate early
    wanted = [v.lower() for v in values] if ignore_case else list(values)

    def matches(have: list[str]) -> bool:
        if not wanted:
            return True
        items = [h.lower() for h in have] if ignore_case else have
        hit = _combine(conjunction, [any(compare(h, w) for h in items) for w in wanted])
        return hit != negation

    return matches


def _date_matcher(condition: Mapping[str, Any]) -> Callable[[list[str]], bool]:
    operator = condition.get("operator") or "eq"
    if operator != "range" and operator not in _DATE_OPERATORS:
        raise _bad(f"unknown date operator {operator!r}")
    negation = bool(condition.get("negation"))
    match = condition.get("match") or {}
    if not isinstance(match, Mapping) or not isinstance(match.get("values") or [], list):
        raise _bad("a date condition's match must be an object with a values list")
    wanted: list[float] = []
    for value in match.get("values") or []:
        moment = parse_time(value)
        if moment is None:
            raise _bad(f"date value {value!r} is not an RFC 3339 time")
        wanted.append(moment)
    conjunction = match.get("conjunction")
    _combine(conjunction, [])
    if operator == "range" and len(wanted) != 2:
        raise _bad("a date range needs two values: [from, to]")

    def one(have: float) -> bool:
        if operator == "range":
            return wanted[0] <= have <= wanted[1]
        compare = _DATE_OPERATORS[operator]
        return _combine(conjunction, [compare(have, w) for w in wanted])

    def matches(have: list[str]) -> bool:
        if not wanted:
            return True
        moments = [m for m in (parse_time(h) for h in have) if m is not None]
        return any(one(m) for m in moments) != negation

    return matches


def _item_predicate(item: Any, properties: Mapping[str, Extractor]) -> Predicate:
    if not isinstance(item, Mapping):
        raise _bad("a filter item must be an object")
    prop = item.get("property")
    if prop not in properties:
        raise _bad(f"unsupported filter property {prop!r}; supported: {', '.join(sorted(properties))}")
    extract = properties[str(prop)]
    condition = item.get("condition") or {}
    if not isinstance(condition, Mapping):
        raise _bad("a filter condition must be an object")
    if isinstance(condition.get("string"), Mapping):
        matcher = _string_matcher(condition["string"])

        def string_predicate(obj: Mapping[str, Any]) -> bool:
            have = extract(obj)
            values = [str(have).lower()] if isinstance(have, bool) else have
            return matcher(values)

        return string_predicate
    if isinstance(condition.get("date"), Mapping):
        dates = _date_matcher(condition["date"])

        def date_predicate(obj: Mapping[str, Any]) -> bool:
            have = extract(obj)
            return dates([] if isinstance(have, bool) else have)

        return date_predicate
    if isinstance(condition.get("bool"), Mapping):
        want = bool(condition["bool"].get("value"))

        def bool_predicate(obj: Mapping[str, Any]) -> bool:
            have = extract(obj)
            return (have if isinstance(have, bool) else bool(have)) == want

        return bool_predicate
    raise _bad(f"filter on {prop!r} needs a string, date or bool condition")


def compile_filter(body: Any, properties: Mapping[str, Extractor]) -> Predicate:
    """Turn a ``v1SearchFilterSummarySpec`` body into a predicate; raises ApiError 400 when malformed."""
    if body is None:
        return lambda _obj: True
    if not isinstance(body, Mapping):
        raise ApiError(400, "InvalidRequest", "the search body must be a JSON object")
    spec = body.get("filter") or {}
    if not isinstance(spec, Mapping):
        raise _bad("filter must be an object")
    groups = spec.get("filterGroups") or []
    if not isinstance(groups, list):
        raise _bad("filterGroups must be a list")
    outer = spec.get("conjunction")
    _combine(outer, [])
    compiled: list[tuple[Any, list[Predicate]]] = []
    for group in groups:
        if not isinstance(group, Mapping) or not isinstance(group.get("filters") or [], list):
            raise _bad("a filter group must be an object with a filters list")
        inner = group.get("conjunction")
        _combine(inner, [])
        compiled.append((inner, [_item_predicate(i, properties) for i in group.get("filters") or []]))

    def predicate(obj: Mapping[str, Any]) -> bool:
        return _combine(outer, [_combine(inner, [p(obj) for p in preds]) for inner, preds in compiled])

    return predicate


def sort_items(items: list[dict[str, Any]], body: Any, fields: Mapping[str, SortKey]) -> list[dict[str, Any]]:
    """``items`` ordered by the body's ``sort`` list (``[{field, order: asc|desc}]``), first field first."""
    spec = body.get("sort") if isinstance(body, Mapping) else None
    if not spec:
        return items
    if not isinstance(spec, list):
        raise ApiError(400, "InvalidRequest", "sort must be a list")
    keys: list[tuple[SortKey, bool]] = []
    for entry in spec:
        name = entry.get("field") if isinstance(entry, Mapping) else None
        if name not in fields:
            raise ApiError(
                422, "InvalidSortField", f"unsupported sort field {name!r}; supported: {', '.join(fields)}"
            )
        order = entry.get("order") or "asc"
        if order not in ("asc", "desc"):
            raise ApiError(400, "InvalidRequest", f"sort order is asc or desc, not {order!r}")
        keys.append((fields[str(name)], order == "desc"))
    ordered = list(items)
    for key, descending in reversed(keys):
        present = [i for i in ordered if key(i) is not None]
        absent = [i for i in ordered if key(i) is None]
        present.sort(key=key, reverse=descending)  # Python's sort is stable, also in reverse
        ordered = present + absent
    return ordered


def _encode_token(offset: int, count: int) -> str:
    raw = json.dumps({"offset": offset, "count": count, "token": ""}, separators=(",", ":"))
    return base64.b64encode(raw.encode()).decode()


def _decode_token(token: str) -> int:
    try:
        data = json.loads(base64.b64decode(token.encode(), validate=True))
        offset = int(data["offset"])
    except (binascii.Error, ValueError, KeyError, TypeError):
        raise ApiError(400, "InvalidContinueToken", "the continue token is not valid") from None
    if offset < 0:
        raise ApiError(400, "InvalidContinueToken", "the continue token is not valid")
    return offset


def parse_int(value: str | None, name: str) -> int | None:
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise ApiError(400, "InvalidRequest", f"query parameter {name} must be an integer") from None


def page(
    items: Sequence[dict[str, Any]], limit: str | None, token: str | None, offset: str | None
) -> dict[str, Any]:
    """One page of ``items`` with ``listmeta`` (always present; ``continue`` is "" on the last page)."""
    size = parse_int(limit, "limit") or MAX_LIMIT
    if size > MAX_LIMIT or size < 0:
        raise ApiError(400, "InvalidLimit", f"limit must be between 1 and {MAX_LIMIT}, got {size}")
    start = _decode_token(token) if token else (parse_int(offset, "offset") or 0)
    if start < 0:
        raise ApiError(400, "InvalidRequest", "offset must not be negative")
    chunk = list(items[start : start + size])
    end = start + len(chunk)
    next_token = _encode_token(end, len(items)) if end < len(items) else ""
    return {
        "items": chunk,
        "listmeta": {"continue": next_token, "count": len(items), "limit": size, "offset": end},
    }
