"""Reading JSON that a user or a client sent: orjson, except that an integer outside 64 bits is
refused instead of rounded.

orjson reads an integer that does not fit in 64 bits as a float, silently: the keys
18446744073709551617 and 18446744073709551618 would both become 1.8446744073709552e+19, and the
second write would replace the first. Such an integer takes at least 19 digits, so a text with a
run of 19 digits is read again by the standard library, which keeps integers exact, to look for
one (only texts holding such a run pay for the second read). The Python API and MCP clients,
whose values arrive parsed, meet the same refusal when the store encodes the value.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

LOWEST, HIGHEST = -(2**63), 2**64 - 1  # what orjson (and so the store) keeps exactly
_DIGITS_STR = re.compile(r"\d{19}")
_DIGITS_BYTES = re.compile(rb"\d{19}")


class IntegerTooLarge(orjson.JSONDecodeError):
    """A JSON integer outside 64 bits (a `JSONDecodeError`, so every caller refuses it as bad JSON)."""


def loads(text: bytes | bytearray | str) -> Any:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        if "UTF-8" in str(exc):
            _check_utf8(text)  # orjson says "surrogates not allowed" for any bad byte
        if "infinity" not in str(exc):
            raise
        # a number past a double's range (hundreds of digits, 1e400): valid JSON that no reader
        # keeps, refused as one (the CLI must not store the text as a string)
        raise IntegerTooLarge(f"a number too large to keep: {exc.msg}", exc.doc, exc.pos) from None
    digits = _DIGITS_STR if isinstance(text, str) else _DIGITS_BYTES
    if digits.search(text):  # type: ignore[arg-type]
        shown = text if isinstance(text, str) else bytes(text).decode("utf-8", "replace")
        outside = _first_outside(json.loads(text))  # (past 309 digits orjson refused it above)
        if outside is not None:
            raise IntegerTooLarge(
                f"the integer {outside} does not fit in 64 bits (write it as a string)", shown, shown.find(str(outside))
            )
    return value


def _check_utf8(text: bytes | bytearray | str) -> None:
    """A JSONDecodeError naming where `text` is not UTF-8, if it is not: a byte of bytes, or a
    character of a text read with surrogateescape (a byte that was not UTF-8)."""
    try:
        if isinstance(text, str):
            text.encode("utf-8")
        else:
            bytes(text).decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError) as exc:
        where = "character" if isinstance(text, str) else "byte"
        shown = text if isinstance(text, str) else bytes(text).decode("utf-8", "replace")
        raise orjson.JSONDecodeError(f"not valid UTF-8 ({where} {exc.start})", shown, exc.start) from None


def _first_outside(value: Any) -> int | None:
    """The first integer in `value` outside the 64-bit range, if any."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if not LOWEST <= value <= HIGHEST else None
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    for item in items:
        found = _first_outside(item)
        if found is not None:
            return found
    return None
