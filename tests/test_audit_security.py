"""Security findings of the outside audit (issue 10, items 6, 7, 8 and 10), through the real
front doors: `serve-stdio` as a subprocess with MEM_AUTH_SECRET, `serve-mcp` with the official
MCP client, and the `mem` CLI.

- 6: with a secret, a connection uses only sessions of the agent its token vouches for.
- 7: with a secret, an MCP server's agent is fixed at start; `--auth-secret ''` is refused.
- 8: a forget with neither keys, tags nor `all` deletes nothing and says so.
- 10: limits without holes (key size, codebolt records, sessions per connection, export mode,
  read-only MCP, names of codebolt tools).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from store.protocol import auth_token
from store.service import MemoryService

ROOT = Path(__file__).resolve().parent.parent
SECRET = "audit-s3cret"


def mem(*args: str, env: dict[str, str] | None = None, input: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        input=input,
        capture_output=True,
        timeout=120,
    )


class Stdio:
    """One `mem serve-stdio` process: send a request line, read its response line."""

    def __init__(self, agent: str, secret: str | None = SECRET, token: str | None = None) -> None:
        env = {**os.environ, **({"MEM_AUTH_SECRET": secret} if secret else {})}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "serve-stdio"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.n = 0
        if token is None:
            token = auth_token(secret, agent) if secret else ""
        hs = self.call("handshake/req", agent_id=agent, auth_token=token)
        assert hs["type"] == "handshake/resp", hs

    def call(self, kind: str, **fields: Any) -> dict[str, Any]:
        self.n += 1
        msg = {"type": kind, "id": f"r{self.n}", "version": "1.0", "ts": 0.0, **fields}
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(orjson.dumps(msg) + b"\n")
        self.proc.stdin.flush()
        reply = orjson.loads(self.proc.stdout.readline())
        assert reply["req_id"] == f"r{self.n}", reply
        return reply

    def init(self, namespace: str = "ns", **scope: Any) -> str:
        reply = self.call("memory/init/req", namespace=namespace, scope=scope)
        assert reply["type"] == "memory/init/resp", reply
        return reply["memory_id"]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)

    def __enter__(self) -> Stdio:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def entry(key: str, content: Any, tier: str = "episodic", **extra: Any) -> dict[str, Any]:
    return {"key": {"k": key}, "content": content, "tier": tier, **extra}


def b_episodic(home: Path) -> list[Any]:
    svc = MemoryService(home)
    try:
        return sorted(e["content"] for e in svc.retrieve(svc.scope("ns", "agent-b"), tier="episodic")["entries"])
    finally:
        svc.close()


# -- 6: a memory_id is no key to another agent's tiers ------------------------------------------


def test_a_session_of_agent_b_is_refused_to_a_connection_authenticated_as_a(home):
    b_session = mem("init", "-n", "ns", "-a", "agent-b").stdout.decode().strip()
    svc = MemoryService(home)
    svc.store(svc.session(b_session), [entry("diary", "B private diary")])
    svc.close()
    listed = mem("session", "list", "-f", "ndjson").stdout.decode()
    assert b_session in listed  # anyone with shell access sees the id: it must not be enough
    with Stdio("agent-a") as a:
        for kind, fields in (
            ("memory/retrieve/req", {}),
            ("memory/retrieve/req", {"tier": "episodic", "query": "diary"}),
            ("memory/store/req", {"entries": [entry("diary", "overwritten by A")]}),
            ("memory/forget/req", {"keys": [{"k": "diary"}], "tier": "episodic"}),
            ("memory/forget/req", {"tier": "episodic", "all": True}),
        ):
            reply = a.call(kind, memory_id=b_session, **fields)
            assert reply["type"] == "error" and reply["code"] == "unauthorized", reply
            assert "B private diary" not in orjson.dumps(reply).decode()
        # its own sessions still work
        own = a.init()
        assert a.call("memory/store/req", memory_id=own, entries=[entry("mine", "A note")])["stored"]
    assert b_episodic(home) == ["B private diary"]
    with Stdio("agent-b") as b:  # B itself may use its session
        assert b.call("memory/retrieve/req", memory_id=b_session)["total"] == 1


def test_semantic_writers_cannot_be_bypassed_with_a_writers_session(home):
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.json").write_bytes(orjson.dumps({"namespaces": {"team": {"semantic_writers": ["lead"]}}}))
    lead_session = mem("init", "-n", "team", "-a", "lead").stdout.decode().strip()
    with Stdio("intruder") as intruder:
        fact = entry("rule", "forged team rule", tier="semantic")
        reply = intruder.call("memory/store/req", memory_id=lead_session, entries=[fact])
        assert reply["type"] == "error" and reply["code"] == "unauthorized", reply
        own = intruder.init("team")
        reply = intruder.call("memory/store/req", memory_id=own, entries=[fact])
        assert reply["type"] == "error" and reply["code"] == "unauthorized", reply
    svc = MemoryService(home)
    assert svc.retrieve(svc.scope("team", "lead"), tier="semantic")["total"] == 0
    svc.close()


# -- 8: a forget deletes nothing unless asked ----------------------------------------------------


def stored_tiers(home: Path) -> dict[str, int]:
    svc = MemoryService(home)
    try:
        scope = svc.scope("ns", "agent-a")
        return {tier: svc.retrieve(scope, tier=tier)["total"] for tier in ("episodic", "semantic")}
    finally:
        svc.close()


def test_a_bare_forget_on_the_wire_deletes_nothing_and_names_the_all_extension(home):
    with Stdio("agent-a") as a:
        mid = a.init()
        entries = [entry("e", "episodic note"), entry("s", "shared fact", tier="semantic")]
        assert len(a.call("memory/store/req", memory_id=mid, entries=entries)["stored"]) == 2
        for fields in ({}, {"tier": "semantic"}, {"tier": "episodic", "keys": [], "tags": []}):
            reply = a.call("memory/forget/req", memory_id=mid, **fields)  # what the SDK's bare forget() sends
            assert reply["type"] == "error" and reply["code"] == "schema_violation", reply
            assert "all" in reply["message"] and "nothing was deleted" in reply["message"]
        assert stored_tiers(home) == {"episodic": 1, "semantic": 1}
        mixed = a.call("memory/forget/req", memory_id=mid, keys=[{"k": "e"}], all=True)
        assert mixed["type"] == "error" and mixed["code"] == "schema_violation", mixed
        assert a.call("memory/forget/req", memory_id=mid, all="yes")["code"] == "schema_violation"
        assert stored_tiers(home) == {"episodic": 1, "semantic": 1}
        # the explicit extension empties the addressed tier, and only that one
        assert a.call("memory/forget/req", memory_id=mid, tier="semantic", all=True)["deleted"] == 1
        assert stored_tiers(home) == {"episodic": 1, "semantic": 0}


def test_mem_forget_without_key_tag_or_all_exits_4(home):
    base = ["-n", "ns", "-a", "agent-a"]
    assert mem("store", *base, "--key", "k=e", "episodic note").returncode == 0
    assert mem("store", *base, "--key", "k=s", "--tier", "semantic", "shared fact").returncode == 0
    for tier in ("episodic", "semantic"):
        r = mem("forget", *base, "--tier", tier)
        assert r.returncode == 4, r
        err = r.stderr.decode()
        assert err.count("\n") == 1 and err.startswith("mem: error:") and "--all" in err, err
    assert stored_tiers(home) == {"episodic": 1, "semantic": 1}
    r = mem("forget", *base, "--tier", "semantic", "--all", "-f", "ndjson")
    assert r.returncode == 0 and orjson.loads(r.stdout) == {"deleted": 1}, r
    assert stored_tiers(home) == {"episodic": 1, "semantic": 0}


# -- MCP ------------------------------------------------------------------------------------------


def mcp_run(home: Path, args: list[str], calls: list[tuple[str, dict[str, Any]]], env: dict[str, str] | None = None):
    """Start `mem serve-mcp ARGS` with the official MCP client, make `calls` in order, and return
    each result as (is_error, text, structured content)."""
    import asyncio

    pytest.importorskip("mcp.server.mcpserver")
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "cli.main", "serve-mcp", *args],
        env={**os.environ, **(env or {})},
        cwd=str(ROOT),
    )

    async def run() -> list[tuple[bool, str, Any]]:
        out = []
        async with Client(params) as client:
            for name, arguments in calls:
                r = await client.call_tool(name, arguments)
                out.append((bool(r.is_error), r.content[0].text, r.structured_content))
        return out

    return asyncio.run(run())


def test_mcp_forget_needs_keys_tags_or_all(home):
    svc = MemoryService(home)
    svc.store(svc.scope("ns", "agent-a"), [entry("e", "episodic note"), entry("s", "fact", tier="semantic")])
    svc.close()
    results = mcp_run(
        home,
        ["-n", "ns", "-a", "agent-a"],
        [
            ("memory_forget", {}),
            ("memory_forget", {"tier": "semantic"}),
            ("memory_forget", {"tier": "semantic", "tags": ["x"], "all": True}),
            ("memory_forget", {"tier": "semantic", "all": True}),
        ],
    )
    for is_error, text, _ in results[:3]:
        assert is_error and "schema_violation" in text and "all" in text, text
    assert results[3] == (False, "deleted 1", {"deleted": 1})
    assert stored_tiers(home) == {"episodic": 1, "semantic": 0}
