"""An outside audit of the PostgreSQL backend (issue 11), driven from the outside: the CLI,
`serve-stdio` (A2E NDJSON) and `serve-mcp` (raw JSON-RPC) as subprocesses on a fresh database.

Each failing test is a finding (the comment above it names it); the passing ones prove that an
attack failed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

psycopg = pytest.importorskip("psycopg")

from a2e_mem.protocol import auth_token  # noqa: E402
from tests.pg import fresh_database  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
HOSTILE = [
    "'; DROP TABLE mem_records; --",
    'quote " and \\ backslash',
    "%s %(x)s $1 $$ ::text",
    "é 漢字 🎉 \u202e rtl " + "x" * 10_000,
]


def env_for(url: str, home: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ, "MEM_STORE": url, "MEM_HOME": str(home), "MEM_EMBEDDER": "hash",
        "MEM_CHECKPOINTS": "off", **extra,
    }  # fmt: skip


def mem(url: str, home: Path, *args: str, stdin: bytes = b"", **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "a2e_mem.cli.main", *args], input=stdin, capture_output=True, cwd=REPO, timeout=60,
        env=env_for(url, home, **extra),
    )  # fmt: skip


def sql(url: str, statement: str, *params: Any) -> Any:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(statement, params)
        return cur.fetchall() if cur.description else cur.rowcount


def msg(kind: str, rid: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "id": rid, "version": "1.0", "ts": 0.0, **fields}


class Wire:
    """One `mem serve-stdio`."""

    def __init__(self, url: str, home: Path, **extra: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "a2e_mem.cli.main", "serve-stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, cwd=str(REPO), env=env_for(url, home, **extra),
        )  # fmt: skip

    def ask(self, message: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def hello(self, agent: str, secret: str) -> None:
        reply = self.ask(msg("handshake/req", "h", agent_id=agent, agent_caps=[], auth_token=auth_token(secret, agent)))
        assert reply["ok"], reply

    def close(self) -> bytes:
        assert self.proc.stdin and self.proc.stderr
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        return self.proc.stderr.read()


class Mcp:
    """One `mem serve-mcp`, spoken to as raw JSON-RPC over stdio."""

    def __init__(self, url: str, home: Path, *args: str, **extra: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "a2e_mem.cli.main", "serve-mcp", *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=str(REPO), env=env_for(url, home, **extra),
        )  # fmt: skip
        self.n = 0
        self.rpc(
            "initialize",
            {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "audit", "version": "1"}},
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, obj: dict[str, Any]) -> None:
        assert self.proc.stdin
        self.proc.stdin.write(json.dumps(obj).encode() + b"\n")
        self.proc.stdin.flush()

    def rpc(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.n += 1
        self.send({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params})
        assert self.proc.stdout
        while True:
            reply = json.loads(self.proc.stdout.readline())
            if reply.get("id") == self.n:
                return reply

    def call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        return self.rpc("tools/call", {"name": name, "arguments": args})["result"]

    def close(self) -> bytes:
        assert self.proc.stdin and self.proc.stderr
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        return self.proc.stderr.read()


def kill_connections(url: str) -> None:
    sql(url, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
             "WHERE pid <> pg_backend_pid() AND datname = current_database()")  # fmt: skip


@pytest.fixture
def url() -> str:
    return fresh_database("mem_audit")


# ---------------------------------------------------------------- 1. auth and scoping


def test_attack_failed_agents_cannot_reach_each_others_sessions_over_stdio(url, tmp_path):
    a, b = Wire(url, tmp_path / "m1", MEM_AUTH_SECRET="s3cret"), Wire(url, tmp_path / "m2", MEM_AUTH_SECRET="s3cret")
    try:
        a.hello("A", "s3cret")
        b.hello("B", "s3cret")
        mid = a.ask(msg("memory/init/req", "i", namespace="ns"))["memory_id"]
        a.ask(
            msg("memory/store/req", "s", memory_id=mid, entries=[{"key": "k", "content": "A only", "tier": "episodic"}])
        )
        shell = json.loads(mem(url, tmp_path / "m3", "init", "-n", "ns", "--agent", "A", "--format", "json").stdout)
        for target in (mid, shell["memory_id"]):
            for m in (
                msg("memory/retrieve/req", "r", memory_id=target),
                msg(
                    "memory/store/req",
                    "s",
                    memory_id=target,
                    entries=[{"key": "k", "content": "B!", "tier": "episodic"}],
                ),
                msg("memory/forget/req", "f", memory_id=target, all=True),
            ):
                assert b.ask(m)["type"] == "error"
        assert b.ask(msg("memory/init/req", "i", namespace="ns", scope={"agent": "A"}))["code"] == "unauthorized"
        got = a.ask(msg("memory/retrieve/req", "r", memory_id=mid))
        assert [e["content"] for e in got["entries"]] == ["A only"]
    finally:
        a.close()
        b.close()


def test_attack_failed_mcp_with_a_secret_refuses_another_agent(url, tmp_path):
    server = Mcp(url, tmp_path, "--agent", "A", MEM_AUTH_SECRET="s3cret")
    try:
        for tool, args in (
            ("memory_store", {"agent": "B", "entries": [{"key": "k", "content": "x", "tier": "episodic"}]}),
            ("memory_retrieve", {"agent": "B"}),
            ("memory_forget", {"agent": "B", "all": True}),
        ):
            result = server.call(tool, args)
            assert result["isError"] and "unauthorized" in result["content"][0]["text"], result
    finally:
        server.close()


def test_attack_failed_mcp_with_a_secret_cannot_read_another_agent_through_a_persistent_memory(url, tmp_path):
    assert (
        mem(url, tmp_path, "store", "-n", "ns", "--agent", "B", "--key", "s", "B secret rotates tokens").returncode == 0
    )
    ids = []
    for filters in ({"agent": "B"}, {}):
        retrieval = json.dumps({"source_type": "vectordb", "source_id": "ns", "filters": filters})
        out = mem(url, tmp_path, "persistent", "create", "-n", "ns", "--label", "x", "--retrieval", retrieval,
                  "--contribution", '{"format": "json"}', "--format", "json")  # fmt: skip
        ids.append(json.loads(out.stdout)["id"])
    server = Mcp(url, tmp_path, "--agent", "A", "--namespace", "ns", MEM_AUTH_SECRET="s3cret")
    try:
        for pm in ids:
            result = server.call("persistent_memory_retrieve", {"memory_id": pm, "query": "secret rotates tokens"})
            assert "B secret" not in json.dumps(result), result
    finally:
        server.close()


# ---------------------------------------------------------------- 2. injection


def test_attack_failed_hostile_strings_are_data_on_postgresql(url, tmp_path):
    wire = Wire(url, tmp_path)  # one process for the A2E side (namespace, agent, key, tags, query)
    try:
        for s in HOSTILE:
            init = wire.ask(msg("memory/init/req", "i", namespace=s[:200], scope={"agent": s[:100]}))
            mid = init["memory_id"]
            entry = {"key": {s[:50]: s[:1000]}, "content": s, "tier": "episodic", "tags": [s[:60]]}
            stored = wire.ask(msg("memory/store/req", "s", memory_id=mid, entries=[entry]))
            assert stored["type"] == "memory/store/resp" and not stored["errors"], stored
            got = wire.ask(
                msg("memory/retrieve/req", "r", memory_id=mid, query=s[:300], tags=[s[:60]], keys=[entry["key"]])
            )
            assert [e["content"] for e in got["entries"]] == [s] and got["entries"][0]["key"] == entry["key"], got
    finally:
        assert b"Traceback" not in wire.close()
    s = HOSTILE[0] + HOSTILE[1] + HOSTILE[2]  # the codebolt side, at the shell
    assert mem(url, tmp_path, "set", "-n", s, s, s).returncode == 0
    assert mem(url, tmp_path, "get", "-n", s, s, "--raw").stdout.decode().rstrip("\n") == s
    kg = mem(url, tmp_path, "kg", "create", s, "--type", s[:100], "--obs", s, "-n", s)
    assert kg.returncode == 0, kg.stderr
    assert mem(url, tmp_path, "kg", "search", s[:50], "-n", s).stdout.count(b'"entity"') == 1
    lst = mem(url, tmp_path, "json", "list", "-n", s, "--filter", json.dumps({s[:30]: {"$gt": s[:30]}}))
    assert lst.returncode == 0 and b"Traceback" not in lst.stderr
    assert sql(url, "SELECT count(*) FROM mem_records")[0][0] > 0  # the table is still there


# ---------------------------------------------------------------- 3. several machines


def test_attack_failed_max_entries_raced_from_two_homes(url, tmp_path):
    def store(i: int) -> int:
        return mem(
            url, tmp_path / f"m{i % 2}", "store", "-n", "lim", "--key", f"k{i}", f"v{i}", MEM_MAX_ENTRIES="2"
        ).returncode

    with ThreadPoolExecutor(4) as pool:
        codes = list(pool.map(store, range(4)))
    assert sorted(codes) == [0, 0, 5, 5]
    assert sql(url, "SELECT count(*) FROM mem_records WHERE namespace = 'lim'")[0][0] == 2


def test_attack_failed_session_closed_on_machine_b_is_gone_for_machine_a(url, tmp_path):
    mid = json.loads(mem(url, tmp_path / "a", "init", "-n", "s", "--agent", "A", "--format", "json").stdout)[
        "memory_id"
    ]
    server = Wire(url, tmp_path / "a")
    try:
        ok = server.ask(
            msg("memory/store/req", "s", memory_id=mid, entries=[{"key": "w", "content": "x", "tier": "working"}])
        )
        assert ok["stored"] == [{"key": "w"}]
        assert mem(url, tmp_path / "b", "session", "close", mid).returncode == 0
        after = server.ask(msg("memory/retrieve/req", "r", memory_id=mid))
        assert after["type"] == "error" and after["code"] == "memory_not_found"
    finally:
        server.close()


# FINDING F5 (medium): after `mem reindex --embedder static` on machine B, machine A's running
# hash-embedder serve-stdio answers a query with a raw SQL error ("the server refused a statement
# (22000: different vector dimensions 256 and 64)") instead of the clear "vectors were made by
# the 'static' embedder ... run mem reindex" its writes get (the files backend does not crash).
def test_finding_reindex_on_another_machine_gives_a_query_a_clear_error(url, tmp_path):
    server = Wire(url, tmp_path / "a")
    try:
        mid = server.ask(msg("memory/init/req", "i", namespace="ri"))["memory_id"]
        server.ask(
            msg(
                "memory/store/req",
                "s",
                memory_id=mid,
                entries=[{"key": "x", "content": "deploy key", "tier": "semantic"}],
            )
        )
        assert mem(url, tmp_path / "b", "reindex", "--embedder", "static").returncode == 0
        reply = server.ask(msg("memory/retrieve/req", "r", memory_id=mid, query="deploy key"))
        if reply["type"] == "error":
            assert "refused a statement" not in reply["message"] and "dimensions" not in reply["message"], reply
            assert "reindex" in reply["message"] or "embedder" in reply["message"], reply
    finally:
        server.close()


# ---------------------------------------------------------------- 4. operator errors


# FINDING F3 (medium): a password written without percent-encoding (as operators do) leaks:
# with '/', '?' or '#' the whole URL, password included, is echoed; with '@' the tail of the
# password is echoed by the driver's "failed to resolve host 'ter2pw@127.0.0.1'".
@pytest.mark.parametrize("password", ["Hun@ter2pw", "Hun/ter2pw", "Hun?ter2pw", "Hun#ter2pw"])
def test_finding_an_unencoded_password_is_never_shown(tmp_path, password):
    out = mem(f"postgresql://u:{password}@127.0.0.1:1/db", tmp_path, "stats")
    text = (out.stdout + out.stderr).decode()
    assert out.returncode == (4 if "malformed" in text else 7), text  # a URL libpq would misread: bad input
    for piece in (password, password[4:], "ter2pw"):
        assert piece not in text, text


# FINDING F3b (medium): the same leak reaches MCP clients (and the server's log on stderr): the
# tool error text carries "failed to resolve host 'ter2pw@127.0.0.1'". Such a URL is now refused
# when the server starts (bad input, exit 4), before any client call; an unreachable one still
# comes back as a tool error.
def test_finding_an_unencoded_password_is_never_shown_over_mcp(tmp_path):
    out = mem("postgresql://u:Hun@ter2pw@127.0.0.1:1/db", tmp_path, "serve-mcp", "--agent", "A")
    assert out.returncode == 4 and b"malformed" in out.stderr, out.stderr
    assert b"ter2pw" not in out.stdout + out.stderr
    server = Mcp("postgresql://u:Hunter2pw@127.0.0.1:1/db", tmp_path, "--agent", "A")
    try:
        result = server.call("memory_get", {"key": "k"})
    finally:
        log = server.close()
    assert result["isError"]
    assert "ter2pw" not in result["content"][0]["text"], result
    assert b"ter2pw" not in log


def test_attack_failed_a_working_url_with_a_password_is_never_printed(url, tmp_path):
    parts = url.split("@", 1)
    secret_url = (
        parts[0].rstrip(":").replace("postgresql://postgres", "postgresql://postgres:Hunter2pw") + "@" + parts[1]
    )
    secret_url += "&password=Hunter2pw" if "?" in secret_url else "?password=Hunter2pw"
    seeded(secret_url, tmp_path)
    for args in (["doctor", "--format", "json"], ["stats"], ["get", "nope"]):
        out = mem(secret_url, tmp_path, *args, MEM_LOG="debug")
        assert b"Hunter2pw" not in out.stdout + out.stderr, (args, out.stderr)


# FINDING F4 (medium): a libpq keyword/value connection string (`host=... password=...`, what
# psql and psycopg accept) is echoed whole, password included, in "unknown store URL scheme".
def test_finding_a_keyword_dsn_password_is_never_shown(tmp_path):
    out = mem("host=127.0.0.1 port=1 user=u password=Hunter2pw", tmp_path, "stats")
    assert out.returncode != 0
    assert b"Hunter2pw" not in out.stdout + out.stderr, out.stderr


# FINDING F7 (low): a malformed URL is reported as exit 7 "the server refused a statement (None:
# ...)": no server was asked, and `None` is a missing SQLSTATE leaking into the message.
def test_finding_a_malformed_url_is_not_a_refused_statement(tmp_path):
    for bad in ("postgresql://u:Hunter2pw@[::1/db", "postgresql://u:Hunter2pw@127.0.0.1:1/db?bogusopt=1"):
        out = mem(bad, tmp_path, "stats")
        text = out.stderr.decode()
        assert "Hunter2pw" not in text
        assert "refused a statement" not in text and "(None:" not in text, text
        assert out.returncode == 4 and "malformed" in text, text  # a bad setting (an outside audit: it was 7)


def test_attack_failed_passwords_in_url_forms_are_masked(tmp_path):
    for bad in (
        "postgresql://u:Hunter2pw@127.0.0.1:1/db",
        "postgresql://u@127.0.0.1:1/db?password=Hunter2pw",
        "postgresql:///db?host=127.0.0.1&port=1&user=u&password=Hunter2pw",
    ):
        for args in (["doctor"],):
            out = mem(bad, tmp_path, *args)
            assert out.returncode in (1, 7), out.stderr
            assert b"Hunter2pw" not in out.stdout + out.stderr and b"%32" not in out.stdout + out.stderr


def test_attack_failed_killed_connections_are_reopened_by_running_servers(url, tmp_path):
    wire, mcp = Wire(url, tmp_path), Mcp(url, tmp_path, "--agent", "A")
    try:
        mid = wire.ask(msg("memory/init/req", "i", namespace="ns"))["memory_id"]
        wire.ask(
            msg("memory/store/req", "s", memory_id=mid, entries=[{"key": "a", "content": "x", "tier": "episodic"}])
        )
        assert not mcp.call("memory_set", {"key": "k", "value": "v"})["isError"]
        kill_connections(url)
        for reply in (
            wire.ask(msg("memory/retrieve/req", "r", memory_id=mid)),
            wire.ask(
                msg("memory/store/req", "s2", memory_id=mid, entries=[{"key": "b", "content": "y", "tier": "episodic"}])
            ),
        ):
            assert reply["type"] != "error" or reply["retryable"], reply
        kill_connections(url)
        for result in (mcp.call("memory_get", {"key": "k"}), mcp.call("memory_set", {"key": "k2", "value": "v"})):
            assert not result["isError"] or "retry" in result["content"][0]["text"], result
    finally:
        wire.close()
        mcp.close()


# FINDING F11 (medium): while the database refuses connections (a restart, a failover), a running
# serve-stdio blocks each request 15 s and then answers `runtime_error` "cannot reach the server:
# couldn't get a connection after 15.00 sec" with `retryable: false` (serve-mcp's tool error does
# not say to retry either); the README promises `retryable` "when the server may come back", and
# the CLI does mark the same outage "(retryable)". Once connections are allowed again it recovers.
def test_finding_an_outage_under_a_running_server_is_retryable(url, tmp_path):
    from tests.pg import database_of, server_url

    name = database_of(url)
    wire = Wire(url, tmp_path)
    try:
        mid = wire.ask(msg("memory/init/req", "i", namespace="ns"))["memory_id"]
        sql(server_url(), f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
        sql(server_url(), "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", name)
        try:
            down = wire.ask(msg("memory/retrieve/req", "r", memory_id=mid))
        finally:
            sql(server_url(), f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        assert wire.ask(msg("memory/retrieve/req", "r2", memory_id=mid))["type"] == "memory/retrieve/resp"
        assert down["type"] != "error" or down["retryable"] is True, down
    finally:
        wire.close()


# ---------------------------------------------------------------- 5. tampering


def seeded(url: str, home: Path) -> None:
    lines = [
        {"key": key, "content": content, "tier": "episodic"}
        for key, content in (("a", "alpha beta"), ("b", "gamma delta"))
    ]
    out = mem(url, home, "store", "-", "-n", "ns", stdin=b"\n".join(json.dumps(x).encode() for x in lines) + b"\n")
    assert out.returncode == 0, out.stderr


# FINDING F1 (high): one row whose `raw` was garbled by hand makes every read of its tier fail
# with a bare "JSONDecodeError: unexpected character ..." naming neither table nor row, while
# `mem doctor` says "store is healthy" and `mem doctor --repair` changes nothing.
def test_finding_a_garbled_raw_is_named_by_doctor_and_repaired(url, tmp_path):
    seeded(url, tmp_path)
    sql(url, "UPDATE mem_records SET raw = '{not json' WHERE id = %s", '{"key":"a"}')
    read = mem(url, tmp_path, "retrieve", "-n", "ns")
    assert b"JSONDecodeError" not in read.stderr, read.stderr
    doctor = mem(url, tmp_path, "doctor")
    assert doctor.returncode == 1 and b"mem_records" in doctor.stdout + doctor.stderr, doctor.stderr
    repair = mem(url, tmp_path, "doctor", "--repair")
    assert repair.returncode == 0 and b"restored raw from doc" in repair.stdout, repair  # doc was intact: none lost
    restored = mem(url, tmp_path, "retrieve", "-n", "ns").stdout
    assert b"gamma delta" in restored and b"alpha beta" in restored
    assert mem(url, tmp_path, "doctor").returncode == 0


# FINDING F1b (high): the README promises "mem export on a damaged store writes every record it
# can read, then exits 1 naming the damage"; on PostgreSQL one garbled row makes export write
# nothing at all.
def test_finding_export_writes_every_readable_record_around_a_garbled_row(url, tmp_path):
    seeded(url, tmp_path)
    sql(url, "UPDATE mem_records SET raw = '{not json' WHERE id = %s", '{"key":"a"}')
    out = mem(url, tmp_path, "export")
    assert out.returncode == 1
    assert b"gamma delta" in out.stdout, out.stderr


# FINDING F2 (high): a deleted mem_scopes row silently hides the scope's records: `retrieve -q`
# answers "0 of 0 matching", `stats` omits the tier and `mem export` exits 0 without them (a
# backup that silently loses data). `mem doctor` does name it and `--repair` recounts.
def test_finding_a_deleted_scope_row_hides_nothing(url, tmp_path):
    seeded(url, tmp_path)
    sql(url, "DELETE FROM mem_scopes WHERE kind = 'episodic'")
    found = mem(url, tmp_path, "retrieve", "-n", "ns", "-q", "alpha", "--format", "json")
    exported = mem(url, tmp_path, "export")
    assert b"alpha beta" in exported.stdout or exported.returncode != 0, "export dropped records with exit 0"
    assert b"alpha beta" in found.stdout, found.stderr


def test_attack_failed_negative_counters_are_found_and_recounted(url, tmp_path):
    seeded(url, tmp_path)
    sql(url, "UPDATE mem_usage SET entries = -5, bytes = -100")
    assert mem(url, tmp_path, "doctor").returncode == 1
    assert mem(url, tmp_path, "doctor", "--repair").returncode == 0
    assert sql(url, "SELECT entries FROM mem_usage WHERE namespace = 'ns'") == [(2,)]


# FINDING F9 (low): `doc` (the jsonb copy) and `raw` (the text reads return) are never compared:
# after `doc` is edited by hand to v=2 (reads and `json list --filter` still follow `raw`, v=1),
# `mem doctor` says "store is healthy" and `--repair` leaves the two copies disagreeing, so any
# SQL that reads `doc` (jsonb filters, a replica's analytics) sees another record than mem shows.
def test_finding_doctor_compares_doc_with_raw(url, tmp_path):
    jid = json.loads(mem(url, tmp_path, "json", "save", '{"v": 1}').stdout)["memoryId"]
    sql(url, "UPDATE mem_records SET doc = jsonb_set(doc, '{json,v}', '2') WHERE id = %s", jid)
    listed = mem(url, tmp_path, "json", "list", "--filter", '{"v": 2}').stdout
    assert b'"v":1' not in listed  # a record shown as v=1 must not match v=2 ...
    doctor = mem(url, tmp_path, "doctor")
    assert doctor.returncode == 1 and b"mem_records" in doctor.stdout, doctor.stderr  # ... or doctor names it


# FINDING F10 (low): with its mem_usage row deleted, a namespace takes writes past max_entries
# (the missing row reads as zero), and the row written back then counts 1 record where the table
# holds 2. `mem doctor` names the missing row ("counts None records and None bytes").
def test_finding_a_deleted_usage_row_does_not_lift_the_limit(url, tmp_path):
    assert mem(url, tmp_path, "set", "k", "v").returncode == 0
    sql(url, "DELETE FROM mem_usage")
    out = mem(url, tmp_path, "store", "one too many", MEM_MAX_ENTRIES="1")
    assert out.returncode == 5, (out.returncode, sql(url, "SELECT entries FROM mem_usage"))


# FINDING F6 (low; needs the owner role): a vector of another dimension in one row (after the
# column was loosened) makes every query of the namespace fail with exit 7 "store unavailable"
# and the raw SQL text "(22000: different vector dimensions 3 and 64)"; `doctor --repair` fixes it.
def test_finding_a_vector_of_the_wrong_dimension_does_not_break_search(url, tmp_path):
    seeded(url, tmp_path)
    sql(url, "ALTER TABLE mem_records ALTER COLUMN vec TYPE vector USING vec::vector")
    sql(url, "UPDATE mem_records SET vec = '[1,2,3]' WHERE id = %s", '{"key":"a"}')
    out = mem(url, tmp_path, "retrieve", "-n", "ns", "-q", "gamma")
    assert out.returncode == 0 and b"gamma delta" in out.stdout, out.stderr


# ---------------------------------------------------------------- 6. read-only MCP


def snapshot(url: str) -> dict[str, Any]:
    tables = [t for (t,) in sql(url, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
    return {
        t: sql(url, f"SELECT md5(coalesce(string_agg(x::text, '|' ORDER BY x::text), '')), count(*) FROM {t} x")
        for t in tables
    }  # noqa: S608


def read_only_session(url: str, home: Path) -> None:
    server = Mcp(url, home, "--read-only", "--agent", "A")
    try:
        for tool in server.rpc("tools/list", {})["result"]["tools"]:
            props = tool["inputSchema"].get("properties", {})
            server.call(tool["name"], {"query": "alpha"} if "query" in props else {})
    finally:
        server.close()


def test_attack_failed_read_only_mcp_changes_no_row_of_a_used_database(url, tmp_path):
    seeded(url, tmp_path)
    before = snapshot(url)
    read_only_session(url, tmp_path)
    assert snapshot(url) == before


# FINDING F8 (medium): `serve-mcp --read-only` on a database mem has not used yet runs the
# migrations: it creates the extension `vector` (when its role may), the six mem_* tables and the
# mem_schema row. The README says a read-only server "creates and changes no file at all"; on
# PostgreSQL it should write nothing either (and answer "nothing stored" or "store not set up").
def test_finding_read_only_mcp_creates_nothing_in_an_empty_database(url, tmp_path):
    before = snapshot(url)
    read_only_session(url, tmp_path)
    assert snapshot(url) == before
    assert sql(url, "SELECT count(*) FROM pg_extension WHERE extname = 'vector'") == [(0,)]


@pytest.mark.parametrize(
    "option",
    [
        "client_encoding=bogus",
        "options=-c%20statement_timeout%3Dabc",
        "options=-c%20bogus_param%3D1",
        "replication=bogus",
    ],
)
def test_a_parameter_the_server_refuses_at_the_start_is_a_bad_setting(tmp_path, option):
    """Outside audit 31c: a session parameter the URL sets and the server refuses when the session
    starts (FATAL: invalid value for parameter ...) exited 7, a store to retry, not 4."""
    url = fresh_database()
    bad = mem(f"{url}{'&' if '?' in url else '?'}{option}", tmp_path, "keys")
    said = bad.stderr.decode()
    assert bad.returncode == 4 and "a setting of the store URL is invalid" in said and len(said.splitlines()) == 1, said
    assert mem(url, tmp_path, "keys").returncode == 0
