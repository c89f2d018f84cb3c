"""`mem serve-mcp` end to end, through the official MCP SDK's client over stdio.

Every test spawns real server processes (`python -m a2e_mem.cli.main serve-mcp`), so it checks what an MCP
client sees: the tool list and schemas, structured results, tool errors, several servers sharing
one store, `--read-only`, and the message given when the `mcp` extra is missing.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

pytest.importorskip("mcp.server.mcpserver")

from mcp import Client, StdioServerParameters  # noqa: E402

from a2e_mem.service import MemoryService  # noqa: E402

from .signals import default_signals  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

# Every tool and the parameters it requires; the read-only ones are those that never write.
REQUIRED: dict[str, set[str]] = {
    "memory_set": {"key", "value"},
    "memory_get": {"key"},
    "memory_delete": {"key"},
    "memory_json_save": {"json"},
    "memory_json_update": {"memoryId", "json"},
    "memory_json_delete": {"memoryId"},
    "memory_json_list": set(),
    "memory_todo_save": {"todo"},
    "memory_todo_update": {"memoryId", "todo"},
    "memory_todo_delete": {"memoryId"},
    "memory_todo_list": set(),
    "memory_markdown_save": {"markdown"},
    "memory_markdown_update": {"memoryId", "markdown"},
    "memory_markdown_delete": {"memoryId"},
    "memory_markdown_list": set(),
    "episodic_memory_create": {"title"},
    "episodic_memory_list": set(),
    "episodic_memory_get": {"memoryId"},
    "episodic_memory_append_event": {"memoryId", "event"},
    "episodic_memory_query_events": set(),
    "episodic_memory_get_event_types": set(),
    "episodic_memory_archive": {"memoryId"},
    "episodic_memory_update_title": {"memoryId", "title"},
    "episodic_memory_unarchive": {"memoryId"},
    "episodic_memory_delete": {"memoryId"},
    "persistent_memory_create": {"label", "retrieval", "contribution"},
    "persistent_memory_get": {"memory_id"},
    "persistent_memory_list": set(),
    "persistent_memory_update": {"memory_id"},
    "persistent_memory_retrieve": {"memory_id"},
    "persistent_memory_delete": {"memory_id"},
    "memory_store": {"entries"},
    "memory_retrieve": set(),
    "memory_forget": set(),
    "create_entities": {"entities"},
    "create_relations": {"relations"},
    "add_observations": {"observations"},
    "delete_entities": {"entityNames"},
    "delete_observations": {"deletions"},
    "delete_relations": {"relations"},
    "read_graph": set(),
    "search_nodes": {"query"},
    "open_nodes": {"names"},
}
ALL_TOOLS = set(REQUIRED)
READ_ONLY_TOOLS = {
    "memory_get", "memory_json_list", "memory_todo_list", "memory_markdown_list",
    "episodic_memory_list", "episodic_memory_get", "episodic_memory_query_events", "episodic_memory_get_event_types",
    "persistent_memory_get", "persistent_memory_list", "persistent_memory_retrieve",
    "memory_retrieve", "read_graph", "search_nodes", "open_nodes",
}  # fmt: skip
WRITING_NAME = re.compile(r"_save$|_update|_delete$|^delete_|create|append|archive|_store$|forget|_set$|^add_")


def server(*args: str) -> Client:
    """A client that spawns its own `mem serve-mcp` on the test's store (MEM_HOME from conftest)."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "a2e_mem.cli.main", "serve-mcp", *args], env={**os.environ}, cwd=str(REPO)
    )
    return Client(params)


async def tick() -> None:
    """Let the clock move on, so that records written next get a later (millisecond) timestamp."""
    await asyncio.sleep(0.005)


class Calls:
    """Calls tools on one client, checks their results, and remembers which tools were called."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.called: set[str] = set()

    async def raw(self, name: str, **args: Any) -> Any:
        """A call's result; a successful one is checked to carry its data in both forms."""
        self.called.add(name)
        r = await self.client.call_tool(name, args)
        if not r.is_error:  # a client that shows the model only `content` sees all the data
            assert len(r.content) == 1 and r.content[0].type == "text", name
            assert json.loads(r.content[0].text) == r.structured_content, f"{name}: text is not the data"
            assert isinstance(r.meta["summary"], str) and r.meta["summary"], name
        return r

    async def ok(self, name: str, **args: Any) -> Any:
        """The structured result of a successful call (a list result unwrapped from {"result": ...})."""
        r = await self.raw(name, **args)
        assert not r.is_error, f"{name} failed: {r.content[0].text}"
        value = r.structured_content
        assert isinstance(value, dict)
        return value["result"] if set(value) == {"result"} else value

    async def fails(self, name: str, *fragments: str, **args: Any) -> str:
        """The error text of a call that must fail, checked to contain every fragment."""
        r = await self.raw(name, **args)
        text = r.content[0].text
        assert r.is_error, f"{name} should have failed, got {r.structured_content}"
        assert r.structured_content is None
        for fragment in fragments:
            assert fragment in text, text
        return text


# -- one server, every tool ---------------------------------------------------------------


def test_every_tool_end_to_end(home):
    asyncio.run(_every_tool(home))


async def _every_tool(home: Path) -> None:
    async with server("--namespace", "proj", "--agent", "assistant") as client:
        tools = (await client.list_tools()).tools
        check_tool_list(tools)
        t = Calls(client)
        await _kv(t)
        await _documents(t)
        await _episodic(t)
        await _a2e(t)
        await _graph_and_persistent(t)
        assert t.called == ALL_TOOLS, f"not called: {sorted(ALL_TOOLS - t.called)}"

    # what the server wrote is in the store, in the server's --namespace
    svc = MemoryService(home)
    try:
        assert svc.memory_get("theme", namespace="proj")["value"] == "light"
        assert len(svc.memory_json_list(namespace="proj")) == 2
        assert svc.memory_json_list(namespace="default") == []
        semantic = svc.retrieve(svc.scope("proj", "someone"), tier="semantic", limit=100)
        assert [e["key"] for e in semantic["entries"]] == [{"id": "staging"}]
    finally:
        svc.close()


def check_tool_list(tools: list[Any]) -> None:
    by_name = {tool.name: tool for tool in tools}
    assert len(tools) == len(by_name) == 43
    assert set(by_name) == ALL_TOOLS
    for name, tool in by_name.items():
        schema = tool.input_schema
        assert tool.description, name
        assert schema["type"] == "object", name
        assert set(schema.get("required", [])) == REQUIRED[name], name
        props = schema["properties"]
        assert REQUIRED[name] <= set(props) and "namespace" in props, name
        for param, spec in props.items():
            assert spec.get("description"), f"{name}.{param} has no description"
        assert tool.annotations is not None, name
        assert tool.annotations.read_only_hint is (name in READ_ONLY_TOOLS), name
        output = tool.output_schema  # declared, and specific: the fields of the tool's own answer
        assert output is not None and output["type"] == "object" and output.get("properties"), f"{name}: no output"
        assert set(output.get("required", [])) <= set(output["properties"]), name
        assert bool(tool.annotations.destructive_hint) is ("delete" in name or name == "memory_forget"), name
    for name in ("memory_store", "memory_retrieve", "memory_forget"):
        assert "agent" in by_name[name].input_schema["properties"]
    assert by_name["memory_json_update"].input_schema["properties"]["json"]["type"] == "object"
    assert by_name["memory_set"].input_schema["properties"]["key"]["type"] == "string"
    tiers = ["working", "episodic", "semantic"]
    assert by_name["memory_retrieve"].input_schema["properties"]["tier"]["enum"] == ["", *tiers]
    assert by_name["memory_forget"].input_schema["properties"]["tier"]["enum"] == tiers


async def _kv(t: Calls) -> None:
    r = await t.raw("memory_set", key="theme", value={"mode": "dark", "size": 12})
    assert not r.is_error and r.meta["summary"] == "stored theme"
    first = r.structured_content
    assert first["key"] == "theme" and first["value"] == {"mode": "dark", "size": 12}
    got = await t.ok("memory_get", key="theme")
    assert got == first
    again = await t.ok("memory_set", key="theme", value="light")
    assert again["value"] == "light" and again["created_at"] == first["created_at"]
    assert again["updated_at"] >= first["updated_at"]
    assert (await t.ok("memory_get", key="theme"))["value"] == "light"
    await t.ok("memory_set", key="editor", value=["neovim", 9])
    assert (await t.ok("memory_get", key="editor"))["value"] == ["neovim", 9]
    await t.fails("memory_get", "memory_not_found", key="theme", namespace="elsewhere")  # namespaces are apart
    await t.fails("memory_get", "memory_not_found", key="missing")
    assert await t.ok("memory_delete", key="editor") == {"key": "editor", "deleted": True}
    await t.fails("memory_get", "memory_not_found", key="editor")
    await t.fails("memory_delete", "memory_not_found", key="editor")


async def _documents(t: Calls) -> None:
    # JSON
    cfg = await t.ok("memory_json_save", json={"name": "cfg", "version": 1}, metadata={"env": "prod"})
    assert cfg["memoryId"].startswith("json_") and cfg["json"] == {"name": "cfg", "version": 1}
    assert cfg["metadata"] == {"env": "prod"} and cfg["created_at"] == cfg["updated_at"]
    await tick()
    dev = await t.ok("memory_json_save", json={"name": "cfg-dev", "version": 3}, metadata={"env": "dev"})
    await tick()
    other = await t.ok("memory_json_save", json={"name": "other", "version": 2}, metadata={"env": "prod"})
    await tick()
    updated = await t.ok("memory_json_update", memoryId=cfg["memoryId"], json={"name": "cfg", "version": 2})
    assert updated["json"]["version"] == 2 and updated["metadata"] == {"env": "prod"}
    assert updated["created_at"] == cfg["created_at"] and updated["memoryId"] == cfg["memoryId"]

    r = await t.raw("memory_json_list")
    assert r.meta["summary"] == "3 JSON memories"
    newest_first = [cfg["memoryId"], other["memoryId"], dev["memoryId"]]  # by update time
    assert [d["memoryId"] for d in r.structured_content["result"]] == newest_first
    prod_v2 = await t.ok("memory_json_list", filters={"version": {"$gte": 2}, "env": "prod"})
    assert [d["memoryId"] for d in prod_v2] == [cfg["memoryId"], other["memoryId"]]
    assert [d["memoryId"] for d in await t.ok("memory_json_list", filters={"name": {"$contains": "DEV"}})] == [
        dev["memoryId"]
    ]
    page = await t.ok("memory_json_list", limit=1, offset=1)
    assert [d["memoryId"] for d in page] == [other["memoryId"]]
    assert await t.ok("memory_json_list", namespace="elsewhere") == []
    await t.fails("memory_json_list", "schema_violation", filters={"version": {"$regex": "x"}})

    gone = await t.ok("memory_json_delete", memoryId=other["memoryId"])
    assert gone == {"memoryId": other["memoryId"], "deleted": True}
    await t.fails("memory_json_delete", "memory_not_found", memoryId=other["memoryId"])
    assert {d["memoryId"] for d in await t.ok("memory_json_list")} == {cfg["memoryId"], dev["memoryId"]}

    # todo
    doc = await t.ok("memory_todo_save", todo={"title": "Complete documentation", "priority": "high"},
                     metadata={"sprint": 3})  # fmt: skip
    assert doc["memoryId"].startswith("todo_") and doc["todo"]["status"] == "pending"
    tests = await t.ok("memory_todo_save", todo={"title": "Write tests", "status": "done", "priority": "low"})
    moved = await t.ok(
        "memory_todo_update",
        memoryId=doc["memoryId"],
        todo={"title": "Complete documentation", "status": "in_progress", "priority": "high"},
    )
    assert moved["todo"]["status"] == "in_progress" and moved["metadata"] == {"sprint": 3}
    assert [d["memoryId"] for d in await t.ok("memory_todo_list", filters={"status": "in_progress"})] == [
        doc["memoryId"]
    ]
    low = await t.ok("memory_todo_list", filters={"priority": {"$in": ["low", "urgent"]}})
    assert [d["memoryId"] for d in low] == [tests["memoryId"]]
    assert [d["memoryId"] for d in await t.ok("memory_todo_list", filters={"sprint": 3})] == [doc["memoryId"]]
    assert len(await t.ok("memory_todo_list")) == 2
    assert (await t.ok("memory_todo_delete", memoryId=tests["memoryId"]))["deleted"] is True
    assert [d["memoryId"] for d in await t.ok("memory_todo_list")] == [doc["memoryId"]]
    await t.fails("memory_todo_update", "memory_not_found", memoryId=tests["memoryId"], todo={"title": "x"})

    # markdown
    notes = await t.ok("memory_markdown_save", markdown="# Notes\n\nDeploy on Fridays.", metadata={"topic": "ops"})
    assert notes["memoryId"].startswith("markdown_") and notes["markdown"] == "# Notes\n\nDeploy on Fridays."
    kept = await t.ok("memory_markdown_update", memoryId=notes["memoryId"], markdown="# Notes\n\nDeploy on Mondays.")
    assert kept["metadata"] == {"topic": "ops"} and kept["markdown"].endswith("Mondays.")
    swapped = await t.ok(
        "memory_markdown_update", memoryId=notes["memoryId"], markdown="# Notes\n\nNo deploys.",
        metadata={"topic": "dev"},
    )  # fmt: skip
    assert swapped["metadata"] == {"topic": "dev"}
    assert len(await t.ok("memory_markdown_list", filters={"topic": "dev"})) == 1
    assert await t.ok("memory_markdown_list", filters={"topic": "ops"}) == []
    assert len(await t.ok("memory_markdown_list", filters={"markdown": {"$contains": "no deploys"}})) == 1
    assert (await t.ok("memory_markdown_delete", memoryId=notes["memoryId"]))["deleted"] is True
    assert await t.ok("memory_markdown_list") == []


async def _episodic(t: Calls) -> None:
    log = await t.ok("episodic_memory_create", title="User Session Log", swarmId="deploy-bots")
    assert log["memoryId"].startswith("ep_") and log["title"] == "User Session Log"
    assert log["swarmId"] == "deploy-bots" and log["archived"] is False and log["eventCount"] == 0
    second = await t.ok("episodic_memory_create", title="Second log", swarmId="deploy-bots")
    lone = await t.ok("episodic_memory_create", title="Lone log")
    assert lone["swarmId"] is None
    mid = log["memoryId"]

    events = [
        {"event_type": "user_action", "emitting_agent_id": "agent-123", "tags": ["ui"], "payload": {"action": "click"}},
        {"event_type": "system", "emitting_agent_id": "agent-9", "team_id": "t1", "payload": "boot"},
        {"event_type": "user_action", "emitting_agent_id": "agent-123", "tags": ["ui", "keys"], "payload": {"k": 1}},
    ]
    added = []
    for event in events:
        await tick()
        r = await t.raw("episodic_memory_append_event", memoryId=mid, event=event)
        assert not r.is_error, r.content[0].text
        added.append(r.structured_content)
        assert r.meta["summary"] == f"appended {r.structured_content['eventId']}"
    assert [a["event_type"] for a in added] == ["user_action", "system", "user_action"]
    assert added[0]["memoryId"] == mid and added[0]["payload"] == {"action": "click"} and added[1]["tags"] == []
    deploy = {"event_type": "deploy", "emitting_agent_id": "agent-9", "tags": ["ops"], "payload": "v1"}
    await t.ok("episodic_memory_append_event", memoryId=second["memoryId"], event=deploy)
    await t.fails("episodic_memory_append_event", "schema_violation", memoryId=mid, event={"event_type": "x"})

    def ids(found: list[dict]) -> list[str]:
        return [e["eventId"] for e in found]

    r = await t.raw("episodic_memory_query_events", memoryId=mid)
    assert r.meta["summary"] == "3 events"
    assert ids(r.structured_content["result"]) == ids(added)  # oldest first
    query = "episodic_memory_query_events"
    assert ids(await t.ok(query, memoryId=mid, event_type="user_action")) == ids([added[0], added[2]])
    assert ids(await t.ok(query, memoryId=mid, event_type="user_action", lastCount=1)) == ids([added[2]])
    assert ids(await t.ok(query, memoryId=mid, lastCount=2)) == ids(added[1:])
    assert ids(await t.ok(query, memoryId=mid, tags=["keys", "nope"])) == ids([added[2]])
    assert ids(await t.ok(query, memoryId=mid, emitting_agent_id="agent-9")) == ids([added[1]])
    assert ids(await t.ok(query, memoryId=mid, team_id="t1")) == ids([added[1]])
    assert ids(await t.ok(query, memoryId=mid, lastMinutes=60)) == ids(added)
    assert ids(await t.ok(query, memoryId=mid, since=added[1]["timestamp"])) == ids(added[1:])
    assert await t.ok(query, memoryId=mid, since="2099-01-01T00:00:00Z") == []
    swarm = await t.ok(query, swarmId="deploy-bots")
    assert len(swarm) == 4 and {e["memoryId"] for e in swarm} == {mid, second["memoryId"]}
    await t.fails(query, "schema_violation")  # neither memoryId nor swarmId
    await t.fails(query, "memory_not_found", memoryId="ep_missing")

    r = await t.raw("episodic_memory_get_event_types", memoryId=mid)
    assert r.structured_content == {"result": ["user_action", "system"]}
    assert r.meta["summary"] == "user_action, system"
    swarm_types = await t.ok("episodic_memory_get_event_types", swarmId="deploy-bots")
    assert sorted(swarm_types) == ["deploy", "system", "user_action"]
    assert await t.ok("episodic_memory_get_event_types", memoryId=lone["memoryId"]) == []

    got = await t.ok("episodic_memory_get", memoryId=mid)
    assert got["eventCount"] == 3 and got["title"] == "User Session Log" and got["archived"] is False
    listed = await t.ok("episodic_memory_list")
    assert {m["memoryId"]: m["eventCount"] for m in listed} == {mid: 3, second["memoryId"]: 1, lone["memoryId"]: 0}
    assert len(await t.ok("episodic_memory_list", filters={"swarmId": "deploy-bots"})) == 2
    assert [m["memoryId"] for m in await t.ok("episodic_memory_list", filters={"title": "Lone log"})] == [
        lone["memoryId"]
    ]

    renamed = await t.ok("episodic_memory_update_title", memoryId=second["memoryId"], title="Deploy log")
    assert renamed["title"] == "Deploy log" and renamed["eventCount"] == 1
    archived = await t.ok("episodic_memory_archive", memoryId=second["memoryId"])
    assert archived["archived"] is True and archived["title"] == "Deploy log"
    assert second["memoryId"] not in {m["memoryId"] for m in await t.ok("episodic_memory_list")}
    with_archived = await t.ok("episodic_memory_list", includeArchived=True)
    assert second["memoryId"] in {m["memoryId"] for m in with_archived} and len(with_archived) == 3
    await t.fails(
        "episodic_memory_append_event", "archived", memoryId=second["memoryId"],
        event={"event_type": "deploy", "emitting_agent_id": "agent-9", "payload": "v2"},
    )  # fmt: skip
    assert len(await t.ok(query, memoryId=second["memoryId"])) == 1  # archived logs stay readable

    # an archived memory is read-only: renaming and appending are refused as a conflict
    text = await t.fails("episodic_memory_update_title", "conflict: ", "archived", memoryId=second["memoryId"],
                         title="Renamed while archived")  # fmt: skip
    assert "invalid_message" not in text
    await t.fails(
        "episodic_memory_append_event", "conflict: ", memoryId=second["memoryId"],
        event={"event_type": "deploy", "emitting_agent_id": "agent-9", "payload": "v2"},
    )  # fmt: skip
    await tick()
    again = await t.ok("episodic_memory_archive", memoryId=second["memoryId"])  # archiving again changes nothing
    assert again["archived_at"] == archived["archived_at"] and again["title"] == "Deploy log"
    # memoryId and swarmId together are refused, as at the CLI (they could name different memories)
    await t.fails(query, "schema_violation", "not both", memoryId=mid, swarmId="deploy-bots")
    await t.fails("episodic_memory_get_event_types", "not both", memoryId=mid, swarmId="deploy-bots")

    back = await t.ok("episodic_memory_unarchive", memoryId=second["memoryId"])
    assert back["archived"] is False and "archived_at" not in back and back["eventCount"] == 1
    assert second["memoryId"] in {m["memoryId"] for m in await t.ok("episodic_memory_list")}
    v2 = {"event_type": "deploy", "emitting_agent_id": "agent-9", "payload": "v2"}
    await t.ok("episodic_memory_append_event", memoryId=second["memoryId"], event=v2)
    assert (await t.ok("episodic_memory_unarchive", memoryId=second["memoryId"]))["archived"] is False  # no-op
    await t.fails("episodic_memory_unarchive", "memory_not_found", memoryId="ep_missing")

    gone = await t.ok("episodic_memory_delete", memoryId=second["memoryId"])
    assert gone == {"memoryId": second["memoryId"], "deleted": True, "deletedEvents": 2}
    await t.fails("episodic_memory_get", "memory_not_found", memoryId=second["memoryId"])
    await t.fails(query, "memory_not_found", memoryId=second["memoryId"])
    await t.fails("episodic_memory_delete", "memory_not_found", memoryId=second["memoryId"])
    assert len(await t.ok(query, swarmId="deploy-bots")) == 3  # the swarm lost that memory's events


async def _a2e(t: Calls) -> None:
    entries = [
        {"key": {"topic": "prefs"}, "content": {"language": "python"}, "tier": "episodic", "tags": ["preferences"]},
        {"key": {"topic": "scratch"}, "content": "a temporary plan for the refactor", "tier": "working"},
        {
            "key": {"id": "staging"},
            "content": "The staging database is rebuilt every Sunday at 02:00 UTC.",
            "tier": "semantic",
            "tags": ["ops"],
        },
        {"key": {"topic": "bad"}, "content": "x", "tier": "forever"},
        {"key": {"topic": "bad"}, "content": "x", "tier": "episodic", "score": 7},
        "not an entry",  # refused on its own, like the two above
    ]
    r = await t.raw("memory_store", entries=entries)
    assert not r.is_error, r.content[0].text
    assert r.meta["summary"] == "stored 3, 3 errors"
    stored = r.structured_content
    assert stored["stored"] == [{"topic": "prefs"}, {"topic": "scratch"}, {"id": "staging"}]
    assert [e.split(":")[0] for e in stored["errors"]] == ["entries[3]", "entries[4]", "entries[5]"]

    # the working tier lives as long as the server: a later call still sees it
    working = await t.ok("memory_retrieve", tier="working")
    assert [e["key"] for e in working["entries"]] == [{"topic": "scratch"}] and working["total"] == 1
    everything = await t.ok("memory_retrieve", limit=100)
    assert everything["total"] == 3
    assert sorted(e["tier"] for e in everything["entries"]) == ["episodic", "semantic", "working"]
    for entry in everything["entries"]:
        assert 0 <= entry["relevance"] <= 1 and "vector" not in entry and "id" not in entry

    r = await t.raw("memory_retrieve", query="when is the staging database rebuilt?", limit=1)
    assert r.meta["summary"] == "1 of 3 matching"
    best = r.structured_content["entries"][0]
    assert best["key"] == {"id": "staging"} and best["relevance"] > 0.3 and best["tags"] == ["ops"]
    by_tag = await t.ok("memory_retrieve", tags=["preferences"])
    assert [e["content"] for e in by_tag["entries"]] == [{"language": "python"}]
    by_key = await t.ok("memory_retrieve", keys=[{"topic": "prefs"}, {"topic": "nothing"}])
    assert [e["key"] for e in by_key["entries"]] == [{"topic": "prefs"}]
    assert (await t.ok("memory_retrieve", tier="semantic", tags=["preferences"]))["total"] == 0  # filters AND
    # episodic is per agent, semantic shared by the namespace, working per (namespace, agent) session
    assert (await t.ok("memory_retrieve", tier="episodic", agent="other"))["total"] == 0
    assert (await t.ok("memory_retrieve", tier="semantic", agent="other"))["total"] == 1
    assert (await t.ok("memory_retrieve", tier="working", agent="other"))["total"] == 0
    assert (await t.ok("memory_retrieve", namespace="elsewhere"))["total"] == 0
    clamped = await t.ok("memory_retrieve", limit=5000)  # over 1000: clamped, and said so
    assert clamped["total"] == 3 and clamped["warnings"] == ["limit 5000 is over the maximum of 1000: clamped to 1000"]
    await t.fails("memory_retrieve", "schema_violation", limit=-1)
    # the time filters (an extension): every entry here was stored just now
    assert (await t.ok("memory_retrieve", since="yesterday", limit=100))["total"] == 3
    assert (await t.ok("memory_retrieve", until="yesterday", limit=100))["total"] == 0
    await t.fails("memory_retrieve", "schema_violation", "since", since="not a date")
    # an unknown tier is refused (it used to read, and forget would delete, the semantic tier)
    await t.fails("memory_retrieve", "tier", tier="forever")
    await t.fails("memory_forget", "tier", tier="forever")
    assert (await t.ok("memory_retrieve", tier="semantic"))["total"] == 1

    r = await t.raw("memory_forget", keys=[{"topic": "prefs"}])  # default tier: episodic
    assert r.structured_content == {"deleted": 1} and r.meta["summary"] == "deleted 1"
    assert (await t.ok("memory_retrieve", tier="episodic"))["total"] == 0
    assert await t.ok("memory_forget", tags=["nothing-has-this"], tier="semantic") == {"deleted": 0}
    assert await t.ok("memory_forget", tier="working", all=True) == {"deleted": 1}
    assert (await t.ok("memory_retrieve", tier="working"))["total"] == 0
    assert (await t.ok("memory_retrieve"))["total"] == 1  # the semantic entry is left


async def _graph_and_persistent(t: Calls) -> None:
    people = [
        {"name": "Alice", "entityType": "person", "observations": ["likes green tea"]},
        {"name": "Acme", "entityType": "company", "observations": ["makes anvils"]},
        {"name": "Bob", "entityType": "person"},
    ]
    r = await t.raw("create_entities", entities=people)
    assert r.meta["summary"] == "created 3 entities"
    assert r.structured_content["result"][2] == {"name": "Bob", "entityType": "person", "observations": []}
    assert await t.ok("create_entities", entities=people[:1]) == []  # existing names are left alone
    relations = [
        {"from": "Alice", "to": "Acme", "relationType": "works_at"},
        {"from": "Bob", "to": "Alice", "relationType": "knows"},
    ]
    assert await t.ok("create_relations", relations=relations) == relations
    assert await t.ok("create_relations", relations=relations[:1]) == []
    dangling = [{"from": "Alice", "to": "Zed", "relationType": "knows"}]
    await t.fails("create_relations", "memory_not_found", relations=dangling)
    added = await t.ok("add_observations", observations=[{"entityName": "Alice", "contents": ["speaks Portuguese"]}])
    assert added == [{"entityName": "Alice", "addedObservations": ["speaks Portuguese"]}]
    await t.fails("add_observations", "memory_not_found", observations=[{"entityName": "Zed", "contents": ["x"]}])

    found = await t.ok("search_nodes", query="green tea")
    assert found["entities"][0]["name"] == "Alice"
    assert found["entities"][0]["observations"] == ["likes green tea", "speaks Portuguese"]
    opened = await t.ok("open_nodes", names=["Alice", "Acme", "Nobody"])
    assert sorted(e["name"] for e in opened["entities"]) == ["Acme", "Alice"]
    assert opened["relations"] == [relations[0]]
    r = await t.raw("read_graph")
    assert r.meta["summary"] == "3 entities, 2 relations"
    graph = r.structured_content
    assert [e["name"] for e in graph["entities"]] == ["Acme", "Alice", "Bob"]
    assert sorted(graph["relations"], key=lambda rel: rel["from"]) == relations
    assert len((await t.ok("read_graph", limit=1, offset=1))["entities"]) == 1

    # persistent memories over this namespace's key-value pairs and graph
    prefs = await t.ok(
        "persistent_memory_create",
        label="User Preferences",
        retrieval={"source_type": "kv", "source_id": "proj"},
        contribution={"format": "markdown", "max_tokens": 500},
        inputs_scope=["chat"],
        description="the user's settings",
    )
    assert prefs["id"].startswith("pm_") and prefs["status"] == "active" and prefs["inputs_scope"] == ["chat"]
    assert await t.ok("persistent_memory_get", memory_id=prefs["id"]) == prefs
    r = await t.raw("persistent_memory_retrieve", memory_id=prefs["id"], keywords=["theme"], action="find")
    assert not r.is_error, r.content[0].text
    got = r.structured_content
    assert got["source_type"] == "kv" and got["query"] == "theme find" and got["truncated"] is False
    assert [item["key"] for item in got["items"]] == ["theme"] and got["items"][0]["value"] == "light"
    assert got["contribution"].startswith("## User Preferences") and "theme: light" in got["contribution"]
    assert r.meta["summary"] == got["contribution"]

    kg = await t.ok(
        "persistent_memory_create",
        id="people-graph",
        label="People",
        retrieval={"source_type": "kg", "source_id": "proj", "limit": 5},
        contribution={"format": "text"},
    )
    assert kg["id"] == "people-graph"
    await t.fails("persistent_memory_create", "people-graph", id="people-graph", label="Again",
                  retrieval={"source_type": "kg", "source_id": "proj"}, contribution={"format": "text"})  # fmt: skip
    await t.fails("persistent_memory_create", "schema_violation", label="Bad",
                  retrieval={"source_type": "sql", "source_id": "x"}, contribution={"format": "text"})  # fmt: skip
    got = await t.ok("persistent_memory_retrieve", memory_id="people-graph", query="Portuguese")
    assert got["source_type"] == "kg" and got["items"][0]["type"] == "entity" and got["items"][0]["name"] == "Alice"
    linked = {(i["from"], i["to"]) for i in got["items"] if i["type"] == "relation"}
    assert linked == {("Alice", "Acme"), ("Bob", "Alice")}  # relations touching the matches
    assert "Alice (person): likes green tea; speaks Portuguese" in got["contribution"]

    listed = await t.ok("persistent_memory_list")
    assert [p["id"] for p in listed] == ["people-graph", prefs["id"]]  # newest first
    assert [p["id"] for p in await t.ok("persistent_memory_list", input_scope="chat")] == [prefs["id"]]
    changed = await t.ok("persistent_memory_update", memory_id=prefs["id"], status="disabled", label="Prefs (old)")
    assert changed["status"] == "disabled" and changed["label"] == "Prefs (old)"
    assert changed["retrieval"] == prefs["retrieval"] and changed["created_at"] == prefs["created_at"]
    assert [p["id"] for p in await t.ok("persistent_memory_list", active_only=True)] == ["people-graph"]
    await t.fails("persistent_memory_retrieve", "disabled", memory_id=prefs["id"])
    await t.fails("persistent_memory_update", "memory_not_found", memory_id="pm_missing", label="x")
    await t.fails("persistent_memory_update", "schema_violation", memory_id=prefs["id"], status="sleeping")
    assert await t.ok("persistent_memory_delete", memory_id=prefs["id"]) == {"id": prefs["id"], "deleted": True}
    await t.fails("persistent_memory_get", "memory_not_found", memory_id=prefs["id"])
    await t.fails("persistent_memory_delete", "memory_not_found", memory_id=prefs["id"])
    assert [p["id"] for p in await t.ok("persistent_memory_list")] == ["people-graph"]

    # deletions
    deletions = [{"entityName": "Alice", "observations": ["likes green tea"]}]
    dropped = await t.ok("delete_observations", deletions=deletions)
    assert dropped == [{"entityName": "Alice", "deletedObservations": ["likes green tea"]}]
    assert (await t.ok("open_nodes", names=["Alice"]))["entities"][0]["observations"] == ["speaks Portuguese"]
    r = await t.raw("delete_relations", relations=[relations[1]])
    assert r.structured_content == {"deletedRelations": 1} and r.meta["summary"] == "deleted 1 relations"
    r = await t.raw("delete_entities", entityNames=["Acme", "Nobody"])
    assert r.structured_content == {"deletedEntities": 1, "deletedRelations": 1}  # Alice works_at Acme went too
    assert r.meta["summary"] == "deleted 1 entities"
    graph = await t.ok("read_graph")
    assert [e["name"] for e in graph["entities"]] == ["Alice", "Bob"] and graph["relations"] == []
    assert (await t.ok("search_nodes", query="anvils"))["entities"] == []


# -- invalid calls --------------------------------------------------------------------------


def test_invalid_calls_are_tool_errors_and_the_server_survives():
    asyncio.run(_invalid_calls())


async def _invalid_calls() -> None:
    async with server() as client:
        t = Calls(client)
        text = await t.fails("memory_json_update", "memory_not_found", memoryId="json_nope", json={"a": 1})
        assert "json_nope" in text
        await t.fails("episodic_memory_get", "memory_not_found", memoryId="ep_nope")
        await t.fails("persistent_memory_get", "memory_not_found", memory_id="pm_nope")
        # arguments that do not fit the input schema are refused before the tool runs
        text = await t.fails("memory_json_save", "json", json=[1, 2])
        assert "valid dictionary" in text
        await t.fails("memory_json_update", "memoryId", json={"a": 1})  # a required argument is missing
        await t.fails("memory_retrieve", "limit", limit="many")
        await t.fails("memory_store", "entries", entries="not a list")
        # an unknown tool: the SDK answers with an error result (not a protocol error)
        r = await client.call_tool("no_such_tool", {})
        assert r.is_error and r.content[0].text == "Unknown tool: no_such_tool"
        # invalid values the schema lets through are refused by the store, with its error code
        await t.fails("memory_set", "schema_violation", key="", value=1)
        await t.fails("episodic_memory_create", "schema_violation", title="   ")
        await t.fails("search_nodes", "schema_violation", query=" ")
        await t.fails("search_nodes", "limit must be 0..1000", query="x", limit=-1)  # as `mem kg search --limit`
        # nothing was written, and the server still answers
        assert await t.ok("memory_json_list") == []
        saved = await t.ok("memory_json_save", json={"still": "alive"})
        assert (await t.ok("memory_json_list"))[0]["memoryId"] == saved["memoryId"]


def test_arguments_of_the_wrong_type_are_a_schema_violation_naming_each(home):
    """The SDK's own check answered pydantic's text, without the code the README promises
    (`Error executing tool <name>: <code>: <message>`; audit P24)."""
    asyncio.run(_wrong_types())


async def _wrong_types() -> None:
    async with server() as client:
        t = Calls(client)
        text = await t.fails("memory_retrieve", "schema_violation", limit="ten")
        assert text.startswith("Error executing tool memory_retrieve: schema_violation: limit: ") and "'ten'" in text
        text = await t.fails("memory_retrieve", "schema_violation: tier: ", tier="bogus", limit=[1])
        assert "; limit: " in text and "errors.pydantic.dev" not in text
        await t.fails("memory_set", "schema_violation: key: Field required; value: Field required")
        assert (await t.ok("memory_set", key="k", value=1))["value"] == 1
        # pydantic's lax mode took "yes", 1, "on" for a boolean: `"all": 1` emptied a tier (audit A25)
        await t.ok("memory_store", entries=[{"key": {"k": "a"}, "content": "kept", "tier": "episodic"}])
        for truthy in ("yes", 1, "1", "on", "true"):
            text = await t.fails("memory_forget", "schema_violation: all: Input should be a valid boolean", all=truthy)
            assert repr(truthy) in text
        await t.fails("memory_retrieve", "schema_violation: limit: Input should be a valid integer", limit="5")
        found = await t.ok("memory_retrieve", keys=[{"k": "a"}], limit=5.0)  # JSON Schema's integer: 5.0 is one
        assert [e["content"] for e in found["entries"]] == ["kept"]


# -- unknown arguments (audit items 18 and 21) ----------------------------------------------


def test_unknown_arguments_are_refused_naming_them(home):
    asyncio.run(_unknown_arguments())
    svc = MemoryService(home)
    try:  # nothing the refused calls carried was written
        assert svc.persistent_memory_list() == [svc.persistent_memory_get("draft-one")]
        assert svc.kg_read_graph()["entities"] == []
    finally:
        svc.close()


async def _unknown_arguments() -> None:
    async with server() as client:
        t = Calls(client)
        mid = (await t.ok("episodic_memory_create", title="log"))["memoryId"]
        event = {"event_type": "a", "emitting_agent_id": "x", "payload": "p"}
        await t.ok("episodic_memory_append_event", memoryId=mid, event=event)
        await t.ok("episodic_memory_append_event", memoryId=mid, event={**event, "event_type": "b"})
        # a misspelt filter used to be dropped, so the query returned every event
        text = await t.fails("episodic_memory_query_events", "schema_violation", memoryId=mid, eventType="b")
        assert "unknown argument 'eventType' (did you mean 'event_type'?)" in text
        assert [e["event_type"] for e in await t.ok("episodic_memory_query_events", memoryId=mid, event_type="b")] == [
            "b"
        ]
        text = await t.fails("memory_json_list", "schema_violation", filter={"a": 1}, limt=3)
        assert "'filter' (did you mean 'filters'?)" in text and "'limt' (did you mean 'limit'?)" in text
        await t.fails("memory_retrieve", "unknown argument 'min_scor'", min_scor=0.5)
        # unknown keys inside documented objects are refused too
        text = await t.fails(
            "episodic_memory_append_event", "schema_violation", memoryId=mid, event={**event, "eventType": "c"}
        )
        assert "unknown event field 'eventType' (did you mean 'event_type'?)" in text
        assert len(await t.ok("episodic_memory_query_events", memoryId=mid)) == 2
        await t.fails("create_entities", "unknown entity field 'entity_type'",
                      entities=[{"name": "A", "entity_type": "person"}])  # fmt: skip
        kv = {"source_type": "kv", "source_id": "default"}
        await t.fails("persistent_memory_create", "retrieval.filters", label="x",
                      retrieval={**kv, "filters": {"tags": ["a"]}}, contribution={"format": "text"})  # fmt: skip
        await t.fails("persistent_memory_create", "retrieval", label="x",
                      retrieval={**kv, "limits": 3}, contribution={"format": "text"})  # fmt: skip
        text = await t.fails("memory_store", "schema_violation", entries=[
            {"key": {"k": 1}, "content": "x", "tier": "semantic"},
            {"key": {"k": 2}, "content": "y", "tier": "semantic", "tag": ["ops"]},
        ])  # fmt: skip
        assert "unknown entries[1] field 'tag' (did you mean 'tags'?)" in text
        assert (await t.ok("memory_retrieve"))["total"] == 0  # refused as a whole: nothing stored
        # status is a field of a persistent memory: create honours it (it used to be dropped)
        made = await t.ok("persistent_memory_create", id="draft-one", label="d", retrieval=kv,
                          contribution={"format": "text"}, status="draft")  # fmt: skip
        assert made["status"] == "draft"
        assert (await t.ok("persistent_memory_get", memory_id="draft-one"))["status"] == "draft"
        await t.fails("persistent_memory_create", "status", id="off", label="d", retrieval=kv,
                      contribution={"format": "text"}, status="sleeping")  # fmt: skip
        # and the schemas say so
        for tool in (await client.list_tools()).tools:
            assert tool.input_schema.get("additionalProperties") is False, tool.name


def test_server_info_carries_the_package_version():
    asyncio.run(_server_info())


async def _server_info() -> None:
    from importlib.metadata import version

    async with server() as client:
        assert client.server_info is not None and client.server_info.name == "mem"
        assert client.server_info.version == version("a2e-mem")


# -- several servers, one store -------------------------------------------------------------


def test_two_servers_on_one_store_see_each_others_writes(home):
    asyncio.run(_two_servers(home, per_server=30, saves=5))
    svc = MemoryService(home)  # and a fresh process-level view agrees
    try:
        found = svc.retrieve(svc.scope("shared", "checker"), tier="semantic", limit=1000)
        assert found["total"] == 60 and len({e["key"]["n"] for e in found["entries"]}) == 60
        assert len(svc.memory_json_list(namespace="shared")) == 10
    finally:
        svc.close()


async def _two_servers(home: Path, per_server: int, saves: int) -> None:
    async with (
        server("--namespace", "shared", "--agent", "a") as a,
        server("--namespace", "shared", "--agent", "b") as b,
    ):
        clients = {"a": a, "b": b}

        async def store(name: str, i: int) -> None:
            entry = {"key": {"server": name, "n": f"{name}{i}"}, "content": f"fact {i} from {name}", "tier": "semantic"}
            r = await clients[name].call_tool("memory_store", {"entries": [entry]})
            assert not r.is_error, r.content[0].text
            assert r.structured_content == {"stored": [entry["key"]], "errors": []}

        async def save(name: str, i: int) -> None:
            r = await clients[name].call_tool("memory_json_save", {"json": {"server": name, "i": i}})
            assert not r.is_error, r.content[0].text

        jobs = [store(name, i) for i in range(per_server) for name in clients]
        jobs += [save(name, i) for i in range(saves) for name in clients]
        await asyncio.gather(*jobs)

        expected = {f"{name}{i}" for name in clients for i in range(per_server)}
        for name, client in clients.items():
            r = await client.call_tool("memory_retrieve", {"tier": "semantic", "limit": 1000})
            assert not r.is_error, r.content[0].text
            seen = r.structured_content
            assert seen["total"] == 2 * per_server, name
            assert {e["key"]["n"] for e in seen["entries"]} == expected, name
            r = await client.call_tool("memory_json_list", {"limit": 1000})
            listed = r.structured_content["result"]
            assert sorted((d["json"]["server"], d["json"]["i"]) for d in listed) == sorted(
                (n, i) for n in clients for i in range(saves)
            ), name


# -- read-only --------------------------------------------------------------------------------


def test_read_only_exposes_only_the_tools_that_do_not_write(home):
    svc = MemoryService(home)
    try:
        svc.store(svc.scope("default", "default"), [{"key": {"k": 1}, "content": "kept before", "tier": "semantic"}])
        svc.memory_json_save({"seed": True})
    finally:
        svc.close()
    asyncio.run(_read_only())


async def _read_only() -> None:
    async with server("--read-only") as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert names == READ_ONLY_TOOLS
        assert not [name for name in names if WRITING_NAME.search(name)]
        assert ALL_TOOLS - names == {name for name in ALL_TOOLS if WRITING_NAME.search(name)}
        r = await client.call_tool("memory_retrieve", {"query": "kept", "tier": "semantic"})
        assert not r.is_error and [e["content"] for e in r.structured_content["entries"]] == ["kept before"]
        r = await client.call_tool("memory_json_list", {})
        assert [d["json"] for d in r.structured_content["result"]] == [{"seed": True}]
        r = await client.call_tool("memory_store", {"entries": [{"key": {"k": 2}, "content": "x", "tier": "semantic"}]})
        assert r.is_error and "Unknown tool" in r.content[0].text


# -- without the extra -------------------------------------------------------------------------


def test_serve_mcp_without_the_extra_says_what_to_install(tmp_path):
    fake = tmp_path / "no-mcp" / "mcp"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named mcp (hidden by the test)')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(fake.parent), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(
        [sys.executable, "-m", "a2e_mem.cli.main", "serve-mcp"],
        cwd=REPO, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode != 0
    assert proc.stdout == ""
    assert proc.stderr == "mem: error: serve-mcp needs the MCP SDK: pip install 'a2e-mem[mcp]'\n"


# -- found while writing these tests ------------------------------------------------------------


def test_store_refuses_an_unknown_tier(service):
    scope = service.scope("default", "default")
    service.store(scope, [{"key": {"k": 1}, "content": "shared fact", "tier": "semantic"}])
    try:
        deleted = service.forget(scope, tier="semantic-typo")
    except Exception:  # noqa: BLE001 - any refusal will do
        deleted = None
    assert service.retrieve(scope, tier="semantic")["total"] == 1, f"forget deleted {deleted}"
    with pytest.raises(Exception, match="tier"):
        service.retrieve(scope, tier="semantic-typo")


# -- persistent memories and list filters as the spec's sample calls use them (audit 16-20) ----


def test_persistent_memories_and_filters_as_the_spec_samples_call_them(home):
    asyncio.run(_spec_samples())


async def _spec_samples() -> None:
    async with server() as client:
        t = Calls(client)
        await t.ok("memory_set", key="theme", value="dark", namespace="user-preferences-store")
        await t.ok("memory_set", key="long", value="a very long value " * 40, namespace="user-preferences-store")
        prefs = await t.ok(
            "persistent_memory_create", label="User Preferences", description="Stores user preferences across sessions",
            inputs_scope=["user_settings", "preferences"],
            retrieval={"source_type": "kv", "source_id": "user-preferences-store", "limit": 10},
            contribution={"format": "json", "max_tokens": 500},
        )  # fmt: skip
        got = await t.ok("persistent_memory_retrieve", memory_id=prefs["id"], keywords=["theme", "preferences"],
                         action="find", query="user display settings")  # fmt: skip
        assert [i["key"] for i in got["items"]] == ["theme"]
        small = await t.ok("persistent_memory_create", label="Small", contribution={"format": "json", "max_tokens": 30},
                           retrieval={"source_type": "kv", "source_id": "user-preferences-store"})  # fmt: skip
        got = await t.ok("persistent_memory_retrieve", memory_id=small["id"], keywords=["theme", "long"])
        assert [i["key"] for i in got["items"]] == ["theme"] and got["truncated"] is True
        assert orjson.loads(got["contribution"]) == got["items"]

        kv = {"source_type": "kv", "source_id": "p"}
        await t.fails("persistent_memory_create", "unknown placeholder {keyword}", "allowed: {action}", label="Bad",
                      retrieval={**kv, "query_template": "{keyword}"}, contribution={"format": "text"})  # fmt: skip
        await t.fails("persistent_memory_create", "contribution.template", "{payload}", label="Bad", retrieval=kv,
                      contribution={"format": "text", "template": "{payload}"})  # fmt: skip

        mid = (await t.ok("episodic_memory_create", title="ops log", namespace="ops"))["memoryId"]
        event = {"event_type": "deploy", "emitting_agent_id": "ci", "payload": "deployed api"}
        await t.ok("episodic_memory_append_event", memoryId=mid, event=event, namespace="ops")
        eventlog = {"source_type": "eventlog", "source_id": mid}
        since = {**eventlog, "filters": {"since": "yesterday"}}
        await t.fails("persistent_memory_create", "retrieval.filters.since", label="Ops", retrieval=since,
                      contribution={"format": "text"})  # fmt: skip
        await t.fails("persistent_memory_create", "retrieval.source_id", label="Ops",
                      retrieval={**eventlog, "source_id": "ep_nope"}, contribution={"format": "text"})  # fmt: skip
        ops = await t.ok("persistent_memory_create", label="Ops", retrieval=eventlog, contribution={"format": "text"})
        got = await t.ok("persistent_memory_retrieve", memory_id=ops["id"], keywords=["api"])
        assert [e["payload"] for e in got["items"]] == ["deployed api"]
        await t.fails("episodic_memory_query_events", "not both", memoryId=mid, swarmId="s", namespace="ops")

        await t.ok("episodic_memory_create", title="quiet", namespace="ops")
        busy = await t.ok("episodic_memory_list", filters={"eventCount": {"$gte": 1}}, namespace="ops")
        assert [m["title"] for m in busy] == ["ops log"]
        await t.ok("memory_json_save", json={"name": "tagged", "tags": ["x", "y"]})
        await t.ok("memory_json_save", json={"name": "other", "tags": ["z"]})
        assert [d["json"]["name"] for d in await t.ok("memory_json_list", filters={"tags": "x"})] == ["tagged"]


# -- results deeper than a client parses (audit A22 F1) ----------------------------------------


def nested(depth: int) -> Any:
    """A value `depth` arrays deep: [[...["deep"]...]]."""
    value: Any = "deep"
    for _ in range(depth):
        value = [value]
    return value


def test_a_value_too_deep_for_a_client_comes_back_as_its_json_text(home):
    """The SDK client's parser refuses a message nesting over ~200 levels and the call used to hang:
    a stored value nested 200 or 250 deep (the store takes 250) now comes back as its JSON text,
    with a warning naming it, and the rest of the result as it was."""
    svc = MemoryService(home)
    try:
        deep = [
            {"key": {"k": "deep"}, "content": nested(250), "tier": "semantic", "tags": ["t"]},
            {"key": {"k": "flat"}, "content": {"note": ["a flat note"]}, "tier": "semantic", "tags": ["t"]},
        ]
        assert svc.store(svc.scope("default", "default"), deep)["errors"] == []
        svc.memory_set("kdeep", nested(200))
        svc.memory_todo_save({"title": "t", "steps": nested(200)}, None)
        mid = svc.episodic_memory_create("log")["memoryId"]
        svc.episodic_memory_append_event(
            mid, {"event_type": "e", "emitting_agent_id": "a", "payload": {"p": nested(200)}}
        )
    finally:
        svc.close()
    asyncio.run(_too_deep(mid))


async def _too_deep(mid: str) -> None:
    async with server() as client:
        t = Calls(client)

        async def ok(name: str, **args: Any) -> Any:  # a hang is the bug: fail instead of waiting forever
            return await asyncio.wait_for(t.ok(name, **args), 60)

        found = await ok("memory_retrieve", tags=["t"])
        by_key = {e["key"]["k"]: e for e in found["entries"]}
        assert json.loads(by_key["deep"]["content"]) == nested(250)
        assert by_key["flat"]["content"] == {"note": ["a flat note"]}
        at = next(i for i, e in enumerate(found["entries"]) if e["key"]["k"] == "deep")
        assert [w.split(":")[0] for w in found["warnings"]] == [f"entries[{at}].content"], found["warnings"]
        assert "JSON text" in found["warnings"][0]

        got = await ok("memory_get", key="kdeep")
        assert json.loads(got["value"]) == nested(200) and got["warnings"][0].startswith("value:")
        todos = await asyncio.wait_for(t.raw("memory_todo_list"), 60)
        todo = todos.structured_content["result"][0]["todo"]  # still an object, as the schema says
        assert todo["title"] == "t" and json.loads(todo["steps"]) == nested(200)
        assert todos.structured_content["warnings"][0].startswith("result[0].todo.steps:")
        events = await ok("episodic_memory_query_events", memoryId=mid)  # a list comes with its warnings
        assert json.loads(events["result"][0]["payload"]) == {"p": nested(200)}  # a payload is any JSON: all of it
        assert events["warnings"][0].startswith("result[0].payload:")
        assert (await ok("memory_retrieve", keys=[{"k": "flat"}])).get("warnings", []) == []  # nothing to say


def test_values_keep_their_shape_up_to_the_wire_depth(home):
    """An A2E entry's content sits 5 levels down a message (message, result, structuredContent,
    entries, entry): content filling the rest of MAX_WIRE_DEPTH comes as it is, one level more
    as its JSON text."""
    from a2e_mem.cli.mcp_wire import MAX_WIRE_DEPTH

    fits = MAX_WIRE_DEPTH - 5
    svc = MemoryService(home)
    try:
        entries = [{"key": {"d": d}, "content": nested(d), "tier": "semantic"} for d in (fits, fits + 1)]
        assert svc.store(svc.scope("default", "default"), entries)["errors"] == []
    finally:
        svc.close()
    asyncio.run(_wire_depth(fits))


async def _wire_depth(fits: int) -> None:
    async with server() as client:
        t = Calls(client)
        found = await asyncio.wait_for(t.ok("memory_retrieve", keys=[{"d": fits}, {"d": fits + 1}]), 60)
        content = {e["key"]["d"]: e["content"] for e in found["entries"]}
        assert content[fits] == nested(fits) and content[fits + 1] == json.dumps(nested(fits + 1))
        assert len(found["warnings"]) == 1


# -- requests the SDK's transport cannot read (audit A22 F2) -----------------------------------


def test_a_request_the_sdk_cannot_read_is_answered_with_an_error(home):
    """The SDK's stdio transport used to drop a line its parser refuses (nested over 200 levels,
    a number of thousands of digits) and its call waited forever: it now gets a JSON-RPC error,
    and the server goes on answering."""
    asyncio.run(_unreadable_requests())


async def _unreadable_requests() -> None:
    from mcp.shared.exceptions import MCPError
    from mcp_types import PARSE_ERROR

    deep_or: Any = {}
    for _ in range(100):  # 200 levels; the SDK client itself cannot write more than ~250
        deep_or = {"$or": [deep_or]}
    async with server() as client:
        t = Calls(client)
        unreadable = [
            ("memory_set", {"key": "deep", "value": nested(220)}),
            ("memory_json_list", {"filters": deep_or}),
            ("memory_set", {"key": "big", "value": 10**4999}),
        ]
        for name, args in unreadable:
            with pytest.raises(MCPError) as caught:  # a hang is the bug: fail instead of waiting forever
                await asyncio.wait_for(client.call_tool(name, args), 60)
            assert caught.value.code == PARSE_ERROR, caught.value.message
            assert "cannot read the request" in caught.value.message
        assert (await asyncio.wait_for(t.ok("memory_set", key="k", value=nested(5)), 60))["value"] == nested(5)
        await t.fails("memory_get", "memory_not_found", key="deep")  # nothing of the unreadable calls was written


# -- raw request lines the SDK's client cannot write (audit A22b F4) -----------------------------


class RawServer:
    """`mem serve-mcp` spoken to line by line, initialized; a missing answer fails the test
    instead of waiting forever."""

    def __init__(self) -> None:
        import queue
        import threading

        self.proc = subprocess.Popen(
            [sys.executable, "-m", "a2e_mem.cli.main", "serve-mcp"],
            cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=lambda: [self.lines.put(line) for line in self.proc.stdout], daemon=True).start()
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
        self.send(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello}).encode())
        assert self.answer()["id"] == 0
        self.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')

    def send(self, line: bytes) -> None:
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def answer(self) -> Any:
        return json.loads(self.lines.get(timeout=60))

    def close(self) -> str:
        """Stops the server; its stderr. Every answer must have been taken."""
        self.proc.stdin.close()
        assert self.proc.wait(timeout=60) == 0
        assert self.lines.empty(), self.lines.get()
        return self.proc.stderr.read().decode()


def test_a_request_line_starting_with_a_byte_order_mark_is_read_without_it(home):
    """As `serve-stdio` reads such a line; serve-mcp left it unanswered."""
    raw = RawServer()
    raw.send('\ufeff{"jsonrpc":"2.0","id":"bom","method":"ping"}'.encode())
    assert raw.answer() == {"jsonrpc": "2.0", "id": "bom", "result": {}}
    raw.send("\ufeff".encode())  # a line holding only a byte order mark is no request, as a blank one
    raw.send(b'{"jsonrpc":"2.0","id":1,"method":"ping"}')
    assert raw.answer()["id"] == 1
    assert "dropped" not in raw.close()


def test_a_request_whose_id_comes_after_what_no_parser_reads_is_answered_with_it(home):
    """The id is found by a scan of the line that counts depth outside strings, so a value before
    it too deep for Python's parser, too big, or malformed does not hide it; an "id" inside a
    value is not taken for it."""
    raw = RawServer()
    deep = "[" * 5000 + "]" * 5000
    before_id = [
        ('{"key":' + deep + ',"id":"inner"}', -32700),  # too deep for Python's json
        ('{"key":"a]}\\"\\\\","value":' + "9" * 5000 + "}", -32700),  # brackets in a string; 5000 digits
        ('{"key":"k","value":1e}', -32700),  # malformed
    ]
    for rid, (arguments, code) in enumerate(before_id, 1):
        params = '{"name":"memory_set","arguments":' + arguments + "}"
        raw.send(f'{{"jsonrpc":"2.0","method":"tools/call","params":{params},"id":{rid}}}'.encode())
        got = raw.answer()
        assert got["id"] == rid and got["error"]["code"] == code, got
    raw.send(('{"jsonrpc":"2.0","params":{"a":' + deep + '},"id":"nomethod"}').encode())
    got = raw.answer()
    assert got["id"] == "nomethod" and got["error"]["code"] == -32700, got
    raw.send(b'{"jsonrpc":"2.0","id":9,"method":"ping"}')
    assert raw.answer() == {"jsonrpc": "2.0", "id": 9, "result": {}}
    assert "dropped" not in raw.close()


def test_a_request_line_that_is_not_utf8_is_refused_not_read_with_replacement_characters(home):
    """The SDK's reader turned each bad byte into U+FFFD, so keys b'acct\\xff' and b'acct\\xfe'
    were both stored as 'acct\ufffd', the second over the first (audit P24); serve-stdio refuses
    such a line with parse_error."""
    raw = RawServer()
    for rid, byte in ((1, b"\xff"), (2, b"\xfe")):
        args = b'{"key":"acct' + byte + b'","value":"v%d"}' % rid
        head = b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"memory_set","arguments":' % rid
        raw.send(head + args + b"}}")
        got = raw.answer()
        assert got["id"] == rid and got["error"]["code"] == -32700, got
        assert "not valid UTF-8" in got["error"]["message"]
    call = {"name": "memory_get", "arguments": {"key": "acct\ufffd"}}
    raw.send(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call}).encode())
    assert raw.answer()["result"]["isError"] is True  # nothing was stored under a replaced key
    raw.send(b'{"jsonrpc":"2.0","method":"notifications/x","params":{"a":"\xff"}}')  # no id: a line on stderr
    raw.send(b'{"jsonrpc":"2.0","id":4,"method":"ping"}')
    assert raw.answer() == {"jsonrpc": "2.0", "id": 4, "result": {}}
    assert "not valid UTF-8" in raw.close()


def test_each_request_of_a_batch_is_answered_that_batches_are_not_supported(home):
    """MCP has no JSON-RPC batches; serve-mcp left one unanswered. Each request of it gets its own
    error message (the SDK's client reads no array), a notification or response in it nothing."""
    raw = RawServer()
    call = {"name": "memory_set", "arguments": {"key": "b", "value": 1}}
    batch = [
        {"jsonrpc": "2.0", "id": "b1", "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call},
        {"jsonrpc": "2.0", "id": "r", "result": {}},
    ]
    raw.send(json.dumps(batch).encode())
    refused = {"code": -32600, "message": "batches are not supported"}
    for rid in ("b1", 2):
        assert raw.answer() == {"jsonrpc": "2.0", "id": rid, "error": refused}
    raw.send(b'[{"jsonrpc":"2.0","method":"notifications/initialized"}]')  # nothing to answer
    raw.send(
        b'{"jsonrpc":"2.0","id":"get","method":"tools/call","params":{"name":"memory_get","arguments":{"key":"b"}}}'
    )
    got = raw.answer()
    assert got["id"] == "get" and "memory_not_found" in got["result"]["content"][0]["text"], got  # nothing was written
    assert len([line for line in raw.close().splitlines() if "dropped a batch" in line]) == 1


def test_a_request_whose_id_is_no_string_nor_integer_is_answered_with_a_null_id(home):
    """The SDK reads `{"id": 1.5, "method": ...}` as a notification and answered nothing; JSON-RPC
    2.0 answers a request whose id it cannot read with an error whose id is null."""
    raw = RawServer()
    for rid in ("1.5", "true", "null", '{"a":1}'):
        raw.send(f'{{"jsonrpc":"2.0","id":{rid},"method":"tools/call","params":{{"name":"memory_set"}}}}'.encode())
        got = raw.answer()
        assert got["id"] is None and got["error"]["code"] == -32600, (rid, got)
    raw.send(b'[{"jsonrpc":"2.0","id":null,"method":"ping"}]')  # in a batch too
    got = raw.answer()
    assert got["id"] is None and got["error"]["message"] == "batches are not supported", got
    raw.send(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}')  # no id: no answer
    raw.send(b'{"jsonrpc":"2.0","id":1.5,"result":{}}')  # a response: never answered
    raw.send(b'{"jsonrpc":"2.0","id":3,"method":"ping"}')
    assert raw.answer() == {"jsonrpc": "2.0", "id": 3, "result": {}}
    raw.close()


def test_calls_still_running_when_stdin_closes_are_answered_before_the_server_exits(home):
    """A client that wrote its calls and closed stdin (`printf ... | mem serve-mcp`) got no
    answer to those still running: the SDK's loop ended with its input and cancelled them,
    though their writes were done (outside audit A25, medium). Every request is answered, then
    the server exits 0."""
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
    lines = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        *(
            {
                "jsonrpc": "2.0",
                "id": i,
                "method": "tools/call",
                "params": {"name": "memory_set", "arguments": {"key": f"k{i}", "value": i}},
            }
            for i in range(1, 6)
        ),
        {"jsonrpc": "2.0", "id": 9, "method": "ping"},
    ]
    out = subprocess.run(
        [sys.executable, "-m", "a2e_mem.cli.main", "serve-mcp"],
        input="".join(json.dumps(line) + "\n" for line in lines), cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    answers = {answer["id"]: answer for answer in map(json.loads, out.stdout.splitlines())}
    assert out.returncode == 0 and sorted(answers) == [0, 1, 2, 3, 4, 5, 9], (out.stdout, out.stderr)
    assert all("result" in answers[i] and not answers[i]["result"].get("isError") for i in range(1, 6)), answers


def test_a_failed_call_writes_nothing_on_stderr_unless_mem_log_asks(home):
    """The SDK logged every failed call at INFO on stderr, a four-line block, whatever MEM_LOG
    said (outside audit A25, low): its level is MEM_LOG's, WARNING by default."""
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
    call = {"name": "memory_get", "arguments": {"key": "nope"}}
    lines = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call},
    ]
    for level, logged in (("", False), ("info", True)):
        out = subprocess.run(
            [sys.executable, "-m", "a2e_mem.cli.main", "serve-mcp"],
            input="".join(json.dumps(line) + "\n" for line in lines), cwd=REPO, capture_output=True, text=True,
            timeout=120, env={**os.environ, "MEM_LOG": level},
        )  # fmt: skip
        assert out.returncode == 0 and '"isError":true' in out.stdout.replace(" ", ""), out
        assert ("memory_get" in out.stderr) is logged, out.stderr


def _raw_lines(*calls: dict[str, Any]) -> bytes:
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
    lines = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        *calls,
    ]
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def _set(rid: Any, key: str) -> dict[str, Any]:
    call = {"name": "memory_set", "arguments": {"key": key, "value": 1}}
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": call}


def test_requests_sharing_an_id_are_each_answered_at_the_end_of_input(home):
    """A client reusing an id got one or two answers for five calls when its input ended: the
    first answer took the id off the calls waiting (outside audit D25, low)."""
    out = subprocess.run(
        [sys.executable, "-m", "a2e_mem.cli.main", "serve-mcp"],
        input=_raw_lines(*(_set(7, f"d{i}") for i in range(5))), cwd=REPO, capture_output=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0 and out.stdout.count(b'"id":7') == 5, out


def test_a_reader_leaving_without_the_answers_is_exit_141_and_nothing_on_stderr(home):
    """Calls written, stdin closed, stdout closed unread: `mem: error: ExceptionGroup: ...`, exit 1
    (outside audit D25, medium); as the README says for any command, 141 and silence."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "a2e_mem.cli.main", "serve-mcp"],
        cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdin and proc.stdout and proc.stderr
    proc.stdin.write(_raw_lines(*(_set(i, f"k{i}") for i in range(1, 200))))
    proc.stdin.close()
    proc.stdout.readline()  # the server is up and answering
    proc.stdout.close()
    assert proc.wait(timeout=120) == 141
    assert proc.stderr.read() == b""


def test_ctrl_c_stops_a_server_waiting_for_input_with_130(home):
    """SIGINT was held off until stdin closed: the thread reading the next line could not be
    cancelled (outside audit D25, medium)."""
    import signal

    proc = subprocess.Popen(
        [sys.executable, "-m", "a2e_mem.cli.main", "serve-mcp"],
        cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=default_signals,
    )  # fmt: skip
    assert proc.stdin and proc.stdout and proc.stderr
    proc.stdin.write(_raw_lines(_set(1, "k")))
    proc.stdin.flush()
    assert b'"id":0' in proc.stdout.readline() and b'"id":1' in proc.stdout.readline()
    proc.send_signal(signal.SIGINT)
    try:
        assert proc.wait(timeout=30) == 130
    finally:
        proc.kill()
        proc.stdin.close()
    assert proc.stderr.read() == b""
