"""The A2E commands at the shell: output formats, NDJSON input, exit codes."""

from __future__ import annotations

import orjson
from typer.testing import CliRunner

from a2e_mem.cli.main import app
from a2e_mem.service import MemoryService

runner = CliRunner()


def mem(*args, input=None):
    return runner.invoke(app, list(args), input=input)


def lines(result):
    return [orjson.loads(x) for x in result.stdout.splitlines() if x.strip()]


def test_store_and_retrieve_as_ndjson(home):
    r = mem("store", "--key", "topic=prefs", "--tier", "episodic", "--tag", "preferences", '{"language": "python"}')
    assert r.exit_code == 0, r.output
    assert lines(r) == [{"key": {"topic": "prefs"}, "stored": True}]
    svc = MemoryService(home)
    (stored,) = svc.retrieve(svc.scope("default", "default"))["entries"]
    assert stored["content"] == {"language": "python"} and stored["tags"] == ["preferences"]
    r = mem("retrieve", "--query", "python", "--format", "ndjson")
    assert r.exit_code == 0 and lines(r)[0]["key"] == {"topic": "prefs"}


def test_content_that_is_not_json_is_a_string_and_key_defaults_to_a_hash(home):
    mem("store", "buy oat milk")
    mem("store", "buy oat milk")
    (entry,) = lines(mem("retrieve"))
    assert entry["content"] == "buy oat milk" and list(entry["key"]) == ["hash"]


def test_json_format_fields_and_empty_results(home):
    assert mem("retrieve", "--format", "json").stdout.strip() == "[]"
    assert mem("retrieve").stdout == ""
    mem("store", "--key", "a", "hello")
    r = mem("retrieve", "--format", "json", "--fields", "key,content")
    assert orjson.loads(r.stdout) == [{"key": {"key": "a"}, "content": "hello"}]


def test_table_output_is_readable(home):
    mem("store", "--key", "k=1", "x" * 200)
    r = mem("retrieve", "--format", "table")
    assert r.exit_code == 0 and "…" in r.stdout and "ago" in r.stdout


def test_bulk_store_from_ndjson_stdin(home):
    entries = [{"key": {"n": i}, "content": f"fact {i}", "tier": "semantic"} for i in range(50)]
    body = "\n".join(orjson.dumps(e).decode() for e in entries) + "\n\n"
    r = mem("store", "-", input=body)
    assert r.exit_code == 0 and len(lines(r)) == 50
    assert mem("retrieve", "--tier", "semantic", "--limit", "100", "--format", "json").stdout.count('"fact ') == 50


def test_bad_ndjson_line_names_its_number_and_stores_nothing(home):
    r = mem("store", "-", input='{"key": {"a": 1}, "content": 1, "tier": "episodic"}\n{broken\n')
    assert r.exit_code == 4 and "line 2" in r.stderr
    assert mem("retrieve").stdout == ""


def test_invalid_entry_exits_4(home):
    r = mem("store", "-", input='{"key": {"k": 1}, "content": "x", "tier": "cosmic"}\n')
    assert r.exit_code == 4 and "tier" in r.stderr
    r = mem("store", "--tier", "cosmic", "x")  # a bad option value: a usage error, as --limit -1
    assert r.exit_code == 2 and "'--tier' / '-t': must be working, episodic or semantic" in r.stderr


def test_forget_and_session_flow(home):
    r = mem("init", "--namespace", "proj", "--agent", "bot")
    memory_id = r.stdout.strip()
    assert r.exit_code == 0 and len(memory_id) == 32
    assert mem("store", "--session", memory_id, "--tier", "working", "--key", "w", "scratch").exit_code == 0
    assert lines(mem("retrieve", "--session", memory_id, "--tier", "working"))[0]["content"] == "scratch"
    assert lines(mem("session", "list"))[0]["memory_id"] == memory_id
    assert mem("session", "close", memory_id).exit_code == 0
    r = mem("retrieve", "--session", memory_id)
    assert r.exit_code == 3 and r.stderr.startswith("mem: error: unknown memory_id")
    mem("store", "--key", "e", "--tag", "tmp", "episodic thing")
    assert lines(mem("forget", "--tag", "tmp")) == [{"deleted": 1}]


def test_working_tier_without_a_session_is_invalid_input(home):
    r = mem("store", "--tier", "working", "x")
    assert r.exit_code == 4 and "session" in r.stderr


def test_memory_full_exits_5(home, monkeypatch):
    monkeypatch.setenv("MEM_MAX_ENTRIES", "1")
    assert mem("store", "--key", "a", "one").exit_code == 0
    r = mem("store", "--key", "b", "two")
    assert r.exit_code == 5 and "full" in r.stderr


def test_scope_from_environment(home, monkeypatch):
    monkeypatch.setenv("MEM_NAMESPACE", "envns")
    monkeypatch.setenv("MEM_AGENT", "envagent")
    mem("store", "--key", "x", "from env")
    svc = MemoryService(home)
    assert svc.retrieve(svc.scope("envns", "envagent"))["total"] == 1


def test_demo_runs(home):
    r = mem("demo", "--format", "ndjson")
    assert r.exit_code == 0 and len(lines(r)) == 6


def test_table_output_has_no_colour_codes_with_no_color(home, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("FORCE_COLOR", "")
    mem("store", "--key", "k=1", "--tag", "t", "some content")
    result = mem("retrieve", "--format", "table")
    assert result.exit_code == 0 and "some content" in result.stdout and "\x1b[" not in result.stdout


def test_quiet_silences_notes_but_not_data(home):
    mem("store", "--key", "a", "hello")
    loud = mem("retrieve")
    quiet = runner.invoke(app, ["--quiet", "retrieve"])
    assert "matching" in loud.stderr and quiet.stderr == "" and quiet.stdout == loud.stdout
    stored = runner.invoke(app, ["--quiet", "store", "--key", "b", "x"])  # a write's result is data too
    assert stored.stderr == "" and "stored" in stored.stdout


def test_a_key_part_can_be_a_json_value_and_is_given_once(home):
    """`-k id:=1` reaches `{"id": 1}` (a number, as a JSON pipeline stores it), where `-k id=1`
    is the string "1"; a part named twice is a usage error, bad JSON invalid input."""
    from a2e_mem.cli.options import parse_key

    assert parse_key(["id:=1", "topic=prefs", "on:=true", "bare"]) == {
        "id": 1,
        "topic": "prefs",
        "on": True,
        "key": "bare",
    }
    mem("store", "-", input='{"key":{"id":1},"content":"x","tier":"semantic"}\n')
    assert '"deleted":0' in mem("forget", "-t", "semantic", "-k", "id=1").stdout
    assert '"deleted":1' in mem("forget", "-t", "semantic", "-k", "id:=1").stdout
    assert mem("forget", "-k", "a=1", "-k", "a=2").exit_code == 2
    assert mem("forget", "-k", "a:=[1").exit_code == 4


def test_entry_options_beside_dash_fill_what_each_entry_leaves_out(home):
    """`... | mem store - --ttl 3600` stored entries that never expired: the options were
    dropped without a word (outside audit Q24, high)."""
    lines = b'{"key":{"id":1},"content":"x","tier":"semantic"}\n{"key":{"id":2},"content":"y","tags":["own"]}\n'
    args = ["store", "-", "--tag", "extra", "--ttl", "5", "--score", "0.1", "--source", "cli", "-t", "episodic"]
    assert mem(*args, input=lines).exit_code == 0
    found = {e["key"]["id"]: e for e in orjson.loads(mem("retrieve", "-t", "", "--format", "json").stdout)}
    assert found[1]["tier"] == "semantic" and found[2]["tier"] == "episodic"  # the entry's own field wins
    assert found[1]["tags"] == ["extra"] and found[2]["tags"] == ["own", "extra"]
    assert all(e["ttl"] == 5 and e["score"] == 0.1 and e["source"] == "cli" for e in found.values())
    refused = mem("store", "-", "--key", "a=1", input=lines)  # a key names one entry
    assert refused.exit_code == 2 and "--key" in refused.stderr


def test_the_same_json_content_typed_two_ways_is_one_entry(home):
    """The key was a hash of the argument's text, so '{"a": 1}' and '{"a":1}' were two entries."""
    for content in ('{"a":1}', '{"a": 1}', ' {"a":1}'):
        assert mem("store", "-t", "semantic", "--", content).exit_code == 0
    for content in ('"quoted"', "quoted"):
        assert mem("store", "-t", "semantic", "--", content).exit_code == 0
    found = orjson.loads(mem("retrieve", "-t", "semantic", "--format", "json").stdout)
    assert sorted(orjson.dumps(e["content"]) for e in found) == [b'"quoted"', b'{"a":1}']


def test_a_key_part_without_a_name_is_a_usage_error(home):
    result = mem("store", "-k", "=v", "x")
    assert result.exit_code == 2 and "needs a name" in result.stderr


def test_init_piped_prints_the_bare_id_unless_a_format_is_asked(home, monkeypatch):
    """MEM_FORMAT was ignored (outside audit Q24); the bare ID is documented, for SID=$(mem init)."""
    bare = mem("init").stdout.strip()
    assert len(bare) == 32 and "{" not in bare
    monkeypatch.setenv("MEM_FORMAT", "ndjson")
    assert orjson.loads(mem("init").stdout)["memory_id"] != bare


def test_different_contents_never_share_a_default_key(home):
    """The number 42 and the text "42" (or an object and its JSON as text) got one key, the
    second store replacing the first (outside audit R24, high)."""
    for content in ("42", '"42"', '{"a":1}', '"{\\"a\\":1}"', "hello", '"hello"'):
        assert mem("store", "-t", "semantic", "--", content).exit_code == 0
    found = orjson.loads(mem("retrieve", "-t", "semantic", "--format", "json").stdout)
    assert sorted(orjson.dumps(e["content"]) for e in found) == sorted(
        [b"42", b'"42"', b'{"a":1}', b'"{\\"a\\":1}"', b'"hello"']
    )  # "hello" typed bare or as JSON text is one entry


def test_an_entry_without_a_tier_takes_the_default_tier_and_a_tag_given_twice_is_one(home):
    """--help shows `--tier [default: episodic]`; a line without a tier was refused (audit R24)."""
    lines = b'{"key":{"i":1},"content":"x"}\n{"key":{"i":2},"content":"y","tags":["imp"],"tier":"semantic"}\n'
    assert mem("store", "-", "--tag", "imp", "--tag", "imp", input=lines).exit_code == 0
    assert mem("store", "--tag", "a", "--tag", "a", "hello").exit_code == 0
    found = {str(e["key"]): e for e in orjson.loads(mem("retrieve", "-t", "", "--format", "json").stdout)}
    assert found["{'i': 1}"]["tier"] == "episodic" and found["{'i': 1}"]["tags"] == ["imp"]
    assert found["{'i': 2}"]["tier"] == "semantic" and found["{'i': 2}"]["tags"] == ["imp"]
    assert [e["tags"] for k, e in found.items() if "hash" in k] == [["a"]]
