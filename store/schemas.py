"""What kind of records a shard holds: whether they are searchable, and their searchable text."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import islice
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


def text_values(value: Any, budget: int) -> Iterator[str]:
    """The strings and numbers of a JSON value, in order, as text, within `budget` characters: a
    value costs its length plus 1 (a null or a container 1), so no shape of value is walked past
    the budget. For what reads only the start of an entry's text."""
    stack = [value]
    while stack and budget > 0:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(reversed(list(islice(item.values(), budget))))
        elif isinstance(item, list):
            stack.extend(reversed(item[:budget]))
        elif isinstance(item, str) or (isinstance(item, (int, float)) and not isinstance(item, bool)):
            text = item if isinstance(item, str) else str(item)
            yield text[:budget]
            budget -= len(text)
        budget -= 1


def entry_text(doc: dict[str, Any]) -> str:
    """An A2E entry is found by its content, its key's values and its tags. The key a store
    made up from the content's hash is left out: sixteen hex digits are no words, and fused
    into the embedded text they pulled an entry's vector away from its meaning (a cosine of
    0.39 instead of 0.61 for the README's staging question) and hid near-copies from each other."""
    key = doc.get("key")
    parts = (
        flatten_text(doc.get("content")),
        "" if is_content_hash(key) else flatten_text(key),
        " ".join(doc.get("tags", ())),
    )
    return " ".join(p for p in parts if p)


def is_content_hash(key: Any) -> bool:
    """Whether `key` is the default key `{"hash": <16 hex digits>}` (see `ops/a2e.content_key`)."""
    if not isinstance(key, dict) or len(key) != 1 or not isinstance(key.get("hash"), str):
        return False
    value = key["hash"]
    return len(value) == 16 and all(c in "0123456789abcdef" for c in value)


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
