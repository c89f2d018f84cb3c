"""A knowledge graph compatible with the official MCP memory server's model.

Entities (`name`, `entityType`, `observations`) and relations (`from`, `to`, `relationType`),
per namespace. As in that server: creating an entity or relation that exists is a no-op,
deleting an entity removes its relations, and `mem kg import` reads its JSONL file (one
`{"type": "entity", ...}` or `{"type": "relation", ...}` object per line) so its users can move
over. Beyond it: relations must join entities that exist, and search ranks entities by the
store's hybrid similarity (BM25 and vectors over name, type and observations), with every
case-insensitive substring match (the MCP server's own search) ranked first.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from .. import clock
from ..backends.base import Filters
from ..errors import InvalidInput, NotFound, missing_or_wrong, refuse_unknown
from ..ndjson import objects
from ..redact import redact
from .documents import MAX_LIMIT, page
from .records import Collection, Doc

SEARCH_LIMIT = 10
SIMILARITY_FLOOR = 0.3  # below this cosine, an entity with no word in common is not a match


def relation_id(rel: Doc) -> str:
    return orjson.dumps([rel["from"], rel["relationType"], rel["to"]]).decode()


class GraphTools:
    """Mixed into `MemoryService`; `self.backend` is the store."""

    backend: Any

    def _entities(self, namespace: str) -> Collection:
        return Collection(self.backend, namespace, "kg_entities", schema="entities")

    def _relations(self, namespace: str) -> Collection:
        return Collection(self.backend, namespace, "kg_relations")

    def kg_create_entities(self, entities: list[Any], namespace: str = "default") -> list[Doc]:
        """Create entities; those whose name exists already are left alone. Returns the new ones."""
        store = self._entities(namespace)
        with self.backend.lock(namespace):
            fresh = {e["name"]: e for e in map(_entity, _list(entities, "entities")) if store.get(e["name"]) is None}
            docs = [{"id": name, **e} for name, e in fresh.items()]
            if docs:
                store.put(*docs)  # masks them in place when the namespace redacts: the reply is what was stored
        return [{k: v for k, v in doc.items() if k != "id"} for doc in docs]

    def kg_create_relations(
        self, relations: list[Any], namespace: str = "default", skip_dangling: bool = False
    ) -> list[Doc]:
        """Create relations between existing entities; existing relations are left alone. A
        relation to an unknown entity is an error, or skipped with `skip_dangling`."""
        entities, store = self._entities(namespace), self._relations(namespace)
        with self.backend.lock(namespace):
            fresh: dict[str, Doc] = {}
            for rel in map(_relation, _list(relations, "relations")):
                missing = [end for end in (rel["from"], rel["to"]) if entities.get(end) is None]
                if missing and skip_dangling:
                    continue
                if missing:
                    raise NotFound(f"no entity named {missing[0]!r}: create it first")
                if store.get(relation_id(rel)) is None:
                    fresh[relation_id(rel)] = rel
            if fresh:
                store.put(*({"id": rid, **rel} for rid, rel in fresh.items()))
        return list(fresh.values())

    def kg_add_observations(self, observations: list[Any], namespace: str = "default") -> list[Doc]:
        """Add observations to entities; returns, per entity, the ones that were new."""
        store = self._entities(namespace)
        added = []
        items = [_object(i, ("entityName", "contents"), "observation") for i in _list(observations, "observations")]
        with self.backend.lock(namespace):
            for item in items:
                name, contents = _field(item, "entityName"), _strings(item.get("contents"), "contents")
                if self.backend.redacts(namespace):  # compared and answered as they will be stored
                    contents = [redact(c) for c in contents]
                old = store.require(name, "entity")
                new = [c for c in dict.fromkeys(contents) if c not in old["observations"]]
                store.put({**old, "observations": old["observations"] + new})
                added.append({"entityName": name, "addedObservations": new})
        return added

    def kg_delete_entities(self, entity_names: list[str], namespace: str = "default") -> dict[str, int]:
        """Delete entities and every relation that touches them."""
        names = set(_strings(entity_names, "entityNames"))
        with self.backend.lock(namespace):
            deleted = self._entities(namespace).delete_many(sorted(names))
            relations = self._relations(namespace)
            touching = [r["id"] for r in relations.all() if r["from"] in names or r["to"] in names]
            removed = relations.delete_many(touching)
        return {"deletedEntities": deleted, "deletedRelations": removed}

    def kg_delete_observations(self, deletions: list[Any], namespace: str = "default") -> list[Doc]:
        store = self._entities(namespace)
        done = []
        items = [_object(i, ("entityName", "observations"), "deletion") for i in _list(deletions, "deletions")]
        with self.backend.lock(namespace):
            for item in items:
                name, gone = _field(item, "entityName"), set(_strings(item.get("observations"), "observations"))
                old = store.require(name, "entity")
                store.put({**old, "observations": [o for o in old["observations"] if o not in gone]})
                done.append({"entityName": name, "deletedObservations": sorted(gone & set(old["observations"]))})
        return done

    def kg_delete_relations(self, relations: list[Any], namespace: str = "default") -> dict[str, int]:
        ids = [relation_id(_relation(r)) for r in relations]
        return {"deletedRelations": self._relations(namespace).delete_many(ids)}

    def kg_read_graph(self, limit: int | None = None, offset: int = 0, namespace: str = "default") -> Doc:
        """Entities (a page of them) and the relations among them."""
        entities = page(sorted(self._entities(namespace).all(), key=lambda e: e["name"]), limit, offset)
        return self._subgraph(entities, namespace, both_ends=True)

    def kg_open_nodes(self, names: list[str], namespace: str = "default") -> Doc:
        """The named entities (unknown names are skipped) and the relations among them."""
        store = self._entities(namespace)
        found = [doc for name in dict.fromkeys(_strings(names, "names")) if (doc := store.get(name)) is not None]
        return self._subgraph(found, namespace, both_ends=True)

    def kg_search_nodes(
        self, query: str, limit: int = SEARCH_LIMIT, namespace: str = "default", both_ends: bool = True
    ) -> Doc:
        """Entities matching `query` by substring or similarity, best first, and their relations."""
        if not isinstance(query, str) or not query.strip():
            raise InvalidInput("query must be a non-empty string")
        if not 0 <= limit <= MAX_LIMIT:  # as `mem kg search --limit`: a negative one is refused, not an empty answer
            raise InvalidInput(f"limit must be 0..{MAX_LIMIT}")
        return self._subgraph(self._ranked_entities(query, limit, namespace), namespace, both_ends)

    def kg_import(self, lines: Iterable[str | bytes], namespace: str = "default") -> dict[str, int]:
        """Load an MCP memory server JSONL file (entities first, so relations find their ends)."""
        entities: list[Any] = []
        relations: list[Any] = []
        for number, item in objects(lines):
            kind = item.pop("type", None)
            if kind not in ("entity", "relation"):
                raise InvalidInput(f"line {number}: expected an object with type entity or relation")
            # another tool's file: fields this model does not have are left behind, not refused
            fields = ENTITY_FIELDS if kind == "entity" else RELATION_FIELDS
            (entities if kind == "entity" else relations).append({k: v for k, v in item.items() if k in fields})
        made = self.kg_create_entities(entities, namespace)
        linked = self.kg_create_relations(relations, namespace, skip_dangling=True)
        return {"entities": len(made), "relations": len(linked), "lines": len(entities) + len(relations)}

    def _ranked_entities(self, query: str, limit: int, namespace: str) -> list[Doc]:
        """Substring matches first, then entities sharing a word or close in meaning."""
        shard = self._entities(namespace).shard
        parts = shard.search(clock.now(), Filters(), self.backend.embed([query])[0], query, k=limit, exhaustive=True)
        needle, scored = query.lower(), []
        for p in parts:
            assert p.vector is not None and p.lexical is not None
            for i in range(len(p.rows)):
                doc = p.doc(i)
                exact = needle in _haystack(doc)
                if exact or p.lexical[i] > 0 or p.vector[i] >= SIMILARITY_FLOOR:
                    scored.append((float(p.relevance[i]) + exact, doc))
        scored.sort(key=lambda pair: (-pair[0], pair[1]["name"]))
        return [doc for _, doc in scored[:limit]]

    def _subgraph(self, entities: list[Doc], namespace: str, both_ends: bool) -> Doc:
        names = {e["name"] for e in entities}
        relations = [
            _public_relation(r)
            for r in self._relations(namespace).all()
            if (r["from"] in names and r["to"] in names) or (not both_ends and (r["from"] in names or r["to"] in names))
        ]
        return {"entities": [_public_entity(e) for e in entities], "relations": relations}


def _haystack(doc: Doc) -> str:
    return " ".join([doc["name"], doc["entityType"], *doc["observations"]]).lower()


def _public_entity(doc: Doc) -> Doc:
    return {k: doc[k] for k in ("name", "entityType", "observations")}


def _public_relation(doc: Doc) -> Doc:
    return {k: doc[k] for k in ("from", "to", "relationType")}


def _list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise InvalidInput(f"{what} must be a list")
    return value


def _field(item: Any, name: str) -> str:
    if not isinstance(item, dict) or not isinstance(item.get(name), str) or not item[name]:
        raise missing_or_wrong(name, item if isinstance(item, dict) else {}, "a non-empty string")
    return item[name]


def _strings(value: Any, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidInput(f"{what} must be a list of strings")
    return value


ENTITY_FIELDS = ("name", "entityType", "observations")
RELATION_FIELDS = ("from", "to", "relationType")


def _object(item: Any, fields: tuple[str, ...], what: str) -> Any:
    """`item`, refused if it is an object with a key the model does not have (it would be lost)."""
    if isinstance(item, dict):
        refuse_unknown(item, fields, f"{what} field")
    return item


def _entity(item: Any) -> Doc:
    item = _object(item, ENTITY_FIELDS, "entity")
    return {
        "name": _field(item, "name"),
        "entityType": _field(item, "entityType"),
        "observations": list(dict.fromkeys(_strings(item.get("observations", []), "observations"))),
    }


def _relation(item: Any) -> Doc:
    item = _object(item, RELATION_FIELDS, "relation")
    return {"from": _field(item, "from"), "to": _field(item, "to"), "relationType": _field(item, "relationType")}
