"""`mem episodic ...`: codebolt episodic memories (titled event logs)."""

from __future__ import annotations

from typing import Annotated

import typer

from .context import state
from .errors import usage_error
from .options import Fields, Filters, Format, ListLimit, Namespace, Offset, fields_list, optional_object, parse_value
from .output import emit, show

app = typer.Typer(help="Episodic memories: titled logs of events (episodic_memory_*).", no_args_is_help=True)
MemoryId = Annotated[str, typer.Argument(help="The episodic memory's ID.")]
MEMORY_COLUMNS = ["memoryId", "title", "swarmId", "eventCount", "archived", "created_at"]
EVENT_COLUMNS = ["timestamp", "event_type", "emitting_agent_id", "team_id", "tags", "payload"]
MEMORY_FIELDS = ("memoryId", "title", "swarmId", "archived", "created_at", "updated_at", "archived_at", "eventCount")
EVENT_FIELDS = ("eventId", "memoryId", "event_type", "emitting_agent_id", "team_id", "tags", "payload", "timestamp")
Swarm = Annotated[str | None, typer.Option("--swarm", help="Swarm ID (every memory created with it).")]


@app.command("create")
def create(
    title: Annotated[str, typer.Argument(help="A descriptive title.")],
    swarm: Swarm = None,
    namespace: Namespace = "default",
    fmt: Format = None,
) -> None:
    """Create an episodic memory; prints it with its memoryId."""
    show(state.service.episodic_memory_create(title, swarm_id=swarm, namespace=namespace), fmt)


@app.command("list")
def list_(
    filter_: Filters = None,
    archived: Annotated[bool, typer.Option("--archived", help="Include archived memories.")] = False,
    limit: ListLimit = 100,
    offset: Offset = 0,
    namespace: Namespace = "default",
    fmt: Format = None,
    fields: Fields = None,
) -> None:
    """List episodic memories with their event counts, newest first."""
    records = state.service.episodic_memory_list(
        optional_object(filter_, "--filter"), include_archived=archived, limit=limit, offset=offset, namespace=namespace
    )
    emit(records, fmt, fields_list(fields, MEMORY_FIELDS, records), MEMORY_COLUMNS)


@app.command("get")
def get(memory_id: MemoryId, namespace: Namespace = "default", fmt: Format = None) -> None:
    """Show one episodic memory; exit 3 if unknown."""
    show(state.service.episodic_memory_get(memory_id, namespace=namespace), fmt)


@app.command("append")
def append(
    memory_id: MemoryId,
    event_type: Annotated[str, typer.Option("--event-type", "-e", help="Type of the event, e.g. user_action.")],
    agent: Annotated[str, typer.Option("--agent", "-a", envvar="MEM_AGENT", help="ID of the agent emitting it.")],
    payload: Annotated[str, typer.Option("--payload", "-p", help="JSON object, or a plain string.")],
    team: Annotated[str | None, typer.Option("--team", help="Team ID.")] = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", help="Tag (repeatable).")] = None,
    namespace: Namespace = "default",
    fmt: Format = None,
) -> None:
    """Append an event; refused (exit 4) if the memory is archived."""
    value = parse_value(payload, "--payload")
    event = {"event_type": event_type, "emitting_agent_id": agent, "team_id": team, "tags": tag or [],
             "payload": value if isinstance(value, dict) else payload}  # fmt: skip
    result = state.service.episodic_memory_append_event(memory_id, event, namespace=namespace)
    show(result, fmt)


@app.command("query")
def query(
    memory_id: Annotated[str | None, typer.Argument(help="The memory's ID (or give --swarm).")] = None,
    swarm: Swarm = None,
    event_type: Annotated[str | None, typer.Option("--event-type", "-e", help="Only this event type.")] = None,
    agent: Annotated[str | None, typer.Option("--agent", "-a", help="Emitting agent.")] = None,
    team: Annotated[str | None, typer.Option("--team", help="Only this team.")] = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", help="Any of these tags (repeatable).")] = None,
    last_minutes: Annotated[
        float | None, typer.Option("--last-minutes", min=0, help="Only events of the last N minutes.")
    ] = None,
    last_count: Annotated[int | None, typer.Option("--last-count", min=0, help="Only the newest N events.")] = None,
    since: Annotated[
        str | None, typer.Option("--since", help="From this time (ISO 8601, or a date phrase as in retrieve).")
    ] = None,
    until: Annotated[
        str | None, typer.Option("--until", help="Up to this time, inclusive (ISO 8601, or 'yesterday', 'May 2023').")
    ] = None,
    namespace: Namespace = "default",
    fmt: Format = None,
    fields: Fields = None,
) -> None:
    """Events passing every filter, newest last."""
    if (memory_id is None) == (swarm is None):
        usage_error("give a memory ID or --swarm (not both)")
    events = state.service.episodic_memory_query_events(
        memory_id=memory_id, swarm_id=swarm, last_minutes=last_minutes, last_count=last_count, tags=tag,
        event_type=event_type, emitting_agent_id=agent, team_id=team, since=since, namespace=namespace,
        until=until,
    )  # fmt: skip
    emit(events, fmt, fields_list(fields, EVENT_FIELDS, events), EVENT_COLUMNS)


@app.command("event-types")
def event_types(
    memory_id: Annotated[str | None, typer.Argument()] = None,
    swarm: Swarm = None,
    namespace: Namespace = "default",
    fmt: Format = None,
) -> None:
    """The distinct event types of a memory (or swarm)."""
    if (memory_id is None) == (swarm is None):
        usage_error("give a memory ID or --swarm (not both)")
    types = state.service.episodic_memory_get_event_types(memory_id=memory_id, swarm_id=swarm, namespace=namespace)
    emit([{"event_type": t} for t in types], fmt)


@app.command("archive")
def archive(memory_id: MemoryId, namespace: Namespace = "default", fmt: Format = None) -> None:
    """Archive a memory: read-only, hidden from list (archiving again changes nothing)."""
    result = state.service.episodic_memory_archive(memory_id, namespace=namespace)
    show(result, fmt)


@app.command("unarchive")
def unarchive(memory_id: MemoryId, namespace: Namespace = "default", fmt: Format = None) -> None:
    """Make an archived memory active again: writable, listed."""
    show(state.service.episodic_memory_unarchive(memory_id, namespace=namespace), fmt)


@app.command("delete")
def delete(memory_id: MemoryId, namespace: Namespace = "default", fmt: Format = None) -> None:
    """Delete a memory and all its events (archived or not); exit 3 if unknown."""
    show(state.service.episodic_memory_delete(memory_id, namespace=namespace), fmt)


@app.command("rename")
def rename(
    memory_id: MemoryId,
    title: Annotated[str, typer.Argument(help="The new title.")],
    namespace: Namespace = "default",
    fmt: Format = None,
) -> None:
    """Change a memory's title; refused (exit 4) if it is archived."""
    result = state.service.episodic_memory_update_title(memory_id, title, namespace=namespace)
    show(result, fmt)
