"""Key-value, JSON, todo and markdown memories, and list filters."""

from __future__ import annotations

import pytest

from a2e_mem import clock
from a2e_mem.errors import InvalidInput, NotFound
from a2e_mem.ops.filters import matches, path_lookup


def test_set_get_and_overwrite_keeps_created_at(service):
    first = service.memory_set("test-key-1", "This is a test memory value")
    assert service.memory_get("test-key-1")["value"] == "This is a test memory value"
    clock.set_offset(5)
    second = service.memory_set("test-key-1", {"any": ["json", 1]})
    assert second["value"] == {"any": ["json", 1]} and second["created_at"] == first["created_at"]
    assert second["updated_at"] > first["updated_at"]
    with pytest.raises(NotFound):
        service.memory_get("test-key-1", namespace="elsewhere")


def test_get_missing_key_is_not_found(service):
    with pytest.raises(NotFound):
        service.memory_get("missing")


@pytest.mark.parametrize("kind", ["json", "todo"])
def test_object_memories_lifecycle(service, kind):
    save, update, delete, list_ = (
        getattr(service, f"memory_{kind}_{op}") for op in ("save", "update", "delete", "list")
    )
    saved = save({"title": "Complete documentation", "status": "pending", "priority": "high"})
    memory_id = saved["memoryId"]
    assert saved[kind]["title"] == "Complete documentation" and saved["created_at"] == saved["updated_at"]
    clock.set_offset(2)
    updated = update(memory_id, {"title": "Complete documentation", "status": "done"})
    assert updated["memoryId"] == memory_id and updated[kind]["status"] == "done"
    assert "priority" not in updated[kind]  # update replaces the object
    assert updated["created_at"] == saved["created_at"] and updated["updated_at"] > saved["updated_at"]
    assert [r["memoryId"] for r in list_()] == [memory_id]
    assert delete(memory_id) == {"memoryId": memory_id, "deleted": True}
    assert list_() == []
    with pytest.raises(NotFound):
        update(memory_id, {"title": "x"})
    with pytest.raises(NotFound):
        delete(memory_id)


def test_todo_keeps_metadata_apart_and_defaults_status(service):
    todo = service.memory_todo_save({"title": "t"}, metadata={"category": "development", "dueDate": "2024-12-31"})
    assert todo["todo"] == {"title": "t", "status": "pending"}
    assert todo["metadata"] == {"category": "development", "dueDate": "2024-12-31"}
    updated = service.memory_todo_update(todo["memoryId"], {"title": "t", "status": "done"})
    assert updated["metadata"] == todo["metadata"]


def test_markdown_update_replaces_metadata_only_when_given(service):
    md = service.memory_markdown_save("# Project Notes\n\n- Feature A completed", {"author": "developer"})
    kept = service.memory_markdown_update(md["memoryId"], "# Updated")
    assert kept["markdown"] == "# Updated" and kept["metadata"] == {"author": "developer"}
    replaced = service.memory_markdown_update(md["memoryId"], "# Again", {"category": "notes"})
    assert replaced["metadata"] == {"category": "notes"}
    with pytest.raises(InvalidInput):
        service.memory_markdown_save({"not": "a string"})


def test_invalid_bodies_are_refused(service):
    with pytest.raises(InvalidInput):
        service.memory_json_save(["a", "list"])
    with pytest.raises(InvalidInput):
        service.memory_todo_save("just text")


def test_list_filters_on_object_and_metadata(service):
    for i in range(6):
        service.memory_todo_save(
            {"title": f"task {i}", "priority": ["low", "high"][i % 2], "points": i, "tags": ["a"] if i < 2 else ["b"]},
            metadata={"due": f"2025-0{i + 1}-15T00:00:00Z", "owner": "ana" if i < 3 else "bo"},
        )
    titles = lambda **f: sorted(r["todo"]["title"] for r in service.memory_todo_list(f or None))  # noqa: E731
    assert titles(priority="high") == ["task 1", "task 3", "task 5"]
    assert titles(owner="bo") == ["task 3", "task 4", "task 5"]
    assert titles(points={"$gt": 3}) == ["task 4", "task 5"]
    assert titles(due={"$lt": "2025-03-01"}) == ["task 0", "task 1"]
    assert titles(priority={"$in": ["low"]}, owner="ana") == ["task 0", "task 2"]
    assert titles(title={"$contains": "TASK 5"}) == ["task 5"]
    assert titles(tags={"$contains": "a"}) == ["task 0", "task 1"]
    assert titles(**{"$or": [{"points": 0}, {"points": 5}]}) == ["task 0", "task 5"]
    assert len(service.memory_todo_list(limit=2)) == 2
    assert [r["todo"]["title"] for r in service.memory_todo_list(limit=2, offset=4)] == ["task 1", "task 0"]
    with pytest.raises(InvalidInput):
        service.memory_todo_list({"points": {"$regex": "."}})
    with pytest.raises(InvalidInput):
        service.memory_todo_list(limit=5000)


def test_filter_operators_directly():
    doc = {"n": 3, "s": "Hello World", "l": [1, 2], "when": "2025-01-02T03:04:05Z", "nested": {"x": True}}
    look = path_lookup(doc)
    assert matches(look, {"nested.x": True, "n": {"$gte": 3, "$lt": 4}})
    assert matches(look, {"when": {"$gt": "2025-01-01"}}) and not matches(look, {"when": {"$gt": "2025-02-01"}})
    assert matches(look, {"missing": {"$exists": False}}) and not matches(look, {"missing": 1})
    assert matches(look, {"l": {"$in": [2, 9]}}) and matches(look, {"n": {"$nin": [1]}})
    assert not matches(look, {"s": {"$gt": 1}})  # a string and a number do not compare


def test_filters_treat_arrays_as_mongodb_does(service):
    look = path_lookup({"tags": ["x", "y"], "scores": [1, 5], "name": "n"})
    assert matches(look, {"tags": "x"}) and matches(look, {"tags": ["x", "y"]}) and not matches(look, {"tags": "z"})
    assert matches(look, {"tags": {"$eq": "y"}}) and not matches(look, {"tags": {"$eq": "z"}})
    assert not matches(look, {"tags": {"$ne": "x"}}) and matches(look, {"tags": {"$ne": "z"}})
    assert matches(look, {"tags": {"$in": ["z", "x"]}}) and not matches(look, {"tags": {"$in": ["z"]}})
    assert not matches(look, {"tags": {"$nin": ["x"]}}) and matches(look, {"tags": {"$nin": ["z"]}})
    assert matches(look, {"tags": {"$all": ["y", "x"]}}) and not matches(look, {"tags": {"$all": ["x", "z"]}})
    assert not matches(look, {"tags": {"$all": []}}) and matches(look, {"name": {"$all": ["n"]}})
    assert matches(look, {"scores": {"$gt": 4}}) and not matches(look, {"scores": {"$gt": 5}})
    for i, tags in enumerate((["a", "b"], ["b"], [])):
        service.memory_todo_save({"title": f"t{i}", "tags": tags})
    titles = lambda f: sorted(r["todo"]["title"] for r in service.memory_todo_list(f))  # noqa: E731
    assert titles({"tags": "a"}) == ["t0"] and titles({"tags": "b"}) == ["t0", "t1"]
    assert titles({"tags": {"$ne": "a"}}) == ["t1", "t2"] and titles({"tags": {"$all": ["a", "b"]}}) == ["t0"]
    with pytest.raises(InvalidInput, match=r"\$all takes a list"):
        service.memory_todo_list({"tags": {"$all": "a"}})


def test_memory_delete_removes_a_key(service):
    service.memory_set("theme", "dark")
    service.memory_set("lang", "en")
    assert service.memory_delete("theme") == {"key": "theme", "deleted": True}
    with pytest.raises(NotFound):
        service.memory_get("theme")
    with pytest.raises(NotFound):
        service.memory_delete("theme")
    assert [kv["key"] for kv in service.memory_list_keys()] == ["lang"]
