"""A2E memory at the shell: `mem init`, `mem store`, `mem retrieve`, `mem forget`."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from .completion import completer
from .context import state
from .errors import usage_error
from .options import (
    Agent,
    Fields,
    Format,
    Limit,
    Namespace,
    SessionId,
    field_names,
    fields_list,
    parse_key,
    parse_value,
    scope,
    tier_name,
    tier_or_every,
    ttl_seconds,
    zero_to_one,
)
from .output import emit, emit_one, note
from .progress import progress

ENTRY_COLUMNS = ["key", "content", "tier", "tags", "relevance", "updated_at"]
ENTRY_FIELDS = ("key", "content", "tier", "tags", "source", "score", "ttl", "created_at", "updated_at", "relevance",
                "explain")  # fmt: skip
TIERS = completer("working", "episodic", "semantic")
Tier = Annotated[
    str,
    typer.Option("--tier", "-t", callback=tier_name, autocompletion=TIERS, help="working, episodic or semantic."),
]
AnyTier = Annotated[
    str,
    typer.Option(
        "--tier",
        "-t",
        callback=tier_or_every,
        autocompletion=TIERS,
        help="working, episodic or semantic (default: all).",
    ),
]
Keys = Annotated[
    list[str] | None,
    typer.Option(
        "--key", "-k", help="Key part NAME=VALUE, or NAME:=JSON for a number or other JSON value (repeatable)."
    ),
]
Tags = Annotated[list[str] | None, typer.Option("--tag", help="Tag (repeatable; all must match).")]


def init(namespace: Namespace = "default", agent: Agent = "default", fmt: Format = None) -> None:
    """Start a session; its working tier lives until `mem session close ID`. Piped without
    --format or MEM_FORMAT, it prints the bare ID, for `SID=$(mem init)`."""
    import os

    session = state.service.init(namespace, agent, persist=True)
    record = {"memory_id": session.memory_id, "namespace": session.namespace, "agent": session.agent}
    if fmt or os.environ.get("MEM_FORMAT") or sys.stdout.isatty():
        emit_one(record, fmt)
    else:
        sys.stdout.write(session.memory_id + "\n")


def store(
    ctx: typer.Context,
    content: Annotated[
        str | None, typer.Argument(help="Content (JSON if it parses), or - for NDJSON entries on stdin.")
    ] = None,
    key: Keys = None,
    tier: Tier = "episodic",
    tag: Tags = None,
    source: Annotated[str, typer.Option(help="Where the memory came from.")] = "",
    score: Annotated[float, typer.Option(callback=zero_to_one, help="Importance, 0 to 1.")] = 1.0,
    ttl: Annotated[int, typer.Option(callback=ttl_seconds, help="Seconds until it expires (0: never).")] = 0,
    namespace: Namespace = "default",
    agent: Agent = "default",
    session: SessionId = None,
    fmt: Format = None,
) -> None:
    """Store one entry, or NDJSON MemoryEntry objects from stdin with `-`.

    Without --key the key is a hash of the content, so storing the same content twice keeps one
    entry. With `-`, --tier (given or its default), --source, --score and --ttl fill the fields
    an entry leaves out and --tag adds to each entry's tags; --key, which names one entry, is
    refused.
    """
    tag = list(dict.fromkeys(tag or []))  # `--tag a --tag a` is one tag
    if content is None:
        usage_error("give the content, or - to read NDJSON entries from stdin")
    where = scope(namespace, agent, session)
    if content == "-":
        given = {name: value for name, value in ctx.params.items() if _from_command_line(ctx, name)}
        given.update(tier=tier, tag=tag)  # --tier's default too, as --help shows it
        if "key" in given:
            usage_error("--key names one entry: give each entry's key in its line of stdin")
        entries = with_options(read_ndjson(sys.stdin.buffer), given)  # bytes: a bad byte is named as import names it
    else:
        value = parse_value(content, "CONTENT")
        entry_key = parse_key(key or []) or default_key(value, where.namespace)
        entries = [
            {
                "key": entry_key,
                "content": value,
                "tier": tier,
                "tags": tag,
                "source": source,
                "score": score,
                "ttl": ttl,
            }
        ]
    with progress(f"storing {len(entries)} entries") as update:
        result = state.service.store(where, entries, update if len(entries) > 1000 else None)
    single = content != "-"  # one entry from the arguments: its refusal is the one line printed
    for error in result["errors"]:
        sys.stderr.write(f"mem: error: {error.removeprefix('entries[0]: ') if single else error}\n")
    emit([{"key": k, "stored": True} for k in result["stored"]], fmt)
    for warning in result.get("warnings", []):
        sys.stderr.write(f"mem: warning: {warning}\n")
    if not (single and result["errors"]):
        note(f"stored {len(result['stored'])} of {len(entries)}")
    if result["errors"]:
        raise typer.Exit(5 if any(": memory_full: " in e for e in result["errors"]) else 4)


ENTRY_OPTIONS = ("tier", "source", "score", "ttl")  # fields of an entry that `store -` options fill


def _from_command_line(ctx: typer.Context, name: str) -> bool:
    source = ctx.get_parameter_source(name)
    return source is not None and source.name != "DEFAULT"


def with_options(entries: list, given: dict) -> list:  # type: ignore[type-arg]
    """`entries` with the entry options given beside `-` applied (see `store`); a line that is no
    object, or whose tags are no list, is left for the store to refuse with its reason."""
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        for name in ENTRY_OPTIONS:
            if name in given:
                entry.setdefault(name, given[name])
        tags = entry.get("tags", [])
        if given.get("tag") and isinstance(tags, list):
            entry["tags"] = [*tags, *(t for t in given["tag"] if t not in tags)]
    return entries


def default_key(content: object, namespace: str) -> dict[str, str]:
    """A hash of the content (see `content_key`), redacted when the namespace's store redacts
    (`--redact`, `MEM_REDACT`, `config.json`), as the Python API's `store` makes it."""
    from a2e_mem.ops.a2e import content_key

    return content_key(content, state.service.config.for_namespace(namespace).redact)


def read_ndjson(stream) -> list[dict]:  # type: ignore[no-untyped-def]
    """One JSON object per line; blank lines skipped; a bad line names its number (exit 4)."""
    from a2e_mem.ndjson import objects

    return [value for _, value in objects(stream)]


def retrieve(
    query: Annotated[str, typer.Option("--query", "-q", help="Similarity search text.")] = "",
    key: Keys = None,
    tag: Tags = None,
    tier: AnyTier = "",
    limit: Limit = 10,
    min_score: Annotated[
        float, typer.Option("--min-score", callback=zero_to_one, help="Minimum relevance, 0 to 1.")
    ] = 0.0,
    namespace: Namespace = "default",
    agent: Agent = "default",
    session: SessionId = None,
    explain: Annotated[
        bool, typer.Option("--explain", help="Show why each hit ranked (implied by --fields naming explain).")
    ] = False,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            help="Only entries whose own time is at or after this (ISO-8601 date or time, or 'last week').",
        ),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option("--until", help="Entries whose own time is before this (a date: through its end)."),
    ] = None,
    fmt: Format = None,
    fields: Fields = None,
) -> None:
    """Find entries by query, key, tag, tier and time (all given filters must match), best first."""
    keys = [parse_key(key)] if key else []
    explain = explain or "explain" in field_names(fields)  # asking for the field is asking for it
    result = state.service.retrieve(
        scope(namespace, agent, session),
        keys=keys,
        query=query,
        tags=tag or [],
        tier=tier,
        limit=limit,
        min_score=min_score,
        explain=explain,
        since=since,
        until=until,
    )
    columns = ENTRY_COLUMNS + (["explain"] if explain else [])
    emit(result["entries"], fmt, fields_list(fields, ENTRY_FIELDS, result["entries"]), columns)
    note(f"{len(result['entries'])} of {result['total']} matching")


def forget(
    key: Keys = None,
    tag: Tags = None,
    tier: Tier = "episodic",
    everything: Annotated[
        bool, typer.Option("--all", help="Delete every entry of the tier (instead of --key/--tag).")
    ] = False,
    namespace: Namespace = "default",
    agent: Agent = "default",
    session: SessionId = None,
    fmt: Format = None,
) -> None:
    """Delete entries of a tier by key and/or tags; --all empties the tier (never implied)."""
    keys = [parse_key(key)] if key else []
    deleted = state.service.forget(
        scope(namespace, agent, session), keys=keys, tags=tag or [], tier=tier, everything=everything
    )
    emit_one({"deleted": deleted}, fmt)
