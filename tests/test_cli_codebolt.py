"""The codebolt commands and `mem kg` at the shell: forms scripts rely on, and exit codes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
from typer.testing import CliRunner

from a2e_mem.cli.main import app
from a2e_mem.service import MemoryService

runner = CliRunner()
REPO = Path(__file__).resolve().parents[1]


def mem(*args, input=None):
    return runner.invoke(app, list(args), input=input)


def one(result):
    assert result.exit_code == 0, result.output
    return orjson.loads(result.stdout)


def rows(result):
    assert result.exit_code == 0, result.output
    return [orjson.loads(line) for line in result.stdout.splitlines() if line.strip()]


def test_set_and_get(home):
    assert one(mem("set", "theme", '{"mode": "dark"}'))["value"] == {"mode": "dark"}
    mem("set", "greeting", "hello there")
    assert mem("get", "greeting", "--raw").stdout == "hello there\n"
    assert mem("get", "theme", "--raw").stdout.strip() == '{"mode":"dark"}'
    missing = mem("get", "nope")
    assert missing.exit_code == 3 and "no key" in missing.stderr
    assert {r["key"] for r in rows(mem("keys"))} == {"theme", "greeting"}


def test_json_save_update_list_delete(home):
    saved = one(mem("json", "save", '{"name": "cfg", "version": 1}', "--metadata", '{"env": "prod"}'))
    memory_id = saved["memoryId"]
    assert one(mem("json", "update", memory_id, '{"name": "cfg", "version": 2}'))["json"]["version"] == 2
    assert [r["memoryId"] for r in rows(mem("json", "list", "--filter", '{"version": {"$gte": 2}}'))] == [memory_id]
    assert rows(mem("json", "list", "--filter", '{"env": "dev"}')) == []
    assert mem("json", "delete", memory_id).exit_code == 0
    assert mem("json", "delete", memory_id).exit_code == 3
    assert mem("json", "update", memory_id, "{}").exit_code == 3
    assert mem("json", "save", "[1, 2]").exit_code == 4
    assert mem("json", "save", "{broken").exit_code == 4
    assert mem("json", "list", "--filter", '{"a": {"$bogus": 1}}').exit_code == 4


def test_todo_and_markdown_sources(home, tmp_path):
    todo = one(
        mem("todo", "save", '{"title": "write docs", "status": "pending"}', "--metadata", '{"dueDate": "2024-12-31"}')
    )
    assert todo["todo"]["title"] == "write docs" and todo["metadata"]["dueDate"] == "2024-12-31"
    notes = tmp_path / "notes.md"
    notes.write_text("# From a file\n")
    from_file = one(mem("markdown", "save", str(notes)))
    from_stdin = one(mem("markdown", "save", "-", input="# From stdin\n"))
    from_text = one(mem("markdown", "save", "--text", "# From text"))
    assert [from_file["markdown"], from_stdin["markdown"], from_text["markdown"]] == [
        "# From a file\n", "# From stdin\n", "# From text"
    ]  # fmt: skip
    assert mem("markdown", "save").exit_code == 4
    assert mem("markdown", "save", str(tmp_path / "missing.md")).exit_code == 3  # not there: not found
    updated = one(mem("markdown", "update", from_text["memoryId"], "--text", "# New", "--metadata", '{"a": 1}'))
    assert updated["markdown"] == "# New" and updated["metadata"] == {"a": 1}
    assert len(rows(mem("markdown", "list", "--limit", "2"))) == 2


def test_episodic_commands(home):
    mid = one(mem("episodic", "create", "User Session Log", "--swarm", "s1"))["memoryId"]
    appended = one(mem("episodic", "append", mid, "--event-type", "user_action", "--agent", "agent-123", "--tag", "ui",
                       "--payload", '{"action": "click"}'))  # fmt: skip
    assert appended["payload"] == {"action": "click"} and appended["tags"] == ["ui"]
    one(mem("episodic", "append", mid, "-e", "message", "-a", "agent-9", "--team", "t1", "-p", "plain text"))
    assert [e["payload"] for e in rows(mem("episodic", "query", mid, "--agent", "agent-9"))] == ["plain text"]
    assert len(rows(mem("episodic", "query", "--swarm", "s1", "--last-count", "1"))) == 1
    assert len(rows(mem("episodic", "query", mid, "--tag", "ui", "--last-minutes", "5"))) == 1
    assert mem("episodic", "query").exit_code == 2
    assert len(rows(mem("episodic", "query", mid, "--since", "yesterday", "--until", "tomorrow"))) == 2
    backwards = mem("episodic", "query", mid, "--since", "tomorrow", "--until", "yesterday")
    assert backwards.exit_code == 4 and "until" in backwards.output  # as `mem retrieve` refuses it
    assert [r["event_type"] for r in rows(mem("episodic", "event-types", mid))] == ["user_action", "message"]
    assert one(mem("episodic", "rename", mid, "Renamed"))["title"] == "Renamed"
    assert one(mem("episodic", "get", mid))["eventCount"] == 2
    mem("episodic", "archive", mid)
    refused = mem("episodic", "append", mid, "-e", "x", "-a", "y", "-p", "z")
    assert refused.exit_code == 4 and "archived" in refused.stderr
    assert rows(mem("episodic", "list")) == [] and len(rows(mem("episodic", "list", "--archived"))) == 1


def test_persistent_commands(home):
    mem("set", "theme", "dark", "--namespace", "prefs")
    created = one(mem("persistent", "create", "--label", "Prefs", "--id", "prefs", "--scope", "settings",
                      "--retrieval", '{"source_type": "kv", "source_id": "prefs"}',
                      "--contribution", '{"format": "markdown", "max_tokens": 100}'))  # fmt: skip
    assert created["id"] == "prefs" and created["inputs_scope"] == ["settings"]
    assert mem("persistent", "retrieve", "prefs", "--keyword", "theme", "--raw").stdout == "## Prefs\n\n- theme: dark\n"
    result = one(mem("persistent", "retrieve", "prefs", "--query", "theme"))
    assert result["items"][0]["key"] == "theme" and result["truncated"] is False
    assert [p["id"] for p in rows(mem("persistent", "list", "--scope", "settings"))] == ["prefs"]
    assert one(mem("persistent", "update", "prefs", "--status", "disabled"))["status"] == "disabled"
    refused = mem("persistent", "retrieve", "prefs")
    assert refused.exit_code == 4 and "disabled" in refused.stderr
    assert mem("persistent", "get", "nope").exit_code == 3
    assert mem("persistent", "create", "--label", "x").exit_code == 4


def test_kg_commands_and_import(home, tmp_path):
    mem("kg", "create", "Alice", "--type", "person", "--obs", "likes green tea")
    mem("kg", "create", "Acme", "-t", "company")
    assert rows(mem("kg", "relate", "Alice", "works_at", "Acme")) == [
        {"from": "Alice", "to": "Acme", "relationType": "works_at"}
    ]
    assert mem("kg", "relate", "Alice", "knows", "Ghost").exit_code == 3
    mem("kg", "observe", "Acme", "makes rockets")
    assert [r["name"] for r in rows(mem("kg", "search", "rockets")) if r["type"] == "entity"] == ["Acme"]
    assert len(rows(mem("kg", "open", "Alice", "Acme"))) == 3
    file = tmp_path / "memory.jsonl"
    file.write_text('{"type":"entity","name":"Zed","entityType":"person","observations":["new"]}\n')
    assert one(mem("kg", "import", str(file)))["entities"] == 1
    assert one(mem("kg", "delete", "Alice"))["deletedRelations"] == 1
    assert {r["name"] for r in rows(mem("kg", "read")) if r["type"] == "entity"} == {"Acme", "Zed"}
    svc = MemoryService(home)
    assert svc.kg_open_nodes(["Zed"])["entities"][0]["observations"] == ["new"]


def shell(*args: str) -> subprocess.CompletedProcess:
    """`mem ARGS` as a real process (MEM_HOME and the embedder come from the test's environment)."""
    return subprocess.run([sys.executable, "-m", "a2e_mem.cli.main", *args], capture_output=True, text=True, cwd=REPO)


def test_persistent_spec_sample_and_create_time_checks_at_the_shell(home):
    shell("set", "theme", "dark", "--namespace", "user-preferences-store")
    created = shell("persistent", "create", "--label", "User Preferences", "--id", "prefs",
                    "--retrieval", '{"source_type": "kv", "source_id": "user-preferences-store", "limit": 10}',
                    "--contribution", '{"format": "json", "max_tokens": 500}', "--format", "json")  # fmt: skip
    assert created.returncode == 0, created.stderr
    got = shell("persistent", "retrieve", "prefs", "-k", "theme", "-k", "preferences", "--action", "find",
                "--query", "user display settings", "--format", "json")  # fmt: skip
    assert [i["key"] for i in orjson.loads(got.stdout)["items"]] == ["theme"]
    template = '{"source_type": "kv", "source_id": "p", "query_template": "{keyword}"}'
    bad_template = shell("persistent", "create", "--label", "x", "--contribution", '{"format": "text"}',
                         "--retrieval", template)  # fmt: skip
    assert bad_template.returncode == 4 and len(bad_template.stderr.splitlines()) == 1
    assert "unknown placeholder {keyword}; allowed: {action}" in bad_template.stderr
    bad_source = shell("persistent", "create", "--label", "x", "--contribution", '{"format": "text"}',
                       "--retrieval", '{"source_type": "eventlog", "source_id": "ep_nope"}')  # fmt: skip
    assert bad_source.returncode == 4 and "retrieval.source_id" in bad_source.stderr
    bad_filter = shell("persistent", "update", "prefs", "--retrieval",
                       '{"source_type": "kv", "source_id": "p", "filters": {"key": "theme"}}')  # fmt: skip
    assert bad_filter.returncode == 4 and "kv source takes no filters" in bad_filter.stderr


def test_eventlog_source_in_another_namespace_at_the_shell(home):
    mid = one(mem("episodic", "create", "ops log", "--namespace", "ops"))["memoryId"]
    mem("episodic", "append", mid, "-e", "deploy", "-a", "ci", "-p", "deployed api", "--namespace", "ops")
    created = mem("persistent", "create", "--label", "Ops", "--id", "ops-log", "--contribution", '{"format": "text"}',
                  "--retrieval", f'{{"source_type": "eventlog", "source_id": "{mid}"}}')  # fmt: skip
    assert created.exit_code == 0, created.output
    assert "deployed api" in mem("persistent", "retrieve", "ops-log", "--raw").stdout


def test_list_filters_match_arrays_and_event_counts_at_the_shell(home):
    mem("todo", "save", '{"title": "tagged", "tags": ["x", "y"]}')
    mem("todo", "save", '{"title": "other", "tags": ["z"]}')
    assert [r["todo"]["title"] for r in rows(mem("todo", "list", "--filter", '{"tags": "x"}'))] == ["tagged"]
    busy = one(mem("episodic", "create", "busy"))["memoryId"]
    one(mem("episodic", "create", "quiet"))
    mem("episodic", "append", busy, "-e", "x", "-a", "a", "-p", "p")
    listed = rows(mem("episodic", "list", "--filter", '{"eventCount": {"$gte": 1}}'))
    assert [m["title"] for m in listed] == ["busy"]


# -- deleting, unarchiving, archived memories (audit items 21 and 22), through `python -m a2e_mem.cli.main`


def record(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stderr
    return orjson.loads(proc.stdout)


def test_delete_a_key(home):
    record(shell("set", "theme", "dark"))
    assert record(shell("delete", "theme")) == {"key": "theme", "deleted": True}
    assert shell("get", "theme").returncode == 3
    again = shell("delete", "theme")
    assert again.returncode == 3 and again.stderr == "mem: error: no key with id 'theme'\n"


def test_archived_memories_unarchive_and_delete(home):
    mid = record(shell("episodic", "create", "log", "--swarm", "s1"))["memoryId"]
    record(shell("episodic", "append", mid, "-e", "a", "-a", "x", "-p", "one"))
    first = record(shell("episodic", "archive", mid))
    assert record(shell("episodic", "archive", mid))["archived_at"] == first["archived_at"]  # archiving again
    renamed = shell("episodic", "rename", mid, "new title")
    assert renamed.returncode == 4 and "archived" in renamed.stderr
    appended = shell("episodic", "append", mid, "-e", "b", "-a", "x", "-p", "two")
    assert appended.returncode == 4 and "archived" in appended.stderr
    assert record(shell("episodic", "get", mid))["title"] == "log"
    assert shell("episodic", "query", mid, "--swarm", "s1").returncode == 2  # one or the other, as over MCP

    back = record(shell("episodic", "unarchive", mid))
    assert back["archived"] is False and "archived_at" not in back
    record(shell("episodic", "append", mid, "-e", "b", "-a", "x", "-p", "two"))
    assert record(shell("episodic", "rename", mid, "new title"))["title"] == "new title"

    assert record(shell("episodic", "delete", mid)) == {"memoryId": mid, "deleted": True, "deletedEvents": 2}
    for args in (("get", mid), ("delete", mid), ("unarchive", mid), ("query", mid)):
        assert shell("episodic", *args).returncode == 3, args
    assert shell("episodic", "query", "--swarm", "s1").stdout == ""


def test_delete_a_persistent_memory(home):
    record(shell("persistent", "create", "--label", "P", "--id", "p1", "--retrieval",
                 '{"source_type": "kv", "source_id": "default"}', "--contribution", '{"format": "text"}'))  # fmt: skip
    assert record(shell("persistent", "delete", "p1")) == {"id": "p1", "deleted": True}
    assert shell("persistent", "get", "p1").returncode == 3
    assert shell("persistent", "delete", "p1").returncode == 3


def test_kg_deletes_of_what_is_not_there_exit_3_after_deleting_the_rest(home):
    """Found by an outside audit: they exited 0, while the README promises memory_not_found."""
    one(mem("kg", "create", "Alice", "--type", "person", "--obs", "a"))
    one(mem("kg", "create", "Bob", "--type", "person"))
    assert mem("kg", "relate", "Alice", "knows", "Bob").exit_code == 0
    cases = [
        (["kg", "forget-observation", "Alice", "a", "nope"], {"deletedObservations": ["a"]}, "no observation 'nope'"),
        (["kg", "unrelate", "Alice", "likes", "Bob"], {"deletedRelations": 0}, "no relation 'Alice' 'likes' 'Bob'"),
        (["kg", "delete", "Alice", "Ghost"], {"deletedEntities": 1, "deletedRelations": 1}, "no entity named 'Ghost'"),
    ]
    for args, counts, message in cases:
        result = mem(*args)
        assert result.exit_code == 3 and message in result.stderr, (args, result.output)
        assert counts.items() <= orjson.loads(result.stdout).items(), (args, result.stdout)
    graph = MemoryService(home).kg_read_graph()
    assert [e["name"] for e in graph["entities"]] == ["Bob"] and graph["relations"] == []
    assert mem("kg", "unrelate", "Bob", "knows", "Alice").exit_code == 3
    assert mem("kg", "delete", "Bob").exit_code == 0


def test_episodic_append_takes_its_agent_from_mem_agent(home, monkeypatch):
    """The README lists --agent as read from MEM_AGENT; `episodic append` alone required it."""
    monkeypatch.setenv("MEM_AGENT", "env-agent")
    created = one(mem("episodic", "create", "log"))
    one(mem("episodic", "append", created["memoryId"], "-e", "note", "-p", "x"))
    events = MemoryService(home).episodic_memory_query_events(created["memoryId"])
    assert [e["emitting_agent_id"] for e in events] == ["env-agent"]


def test_a_markdown_file_saved_with_a_byte_order_mark_is_kept_without_it(home, tmp_path):
    """As `mem store -` and `mem import` read such a file (outside audit Q24)."""
    path = tmp_path / "bom.md"
    path.write_bytes(b"\xef\xbb\xbf# BOM md\r\nline\r\n")
    saved = one(mem("markdown", "save", str(path)))
    assert saved["markdown"] == "# BOM md\r\nline\r\n"  # line ends are the file's own
