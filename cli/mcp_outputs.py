"""The output schema of every `mem serve-mcp` tool, as pydantic models.

A tool's structured content is an object: the service's answer, a list wrapped as
`{"result": [...]}`. The SDK publishes each model's JSON schema as the tool's `outputSchema`
and checks every successful result against it (clients check it too). The models are lenient
where the data is the caller's (any JSON content, metadata, payloads) and allow extra fields, so
that records imported from older stores still pass; they list every field the tools send.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Output(BaseModel):
    model_config = ConfigDict(extra="allow")


# -- key-value and documents --------------------------------------------------------------------


class KeyValue(Output):
    key: str
    value: Any = Field(description="The stored value: any JSON.")
    created_at: str
    updated_at: str


class KeyDeleted(Output):
    key: str
    deleted: bool


class JsonRecord(Output):
    memoryId: str
    json_: Any = Field(alias="json", description="The JSON object.")
    metadata: dict[str, Any] = {}
    created_at: str
    updated_at: str


class TodoRecord(Output):
    memoryId: str
    todo: dict[str, Any]
    metadata: dict[str, Any] = {}
    created_at: str
    updated_at: str


class MarkdownRecord(Output):
    memoryId: str
    markdown: str
    metadata: dict[str, Any] = {}
    created_at: str
    updated_at: str


class Deleted(Output):
    memoryId: str
    deleted: bool


class JsonRecords(Output):
    result: list[JsonRecord]


class TodoRecords(Output):
    result: list[TodoRecord]


class MarkdownRecords(Output):
    result: list[MarkdownRecord]


# -- episodic memories --------------------------------------------------------------------------


class Episode(Output):
    memoryId: str
    title: str
    swarmId: str | None = None
    archived: bool
    created_at: str
    updated_at: str
    archived_at: str | None = None
    eventCount: int


class Episodes(Output):
    result: list[Episode]


class EpisodeDeleted(Output):
    memoryId: str
    deleted: bool
    deletedEvents: int


class Event(Output):
    eventId: str
    memoryId: str
    event_type: str
    emitting_agent_id: str
    team_id: str | None = None
    tags: list[str] = []
    payload: Any = Field(description="A string or an object.")
    timestamp: str


class Events(Output):
    result: list[Event]


class EventTypes(Output):
    result: list[str]


# -- persistent memories ------------------------------------------------------------------------


class PersistentMemory(Output):
    id: str
    label: str
    description: str = ""
    inputs_scope: list[str] = []
    additional_variables: dict[str, Any] = {}
    retrieval: dict[str, Any] = Field(description="source_type, source_id, query_template, limit, filters.")
    contribution: dict[str, Any] = Field(description="format, template, max_tokens.")
    status: str
    created_at: str
    updated_at: str


class PersistentMemories(Output):
    result: list[PersistentMemory]


class PersistentDeleted(Output):
    id: str
    deleted: bool


class Contribution(Output):
    memory_id: str
    label: str
    query: str
    source_type: str
    source_id: str
    items: list[dict[str, Any]]
    format: str
    contribution: str = Field(description="The rendered contribution, ready for a prompt.")
    tokens: int
    truncated: bool


# -- A2E entries --------------------------------------------------------------------------------


class Stored(Output):
    stored: list[dict[str, Any]] = Field(description="The keys stored, in request order.")
    errors: list[str] = Field(description="`entries[i]: reason` for each entry not stored.")
    warnings: list[str] = Field([], description="Notes, e.g. an entry replaced by a later one with its key.")


class Entry(Output):
    key: dict[str, Any]
    content: Any
    tier: str
    tags: list[str]
    source: str
    score: float
    ttl: int
    created_at: float
    updated_at: float
    relevance: float


class Retrieved(Output):
    entries: list[Entry]
    total: int = Field(description="Matching entries before `limit`.")
    warnings: list[str] = Field([], description="Notes, e.g. a limit over 1000 clamped.")


class Forgotten(Output):
    deleted: int


# -- knowledge graph ----------------------------------------------------------------------------


class Entity(Output):
    name: str
    entityType: str
    observations: list[str]


class Relation(Output):
    from_: str = Field(alias="from")
    to: str
    relationType: str


class Entities(Output):
    result: list[Entity]


class Relations(Output):
    result: list[Relation]


class Graph(Output):
    entities: list[Entity]
    relations: list[Relation]


class ObservationsOfEntityAdded(Output):
    entityName: str
    addedObservations: list[str]


class ObservationsAdded(Output):
    result: list[ObservationsOfEntityAdded]


class ObservationsOfEntityDeleted(Output):
    entityName: str
    deletedObservations: list[str]


class ObservationsDeleted(Output):
    result: list[ObservationsOfEntityDeleted]


class EntitiesDeleted(Output):
    deletedEntities: int
    deletedRelations: int


class RelationsDeleted(Output):
    deletedRelations: int


OUTPUTS: dict[str, type[Output]] = {
    "memory_set": KeyValue,
    "memory_get": KeyValue,
    "memory_delete": KeyDeleted,
    "memory_json_save": JsonRecord,
    "memory_json_update": JsonRecord,
    "memory_json_delete": Deleted,
    "memory_json_list": JsonRecords,
    "memory_todo_save": TodoRecord,
    "memory_todo_update": TodoRecord,
    "memory_todo_delete": Deleted,
    "memory_todo_list": TodoRecords,
    "memory_markdown_save": MarkdownRecord,
    "memory_markdown_update": MarkdownRecord,
    "memory_markdown_delete": Deleted,
    "memory_markdown_list": MarkdownRecords,
    "episodic_memory_create": Episode,
    "episodic_memory_list": Episodes,
    "episodic_memory_get": Episode,
    "episodic_memory_append_event": Event,
    "episodic_memory_query_events": Events,
    "episodic_memory_get_event_types": EventTypes,
    "episodic_memory_archive": Episode,
    "episodic_memory_unarchive": Episode,
    "episodic_memory_update_title": Episode,
    "episodic_memory_delete": EpisodeDeleted,
    "persistent_memory_create": PersistentMemory,
    "persistent_memory_get": PersistentMemory,
    "persistent_memory_list": PersistentMemories,
    "persistent_memory_update": PersistentMemory,
    "persistent_memory_retrieve": Contribution,
    "persistent_memory_delete": PersistentDeleted,
    "memory_store": Stored,
    "memory_retrieve": Retrieved,
    "memory_forget": Forgotten,
    "create_entities": Entities,
    "create_relations": Relations,
    "add_observations": ObservationsAdded,
    "delete_entities": EntitiesDeleted,
    "delete_observations": ObservationsDeleted,
    "delete_relations": RelationsDeleted,
    "read_graph": Graph,
    "search_nodes": Graph,
    "open_nodes": Graph,
}


def output_model(tool: str) -> type[Output]:
    """The output model of `tool`; a tool without one still declares an object."""
    return OUTPUTS.get(tool, Output)
