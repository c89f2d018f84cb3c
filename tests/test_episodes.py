"""Episodic memories: events, queries, swarms, archiving."""

from __future__ import annotations

import pytest

from a2e_mem import clock
from a2e_mem.errors import Conflict, InvalidInput, NotFound, Unauthorized


def event(kind="user_action", agent="agent-123", **extra):
    return {
        "event_type": kind,
        "emitting_agent_id": agent,
        "payload": extra.pop("payload", {"action": "click"}),
        **extra,
    }


def test_create_append_get_and_query(service):
    memory = service.episodic_memory_create("User Session Log")
    mid = memory["memoryId"]
    assert memory["eventCount"] == 0 and memory["archived"] is False
    appended = service.episodic_memory_append_event(mid, event(tags=["navigation", "ui"]))
    assert appended["memoryId"] == mid and appended["timestamp"].endswith("Z") and appended["eventId"]
    service.episodic_memory_append_event(mid, event("message", "agent-9", payload="hello", team_id="t1"))
    assert service.episodic_memory_get(mid)["eventCount"] == 2
    events = service.episodic_memory_query_events(memory_id=mid)
    assert [e["event_type"] for e in events] == ["user_action", "message"]  # newest last
    assert events[1]["payload"] == "hello" and events[1]["team_id"] == "t1"


def test_query_filters_combine(service):
    mid = service.episodic_memory_create("log")["memoryId"]
    for i in range(10):
        clock.set_offset(i * 60)
        service.episodic_memory_append_event(
            mid, event("a" if i % 2 else "b", f"agent-{i % 3}", tags=[f"t{i % 4}"], team_id="x" if i < 5 else "y")
        )
    q = lambda **f: [e["payload"] for e in service.episodic_memory_query_events(memory_id=mid, **f)]  # noqa: E731
    assert len(q(event_type="a")) == 5
    assert len(q(event_type="a", team_id="y")) == 3
    assert len(q(tags=["t0", "t1"])) == 6  # i % 4 in (0, 1): 0, 1, 4, 5, 8, 9
    assert len(q(emitting_agent_id="agent-0")) == 4
    assert len(q(last_minutes=2.5)) == 3  # now is minute 9: minutes 7, 8, 9
    since = service.episodic_memory_query_events(memory_id=mid)[6]["timestamp"]
    assert len(q(since=since)) == 4
    assert len(q(until=since)) == 7  # inclusive: events 0..6
    assert len(q(since=since, until=since)) == 1
    assert len(q(until=since, last_count=2)) == 2
    newest = service.episodic_memory_query_events(memory_id=mid, last_count=3)
    assert [e["timestamp"] for e in newest] == sorted(e["timestamp"] for e in newest)
    assert newest[-1]["timestamp"] == service.episodic_memory_query_events(memory_id=mid)[-1]["timestamp"]
    assert len(q(event_type="a", last_count=2)) == 2
    with pytest.raises(InvalidInput):
        q(since="the other day")
    with pytest.raises(InvalidInput):
        q(until="soon")
    with pytest.raises(InvalidInput):
        service.episodic_memory_query_events()


def test_swarm_reads_every_member(service):
    a = service.episodic_memory_create("a", swarm_id="swarm-1")["memoryId"]
    b = service.episodic_memory_create("b", swarm_id="swarm-1")["memoryId"]
    c = service.episodic_memory_create("c")["memoryId"]
    for mid, kind in ((a, "x"), (b, "y"), (c, "z")):
        service.episodic_memory_append_event(mid, event(kind))
    assert {e["event_type"] for e in service.episodic_memory_query_events(swarm_id="swarm-1")} == {"x", "y"}
    assert sorted(service.episodic_memory_get_event_types(swarm_id="swarm-1")) == ["x", "y"]
    assert service.episodic_memory_get_event_types(memory_id=c) == ["z"]


def test_archive_makes_read_only_and_hides_from_list(service):
    mid = service.episodic_memory_create("old")["memoryId"]
    service.episodic_memory_append_event(mid, event())
    archived = service.episodic_memory_archive(mid)
    assert archived["archived"] is True and archived["eventCount"] == 1
    with pytest.raises(Conflict, match="archived"):
        service.episodic_memory_append_event(mid, event())
    assert service.episodic_memory_list() == []
    assert [m["memoryId"] for m in service.episodic_memory_list(include_archived=True)] == [mid]
    assert len(service.episodic_memory_query_events(memory_id=mid)) == 1  # still readable


def test_rename_and_unknown_ids(service):
    mid = service.episodic_memory_create("old title")["memoryId"]
    assert service.episodic_memory_update_title(mid, "new title")["title"] == "new title"
    assert service.episodic_memory_list(filters={"title": "new title"})[0]["memoryId"] == mid
    for call in (
        lambda: service.episodic_memory_get("nope"),
        lambda: service.episodic_memory_append_event("nope", event()),
        lambda: service.episodic_memory_archive("nope"),
        lambda: service.episodic_memory_update_title("nope", "x"),
        lambda: service.episodic_memory_query_events(memory_id="nope"),
    ):
        with pytest.raises(NotFound):
            call()


@pytest.mark.parametrize(
    "bad",
    [
        {"emitting_agent_id": "a", "payload": "x"},
        {"event_type": "t", "payload": "x"},
        {"event_type": "t", "emitting_agent_id": "a"},
        {"event_type": "t", "emitting_agent_id": "a", "payload": 5},
        {"event_type": "t", "emitting_agent_id": "a", "payload": "x", "tags": "ui"},
        {"event_type": "t", "emitting_agent_id": "a", "payload": "x", "teamId": "t1"},  # would be lost
        "not an object",
    ],
)
def test_invalid_events_are_refused(service, bad):
    mid = service.episodic_memory_create("log")["memoryId"]
    with pytest.raises(InvalidInput):
        service.episodic_memory_append_event(mid, bad)


def test_a_long_log_survives_checkpoints(service):
    mid = service.episodic_memory_create("long")["memoryId"]
    for i in range(50):
        service.episodic_memory_append_event(mid, event(payload={"i": i}))
        if i == 25:
            service.checkpoint(force=True)
    events = service.episodic_memory_query_events(memory_id=mid)
    assert [e["payload"]["i"] for e in events] == list(range(50))


def test_list_filters_see_the_event_count(service):
    busy, quiet = (service.episodic_memory_create(title)["memoryId"] for title in ("busy", "quiet"))
    for _ in range(3):
        service.episodic_memory_append_event(busy, event())
    service.episodic_memory_append_event(quiet, event())
    listed = lambda f: [m["title"] for m in service.episodic_memory_list(filters=f)]  # noqa: E731
    assert listed({"eventCount": {"$gte": 2}}) == ["busy"]
    assert listed({"eventCount": 1}) == ["quiet"]
    assert sorted(listed({"eventCount": {"$lt": 5}, "title": {"$in": ["busy", "quiet"]}})) == ["busy", "quiet"]


def test_archived_is_read_only_and_archiving_again_keeps_archived_at(service):
    mid = service.episodic_memory_create("log")["memoryId"]
    first = service.episodic_memory_archive(mid)
    clock.set_offset(5)
    assert service.episodic_memory_archive(mid)["archived_at"] == first["archived_at"]
    with pytest.raises(Conflict, match="archived") as refused:
        service.episodic_memory_update_title(mid, "renamed")
    assert refused.value.code == "conflict" and refused.value.exit_code == 4
    with pytest.raises(Conflict) as refused:
        service.episodic_memory_append_event(mid, event())
    assert refused.value.code == "conflict"
    assert service.episodic_memory_get(mid)["title"] == "log"


def test_unarchive_and_delete(service):
    mid = service.episodic_memory_create("log", swarm_id="s")["memoryId"]
    other = service.episodic_memory_create("other", swarm_id="s")["memoryId"]
    for _ in range(3):
        service.episodic_memory_append_event(mid, event())
    service.episodic_memory_append_event(other, event("kept"))
    service.episodic_memory_archive(mid)
    back = service.episodic_memory_unarchive(mid)
    assert back["archived"] is False and "archived_at" not in back
    assert service.episodic_memory_unarchive(mid) == back  # already active: nothing changes
    assert service.episodic_memory_update_title(mid, "renamed")["title"] == "renamed"
    service.episodic_memory_archive(mid)
    assert service.episodic_memory_delete(mid) == {"memoryId": mid, "deleted": True, "deletedEvents": 3}
    assert [e["event_type"] for e in service.episodic_memory_query_events(swarm_id="s")] == ["kept"]
    for call in (service.episodic_memory_delete, service.episodic_memory_unarchive, service.episodic_memory_get):
        with pytest.raises(NotFound):
            call(mid)
    assert [m["memoryId"] for m in service.episodic_memory_list(include_archived=True)] == [other]


def test_memory_id_and_swarm_id_together_are_refused(service):
    mid = service.episodic_memory_create("log", swarm_id="s")["memoryId"]
    with pytest.raises(InvalidInput, match="not both"):
        service.episodic_memory_query_events(memory_id=mid, swarm_id="other")
    with pytest.raises(InvalidInput, match="not both"):
        service.episodic_memory_get_event_types(memory_id=mid, swarm_id="s")


def test_an_authenticated_caller_appends_only_events_it_emitted(service):
    """Audit F6: under auth, `emitting_agent_id` must be the caller's agent (unchecked without auth)."""
    mid = service.episodic_memory_create("log")["memoryId"]
    with pytest.raises(Unauthorized, match="'bob'"):
        service.episodic_memory_append_event(mid, event(agent="bob"), agent="alice")
    service.episodic_memory_append_event(mid, event(agent="alice"), agent="alice")
    service.episodic_memory_append_event(mid, event(agent="bob"))  # no auth: what the caller says
    assert [e["emitting_agent_id"] for e in service.episodic_memory_query_events(mid)] == ["alice", "bob"]


def test_query_bounds_are_read_as_retrieve_reads_them_and_an_empty_window_is_refused(service):
    """Audit F10: `since`/`until` took ISO only, and since after until silently returned nothing."""
    mid = service.episodic_memory_create("log")["memoryId"]
    for days_ago in (3, 1, 0):
        clock.set_offset(-days_ago * 86400)
        service.episodic_memory_append_event(mid, event(payload=f"{days_ago} days ago"))
    clock.set_offset(0)
    q = lambda **f: [e["payload"] for e in service.episodic_memory_query_events(memory_id=mid, **f)]  # noqa: E731
    assert q(since="yesterday") == ["1 days ago", "0 days ago"]
    assert q(since="2 days ago", until="yesterday") == ["1 days ago"]
    assert q(until="yesterday") == ["3 days ago", "1 days ago"]
    today = service.episodic_memory_query_events(memory_id=mid)[-1]["timestamp"][:10]
    assert q(since=today, until=today) == ["0 days ago"]  # a date covers its day whole
    with pytest.raises(InvalidInput, match="until"):
        q(since="yesterday", until="3 days ago")
    with pytest.raises(InvalidInput, match="until"):
        q(since="2023-06-02T00:00:00Z", until="2023-06-01T00:00:00Z")
