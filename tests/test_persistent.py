"""Persistent memories: configurations, and retrieval really run against each source."""

from __future__ import annotations

import orjson
import pytest

from store.errors import Conflict, InvalidInput, NotFound
from store.render import count_tokens, fill


def create(service, source_type, source_id, fmt="json", **extra):
    retrieval = {"source_type": source_type, "source_id": source_id, **extra.pop("retrieval", {})}
    contribution = {"format": fmt, **extra.pop("contribution", {})}
    return service.persistent_memory_create(
        label=extra.pop("label", "L"), retrieval=retrieval, contribution=contribution, **extra
    )


def test_create_get_list_update(service):
    made = create(service, "kv", "prefs", id="user-prefs", inputs_scope=["user_settings"], description="d")
    assert made["id"] == "user-prefs" and made["status"] == "active"
    assert service.persistent_memory_get("user-prefs")["retrieval"]["limit"] == 10
    other = create(service, "kg", "graph", status="draft")
    assert [m["id"] for m in service.persistent_memory_list(input_scope="user_settings")] == ["user-prefs"]
    assert [m["id"] for m in service.persistent_memory_list(active_only=True)] == ["user-prefs"]
    assert len(service.persistent_memory_list()) == 2
    updated = service.persistent_memory_update(other["id"], label="Updated", status="active")
    assert updated["label"] == "Updated" and updated["retrieval"]["source_type"] == "kg"
    assert updated["created_at"] == other["created_at"]
    with pytest.raises(Conflict):
        create(service, "kv", "x", id="user-prefs")
    with pytest.raises(NotFound):
        service.persistent_memory_update("nope", label="x")
    with pytest.raises(InvalidInput):
        service.persistent_memory_update(other["id"], status="sleeping")
    with pytest.raises(InvalidInput):
        create(service, "sql", "x")
    with pytest.raises(InvalidInput):
        create(service, "kv", "x", fmt="html")


def test_kv_source_matches_keys_and_values(service):
    service.memory_set("theme", "dark", namespace="prefs")
    service.memory_set("language", "python", namespace="prefs")
    service.memory_set("editor", {"name": "neovim", "theme": "gruvbox"}, namespace="prefs")
    pm = create(service, "kv", "prefs", fmt="json")
    result = service.persistent_memory_retrieve(pm["id"], keywords=["theme", "preferences"], action="find")
    assert {i["key"] for i in result["items"]} == {"theme", "editor"}
    assert orjson.loads(result["contribution"]) == result["items"] and result["truncated"] is False
    everything = service.persistent_memory_retrieve(pm["id"])
    assert len(everything["items"]) == 3


def test_vectordb_source_searches_a2e_entries(service):
    scope = service.scope("docs", "writer")
    service.store(scope, [
        {"key": "py", "content": "python type hints make refactoring safer", "tier": "semantic"},
        {"key": "cook", "content": "slow cooked beans need salt late", "tier": "semantic"},
        {"key": "mine", "content": "python packaging notes", "tier": "episodic"},
    ])  # fmt: skip
    pm = create(
        service, "vectordb", "docs", fmt="text", retrieval={"limit": 2}, contribution={"template": "* {content}"}
    )
    result = service.persistent_memory_retrieve(pm["id"], query="python")
    assert len(result["items"]) == 2 and {i["key"]["key"] for i in result["items"]} == {"py", "mine"}
    assert result["contribution"].startswith("* ") and "python" in result["contribution"]
    semantic = create(service, "vectordb", "docs", retrieval={"filters": {"tier": "semantic"}})
    assert {i["tier"] for i in service.persistent_memory_retrieve(semantic["id"], query="python")["items"]} == {
        "semantic"
    }


def test_eventlog_source_applies_configured_filters(service):
    mid = service.episodic_memory_create("log")["memoryId"]
    for kind, payload in (("deploy", "deployed api v2"), ("alert", "disk almost full"), ("deploy", "rolled back api")):
        service.episodic_memory_append_event(mid, {"event_type": kind, "emitting_agent_id": "ops", "payload": payload})
    pm = create(
        service, "eventlog", mid, fmt="markdown", label="Deploys", retrieval={"filters": {"event_type": "deploy"}}
    )
    result = service.persistent_memory_retrieve(pm["id"])
    assert [e["payload"] for e in result["items"]] == ["deployed api v2", "rolled back api"]
    assert result["contribution"].startswith("## Deploys\n\n- [")
    assert [e["payload"] for e in service.persistent_memory_retrieve(pm["id"], query="rollback rolled")["items"]] == [
        "rolled back api"
    ]


def test_kg_source_returns_entities_and_their_relations(service):
    service.kg_create_entities([
        {"name": "Alice", "entityType": "person", "observations": ["drinks green tea"]},
        {"name": "Acme", "entityType": "company", "observations": ["builds rockets"]},
        {"name": "Bob", "entityType": "person", "observations": ["plays chess"]},
    ], namespace="g")  # fmt: skip
    service.kg_create_relations([{"from": "Alice", "to": "Acme", "relationType": "works_at"}], namespace="g")
    pm = create(service, "kg", "g", fmt="text")
    result = service.persistent_memory_retrieve(pm["id"], keywords=["tea"])
    names = [i.get("name") for i in result["items"] if i["type"] == "entity"]
    assert names[0] == "Alice" and "Bob" not in names
    assert {"type": "relation", "from": "Alice", "to": "Acme", "relationType": "works_at"} in result["items"]
    assert "Alice works_at Acme" in result["contribution"]


def test_query_template_is_filled_safely(service):
    service.memory_set("dark-mode", "on", namespace="p")
    pm = create(
        service, "kv", "p", retrieval={"query_template": "{action} {keywords} {context.topic} {mode} {__class__}"},
        additional_variables={"mode": "dark"},
    )  # fmt: skip
    result = service.persistent_memory_retrieve(pm["id"], keywords=["x"], action="find", context={"topic": "ui"})
    assert result["query"] == "find x ui dark "
    assert fill("{{literal}} {a.b}", {"a": {"b": [1, 2]}}) == "{literal} [1,2]"
    assert fill("{x.__class__}", {"x": "s"}) == ""


def test_max_tokens_cuts_and_flags(service):
    for i in range(30):
        service.memory_set(f"key{i}", f"value number {i} with a few more words", namespace="big")
    pm = create(service, "kv", "big", fmt="text", retrieval={"limit": 30}, contribution={"max_tokens": 25})
    result = service.persistent_memory_retrieve(pm["id"])
    assert result["truncated"] is True
    assert result["tokens"] == count_tokens(result["contribution"]) <= 25
    assert result["contribution"].startswith("key")
    as_json = create(service, "kv", "big", fmt="json", retrieval={"limit": 30}, contribution={"max_tokens": 60})
    cut = service.persistent_memory_retrieve(as_json["id"])
    assert cut["truncated"] and len(orjson.loads(cut["contribution"])) < 30 and cut["tokens"] <= 60


def test_disabled_memory_refuses_to_retrieve(service):
    pm = create(service, "kv", "p", status="disabled")
    with pytest.raises(Conflict, match="disabled"):
        service.persistent_memory_retrieve(pm["id"])
    with pytest.raises(NotFound):
        service.persistent_memory_retrieve("missing")


@pytest.mark.parametrize(
    ("source_type", "filters"),
    [("vectordb", {"tiers": "semantic"}), ("kv", {"tags": ["a"]}), ("kg", {"type": "person"}),
     ("eventlog", {"eventType": "x"})],
)  # fmt: skip
def test_filters_a_source_does_not_read_are_refused(service, source_type, filters):
    retrieval = {"source_type": source_type, "source_id": "x", "filters": filters}
    with pytest.raises(InvalidInput, match="unknown retrieval.filters key"):
        service.persistent_memory_create("x", retrieval, {"format": "text"})
    made = service.persistent_memory_create("x", {"source_type": source_type, "source_id": "x"}, {"format": "text"})
    with pytest.raises(InvalidInput, match="unknown retrieval.filters key"):
        service.persistent_memory_update(made["id"], retrieval=retrieval)


def test_delete(service):
    made = service.persistent_memory_create("x", {"source_type": "kv", "source_id": "x"}, {"format": "text"})
    assert service.persistent_memory_delete(made["id"]) == {"id": made["id"], "deleted": True}
    assert service.persistent_memory_list() == []
    with pytest.raises(NotFound):
        service.persistent_memory_delete(made["id"])
