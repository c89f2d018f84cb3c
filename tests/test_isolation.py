"""Who sees what, hostile names, and expiry.

- Isolation: a session sees its own working tier, its agent's episodic tier and its namespace's
  semantic tier, nothing else; agent A can neither read, overwrite nor forget agent B's episodic
  entries through any message.
- Hostile names (namespace, agent, key, tag, memory_id) are stored safely or refused, and never
  become a path: nothing is created outside MEM_HOME and every file name is the store's own.
- TTL: an expired entry is never returned (any filter), counted or forgotten-and-counted, and is
  gone from disk after a checkpoint; the same through `mem` processes with MEM_CLOCK_OFFSET.
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from a2e_mem import clock
from a2e_mem.protocol import Protocol, auth_token
from a2e_mem.service import MemoryService

ROOT = Path(__file__).resolve().parent.parent


class Client:
    """One A2E connection (as one `serve-stdio` process would have), over its own service."""

    def __init__(self, home: Path, agent: str = "", secret: str | None = None) -> None:
        self.proto = Protocol(MemoryService(home), auth_secret=secret)
        self.n = 0
        if agent:
            token = auth_token(secret, agent) if secret else ""
            assert self.call("handshake/req", agent_id=agent, auth_token=token)["ok"] is True

    def call(self, kind: str, **fields) -> dict:
        self.n += 1
        msg = {"type": kind, "id": f"r{self.n}", "version": "1.0", "ts": 0.0, **fields}
        reply = self.proto.handle(orjson.dumps(msg))
        assert reply["req_id"] == f"r{self.n}" or reply["type"] == "error"
        return reply

    def init(self, namespace: str = "ns", agent: str | None = None) -> str:
        reply = self.call("memory/init/req", namespace=namespace, scope={"agent": agent} if agent else {})
        assert reply["type"] == "memory/init/resp", reply
        return reply["memory_id"]

    def store(self, mid: str, *entries: dict) -> dict:
        return self.call("memory/store/req", memory_id=mid, entries=list(entries))

    def retrieve(self, mid: str, **query) -> dict:
        reply = self.call("memory/retrieve/req", memory_id=mid, limit=1000, **query)
        assert reply["type"] == "memory/retrieve/resp", reply
        return reply

    def forget(self, mid: str, **query) -> dict:
        return self.call("memory/forget/req", memory_id=mid, **query)


def e(key: str, content, tier: str = "episodic", **extra) -> dict:
    return {"key": {"k": key}, "content": content, "tier": tier, **extra}


def contents(reply: dict) -> set:
    return {x["content"] for x in reply["entries"]}


# -- isolation ------------------------------------------------------------------------------------


def b_secrets(home: Path) -> tuple[Client, str]:
    """Agent B's episodic entries, stored through its own connection."""
    b = Client(home, "agent-b")
    mid = b.init()
    reply = b.store(
        mid,
        e("shared-key", "B secret one zebra", tags=["private", "b"]),
        e("b-only", "B secret two zebra", tags=["private"]),
    )
    assert len(reply["stored"]) == 2
    return b, mid


def assert_b_intact(home: Path) -> None:
    svc = MemoryService(home)
    got = svc.retrieve(svc.scope("ns", "agent-b"), tier="episodic", limit=100)
    assert contents(got) == {"B secret one zebra", "B secret two zebra"}


QUERIES = [
    {},
    {"tier": "episodic"},
    {"keys": [{"k": "shared-key"}, {"k": "b-only"}]},
    {"keys": [{"k": "b-only"}], "tier": "episodic"},
    {"tags": ["private"]},
    {"tags": ["private", "b"], "tier": "episodic"},
    {"query": "B secret zebra"},
    {"query": "zebra", "min_score": 0.01},
    {"query": "zebra", "keys": ["b-only", {"k": "b-only"}], "tags": ["private"]},
]


@pytest.mark.parametrize("query", QUERIES, ids=[str(i) for i in range(len(QUERIES))])
def test_agent_a_cannot_read_b_episodic_entries(home, query):
    b_secrets(home)
    a = Client(home, "agent-a")
    for mid in (a.init(), a.init(agent="agent-a")):
        assert a.retrieve(mid, **query)["total"] == 0
    # the same query does find them for B: the filter is not vacuous
    b = Client(home, "agent-b")
    assert b.retrieve(b.init(), **query)["total"] >= 1


def test_agent_a_cannot_overwrite_or_forget_b_episodic_entries(home):
    _, b_mid = b_secrets(home)
    a = Client(home, "agent-a")
    mid = a.init()
    assert a.store(mid, e("shared-key", "A overwrite attempt", tags=["private"]))["stored"] == [{"k": "shared-key"}]
    assert_b_intact(home)
    for query in (
        {"keys": [{"k": "shared-key"}, {"k": "b-only"}]},
        {"keys": ["b-only"], "tier": "episodic"},
        {"tags": ["private"]},
        {"tags": ["private", "b"], "keys": [{"k": "shared-key"}]},
        {"tier": "episodic", "all": True},
        {"all": True},
    ):
        reply = a.forget(mid, **query)
        assert reply["type"] == "memory/forget/resp" and reply["deleted"] <= 1, reply  # only A's own entry
        assert_b_intact(home)
    # B's session id is no key to B's entries for A's connection (another process)
    assert a.retrieve(mid)["total"] == 0
    assert a.call("memory/retrieve/req", memory_id=b_mid)["code"] == "memory_not_found"
    assert a.call("memory/forget/req", memory_id=b_mid, tier="episodic")["code"] == "memory_not_found"
    assert a.store(b_mid, e("x", "via B's id"))["code"] == "memory_not_found"
    assert_b_intact(home)


def test_forget_of_semantic_and_working_from_a_leaves_b_episodic_alone(home):
    b_secrets(home)
    a = Client(home, "agent-a")
    mid = a.init()
    for tier in ("semantic", "working"):
        assert a.forget(mid, tier=tier, all=True)["deleted"] == 0
        assert a.forget(mid, tier=tier, keys=[{"k": "shared-key"}])["deleted"] == 0
    assert_b_intact(home)


def test_an_authenticated_agent_cannot_claim_another_agents_scope(home):
    b = Client(home, "agent-b", secret="s3cret")
    b.store(b.init(), e("diary", "B private diary"))
    a = Client(home, "agent-a", secret="s3cret")
    assert a.init(agent="agent-a")  # its own name in the scope is fine
    reply = a.call("memory/init/req", namespace="ns", scope={"agent": "agent-b"})
    if reply["type"] == "error":
        assert reply["code"] == "unauthorized"
        return
    mid = reply["memory_id"]
    assert a.retrieve(mid)["total"] == 0
    assert a.forget(mid, tier="episodic", all=True)["deleted"] == 0
    svc = MemoryService(home)
    assert svc.retrieve(svc.scope("ns", "agent-b"))["total"] == 1


def test_working_tier_is_private_to_its_session_even_for_the_same_agent(home):
    a = Client(home, "agent-a")
    one, two = a.init(), a.init()
    assert a.store(one, e("scratch", "session one scratch", tier="working"))["stored"]
    assert a.retrieve(two)["total"] == 0 and a.retrieve(two, tier="working", keys=[{"k": "scratch"}])["total"] == 0
    assert a.forget(two, tier="working", all=True)["deleted"] == 0
    other = Client(home, "agent-a")  # another connection of the same agent
    assert other.retrieve(other.init(), tier="working")["total"] == 0
    assert a.retrieve(one, tier="working")["total"] == 1  # still there for its own session
    # a persisted session (`mem init`) keeps its working tier private too
    svc = MemoryService(home)
    persisted = svc.init("ns", "agent-a", persist=True)
    svc.store(persisted, [e("disk-scratch", "persisted scratch", tier="working")])
    assert a.retrieve(two, tier="working")["total"] == 0
    assert other.retrieve(other.init(), query="persisted scratch")["total"] == 0
    assert Client(home).retrieve(persisted.memory_id, tier="working")["total"] == 1


def test_semantic_is_shared_within_a_namespace_and_not_across(home):
    a, b = Client(home, "agent-a"), Client(home, "agent-b")
    a_ns, b_ns = a.init("team"), b.init("team")
    assert a.store(a_ns, e("fact", "the team fact", tier="semantic"))["stored"]
    assert contents(b.retrieve(b_ns, tier="semantic")) == {"the team fact"}
    for namespace in ("other", "Team", "team ", "team\u200b"):  # other names, even close ones
        mid = b.init(namespace)
        assert b.retrieve(mid)["total"] == 0 and b.forget(mid, tier="semantic", all=True)["deleted"] == 0
    assert b.forget(b_ns, tier="semantic", keys=[{"k": "fact"}])["deleted"] == 1  # shared: B may forget it
    assert a.retrieve(a_ns)["total"] == 0


# -- hostile names --------------------------------------------------------------------------------

HOSTILE = [
    "../../../../tmp/escape",
    "..",
    ".",
    "/etc/passwd",
    "/abs/path",
    "C:\\Windows\\system32",
    "a/b/c",
    "nul\x00byte",
    "x" * 1024,
    "y" * 1025,
    "ü" * 300,
    "🧠" * 100,
    "CON",
    "Case",
    "case",
    "e\u0301",  # e + combining accent (NFD)
    "\u00e9",  # é (NFC)
    "\u202etxt.exe",
    "line\nbreak",
    "~",
    "$HOME",
    "",
]
OWN_NAME = re.compile(
    r"^([0-9a-f]{32}|ns|system|store\.json|namespace\.json|shard\.json|lock|checkpoint\.lock|"
    r"wal-\d{8}\.ndjson|seg-\d{8}|[a-z_]+\.(npy|json|ann))$"
)


def assert_only_own_files(home: Path, outside: Path) -> None:
    for path in home.rglob("*"):
        assert not path.is_symlink(), path
        assert path.resolve().is_relative_to(home.resolve()), path
        assert OWN_NAME.match(path.name), f"unexpected file name {path.relative_to(home)}"
    beside = [] if os.environ.get("MEM_STORE") else ["home"]  # PostgreSQL: no store folder at all
    assert sorted(p.name for p in outside.iterdir()) == beside, "something was created beside MEM_HOME"
    assert not Path("/tmp/escape").exists() and not Path("/abs").exists()


def refused(reply: dict) -> bool:
    return reply["type"] == "error" and reply["code"] in ("schema_violation", "memory_not_found")


@pytest.mark.parametrize("name", HOSTILE, ids=[f"{i}" for i in range(len(HOSTILE))])
def test_hostile_names_are_stored_safely_or_refused(home, tmp_path, name):
    c = Client(home)
    hs = c.call("handshake/req", agent_id=name)
    assert hs["type"] == "handshake/resp"
    if not hs["ok"]:  # an agent_id no session could have is refused at the handshake
        assert "\x00" in name or len(name) > 1024, hs
        assert c.call("handshake/req", agent_id="plain")["ok"]
    # as a namespace and as an agent
    for scope in ({"agent": name}, {}):
        reply = c.call("memory/init/req", namespace=name, scope=scope)
        if refused(reply):
            assert "\x00" in name or not name or len(name) > 1024, reply
            continue
        mid = reply["memory_id"]
        for tier in ("working", "episodic", "semantic"):
            stored = c.store(mid, e(name, f"content for {name!r}", tier=tier, tags=[name[:256]] if name else []))
            assert stored["type"] == "memory/store/resp", stored
            if stored["errors"]:  # a NUL or empty tag, or a key past PostgreSQL's index limit: refused entry by entry
                too_long = "too long for the PostgreSQL store" in stored["errors"][0]
                assert not stored["stored"] and ("\x00" in name or not name or too_long), stored
                continue
            assert c.retrieve(mid, keys=[{"k": name}], tier=tier)["total"] == 1
            assert c.retrieve(mid, tags=[name[:256]], tier=tier)["total"] == 1
    # as a key and a tag in an ordinary session
    mid = c.init("plain", "plain")
    stored = c.store(mid, {"key": {name: name}, "content": "x", "tier": "episodic"})
    assert stored["stored"] == [{name: name}]
    assert c.retrieve(mid, keys=[{name: name}])["total"] == 1
    # as a memory_id
    for kind in ("memory/store/req", "memory/retrieve/req", "memory/forget/req"):
        assert refused(c.call(kind, memory_id=name))
    c.proto.close()
    c.proto.service.checkpoint(force=True)
    assert_only_own_files(home, tmp_path)


def test_names_that_differ_only_by_case_or_normalisation_are_different(home):
    c = Client(home)
    names = ["Case", "case", "CASE", "e\u0301", "\u00e9"]
    for name in names:
        mid = c.init(name, name)
        c.store(mid, e("k", name, tier="semantic"), e("k", name, tier="episodic"))
    svc = MemoryService(home)
    for name in names:
        assert contents(svc.retrieve(svc.scope(name, name), limit=10)) == {name}
    assert sorted(svc.backend.namespaces()) == sorted(names)


# -- TTL ------------------------------------------------------------------------------------------

MARK = "qzxvexpiring"


def ttl_fixture(home: Path, checkpoint_first: bool) -> tuple[Client, str]:
    """Entries with and without TTL in every tier; some already checkpointed."""
    c = Client(home, "ttl-agent")
    mid = c.init("ttl")
    for tier in ("working", "episodic", "semantic"):
        reply = c.store(
            mid,
            e(f"short-{tier}", f"{MARK} short lived word", tier=tier, ttl=30, tags=["t"]),
            e(f"long-{tier}", "long lived word", tier=tier, ttl=1000, tags=["t"]),
            e(f"forever-{tier}", "forever word", tier=tier, tags=["t"]),
        )
        assert len(reply["stored"]) == 3
    if checkpoint_first:
        c.proto.service.checkpoint(force=True)
    return c, mid


FILTERS = [
    dict(zip(("keys", "tags", "query", "tier", "min_score"), combo, strict=True))
    for combo in itertools.product(
        [None, [{"k": "short-episodic"}, {"k": "short-semantic"}, {"k": "short-working"}, {"k": "long-episodic"}]],
        [None, ["t"]],
        [None, f"{MARK} word", "short lived"],
        [None, "working", "episodic", "semantic"],
        [None, 0.01],
    )
]


@pytest.mark.parametrize("checkpoint_first", [False, True], ids=["journal", "checkpoint"])
def test_expired_entries_are_never_returned_counted_or_forgotten(home, checkpoint_first):
    c, mid = ttl_fixture(home, checkpoint_first)
    before = c.retrieve(mid, keys=[{"k": "short-episodic"}])
    assert before["total"] == 1  # alive until the clock moves
    clock.set_offset(31)
    for query in FILTERS:
        query = {k: v for k, v in query.items() if v is not None}
        reply = c.retrieve(mid, **query)
        assert not any(MARK in str(x["content"]) for x in reply["entries"]), query
        assert reply["total"] == len(reply["entries"]), query  # the limit is 1000: total is what came back
        tiers = [query["tier"]] if "tier" in query else ["working", "episodic", "semantic"]
        if "keys" not in query and "min_score" not in query:
            assert reply["total"] == 2 * len(tiers), query  # the long-lived and forever entries
    for tier in ("working", "episodic", "semantic"):
        assert c.forget(mid, tier=tier, keys=[{"k": f"short-{tier}"}])["deleted"] == 0
    assert c.forget(mid, tier="episodic", tags=["t"])["deleted"] == 2
    clock.set_offset(1001)
    assert c.retrieve(mid)["total"] == 2  # the forever entries of working and semantic
    assert c.forget(mid, tier="semantic", all=True)["deleted"] == 1


def test_expired_entries_do_not_count_against_the_limit(home, monkeypatch):
    monkeypatch.setenv("MEM_MAX_ENTRIES", "3")
    c = Client(home, "ttl-agent")
    mid = c.init("ttl")
    assert len(c.store(mid, *(e(f"old{i}", "soon gone", ttl=30) for i in range(3)))["stored"]) == 3
    assert c.store(mid, e("new0", "no room yet"))["code"] == "memory_full"
    clock.set_offset(31)
    assert len(c.store(mid, *(e(f"new{i}", "room again") for i in range(3)))["stored"]) == 3


def files_containing(home: Path, needle: str) -> list[Path]:
    return [p for p in home.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


@pytest.mark.files_only
def test_a_checkpoint_removes_expired_entries_from_disk(home):
    c, mid = ttl_fixture(home, checkpoint_first=True)
    c.store(mid, e("later", f"{MARK} stored after the checkpoint", tier="semantic", ttl=30))
    assert files_containing(home, MARK)  # on disk while alive (the grep can fail)
    clock.set_offset(31)
    c.proto.service.checkpoint(force=True)
    data = list(home.rglob("seg-*/data.json"))
    assert data and not [p for p in data if MARK.encode() in p.read_bytes()]
    persisted = {p for p in files_containing(home, MARK)}
    assert not persisted, f"expired content still in {sorted(str(p.relative_to(home)) for p in persisted)}"
    assert c.retrieve(mid, tier="semantic")["total"] == 2


def mem(home: Path, *args: str, offset: float = 0) -> subprocess.CompletedProcess:
    env = {**os.environ, "MEM_HOME": str(home), "MEM_CLOCK_OFFSET": str(offset)}
    out = subprocess.run(
        [sys.executable, "-m", "a2e_mem.cli.main", *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return out


def test_expiry_through_mem_processes_with_a_moved_clock(home):
    base = ["--namespace", "ttl", "--tier", "semantic"]
    mem(home, "store", *base, "--key", "k=short", "--ttl", "60", "--tag", "t", f"{MARK} through the shell")
    mem(home, "store", *base, "--key", "k=keep", "--tag", "t", "kept through the shell")

    def keys(offset: float, *args: str) -> set[str]:
        out = mem(home, "retrieve", "--namespace", "ttl", "--format", "ndjson", *args, offset=offset)
        return {orjson.loads(line)["key"]["k"] for line in out.stdout.splitlines()}

    assert keys(0) == {"short", "keep"}
    for args in ([], ["--key", "k=short"], ["--tag", "t"], ["--query", MARK], ["--tier", "semantic"]):
        assert keys(120, *args) <= {"keep"}, args
    forgot = mem(home, "forget", "--namespace", "ttl", "--tier", "semantic", "--key", "k=short", offset=120)
    assert orjson.loads(forgot.stdout) == {"deleted": 0}
    assert orjson.loads(mem(home, "gc", "--format", "json", offset=120).stdout)
    assert not files_containing(home, MARK)
    assert keys(0) == {"keep"}


def test_serve_stdio_with_a_moved_clock_does_not_return_expired_entries(home):
    svc = MemoryService(home)
    svc.store(svc.scope("ttl", "a"), [e("short", MARK, ttl=60), e("keep", "kept")])
    lines = [
        {"type": "memory/init/req", "id": "i", "namespace": "ttl", "scope": {"agent": "a"}},
    ]
    env = {**os.environ, "MEM_HOME": str(home), "MEM_CLOCK_OFFSET": "120"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "a2e_mem.cli.main", "serve-stdio"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        cwd=ROOT,
    )
    assert proc.stdin and proc.stdout
    proc.stdin.write(orjson.dumps(lines[0]) + b"\n")
    proc.stdin.flush()
    mid = orjson.loads(proc.stdout.readline())["memory_id"]
    for query in ({}, {"keys": [{"k": "short"}]}, {"query": MARK}, {"tier": "episodic"}):
        msg = {"type": "memory/retrieve/req", "id": "r", "memory_id": mid, **query}
        proc.stdin.write(orjson.dumps(msg) + b"\n")
        proc.stdin.flush()
        reply = orjson.loads(proc.stdout.readline())
        assert [x["key"] for x in reply["entries"]] in ([{"k": "keep"}], []), (query, reply)
        assert reply["total"] == len(reply["entries"])
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0
    assert svc.retrieve(svc.scope("ttl", "a"))["total"] == 2  # this process's clock: both alive
