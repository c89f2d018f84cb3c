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

from a2e_mem.protocol import auth_token
from a2e_mem.service import MemoryService

ROOT = Path(__file__).resolve().parent.parent
SECRET = "audit-s3cret"
CAP = 256  # sessions a connection (or an MCP server) holds at most: a2e_mem.ops.a2e.SESSIONS_PER_CONNECTION


def mem(*args: str, env: dict[str, str] | None = None, input: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "a2e_mem.cli.main", *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        input=input,
        capture_output=True,
        timeout=120,
    )


class Stdio:
    """One `mem serve-stdio` process: send a request line, read its response line."""

    def __init__(
        self, agent: str, secret: str | None = SECRET, token: str | None = None, env: dict[str, str] | None = None
    ) -> None:
        """`token`: the auth_token to present (default: the right one, and the handshake must pass)."""
        env = {**os.environ, **({"MEM_AUTH_SECRET": secret} if secret else {}), **(env or {})}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "a2e_mem.cli.main", "serve-stdio"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.n = 0
        good = auth_token(secret, agent) if secret else ""
        self.handshake = self.call("handshake/req", agent_id=agent, auth_token=good if token is None else token)
        if token is None:
            assert self.handshake["type"] == "handshake/resp" and self.handshake["ok"], self.handshake

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
        args=["-m", "a2e_mem.cli.main", "serve-mcp", *args],
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
    assert results[3] == (False, '{"deleted": 1}', {"deleted": 1})
    assert stored_tiers(home) == {"episodic": 1, "semantic": 0}


# -- 7: the MCP trust model, and no silent switch-off of auth -----------------------------------


def two_agents(home: Path) -> None:
    """A's and B's episodic notes, a shared fact, and persistent memories reading them."""
    svc = MemoryService(home)
    svc.store(svc.scope("ns", "agent-a"), [entry("a", "A note zebra"), entry("f", "fact zebra", tier="semantic")])
    svc.store(svc.scope("ns", "agent-b"), [entry("b", "B secret zebra")])
    source = {"source_type": "vectordb", "source_id": "ns", "limit": 50}
    contribution = {"format": "text"}
    svc.persistent_memory_create("everyone", source, contribution, id="pm-all", namespace="ns")
    named_b = {**source, "filters": {"agent": "agent-b"}}
    svc.persistent_memory_create("b only", named_b, contribution, id="pm-b", namespace="ns")
    svc.close()


FOREIGN_AGENT_CALLS = [
    ("memory_retrieve", {"agent": "agent-b"}),
    ("memory_retrieve", {"agent": "agent-b", "tier": "episodic", "query": "zebra"}),
    ("memory_store", {"agent": "agent-b", "entries": [entry("b", "overwritten")]}),
    ("memory_forget", {"agent": "agent-b", "all": True}),
    ("memory_forget", {"agent": "agent-b", "keys": [{"k": "b"}]}),
]


@pytest.mark.parametrize("read_only", [False, True], ids=["read-write", "read-only"])
def test_mcp_with_a_secret_acts_as_its_agent_only(home, read_only):
    two_agents(home)
    calls = [c for c in FOREIGN_AGENT_CALLS if not read_only or c[0] == "memory_retrieve"]
    calls += [
        ("memory_retrieve", {"agent": "agent-a", "query": "zebra"}),
        ("memory_retrieve", {"query": "zebra"}),
        ("persistent_memory_retrieve", {"memory_id": "pm-all", "query": "zebra"}),
        ("persistent_memory_retrieve", {"memory_id": "pm-b", "query": "zebra"}),
    ]
    args = ["-n", "ns", "-a", "agent-a", *(["--read-only"] if read_only else [])]
    results = mcp_run(home, args, calls, env={"MEM_AUTH_SECRET": SECRET})
    *refused, own_named, own, pm_all, pm_b = results
    for (is_error, text, _), call in zip(refused, calls, strict=False):
        assert is_error and "unauthorized" in text and "B secret" not in text, (call, text)
    for is_error, text, found in (own_named, own):
        assert not is_error, text
        assert sorted(e["content"] for e in found["entries"]) == ["A note zebra", "fact zebra"]
    assert not pm_all[0] and "B secret" not in pm_all[1] and "A note zebra" in pm_all[1], pm_all
    assert sorted(i["content"] for i in pm_all[2]["items"]) == ["A note zebra", "fact zebra"]
    assert pm_b[0] and "unauthorized" in pm_b[1] and "B secret" not in pm_b[1], pm_b
    assert b_episodic(home) == ["B secret zebra"]


def test_mcp_with_a_secret_serves_its_own_namespace_only(home):
    """Found by an outside audit: every MCP tool takes a `namespace`, so with a secret agent A
    could still read and change agent B's key-value pairs, documents, episodic logs, persistent
    memories and graph in B's namespace, although the README advises separate namespaces."""
    svc = MemoryService(home)
    svc.memory_set("bobkey", "bob secret kv", namespace="bobns")
    svc.memory_set("own", "alice kv", namespace="alicens")
    svc.persistent_memory_create("b", {"source_type": "kv", "source_id": "bobns"}, {"format": "text"},
                                 id="pm_bob", namespace="bobns")  # fmt: skip
    bob_log = svc.episodic_memory_create("bob's log", namespace="bobns")["memoryId"]
    svc.close()
    reads_bob = {"source_type": "kv", "source_id": "bobns"}
    foreign = [
        ("memory_get", {"key": "bobkey", "namespace": "bobns"}),
        ("memory_set", {"key": "bobkey", "value": "overwritten", "namespace": "bobns"}),
        ("memory_delete", {"key": "bobkey", "namespace": "bobns"}),
        ("persistent_memory_update", {"memory_id": "pm_bob", "label": "mine", "namespace": "bobns"}),
        ("persistent_memory_retrieve", {"memory_id": "pm_bob", "query": "bob", "namespace": "bobns"}),
        ("search_nodes", {"query": "x", "namespace": "bobns"}),
        ("memory_retrieve", {"query": "x", "namespace": "bobns"}),
        ("persistent_memory_create", {"label": "peek", "retrieval": reads_bob, "contribution": {"format": "text"}}),
    ]
    bob_events = {"source_type": "eventlog", "source_id": bob_log}  # a bare ID found in another namespace
    probe = ("persistent_memory_create", {"label": "p", "retrieval": bob_events, "contribution": {"format": "text"}})
    own = [("memory_get", {"key": "own"}), ("memory_get", {"key": "own", "namespace": "alicens"})]
    args = ["-n", "alicens", "-a", "alice"]
    results = mcp_run(home, args, foreign + own + [probe], env={"MEM_AUTH_SECRET": SECRET})
    for (is_error, text, _), call in zip(results, foreign, strict=False):
        assert is_error and "unauthorized" in text and "bob secret" not in text, (call, text)
    for is_error, text, found in results[len(foreign) : -1]:
        assert not is_error and found["value"] == "alice kv", text
    is_error, text, _ = results[-1]  # refused without saying where the ID lives (an audit of the fix)
    assert is_error and "bobns" not in text and "no episodic memory" in text, text
    check = MemoryService(home)
    assert check.memory_get("bobkey", namespace="bobns")["value"] == "bob secret kv"
    assert check.persistent_memory_get("pm_bob", namespace="bobns")["label"] == "b"
    assert [p["id"] for p in check.persistent_memory_list(namespace="alicens")] == []
    check.close()
    without = mcp_run(home, args, foreign[:1])  # without a secret, namespaces are open (by convention only)
    assert not without[0][0] and "bob secret kv" in without[0][1]


def test_mcp_without_a_secret_accepts_any_agent_name(home):
    two_agents(home)
    results = mcp_run(
        home,
        ["-n", "ns", "-a", "agent-a", "--read-only"],
        [("memory_retrieve", {"agent": "agent-b", "tier": "episodic"})],
    )
    assert results[0][0] is False and [e["content"] for e in results[0][2]["entries"]] == ["B secret zebra"]


def test_an_empty_auth_secret_option_is_a_usage_error(home):
    for env in ({"MEM_AUTH_SECRET": SECRET}, {}):
        r = mem("serve-stdio", "--auth-secret", "", env=env, input=b"")
        assert r.returncode == 2, r
        err = r.stderr.decode()
        assert err.count("\n") == 1 and "--auth-secret" in err and r.stdout == b"", err
    # and the secret from the environment is enforced when the option is left out
    with Stdio("agent-a", token="not-the-token") as s:
        assert s.handshake["type"] == "error" or s.handshake["ok"] is False, s.handshake
        reply = s.call("memory/init/req", namespace="ns", scope={})
        assert reply["type"] == "error" and reply["code"] == "unauthorized"


# -- 10: limits without holes ---------------------------------------------------------------------


def snapshot(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every path under `root` with its size, mtime (ns) and mode: what a writer would change."""
    if not root.exists():
        return {}
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns, p.stat().st_mode)
        for p in [root, *root.rglob("*")]
    }


READ_ONLY_CALLS = [
    ("memory_get", {"key": "theme"}),
    ("memory_get", {"key": "theme", "namespace": "never-written"}),
    ("memory_json_list", {}),
    ("memory_todo_list", {"namespace": "never-written"}),
    ("memory_markdown_list", {}),
    ("episodic_memory_list", {}),
    ("episodic_memory_get", {"memoryId": "ep_missing"}),
    ("episodic_memory_query_events", {"swarmId": "swarm"}),
    ("episodic_memory_get_event_types", {"swarmId": "swarm"}),
    ("persistent_memory_get", {"memory_id": "pm-all"}),
    ("persistent_memory_list", {}),
    ("persistent_memory_retrieve", {"memory_id": "pm-all", "query": "zebra"}),
    ("memory_retrieve", {"query": "zebra"}),
    ("memory_retrieve", {"query": "anything", "namespace": "never-written", "tier": "working"}),
    ("read_graph", {}),
    ("search_nodes", {"query": "zebra"}),
    ("open_nodes", {"names": ["Alice"]}),
]


@pytest.mark.parametrize("populated", [True, False], ids=["populated", "empty-store"])
def test_a_read_only_mcp_server_creates_or_changes_no_file(home, populated, backend):
    if populated:
        two_agents(home)
        svc = MemoryService(home)
        svc.memory_set("theme", "dark", namespace="ns")
        svc.kg_create_entities([{"name": "Alice", "entityType": "person", "observations": ["zebra"]}], namespace="ns")
        svc.close()
    before = snapshot(home)
    # checkpoints as eager as they get: a server that folded journals at exit would show here
    env = {"MEM_CHECKPOINTS": "inline", "MEM_CHECKPOINT_BYTES": "1"}
    results = mcp_run(home, ["-n", "ns", "-a", "agent-a", "--read-only"], READ_ONLY_CALLS, env=env)
    if backend == "postgres" and not populated:
        # a database no mem has used holds no tables: a read-only server makes none and says so
        # (README; tests/test_audit_pg.py checks the database is left untouched)
        assert all(is_error and "read-only server creates nothing" in str(text) for is_error, text, _ in results)
    else:
        assert sum(not is_error for is_error, _, _ in results) >= (10 if populated else 5), results
    assert snapshot(home) == before


def test_export_to_a_file_is_readable_by_its_owner_only(home, tmp_path):
    svc = MemoryService(home)
    svc.memory_set("secret", "the dump holds this", namespace="ns")
    svc.close()
    fresh, existing = tmp_path / "fresh.ndjson", tmp_path / "existing.ndjson"
    existing.write_bytes(b"old")
    existing.chmod(0o644)
    for path in (fresh, existing):
        r = mem("export", "-o", str(path), env={"MEM_CHECKPOINTS": "off"})
        assert r.returncode == 0, r
        assert path.stat().st_mode & 0o777 == 0o600, oct(path.stat().st_mode)
        assert b"the dump holds this" in path.read_bytes()
    assert mem("export", "-o", os.devnull).returncode == 0  # a device is written, not chmod'ed


def test_the_entry_size_limit_counts_the_key(home):
    big_key = {"k": "x" * 300_000}  # content tiny, key over the 256 KiB limit
    with Stdio("agent-a") as a:
        mid = a.init()
        reply = a.call("memory/store/req", memory_id=mid, entries=[{**entry("", "tiny"), "key": big_key}])
        assert reply["type"] == "memory/store/resp" and reply["stored"] == [], reply
        assert "key and content" in reply["errors"][0] and "262144-byte limit" in reply["errors"][0]
        assert a.call("memory/retrieve/req", memory_id=mid)["total"] == 0
    line = orjson.dumps({**entry("", "tiny"), "key": big_key}) + b"\n"
    r = mem("store", "-", input=line)
    assert r.returncode == 4 and b"262144-byte limit" in r.stderr, r


def test_codebolt_records_count_toward_the_namespace_limits(home):
    env = {"MEM_MAX_ENTRIES": "3"}
    assert mem("set", "-n", "ns", "theme", "dark", env=env).returncode == 0
    assert mem("json", "save", "-n", "ns", '{"a": 1}', env=env).returncode == 0
    assert mem("set", "-n", "ns", "theme", "light", env=env).returncode == 0  # an update adds nothing
    assert mem("kg", "create", "-n", "ns", "-t", "person", "Alice", env=env).returncode == 0  # the third record
    for args in (("set", "-n", "ns", "other", "v"), ("todo", "save", "-n", "ns", '{"title": "t"}')):
        r = mem(*args, env=env)
        assert r.returncode == 5 and b"is full" in r.stderr, (args, r)
    assert mem("set", "-n", "elsewhere", "other", "v", env=env).returncode == 0  # the limit is per namespace
    # A2E entries and codebolt records share the limit
    with Stdio("agent-a", secret=None, env=env) as a:
        reply = a.call("memory/store/req", memory_id=a.init(), entries=[entry("y", "one too many")])
        assert reply["type"] == "error" and reply["code"] == "memory_full", reply


def test_a_long_lived_server_counts_its_records_and_frees_room_on_delete(home):
    save = ("memory_json_save", {"json": {"n": 1}})
    results = mcp_run(home, ["-n", "ns"], [save, save, save, save], env={"MEM_MAX_ENTRIES": "3"})
    assert [r[0] for r in results] == [False, False, False, True] and "memory_full" in results[3][1], results
    first = results[0][2]["memoryId"]
    results = mcp_run(
        home,
        ["-n", "ns"],
        [save, ("memory_json_delete", {"memoryId": first}), save, save, ("episodic_memory_create", {"title": "t"})],
        env={"MEM_MAX_ENTRIES": "3"},
    )
    assert [r[0] for r in results] == [True, False, False, True, True], results
    assert all("memory_full" in r[1] for r in results if r[0]), results
    big = {"MEM_MAX_BYTES": "5000"}
    results = mcp_run(home, ["-n", "bytes"], [("memory_set", {"key": "k", "value": "v" * 6000})], env=big)
    assert results[0][0] and "memory_full" in results[0][1], results


BAD_NAMESPACES = ["\u0000system", "x" * 5000, "nul\u0000inside", ""]


def test_codebolt_tools_check_namespaces_like_the_entry_path(home):
    calls = []
    for namespace in BAD_NAMESPACES:
        calls += [
            ("memory_set", {"key": "k", "value": "v", "namespace": namespace}),
            ("memory_get", {"key": "k", "namespace": namespace}),
            ("memory_json_save", {"json": {"a": 1}, "namespace": namespace}),
            ("episodic_memory_create", {"title": "t", "namespace": namespace}),
            (
                "create_entities",
                {"entities": [{"name": "A", "entityType": "t", "observations": []}], "namespace": namespace},
            ),
            ("memory_retrieve", {"namespace": namespace}),
        ]
    results = mcp_run(home, ["-n", "ns"], calls)
    for (is_error, text, _), call in zip(results, calls, strict=True):
        if call[1]["namespace"] == "":  # empty means the server's --namespace
            assert not is_error or "memory_not_found" in text, (call[0], text)
            continue
        assert is_error and "schema_violation" in text and "namespace" in text, (call[0], text)
    assert not (home / "system").exists()  # the reserved namespace was never written
    svc = MemoryService(home)
    try:
        assert svc.backend.namespaces() == ["ns"]
    finally:
        svc.close()
    r = mem("set", "-n", "y" * 5000, "k", "v")
    assert r.returncode == 4 and r.stderr.decode().count("\n") == 1, r


@pytest.mark.parametrize("source_type", ["vectordb", "kv", "kg"])
def test_a_persistent_memory_cannot_read_the_reserved_namespace(service, source_type):
    from a2e_mem.errors import InvalidInput

    retrieval = {"source_type": source_type, "source_id": "\u0000system"}
    service.persistent_memory_create("sys", retrieval, {"format": "json"}, id="pm-sys")
    with pytest.raises(InvalidInput, match="namespace"):
        service.persistent_memory_retrieve("pm-sys", query="anything")


def test_a_connection_holds_a_bounded_number_of_sessions(home):
    with Stdio("agent-a", secret=None) as a:
        kept, dropped = a.init(), a.init()
        assert a.call("memory/store/req", memory_id=kept, entries=[entry("w", "scratch", tier="working")])["stored"]
        for i in range(CAP + 40):
            a.init(f"ns{i % 7}")
            if i % 50 == 0:  # used now and then: the least recently used sessions go first
                assert a.call("memory/retrieve/req", memory_id=kept, tier="working")["total"] == 1
        gone = a.call("memory/retrieve/req", memory_id=dropped)
        assert gone["type"] == "error" and gone["code"] == "memory_not_found", gone
        assert a.call("memory/retrieve/req", memory_id=kept, tier="working")["total"] == 1
    # and what the process holds stays bounded however many inits come
    from a2e_mem.protocol import Protocol

    svc = MemoryService(home)
    proto = Protocol(svc)
    for i in range(3 * CAP):
        reply = proto.handle(orjson.dumps({"type": "memory/init/req", "id": f"i{i}", "namespace": "ns"}))
        assert reply["type"] == "memory/init/resp", reply
    assert len(proto.session_ids) == CAP and len(svc.a2e.sessions) == CAP
    proto.close()
    assert svc.a2e.sessions == {}
    svc.close()


def test_an_mcp_server_holds_a_bounded_number_of_sessions(service):
    from a2e_mem.cli.mcp_server import Tools

    tools = Tools(service, "ns", "agent-a")
    first = tools.session(None, None)
    for i in range(3 * CAP):
        tools.session(f"ns{i}", None)
        if i % 50 == 0:
            assert tools.session(None, None) is first  # in use: kept
    assert len(tools.sessions) == CAP and len(service.a2e.sessions) == CAP
    assert tools.session(None, None) is first


def test_the_session_cap_is_the_documented_one():
    from a2e_mem.ops.a2e import SESSIONS_PER_CONNECTION

    assert SESSIONS_PER_CONNECTION == CAP


def test_import_checks_namespaces_and_agents_like_the_entry_path(home, tmp_path):
    doc = {"id": '{"k":"x"}', "key": {"k": "x"}, "content": "c", "tier": "episodic", "tags": [], "source": "",
           "score": 1.0, "ttl": 0, "created_at": 1.0, "updated_at": 1.0, "expires_at": None}  # fmt: skip
    for namespace, kind, scope in (
        ("\u0000system", "kv", []),
        ("\u0000system", "semantic", []),
        ("ns", "episodic", ["a" * 5000]),
        ("ns", "episodic", ["nul\u0000agent"]),
    ):
        line = orjson.dumps({"namespace": namespace, "kind": kind, "scope": scope, "id": doc["id"], "doc": doc})
        r = mem("import", "-", input=line + b"\n")
        assert r.returncode == 4 and b"must be 1 to 1024 characters" in r.stderr, (namespace, kind, r)
    assert not (home / "system").exists() and not (home / "ns").exists()


@pytest.mark.files_only
def test_record_counts_stay_exact_across_processes_with_the_usage_cache(home, monkeypatch):
    svc = MemoryService(home)
    logs = [svc.episodic_memory_create(f"log {i}", namespace="ns")["memoryId"] for i in range(10)]
    event = {"event_type": "note", "emitting_agent_id": "a", "payload": "p"}
    for log in logs:
        svc.episodic_memory_append_event(log, event, namespace="ns")
    count = svc.a2e.usage("ns", 0)[0]
    assert count == 20  # 10 logs and their 10 events
    svc.close()
    env = {"MEM_MAX_ENTRIES": str(count + 2)}
    appended = [
        mem("episodic", "append", "-n", "ns", log, "-e", "note", "-a", "a", "-p", "p", env=env).returncode
        for log in logs[:4]
    ]
    assert appended == [0, 0, 5, 5], appended  # exactly two more fit, whichever process wrote them
    assert (home / "ns").exists() and list((home / "ns").glob("*/usage.json"))  # the cache was used
    # a long-lived process sees another process's writes once it looks again
    import a2e_mem.backends.files.usage

    monkeypatch.setattr(a2e_mem.backends.files.usage, "RECHECK", 0.0)
    reader, writer = MemoryService(home), MemoryService(home)
    assert reader.a2e.usage("ns", 0)[0] == count + 2
    writer.episodic_memory_append_event(logs[5], event, namespace="ns")  # past the limit here: no limit set
    assert reader.a2e.usage("ns", 0)[0] == count + 3
    writer.memory_json_delete(writer.memory_json_save({"a": 1}, namespace="ns")["memoryId"], namespace="ns")
    assert reader.a2e.usage("ns", 0)[0] == count + 3
    reader.close()
    writer.close()


def test_a_deleted_namespace_starts_again_from_zero(service, monkeypatch):
    monkeypatch.setenv("MEM_MAX_ENTRIES", "2")
    limited = MemoryService(service.home)
    for key in ("a", "b"):
        limited.memory_set(key, "v", namespace="ns")
    from a2e_mem.errors import MemoryFull

    with pytest.raises(MemoryFull):
        limited.memory_set("c", "v", namespace="ns")
    limited.delete_namespace("ns")
    service.memory_set("x", "v", namespace="ns")  # another process (no limit) writes the same shard
    limited.memory_set("y", "v", namespace="ns")  # two records now: within the limit
    with pytest.raises(MemoryFull):
        limited.memory_set("z", "v", namespace="ns")
    limited.close()


def test_mcp_with_a_secret_refuses_configs_and_events_naming_another_agent(home):
    """Audit F6: `persistent_memory_create(filters={"agent": "agent-b"})` from agent-a's server
    was accepted and refused only at retrieve; it is now refused at create and update, and an
    event that says agent-b emitted it is refused too. Codebolt records stay shared by the
    namespace: agent-a may delete the persistent memory that reads agent-b's tier."""
    two_agents(home)
    svc = MemoryService(home)
    log = svc.episodic_memory_create("shared log", namespace="ns")["memoryId"]
    svc.close()
    source = {"source_type": "vectordb", "source_id": "ns"}
    calls = [
        ("persistent_memory_create", {"label": "B", "retrieval": {**source, "filters": {"agent": "agent-b"}},
                                      "contribution": {"format": "text"}, "id": "pm-new"}),
        ("persistent_memory_update", {"memory_id": "pm-all", "retrieval": {**source, "filters": {"agent": "agent-b"}}}),
        ("episodic_memory_append_event", {"memoryId": log, "event": {
            "event_type": "note", "emitting_agent_id": "agent-b", "payload": "forged"}}),
        ("persistent_memory_create", {"label": "A", "retrieval": {**source, "filters": {"agent": "agent-a"}},
                                      "contribution": {"format": "text"}, "id": "pm-a"}),
        ("persistent_memory_update", {"memory_id": "pm-b", "label": "renamed, still reads b"}),
        ("episodic_memory_append_event", {"memoryId": log, "event": {
            "event_type": "note", "emitting_agent_id": "agent-a", "payload": "mine"}}),
        ("persistent_memory_delete", {"memory_id": "pm-b"}),
    ]  # fmt: skip
    results = mcp_run(home, ["-n", "ns", "-a", "agent-a"], calls, env={"MEM_AUTH_SECRET": SECRET})
    for (is_error, text, _), call in zip(results[:3], calls, strict=False):
        assert is_error and "unauthorized" in text and "agent-b" in text, (call, text)
    for (is_error, text, _), call in zip(results[3:], calls[3:], strict=True):
        assert not is_error, (call, text)
    svc = MemoryService(home)
    try:
        assert sorted(pm["id"] for pm in svc.persistent_memory_list(namespace="ns")) == ["pm-a", "pm-all"]
        assert svc.persistent_memory_get("pm-all", namespace="ns")["retrieval"]["filters"] == {}
        events = svc.episodic_memory_query_events(log, namespace="ns")
        assert [(e["emitting_agent_id"], e["payload"]) for e in events] == [("agent-a", "mine")]
    finally:
        svc.close()


# -- MCP lines the SDK's transport cannot read (audit A22 F2) --------------------------------------


def test_mcp_answers_every_request_line_it_cannot_read(home):
    """Raw lines to `mem serve-mcp` (the SDK's client cannot even write some of them): each one
    with an id gets a JSON-RPC error with that id, one without an id a line on stderr; the
    server then answers the next request as usual."""
    import json
    import queue
    import threading

    proc = subprocess.Popen(
        [sys.executable, "-m", "a2e_mem.cli.main", "serve-mcp"],
        cwd=ROOT, env={**os.environ}, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    lines: queue.Queue[bytes] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()

    def send(line: str) -> None:
        proc.stdin.write(line.encode("utf-8") + b"\n")
        proc.stdin.flush()

    def answer() -> dict[str, Any]:  # a missing answer is the bug: fail instead of waiting forever
        return json.loads(lines.get(timeout=60))

    def call(rid: int, arguments: str) -> str:
        params = f'{{"name":"memory_set","arguments":{arguments}}}'
        return f'{{"jsonrpc":"2.0","id":{rid},"method":"tools/call","params":{params}}}'

    def deep(levels: int) -> str:
        return "[" * levels + "]" * levels

    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
    send(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello}))
    assert answer()["id"] == 0
    send('{"jsonrpc":"2.0","method":"notifications/initialized"}')
    unreadable = [
        (call(1, '{"key":"s","value":"a\\ud800b"}'), 1, -32700),  # a lone surrogate: the server cannot parse it
        (call(2, '{"key":"n","value":' + "1" * 5000 + "}"), 2, -32700),  # 5000 digits
        (call(3, '{"key":"d","value":' + deep(300) + "}"), 3, -32700),  # 300 levels
        (call(4, '{"key":"d","value":' + deep(3000) + "}"), 4, -32700),  # deeper than Python's json reads
        ('{"jsonrpc":"2.0","id":"five","method":"tools/call","params":{"name":', "five", -32700),  # cut short
        ('{"jsonrpc":"2.0","id":6,"params":{}}', 6, -32600),  # no method
    ]
    for line, rid, code in unreadable:
        send(line)
        got = answer()
        assert got["id"] == rid and got["error"]["code"] == code, got
    send("not json at all")  # no id to answer: dropped, and said on stderr
    send('{"jsonrpc":"2.0","method":"notifications/progress","params":' + deep(300) + "}")
    send('{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}')  # an id no reply can carry: null
    send("   ")  # a blank line is nothing
    send(call(7, '{"key":"ok","value":1}'))
    got = answer()
    assert got["id"] is None and got["error"]["code"] == -32700, got
    got = answer()
    assert got["id"] == 7 and got["result"]["structuredContent"]["value"] == 1, got
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0
    dropped = [line for line in proc.stderr.read().decode().splitlines() if "dropped" in line]
    assert len(dropped) == 2, dropped
    assert lines.empty()  # and nothing else was sent
