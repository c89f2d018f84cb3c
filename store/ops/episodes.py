"""Codebolt episodic memories: titled, append-only logs of events.

- A memory has an ID, a title, an optional `swarmId`, and is active or archived. An archived
  memory is read-only (appending and renaming are refused with a `conflict` error) and hidden
  from `episodic_memory_list` unless `include_archived` is set (or filtered on `archived`).
  Archiving twice keeps the first `archived_at`; `unarchive` makes it active again; `delete`
  removes it and its events (archived or not).
- A swarm is the set of memories created with the same `swarmId`: a query by `swarmId` reads the
  events of all of them (archived ones included: archiving stops writes, not reads). A query
  gives `memoryId` or `swarmId`, never both (refused, at the CLI and over MCP alike).
- Events carry `event_type`, `emitting_agent_id`, optional `team_id`, `tags` and a `payload`
  (string or object), plus an `eventId`, the `memoryId` and a `timestamp` (ISO 8601, UTC) set by
  the store. Each memory's events are one collection, so appending costs one journal line however
  long the log is.
- `query_events` filters combine with AND: `event_type`, `emitting_agent_id`, `team_id`, `tags`
  (any of), `since` and `until` (both inclusive; read as `mem retrieve` reads them: an ISO 8601
  time is that instant, a date or a phrase such as "yesterday" or "in May 2023" covers its days
  whole, see `timeaware.time_bound`; an `until` before `since` is refused), `lastMinutes`; results
  are oldest first (newest last), and `lastCount` keeps the newest N of them.
"""

from __future__ import annotations

import math
import time
import uuid
from typing import Any

from .. import clock
from ..errors import Conflict, InvalidInput, Unauthorized, missing_or_wrong, refuse_unknown
from ..timeaware import time_bound
from ..timefmt import iso
from .documents import new_memory_id, newest_first, page, public
from .filters import matches, parse_time, path_lookup, validate
from .records import Collection, Doc

EVENT_FIELDS = ("event_type", "emitting_agent_id", "team_id", "tags", "payload")


class EpisodeTools:
    """Mixed into `MemoryService`; `self.backend` is the store."""

    backend: Any

    def _episodes(self, namespace: str) -> Collection:
        return Collection(self.backend, namespace, "episodes")

    def _events(self, namespace: str, memory_id: str) -> Collection:
        return Collection(self.backend, namespace, "events", memory_id)

    def episodic_memory_create(self, title: str, swarm_id: str | None = None, namespace: str = "default") -> Doc:
        """Create an episodic memory (a container of events) titled `title`."""
        now = iso(clock.now())
        doc = {
            "id": new_memory_id("ep"),
            "title": _title(title),
            "swarmId": swarm_id or None,
            "archived": False,
            "created_at": now,
            "updated_at": now,
        }
        self._episodes(namespace).put(doc)
        return {**public(doc), "eventCount": 0}

    def episodic_memory_list(
        self,
        filters: dict | None = None,
        include_archived: bool = False,
        limit: int | None = None,
        offset: int = 0,
        namespace: str = "default",
    ) -> list[Doc]:
        """Episodic memories with their event counts, newest first; `filters` see each memory as
        listed, `eventCount` included."""
        validate(filters)
        shown = []
        for doc in self._episodes(namespace).all():
            if doc["archived"] and not (include_archived or "archived" in (filters or {})):
                continue
            if matches(self._as_listed(doc, namespace), filters):
                shown.append(doc)
        return [self._with_count(d, namespace) for d in page(newest_first(shown, "created_at"), limit, offset)]

    def episodic_memory_get(self, memory_id: str, namespace: str = "default") -> Doc:
        return self._with_count(self._episodes(namespace).require(memory_id, "episodic memory"), namespace)

    def episodic_memory_append_event(
        self, memory_id: str, event: Any, namespace: str = "default", agent: str | None = None
    ) -> Doc:
        """Append `event` to memory `memory_id`; refused if the memory is archived. `agent`: the
        caller's agent when it is authenticated; an event it says another agent emitted is refused
        (`unauthorized`), so that under auth `emitting_agent_id` is who really appended it.

        The event's timestamp and id are taken under the namespace's lock, never before those of
        the log's last event: the log's order is the order appends were acknowledged, even when
        appenders race or a machine's clock is behind (its event gets the last one's time), so a
        reader following the log (`since`, `lastCount`) never misses an event."""
        body = _event(event)
        if agent is not None and body["emitting_agent_id"] != agent:
            named = body["emitting_agent_id"]
            raise Unauthorized(f"event.emitting_agent_id is {named!r}, but the caller is authenticated as {agent!r}")
        self._episodes(namespace).require(memory_id, "episodic memory")  # a clear error before the lock
        events = self._events(namespace, memory_id)
        events.catch_up()
        with self.backend.lock(namespace):
            _writable(self._episodes(namespace).require(memory_id, "episodic memory"))  # not archived meanwhile
            last = events.shard.last(clock.now())
            timestamp, after = iso(clock.now()), 0
            if last is not None:
                timestamp = max(timestamp, str(last.get("timestamp", "")))
                after = _event_ns(last.get("id"))
            doc = {"id": _event_id(after), "memoryId": memory_id, **body, "timestamp": timestamp}
            events.put(doc)
        return public_event(doc)

    def episodic_memory_query_events(
        self,
        memory_id: str | None = None,
        swarm_id: str | None = None,
        last_minutes: float | None = None,
        last_count: int | None = None,
        tags: list[str] | None = None,
        event_type: str | None = None,
        emitting_agent_id: str | None = None,
        team_id: str | None = None,
        since: str | None = None,
        namespace: str = "default",
        until: str | None = None,
    ) -> list[Doc]:
        """Events of one memory (or of every memory of a swarm) passing every filter, newest last.
        `until` (an extension of the codebolt tool, for the CLI and `mem ui`) keeps the events up
        to that time, inclusive; `lastCount` then takes the newest of those."""
        cutoff = _cutoff(last_minutes, since)
        end = _until(until)
        if cutoff is not None and end is not None and end <= cutoff:
            raise InvalidInput("until must not be before since", {"field": "until"})
        found = []
        for mid in self._memory_ids(memory_id, swarm_id, namespace):
            for event in self._events(namespace, mid).all():
                if _keep(event, cutoff, tags, event_type, emitting_agent_id, team_id) and _before(event, end):
                    found.append(event)
        found.sort(key=lambda e: (e["timestamp"], e["id"]))
        if last_count is not None:
            if not isinstance(last_count, int) or isinstance(last_count, bool) or last_count < 0:
                raise InvalidInput(f"lastCount must be a whole number >= 0, not {last_count!r}")
            found = found[len(found) - int(last_count) :] if last_count else []
        return [public_event(e) for e in found]

    def episodic_memory_get_event_types(
        self, memory_id: str | None = None, swarm_id: str | None = None, namespace: str = "default"
    ) -> list[str]:
        """The distinct event types of a memory (or swarm), in order of first appearance."""
        seen: dict[str, None] = {}
        for mid in self._memory_ids(memory_id, swarm_id, namespace):
            for event in self._events(namespace, mid).all():
                seen.setdefault(event["event_type"])
        return list(seen)

    def episodic_memory_archive(self, memory_id: str, namespace: str = "default") -> Doc:
        """Mark a memory archived (read-only, hidden from list)."""

        def archive(old: Doc) -> Doc:
            now = iso(clock.now())
            return {**old, "archived": True, "archived_at": now, "updated_at": now}

        episodes = self._episodes(namespace)
        with self.backend.lock(namespace):
            doc = episodes.require(memory_id, "episodic memory")
            if not doc["archived"]:  # archiving again writes nothing: `archived_at` stays the first
                doc = episodes.update(memory_id, "episodic memory", archive)
        return self._with_count(doc, namespace)

    def episodic_memory_unarchive(self, memory_id: str, namespace: str = "default") -> Doc:
        """Make an archived memory active again (writable, listed); an active one is left as is."""

        def unarchive(old: Doc) -> Doc:
            kept = {k: v for k, v in old.items() if k != "archived_at"}
            return {**kept, "archived": False, "updated_at": iso(clock.now())}

        episodes = self._episodes(namespace)
        with self.backend.lock(namespace):
            doc = episodes.require(memory_id, "episodic memory")
            if doc["archived"]:
                doc = episodes.update(memory_id, "episodic memory", unarchive)
        return self._with_count(doc, namespace)

    def episodic_memory_delete(self, memory_id: str, namespace: str = "default") -> Doc:
        """Delete a memory and its events (archived or not: deleting is not writing to it).
        The events go first, so that a delete cut short leaves the memory there to delete again
        rather than events nobody can reach."""
        episodes = self._episodes(namespace)
        with self.backend.lock(namespace):
            episodes.require(memory_id, "episodic memory")
            events = self._events(namespace, memory_id)
            removed = events.delete_many([e["id"] for e in events.all()])
            episodes.delete(memory_id, "episodic memory")
        return {"memoryId": memory_id, "deleted": True, "deletedEvents": removed}

    def episodic_memory_update_title(self, memory_id: str, title: str, namespace: str = "default") -> Doc:
        """Rename a memory; refused if it is archived (an archived memory is read-only)."""
        new_title = _title(title)

        def rename(old: Doc) -> Doc:
            _writable(old)
            return {**old, "title": new_title, "updated_at": iso(clock.now())}

        return self._with_count(self._episodes(namespace).update(memory_id, "episodic memory", rename), namespace)

    def _memory_ids(self, memory_id: str | None, swarm_id: str | None, namespace: str) -> list[str]:
        """The memory, or every memory of the swarm. Giving both is refused, as at the CLI:
        they could name different memories, and neither reading wins obviously."""
        if memory_id is not None and swarm_id is not None:
            raise InvalidInput("give memoryId or swarmId, not both")
        if memory_id is not None:
            return [self._episodes(namespace).require(memory_id, "episodic memory")["id"]]
        if swarm_id is not None:
            return [d["id"] for d in self._episodes(namespace).all() if d.get("swarmId") == swarm_id]
        raise InvalidInput("give memoryId or swarmId")

    def _as_listed(self, doc: Doc, namespace: str) -> Any:
        """A filter lookup over the memory as listed; its `eventCount` is counted only if asked."""
        fields = path_lookup(public(doc))
        return lambda path: len(self._events(namespace, doc["id"])) if path == "eventCount" else fields(path)

    def _with_count(self, doc: Doc, namespace: str) -> Doc:
        return {**public(doc), "eventCount": len(self._events(namespace, doc["id"]))}


def public_event(doc: Doc) -> Doc:
    out = {"eventId": doc["id"]}
    out.update((k, v) for k, v in doc.items() if k != "id")
    return out


def _event_id(after: int = 0) -> str:
    """Sortable by time of creation, unique across processes, and after the id `after` (in ns)."""
    return f"ev_{max(time.time_ns(), after + 1):020d}_{uuid.uuid4().hex[:8]}"


def _event_ns(event_id: object) -> int:
    """The nanoseconds of an event id made by `_event_id` (0 for another one: an import's)."""
    if isinstance(event_id, str) and event_id.startswith("ev_") and event_id[3:23].isdigit():
        return int(event_id[3:23])
    return 0


def _writable(memory: Doc) -> None:
    if memory["archived"]:
        raise Conflict(f"episodic memory {memory['id']!r} is archived: it is read-only (unarchive it first)")


def _title(title: Any) -> str:
    if not isinstance(title, str) or not title.strip():
        raise InvalidInput("title must be a non-empty string")
    return title


def _event(event: Any) -> Doc:
    """The validated fields of an event object (see the module docstring)."""
    if not isinstance(event, dict):
        raise InvalidInput("event must be a JSON object")
    refuse_unknown(event, EVENT_FIELDS, "event field")  # a misspelt field would be silently lost
    for name in ("event_type", "emitting_agent_id"):
        if not isinstance(event.get(name), str) or not event[name]:
            raise missing_or_wrong(name, event, "a non-empty string", "event")
    if "payload" not in event or not isinstance(event["payload"], (str, dict)):
        raise missing_or_wrong("payload", event, "a string or an object", "event")
    tags = event.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise InvalidInput("event.tags must be a list of strings")
    team = event.get("team_id")
    if team is not None and not isinstance(team, str):
        raise InvalidInput("event.team_id must be a string")
    return {**{k: event.get(k) for k in EVENT_FIELDS}, "tags": tags}


def _cutoff(last_minutes: float | None, since: str | None) -> float | None:
    """The earliest timestamp the filters allow, as Unix seconds."""
    bounds = []
    if last_minutes is not None:
        number = isinstance(last_minutes, (int, float)) and not isinstance(last_minutes, bool)
        if not number or not math.isfinite(last_minutes) or last_minutes < 0:  # NaN passed `< 0` and kept all
            raise InvalidInput(f"lastMinutes must be a finite number >= 0, not {last_minutes!r}")
        bounds.append(clock.now() - 60 * last_minutes)
    start = time_bound(since, "since", clock.now())
    if start is not None:
        bounds.append(start)
    return max(bounds) if bounds else None


def _until(value: str | None) -> float | None:
    """The end of the events kept, exclusive: an instant (`2023-06-01T09:30:00Z`) is inclusive,
    so the end is just after it; a day or a period ("2023-06-01", "yesterday") is kept whole."""
    end = time_bound(value, "until", clock.now())
    if end is not None and end == time_bound(value, "since", clock.now()):  # an instant, not a span of days
        end += 1e-3
    return end


def _before(event: Doc, end: float | None) -> bool:
    return end is None or (parse_time(event["timestamp"]) or 0) < end


def _keep(event: Doc, cutoff: float | None, tags: list[str] | None, *equal: str | None) -> bool:
    if cutoff is not None and (parse_time(event["timestamp"]) or 0) < cutoff - 1e-3:
        return False
    if tags and not set(tags) & set(event.get("tags") or ()):
        return False
    wanted = dict(zip(("event_type", "emitting_agent_id", "team_id"), equal, strict=True))
    return all(value is None or event.get(name) == value for name, value in wanted.items())
