"""Options shared by many commands, and small parsers for their values."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

import typer

from .completion import complete_namespace, complete_session, completer
from .errors import invalid_input, usage_error

Namespace = Annotated[
    str,
    typer.Option(
        "--namespace", "-n", envvar="MEM_NAMESPACE", help="Namespace to work in.", autocompletion=complete_namespace
    ),
]
Agent = Annotated[str, typer.Option("--agent", "-a", envvar="MEM_AGENT", help="Agent identity (episodic scope).")]
SessionId = Annotated[
    str | None,
    typer.Option(
        "--session",
        "-s",
        envvar="MEM_SESSION",
        help="Session from `mem init` (overrides namespace/agent).",
        autocompletion=complete_session,
    ),
]
Filters = Annotated[str | None, typer.Option("--filter", help='Filter as JSON, e.g. \'{"status": "pending"}\'.')]
Metadata = Annotated[str | None, typer.Option("--metadata", "-m", help="Metadata as a JSON object.")]
Format = Annotated[
    str | None,
    typer.Option(
        "--format",
        "-f",
        autocompletion=completer("table", "json", "ndjson"),
        help="table, json or ndjson (default: table on a terminal, else ndjson).",
    ),
]
Fields = Annotated[str | None, typer.Option("--fields", help="Comma-separated fields to show.")]
Limit = Annotated[int, typer.Option("--limit", "-l", min=0, max=1000, help="At most this many results.")]
Offset = Annotated[int, typer.Option("--offset", min=0, help="Skip this many results first.")]
ListLimit = Annotated[int, typer.Option("--limit", "-l", min=0, max=1000, help="At most this many results.")]


def zero_to_one(value: float) -> float:
    """A relevance bound, 0 to 1 inclusive, as the store checks it; checked here (not by the
    option's range) so that NaN and the infinities get this message too, not a bound's."""
    if not 0.0 <= value <= 1.0:  # NaN fails the comparison too
        raise typer.BadParameter(f"must be a number from 0 to 1, not {value!r}")
    return value


def tier_name(value: str) -> str:
    """An A2E tier: a bad one is a bad option value (exit 2), as `--limit -1` is, rather than
    invalid input found by the store."""
    if value not in ("working", "episodic", "semantic"):
        raise typer.BadParameter(f"must be working, episodic or semantic, not {value!r}")
    return value


def tier_or_every(value: str) -> str:
    """A tier, or "" (the option left out) for every tier."""
    return value if value == "" else tier_name(value)


def ttl_seconds(value: int) -> int:
    """0 or more seconds, within the 64 bits a stored number may take."""
    if not 0 <= value < 1 << 63:
        raise typer.BadParameter(f"must be 0 to {(1 << 63) - 1} seconds, not {value}")
    return value


def optional_object(text: str | None, what: str) -> dict[str, Any] | None:
    return None if text is None else parse_json_object(text, what)


def fields_list(fields: str | None, known: Sequence[str], records: Sequence[dict[str, Any]] = ()) -> list[str] | None:
    """The fields `--fields` names, each one the command's records have: in `known` (every field the
    command can show, on a store without records too), or a key of a record shown (one an import
    brought with a field of its own). Another is a usage error listing them, not a column of nulls."""
    if not fields:
        return None
    names = field_names(fields)
    valid = dict.fromkeys([*known, *(name for record in records for name in record)])
    unknown = [name for name in names if name not in valid]
    if unknown:
        usage_error(f"--fields: unknown field {unknown[0]!r} (valid: {', '.join(valid)})")
    return names


def field_names(fields: str | None) -> list[str]:
    """The names a `--fields` value lists (none when it is not given)."""
    return [f.strip() for f in (fields or "").split(",") if f.strip()]


def parse_value(text: str, what: str) -> Any:
    """JSON when it parses, else the text itself; JSON nested too deep to store is refused."""
    import orjson

    from a2e_mem.jsontext import IntegerTooLarge, loads

    try:
        value = loads(text)
    except IntegerTooLarge as exc:  # JSON, but not kept exactly: never a silent float
        invalid_input(f"{what}: {exc}")
    except orjson.JSONDecodeError as exc:
        if "depth" in str(exc):  # JSON all right, but deeper than the parser goes
            invalid_input(f"{what} is nested too deeply: {exc}")
        return text
    return checked_depth(value, what)


def parse_json_object(text: str, what: str) -> dict[str, Any]:
    import orjson

    from a2e_mem.jsontext import loads

    try:
        value = loads(text)
    except orjson.JSONDecodeError as exc:
        invalid_input(f"{what} is not valid JSON: {exc}")
    if not isinstance(value, dict):
        invalid_input(f"{what} must be a JSON object")
    return checked_depth(value, what)


# Deepest nesting a JSON argument may have: well inside what the store keeps (its encoder stops
# at 254 levels, and a value sits a few levels down in a record, an event, a journal line).
MAX_DEPTH = 128


def checked_depth(value: Any, what: str) -> Any:
    """`value`, if it nests no deeper than `MAX_DEPTH` (else exit 4 naming `what`); walked
    without recursion, as the value can be 1024 levels deep."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        for child in children:
            if isinstance(child, (dict, list)):
                if depth >= MAX_DEPTH:
                    invalid_input(f"{what} nests deeper than {MAX_DEPTH} levels")
                stack.append((child, depth + 1))
    return value


def parse_key(items: list[str]) -> dict[str, Any]:
    """`--key topic=prefs --key user:=7` -> {"topic": "prefs", "user": 7}: `NAME=VALUE` is a
    string, `NAME:=JSON` a JSON value (a number, true, null, ...: the keys a JSON pipeline
    stores); a bare `--key x` is {"key": "x"}. A name given twice is a usage error."""
    key: dict[str, Any] = {}
    for item in items:
        name, sep, part = item.partition("=")
        if not sep:
            name, part = "key", item
        elif name.endswith(":"):
            name, part = name[:-1], _key_json(part, item)
        if not name:
            usage_error(f"--key {item!r}: a key part needs a name before '='")
        if name in key:
            usage_error(f"--key: the key part {name!r} is given twice")
        key[name] = part
    return key


def _key_json(text: str, item: str) -> Any:
    import orjson

    from a2e_mem.jsontext import loads

    try:
        return loads(text)
    except orjson.JSONDecodeError as exc:
        invalid_input(f"--key {item!r}: the value after ':=' is not JSON ({exc})")


def scope(namespace: str, agent: str, session: str | None) -> Any:
    """The A2E scope a command works in: a session's, else (namespace, agent)."""
    from .context import state

    if session:
        return state.service.session(session)
    return state.service.scope(namespace, agent)
