"""The codebolt key-value, JSON, todo and markdown memories.

- `memory_set` / `memory_get` / `memory_delete`: a key-value store per namespace; values are any
  JSON; deleting a key that is not there is a `memory_not_found` error.
- JSON, todo and markdown memories are records with a generated memory ID, `created_at` and
  `updated_at` (ISO 8601, UTC). Update replaces the object and keeps the ID and `created_at`;
  update or delete of an unknown ID is a `memory_not_found` error, never a silent success.
  Markdown update replaces the metadata only when new metadata is given; JSON and todo updates
  keep the metadata (the spec gives them no metadata parameter).
- `list` takes the filters of `filters.py` (on the object, then its metadata), newest first,
  with `limit` (default 100, at most 1000) and `offset`, so an answer is never unbounded.
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson

from .. import clock, jsontext
from ..errors import InvalidInput
from ..timefmt import iso
from .filters import matches, path_lookup, validate
from .records import Collection, Doc

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
KINDS = {"json": "JSON memory", "todo": "todo", "markdown": "markdown memory"}


def new_memory_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:20]}"


def page(records: list[Doc], limit: int | None, offset: int) -> list[Doc]:
    """One page of `records`; limits are bounded so that no answer is unbounded."""
    limit = DEFAULT_LIMIT if limit is None else limit
    if not 0 <= limit <= MAX_LIMIT or offset < 0:
        raise InvalidInput(f"limit must be 0..{MAX_LIMIT} and offset >= 0")
    return records[offset : offset + limit]


def newest_first(docs: list[Doc], field: str = "updated_at") -> list[Doc]:
    """Sorted by `field`, newest first; ties (same millisecond) by order of writing, newest first."""
    return sorted(reversed(docs), key=lambda d: d[field], reverse=True)


def require_object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidInput(f"{what} must be a JSON object")
    return value


def public(doc: Doc) -> Doc:
    """A record as the tools return it: its id as `memoryId`."""
    out = {"memoryId": doc["id"]}
    out.update((k, v) for k, v in doc.items() if k != "id")
    return out


class DocumentTools:
    """Mixed into `MemoryService`; `self.backend` is the store."""

    backend: Any

    def _kind(self, kind: str, namespace: str) -> Collection:
        return Collection(self.backend, namespace, kind)

    # -- key-value --------------------------------------------------------------------------

    def memory_set(self, key: str, value: Any, namespace: str = "default") -> Doc:
        """Store `value` (any JSON) under `key`, replacing what was there."""
        if not isinstance(key, str) or not key or "\x00" in key or len(key) > 1024:
            raise InvalidInput("key must be 1 to 1024 characters without NUL")
        kv = self._kind("kv", namespace)
        now = iso(clock.now())
        with self.backend.lock(namespace):
            old = kv.get(key)
            doc = {
                "id": key,
                "key": key,
                "value": value,
                "created_at": old["created_at"] if old else now,
                "updated_at": now,
            }
            kv.put(doc)
        # the value as stored (redacted, when the namespace redacts) and as `memory_get` gives it
        # (a Python caller's tuple is a list)
        return _kv_public({**doc, "value": jsontext.loads(orjson.dumps(doc["value"]))})

    def memory_get(self, key: str, namespace: str = "default") -> Doc:
        """The value stored under `key`; `memory_not_found` if there is none."""
        return _kv_public(self._kind("kv", namespace).require(key, "key"))

    def memory_delete(self, key: str, namespace: str = "default") -> Doc:
        """Delete the pair under `key`; `memory_not_found` if there is none."""
        self._kind("kv", namespace).delete(key, "key")
        return {"key": key, "deleted": True}

    def memory_list_keys(self, namespace: str = "default", limit: int | None = None, offset: int = 0) -> list[Doc]:
        """Every key-value pair, newest first."""
        docs = newest_first(list(self._kind("kv", namespace).all()))
        return [_kv_public(d) for d in page(docs, limit, offset)]

    # -- JSON, todo and markdown ------------------------------------------------------------

    def _save(self, kind: str, body: Any, metadata: dict | None, namespace: str) -> Doc:
        now = iso(clock.now())
        doc = {"id": new_memory_id(kind), kind: body, "metadata": metadata or {}, "created_at": now, "updated_at": now}
        self._kind(kind, namespace).put(doc)
        return public(doc)

    def _update(self, kind: str, memory_id: str, body: Any, metadata: dict | None, namespace: str) -> Doc:
        def change(old: Doc) -> Doc:
            meta = old.get("metadata", {}) if metadata is None else metadata
            return {**old, kind: body, "metadata": meta, "updated_at": iso(clock.now())}

        return public(self._kind(kind, namespace).update(memory_id, KINDS[kind], change))

    def _delete(self, kind: str, memory_id: str, namespace: str) -> Doc:
        self._kind(kind, namespace).delete(memory_id, KINDS[kind])
        return {"memoryId": memory_id, "deleted": True}

    def _list(self, kind: str, filters: dict | None, limit: int | None, offset: int, namespace: str) -> list[Doc]:
        validate(filters)
        found = [
            d
            for d in self._kind(kind, namespace).all()
            if matches(path_lookup(_body(d[kind]), d.get("metadata", {}), public(d)), filters)
        ]
        return [public(d) for d in page(newest_first(found), limit, offset)]

    def memory_json_save(self, json: Any, metadata: dict | None = None, namespace: str = "default") -> Doc:
        """Save a JSON object; returns the record with its new `memoryId`."""
        return self._save("json", require_object(json, "json"), metadata, namespace)

    def memory_json_update(self, memory_id: str, json: Any, namespace: str = "default") -> Doc:
        """Replace the JSON object of `memory_id`."""
        return self._update("json", memory_id, require_object(json, "json"), None, namespace)

    def memory_json_delete(self, memory_id: str, namespace: str = "default") -> Doc:
        return self._delete("json", memory_id, namespace)

    def memory_json_list(
        self, filters: dict | None = None, limit: int | None = None, offset: int = 0, namespace: str = "default"
    ) -> list[Doc]:
        return self._list("json", filters, limit, offset, namespace)

    def memory_todo_save(self, todo: Any, metadata: dict | None = None, namespace: str = "default") -> Doc:
        """Save a todo (title, status, priority and any other fields); metadata kept apart."""
        return self._save("todo", _todo(todo), metadata, namespace)

    def memory_todo_update(self, memory_id: str, todo: Any, namespace: str = "default") -> Doc:
        return self._update("todo", memory_id, _todo(todo), None, namespace)

    def memory_todo_delete(self, memory_id: str, namespace: str = "default") -> Doc:
        return self._delete("todo", memory_id, namespace)

    def memory_todo_list(
        self, filters: dict | None = None, limit: int | None = None, offset: int = 0, namespace: str = "default"
    ) -> list[Doc]:
        return self._list("todo", filters, limit, offset, namespace)

    def memory_markdown_save(self, markdown: Any, metadata: dict | None = None, namespace: str = "default") -> Doc:
        return self._save("markdown", _markdown(markdown), metadata, namespace)

    def memory_markdown_update(
        self, memory_id: str, markdown: Any, metadata: dict | None = None, namespace: str = "default"
    ) -> Doc:
        """Replace the markdown of `memory_id` (and its metadata, when given)."""
        return self._update("markdown", memory_id, _markdown(markdown), metadata, namespace)

    def memory_markdown_delete(self, memory_id: str, namespace: str = "default") -> Doc:
        return self._delete("markdown", memory_id, namespace)

    def memory_markdown_list(
        self, filters: dict | None = None, limit: int | None = None, offset: int = 0, namespace: str = "default"
    ) -> list[Doc]:
        return self._list("markdown", filters, limit, offset, namespace)


def _kv_public(doc: Doc) -> Doc:
    return {k: doc[k] for k in ("key", "value", "created_at", "updated_at")}


def _body(value: Any) -> dict[str, Any]:
    """What filters look into: the object itself, or {"markdown": text} for markdown."""
    return value if isinstance(value, dict) else {"markdown": value}


def _todo(todo: Any) -> dict[str, Any]:
    todo = require_object(todo, "todo")
    if "status" in todo and not isinstance(todo["status"], str):
        raise InvalidInput("todo.status must be a string")
    return {"status": "pending", **todo}


def _markdown(markdown: Any) -> str:
    if not isinstance(markdown, str):
        raise InvalidInput("markdown must be a string")
    return markdown
