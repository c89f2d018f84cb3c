"""`mem serve-mcp`: the store as an MCP server over stdio, on the official MCP Python SDK.

Tools carry the exact names and parameter names of the codebolt memory tool set (`memory_set`,
`memory_json_save`, `episodic_memory_query_events`, ...), plus the A2E operations
(`memory_store`, `memory_retrieve`, `memory_forget`) and the knowledge-graph operations with the
official MCP memory server's names (`create_entities`, `search_nodes`, ...). Every tool takes an
optional `namespace` (and the A2E ones an `agent`), defaulting to `--namespace` / `--agent`.
Each tool is a few lines that call one `MemoryService` method: nothing is implemented here.

Results come back as structured content and, for clients that show the model only text, the
same object as JSON text; every tool declares its output schema (`mcp_outputs.py`). Store errors
come back as tool errors (`isError`) whose text is `Error executing tool <name>: <code>:
<message>` (the prefix is the SDK's), never as a crashed server.

No message nests deeper than `mcp_wire.MAX_WIRE_DEPTH` (100) levels, under what SDK clients
parse (the Python one: 201, and a deeper message is dropped, its call left waiting): a stored
value that would nest deeper in a result comes back as its JSON text, a string, and the
result's `warnings` name it (`entries[3].content: ...`); the rest of the result is unchanged.
And every request line is answered: one the SDK's transport cannot parse or validate, which it
would drop, gets a JSON-RPC error with the line's id (`mcp_wire.answering_stdio`).
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import Field

Desc = Field  # Annotated[type, Desc("...")] reads as a description in the tool schemas
JsonObject = dict[str, Any]


class Tools:
    """The tools, bound to one service and its defaults; `register` adds them to a server."""

    def __init__(self, service: Any, namespace: str, agent: str, fixed_agent: bool = False) -> None:
        self.service = service
        self.namespace = namespace
        self.agent = agent
        self.fixed_agent = fixed_agent
        self.sessions: dict[tuple[str, str], Any] = {}

    def ns(self, namespace: str | None) -> str:
        """The namespace a call acts in: the given one, else --namespace. With a secret configured
        the server's namespace is fixed at start, as its agent is: a call naming another one is
        refused, so that agents given namespaces of their own cannot reach each other's records."""
        if self.fixed_agent and namespace not in (None, "", self.namespace):
            from a2e_mem.errors import Unauthorized

            raise Unauthorized(
                f"this server serves namespace {self.namespace!r} only (MEM_AUTH_SECRET is set), not {namespace!r}"
            )
        return namespace or self.namespace

    def agent_for(self, agent: str | None) -> str:
        """The agent a call acts as: the given one, else --agent. With a secret configured the
        server's agent is fixed at start, and a call naming another agent is refused."""
        if self.fixed_agent and agent not in (None, "", self.agent):
            from a2e_mem.errors import Unauthorized

            raise Unauthorized(f"this server acts as agent {self.agent!r} only (MEM_AUTH_SECRET is set), not {agent!r}")
        return agent or self.agent

    def caller_agent(self) -> str | None:
        """The agent whose view persistent memories are limited to (None: every agent's)."""
        return self.agent if self.fixed_agent else None

    def session(self, namespace: str | None, agent: str | None) -> Any:
        """One A2E session per (namespace, agent) for this connection: its working tier lives as
        long as the server process."""
        from a2e_mem.ops.a2e import SESSIONS_PER_CONNECTION

        key = (self.ns(namespace), self.agent_for(agent))
        session = self.sessions.pop(key, None) or self.service.init(*key)
        self.sessions[key] = session  # most recently used last
        if len(self.sessions) > SESSIONS_PER_CONNECTION:  # one per namespace named: bounded
            oldest = next(iter(self.sessions))
            self.service.close_session(self.sessions.pop(oldest).memory_id)
        return session


def result(value: Any, summary: str) -> Any:
    """A tool result: `value` as structured content, and the same object as JSON text, since
    many clients give the model only the text (the MCP spec asks for both). `summary`, one line
    for people (e.g. "2 todos"), goes in the result's `_meta`."""
    import json

    from mcp_types import CallToolResult, TextContent

    structured = value if isinstance(value, dict) else {"result": value}
    text = json.dumps(structured, ensure_ascii=False)  # not orjson: content may be nested deeper than it writes
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=structured, meta={"summary": summary}
    )


# The SDK runs sync tools on worker threads, several at once when a client sends concurrent
# requests; a MemoryService is not thread-safe (shard mirrors, journal offsets, temp file names),
# so calls into it are made one at a time.
SERVICE_LOCK = threading.Lock()


def tool_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Store errors become MCP tool errors with the error code and message; one call at a time;
    a result no deeper than clients parse (`mcp_wire`). The wrapper declares the tool's output
    model (`mcp_outputs`), which the SDK publishes as the tool's `outputSchema` and checks each
    result against."""
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp_types import CallToolResult

    from a2e_mem.errors import MemError, os_failure

    from .mcp_outputs import output_model
    from .mcp_wire import fit_result

    model = output_model(fn.__name__)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            with SERVICE_LOCK:
                found = fn(*args, **kwargs)
            return fit_result(found, model)  # a value too deep for clients to parse comes as its JSON text
        except MemError as exc:  # per-entry reasons (a refused memory_store) follow, one a line
            reasons = [f"\n{r}" for r in exc.detail.get("errors", []) if isinstance(r, str)]
            raise ToolError(f"{exc.code}: {exc.message}{''.join(reasons)}") from None
        except OSError as exc:  # a full disk: the message says whether to try again
            failure = os_failure(exc)
            raise ToolError(f"{failure.code}: {failure.message}") from None

    returns = Annotated[CallToolResult, model]
    wrapper.__signature__ = inspect.signature(fn, eval_str=True).replace(return_annotation=returns)  # type: ignore[attr-defined]
    return wrapper


NS = Annotated[str | None, Desc(description="Namespace (default: the server's --namespace).")]
AGENT = Annotated[
    str | None,
    Desc(description="Agent identity for the episodic tier (default: --agent; only --agent when a secret is set)."),
]
MEMORY_ID = Annotated[str, Desc(description="The unique identifier of the memory entry.")]
FILTERS = Annotated[
    JsonObject | None,
    Desc(description='Optional filters, e.g. {"status": "pending"}, {"version": {"$gte": 2}} (MongoDB-style subset).'),
]
LIMIT = Annotated[int | None, Desc(description="At most this many results (default 100, max 1000).")]
OFFSET = Annotated[int, Desc(description="Skip this many results first.")]
METADATA = Annotated[JsonObject | None, Desc(description="Optional metadata to associate with the item.")]


def build_tools(t: Tools) -> list[tuple[Callable[..., Any], bool]]:  # noqa: C901 - a catalogue of small tools
    """Every tool as (function, writes?)."""
    s = t.service
    tools: list[tuple[Callable[..., Any], bool]] = []

    def tool(writes: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            tools.append((tool_errors(fn), writes))
            return fn

        return register

    # -- key-value ----------------------------------------------------------------------------

    @tool(writes=True)
    def memory_set(
        key: Annotated[str, Desc(description="The key to store the value under.")],
        value: Annotated[Any, Desc(description="The value: any JSON.")],
        namespace: NS = None,
    ) -> Any:
        """Store a value in memory."""
        return result(s.memory_set(key, value, namespace=t.ns(namespace)), f"stored {key}")

    @tool(writes=False)
    def memory_get(key: Annotated[str, Desc(description="The key to read.")], namespace: NS = None) -> Any:
        """Retrieve a value from memory."""
        return result(s.memory_get(key, namespace=t.ns(namespace)), f"value of {key}")

    @tool(writes=True)
    def memory_delete(key: Annotated[str, Desc(description="The key to delete.")], namespace: NS = None) -> Any:
        """Delete a key and its value from memory (an error if the key is not there)."""
        return result(s.memory_delete(key, namespace=t.ns(namespace)), f"deleted {key}")

    # -- JSON, todo, markdown -----------------------------------------------------------------

    @tool(writes=True)
    def memory_json_save(
        json: Annotated[JsonObject, Desc(description="The JSON object to save to memory storage.")],
        metadata: METADATA = None,
        namespace: NS = None,
    ) -> Any:
        """Saves a JSON object to memory storage. Returns the memory ID of the saved entry."""
        saved = s.memory_json_save(json, metadata, namespace=t.ns(namespace))
        return result(saved, f"saved {saved['memoryId']}")

    @tool(writes=True)
    def memory_json_update(
        memoryId: MEMORY_ID,
        json: Annotated[JsonObject, Desc(description="The new JSON object to replace the existing data.")],
        namespace: NS = None,
    ) -> Any:
        """Updates an existing JSON object in memory storage by its memory ID."""
        return result(s.memory_json_update(memoryId, json, namespace=t.ns(namespace)), f"updated {memoryId}")

    @tool(writes=True)
    def memory_json_delete(memoryId: MEMORY_ID, namespace: NS = None) -> Any:
        """Deletes a JSON object from memory storage by its memory ID."""
        return result(s.memory_json_delete(memoryId, namespace=t.ns(namespace)), f"deleted {memoryId}")

    @tool(writes=False)
    def memory_json_list(filters: FILTERS = None, limit: LIMIT = None, offset: OFFSET = 0, namespace: NS = None) -> Any:
        """Lists JSON objects from memory storage with optional filters."""
        found = s.memory_json_list(filters, limit, offset, namespace=t.ns(namespace))
        return result(found, f"{len(found)} JSON memories")

    @tool(writes=True)
    def memory_todo_save(
        todo: Annotated[JsonObject, Desc(description="The todo: title, description, status, priority, any fields.")],
        metadata: METADATA = None,
        namespace: NS = None,
    ) -> Any:
        """Saves a todo item to memory storage with optional metadata."""
        saved = s.memory_todo_save(todo, metadata, namespace=t.ns(namespace))
        return result(saved, f"saved {saved['memoryId']}")

    @tool(writes=True)
    def memory_todo_update(
        memoryId: MEMORY_ID,
        todo: Annotated[JsonObject, Desc(description="The new todo object to replace the existing data.")],
        namespace: NS = None,
    ) -> Any:
        """Updates an existing todo item in memory storage by its memory ID."""
        return result(s.memory_todo_update(memoryId, todo, namespace=t.ns(namespace)), f"updated {memoryId}")

    @tool(writes=True)
    def memory_todo_delete(memoryId: MEMORY_ID, namespace: NS = None) -> Any:
        """Deletes a todo item from memory storage by its memory ID."""
        return result(s.memory_todo_delete(memoryId, namespace=t.ns(namespace)), f"deleted {memoryId}")

    @tool(writes=False)
    def memory_todo_list(filters: FILTERS = None, limit: LIMIT = None, offset: OFFSET = 0, namespace: NS = None) -> Any:
        """Lists todo items from memory storage with optional filters."""
        found = s.memory_todo_list(filters, limit, offset, namespace=t.ns(namespace))
        return result(found, f"{len(found)} todos")

    @tool(writes=True)
    def memory_markdown_save(
        markdown: Annotated[str, Desc(description="The markdown content string to save.")],
        metadata: METADATA = None,
        namespace: NS = None,
    ) -> Any:
        """Saves markdown content to memory storage with optional metadata."""
        saved = s.memory_markdown_save(markdown, metadata, namespace=t.ns(namespace))
        return result(saved, f"saved {saved['memoryId']}")

    @tool(writes=True)
    def memory_markdown_update(
        memoryId: MEMORY_ID,
        markdown: Annotated[str, Desc(description="The new markdown content.")],
        metadata: METADATA = None,
        namespace: NS = None,
    ) -> Any:
        """Updates existing markdown content in memory storage by its memory ID."""
        updated = s.memory_markdown_update(memoryId, markdown, metadata, namespace=t.ns(namespace))
        return result(updated, f"updated {memoryId}")

    @tool(writes=True)
    def memory_markdown_delete(memoryId: MEMORY_ID, namespace: NS = None) -> Any:
        """Deletes markdown content from memory storage by its memory ID."""
        return result(s.memory_markdown_delete(memoryId, namespace=t.ns(namespace)), f"deleted {memoryId}")

    @tool(writes=False)
    def memory_markdown_list(
        filters: FILTERS = None, limit: LIMIT = None, offset: OFFSET = 0, namespace: NS = None
    ) -> Any:
        """Lists markdown content from memory storage with optional filters."""
        found = s.memory_markdown_list(filters, limit, offset, namespace=t.ns(namespace))
        return result(found, f"{len(found)} markdown memories")

    add_episodic_tools(t, tool)
    add_persistent_tools(t, tool)
    add_a2e_tools(t, tool)
    add_graph_tools(t, tool)
    return tools


EVENT = Annotated[
    JsonObject,
    Desc(
        description="The event: event_type (string, required), emitting_agent_id (string, required), "
        "team_id (string), tags (string[]), payload (string or object, required)."
    ),
]
SWARM = Annotated[str | None, Desc(description="The swarm ID (alternative to memoryId; not both).")]
OPT_MEMORY_ID = Annotated[str | None, Desc(description="The episodic memory's ID (or give swarmId).")]


def add_episodic_tools(t: Tools, tool: Callable[[bool], Any]) -> None:
    s = t.service

    @tool(True)
    def episodic_memory_create(
        title: Annotated[str, Desc(description="The title for the new episodic memory.")],
        swarmId: Annotated[
            str | None, Desc(description="Optional swarm ID: memories created with the same one form a swarm.")
        ] = None,
        namespace: NS = None,
    ) -> Any:
        """Creates a new episodic memory container with a title."""
        made = s.episodic_memory_create(title, swarm_id=swarmId, namespace=t.ns(namespace))
        return result(made, f"created {made['memoryId']}")

    @tool(False)
    def episodic_memory_list(
        filters: FILTERS = None,
        includeArchived: Annotated[bool, Desc(description="Include archived memories.")] = False,
        limit: LIMIT = None,
        offset: OFFSET = 0,
        namespace: NS = None,
    ) -> Any:
        """Lists all episodic memories with their IDs, titles, and event counts."""
        found = s.episodic_memory_list(filters, includeArchived, limit, offset, namespace=t.ns(namespace))
        return result(found, f"{len(found)} episodic memories")

    @tool(False)
    def episodic_memory_get(memoryId: MEMORY_ID, namespace: NS = None) -> Any:
        """Retrieves a specific episodic memory by its ID."""
        return result(s.episodic_memory_get(memoryId, namespace=t.ns(namespace)), f"episodic memory {memoryId}")

    @tool(True)
    def episodic_memory_append_event(memoryId: MEMORY_ID, event: EVENT, namespace: NS = None) -> Any:
        """Appends a new event to an existing episodic memory."""
        added = s.episodic_memory_append_event(memoryId, event, namespace=t.ns(namespace), agent=t.caller_agent())
        return result(added, f"appended {added['eventId']}")

    @tool(False)
    def episodic_memory_query_events(
        memoryId: OPT_MEMORY_ID = None,
        swarmId: SWARM = None,
        lastMinutes: Annotated[float | None, Desc(description="Only events from the last N minutes.")] = None,
        lastCount: Annotated[int | None, Desc(description="Only the newest N events.")] = None,
        tags: Annotated[list[str] | None, Desc(description="Events having any of these tags.")] = None,
        event_type: Annotated[str | None, Desc(description="Filter by event type.")] = None,
        emitting_agent_id: Annotated[str | None, Desc(description="Filter by emitting agent.")] = None,
        team_id: Annotated[str | None, Desc(description="Filter by team ID.")] = None,
        since: Annotated[str | None, Desc(description="Only events since this ISO 8601 timestamp.")] = None,
        namespace: NS = None,
    ) -> Any:
        """Queries and filters events from an episodic memory (or a swarm); newest last."""
        events = s.episodic_memory_query_events(
            memoryId, swarmId, lastMinutes, lastCount, tags, event_type, emitting_agent_id, team_id, since,
            namespace=t.ns(namespace),
        )  # fmt: skip
        return result(events, f"{len(events)} events")

    @tool(False)
    def episodic_memory_get_event_types(
        memoryId: OPT_MEMORY_ID = None, swarmId: SWARM = None, namespace: NS = None
    ) -> Any:
        """Retrieves all unique event types from an episodic memory (or a swarm)."""
        types = s.episodic_memory_get_event_types(memoryId, swarmId, namespace=t.ns(namespace))
        return result(types, ", ".join(types) or "no events")

    @tool(True)
    def episodic_memory_archive(memoryId: MEMORY_ID, namespace: NS = None) -> Any:
        """Archives an episodic memory (marks as inactive, read-only)."""
        return result(s.episodic_memory_archive(memoryId, namespace=t.ns(namespace)), f"archived {memoryId}")

    @tool(True)
    def episodic_memory_unarchive(memoryId: MEMORY_ID, namespace: NS = None) -> Any:
        """Unarchives an episodic memory (active and writable again)."""
        return result(s.episodic_memory_unarchive(memoryId, namespace=t.ns(namespace)), f"unarchived {memoryId}")

    @tool(True)
    def episodic_memory_delete(memoryId: MEMORY_ID, namespace: NS = None) -> Any:
        """Deletes an episodic memory and all its events (archived or not)."""
        done = s.episodic_memory_delete(memoryId, namespace=t.ns(namespace))
        return result(done, f"deleted {memoryId} and {done['deletedEvents']} events")

    @tool(True)
    def episodic_memory_update_title(
        memoryId: MEMORY_ID, title: Annotated[str, Desc(description="The new title.")], namespace: NS = None
    ) -> Any:
        """Updates the title of an existing episodic memory (refused if it is archived)."""
        return result(s.episodic_memory_update_title(memoryId, title, namespace=t.ns(namespace)), f"renamed {memoryId}")


RETRIEVAL = Annotated[
    JsonObject,
    Desc(
        description="Retrieval configuration: source_type ('vectordb', 'kv', 'eventlog' or 'kg', required), "
        "source_id (required: a namespace; for eventlog an episodic memoryId or namespace/memoryId), "
        "query_template ({query} {keywords} {action} {context.x} {additional_variables}), limit, filters "
        "(vectordb: tier, agent, tags, min_score; eventlog: the query_events filters; kv and kg: none)."
    ),
]
CONTRIBUTION = Annotated[
    JsonObject,
    Desc(
        description="Contribution configuration: format ('text', 'json' or 'markdown', required), template "
        "(one line per item: {index} and the item's fields), max_tokens (whole items that fit are kept)."
    ),
]
PM_ID = Annotated[str, Desc(description="The unique identifier of the persistent memory.")]


def add_persistent_tools(t: Tools, tool: Callable[[bool], Any]) -> None:
    s = t.service

    @tool(True)
    def persistent_memory_create(
        label: Annotated[str, Desc(description="A human-readable label/name for the persistent memory.")],
        retrieval: RETRIEVAL,
        contribution: CONTRIBUTION,
        id: Annotated[str | None, Desc(description="Optional unique identifier (generated if not given).")] = None,
        description: Annotated[str, Desc(description="What this memory is for.")] = "",
        inputs_scope: Annotated[list[str] | None, Desc(description="Input scopes that activate this memory.")] = None,
        additional_variables: Annotated[JsonObject | None, Desc(description="Variables for query templates.")] = None,
        status: Annotated[
            Literal["active", "disabled", "draft"], Desc(description="Initial status: 'active', 'disabled' or 'draft'.")
        ] = "active",
        namespace: NS = None,
    ) -> Any:
        """Creates a new persistent memory configuration with retrieval and contribution settings."""
        made = s.persistent_memory_create(
            label, retrieval, contribution, id, description, inputs_scope, additional_variables, status,
            namespace=t.ns(namespace), agent=t.caller_agent(),
        )  # fmt: skip
        return result(made, f"created {made['id']}")

    @tool(False)
    def persistent_memory_get(memory_id: PM_ID, namespace: NS = None) -> Any:
        """Retrieves a persistent memory configuration by its ID."""
        return result(s.persistent_memory_get(memory_id, namespace=t.ns(namespace)), f"persistent memory {memory_id}")

    @tool(False)
    def persistent_memory_list(
        input_scope: Annotated[str | None, Desc(description="Only memories with this input scope.")] = None,
        active_only: Annotated[bool, Desc(description="Only memories with status 'active'.")] = False,
        limit: LIMIT = None,
        offset: OFFSET = 0,
        namespace: NS = None,
    ) -> Any:
        """Lists all persistent memory configurations with optional filters."""
        found = s.persistent_memory_list(input_scope, active_only, limit, offset, namespace=t.ns(namespace))
        return result(found, f"{len(found)} persistent memories")

    @tool(True)
    def persistent_memory_update(
        memory_id: PM_ID,
        label: Annotated[str | None, Desc(description="New label.")] = None,
        description: Annotated[str | None, Desc(description="New description.")] = None,
        status: Annotated[str | None, Desc(description="New status: 'active', 'disabled' or 'draft'.")] = None,
        inputs_scope: Annotated[list[str] | None, Desc(description="New input scopes.")] = None,
        additional_variables: Annotated[JsonObject | None, Desc(description="New additional variables.")] = None,
        retrieval: Annotated[JsonObject | None, Desc(description="New retrieval configuration.")] = None,
        contribution: Annotated[JsonObject | None, Desc(description="New contribution configuration.")] = None,
        namespace: NS = None,
    ) -> Any:
        """Updates an existing persistent memory configuration."""
        updated = s.persistent_memory_update(
            memory_id, namespace=t.ns(namespace), agent=t.caller_agent(), label=label, description=description,
            status=status, inputs_scope=inputs_scope, additional_variables=additional_variables, retrieval=retrieval,
            contribution=contribution,
        )  # fmt: skip
        return result(updated, f"updated {memory_id}")

    @tool(True)
    def persistent_memory_delete(memory_id: PM_ID, namespace: NS = None) -> Any:
        """Deletes a persistent memory configuration (the source it reads is left alone)."""
        return result(s.persistent_memory_delete(memory_id, namespace=t.ns(namespace)), f"deleted {memory_id}")

    @tool(False)
    def persistent_memory_retrieve(
        memory_id: PM_ID,
        keywords: Annotated[list[str] | None, Desc(description="Keywords to use in the retrieval query.")] = None,
        action: Annotated[str | None, Desc(description="Action context, e.g. find, summarize, compare.")] = None,
        context: Annotated[JsonObject | None, Desc(description="Additional context as key-value pairs.")] = None,
        query: Annotated[str | None, Desc(description="A direct query string.")] = None,
        namespace: NS = None,
    ) -> Any:
        """Executes a retrieval query on a persistent memory and renders its contribution."""
        found = s.persistent_memory_retrieve(
            memory_id, keywords, action, context, query, namespace=t.ns(namespace), agent=t.caller_agent()
        )
        return result(found, found["contribution"])


KEYS = Annotated[
    list[JsonObject | str] | None, Desc(description="Keys (objects; a string s means {'key': s}). Exact lookup.")
]
TAGS = Annotated[list[str] | None, Desc(description="Tags: an entry must carry every one.")]


def add_a2e_tools(t: Tools, tool: Callable[[bool], Any]) -> None:
    s = t.service

    @tool(True)
    def memory_store(
        entries: Annotated[
            list[Any],
            Desc(
                description="MemoryEntry objects: key (object), content (any JSON), tier (working, episodic or "
                "semantic), tags, source, score (0-1), ttl (seconds, 0 = never)."
            ),
        ],  # fmt: skip
        namespace: NS = None,
        agent: AGENT = None,
    ) -> Any:
        """Store A2E memory entries; each invalid one is reported in errors with its index."""
        from a2e_mem.errors import refuse_unknown
        from a2e_mem.models import MemoryEntry

        for i, entry in enumerate(entries):  # the A2E wire lets extra fields through; a tool call names its typos
            if isinstance(entry, dict):  # a non-object entry is reported per entry by the store
                refuse_unknown(entry, MemoryEntry.model_fields, f"entries[{i}] field")
        stored = s.store(t.session(namespace, agent), entries)
        return result(stored, f"stored {len(stored['stored'])}, {len(stored['errors'])} errors")

    @tool(False)
    def memory_retrieve(
        keys: KEYS = None,
        query: Annotated[str, Desc(description="Similarity search text.")] = "",
        tags: TAGS = None,
        tier: Annotated[
            Literal["", "working", "episodic", "semantic"],
            Desc(description="working, episodic, semantic, or empty for all."),
        ] = "",
        limit: Annotated[int, Desc(description="Maximum entries to return (over 1000: 1000, with a warning).")] = 10,
        min_score: Annotated[float, Desc(description="Minimum relevance, 0 to 1.")] = 0.0,
        since: Annotated[
            str | None, Desc(description="Only entries whose own time is at or after this ISO-8601 date or time.")
        ] = None,
        until: Annotated[
            str | None,
            Desc(description="Only entries whose own time is before this ISO-8601 time, or date (all of it)."),
        ] = None,
        namespace: NS = None,
        agent: AGENT = None,
    ) -> Any:
        """Retrieve A2E memory entries (all given filters must match), best first, with relevance."""
        from a2e_mem.ops.a2e import check_paging

        check_paging(limit, min_score)  # before the session is made; a limit over 1000 is clamped, with a warning
        found = s.retrieve(
            t.session(namespace, agent), keys=keys or [], query=query, tags=tags or [], tier=tier, limit=limit,
            min_score=min_score, since=since, until=until,
        )  # fmt: skip
        return result(found, f"{len(found['entries'])} of {found['total']} matching")

    @tool(True)
    def memory_forget(
        keys: KEYS = None,
        tags: TAGS = None,
        tier: Annotated[
            Literal["working", "episodic", "semantic"], Desc(description="Tier to delete from (default episodic).")
        ] = "episodic",
        all: Annotated[
            bool, Desc(description="Delete every entry of the tier (instead of keys/tags; never implied).")
        ] = False,
        namespace: NS = None,
        agent: AGENT = None,
    ) -> Any:
        """Delete A2E entries of a tier by keys and/or tags; `all` empties the tier (a call with
        none of them deletes nothing and fails)."""
        deleted = s.forget(t.session(namespace, agent), keys=keys or [], tags=tags or [], tier=tier, everything=all)
        return result({"deleted": deleted}, f"deleted {deleted}")


ENTITIES = Annotated[list[JsonObject], Desc(description="Entities: {name, entityType, observations: string[]}.")]
RELATIONS = Annotated[list[JsonObject], Desc(description="Relations: {from, to, relationType} (active voice).")]


def add_graph_tools(t: Tools, tool: Callable[[bool], Any]) -> None:
    s = t.service

    @tool(True)
    def create_entities(entities: ENTITIES, namespace: NS = None) -> Any:
        """Create entities in the knowledge graph (existing names are left alone)."""
        made = s.kg_create_entities(entities, namespace=t.ns(namespace))
        return result(made, f"created {len(made)} entities")

    @tool(True)
    def create_relations(relations: RELATIONS, namespace: NS = None) -> Any:
        """Create relations between existing entities (existing relations are left alone)."""
        made = s.kg_create_relations(relations, namespace=t.ns(namespace))
        return result(made, f"created {len(made)} relations")

    @tool(True)
    def add_observations(
        observations: Annotated[list[JsonObject], Desc(description="Items: {entityName, contents: string[]}.")],
        namespace: NS = None,
    ) -> Any:
        """Add observations to existing entities."""
        return result(s.kg_add_observations(observations, namespace=t.ns(namespace)), "observations added")

    @tool(True)
    def delete_entities(
        entityNames: Annotated[list[str], Desc(description="Names of the entities to delete.")], namespace: NS = None
    ) -> Any:
        """Delete entities and the relations that touch them."""
        done = s.kg_delete_entities(entityNames, namespace=t.ns(namespace))
        return result(done, f"deleted {done['deletedEntities']} entities")

    @tool(True)
    def delete_observations(
        deletions: Annotated[list[JsonObject], Desc(description="Items: {entityName, observations: string[]}.")],
        namespace: NS = None,
    ) -> Any:
        """Delete observations from entities."""
        return result(s.kg_delete_observations(deletions, namespace=t.ns(namespace)), "observations deleted")

    @tool(True)
    def delete_relations(relations: RELATIONS, namespace: NS = None) -> Any:
        """Delete relations."""
        done = s.kg_delete_relations(relations, namespace=t.ns(namespace))
        return result(done, f"deleted {done['deletedRelations']} relations")

    @tool(False)
    def read_graph(limit: LIMIT = None, offset: OFFSET = 0, namespace: NS = None) -> Any:
        """Read the knowledge graph: a page of entities and the relations among them."""
        graph = s.kg_read_graph(limit, offset, namespace=t.ns(namespace))
        return result(graph, f"{len(graph['entities'])} entities, {len(graph['relations'])} relations")

    @tool(False)
    def search_nodes(
        query: Annotated[str, Desc(description="Text to match against names, types and observations.")],
        limit: Annotated[int, Desc(description="At most this many entities.")] = 10,
        namespace: NS = None,
    ) -> Any:
        """Search entities by substring and similarity; returns them and the relations among them."""
        graph = s.kg_search_nodes(query, limit, namespace=t.ns(namespace))
        return result(graph, f"{len(graph['entities'])} entities")

    @tool(False)
    def open_nodes(names: Annotated[list[str], Desc(description="Entity names.")], namespace: NS = None) -> Any:
        """Open entities by name, with the relations among them."""
        graph = s.kg_open_nodes(names, namespace=t.ns(namespace))
        return result(graph, f"{len(graph['entities'])} entities")


def strict_server(**settings: Any) -> Any:
    """An MCPServer whose tools refuse arguments they do not have.

    The SDK validates arguments with a pydantic model that ignores unknown keys, so
    `{"eventType": "x"}` would run a query without its filter (returning every event) and
    `{"status": "disabled"}` would create an active memory. Here every call is checked against
    the tool's published parameters first (naming the unknown ones and the close valid name),
    and the schemas say `additionalProperties: false`."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from pydantic import ValidationError

    from a2e_mem.errors import MemError, refuse_unknown

    class StrictServer(MCPServer):
        def add_tool(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
            super().add_tool(fn, *args, **kwargs)
            self._tool_manager.get_tool(kwargs.get("name") or fn.__name__).parameters["additionalProperties"] = False

        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            tool = self._tool_manager.get_tool(name)
            if tool is not None:
                try:
                    refuse_unknown(arguments, tool.parameters.get("properties", {}), "argument")
                except MemError as exc:
                    raise ToolError(f"Error executing tool {name}: {exc.code}: {exc.message}") from None
                wrong = wrong_json_types(arguments, tool.parameters.get("properties", {}))
                try:  # the SDK's own check says only pydantic's text, without the error's code
                    tool.fn_metadata.validate_arguments(arguments)
                except ValidationError as exc:
                    wrong |= {where: clause for where, clause in wrong_arguments(exc).items() if where not in wrong}
                if wrong:  # in the order of the tool's parameters
                    order = list(tool.parameters.get("properties", {}))
                    clauses = [
                        wrong[k] for k in sorted(wrong, key=lambda k: order.index(k) if k in order else len(order))
                    ]
                    raise ToolError(f"Error executing tool {name}: schema_violation: {said(clauses)}")
            return await super().call_tool(name, arguments, context)

        async def run_stdio_async(self) -> None:
            """The SDK's stdio loop, on a transport that answers every request line (`mcp_wire`)."""
            from .mcp_wire import answering_stdio

            async with answering_stdio() as (read_stream, write_stream):
                lowlevel = self._lowlevel_server
                await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())

    return StrictServer(**settings)


JSON_TYPES: dict[str, Callable[[Any], bool]] = {
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: not isinstance(v, bool) and (isinstance(v, int) or (isinstance(v, float) and v.is_integer())),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "string": lambda v: isinstance(v, str),
    "null": lambda v: v is None,
}  # arrays and objects: pydantic coerces nothing into them, and says what is wrong inside


def wrong_json_types(arguments: dict[str, Any], properties: dict[str, Any]) -> dict[str, str]:
    """The arguments whose JSON type is not the one the tool's schema publishes, by name, said
    as `wrong_arguments` says them. The SDK validates in pydantic's lax mode, which takes "yes",
    1 or "on" for a boolean and "5" for an integer: `memory_forget` with `"all": 1` emptied a
    tier (outside audit A25), where `serve-stdio` and the Python API refuse it. A schema's JSON
    type is what a client was told to send, so it is what is taken."""
    return {
        name: f"{name}: Input should be a valid {expected(properties[name])} (got {value!r:.60})"
        for name, value in arguments.items()
        if name in properties and not json_type_fits(value, properties[name])
    }


def json_type_fits(value: Any, schema: dict[str, Any]) -> bool:
    """Whether `value` has a JSON type `schema` takes (not checked here: arrays and objects)."""
    if "anyOf" in schema:
        return any(json_type_fits(value, branch) for branch in schema["anyOf"])
    check = JSON_TYPES.get(schema.get("type", ""))
    return check is None or check(value) or isinstance(value, (list, dict))


def expected(schema: dict[str, Any]) -> str:
    """The JSON types `schema` takes, in words: "integer", "string or null"."""
    branches = schema.get("anyOf", [schema])
    return " or ".join(dict.fromkeys(str(branch.get("type", "value")) for branch in branches))


def wrong_arguments(exc: Any) -> dict[str, str]:
    """What is wrong with a tool call's arguments, one clause per argument:
    `limit: Input should be a valid integer (got 'ten')`."""
    clauses: dict[str, str] = {}
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "arguments"
        got = f" (got {error['input']!r:.60})" if error.get("type") != "missing" else ""
        clauses.setdefault(str(error["loc"][0]) if error["loc"] else where, f"{where}: {error['msg']}{got}")
    return clauses


def said(clauses: list[str]) -> str:
    """At most three clauses, and how many more."""
    more = len(clauses) - 3
    return "; ".join(clauses[:3]) + (f"; and {more} more" if more > 0 else "")


def build_server(service: Any, namespace: str, agent: str, read_only: bool, fixed_agent: bool = False) -> Any:
    """An MCPServer exposing the tools (only those that do not write, with `read_only`);
    `fixed_agent`: every call acts as `agent` (see `Tools.agent_for`)."""
    from importlib.metadata import version

    from mcp_types import ToolAnnotations

    from a2e_mem import log

    server = strict_server(
        name="mem",
        version=version("a2e-mem"),
        instructions="Local-first memory: A2E entries, codebolt memories, a knowledge graph.",
        log_level=log.level(),  # the SDK's own lines ("Tool ... failed") at INFO otherwise, whatever MEM_LOG says
    )
    for fn, writes in build_tools(Tools(service, namespace, agent, fixed_agent)):
        if read_only and writes:
            continue
        destructive = writes and ("delete" in fn.__name__ or "forget" in fn.__name__)
        hints = ToolAnnotations(read_only_hint=not writes, destructive_hint=destructive)
        server.add_tool(fn, annotations=hints)
    return server


def main(service: Any, namespace: str, agent: str, read_only: bool, fixed_agent: bool = False) -> None:
    service.engine.read_only = read_only  # not even the embedder record or exit checkpoints
    try:
        build_server(service, namespace, agent, read_only, fixed_agent).run("stdio")
    finally:
        service.shutdown()
