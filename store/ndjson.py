"""Reading NDJSON input: one JSON object per line, blank lines skipped, errors name the line."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from .errors import InvalidInput

# Deepest nesting a stored value may have: the store wraps values in a few levels of its own
# (record, journal line, export line) and its JSON encoder stops at 254.
MAX_DEPTH = 128


def check_depth(value: Any, what: str) -> None:
    """`InvalidInput` if `value` nests deeper than `MAX_DEPTH` (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        for child in children:
            if isinstance(child, (dict, list)):
                if depth >= MAX_DEPTH:
                    raise InvalidInput(f"{what} nests deeper than {MAX_DEPTH} levels")
                stack.append((child, depth + 1))


def objects(lines: Iterable[bytes | str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line; `InvalidInput` naming the first bad line."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise InvalidInput(f"line {number}: not JSON ({exc})") from None
        if not isinstance(value, dict):
            raise InvalidInput(f"line {number}: expected a JSON object")
        yield number, value
