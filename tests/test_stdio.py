"""`serve-stdio`: the A2E wire in process, and one real session against the `mem` binary."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import orjson
import pytest

from a2e_mem.cli.stdio import serve
from a2e_mem.protocol import Protocol, auth_token, token_matches
from a2e_mem.service import MemoryService


def msg(kind, **fields):
    return {"type": kind, "id": fields.pop("id", f"r-{kind}"), "version": "1.0", "ts": 0.0, **fields}


@pytest.fixture
def proto(service):
    return Protocol(service)


def call(proto, kind, **fields):
    return proto.handle(orjson.dumps(msg(kind, **fields)))


def init(proto, **scope):
    return call(proto, "memory/init/req", namespace="ns", scope=scope)["memory_id"]


def test_handshake_ping_and_response_envelope(proto):
    hs = call(proto, "handshake/req", id="h1", agent_id="agent-7", agent_caps=["streaming", "artifacts"], auth_token="")
    assert hs["type"] == "handshake/resp" and hs["req_id"] == "h1" and hs["ok"] is True
    assert hs["accepted_caps"][0]["capability"] == "memory" and hs["accepted_caps"][0]["enabled"] is True
    assert {"id", "version", "ts", "session_id", "max_parallel", "reason"} <= hs.keys()
    pong = call(proto, "ping", id="p1")
    assert pong["type"] == "pong" and pong["req_id"] == "p1" and pong["uptime_seconds"] >= 0


def test_memory_round_trip_on_the_wire(proto):
    call(proto, "handshake/req", agent_id="assistant")
    init_resp = call(proto, "memory/init/req", id="m0", namespace="agent-session-1", scope={}, metadata={})
    assert init_resp["type"] == "memory/init/resp" and init_resp["namespace"] == "agent-session-1"
    assert init_resp["success"] is True
    mid = init_resp["memory_id"]
    stored = call(
        proto,
        "memory/store/req",
        id="m1",
        memory_id=mid,
        entries=[
            {
                "key": {"agent": "a1", "topic": "prefs"},
                "content": {"language": "python"},
                "tier": "episodic",
                "tags": ["preferences"],
                "source": "turn-1",
                "score": 0.9,
                "ttl": 0,
            },
            {"key": "bad", "content": 1, "tier": "nowhere"},
        ],
    )
    assert stored["type"] == "memory/store/resp" and stored["req_id"] == "m1"
    assert stored["stored"] == [{"agent": "a1", "topic": "prefs"}] and stored["errors"][0].startswith("entries[1]")
    got = call(proto, "memory/retrieve/req", id="m3", memory_id=mid, query="user coding preferences", limit=5)
    assert got["type"] == "memory/retrieve/resp" and got["total"] == 1
    assert got["entries"][0]["content"] == {"language": "python"} and "relevance" in got["entries"][0]
    assert "vec" not in orjson.dumps(got).decode()
    forgot = call(proto, "memory/forget/req", id="m4", memory_id=mid, tags=["preferences"])
    assert forgot == {**forgot, "type": "memory/forget/resp", "req_id": "m4", "deleted": 1}


def test_agent_identity_comes_from_scope_then_handshake(proto, service):
    call(proto, "handshake/req", agent_id="from-handshake")
    a = init(proto)
    b = init(proto, agent="from-scope")
    call(proto, "memory/store/req", memory_id=a, entries=[{"key": "x", "content": "hs", "tier": "episodic"}])
    call(proto, "memory/store/req", memory_id=b, entries=[{"key": "x", "content": "sc", "tier": "episodic"}])
    assert service.retrieve(service.scope("ns", "from-handshake"))["entries"][0]["content"] == "hs"
    assert service.retrieve(service.scope("ns", "from-scope"))["entries"][0]["content"] == "sc"


@pytest.mark.parametrize(
    "line, code, req_id",
    [
        (b"{not json", "parse_error", ""),
        (b"\xff\xfe", "parse_error", ""),
        (b"[1, 2]", "invalid_message", ""),
        (orjson.dumps(msg("memory/teleport/req", id="u1")), "invalid_message", "u1"),
        (orjson.dumps({**msg("ping", id="v1"), "version": "2.0"}), "version_mismatch", "v1"),
        (orjson.dumps(msg("memory/retrieve/req", id="s1", memory_id="x", limit="ten")), "schema_violation", "s1"),
        (orjson.dumps(msg("memory/store/req", id="n1", memory_id="nope", entries=[])), "memory_not_found", "n1"),
    ],
)
def test_errors_are_error_messages(proto, line, code, req_id):
    resp = proto.handle(line)
    assert resp["type"] == "error" and resp["code"] == code and resp["req_id"] == req_id
    assert resp["capability_name"] == "memory" and resp["retryable"] is False and isinstance(resp["detail"], dict)


@pytest.mark.parametrize("field", ["version", "ts"])
def test_a_null_version_or_ts_is_as_a_missing_one(proto, field):
    """Both have defaults; null got version_mismatch or schema_violation while leaving the
    field out got a pong (outside audit P24)."""
    for line in (msg("ping", id="a"), {**msg("ping", id="b"), field: None}):
        line.pop(field, None) if line["id"] == "a" else None
        assert proto.handle(orjson.dumps(line))["type"] == "pong", line


def test_schema_violation_lists_fields(proto):
    mid = init(proto)
    resp = call(proto, "memory/retrieve/req", memory_id=mid, limit=-1, min_score=3)
    locs = {tuple(e["loc"]) for e in resp["detail"]["errors"]}
    assert locs == {("limit",), ("min_score",)}


def test_a_bad_tier_is_one_error_naming_every_choice(proto):
    """A bad retrieve tier named pydantic's union branches (`tier.literal['working',...]`), one
    error each (outside audit A25, low): one error, as MCP says it."""
    resp = call(proto, "memory/retrieve/req", memory_id=init(proto), tier="cosmic")
    assert [tuple(e["loc"]) for e in resp["detail"]["errors"]] == [("tier",)]
    assert "tier: Input should be '', 'working', 'episodic' or 'semantic'" in resp["message"]


def test_auth_secret_requires_a_valid_token(service):
    proto = Protocol(service, auth_secret="s3cret")
    assert call(proto, "memory/init/req", namespace="ns")["code"] == "unauthorized"
    bad = call(proto, "handshake/req", agent_id="a1", auth_token="wrong")
    assert bad["type"] == "handshake/resp" and bad["ok"] is False and bad["reason"]
    good = call(proto, "handshake/req", agent_id="a1", auth_token=auth_token("s3cret", "a1"))
    assert good["ok"] is True
    assert call(proto, "memory/init/req", namespace="ns")["type"] == "memory/init/resp"


def test_ping_and_shutdown_need_no_handshake(service):
    """Only memory requests wait for a handshake: a client can ping, and stop, the server it
    started before authenticating or after a refused token (outside audit 32d: both were
    `unauthorized`, and the server kept running)."""
    proto = Protocol(service, auth_secret="s3cret")
    assert call(proto, "ping")["type"] == "pong"
    call(proto, "handshake/req", agent_id="a1", auth_token="wrong")
    assert call(proto, "memory/init/req", namespace="ns")["code"] == "unauthorized"
    assert call(proto, "shutdown")["type"] == "shutdown/resp" and proto.shutdown_requested


def test_serve_answers_each_line_once_and_refuses_long_lines(home, monkeypatch):
    monkeypatch.setenv("MEM_MAX_LINE_BYTES", "1000")
    lines = [
        orjson.dumps(msg("ping", id="a")),
        b"",
        b"x" * 5000,
        b"{oops",
        orjson.dumps(msg("ping", id="b")),
    ]
    out = io.BytesIO()
    serve(MemoryService(home), io.BytesIO(b"\n".join(lines) + b"\n"), out)
    replies = [orjson.loads(x) for x in out.getvalue().splitlines()]
    assert [r.get("req_id") for r in replies] == ["a", "", "", "b"]
    assert [r["type"] for r in replies] == ["pong", "error", "error", "pong"]
    assert "longer than 1000 bytes" in replies[1]["message"]


def test_working_tier_ends_with_the_connection(service, home):
    proto = Protocol(service)
    mid = init(proto)
    call(proto, "memory/store/req", memory_id=mid, entries=[{"key": "w", "content": "scratch", "tier": "working"}])
    assert call(proto, "memory/retrieve/req", memory_id=mid, tier="working")["total"] == 1
    proto.close()
    other = Protocol(MemoryService(home))
    assert call(other, "memory/retrieve/req", memory_id=mid)["code"] == "memory_not_found"


def test_end_to_end_session_against_the_binary(home):
    """Spawn `mem serve-stdio` as an A2E client would and run a whole session."""
    requests = [
        msg("handshake/req", id="1", agent_id="e2e-agent", agent_caps=["streaming", "artifacts"], auth_token=""),
        msg("memory/init/req", id="2", namespace="e2e", scope={"agent": "e2e-agent"}),
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "a2e_mem.cli.main", "serve-stdio"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "MEM_HOME": str(home)},
    )

    def ask(message):
        proc.stdin.write((message if isinstance(message, bytes) else orjson.dumps(message)) + b"\n")
        proc.stdin.flush()
        return orjson.loads(proc.stdout.readline())

    assert ask(requests[0])["ok"] is True
    mid = ask(requests[1])["memory_id"]
    entries = [
        {"key": {"topic": "prefs"}, "content": {"language": "python"}, "tier": "episodic", "tags": ["preferences"]},
        {"key": {"topic": "pet"}, "content": "a greyhound called Pixel", "tier": "semantic", "tags": ["personal"]},
    ]
    assert len(ask(msg("memory/store/req", id="3", memory_id=mid, entries=entries))["stored"]) == 2
    by_key = ask(msg("memory/retrieve/req", id="4", memory_id=mid, keys=[{"topic": "pet"}]))
    assert by_key["req_id"] == "4" and by_key["entries"][0]["content"] == "a greyhound called Pixel"
    assert ask(msg("memory/retrieve/req", id="5", memory_id=mid, tags=["preferences"]))["total"] == 1
    by_query = ask(msg("memory/retrieve/req", id="6", memory_id=mid, query="greyhound", limit=1))
    assert by_query["entries"][0]["key"] == {"topic": "pet"}
    assert ask(msg("memory/forget/req", id="7", memory_id=mid, tier="semantic", all=True))["deleted"] == 1
    assert ask(msg("ping", id="8"))["type"] == "pong"
    assert ask(b"this is not json")["code"] == "parse_error"
    assert ask(msg("shutdown", id="9", timeout=5))["req_id"] == "9"
    assert proc.wait(timeout=10) == 0
    assert proc.stdout.read() == b""
    svc = MemoryService(home)
    assert svc.retrieve(svc.scope("e2e", "e2e-agent"))["total"] == 1


def test_exits_zero_at_end_of_input_with_writes_on_disk(home):
    lines = [msg("memory/init/req", id="i", namespace="eof")]
    proc = subprocess.run(
        [sys.executable, "-m", "a2e_mem.cli.main", "serve-stdio"],
        input=b"\n".join(orjson.dumps(x) for x in lines) + b"\n",
        capture_output=True,
        env={**os.environ, "MEM_HOME": str(home)},
        timeout=30,
    )
    assert proc.returncode == 0
    assert [orjson.loads(x)["type"] for x in proc.stdout.splitlines()] == ["memory/init/resp"]


@pytest.mark.files_only
def test_clean_shutdown_checkpoints_what_the_server_wrote(home):
    entries = [{"key": {"n": i}, "content": f"note number {i}", "tier": "semantic"} for i in range(20)]
    lines = [
        msg("memory/init/req", id="i", namespace="ck"),
        msg("memory/store/req", id="s", memory_id="MID", entries=entries),
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "a2e_mem.cli.main", "serve-stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        env={**os.environ, "MEM_HOME": str(home), "MEM_CHECKPOINTS": "inline", "MEM_CHECKPOINT_BYTES": "65536"},
    )  # fmt: skip
    proc.stdin.write(orjson.dumps(lines[0]) + b"\n")
    proc.stdin.flush()
    mid = orjson.loads(proc.stdout.readline())["memory_id"]
    proc.stdin.write(orjson.dumps({**lines[1], "memory_id": mid}) + b"\n")
    proc.stdin.flush()
    assert len(orjson.loads(proc.stdout.readline())["stored"]) == 20
    assert not list(home.rglob("seg-*")), "20 entries are below the threshold: no checkpoint yet"
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0
    assert list(home.rglob("seg-*/data.json")), "no checkpoint at clean shutdown"
    svc = MemoryService(home)
    assert svc.retrieve(svc.scope("ck", "default"), tier="semantic", limit=100)["total"] == 20


def test_a_reply_that_cannot_be_encoded_still_answers_its_request(home, monkeypatch):
    monkeypatch.setattr(Protocol, "_ping", lambda self, msg: {"type": "pong", "uptime_seconds": object()})
    out = io.BytesIO()
    lines = [orjson.dumps(msg("ping", id="p1")), orjson.dumps(msg("handshake/req", id="h1"))]
    serve(MemoryService(home), io.BytesIO(b"\n".join(lines) + b"\n"), out)
    replies = [orjson.loads(x) for x in out.getvalue().splitlines()]
    assert [(r["type"], r["req_id"]) for r in replies] == [("error", "p1"), ("handshake/resp", "h1")]
    assert replies[0]["code"] == "runtime_error"


@pytest.mark.parametrize("token", ["é", "\u00e9" * 64, "tok\u2603en"])
def test_a_non_ascii_auth_token_is_refused_and_unauthenticates_the_connection(service, token):
    """Audit F5: `hmac.compare_digest` raised TypeError on a non-ASCII str, the handshake got a
    runtime_error and the connection stayed authenticated as the earlier agent."""
    proto = Protocol(service, auth_secret="s3cret")
    assert call(proto, "handshake/req", agent_id="alice", auth_token=auth_token("s3cret", "alice"))["ok"] is True
    refused = call(proto, "handshake/req", id="hb", agent_id="bob", auth_token=token)
    assert refused["type"] == "handshake/resp" and refused["req_id"] == "hb" and refused["ok"] is False
    assert "auth_token" in refused["reason"]
    assert call(proto, "memory/init/req", namespace="ns")["code"] == "unauthorized"


def test_token_comparison_takes_any_string():
    assert token_matches("\ud800", "abc") is False and token_matches("é", "é") is True


def test_requests_after_shutdown_are_each_answered_and_not_processed(home, monkeypatch):
    """Audit F15a: lines piped after `shutdown` got no response at all."""
    monkeypatch.setenv("MEM_MAX_LINE_BYTES", "1000")
    lines = [
        orjson.dumps(msg("ping", id="a")),
        orjson.dumps(msg("shutdown", id="s", timeout=5)),
        orjson.dumps(msg("memory/init/req", id="late-init", namespace="after")),
        b"",
        b"{not json",
        b'{"id": "long", "pad": "' + b"x" * 5000 + b'"}',
        orjson.dumps(msg("ping", id="late-ping")),
    ]
    out = io.BytesIO()
    svc = MemoryService(home)
    serve(svc, io.BytesIO(b"\n".join(lines) + b"\n"), out)
    replies = [orjson.loads(x) for x in out.getvalue().splitlines()]
    assert [(r["type"], r["req_id"]) for r in replies] == [
        ("pong", "a"), ("shutdown/resp", "s"), ("error", "late-init"), ("error", ""), ("error", "long"),
        ("error", "late-ping"),
    ]  # fmt: skip
    for late in replies[2:]:
        assert late["code"] == "runtime_error" and late["retryable"] is True and "shutting down" in late["message"]
    assert "after" not in MemoryService(home).backend.namespaces()


def test_piped_lines_after_shutdown_get_one_reply_each_from_the_binary(home):
    lines = [msg("ping", id="p1"), msg("shutdown", id="s"), *(msg("ping", id=f"late{i}") for i in range(4))]
    proc = subprocess.run(
        [sys.executable, "-m", "a2e_mem.cli.main", "serve-stdio"],
        input=b"".join(orjson.dumps(x) + b"\n" for x in lines),
        capture_output=True,
        env={**os.environ, "MEM_HOME": str(home)},
        timeout=60,
    )
    assert proc.returncode == 0
    replies = [orjson.loads(x) for x in proc.stdout.splitlines()]
    assert [r["req_id"] for r in replies] == ["p1", "s", "late0", "late1", "late2", "late3"]
    assert [r["type"] for r in replies] == ["pong", "shutdown/resp", "error", "error", "error", "error"]


@pytest.mark.parametrize("timeout", ["soon", [], {}, None])
def test_a_shutdown_with_a_bad_timeout_is_refused_and_the_server_keeps_serving(home, timeout):
    """Audit F15c: `timeout` is advisory, but a malformed one is a schema_violation like any field."""
    lines = [msg("shutdown", id="bad", timeout=timeout), msg("ping", id="p"), msg("shutdown", id="s"), msg("ping")]
    out = io.BytesIO()
    serve(MemoryService(home), io.BytesIO(b"".join(orjson.dumps(x) + b"\n" for x in lines)), out)
    replies = [orjson.loads(x) for x in out.getvalue().splitlines()]
    assert [(r["type"], r["req_id"]) for r in replies[:3]] == [("error", "bad"), ("pong", "p"), ("shutdown/resp", "s")]
    assert replies[0]["code"] == "schema_violation" and replies[0]["detail"]["errors"][0]["loc"] == ["timeout"]
    assert replies[3]["code"] == "runtime_error"  # after the real shutdown


def test_a_leading_byte_order_mark_is_not_part_of_the_message(proto):
    """Audit F15b: a line starting with a UTF-8 BOM got req_id "" although it had an `id`."""
    bom = b"\xef\xbb\xbf"
    pong = proto.handle(bom + orjson.dumps(msg("ping", id="b1")))
    assert (pong["type"], pong["req_id"]) == ("pong", "b1")
    assert proto.handle("\ufeff" + orjson.dumps(msg("ping", id="b2")).decode())["req_id"] == "b2"
    broken = proto.handle(bom + b'{"id": "b3", "type": "ping", ')
    assert broken["code"] == "parse_error" and broken["req_id"] == "b3"


def test_a_line_holding_only_a_byte_order_mark_is_a_blank_line(home):
    """Found by an outside audit: it got a parse_error, while blank lines are skipped."""
    out = io.BytesIO()
    lines = [b"\xef\xbb\xbf", b"  ", b"\xef\xbb\xbf \r", orjson.dumps(msg("ping", id="after"))]
    serve(MemoryService(home), io.BytesIO(b"\n".join(lines) + b"\n"), out)
    replies = [orjson.loads(line) for line in out.getvalue().splitlines()]
    assert [(r["type"], r["req_id"]) for r in replies] == [("pong", "after")]


def test_lines_already_in_the_pipe_after_shutdown_are_answered_while_stdin_stays_open(home):
    """The server does not wait for end of input after `shutdown` (the SDK client may keep
    stdin open): it answers what is already in the pipe, then exits."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "a2e_mem.cli.main", "serve-stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        env={**os.environ, "MEM_HOME": str(home)},
    )  # fmt: skip
    burst = [msg("shutdown", id="s"), msg("ping", id="late1"), msg("ping", id="late2")]
    proc.stdin.write(b"".join(orjson.dumps(x) + b"\n" for x in burst))  # one write, under PIPE_BUF: arrives whole
    proc.stdin.flush()
    assert proc.wait(timeout=60) == 0
    replies = [orjson.loads(x) for x in proc.stdout.read().splitlines()]
    assert [(r["type"], r["req_id"]) for r in replies] == [
        ("shutdown/resp", "s"), ("error", "late1"), ("error", "late2"),
    ]  # fmt: skip
    proc.stdin.close()


@pytest.mark.parametrize("chunk", [3, 1 << 16])
def test_the_line_reader_keeps_the_size_limit_and_the_last_line(monkeypatch, chunk):
    from a2e_mem.cli import stdio

    monkeypatch.setattr(stdio, "CHUNK", chunk)
    data = b"a" * 10 + b"\n" + b"b" * 11 + b"\n" + b"c\r\n" + b"d" * 25 + b"\n" + b"\n" + b"tail"
    got = list(stdio.LineReader(io.BytesIO(data), 10))
    assert got[0] == b"a" * 10 and got[1].head == b"b" * 11 and got[2] == b"c" and got[3].head == b"d" * 11
    assert got[4:] == [b"", b"tail"]
