"""The Python API (`store/api.py`): its doctests, and every group on both backends."""

from __future__ import annotations

import doctest
import hashlib
import os
import re
import stat
import sys
import tempfile
from pathlib import Path

import pytest

from a2e_mem import Conflict, InvalidInput, Memory, MemoryFull, NotFound, Unauthorized, api, clock, errors

from .conftest import stored_anywhere


@pytest.fixture
def memory(home):
    with Memory(home=home) as m:
        yield m


@pytest.mark.files_only
def test_the_docstring_examples_run_as_a_new_user_would_run_them(tmp_path, monkeypatch):
    monkeypatch.delenv("MEM_EMBEDDER")  # the default embedder, as a user has it
    monkeypatch.delenv("MEM_HOME")  # the examples name their own home
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # their temporary homes land here
    results = doctest.testmod(api, report=True)
    assert results.failed == 0
    assert results.attempted >= 60  # the examples are there to run


@pytest.mark.files_only  # the README's example, as a new user runs it: the default store and embedder
def test_the_readme_python_example_prints_what_the_readme_shows(monkeypatch, capsys):
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Python\n", 1)[1].split("\n## ", 1)[0]
    code, shown = re.findall(r"```(?:python|text)\n(.*?)```", section, re.DOTALL)[:2]
    monkeypatch.delenv("MEM_EMBEDDER")
    exec(compile(code, "README.md", "exec"), {})
    assert capsys.readouterr().out == shown


def test_one_import_gives_the_api_and_the_errors():
    assert Memory is api.Memory
    package = sys.modules[api.__package__]  # `store`, named so that the test survives its renaming
    for name in package.__all__:
        assert getattr(package, name) is getattr(api, name)
    assert package.NotFound is errors.NotFound  # the store's own exceptions, not copies
    with pytest.raises(AttributeError):
        package.nothing_of_that_name  # noqa: B018


def test_the_error_table_gives_each_error_its_code_and_exit_code():
    doc = api.__doc__ or ""
    for error in api.ERRORS:
        row = re.search(rf"^{error.__name__}\s+(\S+)\s+(\d)\s", doc, re.MULTILINE)
        assert row, f"{error.__name__} is not in the table"
        assert (row[1], int(row[2])) == (error.code, error.exit_code), error.__name__
    documented = set(re.findall(r"^([A-Z]\w+)\s+\w+\s+\d\s", doc, re.MULTILINE))
    raised = {c.__name__ for c in vars(errors).values() if isinstance(c, type) and issubclass(c, Exception)}
    assert documented == raised  # a new error class must be documented and exported


def test_store_retrieve_forget(memory):
    assert memory.store("likes tea", key="drink", tags=["prefs"]) == {"key": "drink"}
    assert memory.store({"lang": "python"}, key={"topic": "code"}, tier="semantic") == {"topic": "code"}
    found = memory.retrieve(tags=["prefs"])
    assert [e["content"] for e in found["entries"]] == ["likes tea"] and found["total"] == 1
    assert memory.retrieve(keys="drink")["total"] == 1  # one string key, not its characters
    assert memory.retrieve(keys=["drink", {"topic": "code"}])["total"] == 2
    best = memory.retrieve("python", tier="semantic", explain=True)["entries"][0]
    assert best["key"] == {"topic": "code"} and 0 < best["relevance"] <= 1 and "explain" in best
    assert memory.forget("drink") == 1
    assert memory.forget({"topic": "code"}) == 0  # forget works in one tier: episodic by default
    assert memory.forget(tier="semantic", everything=True) == 1
    assert memory.retrieve()["total"] == 0


def test_retrieve_takes_the_time_window_and_forget_takes_no_keys_with_everything(memory):
    memory.store({"text": "the garden party", "date": "2023-06-10"}, key="june")
    memory.store({"text": "the garden party", "date": "2023-07-10"}, key="july")
    assert [e["key"] for e in memory.retrieve(since="2023-06-01", until="2023-07-01")["entries"]] == [{"key": "june"}]
    assert memory.retrieve("   ")["entries"][0]["relevance"] == 1.0  # blanks alone: as no query
    assert memory.forget(None, everything=True) == 2


@pytest.mark.parametrize("content", [b"bytes", {1, 2}, {"n": 2**70}])
def test_content_that_is_not_json_is_refused_saying_so(memory, content):
    for key in (None, "k"):
        with pytest.raises(InvalidInput, match="content: not JSON"):
            memory.store(content, key=key)


def test_a_persistent_update_cannot_name_the_caller_agent(memory):
    with pytest.raises(InvalidInput, match="cannot update agent"):
        memory.persistent.update("pm_x", agent="bob")


def test_default_key_is_the_content_hash_mem_store_uses(memory):
    key = memory.store("same words")
    assert key == {"hash": hashlib.sha256(b"same words").hexdigest()[:16]}
    assert memory.store("same words") == key
    assert memory.retrieve()["total"] == 1


def test_refusals_raise_the_store_errors(memory, home, monkeypatch):
    with pytest.raises(InvalidInput) as refused:
        memory.store("x", key="k", tier="nowhere")
    assert refused.value.code == "schema_violation" and refused.value.exit_code == 4
    with pytest.raises(InvalidInput):
        memory.forget()  # never an implied "everything"
    with pytest.raises(InvalidInput):
        memory.store("x", key="k", tier="working")  # the working tier is a session's
    monkeypatch.setenv("MEM_MAX_ENTRIES", "1")
    with Memory(home=home) as small:
        small.store("one", key="1")
        with pytest.raises(MemoryFull) as full:
            small.store("two", key="2")
    assert full.value.exit_code == 5


def test_semantic_writers_are_enforced(home):
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.json").write_text('{"namespaces": {"team": {"semantic_writers": ["lead"]}}}')
    with Memory(home=home, namespace="team", agent="intern") as m:
        with pytest.raises(Unauthorized) as refused:
            m.store("a fact", key="f", tier="semantic")
        assert refused.value.exit_code == 6
        assert m.using(agent="lead").store("a fact", key="f", tier="semantic") == {"key": "f"}


def test_store_many_stores_the_valid_entries_and_names_the_others(memory):
    result = memory.store_many(
        [{"key": {"n": 1}, "content": "ok", "tier": "episodic"}, {"key": {"n": 2}, "content": "bad", "tier": "?"}]
    )
    assert result["stored"] == [{"n": 1}] and len(result["errors"]) == 1
    assert result["errors"][0].startswith("entries[1]: ")


def test_a_session_has_a_working_tier_and_closes_with_its_block(memory):
    with memory.session() as s:
        s.store("scratch", key="w", tier="working")
        assert [e["tier"] for e in s.retrieve("scratch")["entries"]] == ["working"]
        assert memory.retrieve("scratch")["total"] == 0  # outside the session: no working tier
    with pytest.raises(NotFound):
        s.retrieve("scratch")
    s.close()  # closing again changes nothing


def test_a_persisted_session_is_seen_by_another_memory_on_the_store(memory, home):
    s = memory.session(persist=True)
    s.store("shared scratch", key="w", tier="working")
    with Memory(home=home) as other:  # as another process would
        assert [x["memory_id"] for x in other.sessions()] == [s.memory_id]
        again = other.session(s.memory_id)
        assert [e["content"] for e in again.retrieve(tier="working")["entries"]] == ["shared scratch"]
        other.close_session(s.memory_id)
    assert memory.sessions() == []
    with pytest.raises(NotFound):
        s.store("late", key="x", tier="working")


def test_key_values(memory):
    assert memory.kv.set("user", {"name": "Ada"})["value"] == {"name": "Ada"}
    assert memory.kv.get("user") == {"name": "Ada"}
    assert memory.kv.record("user")["key"] == "user"
    assert memory.kv.get("nobody", "fallback") == "fallback"
    with pytest.raises(NotFound):
        memory.kv.get("nobody")
    memory.kv.set("later", 2)
    assert [r["key"] for r in memory.kv.list()] == ["later", "user"]
    assert [r["key"] for r in memory.kv.list(limit=1, offset=1)] == ["user"]
    assert memory.kv.delete("user") == {"key": "user", "deleted": True}
    with pytest.raises(NotFound):
        memory.kv.delete("user")


@pytest.mark.parametrize("group", ["json", "todos"])
def test_json_and_todo_documents(memory, group):
    documents = getattr(memory, group)
    body = "todo" if group == "todos" else "json"
    saved = documents.save({"title": "a", "priority": 1}, metadata={"owner": "ada"})
    documents.save({"title": "b", "priority": 3})
    updated = documents.update(saved["memoryId"], {"title": "a2", "priority": 2})
    assert updated[body]["title"] == "a2" and updated["metadata"] == {"owner": "ada"}
    assert [d[body]["title"] for d in documents.list({"priority": {"$gte": 2}})] == ["a2", "b"]
    assert [d[body]["title"] for d in documents.list({"owner": "ada"})] == ["a2"]
    assert documents.delete(saved["memoryId"])["deleted"] is True
    with pytest.raises(NotFound):
        documents.update(saved["memoryId"], {"title": "gone"})
    with pytest.raises(InvalidInput):
        documents.save(["not", "an", "object"])  # type: ignore[arg-type]


def test_markdown(memory):
    note = memory.markdown.save("# A", metadata={"topic": "t"})
    assert memory.markdown.update(note["memoryId"], "# B")["metadata"] == {"topic": "t"}
    assert memory.markdown.update(note["memoryId"], "# C", metadata={"topic": "u"})["metadata"] == {"topic": "u"}
    assert [n["markdown"] for n in memory.markdown.list({"topic": "u"})] == ["# C"]
    memory.markdown.delete(note["memoryId"])
    assert memory.markdown.list() == []


def test_episodes(memory):
    log = memory.episodes.create("release", swarm_id="swarm-1")
    first = memory.episodes.append(log["memoryId"], "test_run", {"failed": 1}, tags=["ci"], team_id="qa")
    assert first["emitting_agent_id"] == "default"
    memory.episodes.append(log["memoryId"], "deploy", "staging", agent="deployer")
    assert [e["event_type"] for e in memory.episodes.query(log["memoryId"])] == ["test_run", "deploy"]
    assert [e["payload"] for e in memory.episodes.query(swarm_id="swarm-1", agent="deployer")] == ["staging"]
    assert len(memory.episodes.query(log["memoryId"], tags=["ci"], team_id="qa", last_count=5)) == 1
    assert memory.episodes.event_types(swarm_id="swarm-1") == ["test_run", "deploy"]
    assert memory.episodes.get(log["memoryId"])["eventCount"] == 2
    assert memory.episodes.rename(log["memoryId"], "release 2")["title"] == "release 2"
    memory.episodes.archive(log["memoryId"])
    with pytest.raises(Conflict):
        memory.episodes.append(log["memoryId"], "late", "refused")
    assert memory.episodes.list() == []
    assert [x["title"] for x in memory.episodes.list(include_archived=True)] == ["release 2"]
    assert memory.episodes.unarchive(log["memoryId"])["archived"] is False
    assert memory.episodes.delete(log["memoryId"])["deletedEvents"] == 2


def test_persistent(memory):
    memory.store("Pixel the greyhound loves cheese", key="pet", tier="semantic")
    config = memory.persistent.create(
        "pets", {"source_type": "vectordb", "source_id": "default"}, {"format": "text"}, inputs_scope=["home"]
    )
    found = memory.persistent.retrieve(config["id"], query="greyhound", keywords=["cheese"])
    assert [i["content"] for i in found["items"]] == ["Pixel the greyhound loves cheese"]
    assert "greyhound" in found["contribution"]
    assert [c["id"] for c in memory.persistent.list(input_scope="home")] == [config["id"]]
    assert memory.persistent.update(config["id"], status="disabled")["status"] == "disabled"
    assert memory.persistent.list(active_only=True) == []
    with pytest.raises(Conflict):
        memory.persistent.retrieve(config["id"])
    assert memory.persistent.get(config["id"])["label"] == "pets"
    memory.persistent.delete(config["id"])
    with pytest.raises(NotFound):
        memory.persistent.get(config["id"])
    with pytest.raises(InvalidInput):
        memory.persistent.create("bad", {"source_type": "nowhere", "source_id": "x"}, {"format": "text"})


def test_graph(memory, tmp_path):
    people = [{"name": "Ada", "entityType": "person", "observations": ["writes Python"]}]
    assert memory.graph.create_entities(people) == people
    memory.graph.create_entities([{"name": "Acme", "entityType": "company"}])
    memory.graph.create_relations([{"from": "Ada", "to": "Acme", "relationType": "works_at"}])
    memory.graph.add_observations([{"entityName": "Acme", "contents": ["makes anvils"]}])
    assert [e["name"] for e in memory.graph.search("anvils")["entities"]] == ["Acme"]
    memory.graph.delete_observations([{"entityName": "Acme", "observations": ["makes anvils"]}])
    assert memory.graph.open(["Acme"])["entities"][0]["observations"] == []
    assert memory.graph.delete_relations([{"from": "Ada", "to": "Acme", "relationType": "works_at"}]) == {
        "deletedRelations": 1
    }
    assert [e["name"] for e in memory.graph.read(limit=1, offset=1)["entities"]] == ["Ada"]
    assert memory.graph.delete_entities(["Acme"]) == {"deletedEntities": 1, "deletedRelations": 0}
    jsonl = tmp_path / "memory.jsonl"
    jsonl.write_text(
        '{"type": "entity", "name": "Bob", "entityType": "person", "observations": []}\n'
        '{"type": "relation", "from": "Bob", "to": "Ada", "relationType": "knows"}\n'
    )
    first = memory.graph.import_jsonl(jsonl)  # a path
    again = memory.graph.import_jsonl(jsonl.read_text().splitlines())  # or the lines
    assert (first["entities"], first["relations"], again["entities"], again["relations"]) == (1, 1, 0, 0)
    assert memory.graph.read()["relations"] == [{"from": "Bob", "to": "Ada", "relationType": "knows"}]


def test_a_view_works_in_another_namespace_and_closes_nothing(memory):
    other = memory.using(namespace="other", agent="bot")
    other.kv.set("k", "there")
    other.store("in other", key="e")
    assert (other.namespace, other.agent) == ("other", "bot")
    with pytest.raises(NotFound):
        memory.kv.get("k")
    assert memory.retrieve()["total"] == 0
    other.close()
    assert memory.using(namespace="other").kv.get("k") == "there"  # the store is still open
    with pytest.raises(InvalidInput):
        memory.using(namespace="")
    with pytest.raises(InvalidInput):
        Memory(agent="x" * 2000)  # over the 1024 characters a name may have


def test_the_with_block_closes_the_store_once(home):
    closed = []
    with pytest.raises(RuntimeError), Memory(home=home) as m:
        real_close = m.service.close
        m.service.close = lambda: closed.append(real_close())  # type: ignore[method-assign]
        m.using(namespace="view").close()
        assert closed == []
        raise RuntimeError("the block failed")
    assert closed == [None]
    m.close()
    assert closed == [None]


def test_upkeep(memory, tmp_path):
    memory.store("kept", key="a")
    memory.kv.set("k", 1)
    memory.using(namespace="second").kv.set("k", 2)
    assert {n["namespace"]: n["entries"] for n in memory.namespaces()} == {"default": 2, "second": 1}
    assert sum(row["entries"] for row in memory.stats("default")) == 2
    dump = tmp_path / "dump.ndjson"
    lines = memory.export_to(dump)
    assert lines == len(list(memory.export())) == len(dump.read_bytes().splitlines()) > 0
    assert stat.S_IMODE(os.stat(dump).st_mode) == 0o600
    memory.delete_namespace("default")
    assert memory.import_from(dump, dry_run=True)["new"] > 0
    assert memory.retrieve()["total"] == 0  # a dry run changes nothing
    memory.import_from(dump)
    assert memory.retrieve()["entries"][0]["content"] == "kept" and memory.kv.get("k") == 1
    assert memory.import_records(memory.export())["new"] == 0
    assert memory.doctor() == []
    assert memory.reindex("hash")["embedder"] == "hash"


def test_gc_purges_what_expired(memory, home):
    memory.store("short-lived words", key="brief", ttl=1)
    clock.set_offset(10)
    assert memory.retrieve(keys="brief")["total"] == 0  # expired: invisible at once
    assert stored_anywhere(home, "short-lived words")  # but still kept until the upkeep
    assert memory.gc() >= 1
    assert not stored_anywhere(home, "short-lived words")


def test_the_store_argument_picks_the_backend(backend, home, tmp_path, monkeypatch):
    url = os.environ.get("MEM_STORE", "")  # "" (files under home), or this test's database
    monkeypatch.delenv("MEM_STORE", raising=False)
    with Memory(home=home, store=url) as m:
        assert m.url.startswith("postgresql://") == (backend == "postgres")
        m.kv.set("where", "here")
    with Memory(home=tmp_path / "elsewhere", store=url) as m:
        shared = m.kv.get("where", None) == "here"
    assert shared == (backend == "postgres")  # a database serves every home; files belong to theirs
    with pytest.raises(InvalidInput):
        Memory(home=home, store="mysql://somewhere/db")


def test_the_groups_are_attributes(memory):
    for name, group in GROUPS.items():
        assert isinstance(getattr(memory, name), group), name


def test_every_cli_command_has_its_python_method():
    from a2e_mem.cli import reference

    commands = {name.removeprefix("mem ") for name, _ in reference.commands()}
    servers = {"demo", "serve-stdio", "serve-mcp", "ui", "mcp-config"}  # processes and their setup, not operations
    assert commands - servers == set(CLI_TO_API)
    for path in CLI_TO_API.values():
        group, _, method = path.rpartition(".")
        assert callable(getattr(GROUPS[group] if group else Memory, method)), path


GROUPS = {"kv": api.KeyValues, "json": api.Documents, "todos": api.Documents}
GROUPS |= {"markdown": api.Markdown, "episodes": api.Episodes, "persistent": api.Persistent}
GROUPS |= {"graph": api.Graph}

# `mem COMMAND` -> the Python method that does it
CLI_TO_API = {
    "init": "session", "store": "store", "retrieve": "retrieve", "forget": "forget",
    "session list": "sessions", "session close": "close_session",
    "set": "kv.set", "get": "kv.get", "delete": "kv.delete", "keys": "kv.list",
    **{f"{cli} {verb}": f"{api}.{verb}" for cli, api in (("json", "json"), ("todo", "todos"), ("markdown", "markdown"))
       for verb in ("save", "update", "delete", "list")},
    **{f"episodic {verb}": f"episodes.{verb}" for verb in ("create", "list", "get", "append", "query", "archive",
                                                            "unarchive", "delete", "rename")},
    "episodic event-types": "episodes.event_types",
    **{f"persistent {verb}": f"persistent.{verb}" for verb in ("create", "get", "list", "update", "delete",
                                                                "retrieve")},
    "kg create": "graph.create_entities", "kg relate": "graph.create_relations", "kg observe": "graph.add_observations",
    "kg forget-observation": "graph.delete_observations", "kg delete": "graph.delete_entities",
    "kg unrelate": "graph.delete_relations", "kg search": "graph.search", "kg open": "graph.open",
    "kg read": "graph.read", "kg import": "graph.import_jsonl",
    "gc": "gc", "export": "export_to", "import": "import_from", "stats": "stats", "namespaces": "namespaces",
    "namespaces delete": "delete_namespace", "reindex": "reindex", "doctor": "doctor",
}  # fmt: skip


# -- issue 14: the outside audit of the Python API ----------------------------------------------


def test_one_memory_shared_by_threads_loses_nothing_and_raises_nothing(home):
    """Six threads share one `Memory` (the audit's repro): every call is serialised by the
    store's lock, so no write is lost and no half-made state is seen."""
    from tests.threads import run_in_threads

    m = Memory(home=home)

    def work(worker: int) -> None:
        for i in range(50):
            m.kv.set(f"k{worker}-{i}", i)
            m.store(f"note {worker} {i}", key=f"n{worker}-{i}")
            if i % 10 == 0:
                m.retrieve(f"note {worker}")

    failures = run_in_threads(work, 6)  # (a hang fails here, m left open: closing would hang)
    try:
        assert failures == []
        assert m.retrieve(limit=1)["total"] == 300
        assert len(m.kv.list(limit=1000)) == 300
        assert sum(n["entries"] for n in m.namespaces()) == 600  # 301 in the audit: its own extra key
    finally:
        m.close()


@pytest.mark.parametrize("limit", [-1, 2.5, "3", None, True])
def test_a_bad_limit_is_invalid_input(memory, limit):
    with pytest.raises(InvalidInput, match="limit"):
        memory.retrieve("x", limit=limit)


@pytest.mark.parametrize("min_score", ["0.5", None, -0.1, 1.5, float("nan")])
def test_a_bad_min_score_is_invalid_input(memory, min_score):
    with pytest.raises(InvalidInput, match="min_score"):
        memory.retrieve("x", min_score=min_score)


def test_a_lone_string_is_one_tag_or_name_never_its_characters(memory):
    memory.store("x", key="x", tags="abc")
    assert memory.retrieve(keys="x")["entries"][0]["tags"] == ["abc"]
    assert memory.retrieve(tags="abc")["total"] == 1
    assert memory.forget(tags="abc") == 1
    memory.graph.create_entities([{"name": "Bob", "entityType": "person"}])
    assert [e["name"] for e in memory.graph.open("Bob")["entities"]] == ["Bob"]
    assert memory.graph.delete_entities("Bob") == {"deletedEntities": 1, "deletedRelations": 0}
    log = memory.episodes.create("log")
    memory.episodes.append(log["memoryId"], "e", "p", tags="ci")
    assert [e["tags"] for e in memory.episodes.query(log["memoryId"], tags="ci")] == [["ci"]]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_numbers_are_refused_wherever_values_go(memory, bad):
    with pytest.raises(InvalidInput, match="finite"):
        memory.kv.set("k", bad)
    with pytest.raises(InvalidInput, match="finite"):
        memory.kv.set("k", {"deep": [1, {"x": bad}]})
    with pytest.raises(InvalidInput, match="finite"):
        memory.store(bad, key="k")
    with pytest.raises(InvalidInput, match="finite"):
        memory.store("content", key={"a": bad})
    with pytest.raises(InvalidInput, match="finite"):
        memory.json.save({"n": bad})
    assert memory.namespaces() == []  # nothing was stored


def test_a_closed_memory_and_its_views_refuse_every_call(home):
    m = Memory(home=home)
    view, session = m.using(namespace="other"), m.session()
    m.close()
    m.close()  # twice is fine
    for call in (lambda: m.kv.set("k", 1), lambda: m.retrieve("x"), lambda: view.store("x"),
                 lambda: view.graph.read(), lambda: m.stats(), lambda: session.retrieve("x")):  # fmt: skip
        with pytest.raises(errors.Closed, match="closed"):
            call()
    with Memory(home=home) as m2:
        pass
    with pytest.raises(errors.Closed):
        m2.namespaces()
    for closed in (m, view):  # a `with` block too (found by an outside audit: it entered)
        with pytest.raises(errors.Closed, match="closed"), closed:
            pass


def test_every_public_method_of_the_api_is_serialised():
    checked = 0
    for cls in (api._Tiers, api.Memory, api.Session, api.KeyValues, api.Documents, api.Markdown, api.Episodes,
                api.Persistent, api.Graph):  # fmt: skip
        for name, member in vars(cls).items():
            if callable(member) and not name.startswith("_") and (cls, name) != (api.Memory, "close"):
                assert getattr(member, "__wrapped__", None) is not None, f"{cls.__name__}.{name}"
                checked += 1
    assert checked > 50


def test_import_from_a_missing_file_is_not_found(memory, tmp_path):
    missing = tmp_path / "nothing.ndjson"
    with pytest.raises(NotFound, match="nothing.ndjson"):
        memory.import_from(missing)


def test_store_many_defaults_the_tier_to_episodic_as_store_does(memory):
    result = memory.store_many([{"key": "a", "content": "A"}, {"key": "b", "content": "B", "tier": "semantic"}])
    assert result["stored"] == [{"key": "a"}, {"key": "b"}] and not result.get("errors")
    assert [e["tier"] for e in memory.retrieve(keys=["a", "b"])["entries"]] in (
        ["episodic", "semantic"], ["semantic", "episodic"])  # fmt: skip


def test_editing_what_a_read_returned_or_what_was_stored_changes_nothing_stored(memory):
    """Found by an outside audit: reads handed out the store's own records (files: those written
    since the last checkpoint; the working tier: all of them), so editing a result or the value
    given to a write changed later reads without a write."""
    value = {"n": 1, "tags": ["a"]}
    memory.kv.set("k", value)
    memory.kv.get("k")["n"] = 999
    memory.store({"n": 1}, key="e", tier="semantic")
    memory.retrieve(keys=["e"])["entries"][0]["content"]["n"] = 999
    saved = memory.json.save({"n": 1})
    memory.json.list()[0]["json"]["n"] = 999
    with memory.session() as session:
        given = {"n": 1}
        session.store(given, key="w", tier="working")
        given["n"] = 2
        session.retrieve(keys=["w"], tier="working")["entries"][0]["content"]["n"] = 999
        assert session.retrieve(keys=["w"], tier="working")["entries"][0]["content"] == {"n": 1}
    assert memory.kv.get("k") == {"n": 1, "tags": ["a"]}
    assert memory.retrieve(keys=["e"])["entries"][0]["content"] == {"n": 1}
    assert [j["json"] for j in memory.json.list() if j["memoryId"] == saved["memoryId"]] == [{"n": 1}]


def test_arguments_of_the_wrong_type_raise_invalid_input_not_python_errors(memory):
    """Found by an outside audit: tags=5 raised TypeError, query=None AttributeError, and
    store_many("abc") stored nothing with three errors, one for each character."""
    with pytest.raises(InvalidInput, match="tags must be"):
        memory.store("x", key="a", tags=5)
    with pytest.raises(InvalidInput, match="tags must be"):
        memory.retrieve("x", tags=5)
    with pytest.raises(InvalidInput, match="keys must be"):
        memory.retrieve(keys=5)
    memory.store("kept", key="k", tags=None)
    assert [e["content"] for e in memory.retrieve(None)["entries"]] == ["kept"]
    result = memory.store_many("abc")
    assert result["stored"] == [] and len(result["errors"]) == 1


def test_an_export_to_a_path_that_cannot_be_reached_raises_the_stores_errors(memory, tmp_path):
    memory.kv.set("k", "v")
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(NotFound, match="no such folder"):
        memory.export_to(blocker / "export.ndjson")
    with pytest.raises(InvalidInput, match="is a folder"):
        memory.export_to(tmp_path)
    assert memory.export_to(tmp_path / "export.ndjson") >= 1


def test_a_yes_or_no_argument_must_be_a_bool_and_others_their_type(memory):
    """Found by an outside re-audit: `forget(everything="false")` emptied the tier (a truthy
    string), and retrieve(5), kv.list("x"), delete_namespace(5), reindex(5), export_to(5) raised
    Python's own errors."""
    memory.store("a", key="a", tier="semantic")
    for wrong in ("false", "yes", 1, None):
        with pytest.raises(InvalidInput, match="everything must be True or False"):
            memory.forget([], tier="semantic", everything=wrong)
    assert memory.retrieve(tier="semantic")["total"] == 1
    with pytest.raises(InvalidInput, match="persist must be True or False"):
        memory.session(persist="x")
    for call, message in [
        (lambda: memory.retrieve(5), "query must be a string"),
        (lambda: memory.retrieve(["a"]), "query must be a string"),
        (lambda: memory.retrieve("a", limit="3"), "limit must be a whole number"),
        (lambda: memory.kv.list("x"), "limit must be a whole number"),
        (lambda: memory.delete_namespace(5), "namespace must be a string"),
        (lambda: memory.reindex(5), "embedder must be a string"),
        (lambda: memory.export_to(5), "path must be a path"),
        (lambda: memory.import_from(5), "path must be a path"),
        (lambda: memory.graph.create_entities(5), "entities must be"),
        (lambda: memory.doctor(repair="no"), "repair must be True or False"),
    ]:
        with pytest.raises(InvalidInput, match=message):
            call()


def test_arguments_the_audit_found_unchecked_are_invalid_input(memory):
    """Each raised TypeError or AttributeError, and a ttl of 10**30 made store_many drop the
    valid entries beside it (outside audit U24)."""
    with pytest.raises(InvalidInput, match="ttl"):
        memory.store("x", key="s", ttl=10**30)
    done = memory.store_many([{"key": "a", "content": "ok"}, {"key": "b", "content": "no", "ttl": 10**30}])
    assert done["stored"] == [{"key": "a"}] and done["errors"][0].startswith("entries[1]: ttl")
    assert memory.store("y", key="far", ttl=2**63 - 1) == {"key": "far"}
    log = memory.episodes.create("log")["memoryId"]
    calls = [
        lambda: memory.store_many([{"key": "c", "content": "x"}], progress=5),
        lambda: memory.graph.read(offset="a"),
        lambda: memory.graph.search(5),
        lambda: memory.graph.import_jsonl(5),
        lambda: memory.import_records([1, 2]),
        lambda: memory.episodes.query(log, last_minutes=float("nan")),
        lambda: memory.episodes.query(log, last_minutes=float("inf")),
        lambda: memory.episodes.query(log, last_minutes=True),
        lambda: memory.episodes.query(log, last_count=1.5),
        lambda: memory.episodes.query(log, last_count=True),
    ]
    for call in calls:
        with pytest.raises(InvalidInput):
            call()
    jsonl = b'{"type": "entity", "name": "A", "entityType": "p", "observations": []}'
    assert memory.graph.import_jsonl(jsonl)["entities"] == 1  # bytes are lines of text


@pytest.mark.parametrize(
    "options, message",
    [
        ({"home": 5}, "home must be a path"),
        ({"store": 5}, "store must be a string"),
        ({"embedder": ["hash"]}, "embedder must be a string"),
        ({"pooled": "yes"}, "pooled must be True or False"),
        ({"pooled": "false"}, "pooled must be True or False"),  # a truthy string, taken as True before
        ({"namespace": 5}, "namespace must be a string"),
        ({"agent": True}, "agent must be a string"),
    ],
)
def test_opening_with_an_argument_of_the_wrong_type_is_invalid_input(home, options, message):
    """Outside audit 30b: `home=5` was a raw TypeError and `pooled="false"` was taken as true."""
    with pytest.raises(InvalidInput, match=message):
        Memory(**{"home": home, **options})


def test_store_objects_of_one_process_making_a_namespace_at_once_store_every_write(tmp_path):
    """Several `Memory` objects of one process (an app and its LangGraph store) on one files
    store, whose first writes to a new namespace come from threads at once: each write is
    stored (outside audit 32b: the temporary file of an atomic write was named by the process
    alone, so two threads wrote, renamed and lost one file: FileNotFoundError, write refused)."""
    import threading

    objects = [Memory(home=tmp_path, namespace="base") for _ in range(4)]
    try:
        objects[0].store("warm", key="w")
        failures: list[str] = []
        for round_ in range(6):
            start = threading.Barrier(len(objects))

            def write(i: int, round_: int = round_, start: threading.Barrier = start) -> None:
                start.wait()
                try:
                    objects[i].using(namespace=f"fresh{round_}").store(f"note {i}", key=f"k{i}")
                except Exception as exc:  # noqa: BLE001 (any failure is the finding)
                    failures.append(f"{type(exc).__name__}: {exc}")

            threads = [threading.Thread(target=write, args=(i,)) for i in range(len(objects))]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        assert failures == []
        totals = [objects[0].using(namespace=f"fresh{r}").retrieve(limit=10)["total"] for r in range(6)]
        assert totals == [len(objects)] * 6
        assert not list(tmp_path.rglob("*.tmp"))
    finally:
        for memory in objects:
            memory.close()


def test_time_bounds_take_datetimes_and_dates(memory):
    """A Python caller's natural bounds (outside audit 32b: refused as not ISO 8601 text): a
    datetime (UTC without a zone), a date; a number is refused, naming the argument."""
    import datetime as dt

    memory.store({"text": "met Ana", "date": "2023-05-08T10:00:00Z"}, key="may")
    memory.store({"text": "met Bo", "date": "2023-06-08T10:00:00Z"}, key="june")

    def keys(**bounds):
        return [e["key"]["key"] for e in memory.retrieve(**bounds)["entries"]]

    assert keys(since=dt.datetime(2023, 6, 1)) == ["june"]
    assert keys(until=dt.datetime(2023, 6, 1, tzinfo=dt.timezone(dt.timedelta(hours=2)))) == ["may"]
    assert keys(since=dt.date(2023, 5, 8), until=dt.date(2023, 5, 9)) == ["may"]
    with pytest.raises(InvalidInput, match="since must be a datetime"):
        memory.retrieve(since=1683540000)
    log = memory.episodes.create(title="log")
    memory.episodes.append(log["memoryId"], "ping", {"n": 1})
    assert len(memory.episodes.query(log["memoryId"], since=dt.datetime(2000, 1, 1, 0, 0, 0, 123456))) == 1


def test_a_stored_value_comes_back_as_stored(memory):
    """`kv.set` returns the value as `kv.get` gives it (audit 32b: a tuple came back a tuple)."""
    assert memory.kv.set("pair", (1, 2))["value"] == [1, 2] == memory.kv.get("pair")
