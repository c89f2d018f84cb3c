"""The knowledge graph, compatible with the MCP memory server."""

from __future__ import annotations

import pytest

from a2e_mem.errors import InvalidInput, NotFound

ALICE = {"name": "Alice", "entityType": "person", "observations": ["speaks Portuguese", "likes green tea"]}
ACME = {"name": "Acme", "entityType": "company", "observations": ["makes rockets"]}
BOB = {"name": "Bob", "entityType": "person", "observations": []}


def test_create_is_idempotent_and_relations_need_entities(service):
    assert len(service.kg_create_entities([ALICE, ACME])) == 2
    assert service.kg_create_entities([ALICE, BOB]) == [BOB]
    rel = {"from": "Alice", "to": "Acme", "relationType": "works_at"}
    assert service.kg_create_relations([rel]) == [rel]
    assert service.kg_create_relations([rel]) == []
    with pytest.raises(NotFound):
        service.kg_create_relations([{"from": "Alice", "to": "Nobody", "relationType": "knows"}])
    with pytest.raises(InvalidInput):
        service.kg_create_entities([{"name": "x"}])


def test_observations_add_and_delete(service):
    service.kg_create_entities([ALICE])
    added = service.kg_add_observations([{"entityName": "Alice", "contents": ["likes green tea", "runs marathons"]}])
    assert added == [{"entityName": "Alice", "addedObservations": ["runs marathons"]}]
    service.kg_delete_observations([{"entityName": "Alice", "observations": ["speaks Portuguese"]}])
    assert service.kg_open_nodes(["Alice"])["entities"][0]["observations"] == ["likes green tea", "runs marathons"]
    with pytest.raises(NotFound):
        service.kg_add_observations([{"entityName": "Nobody", "contents": ["x"]}])


def test_deleting_an_entity_removes_its_relations(service):
    service.kg_create_entities([ALICE, ACME, BOB])
    service.kg_create_relations([
        {"from": "Alice", "to": "Acme", "relationType": "works_at"},
        {"from": "Bob", "to": "Alice", "relationType": "knows"},
        {"from": "Bob", "to": "Acme", "relationType": "invests_in"},
    ])  # fmt: skip
    assert service.kg_delete_entities(["Alice"]) == {"deletedEntities": 1, "deletedRelations": 2}
    graph = service.kg_read_graph()
    assert [e["name"] for e in graph["entities"]] == ["Acme", "Bob"]
    assert graph["relations"] == [{"from": "Bob", "to": "Acme", "relationType": "invests_in"}]
    assert service.kg_delete_relations([{"from": "Bob", "to": "Acme", "relationType": "invests_in"}]) == {
        "deletedRelations": 1
    }


def test_search_open_and_read_with_limits(service):
    service.kg_create_entities([ALICE, ACME, BOB])
    service.kg_create_relations([{"from": "Alice", "to": "Acme", "relationType": "works_at"}])
    found = service.kg_search_nodes("tea")
    assert [e["name"] for e in found["entities"]] == ["Alice"] and found["relations"] == []
    by_type = service.kg_search_nodes("company")
    assert by_type["entities"][0]["name"] == "Acme"
    opened = service.kg_open_nodes(["Alice", "Acme", "Ghost"])
    assert [e["name"] for e in opened["entities"]] == ["Alice", "Acme"] and len(opened["relations"]) == 1
    assert [e["name"] for e in service.kg_read_graph(limit=2)["entities"]] == ["Acme", "Alice"]
    assert [e["name"] for e in service.kg_read_graph(limit=2, offset=2)["entities"]] == ["Bob"]
    with pytest.raises(InvalidInput):
        service.kg_search_nodes("  ")


def test_import_of_an_mcp_memory_server_file(service, tmp_path):
    lines = [
        '{"type":"entity","name":"John_Smith","entityType":"person","observations":["Speaks fluent Spanish"]}',
        '{"type":"entity","name":"Anthropic","entityType":"organization","observations":[]}',
        '{"type":"relation","from":"John_Smith","to":"Anthropic","relationType":"works_at"}',
        '{"type":"relation","from":"John_Smith","to":"Missing","relationType":"knows"}',
        "",
    ]
    assert service.kg_import(lines) == {"entities": 2, "relations": 1, "lines": 4}
    assert service.kg_search_nodes("spanish")["entities"][0]["name"] == "John_Smith"
    with pytest.raises(InvalidInput, match="line 1"):
        service.kg_import(['{"type": "thing"}'])


def test_unknown_fields_are_refused_but_an_import_leaves_them_behind(service):
    for call in (
        lambda: service.kg_create_entities([{"name": "A", "entityType": "x", "observation": ["typo"]}]),
        lambda: service.kg_create_relations([{"from": "A", "to": "A", "relationType": "self", "weight": 1}]),
        lambda: service.kg_add_observations([{"entityName": "A", "contents": ["a"], "content": ["b"]}]),
        lambda: service.kg_delete_observations([{"entityName": "A", "observation": ["a"]}]),
    ):
        with pytest.raises(InvalidInput, match="unknown .* field"):
            call()
    assert service.kg_read_graph()["entities"] == []
    # a file written by another tool may carry more: the model's fields are read, the rest ignored
    lines = ['{"type": "entity", "name": "A", "entityType": "x", "observations": [], "createdAt": "2025-01-01"}']
    assert service.kg_import(lines)["entities"] == 1


def test_a_field_of_the_wrong_type_is_said_so_not_called_missing(service):
    """`{"name": 1}` was answered "name is required", sending its writer looking for a missing
    field (outside audit D25, low); an event's fields alike."""
    from a2e_mem.errors import InvalidInput

    with pytest.raises(InvalidInput, match=r"^name must be a non-empty string, not a number$"):
        service.kg_create_entities([{"name": 1, "entityType": "t", "observations": []}])
    with pytest.raises(InvalidInput, match=r"^entityType is required \(a non-empty string\)$"):
        service.kg_create_entities([{"name": "x", "observations": []}])
    with pytest.raises(InvalidInput, match=r"^entityType is required \(a non-empty string\)$"):
        service.kg_create_entities([{"name": "x", "entityType": "", "observations": []}])  # not "not a string"
    log = service.episodic_memory_create("log")["memoryId"]
    with pytest.raises(InvalidInput, match=r"^event\.event_type must be a non-empty string, not a number$"):
        service.episodic_memory_append_event(log, {"event_type": 1, "emitting_agent_id": "a", "payload": "p"})
