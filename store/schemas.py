"""What kind of records a shard holds: whether they are searchable, and their searchable text."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def flatten_text(value: Any, keys: bool = False) -> str:
    """The words of a JSON value: strings and numbers of any depth (and object keys if `keys`)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return " ".join((f"{k} " if keys else "") + flatten_text(v, keys) for k, v in value.items())
    if isinstance(value, list):
        return " ".join(flatten_text(v, keys) for v in value)
    if value is None or isinstance(value, bool):
        return ""
    return str(value)


def entry_text(doc: dict[str, Any]) -> str:
    """An A2E entry is found by its content, its key's values and its tags."""
    parts = (flatten_text(doc.get("content")), flatten_text(doc.get("key")), " ".join(doc.get("tags", ())))
    return " ".join(p for p in parts if p)


def entity_text(doc: dict[str, Any]) -> str:
    """A knowledge-graph entity is found by its name, type and observations."""
    return " ".join([doc.get("name", ""), doc.get("entityType", ""), *doc.get("observations", ())])


def record_text(doc: dict[str, Any]) -> str:
    """Other records (kv values, JSON, todos, markdown) are found by all of their words."""
    return flatten_text({k: v for k, v in doc.items() if k not in ("id", "created_at", "updated_at")})


def indexed_text(doc: dict[str, Any]) -> str:
    """A LangGraph item (`store/langgraph.py`) is found by the text its put chose to index."""
    return doc.get("text") or ""


@dataclass(frozen=True)
class Schema:
    name: str
    indexed: bool
    text: Callable[[dict[str, Any]], str] = record_text


SCHEMAS = {
    s.name: s
    for s in (
        Schema("entries", indexed=True, text=entry_text),
        Schema("entities", indexed=True, text=entity_text),
        Schema("documents", indexed=True, text=record_text),
        Schema("records", indexed=False),
        Schema("langgraph", indexed=True, text=indexed_text),
    )
}
