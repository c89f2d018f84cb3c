"""Codebolt persistent memories: stored retrieval configurations that `retrieve` executes.

A configuration names a source (`retrieval.source_type` and `source_id`) and how its results
contribute to a prompt (`contribution.format`, `template`, `max_tokens`). Retrieval really runs:

- `vectordb`: hybrid similarity search over the A2E entries of namespace `source_id`; the
  `filters` may give `tier` (semantic, episodic, or empty for both: the default), `agent`
  (episodic tier of that agent only), `tags` (all must match) and `min_score`;
- `kv`: the key-value store (`memory_set`) of namespace `source_id`: pairs whose key or value
  contains a query word, ranked by how many, then by recency (every pair when there is no query);
- `eventlog`: the events of episodic memory `source_id` (in this namespace) passing the
  `filters` (any `episodic_memory_query_events` filter), keeping those that mention a query word,
  newest last;
- `kg`: the knowledge graph of namespace `source_id`: entities matching the query, plus the
  relations that touch them.

The query is `query`, else `query_template` filled with `keywords`, `action`, `context` and
`additional_variables` (see `render.py`: substitution only, no code), else the keywords joined.
`limit` (default 10, at most 100) caps the items. The items are rendered as `contribution.format`
through `contribution.template` (one line per item; placeholders are the item's fields and
`index`) and cut to `max_tokens` tokens, with `truncated` saying whether anything was cut.
Retrieving a `disabled` memory is refused; `draft` ones run, so they can be tried out.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from . import clock
from .documents import newest_first, page
from .errors import Conflict, InvalidInput, Unauthorized
from .lexical import terms
from .records import Collection, Doc
from .render import as_text, fill, render
from .schemas import flatten_text
from .timefmt import iso

Status = Literal["active", "disabled", "draft"]


class Retrieval(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source_type: Literal["vectordb", "kv", "eventlog", "kg"]
    source_id: str = Field(min_length=1, max_length=1024)
    query_template: str | None = None
    limit: int = Field(10, ge=1, le=100)
    filters: dict[str, Any] = Field(default_factory=dict)


class Contribution(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: Literal["text", "json", "markdown"]
    template: str | None = None
    max_tokens: int | None = Field(None, ge=1)


class Config(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=1024)
    label: str = Field(min_length=1)
    description: str = ""
    inputs_scope: list[str] = Field(default_factory=list)
    additional_variables: dict[str, Any] = Field(default_factory=dict)
    retrieval: Retrieval
    contribution: Contribution
    status: Status = "active"


def _validated(fields: dict[str, Any]) -> dict[str, Any]:
    try:
        return Config.model_validate(fields).model_dump()
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise InvalidInput(f"{where}: {err['msg']}", {"errors": exc.errors(include_url=False)}) from None


class PersistentTools:
    """Mixed into `MemoryService`; `self.engine` is the store."""

    engine: Any

    def _configs(self, namespace: str) -> Collection:
        return Collection(self.engine, namespace, "persistent")

    def persistent_memory_create(
        self,
        label: str | None = None,
        retrieval: dict[str, Any] | None = None,
        contribution: dict[str, Any] | None = None,
        id: str | None = None,
        description: str = "",
        inputs_scope: list[str] | None = None,
        additional_variables: dict[str, Any] | None = None,
        status: str = "active",
        namespace: str = "default",
    ) -> Doc:
        """Create a configuration (`id` generated unless given; an existing id is refused)."""
        from .documents import new_memory_id

        fields = {
            "id": id or new_memory_id("pm"), "label": label, "description": description,
            "inputs_scope": inputs_scope or [], "additional_variables": additional_variables or {},
            "retrieval": retrieval, "contribution": contribution, "status": status,
        }  # fmt: skip
        doc = _validated({k: v for k, v in fields.items() if v is not None})  # missing: "Field required"
        configs = self._configs(namespace)
        with self.engine.lock(namespace):
            if configs.get(doc["id"]) is not None:
                raise Conflict(f"a persistent memory with id {doc['id']!r} exists already")
            now = iso(clock.now())
            doc |= {"created_at": now, "updated_at": now}
            configs.put(doc)
        return doc

    def persistent_memory_get(self, memory_id: str, namespace: str = "default") -> Doc:
        return self._configs(namespace).require(memory_id, "persistent memory")

    def persistent_memory_list(
        self,
        input_scope: str | None = None,
        active_only: bool = False,
        limit: int | None = None,
        offset: int = 0,
        namespace: str = "default",
    ) -> list[Doc]:
        """Configurations, newest first; `input_scope` keeps those listing it in `inputs_scope`."""
        found = [
            doc
            for doc in self._configs(namespace).all()
            if (input_scope is None or input_scope in doc["inputs_scope"])
            and (not active_only or doc["status"] == "active")
        ]
        return page(newest_first(found, "created_at"), limit, offset)

    def persistent_memory_update(self, memory_id: str, namespace: str = "default", **changes: Any) -> Doc:
        """Change the given fields (label, description, status, inputs_scope,
        additional_variables, retrieval, contribution); the others are kept."""
        allowed = set(Config.model_fields) - {"id"}
        unknown = set(changes) - allowed
        if unknown:
            raise InvalidInput(f"cannot update {', '.join(sorted(unknown))}")

        def change(old: Doc) -> Doc:
            given = {k: v for k, v in changes.items() if v is not None}
            base = {k: old[k] for k in Config.model_fields}
            return {**_validated({**base, **given}), "created_at": old["created_at"], "updated_at": iso(clock.now())}

        return self._configs(namespace).update(memory_id, "persistent memory", change)

    def persistent_memory_retrieve(
        self,
        memory_id: str,
        keywords: list[str] | None = None,
        action: str | None = None,
        context: dict[str, Any] | None = None,
        query: str | None = None,
        namespace: str = "default",
        agent: str | None = None,
    ) -> Doc:
        """Run the configuration's retrieval and render its contribution. `agent`: the caller's
        agent when it is authenticated; a `vectordb` source then sees only that agent's episodic
        tier (and the semantic tier), and a configuration naming another agent is refused."""
        config = self.persistent_memory_get(memory_id, namespace)
        if config["status"] == "disabled":
            raise Conflict(f"persistent memory {memory_id!r} is disabled")
        keywords = keywords or []
        if not isinstance(keywords, list) or not all(isinstance(k, str) for k in keywords):
            raise InvalidInput("keywords must be a list of strings")
        text = _query(config, keywords, action, context or {}, query)
        retrieval, contribution = config["retrieval"], config["contribution"]
        if agent is not None and retrieval["source_type"] == "vectordb":
            retrieval = _as_agent(retrieval, agent)
        items, line = SOURCES[retrieval["source_type"]](self, retrieval, text, namespace)
        rendered, tokens, truncated = render(
            items, contribution["format"], contribution["template"], line, config["label"], contribution["max_tokens"]
        )
        return {
            "memory_id": memory_id, "label": config["label"], "query": text, "source_type": retrieval["source_type"],
            "source_id": retrieval["source_id"], "items": items, "format": contribution["format"],
            "contribution": rendered, "tokens": tokens, "truncated": truncated,
        }  # fmt: skip

    # -- sources ----------------------------------------------------------------------------

    def _from_vectordb(self, retrieval: Doc, text: str, namespace: str) -> tuple[list[Doc], Any]:
        f = retrieval["filters"]
        entries = self.a2e.search_namespace(  # type: ignore[attr-defined]
            retrieval["source_id"], text, tier=f.get("tier", ""), agent=f.get("agent"),
            tags=f.get("tags") or [], limit=retrieval["limit"], min_score=f.get("min_score", 0.0),
        )  # fmt: skip
        items = [{k: e[k] for k in ("key", "content", "tier", "tags", "relevance")} for e in entries]
        return items, lambda item: as_text(item["content"])

    def _from_kv(self, retrieval: Doc, text: str, namespace: str) -> tuple[list[Doc], Any]:
        wanted = set(terms(text))
        scored = []
        for doc in Collection(self.engine, retrieval["source_id"], "kv").all():
            hits = len(wanted & set(terms(f"{doc['key']} {flatten_text(doc['value'], keys=True)}")))
            if hits or not wanted:
                scored.append((hits, doc["updated_at"], doc))
        scored.sort(key=lambda s: (s[0], s[1]), reverse=True)
        items = [{"key": d["key"], "value": d["value"], "matches": h} for h, _, d in scored[: retrieval["limit"]]]
        return items, lambda item: f"{item['key']}: {as_text(item['value'])}"

    def _from_eventlog(self, retrieval: Doc, text: str, namespace: str) -> tuple[list[Doc], Any]:
        events = self.episodic_memory_query_events(  # type: ignore[attr-defined]
            memory_id=retrieval["source_id"], namespace=namespace, **_event_filters(retrieval["filters"])
        )
        wanted = set(terms(text))
        if wanted:
            events = [
                e for e in events if wanted & set(terms(flatten_text([e["event_type"], e["payload"], e["tags"]])))
            ]
        items = events[-retrieval["limit"] :]
        return (
            items,
            lambda e: f"[{e['timestamp']}] {e['event_type']} by {e['emitting_agent_id']}: {as_text(e['payload'])}",
        )

    def _from_kg(self, retrieval: Doc, text: str, namespace: str) -> tuple[list[Doc], Any]:
        if not text.strip():
            graph = self.kg_read_graph(limit=retrieval["limit"], namespace=retrieval["source_id"])  # type: ignore[attr-defined]
        else:
            graph = self.kg_search_nodes(  # type: ignore[attr-defined]
                text, limit=retrieval["limit"], namespace=retrieval["source_id"], both_ends=False
            )
        items = [{"type": "entity", **e} for e in graph["entities"]]
        items += [{"type": "relation", **r} for r in graph["relations"]]
        return items, _kg_line


SOURCES = {
    "vectordb": PersistentTools._from_vectordb,
    "kv": PersistentTools._from_kv,
    "eventlog": PersistentTools._from_eventlog,
    "kg": PersistentTools._from_kg,
}
EVENT_FILTERS = {
    "event_type": "event_type", "emitting_agent_id": "emitting_agent_id", "team_id": "team_id", "tags": "tags",
    "since": "since", "lastMinutes": "last_minutes", "last_minutes": "last_minutes",
    "lastCount": "last_count", "last_count": "last_count",
}  # fmt: skip


def _event_filters(filters: dict[str, Any]) -> dict[str, Any]:
    unknown = set(filters) - set(EVENT_FILTERS)
    if unknown:
        raise InvalidInput(f"unknown eventlog filters: {', '.join(sorted(unknown))}")
    return {EVENT_FILTERS[k]: v for k, v in filters.items()}


def _as_agent(retrieval: Doc, agent: str) -> Doc:
    """A `vectordb` retrieval limited to `agent`'s episodic tier (an authenticated caller's)."""
    named = retrieval["filters"].get("agent")
    if named not in (None, agent):
        raise Unauthorized(f"this persistent memory reads agent {named!r}'s episodic tier; the caller is {agent!r}")
    return {**retrieval, "filters": {**retrieval["filters"], "agent": agent}}


def _kg_line(item: Doc) -> str:
    if item["type"] == "relation":
        return f"{item['from']} {item['relationType']} {item['to']}"
    return f"{item['name']} ({item['entityType']}): {'; '.join(item['observations'])}"


def _query(config: Doc, keywords: list[str], action: str | None, context: dict[str, Any], query: str | None) -> str:
    if query:
        return query
    template = config["retrieval"]["query_template"]
    if template:
        variables = {**config["additional_variables"], "keywords": keywords, "action": action or "", "context": context}
        return fill(template, variables)
    return " ".join(keywords)
