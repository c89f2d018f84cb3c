"""Filters for `list` operations: a small, documented subset of MongoDB's query language.

    {"status": "pending"}                       equality (on the object, then its metadata)
    {"settings.theme": "dark"}                  dotted paths into nested objects
    {"priority": {"$in": ["high", "urgent"]}}   $eq $ne $in $nin
    {"tags": {"$all": ["ui", "bug"]}}           every one of the values
    {"title": {"$contains": "report"}}          substring of a string, or element of a list
    {"version": {"$gte": 2}}                    $gt $gte $lt $lte on numbers or ISO 8601 dates
    {"due": {"$exists": true}}
    {"$or": [{...}, {...}]}, {"$and": [...]}    combinations

Every condition must hold. A field is looked up in the stored object first, then in the record's
metadata, then in the record itself (`created_at`, `updated_at`, ids).

Arrays behave as in MongoDB: a value matches an array field equal to it or holding it, so
`{"tags": "ui"}` matches `["ui", "bug"]`; `$ne` and `$nin` match arrays holding none of the
values; `$gt`-style operators match when some element compares true.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from ..errors import InvalidInput

MISSING = object()
Lookup = Callable[[str], Any]


OPERATORS = {"$eq", "$ne", "$in", "$nin", "$all", "$contains", "$gt", "$gte", "$lt", "$lte", "$exists"}


def validate(spec: Any) -> None:
    """Refuse a malformed filter before any record is read (so an empty list still says so)."""
    if spec is None:
        return
    if not isinstance(spec, Mapping):
        raise InvalidInput("filters must be a JSON object")
    for field, condition in spec.items():
        if field in ("$or", "$and"):
            for sub in _list_of_specs(condition, field):
                validate(sub)
        elif field.startswith("$"):
            raise InvalidInput(f"unknown filter operator {field!r}")
        elif isinstance(condition, Mapping) and condition and all(str(k).startswith("$") for k in condition):
            for op, arg in condition.items():
                if op not in OPERATORS:
                    raise InvalidInput(f"unknown filter operator {op!r}")
                if op in ("$in", "$nin", "$all") and not isinstance(arg, list):
                    raise InvalidInput(f"{op} takes a list")


def matches(lookup: Lookup, spec: Mapping[str, Any] | None) -> bool:
    """Whether the record behind `lookup(path)` satisfies every condition of `spec`."""
    if not spec:
        return True
    if not isinstance(spec, Mapping):
        raise InvalidInput("filters must be a JSON object")
    return all(_clause(lookup, field, condition) for field, condition in spec.items())


def _clause(lookup: Lookup, field: str, condition: Any) -> bool:
    if field == "$or":
        return any(matches(lookup, sub) for sub in _list_of_specs(condition, field))
    if field == "$and":
        return all(matches(lookup, sub) for sub in _list_of_specs(condition, field))
    if field.startswith("$"):
        raise InvalidInput(f"unknown filter operator {field!r}")
    value = lookup(field)
    if isinstance(condition, Mapping) and condition and all(str(k).startswith("$") for k in condition):
        return all(_operator(op, value, arg) for op, arg in condition.items())
    return value is not MISSING and _equals(value, condition)


def _equals(value: Any, arg: Any) -> bool:
    """MongoDB equality: the value itself, or (for an array field) one of its elements."""
    return value == arg or (isinstance(value, list) and arg in value)


def _list_of_specs(value: Any, op: str) -> list[Mapping[str, Any]]:
    if not isinstance(value, list):
        raise InvalidInput(f"{op} takes a list of filters")
    return value


def _operator(op: str, value: Any, arg: Any) -> bool:
    if op == "$exists":
        return (value is not MISSING) == bool(arg)
    if value is MISSING:
        return op in ("$ne", "$nin")
    if op == "$eq":
        return _equals(value, arg)
    if op == "$ne":
        return not _equals(value, arg)
    if op in ("$in", "$nin", "$all"):
        if not isinstance(arg, list):
            raise InvalidInput(f"{op} takes a list")
        if op == "$all":
            return bool(arg) and all(_equals(value, a) for a in arg)
        inside = any(_equals(value, a) for a in arg)
        return inside if op == "$in" else not inside
    if op == "$contains":
        if isinstance(value, str):
            return isinstance(arg, str) and arg.lower() in value.lower()
        return isinstance(value, list) and arg in value
    if op in COMPARE:
        elements = value if isinstance(value, list) else [value]
        return any(_compare(op, v, arg) for v in elements)
    raise InvalidInput(f"unknown filter operator {op!r}")


COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}


def _compare(op: str, value: Any, arg: Any) -> bool:
    """Numbers compare as numbers, ISO 8601 dates as instants; anything else does not match."""
    if is_number(value) and is_number(arg):
        return COMPARE[op](value, arg)
    left, right = parse_time(value), parse_time(arg)
    if left is None or right is None:
        return False
    return COMPARE[op](left, right)


def is_number(value: Any) -> bool:
    """A JSON number: an int or a float, not a bool (which Python counts as an int)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def parse_time(value: Any) -> float | None:
    """Unix seconds of an ISO 8601 string (naive ones are UTC), else None."""
    if not isinstance(value, str) or len(value) < 10:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        from datetime import timezone

        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.timestamp()


def path_lookup(*sources: Mapping[str, Any]) -> Lookup:
    """A lookup that tries each source in turn, following dotted paths."""

    def lookup(path: str) -> Any:
        for source in sources:
            value = _dig(source, path)
            if value is not MISSING:
                return value
        return MISSING

    return lookup


def _dig(source: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(source, Mapping) and part in source:
            source = source[part]
        else:
            return MISSING
    return source
