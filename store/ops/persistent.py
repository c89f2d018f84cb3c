"""Codebolt persistent memories: stored retrieval configurations that `retrieve` executes.

A configuration names a source (`retrieval.source_type` and `source_id`) and how its results
contribute to a prompt (`contribution.format`, `template`, `max_tokens`). Retrieval really runs:

- `vectordb`: hybrid similarity search over the A2E entries of namespace `source_id`; the
  `filters` may give `tier` (semantic, episodic, or empty for both: the default), `agent`
  (episodic tier of that agent only), `tags` (all must match) and `min_score`. Entries with no
  relevance at all to the query are left out, even when fewer than `limit` remain;
- `kv`: the key-value store (`memory_set`) of namespace `source_id`: pairs whose key or value
  contains a query word, ranked by how many, then by recency;
- `eventlog`: the events of episodic memory `source_id` passing the `filters` (any
  `episodic_memory_query_events` filter: `event_type`, `emitting_agent_id`, `team_id`, `tags`,
  `since`, `lastMinutes`, `lastCount`), keeping those that mention a query word, newest last.
  `source_id` is the memory's ID, looked up in this namespace first, then in every other one (IDs
  are generated, so unique); `namespace/ID` names the namespace explicitly;
- `kg`: the knowledge graph of namespace `source_id`: entities matching the query, plus the
  relations that touch them.

Everything is checked when a configuration is created or updated, so that retrieval does not fail
later: the source type's filters (kv and kg take none), an eventlog's episodic memory, and both
templates (a placeholder the template cannot fill is refused, listing those it can).

The query. Without `query_template` it is the caller's `query`, `keywords`, `action` and the
values of `context`, joined by spaces: every input counts (the `query` does not hide the
`keywords`). With a template the configuration decides: the template is filled with `{query}`,
`{keywords}`, `{action}`, `{context}` (or `{context.x}`), `{additional_variables}` (the object as
compact JSON) and each additional variable by name (see `render.py`: substitution only, no code);
the caller's `query` and `keywords` are what to look for, so when the template does not place
them they are appended, while `action` and `context` are hints the template may leave out.
A query with no words (all stopwords or blank) returns no items, except when the caller gave no
input at all (no query, keywords, action or context): that is a browse, returning the source's
first `limit` items in its own order (newest key-value pairs, newest events, the graph's first
entities, the entries with the best own scores).

`limit` (default 10, at most 100) caps the items. They are rendered as `contribution.format`
through `contribution.template` (one line per item; placeholders are the source's item fields and
`index`) and bounded by `max_tokens` in whole items: `items` holds exactly the items the
contribution shows, and `truncated` says whether some were dropped to fit (see `render.py`;
when not even one fits, the contribution is empty, `[]` in json, and `items` is empty).
Retrieving a `disabled` memory is refused; `draft` ones run, so they can be tried out.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .. import clock
from ..errors import Conflict, InvalidInput, Unauthorized
from ..lexical import terms
from ..schemas import flatten_text
from ..timefmt import iso
from .documents import newest_first, page
from .filters import is_number, parse_time
from .records import Collection, Doc
from .render import as_text, check_template, fill, placeholders, render

Status = Literal["active", "disabled", "draft"]


class Retrieval(BaseModel):
    # strict: a limit of true or "5" is refused, not stored as 1 or 5 (outside audit D25), as the
    # filters beside it are checked
    model_config = ConfigDict(extra="forbid", strict=True)

    source_type: Literal["vectordb", "kv", "eventlog", "kg"]
    source_id: str = Field(min_length=1, max_length=1024)
    query_template: str | None = None
    limit: int = Field(10, ge=1, le=100)
    filters: dict[str, Any] = Field(default_factory=dict)


class Contribution(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

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
    """The configuration as stored, once its shape, filters and templates are known to work."""
    try:
        doc = Config.model_validate(fields).model_dump()
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise InvalidInput(f"{where}: {err['msg']}", {"errors": exc.errors(include_url=False)}) from None
    _check_filters(doc["retrieval"]["source_type"], doc["retrieval"]["filters"])
    _check_templates(doc)
    return doc


class PersistentTools:
    """Mixed into `MemoryService`; `self.backend` is the store."""

    backend: Any

    def _configs(self, namespace: str) -> Collection:
        return Collection(self.backend, namespace, "persistent")

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
        agent: str | None = None,
    ) -> Doc:
        """Create a configuration (`id` generated unless given; an existing id is refused).
        `agent`: the caller's agent when it is authenticated; a configuration that names another
        agent's episodic tier is refused, as its retrieval would be (see `persistent_memory_retrieve`)."""
        from .documents import new_memory_id

        fields = {
            "id": id or new_memory_id("pm"), "label": label, "description": description,
            "inputs_scope": inputs_scope or [], "additional_variables": additional_variables or {},
            "retrieval": retrieval, "contribution": contribution, "status": status,
        }  # fmt: skip
        doc = _validated({k: v for k, v in fields.items() if v is not None})  # missing: "Field required"
        _check_agent(doc["retrieval"], agent)
        self._check_source(doc["retrieval"], namespace, agent)
        configs = self._configs(namespace)
        with self.backend.lock(namespace):
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

    def persistent_memory_update(
        self, memory_id: str, namespace: str = "default", agent: str | None = None, **changes: Any
    ) -> Doc:
        """Change the given fields (label, description, status, inputs_scope,
        additional_variables, retrieval, contribution); the others are kept. `agent` as at create:
        a new `retrieval` naming another agent's episodic tier is refused."""
        allowed = set(Config.model_fields) - {"id"}
        unknown = set(changes) - allowed
        if unknown:
            raise InvalidInput(f"cannot update {', '.join(sorted(unknown))}")

        def change(old: Doc) -> Doc:
            given = {k: v for k, v in changes.items() if v is not None}
            base = {k: old[k] for k in Config.model_fields}
            doc = _validated({**base, **given})
            if "retrieval" in given:
                _check_agent(doc["retrieval"], agent)
                self._check_source(doc["retrieval"], namespace, agent)
            return {**doc, "created_at": old["created_at"], "updated_at": iso(clock.now())}

        return self._configs(namespace).update(memory_id, "persistent memory", change)

    def persistent_memory_delete(self, memory_id: str, namespace: str = "default") -> Doc:
        """Delete a configuration (the source it reads is left alone); `memory_not_found` if absent."""
        self._configs(namespace).delete(memory_id, "persistent memory")
        return {"id": memory_id, "deleted": True}

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
        if context is not None and not isinstance(context, dict):
            raise InvalidInput("context must be a JSON object")
        inputs = {"query": query or "", "keywords": keywords, "action": action or "", "context": context or {}}
        text = _query(config, inputs)
        retrieval, contribution = config["retrieval"], config["contribution"]
        if agent is not None and retrieval["source_type"] == "vectordb":
            retrieval = _as_agent(retrieval, agent)
        if agent is not None:
            self._check_source(retrieval, namespace, agent)
        items, line = self._run_source(retrieval, text, any(_given(v) for v in inputs.values()), namespace)
        rendered, tokens, shown = render(
            items, contribution["format"], contribution["template"], line, config["label"], contribution["max_tokens"]
        )
        return {
            "memory_id": memory_id, "label": config["label"], "query": text, "source_type": retrieval["source_type"],
            "source_id": retrieval["source_id"], "items": [items[i] for i in shown], "format": contribution["format"],
            "contribution": rendered, "tokens": tokens, "truncated": len(shown) < len(items),
        }  # fmt: skip

    def _run_source(self, retrieval: Doc, text: str, asked: bool, namespace: str) -> tuple[list[Doc], Any]:
        """(items, line renderer): a search for the query's words, a browse when the caller gave
        no input at all, and nothing when the caller asked for something without words."""
        source = SOURCES[retrieval["source_type"]]
        if terms(text):
            return source(self, retrieval, text, namespace)
        if not asked:
            return source(self, retrieval, "", namespace)
        return [], None

    def _check_source(self, retrieval: Doc, namespace: str, agent: str | None = None) -> None:
        """Refuse a source retrieval could not read, or (for an authenticated `agent`) one of
        another namespace: at create, at update and before each retrieval."""
        if retrieval["source_type"] == "eventlog":
            source_namespace = self._event_source(retrieval["source_id"], namespace, own_only=agent is not None)[0]
        else:
            source_namespace = retrieval["source_id"]
        _own_namespace(source_namespace, namespace, agent)

    def _event_source(self, source_id: str, namespace: str, own_only: bool = False) -> tuple[str, str]:
        """(namespace, memory ID) of an eventlog source: `source_id` in this namespace, else
        `namespace/ID`, else the one namespace holding that ID. `own_only` (an authenticated
        caller): this namespace only, so that the answer says nothing of the others."""
        if own_only:
            memory_id = source_id.removeprefix(f"{namespace}/")
            if self._episodes(namespace).get(memory_id) is None:  # type: ignore[attr-defined]
                raise InvalidInput(f"retrieval.source_id: no episodic memory {source_id!r} in namespace {namespace!r}")
            return namespace, memory_id
        tried = [(namespace, source_id)]
        if "/" in source_id:
            named, memory_id = source_id.rsplit("/", 1)
            if named in self.backend.namespaces():
                tried.append((named, memory_id))
        for ns, memory_id in tried:
            if self._episodes(ns).get(memory_id) is not None:  # type: ignore[attr-defined]
                return ns, memory_id
        holders = [
            ns
            for ns in self.backend.namespaces()
            if ns != namespace and self._episodes(ns).get(source_id) is not None  # type: ignore[attr-defined]
        ]
        if len(holders) == 1:
            return holders[0], source_id
        if holders:
            raise InvalidInput(
                f"retrieval.source_id: episodic memory {source_id!r} is in namespaces {', '.join(map(repr, holders))}: "
                "write namespace/ID"
            )
        raise InvalidInput(
            f"retrieval.source_id: no episodic memory {source_id!r} in namespace {namespace!r} or any other "
            "(give its memoryId, or namespace/memoryId)"
        )

    # -- sources ----------------------------------------------------------------------------

    def _from_vectordb(self, retrieval: Doc, text: str, namespace: str) -> tuple[list[Doc], Any]:
        f = retrieval["filters"]
        entries = self.a2e.search_namespace(  # type: ignore[attr-defined]
            retrieval["source_id"], text, tier=f.get("tier", ""), agent=f.get("agent"),
            tags=f.get("tags") or [], limit=retrieval["limit"], min_score=f.get("min_score", 0.0),
        )  # fmt: skip
        if text:  # a search: entries that do not match at all are not results, even to fill `limit`
            entries = [e for e in entries if e["relevance"] > 0]
        items = [{k: e[k] for k in ITEM_FIELDS["vectordb"]} for e in entries]
        return items, lambda item: as_text(item["content"])

    def _from_kv(self, retrieval: Doc, text: str, namespace: str) -> tuple[list[Doc], Any]:
        wanted = set(terms(text))
        scored = []
        for doc in Collection(self.backend, retrieval["source_id"], "kv").all():
            hits = len(wanted & set(terms(f"{doc['key']} {flatten_text(doc['value'], keys=True)}")))
            if hits or not wanted:
                scored.append((hits, doc["updated_at"], doc))
        scored.sort(key=lambda s: (s[0], s[1]), reverse=True)
        items = [{"key": d["key"], "value": d["value"], "matches": h} for h, _, d in scored[: retrieval["limit"]]]
        return items, lambda item: f"{item['key']}: {as_text(item['value'])}"

    def _from_eventlog(self, retrieval: Doc, text: str, namespace: str) -> tuple[list[Doc], Any]:
        source_namespace, memory_id = self._event_source(retrieval["source_id"], namespace)
        events = self.episodic_memory_query_events(  # type: ignore[attr-defined]
            memory_id=memory_id, namespace=source_namespace, **_event_filters(retrieval["filters"])
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
VECTORDB_FILTERS = ("tier", "agent", "tags", "min_score")
# The fields of one item of each source: what a contribution template may place (plus `index`).
ITEM_FIELDS = {
    "vectordb": ("key", "content", "tier", "tags", "relevance"),
    "kv": ("key", "value", "matches"),
    "eventlog": ("eventId", "memoryId", "event_type", "emitting_agent_id", "team_id", "tags", "payload", "timestamp"),
    "kg": ("type", "name", "entityType", "observations", "from", "to", "relationType"),
}
QUERY_INPUTS = ("query", "keywords", "action", "context")


def _event_filters(filters: dict[str, Any]) -> dict[str, Any]:
    return {EVENT_FILTERS[k]: v for k, v in filters.items()}


def _check_filters(source_type: str, filters: dict[str, Any]) -> None:
    """Refuse filters the source would reject (or silently ignore) at retrieval."""
    if source_type in ("kv", "kg"):
        if filters:
            raise InvalidInput(f"retrieval.filters: a {source_type} source takes no filters (got {', '.join(filters)})")
    elif source_type == "vectordb":
        _check_vectordb_filters(filters)
    else:
        _check_event_filters(filters)


def _check_vectordb_filters(filters: dict[str, Any]) -> None:
    _only(filters, VECTORDB_FILTERS, "vectordb")
    tier, agent, min_score = filters.get("tier", ""), filters.get("agent"), filters.get("min_score", 0.0)
    if tier not in ("", "semantic", "episodic"):
        raise InvalidInput("retrieval.filters.tier: must be semantic, episodic or empty (both)")
    if agent is not None and (not isinstance(agent, str) or not agent):
        raise InvalidInput("retrieval.filters.agent: must be a non-empty string")
    if agent is not None and tier == "semantic":
        raise InvalidInput("retrieval.filters.agent: selects episodic entries, but tier is semantic")
    _string_list(filters.get("tags", []), "tags")
    if not is_number(min_score) or not 0 <= min_score <= 1:
        raise InvalidInput("retrieval.filters.min_score: must be a number from 0 to 1")


def _check_event_filters(filters: dict[str, Any]) -> None:
    _only(filters, tuple(EVENT_FILTERS), "eventlog")
    for name in ("lastMinutes", "lastCount"):
        if name in filters and _snake(name) in filters:
            raise InvalidInput(f"retrieval.filters: give {name} or {_snake(name)}, not both")
    for name, value in filters.items():
        field = EVENT_FILTERS[name]
        if field in ("event_type", "emitting_agent_id", "team_id") and not isinstance(value, str):
            raise InvalidInput(f"retrieval.filters.{name}: must be a string")
        if field == "tags":
            _string_list(value, name)
        if field == "since" and parse_time(value) is None:
            raise InvalidInput(f"retrieval.filters.{name}: must be an ISO 8601 timestamp, not {value!r}")
        if field == "last_minutes" and (not is_number(value) or value < 0):
            raise InvalidInput(f"retrieval.filters.{name}: must be a number >= 0")
        if field == "last_count" and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise InvalidInput(f"retrieval.filters.{name}: must be an integer >= 0")


def _only(filters: dict[str, Any], allowed: tuple[str, ...], source_type: str) -> None:
    unknown = [k for k in filters if k not in allowed]
    if unknown:
        raise InvalidInput(
            f"retrieval.filters: unknown {source_type} filter {', '.join(unknown)}; allowed: {', '.join(allowed)}"
        )


def _string_list(value: Any, name: str) -> None:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidInput(f"retrieval.filters.{name}: must be a list of strings")


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


def _check_templates(config: Doc) -> None:
    """Refuse a template with a placeholder it could never fill (see the module docstring)."""
    variables = config["additional_variables"]
    query_template = config["retrieval"]["query_template"]
    if query_template:
        known = {**variables, "additional_variables": variables}
        check_template(query_template, "retrieval.query_template", set(QUERY_INPUTS), known, frozenset({"context"}))
    line_template = config["contribution"]["template"]
    if line_template:
        fields = {*ITEM_FIELDS[config["retrieval"]["source_type"]], "index"}
        check_template(line_template, "contribution.template", fields, {})


def _check_agent(retrieval: Doc, agent: str | None) -> None:
    """Refuse at create and update what retrieval by `agent` (authenticated) would refuse."""
    if agent is not None and retrieval["source_type"] == "vectordb":
        _as_agent(retrieval, agent)


def _own_namespace(source_namespace: str, namespace: str, agent: str | None) -> None:
    """An authenticated caller (`agent`) reads sources of its own namespace only: the server
    that authenticates it serves that one namespace (`mem serve-mcp` with MEM_AUTH_SECRET)."""
    if agent is not None and source_namespace != namespace:
        raise Unauthorized(
            f"this persistent memory reads namespace {source_namespace!r}; an authenticated caller "
            f"reads its own, {namespace!r}"
        )


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


def _query(config: Doc, inputs: dict[str, Any]) -> str:
    """The query text of a retrieval (composed as the module docstring says)."""
    template = config["retrieval"]["query_template"]
    if not template:
        return _joined(_query_words(inputs[name]) for name in QUERY_INPUTS)
    variables = config["additional_variables"]
    filled = fill(template, {**variables, "additional_variables": variables, **inputs})
    placed = {name.split(".")[0] for name in placeholders(template)}
    unplaced = [_query_words(inputs[name]) for name in ("query", "keywords") if name not in placed]
    return _joined([filled, *unplaced])


def _query_words(value: Any) -> str:
    """An input as query text: strings as they are, lists and objects as their values' words."""
    return value if isinstance(value, str) else flatten_text(value)


def _joined(parts: Any) -> str:
    return " ".join(p.strip() for p in parts if p and p.strip())


def _given(value: Any) -> bool:
    """Whether the caller gave this input: a blank string ("   ") was given (and has no words:
    the retrieval returns nothing); only an empty one counts as not given (the browse)."""
    return value != "" if isinstance(value, str) else bool(value)
