"""Audit (issue 10) items 12-15 on the A2E wire, against `mem serve-stdio` as a subprocess.

Each test speaks NDJSON to a real `mem serve-stdio` the way the A2E SDK client does: one JSON
object a line, responses matched by `req_id`.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from a2e_mem.protocol import auth_token

REPO = Path(__file__).resolve().parents[1]


def msg(kind: str, rid: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "id": rid, "version": "1.0", "ts": 0.0, **fields}


class Wire:
    """One `mem serve-stdio` process: `ask` writes a line and reads the one reply."""

    def __init__(self, home: Path, *args: str, **env: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "a2e_mem.cli.main", "serve-stdio", *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            cwd=str(REPO), env={**os.environ, "MEM_HOME": str(home), **env},
        )  # fmt: skip

    def ask(self, message: dict[str, Any] | bytes) -> dict[str, Any]:
        line = message if isinstance(message, bytes) else json.dumps(message).encode()  # any depth
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()
        return orjson.loads(self.proc.stdout.readline())

    def init(self, namespace: str = "audit") -> str:
        return self.ask(msg("memory/init/req", "init", namespace=namespace))["memory_id"]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(timeout=30) == 0


@pytest.fixture
def wire(home):
    w = Wire(home)
    yield w
    w.close()


# -- 13: a refused handshake is a handshake/resp ------------------------------------------------


def test_bad_token_gets_a_handshake_resp_with_ok_false_and_a_reason(home):
    w = Wire(home, "--auth-secret", "s3cret")
    hs = msg("handshake/req", "h1", agent_id="a1", agent_caps=["streaming", "artifacts"], auth_token="wrong")
    bad = w.ask(hs)
    assert bad["type"] == "handshake/resp" and bad["req_id"] == "h1"
    assert bad["ok"] is False and "auth_token" in bad["reason"]
    assert bad["accepted_caps"] == [] and {"session_id", "max_parallel", "id", "version", "ts"} <= bad.keys()
    refused = w.ask(msg("memory/init/req", "i1", namespace="ns"))
    assert refused["type"] == "error" and refused["code"] == "unauthorized" and refused["req_id"] == "i1"
    good = w.ask({**hs, "id": "h2", "auth_token": auth_token("s3cret", "a1")})
    assert good["type"] == "handshake/resp" and good["ok"] is True and good["reason"] == ""
    assert w.ask(msg("memory/init/req", "i2", namespace="ns"))["type"] == "memory/init/resp"
    again = w.ask({**hs, "id": "h3"})  # a later bad handshake takes the authentication away
    assert again["ok"] is False
    assert w.ask(msg("memory/init/req", "i3", namespace="ns"))["code"] == "unauthorized"
    w.close()


# -- 15: errors for lines that cannot be parsed whole still carry the request's id -------------


def test_a_line_over_the_limit_gets_an_error_with_its_id(wire):
    mid = wire.init()
    entries = [{"key": {"k": "big"}, "content": "x" * (5 << 20), "tier": "episodic"}]
    sdk_order = {"type": "memory/store/req", "id": "big-1", "version": "1.0", "ts": 1.5, "memory_id": mid}
    reply = wire.ask(orjson.dumps({**sdk_order, "entries": entries}))
    assert reply["type"] == "error" and reply["code"] == "invalid_message" and reply["req_id"] == "big-1"
    assert "longer than" in reply["message"]
    id_after_the_bulk = wire.ask(orjson.dumps({"type": "ping", "entries": entries, "id": "late"}))
    assert id_after_the_bulk["req_id"] == "", "an id beyond the scanned prefix cannot be known"
    assert wire.ask(msg("ping", "after"))["req_id"] == "after"  # the stream is still in step


@pytest.mark.parametrize(
    "line",
    [
        rb'{"type":"memory/store/req","id":"sur-1","version":"1.0","ts":0,"memory_id":"M",'
        rb'"entries":[{"key":{"k":"s"},"content":"half a pair \ud800","tier":"episodic"}]}',
        b'{"type": "ping", "id": "sur-1", "note": "\xff\xfe not UTF-8"}',
        b'{"type":"ping","id":"sur-1","version":"1.0","ts":0, oops}',
    ],
)
def test_an_unparsable_line_that_starts_with_an_id_gets_it_back(wire, line):
    reply = wire.ask(line)
    assert reply["type"] == "error" and reply["code"] == "parse_error" and reply["req_id"] == "sur-1"


def test_an_id_that_no_reply_could_carry_is_not_echoed(wire):
    reply = wire.ask(b'{"type": "ping", "id": "\\udc80-x", "bad": "\xff"}')
    assert reply["type"] == "error" and reply["req_id"] == ""
    assert wire.ask(msg("ping", "still-up"))["req_id"] == "still-up"


# -- 12: min_score filters relevance only, never the stored importance score --------------------


def test_min_score_without_a_query_does_not_filter_on_the_stored_score(wire):
    mid = wire.init()
    entries = [
        {"key": {"k": "faint"}, "content": "rarely useful", "tier": "episodic", "score": 0.05, "tags": ["t"]},
        {"key": {"k": "loud"}, "content": "often useful", "tier": "semantic", "score": 0.9, "tags": ["t"]},
    ]
    assert len(wire.ask(msg("memory/store/req", "s", memory_id=mid, entries=entries))["stored"]) == 2
    by_key = wire.ask(msg("memory/retrieve/req", "r1", memory_id=mid, keys=[{"k": "faint"}], min_score=0.5))
    assert by_key["total"] == 1 and by_key["entries"][0]["key"] == {"k": "faint"}
    assert by_key["entries"][0]["relevance"] == 1.0 and by_key["entries"][0]["score"] == 0.05
    by_tag = wire.ask(msg("memory/retrieve/req", "r2", memory_id=mid, tags=["t"], min_score=1.0))
    assert [e["key"] for e in by_tag["entries"]] == [{"k": "loud"}, {"k": "faint"}]  # importance still ranks
    assert by_tag["total"] == 2


# -- 14: per-entry problems are per entry; limit is clamped; a repeated key is noted ------------


def nested(depth: int) -> Any:
    value: Any = "core"
    for _ in range(depth):
        value = [value]
    return value


def store(wire: Wire, mid: str, rid: str, entries: list[Any]) -> dict[str, Any]:
    return wire.ask(msg("memory/store/req", rid, memory_id=mid, entries=entries))


def test_bad_entries_are_reported_in_errors_and_the_others_stored(wire):
    mid = wire.init()
    good = {"key": {"k": "good"}, "content": "kept", "tier": "episodic"}
    entries = [
        "not an object",
        good,
        {"key": {"k": "deep"}, "content": nested(251), "tier": "episodic"},
        {"key": {"k": "deepest"}, "content": nested(254), "tier": "episodic"},
        {"key": {"k": "ok-deep"}, "content": nested(249), "tier": "episodic"},
        42,
    ]
    reply = store(wire, mid, "s1", entries)
    assert reply["type"] == "memory/store/resp" and reply["req_id"] == "s1"
    assert reply["stored"] == [{"k": "good"}, {"k": "ok-deep"}]
    assert [e.split(":")[0] for e in reply["errors"]] == ["entries[0]", "entries[2]", "entries[3]", "entries[5]"]
    assert "nested deeper than 250 levels" in reply["errors"][1]
    got = wire.ask(msg("memory/retrieve/req", "r", memory_id=mid, keys=[{"k": "ok-deep"}]))
    assert got["entries"][0]["content"] == nested(249)


def test_a_refused_semantic_entry_does_not_fail_the_others(home):
    config = {"namespaces": {"audit": {"semantic_writers": ["lead"]}}}
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.json").write_bytes(orjson.dumps(config))
    wire = Wire(home)
    mid = wire.init()
    entries = [
        {"key": {"k": "mine"}, "content": "episodic is mine", "tier": "episodic"},
        {"key": {"k": "shared"}, "content": "semantic is the lead's", "tier": "semantic"},
    ]
    reply = store(wire, mid, "s1", entries)
    assert reply["stored"] == [{"k": "mine"}]
    assert len(reply["errors"]) == 1 and reply["errors"][0].startswith("entries[1]: unauthorized:")
    only_semantic = store(wire, mid, "s2", entries[1:])
    assert only_semantic["type"] == "error" and only_semantic["code"] == "unauthorized"
    wire.close()


def test_memory_full_stores_what_fits_and_reports_the_rest(home):
    wire = Wire(home, MEM_MAX_ENTRIES="3")
    mid = wire.init()
    assert len(store(wire, mid, "s1", [{"key": {"k": 0}, "content": "first", "tier": "episodic"}])["stored"]) == 1
    entries = [{"key": {"k": i}, "content": f"entry {i}", "tier": "episodic"} for i in range(4)]
    reply = store(wire, mid, "s2", entries)  # {"k": 0} is an update: it needs no room
    assert reply["type"] == "memory/store/resp" and reply["stored"] == [{"k": 0}, {"k": 1}, {"k": 2}]
    assert len(reply["errors"]) == 1 and reply["errors"][0].startswith("entries[3]: memory_full:")
    none_fit = store(wire, mid, "s3", [{"key": {"k": 9}, "content": "no room", "tier": "semantic"}])
    assert none_fit["type"] == "error" and none_fit["code"] == "memory_full" and none_fit["req_id"] == "s3"
    assert none_fit["detail"]["errors"][0].startswith("entries[0]: memory_full:")
    wire.close()


def test_a_limit_over_1000_is_clamped_and_the_reply_says_so(wire):
    mid = wire.init()
    store(wire, mid, "s", [{"key": {"k": "x"}, "content": "one", "tier": "episodic"}])
    reply = wire.ask(msg("memory/retrieve/req", "r1", memory_id=mid, limit=5000))
    assert reply["type"] == "memory/retrieve/resp" and reply["total"] == 1
    assert reply["warnings"] == ["limit 5000 is over the maximum of 1000: clamped to 1000"]
    assert "warnings" not in wire.ask(msg("memory/retrieve/req", "r2", memory_id=mid, limit=1000))
    assert wire.ask(msg("memory/retrieve/req", "r3", memory_id=mid, limit=-1))["code"] == "schema_violation"


def test_a_key_given_twice_is_stored_once_last_wins_and_the_reply_says_so(wire):
    mid = wire.init()
    entries = [
        {"key": {"k": "dup"}, "content": "first", "tier": "episodic"},
        {"key": {"k": "dup"}, "content": "in another tier", "tier": "semantic"},
        {"key": {"k": "dup"}, "content": "last", "tier": "episodic"},
    ]
    reply = store(wire, mid, "s", entries)
    assert reply["stored"] == [{"k": "dup"}, {"k": "dup"}] and reply["errors"] == []  # one per tier
    assert reply["warnings"] == ["entries[0]: replaced by entries[2], which has the same key and tier"]
    got = wire.ask(msg("memory/retrieve/req", "r", memory_id=mid, tier="episodic"))
    assert [e["content"] for e in got["entries"]] == ["last"]


def test_the_shell_stores_what_fits_and_exits_5_for_the_rest(home):
    lines = [{"key": {"k": i}, "content": f"entry {i}", "tier": "episodic"} for i in range(3)]
    proc = subprocess.run(
        [sys.executable, "-m", "a2e_mem.cli.main", "store", "-", "--format", "json"],
        cwd=str(REPO), capture_output=True,
        input=b"\n".join(orjson.dumps(x) for x in lines) + b"\n", timeout=60,
        env={**os.environ, "MEM_HOME": str(home), "MEM_MAX_ENTRIES": "2"},
    )  # fmt: skip
    assert proc.returncode == 5, proc.stderr
    assert "entries[2]: memory_full:" in proc.stderr.decode()
    assert [row["key"] for row in orjson.loads(proc.stdout)] == [{"k": 0}, {"k": 1}]


def test_mcp_memory_store_stores_what_fits_and_a_refusal_names_each_entry(home):
    pytest.importorskip("mcp.server.mcpserver")
    from mcp import Client, StdioServerParameters

    async def session() -> None:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "a2e_mem.cli.main", "serve-mcp"], cwd=str(REPO),
            env={**os.environ, "MEM_HOME": str(home), "MEM_MAX_ENTRIES": "1"},
        )  # fmt: skip
        async with Client(params) as client:
            entries = [{"key": {"k": i}, "content": f"entry {i}", "tier": "episodic"} for i in range(2)]
            some = await client.call_tool("memory_store", {"entries": [*entries, 7]})
            assert not some.is_error and some.structured_content["stored"] == [{"k": 0}]
            assert [e.split(":")[:2] for e in some.structured_content["errors"]] == [
                ["entries[1]", " memory_full"],
                ["entries[2]", " entry"],
            ]
            assert json.loads(some.content[0].text) == some.structured_content
            none = await client.call_tool("memory_store", {"entries": [{**entries[1], "key": {"k": 9}}]})
            assert none.is_error and "memory_full: namespace 'default' is full" in none.content[0].text
            assert "\nentries[0]: memory_full: namespace 'default' has no room for it" in none.content[0].text

    asyncio.run(session())
