"""Low findings an outside audit left open, each through the front door it was found at (the
`mem` CLI as a subprocess, the A2E wire), on both backends where a store is involved."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from .signals import default_signals
from .test_audit_security import mem

ROOT = Path(__file__).resolve().parent.parent


# -- import: a record of an unknown kind, or of a scope no shard of its kind has -----------------

KV_DOC = {"id": "k", "key": "k", "value": "v", "created_at": "2025-01-01T00:00:00.000Z",
          "updated_at": "2025-01-01T00:00:00.000Z"}  # fmt: skip
ENTRY_DOC = {"id": '{"k":"x"}', "key": {"k": "x"}, "content": "c", "tier": "episodic", "tags": [], "source": "",
             "score": 1.0, "ttl": 0, "created_at": 1.0, "updated_at": 1.0, "expires_at": None}  # fmt: skip


def line(kind: str, scope: list[str], doc: dict) -> bytes:
    return orjson.dumps({"namespace": "ns", "kind": kind, "scope": scope, "id": doc["id"], "doc": doc}) + b"\n"


@pytest.mark.parametrize(
    "bad, message",
    [
        (line("bogus", [], KV_DOC), b"line 2: unknown kind 'bogus'"),
        (line("episodic", ["alice", "bob"], ENTRY_DOC), b"line 2: an episodic record's scope holds one name, not 2"),
        (line("episodic", [], ENTRY_DOC), b"line 2: an episodic record's scope holds one name, not 0"),
        (line("semantic", ["alice"], {**ENTRY_DOC, "tier": "semantic"}), b"line 2: a semantic record's scope holds"),
        (line("kv", ["x"], KV_DOC), b"line 2: a kv record's scope holds no name, not 1"),
        (line("langgraph", [], KV_DOC), b"line 2: a langgraph record's scope holds one name or more, not 0"),
    ],
    ids=["unknown-kind", "episodic-two-names", "episodic-no-name", "semantic-a-name", "kv-a-name", "langgraph-none"],
)
def test_import_refuses_a_record_no_shard_of_mem_holds_and_writes_nothing(home, bad, message):
    good = line("kv", [], KV_DOC)  # a valid line first: the import is all or nothing, as for a malformed line
    r = mem("import", "-", input=good + bad)
    assert r.returncode == 4 and message in r.stderr, r
    assert mem("export").stdout == b""


EVENT_DOC = {"id": "ev_1", "memoryId": "m1", "event_type": "t", "emitting_agent_id": "a", "team_id": None, "tags": [],
             "payload": "p", "timestamp": "2025-01-01T00:00:00.000Z"}  # fmt: skip
ITEM_DOC = {"id": "k", "key": "k", "value": {"a": 1}, "text": "a", "created_at": 1.0, "updated_at": 1.0,
            "expires_at": None, "ttl": None}  # fmt: skip


def test_import_keeps_taking_every_kind_an_export_gives(home):
    records = [line("kv", [], KV_DOC), line("episodic", ["alice"], ENTRY_DOC), line("events", ["m1"], EVENT_DOC),
               line("langgraph", ["a", "b"], ITEM_DOC)]  # fmt: skip
    r = mem("import", "-", "--format", "json", input=b"".join(records))
    assert r.returncode == 0 and orjson.loads(r.stdout)["new"] == 4, r


@pytest.fixture
def every_kind(one_of_each, home):
    """A store holding a record of every kind an export can give."""
    from a2e_mem.langgraph import MemStore
    from a2e_mem.service import MemoryService

    svc = MemoryService(home)
    svc.kg_create_entities([{"name": "Ada", "entityType": "person", "observations": ["math"]},
                            {"name": "Bob", "entityType": "person"}], namespace="ns")  # fmt: skip
    svc.kg_create_relations([{"from": "Ada", "to": "Bob", "relationType": "knows"}], namespace="ns")
    svc.close()
    items = MemStore(home, store=os.environ.get("MEM_STORE", ""))
    items.put(("users", "ada"), "prefs", {"theme": "dark"})
    items.close()


BROKEN = {  # kind -> a change to its record that its tool's reads would trip on
    "kv": lambda d: {k: v for k, v in d.items() if k != "value"},
    "json": lambda d: {**d, "json": [1, 2]},
    "todo": lambda d: {**d, "todo": "buy milk"},
    "markdown": lambda d: {**d, "markdown": 5},
    "persistent": lambda d: {k: v for k, v in d.items() if k != "retrieval"},
    "episodes": lambda d: {**d, "archived": "yes"},
    "events": lambda d: {k: v for k, v in d.items() if k != "payload"},
    "kg_entities": lambda d: {k: v for k, v in d.items() if k != "name"},
    "kg_relations": lambda d: {**d, "relationType": ""},
    "langgraph": lambda d: {k: v for k, v in d.items() if k != "value"},
}


@pytest.mark.parametrize("kind", ["kv", "langgraph"])
def test_import_refuses_a_record_whose_id_is_not_a_string(home, kind):
    """Found by an outside audit: a kv or LangGraph record with the id 5 was written, and the
    store was then damaged for `mem export` and `mem doctor`."""
    doc = {**(KV_DOC if kind == "kv" else ITEM_DOC), "id": 5, "key": 5}
    r = mem("import", "-", input=line(kind, [] if kind == "kv" else ["a"], doc))
    assert r.returncode == 4 and b"line 1: the record's id must be a string" in r.stderr, r
    assert mem("export").stdout == b"" and mem("doctor").returncode == 0


@pytest.mark.parametrize(
    "change, message",
    [
        (
            {"timestamp": "2025-01-01"},
            b"timestamp must be a UTC time written as mem writes it ('2025-01-01T00:00:00.000Z')",
        ),
        ({"timestamp": "2025-01-01T02:00:00+02:00"}, b"('2025-01-01T00:00:00.000Z'), not '2025-01-01T02:00:00+02:00'"),
        ({"timestamp": "next week"}, b"timestamp must be an ISO 8601 time, not 'next week'"),
    ],
    ids=["date-only", "offset", "not-a-time"],
)
def test_import_refuses_an_event_time_written_otherwise_than_mem_writes_it(home, change, message):
    """Left open by an outside audit: an event timestamp `2025-01-01` was taken. Events are ordered
    by their timestamps as text, and a new event's is never before the last one's: a time written
    another way sorts out of place (a date alone before every time of its day)."""
    r = mem("import", "-", input=line("events", ["m1"], {**EVENT_DOC, **change}))
    assert r.returncode == 4 and message in r.stderr, r
    assert mem("export").stdout == b""


def test_import_refuses_a_line_whose_id_is_not_its_doc_s(home):
    """Left open by an outside audit: a line's `id` that was not its doc's was ignored."""
    r = mem(
        "import", "-", input=orjson.dumps({"namespace": "ns", "kind": "kv", "scope": [], "id": "other", "doc": KV_DOC})
    )
    assert r.returncode == 4 and b"line 1: id 'other' is not the doc's id 'k'" in r.stderr, r
    assert mem("export").stdout == b""


def test_import_refuses_a_record_its_kind_s_reads_would_trip_on(every_kind):
    """Found by an outside audit: `mem import` took any object as a record of a kind, and every
    later read of its shard failed (`mem todo list`: KeyError 'todo'; LangGraph search: 'value')."""
    lines = mem("export").stdout.splitlines()
    kinds = [orjson.loads(row)["kind"] for row in lines]
    assert set(BROKEN) <= set(kinds)
    again = mem("import", "-", "--format", "json", input=b"\n".join(lines) + b"\n")  # every record as exported
    assert again.returncode == 0 and orjson.loads(again.stdout)["unchanged"] == len(lines), again
    for kind, break_it in BROKEN.items():
        at = kinds.index(kind)
        record = orjson.loads(lines[at])
        bad = orjson.dumps({**record, "doc": break_it(record["doc"])})
        r = mem("import", "-", input=b"\n".join([*lines[:at], bad, *lines[at + 1 :]]) + b"\n")
        assert r.returncode == 4 and f"line {at + 1}: a".encode() in r.stderr and b"Traceback" not in r.stderr, r
    assert mem("export").stdout.splitlines() == lines  # nothing written


SEMANTIC_DOC = {**ENTRY_DOC, "tier": "semantic"}


@pytest.mark.parametrize(
    "bad, message",
    [
        (line("semantic", [], {**SEMANTIC_DOC, "content": "x" * 300_000}), b"line 3: key and content are 300"),
        (line("semantic", [], {**SEMANTIC_DOC, "tags": "not a list"}), b"line 3: tags: "),
        (line("semantic", [], ENTRY_DOC), b"line 3: a semantic record of tier 'episodic'"),
    ],
    ids=["too-big", "tags-not-a-list", "tier-not-its-kind"],
)
def test_import_refuses_an_entry_memory_store_would_refuse_before_writing_anything(home, bad, message):
    """Found by an outside audit: the entries' own checks ran while writing, so the shards
    before an invalid entry were written (and `--dry-run` said all was well)."""
    good = line("kv", [], KV_DOC) + line("semantic", [], {**SEMANTIC_DOC, "id": '{"k":"y"}', "key": {"k": "y"}})
    for dry in ([], ["--dry-run"]):
        r = mem("import", "-", *dry, input=good + bad)
        assert r.returncode == 4 and message in r.stderr, r
    assert mem("export").stdout == b""


def test_a_failed_export_to_a_file_leaves_the_file_that_was_there(tmp_path):
    """Found by an outside audit: `mem export -o backup.ndjson` emptied the backup before it read
    the store, and a store it could not reach left it empty."""
    backup = tmp_path / "backup.ndjson"
    backup.write_bytes(b"last night's dump\n")
    unreachable = f"postgresql://nobody:secret@/postgres?host={tmp_path / 'no-server'}&connect_timeout=2"
    r = mem("--store", unreachable, "export", "-o", str(backup))
    assert r.returncode == 7, r
    assert backup.read_bytes() == b"last night's dump\n"
    assert [p.name for p in tmp_path.iterdir()] == ["backup.ndjson"]  # no temporary file left


def test_an_export_to_a_file_replaces_it_whole_and_private(home, tmp_path):
    backup = tmp_path / "backup.ndjson"
    backup.write_bytes(b"old\n" * 1000)
    backup.chmod(0o644)
    assert mem("import", "-", input=line("kv", [], KV_DOC)).returncode == 0
    r = mem("export", "-o", str(backup))
    assert r.returncode == 0, r
    assert backup.read_bytes() == mem("export").stdout and backup.stat().st_mode & 0o777 == 0o600


# -- a postgresql:// store without the pgvector package (or psycopg, already so) -----------------

WITHOUT = "import sys; sys.modules[{!r}] = None; sys.argv[0] = 'mem'; from a2e_mem.cli.main import run; run()"


@pytest.mark.parametrize("package", ["pgvector", "psycopg"])
def test_a_postgres_store_without_its_driver_is_unavailable_and_says_what_to_install(home, backend, package):
    """On PostgreSQL the real server (where the audit met a traceback line and exit 1); on files
    a URL nobody listens at: the packages are checked before any connection."""
    url = os.environ.get("MEM_STORE") or "postgresql://mem@127.0.0.1:1/nowhere"
    r = subprocess.run(
        [sys.executable, "-c", WITHOUT.format(package), "--store", url, "keys"],
        cwd=ROOT,
        capture_output=True,
        timeout=120,
    )
    assert r.returncode == 7, r
    assert r.stderr == f"mem: error: a postgresql:// store needs {package}: pip install 'a2e-mem[postgres]'\n".encode()


# -- --fields naming a field the records do not have -----------------------------------------------

FIELD_COMMANDS = {
    "retrieve": ["retrieve", "-q", "hello", "-n", "ns"],
    "get": ["get", "k", "-n", "ns"],
    "episodic-list": ["episodic", "list", "--archived", "-n", "ns"],
    "episodic-query": ["episodic", "query", "--swarm", "s", "-n", "ns"],
    "session-list": ["session", "list"],
    "persistent-list": ["persistent", "list", "-n", "ns"],
    "stats": ["stats", "-n", "ns"],
    "json-list": ["json", "list", "-n", "ns"],
    "todo-list": ["todo", "list", "-n", "ns"],
    "markdown-list": ["markdown", "list", "-n", "ns"],
}


@pytest.fixture
def one_of_each(home):
    """A record for each command taking --fields, each with every optional field it can have."""
    from a2e_mem.service import MemoryService

    svc = MemoryService(home)
    svc.store(svc.scope("ns", "alice"), [{"key": {"k": 1}, "content": "hello world", "tier": "semantic"}])
    svc.memory_set("k", "v", namespace="ns")
    memory = svc.episodic_memory_create("log", swarm_id="s", namespace="ns")["memoryId"]
    event = {"event_type": "t", "emitting_agent_id": "a", "team_id": "x", "tags": ["g"], "payload": {"n": 1}}
    svc.episodic_memory_append_event(memory, event, namespace="ns")
    svc.episodic_memory_archive(memory, namespace="ns")
    retrieval = {"source_type": "kv", "source_id": "ns"}
    svc.persistent_memory_create("pm", retrieval, {"format": "markdown"}, namespace="ns")
    svc.memory_json_save({"a": 1}, {"m": 1}, namespace="ns")
    svc.memory_todo_save({"title": "t"}, namespace="ns")
    svc.memory_markdown_save("# t", namespace="ns")
    svc.a2e.open_session("ns", "alice", persist=True)
    svc.close()


@pytest.mark.parametrize("command", list(FIELD_COMMANDS))
def test_fields_naming_an_unknown_field_is_a_usage_error_listing_the_valid_ones(one_of_each, command):
    args = FIELD_COMMANDS[command]
    shown = mem(*args, "--format", "json")
    assert shown.returncode == 0, shown
    records = orjson.loads(shown.stdout)
    first = records if isinstance(records, dict) else records[0]
    r = mem(*args, "--fields", f"{next(iter(first))},bogus")
    assert r.returncode == 2, r
    message = r.stderr.decode()
    assert message.startswith("mem: error: --fields: unknown field 'bogus' (valid: ") and message.count("\n") == 1
    assert all(f" {name}," in message or f" {name})" in message for name in first), message


@pytest.mark.parametrize("command", [name for name in FIELD_COMMANDS if name != "get"])  # get: no record, exit 3
def test_every_field_a_command_can_show_is_accepted_even_where_no_record_has_it(one_of_each, command):
    """The fields of each command's fullest record are valid on an empty store too, where no
    record shows them (the list is empty): the command knows its fields."""
    args = FIELD_COMMANDS[command]
    records = orjson.loads(mem(*args, "--format", "json").stdout)
    names = ",".join(sorted({name for record in records for name in record}))
    empty = ["--home", str(Path(os.environ["MEM_HOME"]) / "empty")]
    r = mem(*empty, *args, "--fields", names, "--format", "json", env={"MEM_STORE": ""})
    assert r.returncode == 0 and orjson.loads(r.stdout) == [], r


def test_fields_of_a_record_an_import_brought_with_a_field_of_its_own_are_accepted(home):
    doc = {"id": "json_1", "json": {"a": 1}, "metadata": {}, "created_at": "2025-01-01T00:00:00.000Z",
           "updated_at": "2025-01-01T00:00:00.000Z", "legacy": 7}  # fmt: skip
    assert mem("import", "-", input=line("json", [], doc)).returncode == 0
    r = mem("json", "list", "-n", "ns", "--fields", "memoryId,legacy")
    assert r.returncode == 0 and orjson.loads(r.stdout) == {"memoryId": "json_1", "legacy": 7}, r


# -- --min-score that is no number from 0 to 1 ------------------------------------------------------


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e400", "1.5", "-0.1"])
def test_a_min_score_out_of_0_to_1_is_a_usage_error_saying_so(home, value):
    r = mem("retrieve", f"--min-score={value}")
    shown = repr(float(value))
    expected = f"mem: error: Invalid value for '--min-score': must be a number from 0 to 1, not {shown} "
    assert r.returncode == 2 and r.stderr.decode() == expected + "(see 'mem retrieve --help')\n", r


@pytest.mark.parametrize("value", ["0", "1", "0.25"])
def test_a_min_score_from_0_to_1_is_taken(home, value):
    assert mem("retrieve", "--min-score", value).returncode == 0


@pytest.mark.parametrize("value", [1e308, -1e308, 2, -0.5])
def test_a_min_score_out_of_0_to_1_on_the_wire_is_an_error_naming_it(service, value):
    from a2e_mem.protocol import Protocol

    wire = Protocol(service)

    def ask(kind: str, **fields: object) -> dict:
        return wire.handle(orjson.dumps({"type": kind, "id": "r1", "version": "1.0", "ts": 0.0, **fields}))

    memory_id = ask("memory/init/req", namespace="ns", scope={})["memory_id"]
    r = ask("memory/retrieve/req", memory_id=memory_id, min_score=value)
    bound = "less than or equal to 1" if value > 1 else "greater than or equal to 0"
    assert r["type"] == "error" and r["code"] == "schema_violation" and r["req_id"] == "r1", r
    assert r["message"] == f"invalid memory/retrieve/req: min_score: Input should be {bound}", r


def test_a_min_score_out_of_0_to_1_through_mcp_is_an_error_naming_it(home):
    import asyncio

    from tests.test_mcp import Calls, server

    async def calls() -> None:
        async with server() as client:
            t = Calls(client)
            await t.fails("memory_retrieve", "min_score must be a number from 0 to 1, not 1e+308", min_score=1e308)
            await t.fails("memory_retrieve", "min_score must be a number from 0 to 1, not -0.5", min_score=-0.5)
            await t.fails("memory_retrieve", "limit must be a whole number >= 0, not -1", limit=-1)

    asyncio.run(calls())


# -- --since / --until with a time of day, outside the years 1800 to 2099 ---------------------------

OUT_OF_YEARS = ["2500-01-01", "2500-01-01T10:00", "0300-05-05 12:00", "1799-12-31T23:59:59Z", "2100-01-01T00:00Z"]


@pytest.mark.parametrize("value", OUT_OF_YEARS)
@pytest.mark.parametrize("command", [["retrieve"], ["episodic", "query", "--swarm", "s"]], ids=["retrieve", "events"])
@pytest.mark.parametrize("what", ["since", "until"])
def test_a_time_of_day_outside_the_years_read_is_refused_like_a_date_there(home, value, command, what):
    r = mem(*command, f"--{what}", value)
    assert r.returncode == 4, r
    assert r.stderr.decode().startswith(f"mem: error: {what}: {value!r} is not a date: "), r
    assert "years 1800 to 2099" in r.stderr.decode()


@pytest.mark.parametrize("value", ["1800-01-01T00:00Z", "2099-12-31T23:59:59.999Z", "2099-12-31 12:00"])
def test_a_time_of_day_inside_the_years_read_is_taken(home, value):
    assert mem("retrieve", "--since", value).returncode == 0
    assert mem("retrieve", "--until", value).returncode == 0


def test_a_time_written_with_a_lowercase_t_and_z_bounds_as_the_uppercase_one(home):
    """ISO 8601 (RFC 3339) allows "t" and "z"; an outside audit found them refused."""
    from a2e_mem.timeaware import time_bound

    assert time_bound("2026-11-30t23:00:00z", "since", 0.0) == time_bound("2026-11-30T23:00:00Z", "since", 0.0)
    assert mem("retrieve", "--since", "2026-11-30t23:00z").returncode == 0


def test_an_import_file_starting_with_a_byte_order_mark_is_read(home):
    """An editor that saves "UTF-8 with signature" puts a BOM first; an outside audit found such a
    file refused (`serve-stdio` already took one)."""
    r = mem("import", "-", "--format", "json", input=b"\xef\xbb\xbf" + line("kv", [], KV_DOC))
    assert r.returncode == 0 and orjson.loads(r.stdout)["new"] == 1, r
    assert orjson.loads(mem("export").stdout)["doc"] == KV_DOC


# -- export -o: what a final outside audit found -------------------------------------------------


def test_an_export_to_dev_stdout_appends_where_the_shell_points_it(home, tmp_path):
    """`-o /dev/stdout` resolved to the file stdout was, and replaced it: `>>` lost what it held."""
    assert mem("import", "-", input=line("kv", [], KV_DOC)).returncode == 0
    log = tmp_path / "log.ndjson"
    log.write_bytes(b"kept\n")
    with log.open("ab") as out:
        r = subprocess.run([sys.executable, "-m", "a2e_mem.cli.main", "export", "-o", "/dev/stdout"], stdout=out,
                           stderr=subprocess.PIPE, cwd=ROOT, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert log.read_bytes() == b"kept\n" + mem("export").stdout


def test_an_export_to_a_pipe_named_by_dev_stdout_is_written():
    r = subprocess.run(f"{sys.executable} -m a2e_mem.cli.main export -o /dev/stdout | cat", shell=True,
                       capture_output=True, cwd=ROOT, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr


def test_a_dump_that_reports_damage_never_replaces_a_file_but_fills_a_new_one(tmp_path):
    from a2e_mem.errors import Damaged
    from a2e_mem.paths import private_output

    backup = tmp_path / "backup.ndjson"
    backup.write_bytes(b"whole\n")
    for path in (backup, tmp_path / "new.ndjson"):
        with pytest.raises(Damaged), private_output(path, keep_on=(Damaged,)) as out:
            out.write(b"salvaged\n")
            raise Damaged("the store is damaged")
    assert backup.read_bytes() == b"whole\n"
    assert (tmp_path / "new.ndjson").read_bytes() == b"salvaged\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["backup.ndjson", "new.ndjson"]


def test_a_dump_the_disk_refuses_leaves_no_temporary_file(tmp_path):
    """Found by an outside audit on a full disk: closing the temporary file flushed its buffer,
    failed again, and the file (holding part of the dump) stayed beside the target. Here the
    file size limit (EFBIG, as ENOSPC) refuses the flush of what the dump buffered."""
    import resource
    import signal

    from a2e_mem.paths import private_output

    backup = tmp_path / "backup.ndjson"
    backup.write_bytes(b"whole\n")
    old_limit, old_handler = resource.getrlimit(resource.RLIMIT_FSIZE), signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    try:
        with pytest.raises(OSError), private_output(backup) as out:
            out.write(b"x" * 100)  # buffered, not written yet
            resource.setrlimit(resource.RLIMIT_FSIZE, (10, old_limit[1]))
            out.flush()  # the disk refuses it, and will again when the file is closed
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, old_limit)
        signal.signal(signal.SIGXFSZ, old_handler)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["backup.ndjson"]
    assert backup.read_bytes() == b"whole\n"


def test_the_temporary_file_of_an_export_is_not_one_a_planted_link_names(tmp_path):
    """The temporary name was predictable (`.FILE.<pid>.tmp`) and opened without O_EXCL: a link
    planted there sent the dump into another file."""
    from a2e_mem.paths import private_output

    victim = tmp_path / "victim"
    victim.write_bytes(b"mine\n")
    (tmp_path / f".dump.{os.getpid()}.tmp").symlink_to(victim)
    with private_output(tmp_path / "dump") as out:
        out.write(b"dump\n")
    assert victim.read_bytes() == b"mine\n" and (tmp_path / "dump").read_bytes() == b"dump\n"


def test_byte_order_marks_of_concatenated_files_are_read(home):
    bom = b"\xef\xbb\xbf"
    two = {**KV_DOC, "id": "k2", "key": "k2"}
    r = mem("import", "-", "--format", "json", input=bom + line("kv", [], KV_DOC) + bom + line("kv", [], two))
    assert r.returncode == 0 and orjson.loads(r.stdout)["new"] == 2, r


# -- a FILE given as the empty string ----------------------------------------------------------------


@pytest.mark.files_only  # refused before a store is opened
@pytest.mark.parametrize(
    "args, culprit, stream",
    [
        (["export", "-o", ""], "'--output' / '-o'", "stdout"),
        (["export", "--output="], "'--output' / '-o'", "stdout"),
        (["import", ""], "'source'", "stdin"),
        (["kg", "import", ""], "'path'", "stdin"),
        (["markdown", "save", ""], "'source'", "stdin"),
        (["markdown", "update", "markdown_1", ""], "'source'", "stdin"),
    ],
    ids=["export-o", "export-output=", "import", "kg-import", "markdown-save", "markdown-update"],
)
def test_an_empty_file_name_is_a_usage_error_naming_its_parameter(home, args, culprit, stream):
    """Found by an outside audit: `mem export -o ''` exited 1 with "Is a directory (.)", the
    commands reading a FILE exited 4 with "cannot read : Is a directory"."""
    r = mem(*args)
    command = " ".join(args[: 2 if args[0] in ("kg", "markdown") else 1])
    expected = f"mem: error: Invalid value for {culprit}: an empty file name: name a file, or - for {stream} "
    assert r.returncode == 2 and r.stderr.decode() == expected + f"(see 'mem {command} --help')\n", r
    assert r.stdout == b""


# -- export -o FILE stopped midway by SIGTERM or Ctrl-C ----------------------------------------------


@pytest.fixture
def big_store(home):
    """A store whose export takes a while (about a second on an idle machine): still writing when
    the test has seen its temporary file."""
    from a2e_mem.service import MemoryService

    docs = ({**KV_DOC, "id": f"k{i}", "key": f"k{i}", "value": "v" * 200} for i in range(40_000))
    svc = MemoryService(home)
    try:
        assert svc.import_records([line("kv", [], doc) for doc in docs])["new"] == 40_000
    finally:
        svc.close()


STOPS = [(signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129)]


@pytest.mark.parametrize("signum, code", STOPS, ids=["SIGTERM", "SIGINT", "SIGHUP"])
def test_an_export_stopped_midway_removes_its_temporary_file_and_keeps_the_file(big_store, tmp_path, signum, code):
    """Found by an outside audit: SIGTERM ended `mem export -o FILE` on the spot, leaving the
    temporary file beside FILE (Ctrl-C already unwound and removed it)."""
    out = tmp_path / "out"
    out.mkdir()
    backup = out / "backup.ndjson"
    for _ in range(5):  # on a loaded machine the export may end before the signal lands: again
        backup.write_bytes(b"last night's dump\n")
        proc = subprocess.Popen([sys.executable, "-m", "a2e_mem.cli.main", "export", "-o", str(backup)], cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                preexec_fn=default_signals)  # fmt: skip
        try:
            while proc.poll() is None and not list(out.glob(".backup.ndjson.*.tmp")):
                time.sleep(0.001)
            proc.send_signal(signum)
            stdout, stderr = proc.communicate(timeout=120)
        finally:
            proc.kill()
        if proc.returncode != 0:
            break
    assert proc.returncode == code, (proc.returncode, stderr)
    assert stdout == b"" and backup.read_bytes() == b"last night's dump\n"
    assert [p.name for p in out.iterdir()] == ["backup.ndjson"]  # the temporary file is gone


# -- import: one record on two lines ------------------------------------------------------------------


def test_a_record_on_two_lines_of_an_import_is_one_record_the_last_line_replacing_the_first(home):
    """Found by an outside audit: the same entry twice in FILE was counted as two new ones, the
    store then holding one (the last). Counted now is what the store ends with."""
    episodic = {**ENTRY_DOC, "key": {"k": "x"}}
    semantic = {**SEMANTIC_DOC, "id": '{"k": "x"}'}  # the same key: the canonical id is '{"k":"x"}'
    data = (line("kv", [], KV_DOC) + line("kv", [], {**KV_DOC, "value": "w"})
            + line("episodic", ["alice"], episodic) + line("episodic", ["alice"], {**episodic, "content": "d"})
            + line("episodic", ["bob"], episodic)  # another scope: another record
            + line("semantic", [], SEMANTIC_DOC) + line("semantic", [], {**semantic, "content": "s"}))  # fmt: skip
    dry = mem("import", "-", "--dry-run", "--format", "json", input=data)
    assert dry.returncode == 0 and orjson.loads(dry.stdout)["new"] == 4, dry
    r = mem("import", "-", "--format", "json", input=data)
    assert r.returncode == 0, r
    assert orjson.loads(r.stdout) == {"new": 4, "changed": 0, "unchanged": 0, "dry_run": False}
    docs = [orjson.loads(record)["doc"] for record in mem("export").stdout.splitlines()]
    assert [doc.get("value") or doc["content"] for doc in docs] == ["d", "c", "w", "s"]
    again = mem("import", "-", "--format", "json", input=data)
    assert orjson.loads(again.stdout) == {"new": 0, "changed": 0, "unchanged": 4, "dry_run": False}, again


# -- retrieve --fields explain without --explain --------------------------------------------------------


@pytest.mark.parametrize("fmt", ["json", "ndjson", "table"])
def test_fields_naming_explain_turns_explain_on(home, fmt):
    """Found by an outside audit: `mem retrieve --fields explain` without `--explain` printed a
    column of nulls."""
    assert mem("store", "--tier", "semantic", "-k", "k=1", "hello world").returncode == 0
    r = mem("retrieve", "-q", "hello", "--fields", "key, explain", "--format", fmt)
    assert r.returncode == 0, r
    if fmt == "table":  # a header, then the row: the key, then the explanation (cut to the width)
        header, row = r.stdout.decode().splitlines()
        assert header.split() == ["key", "explain"] and row.split()[0] == '{"k":"1"}', r
        assert row.split()[1].startswith('{"vector":'), r
        return
    shown = orjson.loads(r.stdout)
    shown = shown[0] if fmt == "json" else shown
    explained = orjson.loads(mem("retrieve", "-q", "hello", "--explain", "--format", "ndjson").stdout)["explain"]
    assert shown == {"key": {"k": "1"}, "explain": explained} and explained["path"], r
