"""The fleet proof of issue 11: many machines, one store, no acknowledged write lost.

Each "machine" is a process with its OWN `--home` (its own config, no shared disk) that reaches
one PostgreSQL database by its store URL, the way a team's laptops or CI runners would. The
writers mix the three ways in: the one-shot CLI, `serve-stdio` (A2E NDJSON) and `serve-mcp` (the
official MCP client). Every writer keeps a log of the writes it saw ACKNOWLEDGED; at the end a
ninth home reads the store back and every acknowledged write must be there, whole, once.

The same harness runs on the files backend (every machine then shares one `--home`, as processes
on one machine do): it is the baseline the PostgreSQL run is held to, and it keeps the harness
honest when PostgreSQL is not at hand.

Database: the suite's (`tests/pg.py`: the server `MEM_TEST_PG_URL` names, else a private
PostgreSQL from the `pgserver` package), a fresh database per test. The long tests are marked
`slow`: CI runs them bounded (under a minute each), `MEM_STRESS=1` runs them in full.
"""

# ruff: noqa: F811 (the fixtures imported from tests/pg.py are named as the fixtures' arguments)

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
import select
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest

from tests.pg import PgServer, pg_server, pg_url, with_database, with_user  # noqa: F401

REPO = Path(__file__).resolve().parents[1]
STRESS = bool(os.environ.get("MEM_STRESS"))
NS = "fleet"
SECRET = "fl33t-s3cr3t-pw"  # a password put in store URLs, which no output may show


# -- the database --------------------------------------------------------------------------


@pytest.fixture
def store_url(pg_url: str) -> str:
    """A fresh PostgreSQL database as a store URL (tests/pg.py: MEM_TEST_PG_URL or a private pgserver)."""
    return pg_url


@pytest.fixture
def server_url(pg_server: PgServer) -> str:
    """The PostgreSQL server's own (admin) URL."""
    return pg_server.url


def with_password(url: str, password: str) -> str:
    parts = urlsplit(url)
    return with_user(url, parts.username or "postgres", password)


# -- machines --------------------------------------------------------------------------------


@dataclass
class Fleet:
    """Where each machine keeps its home, and how it names the store."""

    backend: str  # "files" or "postgres"
    root: Path
    url: str | None = None

    def home(self, machine: int | str) -> Path:
        if self.url is None:
            return self.root / "shared-home"  # files: one disk, shared by every process
        return self.root / f"machine-{machine}"

    def argv(self, machine: int | str, *args: str) -> list[str]:
        """`mem ARGS` on `machine`: even machines name the store with --store, odd ones with
        MEM_STORE (see `env`), so that both ways are exercised."""
        prefix = [sys.executable, "-m", "a2e_mem.cli.main", "--home", str(self.home(machine))]
        if self.url is not None and _by_flag(machine):
            prefix += ["--store", self.url]
        return [*prefix, *args]

    def env(self, machine: int | str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEM_")}
        env.update(MEM_EMBEDDER="hash", MEM_CHECKPOINTS="off", PYTHONUNBUFFERED="1")
        env.pop("PGAPPNAME", None)
        if self.url is not None:
            env["PGAPPNAME"] = f"fleet-{machine}"  # lets a test find the machine's sessions in pg_stat_activity
            if not _by_flag(machine):
                env["MEM_STORE"] = self.url
        return env

    def mem(self, machine: int | str, *args: str, input: bytes | None = None, timeout: float = 120) -> Run:
        proc = subprocess.run(
            self.argv(machine, *args), input=input, capture_output=True, cwd=REPO, env=self.env(machine),
            timeout=timeout,
        )  # fmt: skip
        return Run(args, proc.returncode, proc.stdout.decode(), proc.stderr.decode())

    def ok(self, machine: int | str, *args: str, input: bytes | None = None) -> Any:
        """The JSON printed by a command that must succeed."""
        run = self.mem(machine, *args, "-f", "json", input=input)
        assert run.code == 0, f"mem {' '.join(args)} failed ({run.code}): {run.err}"
        return json.loads(run.out)


def _by_flag(machine: int | str) -> bool:
    return (machine if isinstance(machine, int) else sum(map(ord, machine))) % 2 == 0


@dataclass
class Run:
    args: tuple[str, ...]
    code: int
    out: str
    err: str


@pytest.fixture(params=["files", "postgres"])
def fleet(request, tmp_path) -> Fleet:
    if request.param == "files":
        return Fleet("files", tmp_path)
    return Fleet("postgres", tmp_path, request.getfixturevalue("store_url"))


def no_leak(text: str, where: str) -> None:
    """No traceback and no password in what a user sees."""
    assert "Traceback" not in text, f"{where} shows a traceback:\n{text}"
    assert SECRET not in text, f"{where} shows the password:\n{text}"


# -- the A2E wire (serve-stdio) ---------------------------------------------------------------


def a2e(kind: str, rid: str, **fields: Any) -> dict:
    return {"type": kind, "id": rid, "version": "1.0", "ts": 0.0, **fields}


class Stdio:
    """One `mem serve-stdio` process on a machine, spoken to line by line."""

    def __init__(self, fleet: Fleet, machine: int | str, log: Path, extra_env: dict[str, str] | None = None) -> None:
        self.log = log
        self.err = open(log, "wb")  # noqa: SIM115 - the server writes to it for as long as it runs
        self.proc = subprocess.Popen(
            fleet.argv(machine, "serve-stdio"), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err,
            cwd=REPO, env={**fleet.env(machine), **(extra_env or {})},
        )  # fmt: skip
        self.n = 0

    def send(self, kind: str, **fields: Any) -> str:
        self.n += 1
        rid = f"r{self.n}"
        assert self.proc.stdin is not None
        self.proc.stdin.write(orjson.dumps(a2e(kind, rid, **fields)) + b"\n")
        self.proc.stdin.flush()
        return rid

    def reply(self, timeout: float | None = None) -> dict | None:
        """The next reply; None if none came within `timeout` seconds."""
        assert self.proc.stdout is not None
        if timeout is not None:
            ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
            if not ready:
                return None
        line = self.proc.stdout.readline()
        assert line, f"serve-stdio ended without answering: {self.stderr()}"
        return orjson.loads(line)

    def ask(self, kind: str, **fields: Any) -> dict:
        rid = self.send(kind, **fields)
        resp = self.reply(timeout=300)  # a stuck server (a lock never released) fails the test, never hangs it
        assert resp is not None, f"no answer to {kind} within 300 s"
        assert resp.get("req_id") == rid, resp
        return resp

    def open(self, agent: str, namespace: str = NS) -> str:
        assert self.ask("handshake/req", agent_id=agent, agent_caps=[], auth_token="")["ok"] is True
        resp = self.ask("memory/init/req", namespace=namespace, scope={"agent": agent})
        assert resp["type"] == "memory/init/resp", resp
        return resp["memory_id"]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        self.err.close()

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        code = self.proc.wait(timeout=60)
        self.err.close()
        return code

    def stderr(self) -> str:
        if not self.err.closed:
            self.err.flush()
        return self.log.read_text(errors="replace")


# -- the MCP wire (serve-mcp) ------------------------------------------------------------------


def mcp_client(fleet: Fleet, machine: int | str, agent: str) -> Any:
    pytest.importorskip("mcp.server.mcpserver")
    from mcp import Client, StdioServerParameters

    argv = fleet.argv(machine, "serve-mcp", "--namespace", NS, "--agent", agent)
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=fleet.env(machine), cwd=str(REPO))
    return Client(params)


class Failed(Exception):
    """A write that was not acknowledged (the writer records it and goes on)."""


async def tool(client: Any, name: str, **args: Any) -> Any:
    r = await client.call_tool(name, args)
    if r.is_error:
        raise Failed(f"{name}: {r.content[0].text}")
    value = r.structured_content
    return value["result"] if isinstance(value, dict) and set(value) == {"result"} else value


# -- the fleet workload -----------------------------------------------------------------------


@dataclass
class Acks:
    """What one writer saw acknowledged (and what failed, with the reason)."""

    semantic: dict[str, Any] = field(default_factory=dict)  # key json -> content
    episodic: dict[tuple[str, str], Any] = field(default_factory=dict)  # (agent, key json) -> content
    events: list[dict] = field(default_factory=list)  # payloads appended to the shared log, in order
    own_todo: list[int] = field(default_factory=list)  # counts written to the writer's own todo, in order
    shared_todo: list[str] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)
    json_saves: list[dict] = field(default_factory=list)
    shared_kv: list[str] = field(default_factory=list)
    contested: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def key_id(key: dict) -> str:
    return orjson.dumps(key, option=orjson.OPT_SORT_KEYS).decode()


def codeword(key: dict) -> str:
    """A word only this entry's content has: no two entries' texts are the same bag of words."""
    import hashlib

    return "cw" + hashlib.sha1(key_id(key).encode()).hexdigest()[:10]


@dataclass
class Shared:
    """The records every writer works on, made before the writers start."""

    log: str  # the episodic memory all writers append to
    hub: str  # the graph entity all writers add observations to
    shared_todo: str
    todos: dict[int, str]  # each writer's own todo


def setup_shared(fleet: Fleet, machines: list[int]) -> Shared:
    log = fleet.ok("setup", "episodic", "create", "fleet log", "-n", NS)["memoryId"]
    fleet.ok("setup", "kg", "create", "fleet-hub", "--type", "hub", "-n", NS)
    shared = fleet.ok("setup", "todo", "save", '{"title": "shared", "by": "setup"}', "-n", NS, "-m", '{"keep": 1}')
    todos = {
        m: fleet.ok("setup", "todo", "save", json.dumps({"title": f"own m{m}", "count": -1}), "-n", NS)["memoryId"]
        for m in machines
    }
    return Shared(log, "fleet-hub", shared["memoryId"], todos)


def cli_writer(fleet: Fleet, m: int, shared: Shared, rounds: int, acks: Acks) -> None:
    """One-shot commands, each a new process (a new connection), as a shell script would run them."""

    def attempt(args: list[str], on_ok: Callable[[Any], None]) -> None:
        run = fleet.mem(m, *args, "-n", NS, "-f", "json")
        no_leak(run.err + run.out, f"mem {args[0]}")
        if run.code != 0:
            acks.failures.append(f"m{m} mem {' '.join(args)}: exit {run.code}: {run.err.strip()}")
            return
        on_ok(json.loads(run.out))

    for k in range(rounds):
        tag = f"m{m}-{k}"
        key = {"w": f"m{m}", "n": str(k)}
        text = f"fact {k} written by machine {m} through the cli, codeword {codeword(key)}"
        attempt(
            ["store", text, "-t", "semantic", "-k", f"w=m{m}", "-k", f"n={k}"],
            lambda out, key=key, text=text: acks.semantic.__setitem__(key_id(key), text),
        )
        payload = {"w": m, "seq": k}
        attempt(
            ["episodic", "append", shared.log, "-e", "fleet", "-a", f"m{m}", "-p", json.dumps(payload)],
            lambda out, p=payload: acks.events.append(p),
        )
        attempt(
            ["todo", "update", shared.todos[m], json.dumps({"title": f"own m{m}", "count": k})],
            lambda out, k=k: acks.own_todo.append(k),
        )
        attempt(
            ["todo", "update", shared.shared_todo, json.dumps({"title": "shared", "by": tag})],
            lambda out, t=tag: acks.shared_todo.append(t),
        )
        attempt(["kg", "observe", shared.hub, f"seen by {tag}"], lambda out, t=tag: acks.observations.append(t))
        body = {"w": m, "k": k}
        attempt(["json", "save", json.dumps(body)], lambda out, b=body: acks.json_saves.append(b))
        attempt(["set", "shared-kv", json.dumps(tag)], lambda out, t=tag: acks.shared_kv.append(t))
        attempt(["store", tag, "-t", "semantic", "-k", "k=contested"], lambda out, t=tag: acks.contested.append(t))


def stdio_writer(fleet: Fleet, m: int, rounds: int, batch: int, acks: Acks, logdir: Path) -> None:
    """A long-lived A2E server: batches of semantic and episodic entries, and the contested key."""
    server = Stdio(fleet, m, logdir / f"stdio-m{m}.err")
    try:
        mid = server.open(f"m{m}")
        for k in range(rounds):
            tag = f"m{m}-{k}"
            entries = []
            for j in range(batch):
                key = {"w": f"m{m}", "n": f"{k}.{j}"}
                text = f"fact {k}.{j} from machine {m} over stdio, codeword {codeword(key)}"
                entries.append({"key": key, "content": text, "tier": "semantic"})
            for j in range(2):
                key = {"e": f"{k}.{j}"}
                entries.append({"key": key, "content": {"machine": m, "k": k, "j": j}, "tier": "episodic"})
            entries.append({"key": {"k": "contested"}, "content": tag, "tier": "semantic"})
            resp = server.ask("memory/store/req", memory_id=mid, entries=entries)
            if resp["type"] != "memory/store/resp":
                acks.failures.append(f"m{m} memory/store: {resp}")
                continue
            stored = {key_id(k) for k in resp["stored"]}
            for e in entries:
                if key_id(e["key"]) not in stored:
                    continue
                if e["key"] == {"k": "contested"}:
                    acks.contested.append(tag)
                elif e["tier"] == "semantic":
                    acks.semantic[key_id(e["key"])] = e["content"]
                else:
                    acks.episodic[(f"m{m}", key_id(e["key"]))] = e["content"]
            if resp["errors"]:
                acks.failures.append(f"m{m} memory/store errors: {resp['errors']}")
        assert server.close() == 0
    finally:
        if server.proc.poll() is None:
            server.kill()
        no_leak(server.stderr(), f"serve-stdio on m{m}")


async def mcp_writer(fleet: Fleet, m: int, shared: Shared, rounds: int, acks: Acks) -> None:
    """A long-lived MCP server: the codebolt tools' read-modify-writes, and A2E stores."""

    async def attempt(name: str, on_ok: Callable[[Any], None], **args: Any) -> None:
        try:
            on_ok(await tool(client, name, **args))
        except Failed as exc:
            no_leak(str(exc), f"serve-mcp {name}")
            acks.failures.append(f"m{m} {exc}")

    async with mcp_client(fleet, m, f"m{m}") as client:
        for k in range(rounds):
            tag = f"m{m}-{k}"
            keys = [{"w": f"m{m}", "n": f"{k}.{j}"} for j in range(3)]
            entries = [
                {"key": key, "content": f"fact {key['n']} from machine {m} over mcp, codeword {codeword(key)}",
                 "tier": "semantic"}
                for key in keys
            ] + [{"key": {"k": "contested"}, "content": tag, "tier": "semantic"}]  # fmt: skip

            def stored(out: Any, entries: list[dict] = entries, tag: str = tag) -> None:
                done = {key_id(k) for k in out["stored"]}
                for e in entries:
                    if key_id(e["key"]) in done:
                        if e["key"] == {"k": "contested"}:
                            acks.contested.append(tag)
                        else:
                            acks.semantic[key_id(e["key"])] = e["content"]
                if out["errors"]:
                    acks.failures.append(f"m{m} memory_store errors: {out['errors']}")

            await attempt("memory_store", stored, entries=entries)
            payload = {"w": m, "seq": k}
            event = {"event_type": "fleet", "emitting_agent_id": f"m{m}", "payload": payload}
            await attempt("episodic_memory_append_event", lambda out, p=payload: acks.events.append(p),
                          memoryId=shared.log, event=event)  # fmt: skip
            await attempt("memory_todo_update", lambda out, k=k: acks.own_todo.append(k),
                          memoryId=shared.todos[m], todo={"title": f"own m{m}", "count": k})  # fmt: skip
            await attempt("memory_todo_update", lambda out, t=tag: acks.shared_todo.append(t),
                          memoryId=shared.shared_todo, todo={"title": "shared", "by": tag})  # fmt: skip
            await attempt("add_observations", lambda out, t=tag: acks.observations.append(t),
                          observations=[{"entityName": shared.hub, "contents": [f"seen by {tag}"]}])  # fmt: skip
            body = {"w": m, "k": k}
            await attempt("memory_json_save", lambda out, b=body: acks.json_saves.append(b), json=body)
            await attempt("memory_set", lambda out, t=tag: acks.shared_kv.append(t), key="shared-kv", value=tag)


async def tail_reader(fleet: Fleet, shared: Shared, stop: threading.Event, seen: list[list[str]]) -> None:
    """Reads the shared log over and over while it grows: what one read showed must stay, in the
    same order, at the head of every later read (appends land at the end, never in the middle)."""
    async with mcp_client(fleet, "tail", "tail") as client:
        while not stop.is_set():
            events = await tool(client, "episodic_memory_query_events", memoryId=shared.log)
            seen.append([e["eventId"] for e in events])
        events = await tool(client, "episodic_memory_query_events", memoryId=shared.log)
        seen.append([e["eventId"] for e in events])


def run_threads(jobs: list[Callable[[], None]]) -> None:
    """Run the jobs at once; re-raise the first exception one of them raised."""
    errors: list[BaseException] = []

    def wrap(job: Callable[[], None]) -> None:
        try:
            job()
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=wrap, args=(job,)) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def export_records(fleet: Fleet, machine: int | str, namespace: str) -> list[dict]:
    run = fleet.mem(machine, "export", "-n", namespace)
    assert run.code == 0, run.err
    no_leak(run.err, "mem export")
    return [orjson.loads(line) for line in run.out.splitlines() if line.strip()]


def check_store_is_sound(fleet: Fleet, machine: int | str, namespace: str, records: list[dict]) -> None:
    """`doctor` finds nothing, and `stats` counts what a recount of the export finds."""
    doctor = fleet.mem(machine, "doctor", "-f", "json")
    no_leak(doctor.out + doctor.err, "mem doctor")
    assert doctor.code == 0, f"doctor: exit {doctor.code}\n{doctor.out}\n{doctor.err}"
    assert json.loads(doctor.out) == [], doctor.out
    stats = fleet.ok(machine, "stats", "-n", namespace)
    no_leak(json.dumps(stats), "mem stats")
    counted = Counter((r["kind"], "/".join(r["scope"])) for r in records)
    reported = {(s["kind"], s["scope"]): s["entries"] for s in stats if s["namespace"] == namespace}
    assert {k: v for k, v in reported.items() if v} == dict(counted), "stats disagree with a recount"
    assert all(s["expired"] == 0 for s in stats if s["namespace"] == namespace), stats


# -- 1. eight machines, one store ---------------------------------------------------------------


@pytest.mark.slow
def test_eight_machines_write_through_one_store(fleet: Fleet, tmp_path: Path) -> None:
    if STRESS:
        run_fleet(fleet, tmp_path, cli_rounds=10, server_rounds=120, batch=50)
    else:
        run_fleet(fleet, tmp_path, cli_rounds=2, server_rounds=6, batch=10)


CLI, STDIO, MCP = (0, 1), (2, 3, 4), (5, 6, 7)


def run_fleet(fleet: Fleet, tmp_path: Path, cli_rounds: int, server_rounds: int, batch: int) -> None:
    shared = setup_shared(fleet, [*CLI, *MCP])
    acks = {m: Acks() for m in (*CLI, *STDIO, *MCP)}
    stop = threading.Event()
    tail: list[list[str]] = []

    def tail_job() -> None:
        asyncio.run(tail_reader(fleet, shared, stop, tail))

    def writers() -> None:
        try:
            jobs: list[Callable[[], None]] = []
            jobs += [lambda m=m: cli_writer(fleet, m, shared, cli_rounds, acks[m]) for m in CLI]
            jobs += [lambda m=m: stdio_writer(fleet, m, server_rounds, batch, acks[m], tmp_path) for m in STDIO]
            jobs += [lambda m=m: asyncio.run(mcp_writer(fleet, m, shared, server_rounds, acks[m])) for m in MCP]
            run_threads(jobs)
        finally:
            stop.set()

    run_threads([writers, tail_job])

    failures = [f for a in acks.values() for f in a.failures]
    assert not failures, "writes refused under concurrency:\n" + "\n".join(failures[:20])
    verify_fleet(fleet, shared, acks, tail)


def verify_fleet(fleet: Fleet, shared: Shared, acks: dict[int, Acks], tail: list[list[str]]) -> None:
    reader = 9  # a ninth machine, which wrote nothing
    records = export_records(fleet, reader, NS)
    by_kind: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        by_kind[r["kind"]].append(r)
    ids = [(r["kind"], tuple(r["scope"]), r["id"]) for r in records]
    assert len(ids) == len(set(ids)), "the export holds a record twice"

    # semantic: every acknowledged key once, with its content; the contested key once, one of its writes
    semantic = {key_id(r["doc"]["key"]): r["doc"]["content"] for r in by_kind["semantic"]}
    wanted = {k: v for a in acks.values() for k, v in a.semantic.items()}
    contested = [t for a in acks.values() for t in a.contested]
    assert len(wanted) > 0 and len(contested) > 0
    missing = sorted(set(wanted) - set(semantic))
    assert not missing, f"{len(missing)} acknowledged semantic entries lost, e.g. {missing[:5]}"
    wrong = [k for k, v in wanted.items() if semantic[k] != v]
    assert not wrong, f"semantic entries with the wrong content: {wrong[:5]}"
    contested_key = key_id({"k": "contested"})
    assert semantic.get(contested_key) in contested, semantic.get(contested_key)
    assert len(by_kind["semantic"]) == len(wanted) + 1, "semantic entries nobody acknowledged"

    # the A2E episodic tier, one scope per agent
    episodic = {(r["scope"][0], key_id(r["doc"]["key"])): r["doc"]["content"] for r in by_kind["episodic"]}
    wanted_ep = {k: v for a in acks.values() for k, v in a.episodic.items()}
    assert episodic == wanted_ep

    # the shared episodic log: every acknowledged event once; each writer's in the order it appended them
    events = fleet.ok(reader, "episodic", "query", shared.log, "-n", NS)
    payloads = [e["payload"] for e in events]
    pairs = [(p["w"], p["seq"]) for p in payloads]
    acked_pairs = [(p["w"], p["seq"]) for a in acks.values() for p in a.events]
    assert len(pairs) == len(set(pairs)), f"events appended twice: {[p for p, n in Counter(pairs).items() if n > 1]}"
    assert sorted(pairs) == sorted(acked_pairs), "the log lost acknowledged events or holds unacknowledged ones"
    for m in (*CLI, *MCP):
        own = [seq for w, seq in pairs if w == m]
        assert own == list(range(len(acks[m].events))), f"machine {m}'s events out of order or with gaps: {own}"
    memory = fleet.ok(reader, "episodic", "get", shared.log, "-n", NS)
    assert memory["eventCount"] == len(acked_pairs)
    final_ids = [e["eventId"] for e in events]
    assert tail and tail[-1] == final_ids
    for before, after in zip(tail, tail[1:], strict=False):
        assert after[: len(before)] == before, (
            "an event appeared before events a reader had already seen: the log's order is not the order of "
            f"acknowledgement ({len(before)} seen, then {len(after)})"
        )

    # todos: each writer's own todo holds its last acknowledged update; the shared one, one of them
    todos = {d["memoryId"]: d for d in fleet.ok(reader, "todo", "list", "-n", NS, "--limit", "1000")}
    assert len(todos) == len(shared.todos) + 1, "todos were duplicated or lost"
    for m, tid in shared.todos.items():
        assert acks[m].own_todo == list(range(len(acks[m].own_todo)))
        assert todos[tid]["todo"]["count"] == acks[m].own_todo[-1], f"machine {m}'s last todo update was lost"
    shared_writes = [t for a in acks.values() for t in a.shared_todo]
    assert todos[shared.shared_todo]["todo"]["by"] in shared_writes
    assert todos[shared.shared_todo]["metadata"] == {"keep": 1}, "an update lost the todo's metadata"

    # the graph: every acknowledged observation, once (concurrent read-modify-writes of one entity)
    graph = fleet.ok(reader, "kg", "open", shared.hub, "-n", NS)
    [hub] = [item for item in graph if item["type"] == "entity"]
    observed = hub["observations"]
    assert len(observed) == len(set(observed)), "an observation twice"
    wanted_obs = {f"seen by {t}" for a in acks.values() for t in a.observations}
    assert set(observed) == wanted_obs, f"lost observations: {sorted(wanted_obs - set(observed))[:5]}"

    # JSON saves: one record each; the key-value pair: one record, one of the acknowledged values
    saved = sorted(
        (d["json"]["w"], d["json"]["k"]) for d in fleet.ok(reader, "json", "list", "-n", NS, "--limit", "1000")
    )
    assert saved == sorted((b["w"], b["k"]) for a in acks.values() for b in a.json_saves)
    kv = [r for r in by_kind["kv"] if r["id"] == "shared-kv"]
    assert len(kv) == 1 and kv[0]["doc"]["value"] in [t for a in acks.values() for t in a.shared_kv]

    # the indexes took every write: a sample of the entries, each found first by its own text
    sample = random.Random(3).sample(sorted(wanted), min(30, len(wanted)))
    server = Stdio(fleet, reader, fleet.root / "reader.err")
    try:
        mid = server.open("reader")
        for k in sample:
            got = server.ask("memory/retrieve/req", memory_id=mid, query=wanted[k], tier="semantic", limit=1)
            assert got["type"] == "memory/retrieve/resp", got
            assert [key_id(e["key"]) for e in got["entries"]] == [k], f"{k} not found first by its own text"
            assert got["total"] == len(by_kind["semantic"]), "total counts every entry, before the limit"
        assert server.close() == 0
    finally:
        server.kill()

    check_store_is_sound(fleet, reader, NS, records)


# -- 1b. one episodic log, many appenders, a reader tailing it ----------------------------------------


async def appender(fleet: Fleet, m: int, log_id: str, count: int, acked: list[int]) -> None:
    async with mcp_client(fleet, m, f"m{m}") as client:
        for seq in range(count):
            event = {"event_type": "tick", "emitting_agent_id": f"m{m}", "payload": {"w": m, "seq": seq}}
            await tool(client, "episodic_memory_append_event", memoryId=log_id, event=event)
            acked.append(seq)


@pytest.mark.slow
def test_concurrent_appenders_keep_one_order(fleet: Fleet) -> None:
    """Four machines append to one episodic log as fast as they can while a fifth reads it over
    and over. The log must read the same to everyone at every moment: every read extends the one
    before it (no event slips in before one already seen, which a reader tailing the log with
    `since` or `lastCount` would miss forever), and at the end it holds each acknowledged event once,
    each machine's in the order it appended them."""
    appenders, count = (4, 150) if STRESS else (4, 25)
    log_id = fleet.ok("setup", "episodic", "create", "race log", "-n", NS)["memoryId"]
    acked: dict[int, list[int]] = {m: [] for m in range(appenders)}
    stop = threading.Event()
    seen: list[list[str]] = []

    def appending() -> None:
        try:
            run_threads([lambda m=m: asyncio.run(appender(fleet, m, log_id, count, acked[m])) for m in acked])
        finally:
            stop.set()

    run_threads([appending, lambda: asyncio.run(tail_reader(fleet, Shared(log_id, "", "", {}), stop, seen))])
    events = fleet.ok(9, "episodic", "query", log_id, "-n", NS)
    pairs = [(e["payload"]["w"], e["payload"]["seq"]) for e in events]
    assert sorted(pairs) == sorted((m, seq) for m, seqs in acked.items() for seq in seqs)
    for m in acked:
        assert [seq for w, seq in pairs if w == m] == list(range(count))
    assert seen[-1] == [e["eventId"] for e in events]
    pairs_of_reads = zip(seen, seen[1:], strict=False)
    breaks = [i for i, (before, after) in enumerate(pairs_of_reads) if after[: len(before)] != before]
    assert not breaks, (
        f"{len(breaks)} of {len(seen)} reads showed an event inserted before events an earlier read had already "
        "returned: the log is ordered by the appender's clock, not by the order of acknowledgement"
    )


def test_a_machine_whose_clock_is_behind_still_appends_at_the_end(store_url: str, tmp_path: Path) -> None:
    """Machines of a fleet do not share a clock. An event appended after another must come after
    it in the log, even when the second machine's clock runs a minute behind."""
    fleet = Fleet("postgres", tmp_path, store_url)
    log_id = fleet.ok("setup", "episodic", "create", "skew log", "-n", NS)["memoryId"]
    fleet.ok(0, "episodic", "append", log_id, "-e", "tick", "-a", "m0", "-p", '{"n": 1}', "-n", NS)
    run = subprocess.run(
        fleet.argv(1, "episodic", "append", log_id, "-e", "tick", "-a", "m1", "-p", '{"n": 2}', "-n", NS),
        capture_output=True, cwd=REPO, env={**fleet.env(1), "MEM_CLOCK_OFFSET": "-60"}, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    events = fleet.ok(2, "episodic", "query", log_id, "-n", NS)
    assert [e["payload"]["n"] for e in events] == [1, 2], "the log is ordered by each appender's own clock"


# -- 1c. the namespace's capacity, checked by racing machines ------------------------------------------


def filler(fleet: Fleet, m: int, tries: int, limit: int, acked: list[str], refused: list[str], logdir: Path) -> None:
    """Stores one entry at a time into a namespace with room for `limit`, until told it is full."""
    server = Stdio(fleet, m, logdir / f"filler-m{m}.err", extra_env={"MEM_MAX_ENTRIES": str(limit)})
    try:
        mid = server.open(f"m{m}", namespace="cap")
        for n in range(tries):
            key = {"w": f"m{m}", "n": str(n)}
            resp = server.ask("memory/store/req", memory_id=mid, entries=[{"key": key, "content": f"{m}/{n}",
                                                                            "tier": "semantic"}])  # fmt: skip
            if resp["type"] == "memory/store/resp" and resp["stored"] == [key]:
                acked.append(key_id(key))
            else:
                assert resp.get("code") == "memory_full", resp
                refused.append(key_id(key))
        assert server.close() == 0
    finally:
        server.kill()
        no_leak(server.stderr(), "serve-stdio")


@pytest.mark.slow
def test_racing_machines_never_overfill_a_namespace(fleet: Fleet, tmp_path: Path) -> None:
    """Six machines fill one namespace (max_entries, the same on each) at once: exactly the limit
    is stored, every stored entry was acknowledged, every refusal was `memory_full`."""
    machines, tries, limit = (6, 80, 300) if STRESS else (6, 30, 100)
    acked: list[str] = []
    refused: list[str] = []
    run_threads([lambda m=m: filler(fleet, m, tries, limit, acked, refused, tmp_path) for m in range(machines)])
    records = export_records(fleet, 9, "cap")
    stored = sorted(key_id(r["doc"]["key"]) for r in records)
    assert len(stored) == limit, f"{len(stored)} entries stored in a namespace limited to {limit}"
    assert stored == sorted(acked), "the store and the acknowledgements disagree"
    assert len(acked) + len(refused) == machines * tries
    check_store_is_sound(fleet, 9, "cap", records)


# -- 1d. creating one persistent memory id on several machines at once -----------------------------------


async def creator(fleet: Fleet, m: int, ids: list[str], won: dict[str, list[int]], lost: list[str]) -> None:
    async with mcp_client(fleet, m, f"m{m}") as client:
        for pid in ids:
            try:
                retrieval = {"source_type": "kg", "source_id": NS}
                await tool(client, "persistent_memory_create", id=pid, label=f"made by m{m}", retrieval=retrieval,
                           contribution={"format": "text"})  # fmt: skip
                won[pid].append(m)
            except Failed as exc:
                assert "exists already" in str(exc), exc
                no_leak(str(exc), "persistent_memory_create")
                lost.append(pid)


@pytest.mark.slow
def test_one_id_created_on_four_machines_at_once_has_one_creator(fleet: Fleet) -> None:
    machines, count = 4, (60 if STRESS else 15)
    ids = [f"pm-race-{i}" for i in range(count)]
    won: dict[str, list[int]] = defaultdict(list)
    lost: list[str] = []
    rng = random.Random(7)
    orders = {m: rng.sample(ids, len(ids)) for m in range(machines)}
    run_threads([lambda m=m: asyncio.run(creator(fleet, m, orders[m], won, lost)) for m in range(machines)])
    assert {pid: len(ms) for pid, ms in won.items()} == {pid: 1 for pid in ids}, "an id created twice, or by none"
    assert len(lost) == (machines - 1) * count
    listed = fleet.ok(9, "persistent", "list", "-n", NS)
    found = {d["id"]: d["label"] for d in listed if d["id"].startswith("pm-race-")}
    assert found == {pid: f"made by m{won[pid][0]}" for pid in ids}


# -- 1e. a namespace deleted while machines write into it ------------------------------------------------


@dataclass
class Timed:
    key: str
    sent: float
    acked: float


def timed_writer(fleet: Fleet, m: int, done: threading.Event, log: list[Timed], logdir: Path) -> None:
    """Writes one entry at a time until `done` is set, and 5 more after that."""
    server = Stdio(fleet, m, logdir / f"timed-m{m}.err")
    try:
        mid = server.open(f"m{m}", namespace="del")
        after = 0
        for n in itertools.count():
            if done.is_set():
                after += 1
                if after > 5:
                    break
            key = {"w": f"m{m}", "n": str(n)}
            sent = time.monotonic()
            resp = server.ask("memory/store/req", memory_id=mid, entries=[{"key": key, "content": f"{m}/{n}",
                                                                            "tier": "semantic"}])  # fmt: skip
            if resp["type"] == "memory/store/resp" and resp["stored"] == [key]:
                log.append(Timed(key_id(key), sent, time.monotonic()))
            else:  # the session may go with its namespace: open another
                assert resp.get("code") == "memory_not_found", resp
                mid = server.open(f"m{m}", namespace="del")
        assert server.close() == 0
    finally:
        server.kill()
        no_leak(server.stderr(), "serve-stdio")


@pytest.mark.slow
def test_a_namespace_deleted_under_writers_keeps_every_later_write(fleet: Fleet, tmp_path: Path) -> None:
    """Three machines write while a fourth deletes the namespace, three times. A write acknowledged
    before a delete began is gone; one sent after the last delete ended is there; `stats` and
    `doctor` agree with what is left."""
    rounds = 10 if STRESS else 3
    log: list[Timed] = []
    deletes: list[tuple[float, float]] = []
    done = threading.Event()

    def deleter() -> None:
        try:
            for _ in range(rounds):
                wanted = len(log) + 10
                while len(log) < wanted:
                    time.sleep(0.02)
                start = time.monotonic()
                run = fleet.mem(3, "namespaces", "delete", "del", "--yes")
                no_leak(run.out + run.err, "namespaces delete")
                assert run.code in (0, 3), run.err
                deletes.append((start, time.monotonic()))
        finally:
            done.set()

    run_threads([deleter, *[lambda m=m: timed_writer(fleet, m, done, log, tmp_path) for m in range(3)]])
    assert len(deletes) == rounds
    present = {key_id(r["doc"]["key"]) for r in export_records(fleet, 9, "del")}
    must_be_gone = [w.key for w in log if any(start > w.acked for start, _ in deletes)]
    must_stay = [w.key for w in log if all(end < w.sent for _, end in deletes)]
    assert must_stay and must_be_gone, "no write before the first delete or after the last: the test proved nothing"
    assert not set(must_be_gone) & present, "a namespace delete left writes acknowledged before it"
    assert not set(must_stay) - present, "writes acknowledged after the namespace was deleted were lost"
    assert present <= {w.key for w in log}, "entries nobody acknowledged"
    check_store_is_sound(fleet, 9, "del", export_records(fleet, 9, "del"))


# -- 1f. reindex while machines write ----------------------------------------------------------------------


def batch_writer(
    fleet: Fleet, m: int, done: threading.Event, acked: dict[str, str], brief: set[str], logdir: Path
) -> None:
    """Batches of 20 semantic entries, and 5 that live one second, until `done` is set, and 3 more."""
    server = Stdio(fleet, m, logdir / f"batch-m{m}.err")
    try:
        mid = server.open(f"m{m}", namespace="re")
        after = 0
        for k in itertools.count():
            if done.is_set():
                after += 1
                if after > 3:
                    break
            keys = [{"w": f"m{m}", "n": f"{k}.{j}"} for j in range(20)]
            entries = [{"key": key, "content": f"note {key['n']} codeword {codeword(key)}", "tier": "semantic"}
                       for key in keys]  # fmt: skip
            short = [{"key": {"w": f"m{m}", "brief": f"{k}.{j}"}, "content": f"brief {k}.{j}", "tier": "semantic",
                      "ttl": 1} for j in range(5)]  # fmt: skip
            resp = server.ask("memory/store/req", memory_id=mid, entries=entries + short)
            assert resp["type"] == "memory/store/resp" and len(resp["stored"]) == 25, resp
            acked.update((key_id(e["key"]), e["content"]) for e in entries)
            brief.update(key_id(e["key"]) for e in short)
        assert server.close() == 0
    finally:
        server.kill()
        no_leak(server.stderr(), "serve-stdio")


@pytest.mark.slow
def test_reindex_and_gc_under_writers_lose_nothing_and_index_everything(fleet: Fleet, tmp_path: Path) -> None:
    """Two machines run `mem reindex` and `mem gc` (which purges expired entries and builds
    indexes) while three others store batches, some entries with a one-second TTL: every
    acknowledged lasting entry is there afterwards, with its content, a search by its text finds
    it first, and once the short-lived ones have expired and a last gc has run, `stats` counts
    exactly what is left."""
    acked: dict[str, str] = {}
    brief: set[str] = set()
    done = threading.Event()

    def maintainer(m: int, command: str) -> None:
        try:
            while len(acked) < 100:
                time.sleep(0.02)
            for _ in range(3 if STRESS else 1):
                for args in (["reindex", "--embedder", "hash"], ["gc"]) if command == "reindex" else (["gc"], ["gc"]):
                    run = fleet.mem(m, *args)
                    no_leak(run.out + run.err, f"mem {args[0]}")
                    assert run.code == 0, run.err
                    time.sleep(0.5)  # let the short-lived entries written meanwhile expire
        finally:
            done.set()

    writers = [lambda m=m: batch_writer(fleet, m, done, acked, brief, tmp_path) for m in range(3)]
    run_threads([lambda: maintainer(3, "reindex"), lambda: maintainer(4, "gc"), *writers])
    records = export_records(fleet, 9, "re")
    lasting = {key_id(r["doc"]["key"]): r["doc"]["content"] for r in records if "brief" not in r["doc"]["key"]}
    assert lasting == acked
    assert {key_id(r["doc"]["key"]) for r in records if "brief" in r["doc"]["key"]} <= brief
    server = Stdio(fleet, 9, tmp_path / "re-reader.err")
    try:
        mid = server.open("reader", namespace="re")
        for k in random.Random(5).sample(sorted(acked), 40):
            got = server.ask("memory/retrieve/req", memory_id=mid, query=acked[k], tier="semantic", limit=1)
            assert [key_id(e["key"]) for e in got["entries"]] == [k], f"{k} is not found after the reindex"
            assert got["total"] >= len(acked), got["total"]
        assert server.close() == 0
    finally:
        server.kill()
    time.sleep(1.1)  # every short-lived entry has expired
    assert fleet.mem(9, "gc").code == 0
    records = export_records(fleet, 9, "re")
    assert {key_id(r["doc"]["key"]): r["doc"]["content"] for r in records} == acked
    check_store_is_sound(fleet, 9, "re", records)


# -- 1g. churn: stores and forgets of the same keys on several machines -----------------------------------


def churner(fleet: Fleet, m: int, rounds: int, limit: int, logdir: Path) -> None:
    """Stores and forgets the same 30 keys (shared by every churner), in random order."""
    rng = random.Random(m)
    server = Stdio(fleet, m, logdir / f"churn-m{m}.err", extra_env={"MEM_MAX_ENTRIES": str(limit)})
    try:
        mid = server.open(f"m{m}", namespace="churn")
        for k in range(rounds):
            keys = rng.sample(range(30), 8)
            if rng.random() < 0.6:
                entries = [{"key": {"k": str(n)}, "content": f"m{m} round {k}", "tier": "semantic",
                            "tags": [f"g{n % 3}"]} for n in keys]  # fmt: skip
                resp = server.ask("memory/store/req", memory_id=mid, entries=entries)
                assert resp["type"] == "memory/store/resp", resp
            elif rng.random() < 0.5:
                resp = server.ask("memory/forget/req", memory_id=mid, tier="semantic", tags=[f"g{rng.randrange(3)}"])
                assert resp["type"] == "memory/forget/resp", resp
            else:
                resp = server.ask(
                    "memory/forget/req", memory_id=mid, tier="semantic", keys=[{"k": str(n)} for n in keys]
                )
                assert resp["type"] == "memory/forget/resp", resp
        assert server.close() == 0
    finally:
        server.kill()
        no_leak(server.stderr(), "serve-stdio")


@pytest.mark.slow
def test_churn_on_shared_keys_keeps_the_counts_true(fleet: Fleet, tmp_path: Path) -> None:
    """Four machines store and forget the same keys at once. Afterwards each key is there once at
    most, `stats` counts what a recount finds, and the namespace's capacity is still exact: with
    everything forgotten, exactly `max_entries` new entries fit, one more does not (a usage counter
    that drifted under the churn would let too many in or refuse too early)."""
    limit = 40
    run_threads([lambda m=m: churner(fleet, m, 120 if STRESS else 30, limit, tmp_path) for m in range(4)])
    records = export_records(fleet, 9, "churn")
    keys = [key_id(r["doc"]["key"]) for r in records]
    assert len(keys) == len(set(keys)) and len(keys) <= 30
    check_store_is_sound(fleet, 9, "churn", records)
    server = Stdio(fleet, 9, tmp_path / "churn-check.err", extra_env={"MEM_MAX_ENTRIES": str(limit)})
    try:
        mid = server.open("checker", namespace="churn")
        assert server.ask("memory/forget/req", memory_id=mid, tier="semantic", all=True)["type"] == "memory/forget/resp"
        fill = [{"key": {"fill": str(n)}, "content": f"fill {n}", "tier": "semantic"} for n in range(limit)]
        resp = server.ask("memory/store/req", memory_id=mid, entries=fill)
        assert resp["type"] == "memory/store/resp" and len(resp["stored"]) == limit, resp
        extra = server.ask("memory/store/req", memory_id=mid, entries=[{"key": {"fill": "over"}, "content": "x",
                                                                         "tier": "semantic"}])  # fmt: skip
        assert extra.get("code") == "memory_full", extra
        assert server.close() == 0
    finally:
        server.kill()
    check_store_is_sound(fleet, 9, "churn", export_records(fleet, 9, "churn"))


# -- 2. clients killed mid-transaction ----------------------------------------------------------


def crash_batch(b: int, size: int) -> list[dict]:
    pad = "x" * 120
    return [
        {"key": {"b": str(b), "i": str(i)}, "content": f"batch {b} entry {i} {pad}", "tier": "semantic",
         "tags": [f"b{b}"]}
        for i in range(size)
    ]  # fmt: skip


@dataclass
class CrashLog:
    acked: set[int] = field(default_factory=set)
    killed: set[int] = field(default_factory=set)  # sent, no reply seen before the kill
    mid_transaction: set[int] = field(default_factory=set)  # killed while the database showed its write open
    steady: set[int] = field(default_factory=set)  # the steady writer's acknowledged batches


class Watcher:
    """Sees, in pg_stat_activity, whether a machine's session holds a transaction that has
    written (it has a transaction id): the moment to kill it for a mid-transaction crash."""

    def __init__(self, url: str) -> None:
        import psycopg

        self.conn = psycopg.connect(url, autocommit=True)

    def writing(self, machine: int) -> bool:
        row = self.conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s AND backend_xid IS NOT NULL",
            [f"fleet-{machine}"],
        ).fetchone()
        return bool(row and row[0])

    def close(self) -> None:
        self.conn.close()


def await_or_kill_mid_write(server: Stdio, watcher: Watcher, machine: int, b: int, log: CrashLog) -> dict | None:
    """The batch's reply, unless the database shows its transaction writing first: then SIGKILL."""
    while True:
        resp = server.reply(timeout=0.001)
        if resp is not None:
            return resp
        if watcher.writing(machine):
            server.kill()
            log.mid_transaction.add(b)
            return None


def kill_loop(fleet: Fleet, machine: int, first: int, kills: int, size: int, log: CrashLog, logdir: Path,
              rng: random.Random) -> None:  # fmt: skip
    """Start a server, store batches, and SIGKILL it, `kills` times: at a random moment, or (on
    PostgreSQL, every other time) the moment its transaction has written and not yet committed."""
    b = first
    span = None  # how long a batch takes here, measured on the first one
    watcher = Watcher(fleet.url) if fleet.url else None
    try:
        for n in range(kills):
            server = Stdio(fleet, machine, logdir / f"kill-m{machine}-{n}.err")
            mid = server.open(f"killer{machine}", namespace="crash")
            while True:
                b += 1
                start = time.monotonic()
                server.send("memory/store/req", memory_id=mid, entries=crash_batch(b, size))
                if span is None:  # calibrate: let the first batch finish
                    resp = server.reply()
                    span = time.monotonic() - start
                elif watcher is not None and n % 2 == 1:
                    resp = await_or_kill_mid_write(server, watcher, machine, b, log)
                else:
                    resp = server.reply(timeout=rng.uniform(0, 1.3 * span))
                if resp is None:
                    server.kill()
                    log.killed.add(b)
                    break
                assert resp["type"] == "memory/store/resp" and len(resp["stored"]) == size, resp
                log.acked.add(b)
            no_leak(server.stderr(), "a killed serve-stdio")
    finally:
        if watcher is not None:
            watcher.close()


def steady_writer(fleet: Fleet, machine: int, first: int, stop: threading.Event, log: CrashLog, logdir: Path) -> None:
    """Small batches all the while, from a server nobody kills: every one must survive."""
    server = Stdio(fleet, machine, logdir / "steady.err")
    mid = server.open("steady", namespace="crash")
    b = first
    while not stop.is_set():
        b += 1
        resp = server.ask("memory/store/req", memory_id=mid, entries=crash_batch(b, 5))
        assert resp["type"] == "memory/store/resp" and len(resp["stored"]) == 5, resp
        log.steady.add(b)
    assert server.close() == 0
    no_leak(server.stderr(), "serve-stdio")


def run_crashes(fleet: Fleet, tmp_path: Path, killers: int, kills: int, size: int) -> CrashLog:
    rng = random.Random(int(os.environ.get("MEM_FLEET_SEED", "0")) or None)
    log = CrashLog()
    stop = threading.Event()

    def killing() -> None:
        try:
            run_threads([
                lambda k=k: kill_loop(fleet, k, k * 100_000, kills, size, log, tmp_path, random.Random(rng.random()))
                for k in range(killers)
            ])  # fmt: skip
        finally:
            stop.set()

    run_threads([killing, lambda: steady_writer(fleet, 7, 900_000, stop, log, tmp_path)])
    verify_crashes(fleet, log, size)
    return log


def verify_crashes(fleet: Fleet, log: CrashLog, size: int) -> None:
    records = export_records(fleet, "checker", "crash")
    batches: dict[int, list[dict]] = defaultdict(list)
    for r in records:
        assert r["kind"] == "semantic", r
        batches[int(r["doc"]["key"]["b"])].append(r["doc"])
    for b in sorted(batches):
        docs = batches[b]
        expected = {key_id(e["key"]): e["content"] for e in crash_batch(b, 5 if b in log.steady else size)}
        got = {key_id(d["key"]): d["content"] for d in docs}
        assert len(docs) == len(got), f"batch {b} holds a record twice"
        if b in log.acked or b in log.steady:
            assert got == expected, f"acknowledged batch {b}: {len(got)} of {len(expected)} records, or wrong content"
        else:
            assert b in log.killed, f"batch {b} was never sent"
            assert got == expected, f"batch {b}, killed mid-write, is half there: {len(got)} of {len(expected)}"
    lost = sorted((log.acked | log.steady) - set(batches))
    assert not lost, f"acknowledged batches lost: {lost}"
    check_store_is_sound(fleet, "checker", "crash", records)
    whole = sorted(log.killed & set(batches))
    print(f"{fleet.backend}: {len(log.acked)} batches acknowledged, {len(log.killed)} killed "
          f"({len(log.mid_transaction)} inside an open transaction; {len(whole)} committed whole, the rest absent), "
          f"{len(log.steady)} steady batches")  # fmt: skip


@pytest.mark.slow
def test_clients_killed_mid_transaction_lose_nothing_acknowledged(fleet: Fleet, tmp_path: Path) -> None:
    killers, kills = (3, 30) if STRESS else (2, 4)
    # files: 1000 entries are one journal line, the unit the files backend writes whole (a larger
    # batch is several lines, kept as far as they got); PostgreSQL: 1500, so that one transaction
    # spans several writes
    log = run_crashes(fleet, tmp_path, killers, kills, size=1000 if fleet.url is None else 1500)
    assert len(log.killed) == killers * kills
    if fleet.url is not None:
        assert log.mid_transaction, "no kill landed inside an open transaction: the test proved nothing"


def test_a_connection_cut_mid_transaction_writes_nothing_and_the_server_recovers(
    store_url: str, tmp_path: Path
) -> None:
    """The database ends a `serve-stdio`'s session while its batch is half written (as a failover
    or an administrator would): the reply is an error that says nothing of the password, the
    batch is absent (or, if it committed first, whole), and the same server's next batch works."""
    f = Fleet("postgres", tmp_path, with_password(store_url, SECRET))
    watcher = Watcher(store_url)
    server = Stdio(f, 4, tmp_path / "cut.err")
    outcome: dict[int, str] = {}
    try:
        mid = server.open("victim", namespace="crash")
        for b in range(1, 7):
            server.send("memory/store/req", memory_id=mid, entries=crash_batch(b, 1500))
            resp = None
            if b % 2 == 0:  # cut this one
                while resp is None:
                    resp = server.reply(timeout=0.001)
                    if resp is None and watcher.writing(4):
                        watcher.conn.execute(
                            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                            "WHERE application_name = 'fleet-4' AND backend_xid IS NOT NULL"
                        )
                        resp = server.reply(timeout=120)
                        assert resp is not None, "no answer after the connection was cut"
                        outcome[b] = "cut"
            else:
                resp = server.reply(timeout=120)
            assert resp is not None
            no_leak(orjson.dumps(resp).decode(), "the reply to a cut write")
            if resp["type"] == "memory/store/resp":
                assert len(resp["stored"]) == 1500, resp
                outcome[b] = "acked"
            else:
                assert b % 2 == 0, f"an uncut batch failed: {resp}"
                assert resp["type"] == "error" and resp["retryable"] is True, resp
                outcome[b] = "refused"
        assert server.close() == 0
    finally:
        server.kill()
        watcher.close()
    no_leak(server.stderr(), "serve-stdio's log")
    assert "refused" in outcome.values(), f"no write was cut mid-transaction: {outcome}"
    records = export_records(f, 9, "crash")
    counts = Counter(int(r["doc"]["key"]["b"]) for r in records)
    for b, what in outcome.items():
        assert counts.get(b, 0) in ((1500,) if what == "acked" else (0, 1500)), (b, what, counts.get(b))
    check_store_is_sound(f, 9, "crash", records)


# -- 3. two homes, one store: the terminal session -------------------------------------------------


def test_two_homes_share_one_store(fleet: Fleet) -> None:
    """Home A stores; home B finds it by a query; B forgets it; A no longer sees it. On the files
    backend two homes are two stores, and B must NOT see A's note (the control)."""
    a, b = "A", "B"
    if fleet.url is None:  # two distinct homes, no store URL: nothing is shared
        a_home = Fleet("files", fleet.root / "a")
        b_home = Fleet("files", fleet.root / "b")
    else:
        a_home = b_home = fleet
    note = "the staging database password rotates every friday at noon"
    stored = a_home.ok(a, "store", note, "-t", "semantic", "-k", "topic=rotation", "-n", "team")
    assert stored == [{"key": {"topic": "rotation"}, "stored": True}]
    found = b_home.ok(b, "retrieve", "-q", "when does the staging password rotate", "-t", "semantic", "-n", "team")
    if fleet.url is None:
        assert found == []
        return
    assert [(e["key"], e["content"]) for e in found] == [({"topic": "rotation"}, note)]
    forgot = b_home.ok(b, "forget", "-t", "semantic", "-k", "topic=rotation", "-n", "team")
    assert forgot == {"deleted": 1}
    assert a_home.ok(a, "retrieve", "-q", "staging password rotation", "-t", "semantic", "-n", "team") == []
    # the homes stayed homes: the records live in the database, not in either folder
    for h in (a_home.home(a), b_home.home(b)):
        leftovers = [p for p in h.rglob("*") if p.is_file() and "rotat" in p.read_text(errors="ignore")]
        assert not leftovers, leftovers


# -- what users see when the store is out of reach ---------------------------------------------------


def test_errors_name_the_store_without_its_password(server_url: str, tmp_path: Path) -> None:
    """An unreachable server and a missing database: one line, exit 7, no password, no traceback."""
    unreachable = f"postgresql://fleet:{SECRET}@127.0.0.1:1/nowhere?connect_timeout=3"
    missing = with_password(with_database(server_url, "no_such_db_here"), SECRET)
    for url in (unreachable, missing):
        f = Fleet("postgres", tmp_path, url)
        run = f.mem(0, "stats")
        no_leak(run.out + run.err, "mem stats")
        assert run.code == 7, (run.code, run.err)
        assert len(run.err.strip().splitlines()) == 1, run.err
        server = Stdio(f, 1, tmp_path / "unreachable.err")
        try:
            server.send("memory/init/req", namespace="x", scope={})
            resp = server.reply(timeout=60)
            assert resp is not None, "serve-stdio did not answer"
            no_leak(orjson.dumps(resp).decode(), "serve-stdio's answer")
            assert resp["type"] == "error" and resp["code"] == "runtime_error" and resp["req_id"] == "r1", resp
            assert "***" in resp["message"] or "@" not in resp["message"], resp  # the store named, its password masked
        finally:
            server.kill()
        no_leak(server.stderr(), "serve-stdio's log")


def test_stats_and_doctor_never_show_the_password(store_url: str, tmp_path: Path) -> None:
    f = Fleet("postgres", tmp_path, with_password(store_url, SECRET))
    f.ok(0, "store", "hello", "-t", "semantic")
    for args in (["stats"], ["doctor"], ["stats", "-f", "json"], ["doctor", "-f", "json"], ["namespaces"]):
        run = f.mem(1, *args)
        assert run.code == 0, run.err
        no_leak(run.out + run.err, f"mem {' '.join(args)}")
