"""Rendering results: a rich table on a terminal, NDJSON when piped, JSON on request.

Every record has the same keys in every format; `--fields` picks them. Zero records print
nothing (or `[]` as JSON). Tables shorten long values and show timestamps as relative times.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Sequence
from typing import Any

from .errors import output_lost

FORMATS = ("table", "json", "ndjson")
TIME_FIELDS = {"created_at", "updated_at", "expires_at", "timestamp", "archived_at"}
CELL_WIDTH = 60


def resolve_format(fmt: str | None) -> str:
    """The output format: --format, else MEM_FORMAT, else table on a terminal and NDJSON otherwise."""
    from .errors import invalid_input, usage_error

    if fmt is not None and fmt not in FORMATS:
        usage_error(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    env = os.environ.get("MEM_FORMAT")
    if fmt is None and env and env not in FORMATS:
        invalid_input(f"MEM_FORMAT must be one of {', '.join(FORMATS)}, not {env!r}")
    return fmt or env or ("table" if sys.stdout.isatty() else "ndjson")


def pick(records: Sequence[dict[str, Any]], fields: Sequence[str] | None) -> list[dict[str, Any]]:
    if not fields:
        return list(records)
    return [{f: r.get(f) for f in fields} for r in records]


def emit(
    records: Sequence[dict[str, Any]],
    fmt: str | None = None,
    fields: Sequence[str] | None = None,
    columns: Sequence[str] | None = None,
) -> None:
    """Print records; `columns` are the table's default columns (all keys if None)."""
    fmt = resolve_format(fmt)
    rows = pick(records, fields)
    if fmt == "table":
        _table(rows, list(fields or columns or _keys(rows)))
    else:
        _json(rows, fmt)


def emit_one(record: dict[str, Any], fmt: str | None = None, fields: Sequence[str] | None = None) -> None:
    """Print a single record: an object as JSON, a line as NDJSON, two columns as a table."""
    fmt = resolve_format(fmt)
    row = pick([record], fields)[0]
    if fmt == "table":
        pairs = [{"field": k, "value": v} for k, v in row.items()]
        _table(pairs, ["field", "value"], header=False)
    elif fmt == "json":
        _write(_dumps(row, indent=True))
    else:
        _write(_dumps(row))


def show(
    result: Any, fmt: str | None = None, fields: Sequence[str] | None = None, columns: Sequence[str] | None = None
) -> None:
    """Print a list of records, a single record, or a plain value."""
    if isinstance(result, list) and all(isinstance(r, dict) for r in result):
        emit(result, fmt, fields, columns)
    elif isinstance(result, dict):
        emit_one(result, fmt, fields)
    else:
        _write(_dumps(result) if resolve_format(fmt) != "table" or not isinstance(result, str) else result)


def _keys(rows: Sequence[dict[str, Any]]) -> list[str]:
    keys: dict[str, None] = {}
    for row in rows:
        keys.update(dict.fromkeys(row))
    return list(keys)


def _dumps(value: Any, indent: bool = False) -> str:
    import orjson

    option = orjson.OPT_INDENT_2 if indent else 0
    return orjson.dumps(value, option=option | orjson.OPT_NON_STR_KEYS).decode()


def _write(text: str) -> None:
    """`text` and a newline on stdout. To a real descriptor it goes by `os.write` until all is
    written: a pipe's reader that leaves mid-way (`| head -c 10`) then ends the command with 141,
    as it does mid-NDJSON, whereas CPython's buffered write of a large text that the pipe takes
    only in part returns without an error, the rest lost."""
    text += "\n"
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # a test's capture: no descriptor
        fd = None
    try:
        if fd is None:
            sys.stdout.write(text)
            return
        sys.stdout.flush()  # what was printed before goes first
        view = memoryview(text.encode(sys.stdout.encoding or "utf-8", sys.stdout.errors or "strict"))
        while view:
            view = view[os.write(fd, view) :]
    except BrokenPipeError:
        raise  # the reader left: 141, quietly (`main.py`)
    except OSError as exc:
        raise output_lost(exc) from None


def _json(rows: list[dict[str, Any]], fmt: str) -> None:
    if fmt == "json":
        _write(_dumps(rows, indent=True))
    else:
        for row in rows:
            _write(_dumps(row))


def _table(rows: list[dict[str, Any]], columns: list[str], header: bool = True) -> None:
    if not rows:
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(show_header=header, header_style="bold", box=None, pad_edge=False)
    for col in columns:
        table.add_column(Text(printable(col)), overflow="fold")
    for row in rows:  # Text, not str: "[red]" in a stored value is text, not rich markup
        table.add_row(*(Text(cell(col, row.get(col), row)) for col in columns))
    console = Console()
    with console.capture() as captured:  # written as any output is (`_write`)
        console.print(table)
    _write(captured.get().removesuffix("\n"))


def cell(column: str, value: Any, row: dict[str, Any] | None = None) -> str:
    """A value as a table shows it."""
    if value is None:
        return ""
    if column in TIME_FIELDS or (column == "value" and row and row.get("field") in TIME_FIELDS):
        ts = _timestamp(value)
        if ts is not None:
            return relative_time(ts)
    if isinstance(value, float):
        return f"{value:.3f}"
    text = value if isinstance(value, str) else _dumps(value)
    text = printable(" ".join(text.split()))
    return text if len(text) <= CELL_WIDTH else text[: CELL_WIDTH - 1] + "…"


# C0 and C1 control characters and DEL: an escape sequence in a stored value would act on the
# terminal (clear it, retitle the window, hide rows) when a table shows it
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """`text` with every control character written as its JSON escape (ESC as `\\u001b`)."""
    return _CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _timestamp(value: Any) -> float | None:
    """Unix seconds of a time value: a number, or an ISO 8601 string."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    from a2e_mem.ops.filters import parse_time

    return parse_time(value)


def relative_time(ts: float, now: float | None = None) -> str:
    delta = (now or time.time()) - ts
    future = delta < 0
    delta = abs(delta)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if delta >= size:
            amount = f"{int(delta // size)}{unit}"
            break
    else:
        amount = f"{int(delta)}s"
    return f"in {amount}" if future else f"{amount} ago"


def note(message: str) -> None:
    """An informational line on stderr (suppressed by --quiet)."""
    from .context import state

    if not state.quiet:
        sys.stderr.write(message + "\n")
