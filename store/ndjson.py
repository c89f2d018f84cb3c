"""Reading NDJSON input: one JSON object per line, blank lines skipped, errors name the line."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from . import jsontext
from .errors import InvalidInput


def objects(lines: Iterable[bytes | str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line; `InvalidInput` naming the first bad line."""
    for number, line in enumerate(lines, 1):
        line = without_bom(line)  # an editor saving "with signature" starts a file with one (concatenated: any line)
        if not line.strip():
            continue
        try:
            value = jsontext.loads(line)
        except orjson.JSONDecodeError as exc:
            raise InvalidInput(f"line {number}: not JSON ({exc})") from None
        if not isinstance(value, dict):
            raise InvalidInput(f"line {number}: expected a JSON object")
        yield number, value


def without_bom(line: bytes | str) -> bytes | str:
    """`line` without a leading UTF-8 byte order mark."""
    if isinstance(line, bytes):
        return line.removeprefix(b"\xef\xbb\xbf")
    return line.removeprefix("\ufeff")
