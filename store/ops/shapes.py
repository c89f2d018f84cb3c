"""What a stored record of each kind holds, for `mem import`: a record that the tools reading its
kind would trip on (a todo without its todo, an entity without a name) is refused with its line
number before anything is written, as `memory/store` refuses an A2E entry, rather than taken and
left to fail every later read of its shard. Each check is the one the kind's own tool applies
to what it is given (`documents.py`, `episodes.py`, `graph.py`, `persistent.py`), plus the
fields the tool adds itself (its id, its times). The A2E tiers are checked by `a2e.py`."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..errors import InvalidInput
from ..timefmt import iso
from .documents import _markdown, _todo, require_object
from .episodes import EVENT_FIELDS, _event, _title
from .filters import parse_time
from .graph import ENTITY_FIELDS, RELATION_FIELDS, _entity, _relation, relation_id
from .persistent import _validated

Doc = dict[str, Any]
TIMES = ("created_at", "updated_at")


def record_problem(kind: str, scope: list[str], doc: Doc) -> str | None:
    """Why `doc` cannot be a record of `kind` in `scope`, or None (also for the A2E tiers)."""
    if kind == "langgraph":
        return _langgraph_problem(scope, doc)
    check = CHECKS.get(kind)
    if check is None:
        return None
    try:
        check(scope, doc)
    except InvalidInput as exc:
        return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind} record: {exc.message}"
    return None


def _langgraph_problem(scope: list[str], doc: dict[str, Any]) -> str | None:
    """Why a record of kind `langgraph` (`store/langgraph.py`'s format) cannot be a LangGraph item,
    or None: `mem import` refuses it rather than leave an item every read would trip on."""
    if any("." in label for label in scope):
        return "a LangGraph namespace label holds no period"
    if doc.get("key") != doc.get("id"):
        return "a LangGraph item's key is its id"
    if not isinstance(doc.get("value"), dict):
        return "a LangGraph item's value is an object"
    if doc.get("text") is not None and not isinstance(doc["text"], str):
        return "a LangGraph item's text is a string or null"
    for field in ("created_at", "updated_at"):
        if not _finite(doc.get(field)):
            return f"a LangGraph item's {field} is a number (Unix seconds)"
    if doc.get("expires_at") is not None and not _finite(doc["expires_at"]):
        return "a LangGraph item's expires_at is a number or null"
    ttl = doc.get("ttl")
    if ttl is not None and not (_finite(ttl) and ttl > 0):
        return "a LangGraph item's ttl is a number of minutes above 0, or null"
    return None


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _kv(scope: list[str], doc: Doc) -> None:
    if doc.get("key") != doc["id"]:
        raise InvalidInput("its key is its id")
    if "value" not in doc:
        raise InvalidInput("value: Field required")
    _times(doc, *TIMES)


def _document(kind: str, body: Callable[[Any], Any]) -> Callable[[list[str], Doc], None]:
    """A JSON, todo or markdown record: its body under its kind's name, its metadata, its times."""

    def check(scope: list[str], doc: Doc) -> None:
        if kind not in doc:
            raise InvalidInput(f"{kind}: Field required")
        body(doc[kind])
        require_object(doc.get("metadata", {}), "metadata")
        _times(doc, *TIMES)

    return check


def _persistent(scope: list[str], doc: Doc) -> None:
    _validated({k: v for k, v in doc.items() if k not in TIMES})
    _times(doc, *TIMES)


def _episode(scope: list[str], doc: Doc) -> None:
    _title(doc.get("title"))
    if not isinstance(doc.get("archived"), bool):
        raise InvalidInput("archived must be true or false")
    if doc.get("swarmId") is not None and not isinstance(doc["swarmId"], str):
        raise InvalidInput("swarmId must be a string or null")
    _times(doc, *TIMES, *(["archived_at"] if doc.get("archived_at") is not None else []))


def _event_record(scope: list[str], doc: Doc) -> None:
    if doc.get("memoryId") != scope[0]:
        raise InvalidInput("its memoryId is the episodic memory its scope names")
    _event({k: doc[k] for k in EVENT_FIELDS if k in doc})
    _times(doc, "timestamp")


def _entity_record(scope: list[str], doc: Doc) -> None:
    entity = _entity({k: doc[k] for k in ENTITY_FIELDS if k in doc})
    if doc["id"] != entity["name"]:
        raise InvalidInput("its id is its name")


def _relation_record(scope: list[str], doc: Doc) -> None:
    relation = _relation({k: doc[k] for k in RELATION_FIELDS if k in doc})
    if doc["id"] != relation_id(relation):
        raise InvalidInput(f"its id is {relation_id(relation)!r} (from, relationType, to)")


def _times(doc: Doc, *fields: str) -> None:
    """Each field a time as the tools write it (`timefmt.iso`: UTC, milliseconds, `Z`). Only that
    form: times are ordered as text (an episodic memory's events by their timestamps, and the
    next event's is never earlier than the last one's), and `2026-01-01` or an offset would sort
    out of place among them. The error shows the value written the expected way."""
    for field in fields:
        value = doc.get(field)
        seconds = parse_time(value)
        if seconds is None:
            raise InvalidInput(f"{field} must be an ISO 8601 time, not {value!r}")
        canonical = iso(seconds)
        if value != canonical:
            raise InvalidInput(f"{field} must be a UTC time written as mem writes it ({canonical!r}), not {value!r}")


CHECKS: dict[str, Callable[[list[str], Doc], None]] = {
    "kv": _kv,
    "json": _document("json", lambda body: require_object(body, "json")),
    "todo": _document("todo", _todo),
    "markdown": _document("markdown", _markdown),
    "persistent": _persistent,
    "episodes": _episode,
    "events": _event_record,
    "kg_entities": _entity_record,
    "kg_relations": _relation_record,
}
