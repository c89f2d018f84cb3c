"""A randomised interleaving of writers, maintenance commands and SIGKILLs, and a checker.

Written from the outside: it only runs `mem` commands and speaks the public wire protocols
(A2E NDJSON to `mem serve-stdio`, JSON-RPC to `mem serve-mcp`); it knows nothing of the files.

For a seed, a duration and a store home, `run()` starts, all at once:

- writers of three kinds, each with its own keys (`{"w": WRITER, "i": N}`, or `WRITER-N` for
  key-value records) so that the order of the operations on a key is the writer's own order:
  - `cli`: one-shot `mem store` / `mem forget` / `mem retrieve` / `mem set` / `mem get`
    processes; working-tier writes go through sessions made with `mem init`;
  - `stdio`: a `mem serve-stdio` (handshake, memory/init, memory/store, memory/retrieve,
    memory/forget); working-tier writes use a `mem init` session's memory_id;
  - `mcp`: a `mem serve-mcp` driven with raw JSON-RPC (memory_store, memory_retrieve,
    memory_forget, memory_set, memory_get);
- a maintenance loop choosing at random among `mem gc`, `mem reindex` (same embedder, or a
  switch between `hash` embedders of different dimensions), `mem doctor --repair`,
  `mem namespaces delete`, `mem session close`, `mem import` of an export made at the start,
  and SIGKILL of a random writer (which is then restarted);
- with `MEM_CHECKPOINTS=background` and a tiny `MEM_CHECKPOINT_BYTES`, so checkpoints run all
  the time.

Every operation is recorded with the interval (sent, ended) in which it can have taken effect.
An operation that was not acknowledged (killed, or answered with an error) may or may not have
taken effect. The checker (`possible_values`) derives for each key the set of values a read may
see: an acknowledged operation wholly before the read and wholly after another one hides the
earlier one; operations that overlap each other or the read leave every outcome possible. So an
acknowledged write must be readable at the end unless an acknowledged forget, namespace delete
or session close (for the working tier) could have come after it.

At the end, every process is stopped and the store is read back by fresh processes (`mem
export`, a fresh `mem serve-stdio` retrieving every key, a query per namespace) and checked
with `mem doctor`. `RunResult.problems()` lists lost writes, wrong or resurrected values, failed
reads and writes (errors other than the documented ones), crashed processes, failed maintenance
commands and doctor findings.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
NAMESPACES = ("alpha", "beta", "gamma")
ARCHIVE = "archive"  # seeded at the start, exported, deleted and imported again during the run
EMBEDDERS = ("hash", "hash:32")  # `mem reindex --embedder` switches between these
INF = float("inf")
PAUSE = (0.01, 0.06)  # seconds between a writer's operations: bounds the checkpoints a run spawns
ABSENT = None
UNREADABLE = "<unreadable: the read failed>"
WORDS = "budget garden piano lease migration audit marathon visa solar podcast grinder sourdough".split()

# Errors a careful client expects, so not failures: a session closed by `mem session close`
# (memory_not_found / exit 3) and a key-value record that is not there (memory_get).
DOCUMENTED = ("memory_not_found",)


def now() -> float:
    return time.monotonic()


# -- the model -------------------------------------------------------------------------------------

KeyId = tuple  # ("entry", ns, tier, scope, key-json) or ("kv", ns, key)


@dataclass
class Event:
    """One operation on one key: a put of `value`, or a removal (value ABSENT)."""

    value: Any
    sent: float
    ended: float
    acked: bool
    what: str


@dataclass
class Read:
    key: KeyId
    sent: float
    ended: float
    seen: Any
    what: str


def possible_values(events: list[Event], start: float = INF, end: float = INF) -> set[Any]:
    """The values a read over [start, end] may see, given the operations on one key.

    An event is hidden when an acknowledged event began after it ended and ended before the read
    began. Every other event that began before the read ended is a possible outcome; so is
    "absent" while no acknowledged event ended before the read began. Unacknowledged events are
    outcomes but never hide others (they may not have happened)."""
    relevant = [e for e in events if e.sent < end]
    done = [e for e in relevant if e.acked and e.ended < start]
    values = {e.value for e in relevant if not any(f.sent > e.ended for f in done)}
    if not done:
        values.add(ABSENT)
    return values


@dataclass
class Model:
    """Every operation of a run, recorded from several threads."""

    events: dict[KeyId, list[Event]] = field(default_factory=lambda: defaultdict(list))
    namespace_deletes: list[tuple[str, Event]] = field(default_factory=list)
    session_closes: list[tuple[str, Event]] = field(default_factory=list)
    imports: list[Event] = field(default_factory=list)
    archive: dict[KeyId, Any] = field(default_factory=dict)  # what an import puts back
    reads: list[Read] = field(default_factory=list)
    sessions: dict[str, tuple[str, str]] = field(default_factory=dict)  # open: id -> (ns, agent)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, key: KeyId, event: Event) -> None:
        with self.lock:
            self.events[key].append(event)

    def read(self, read: Read) -> None:
        with self.lock:
            self.reads.append(read)

    def history(self, key: KeyId) -> list[Event]:
        """The key's own events plus the namespace deletes, session closes and imports that
        touch it."""
        ns = key[1]
        out = list(self.events.get(key, []))
        out += [e for name, e in self.namespace_deletes if name == ns]
        if key[0] == "entry" and key[2] == "working":
            out += [e for sid, e in self.session_closes if sid == key[3]]
        if key in self.archive:
            out += [Event(self.archive[key], e.sent, e.ended, e.acked, e.what) for e in self.imports]
        return out

    def keys(self) -> set[KeyId]:
        return set(self.events) | set(self.archive)


# -- processes -------------------------------------------------------------------------------------


def mem_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "a2e_mem.cli.main", *args]


def store_env(home: Path, checkpoint_bytes: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEM_")}
    env.update(
        MEM_HOME=str(home),
        MEM_CHECKPOINTS="background",
        MEM_CHECKPOINT_BYTES=str(checkpoint_bytes),
        MEM_LOG="warning",
    )
    return env  # no MEM_EMBEDDER: every process follows the one recorded in the store


def entry_key(ns: str, tier: str, scope: str, key: dict[str, str]) -> KeyId:
    return ("entry", ns, tier, scope, json.dumps(key, sort_keys=True))


def key_args(key: dict[str, str]) -> list[str]:
    return [a for name, value in key.items() for a in ("--key", f"{name}={value}")]


def content_for(rng: random.Random, writer: str, n: int, version: int) -> str:
    return f"note {writer} {n} v{version} {' '.join(rng.sample(WORDS, 3))}"


def error_code(text: str) -> str:
    return next((code for code in DOCUMENTED if code in text), "")


class Killed(Exception):
    """The process under an operation died (killed by the run, or crashed)."""


@dataclass
class Counters:
    ops: int = 0
    acks: int = 0
    kills: int = 0
    restarts: int = 0
    per_writer: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    maintenance: dict[str, int] = field(default_factory=lambda: defaultdict(int))


class Run:
    """Shared state of one run: the model, the failures seen, the writers."""

    def __init__(self, home: Path, seed: int, checkpoint_bytes: int) -> None:
        self.home = home
        self.seed = seed
        self.env = store_env(home, checkpoint_bytes)
        self.logs = home.parent / f"logs-{seed}"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.model = Model()
        self.counters = Counters()
        self.failures: dict[str, list[str]] = defaultdict(list)
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.embedder = EMBEDDERS[0]
        self.timeline: list[str] = []  # maintenance commands and kills, for the report

    def fail(self, kind: str, message: str) -> None:
        with self.lock:
            self.failures[kind].append(message[:600])

    def count(self, acked: bool, who: str) -> None:
        with self.lock:
            self.counters.per_writer[who] += 1
            self.counters.ops += 1
            self.counters.acks += acked

    def cli(self, *args: str, stdin: bytes | None = None, holder: Any = None, timeout: float = 120):
        """Run one `mem` command; returns (rc, stdout, stderr, sent, ended). `holder.proc` is set
        while it runs, so that a kill can find it."""
        sent = now()
        proc = subprocess.Popen(
            mem_cmd(*args),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self.env,
            cwd=ROOT,
        )
        if holder is not None:
            holder.proc = proc
        try:
            out, err = proc.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            self.fail("hung processes", f"mem {' '.join(args)}: no exit in {timeout} s")
        finally:
            if holder is not None:
                holder.proc = None
        return proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"), sent, now()


# -- writers ---------------------------------------------------------------------------------------


class Writer:
    """A writer with its own keys, run on its own thread until the run stops."""

    kind = ""
    tiers: tuple[str, ...] = ("episodic", "semantic", "working")
    pause = PAUSE

    def __init__(self, run: Run, name: str, rng: random.Random) -> None:
        self.run, self.name, self.rng = run, name, rng
        self.proc: subprocess.Popen | None = None
        self.killed_by_run = False
        self.keys: list[tuple[KeyId, dict[str, Any]]] = []  # (id, how to address it)
        self.versions: dict[KeyId, int] = defaultdict(int)
        self.counter = itertools.count()
        self.sessions: dict[str, str] = {}  # namespace -> `mem init` session id

    # The loop --------------------------------------------------------------------------------

    def loop(self) -> None:
        try:
            self.start()
            while not self.run.stop.is_set():
                self.step()
                time.sleep(self.rng.uniform(*self.pause))
        except Exception as exc:  # noqa: BLE001 - reported, not raised: the run goes on
            self.run.fail("driver errors", f"{self.name}: {type(exc).__name__}: {exc}")

    def start(self) -> None:
        pass

    def close(self) -> None:
        pass

    def kill(self) -> bool:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return False
        self.killed_by_run = True
        proc.send_signal(signal.SIGKILL)
        return True

    def step(self) -> None:
        choice = self.rng.choices(["store", "forget", "read", "set", "get"], [6, 1, 3, 1, 1])[0]
        if choice in ("set", "get") and not self.has_kv():
            choice = "store"
        if choice in ("forget", "read", "get") and not self.keys:
            choice = "store"
        getattr(self, "op_" + choice)()

    def has_kv(self) -> bool:
        return True

    # Choosing keys ----------------------------------------------------------------------------

    def namespace(self) -> str:
        """Mostly the first namespace, so that its shards are hot: checkpoints of a shard then
        run while writers append to it and maintenance rebuilds it."""
        return self.rng.choice([NAMESPACES[0]] * 3 + list(NAMESPACES[1:]))

    def new_or_old(self, kind: str) -> tuple[KeyId, dict[str, Any]] | None:
        mine = [k for k in self.keys if k[0][0] == kind]
        if mine and self.rng.random() < 0.4:
            return self.rng.choice(mine)
        return None

    def entry_target(self) -> tuple[KeyId, dict[str, Any]] | None:
        """An existing entry of this writer, or a new one (None when no session is at hand)."""
        old = self.new_or_old("entry")
        if old:
            return old
        ns = self.namespace()
        tier = self.rng.choice([*self.tiers, "semantic"])  # the semantic tier is shared: the hottest
        key = {"w": self.name, "i": str(next(self.counter))}
        if tier == "working":
            sid = self.session(ns)
            if sid is None:
                return None
            addr = {"ns": ns, "tier": tier, "key": key, "session": sid}
            kid = entry_key(ns, tier, sid, key)
        else:
            addr = {"ns": ns, "tier": tier, "key": key}
            kid = entry_key(ns, tier, self.name if tier == "episodic" else "", key)
        self.keys.append((kid, addr))
        return kid, addr

    def session(self, ns: str) -> str | None:
        """This writer's open `mem init` session in `ns`, made if needed."""
        sid = self.sessions.get(ns)
        with self.run.model.lock:
            if sid and sid in self.run.model.sessions:
                return sid
        holder = self if self.kind == "cli" else None  # a server writer's proc is its server
        rc, out, err, _, _ = self.run.cli("init", "-n", ns, "-a", self.name, "-f", "json", holder=holder)
        if rc != 0:
            if not self.take_kill(rc):
                self.run.fail("failed writes", f"{self.name}: mem init -n {ns}: exit {rc}: {err.strip()}")
            return None
        sid = json.loads(out)["memory_id"]
        self.sessions[ns] = sid
        with self.run.model.lock:
            self.run.model.sessions[sid] = (ns, self.name)
        return sid

    def forget_session(self, sid: str) -> None:
        for ns, s in list(self.sessions.items()):
            if s == sid:
                del self.sessions[ns]

    def take_kill(self, rc: int | None) -> bool:
        """Whether the last process ended by the run's SIGKILL (then it is no failure)."""
        killed = self.killed_by_run and rc == -signal.SIGKILL
        self.killed_by_run = False
        return killed

    # Recording --------------------------------------------------------------------------------

    def put(self, kid: KeyId, value: Any, sent: float, ended: float, acked: bool, what: str) -> None:
        self.run.model.record(kid, Event(value, sent, ended, acked, f"{self.name} {what}"))
        self.run.count(acked, self.name)

    def remove(self, kid: KeyId, sent: float, ended: float, acked: bool, what: str) -> None:
        self.put(kid, ABSENT, sent, ended, acked, what)

    def saw(self, kid: KeyId, sent: float, ended: float, seen: Any, what: str) -> None:
        self.run.model.read(Read(kid, sent, ended, seen, f"{self.name} {what}"))
        self.run.count(True, self.name)

    def next_content(self, kid: KeyId, addr: dict[str, Any]) -> str:
        self.versions[kid] += 1
        key = addr["key"]
        return content_for(self.rng, self.name, key["i"] if isinstance(key, dict) else key, self.versions[kid])


class CliWriter(Writer):
    """One-shot `mem` commands."""

    kind = "cli"
    pause = (0.1, 0.4)  # a process an operation: back to back they would take a core

    def scope_args(self, addr: dict[str, Any]) -> list[str]:
        if addr["tier"] == "working":
            return ["-s", addr["session"], "-t", "working"]
        return ["-n", addr["ns"], "-a", self.name, "-t", addr["tier"]]

    def outcome(self, what: str, rc: int, err: str, documented: bool = False) -> bool | None:
        """True: acknowledged; False: a documented refusal (exit 3 for a closed session or a
        missing record); None: failed (reported) or killed."""
        if rc == 0:
            return True
        if self.take_kill(rc):
            return None
        if rc == 3 and documented:
            return False
        self.run.fail("failed writes" if "retrieve" not in what and "get" not in what else "failed reads",
                      f"{self.name}: mem {what}: exit {rc}: {err.strip()[-300:]}")  # fmt: skip
        return None

    def op_store(self) -> None:
        target = self.entry_target()
        if target is None:
            return
        kid, addr = target
        content = self.next_content(kid, addr)
        what = f"store {addr['key']} {addr['tier']} in {addr['ns']}"
        rc, out, err, sent, ended = self.run.cli(
            "store", *self.scope_args(addr), *key_args(addr["key"]), "-f", "ndjson", content, holder=self
        )
        ok = self.outcome(what, rc, err, documented=addr["tier"] == "working")
        if ok and not (out.strip() and json.loads(out.splitlines()[0]).get("stored")):
            ok = None
            self.run.fail("failed writes", f"{self.name}: mem {what}: {out.strip()}")
        if ok is False and addr["tier"] == "working":
            self.forget_session(addr["session"])
        self.put(kid, content, sent, ended, bool(ok), what)

    def op_forget(self) -> None:
        entries = [k for k in self.keys if k[0][0] == "entry"]
        if not entries:
            return
        kid, addr = self.rng.choice(entries)
        what = f"forget {addr['key']} {addr['tier']} in {addr['ns']}"
        rc, out, err, sent, ended = self.run.cli(
            "forget", *self.scope_args(addr), *key_args(addr["key"]), "-f", "ndjson", holder=self
        )
        self.remove(kid, sent, ended, bool(self.outcome(what, rc, err, addr["tier"] == "working")), what)

    def op_read(self) -> None:
        kid, addr = self.rng.choice(self.keys)
        if kid[0] == "kv":
            return self.op_get()
        what = f"retrieve {addr['key']} {addr['tier']} in {addr['ns']}"
        rc, out, err, sent, ended = self.run.cli(
            "retrieve", *self.scope_args(addr), *key_args(addr["key"]), "-f", "ndjson", holder=self
        )
        if self.outcome(what, rc, err, documented=addr["tier"] == "working"):
            found = [json.loads(line) for line in out.splitlines() if line.strip()]
            self.saw(kid, sent, ended, found[0]["content"] if found else ABSENT, what)

    def op_set(self) -> None:
        kid, addr = self.new_or_old("kv") or self.new_kv()
        value = {"w": self.name, "v": self.versions[kid] + 1}
        self.versions[kid] += 1
        what = f"set {addr['key']} in {addr['ns']}"
        rc, out, err, sent, ended = self.run.cli(
            "set", "-n", addr["ns"], "-f", "ndjson", addr["key"], json.dumps(value), holder=self
        )
        self.put(kid, json.dumps(value, sort_keys=True), sent, ended, bool(self.outcome(what, rc, err)), what)

    def op_get(self) -> None:
        kvs = [k for k in self.keys if k[0][0] == "kv"]
        if not kvs:
            return
        kid, addr = self.rng.choice(kvs)
        what = f"get {addr['key']} in {addr['ns']}"
        rc, out, err, sent, ended = self.run.cli("get", "-n", addr["ns"], "-f", "ndjson", addr["key"], holder=self)
        ok = self.outcome(what, rc, err, documented=True)
        if ok is not None:
            seen = json.dumps(json.loads(out)["value"], sort_keys=True) if ok else ABSENT
            self.saw(kid, sent, ended, seen, what)

    def new_kv(self) -> tuple[KeyId, dict[str, Any]]:
        ns = self.namespace()
        key = f"{self.name}-{next(self.counter)}"
        kid, addr = ("kv", ns, key), {"ns": ns, "key": key}
        self.keys.append((kid, addr))
        return kid, addr


class ServerWriter(Writer):
    """A long-lived server on stdin/stdout, restarted when it dies."""

    command: tuple[str, ...] = ()

    def start(self) -> None:
        self.stderr = open(self.run.logs / f"{self.name}.stderr", "ab")  # noqa: SIM115 - closed in close()
        try:
            self.spawn()
        except Killed:  # killed during its handshake
            self.died()

    def spawn(self) -> None:
        self.proc = subprocess.Popen(
            mem_cmd(*self.command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env=self.run.env,
            cwd=ROOT,
        )
        self.n = 0
        self.hello()

    def hello(self) -> None:
        pass

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc and self.proc.stdin
        try:
            self.proc.stdin.write(json.dumps(message).encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise Killed() from exc

    def receive(self) -> dict[str, Any]:
        assert self.proc and self.proc.stdout
        while True:
            line = self.proc.stdout.readline()
            if not line.endswith(b"\n"):  # end of output, or a line cut short by a kill
                raise Killed()
            message = json.loads(line)
            if "id" in message or "req_id" in message or message.get("type") == "error":
                return message

    def step(self) -> None:
        try:
            super().step()
        except Killed:
            self.died()

    def died(self) -> None:
        """The server is gone: a crash unless the run killed it; start another."""
        assert self.proc is not None
        rc = self.proc.wait()
        if not self.take_kill(rc):
            tail = (self.run.logs / f"{self.name}.stderr").read_text(errors="replace")[-400:]
            self.run.fail("crashed processes", f"{self.name} ({self.kind}) exited {rc}: {tail.strip()}")
        with self.run.lock:
            self.run.counters.restarts += 1
        if self.run.stop.is_set():
            self.proc = None  # accounted for: nothing left to close
            return
        try:
            self.spawn()
        except Killed:  # killed again during its handshake
            self.died()

    def close(self) -> None:
        """End of input: the server must exit 0 promptly with everything acknowledged on disk."""
        proc, self.proc = self.proc, None
        if proc is not None:
            self.end(proc)
        self.stderr.close()

    def end(self, proc: subprocess.Popen) -> None:
        try:
            assert proc.stdin
            proc.stdin.close()
        except OSError:
            pass
        try:
            rc = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
            self.run.fail("hung processes", f"{self.name}: did not exit at end of input")
        if rc != 0 and not self.take_kill(rc):
            self.run.fail("crashed processes", f"{self.name} ({self.kind}) exited {rc} at end of input")


class StdioWriter(ServerWriter):
    """`mem serve-stdio`, speaking A2E NDJSON."""

    kind = "stdio"
    command = ("serve-stdio",)

    def hello(self) -> None:
        reply = self.ask("handshake/req", agent_id=self.name, agent_caps=[], auth_token="")
        if not reply.get("ok"):
            raise RuntimeError(f"handshake refused: {reply}")
        self.inits: dict[str, str] = {}  # namespace -> memory_id of this connection's session

    def ask(self, kind: str, **fields: Any) -> dict[str, Any]:
        self.n += 1
        rid = f"{self.name}-{self.n}"
        self.send({"type": kind, "id": rid, "version": "1.0", "ts": time.time(), **fields})
        reply = self.receive()
        if reply.get("req_id") != rid:
            raise RuntimeError(f"reply to {rid} answers {reply.get('req_id')!r}: {reply}")
        return reply

    def memory_id(self, addr: dict[str, Any]) -> str | None:
        """The session to address `addr` through (None, reported, if memory/init fails)."""
        if addr["tier"] == "working":
            return addr["session"]
        ns = addr["ns"]
        if ns not in self.inits:
            reply = self.ask("memory/init/req", namespace=ns, scope={"agent": self.name})
            if reply["type"] != "memory/init/resp":
                self.run.fail("failed writes", f"{self.name}: memory/init in {ns}: {reply}")
                return None
            self.inits[ns] = reply["memory_id"]
        return self.inits[ns]

    def outcome(self, what: str, reply: dict[str, Any], addr: dict[str, Any], reads: bool = False) -> bool | None:
        if reply["type"] != "error":
            return True
        if reply.get("code") in DOCUMENTED:  # a session closed (or its namespace deleted): make another
            if addr["tier"] == "working":
                self.forget_session(addr["session"])
            else:
                self.inits.pop(addr["ns"], None)
            return False
        self.run.fail("failed reads" if reads else "failed writes", f"{self.name}: {what}: {reply}")
        return None

    def op_store(self) -> None:
        target = self.entry_target()
        if target is None:
            return
        kid, addr = target
        content = self.next_content(kid, addr)
        what = f"memory/store {addr['key']} {addr['tier']} in {addr['ns']}"
        mid = self.memory_id(addr)
        if mid is None:
            return
        sent = now()
        entry = {"key": addr["key"], "content": content, "tier": addr["tier"], "tags": [self.name]}
        try:
            reply = self.ask("memory/store/req", memory_id=mid, entries=[entry])
        except Killed:
            self.put(kid, content, sent, now(), False, what)
            raise
        ok = self.outcome(what, reply, addr)
        if ok and reply.get("stored") != [addr["key"]]:
            ok = None
            self.run.fail("failed writes", f"{self.name}: {what}: {reply}")
        self.put(kid, content, sent, now(), bool(ok), what)

    def op_forget(self) -> None:
        entries = [k for k in self.keys if k[0][0] == "entry"]
        if not entries:
            return
        kid, addr = self.rng.choice(entries)
        what = f"memory/forget {addr['key']} {addr['tier']} in {addr['ns']}"
        mid = self.memory_id(addr)
        if mid is None:
            return
        sent = now()
        try:
            reply = self.ask("memory/forget/req", memory_id=mid, keys=[addr["key"]], tier=addr["tier"])
        except Killed:
            self.remove(kid, sent, now(), False, what)
            raise
        self.remove(kid, sent, now(), bool(self.outcome(what, reply, addr)), what)

    def op_read(self) -> None:
        kid, addr = self.rng.choice(self.keys)
        what = f"memory/retrieve {addr['key']} {addr['tier']} in {addr['ns']}"
        mid = self.memory_id(addr)
        if mid is None:
            return
        sent = now()
        reply = self.ask("memory/retrieve/req", memory_id=mid, keys=[addr["key"]], tier=addr["tier"], limit=10)
        ended = now()
        if self.outcome(what, reply, addr, reads=True):
            found = reply["entries"]
            self.saw(kid, sent, ended, found[0]["content"] if found else ABSENT, what)
        if self.rng.random() < 0.3:  # a similarity query must work too (vectors of the right shape)
            reply = self.ask("memory/retrieve/req", memory_id=mid, query=self.rng.choice(WORDS), limit=5)
            if reply["type"] == "error" and reply.get("code") not in DOCUMENTED:
                self.run.fail("failed reads", f"{self.name}: memory/retrieve query in {addr['ns']}: {reply}")

    def has_kv(self) -> bool:
        return False


class McpWriter(ServerWriter):
    """`mem serve-mcp`, driven with raw JSON-RPC over stdio (so that it can be SIGKILLed)."""

    kind = "mcp"
    command = ("serve-mcp",)
    tiers = ("episodic", "semantic")  # its sessions live in the process: no durable working tier

    def hello(self) -> None:
        self.rpc("initialize", protocolVersion="2025-06-18", capabilities={},
                 clientInfo={"name": "interleave", "version": "1"})  # fmt: skip
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def rpc(self, method: str, **params: Any) -> dict[str, Any]:
        self.n += 1
        self.send({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params})
        reply = self.receive()
        if reply.get("id") != self.n or "error" in reply:
            raise RuntimeError(f"{method}: {reply}")
        return reply["result"]

    def call(self, tool: str, what: str, reads: bool = False, **args: Any) -> tuple[Any, str] | None:
        """(structured result, "") on success; (None, code) on a documented error; None on failure."""
        result = self.rpc("tools/call", name=tool, arguments=args)
        text = result["content"][0]["text"] if result.get("content") else ""
        if not result.get("isError"):
            return result.get("structuredContent"), ""
        if error_code(text):
            return None, error_code(text)
        self.run.fail("failed reads" if reads else "failed writes", f"{self.name}: {what}: {text}")
        return None

    def op_store(self) -> None:
        kid, addr = self.entry_target()  # type: ignore[misc] - never None: no working tier here
        content = self.next_content(kid, addr)
        what = f"memory_store {addr['key']} {addr['tier']} in {addr['ns']}"
        entry = {"key": addr["key"], "content": content, "tier": addr["tier"], "tags": [self.name]}
        sent = now()
        try:
            out = self.call("memory_store", what, entries=[entry], namespace=addr["ns"], agent=self.name)
        except Killed:
            self.put(kid, content, sent, now(), False, what)
            raise
        ok = bool(out and out[0] and out[0].get("stored") == [addr["key"]])
        if out and out[0] and not ok:
            self.run.fail("failed writes", f"{self.name}: {what}: {out[0]}")
        self.put(kid, content, sent, now(), ok, what)

    def op_forget(self) -> None:
        entries = [k for k in self.keys if k[0][0] == "entry"]
        if not entries:
            return
        kid, addr = self.rng.choice(entries)
        what = f"memory_forget {addr['key']} {addr['tier']} in {addr['ns']}"
        sent = now()
        try:
            out = self.call("memory_forget", what, keys=[addr["key"]], tier=addr["tier"], namespace=addr["ns"],
                            agent=self.name)  # fmt: skip
        except Killed:
            self.remove(kid, sent, now(), False, what)
            raise
        self.remove(kid, sent, now(), bool(out and out[0] is not None), what)

    def op_read(self) -> None:
        kid, addr = self.rng.choice(self.keys)
        if kid[0] == "kv":
            return self.op_get()
        what = f"memory_retrieve {addr['key']} {addr['tier']} in {addr['ns']}"
        sent = now()
        out = self.call("memory_retrieve", what, reads=True, keys=[addr["key"]], tier=addr["tier"],
                        namespace=addr["ns"], agent=self.name)  # fmt: skip
        ended = now()
        if out and out[0] is not None:
            found = out[0]["entries"]
            self.saw(kid, sent, ended, found[0]["content"] if found else ABSENT, what)
        if self.rng.random() < 0.3:
            self.call("memory_retrieve", f"memory_retrieve query in {addr['ns']}", reads=True,
                      query=self.rng.choice(WORDS), namespace=addr["ns"], agent=self.name)  # fmt: skip

    def op_set(self) -> None:
        old = self.new_or_old("kv")
        if old is None:
            ns = self.namespace()
            key = f"{self.name}-{next(self.counter)}"
            old = ("kv", ns, key), {"ns": ns, "key": key}
            self.keys.append(old)
        kid, addr = old
        self.versions[kid] += 1
        value = {"w": self.name, "v": self.versions[kid]}
        what = f"memory_set {addr['key']} in {addr['ns']}"
        sent = now()
        try:
            out = self.call("memory_set", what, key=addr["key"], value=value, namespace=addr["ns"])
        except Killed:
            self.put(kid, json.dumps(value, sort_keys=True), sent, now(), False, what)
            raise
        self.put(kid, json.dumps(value, sort_keys=True), sent, now(), bool(out and out[0] is not None), what)

    def op_get(self) -> None:
        kvs = [k for k in self.keys if k[0][0] == "kv"]
        if not kvs:
            return
        kid, addr = self.rng.choice(kvs)
        what = f"memory_get {addr['key']} in {addr['ns']}"
        sent = now()
        out = self.call("memory_get", what, reads=True, key=addr["key"], namespace=addr["ns"])
        ended = now()
        if out is not None:
            seen = json.dumps(out[0]["value"], sort_keys=True) if out[0] is not None else ABSENT
            self.saw(kid, sent, ended, seen, what)


WRITER_KINDS = {"cli": CliWriter, "stdio": StdioWriter, "mcp": McpWriter}


# -- maintenance -----------------------------------------------------------------------------------


class Maintenance:
    """Random maintenance commands, one at a time, until the run stops."""

    # How many of each a deck holds: each loop deals shuffled decks, so that every command comes
    # up in every run however short, in a random order.
    DECK = {
        "gc": 2,
        "reindex": 3,
        "reindex --embedder": 2,
        "doctor --repair": 2,
        "namespaces delete": 2,
        "session close": 2,
        "import": 1,
        "kill": 2,
    }

    def __init__(
        self, run: Run, writers: list[Writer], rng: random.Random, export: Path, only: tuple[str, ...] = ()
    ) -> None:
        self.run, self.writers, self.rng, self.export = run, writers, rng, export
        self.deck = {name: n for name, n in self.DECK.items() if not only or name in only}

    def loop(self) -> None:
        deck: list[str] = []
        try:
            while not self.run.stop.is_set():
                if not deck:
                    deck = [name for name, count in self.deck.items() for _ in range(count)]
                    self.rng.shuffle(deck)
                choice = deck.pop()
                getattr(self, "do_" + choice.split()[0])(choice)
                with self.run.lock:
                    self.run.counters.maintenance[choice] += 1
                time.sleep(self.rng.uniform(0, 0.2))
        except Exception as exc:  # noqa: BLE001 - reported, not raised
            self.run.fail("driver errors", f"maintenance: {type(exc).__name__}: {exc}")

    def cli(self, *args: str) -> tuple[int, str, float, float]:
        rc, out, err, sent, ended = self.run.cli(*args)
        with self.run.lock:
            self.run.timeline.append(f"[{sent:.3f}..{ended:.3f}] mem {' '.join(args)} -> exit {rc}")
        if rc != 0 and not (args[0] in ("session", "namespaces") and rc == 3):  # exit 3: not there (any more)
            self.run.fail(
                "failed maintenance", f"mem {' '.join(args)}: exit {rc}: {err.strip()[-300:]} {out.strip()[-600:]}"
            )
        return rc, out, sent, ended

    def do_gc(self, _: str) -> None:
        self.cli("gc")

    def do_reindex(self, choice: str) -> None:
        if choice == "reindex":
            self.cli("reindex", "-f", "json")
            return
        other = EMBEDDERS[1 - EMBEDDERS.index(self.run.embedder)]
        rc, *_ = self.cli("reindex", "--embedder", other, "-f", "json")
        if rc == 0:
            self.run.embedder = other

    def do_doctor(self, _: str) -> None:
        self.cli("doctor", "--repair", "-f", "json")

    def do_namespaces(self, _: str) -> None:
        ns = self.rng.choice((*NAMESPACES, ARCHIVE))
        rc, _, sent, ended = self.cli("namespaces", "delete", "--yes", ns)
        event = Event(ABSENT, sent, ended, rc == 0, f"mem namespaces delete {ns}")
        with self.run.model.lock:
            self.run.model.namespace_deletes.append((ns, event))

    def do_session(self, _: str) -> None:
        with self.run.model.lock:
            open_sessions = sorted(self.run.model.sessions)
        if not open_sessions:
            return
        sid = self.rng.choice(open_sessions)
        rc, _, sent, ended = self.cli("session", "close", sid)
        event = Event(ABSENT, sent, ended, rc == 0, f"mem session close {sid}")
        with self.run.model.lock:
            self.run.model.session_closes.append((sid, event))
            if rc in (0, 3):
                self.run.model.sessions.pop(sid, None)

    def do_import(self, _: str) -> None:
        rc, _, sent, ended = self.cli("import", str(self.export), "-f", "json")
        with self.run.model.lock:
            self.run.model.imports.append(Event(None, sent, ended, rc == 0, "mem import"))

    def do_kill(self, _: str) -> None:
        writer = self.rng.choice(self.writers)
        at = now()
        if writer.kill():
            with self.run.lock:
                self.run.counters.kills += 1
                self.run.timeline.append(f"[{at:.3f}] SIGKILL {writer.name}")


# -- setup and the final check ---------------------------------------------------------------------


def seed_archive(run: Run, rng: random.Random) -> Path:
    """A few entries and records in the archive namespace, exported: `mem import` puts them back."""
    lines = []
    for i in range(6):
        tier = ("episodic", "semantic")[i % 2]
        key = {"w": "archive", "i": str(i)}
        content = f"archived {i} {' '.join(rng.sample(WORDS, 3))}"
        lines.append(json.dumps({"key": key, "content": content, "tier": tier}))
        run.model.archive[entry_key(ARCHIVE, tier, "seed" if tier == "episodic" else "", key)] = content
    env = {**run.env, "MEM_EMBEDDER": EMBEDDERS[0]}  # the store records the embedder it was made with
    for args, stdin in (
        (["store", "-", "-n", ARCHIVE, "-a", "seed", "-f", "ndjson"], "\n".join(lines).encode()),
        (["set", "-n", ARCHIVE, "-f", "ndjson", "archived-kv", json.dumps({"w": "archive", "v": 1})], None),
    ):
        subprocess.run(mem_cmd(*args), input=stdin, env=env, cwd=ROOT, check=True, capture_output=True)
    run.model.archive[("kv", ARCHIVE, "archived-kv")] = json.dumps({"v": 1, "w": "archive"}, sort_keys=True)
    export = run.logs / "archive.ndjson"
    subprocess.run(mem_cmd("export", "-n", ARCHIVE, "-o", str(export)), env=env, cwd=ROOT, check=True,
                   capture_output=True)  # fmt: skip
    setup = Event(None, -INF, now(), True, "setup")
    for kid, value in run.model.archive.items():
        run.model.record(kid, Event(value, setup.sent, setup.ended, True, "setup"))
    return export


def read_export(run: Run) -> dict[KeyId, Any] | None:
    """What `mem export` holds (None, reported, if it fails)."""
    rc, out, err, _, _ = run.cli("export")
    if rc != 0:
        run.fail("failed reads", f"final mem export: exit {rc}: {err.strip()[-400:]}")
        return None
    seen: dict[KeyId, Any] = {}
    for line in out.splitlines():
        record = json.loads(line)
        doc, ns = record["doc"], record["namespace"]
        if record["kind"] == "kv":
            seen[("kv", ns, doc["key"])] = json.dumps(doc["value"], sort_keys=True)
        elif record["kind"] in ("episodic", "semantic"):
            scope = record["scope"][0] if record["scope"] else ""
            seen[entry_key(ns, record["kind"], scope, doc["key"])] = doc["content"]
    return seen


def read_through_server(run: Run, keys: set[KeyId]) -> dict[KeyId, Any]:
    """Every entry key, retrieved by key from fresh `mem serve-stdio` servers (one per agent, as
    a session belongs to its agent; working tiers through their sessions), plus a similarity
    query per namespace and tier that must not fail. Keys of a failed retrieve are UNREADABLE."""
    seen: dict[KeyId, Any] = {}
    groups: dict[tuple[str, str, str], list[KeyId]] = defaultdict(list)
    for kid in keys:
        if kid[0] == "entry":
            groups[kid[1:4]].append(kid)
    with run.model.lock:
        open_sessions = dict(run.model.sessions)
    readers: dict[str, FinalReader] = {}
    try:
        for (ns, tier, scope), kids in sorted(groups.items()):
            if tier == "working" and scope not in open_sessions:
                continue  # a closed session's working tier is gone, and cannot be read
            agent = open_sessions[scope][1] if tier == "working" else scope or "reader"
            if agent not in readers:
                readers[agent] = FinalReader(run, agent)
            reader = readers[agent]
            mid = scope if tier == "working" else reader.init(ns)
            for start in range(0, len(kids), 500):
                chunk = kids[start : start + 500]
                reply = reader.ask("memory/retrieve/req", memory_id=mid, keys=[json.loads(k[4]) for k in chunk],
                                   tier=tier, limit=1000)  # fmt: skip
                if reply["type"] == "error" and tier == "working" and reply.get("code") in DOCUMENTED:
                    seen.update(dict.fromkeys(chunk, ABSENT))  # the session was closed: its tier is gone
                    break
                if reply["type"] == "error":
                    run.fail("failed reads", f"final memory/retrieve {tier} in {ns}: {reply}")
                    seen.update(dict.fromkeys(chunk, UNREADABLE))
                    continue
                for found in reply["entries"]:
                    seen[entry_key(ns, tier, scope, found["key"])] = found["content"]
                for kid in chunk:
                    seen.setdefault(kid, ABSENT)
            reply = reader.ask("memory/retrieve/req", memory_id=mid, query="note budget", tier=tier, limit=10)
            if reply["type"] == "error" and reply.get("code") not in DOCUMENTED:
                run.fail("failed reads", f"final query {tier} in {ns}: {reply}")
    finally:
        for reader in readers.values():
            reader.close()
    return seen


class FinalReader:
    def __init__(self, run: Run, agent: str) -> None:
        self.proc = subprocess.Popen(mem_cmd("serve-stdio"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=run.env, cwd=ROOT)  # fmt: skip
        self.n = 0
        self.ask("handshake/req", agent_id=agent, agent_caps=[], auth_token="")

    def ask(self, kind: str, **fields: Any) -> dict[str, Any]:
        assert self.proc.stdin and self.proc.stdout
        self.n += 1
        self.proc.stdin.write(json.dumps({"type": kind, "id": str(self.n), "version": "1.0", "ts": time.time(),
                                          **fields}).encode() + b"\n")  # fmt: skip
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            return {"type": "error", "code": "crash", "message": f"final reader exited {self.proc.wait()}"}
        return json.loads(line)

    def init(self, ns: str) -> str:
        reply = self.ask("memory/init/req", namespace=ns)
        return reply.get("memory_id", "")

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def doctor(run: Run) -> tuple[int, str]:
    rc, out, err, _, _ = run.cli("doctor", "-f", "json")
    return rc, (out + err).strip()


# -- the run ---------------------------------------------------------------------------------------


@dataclass
class RunResult:
    seed: int
    seconds: float
    counters: Counters
    failures: dict[str, list[str]]
    lost: list[str]
    wrong: list[str]
    resurrected: list[str]
    stale_reads: list[str]
    doctor_rc: int
    doctor_out: str
    timeline: list[str] = field(default_factory=list)

    def problems(self) -> dict[str, list[str]]:
        out = {k: v for k, v in self.failures.items() if v}
        for name, items in (("lost writes", self.lost), ("wrong values", self.wrong),
                            ("resurrected", self.resurrected), ("inconsistent reads", self.stale_reads)):  # fmt: skip
            if items:
                out[name] = items
        if self.doctor_rc != 0:
            out["doctor"] = [self.doctor_out[-800:]]
        return out

    def report(self, limit: int | None = None) -> str:
        """The summary, the problems (at most `limit` of each kind), the maintenance timeline."""
        lines = [self.summary(), "", "problems:"]
        for name, items in self.problems().items():
            more = len(items) - (limit or len(items))
            lines += [f"  {name}:"] + [f"    {item}" for item in items[:limit]] + [f"    ... {more} more"] * (more > 0)
        return "\n".join([*lines, "", "maintenance:", *self.timeline, ""])

    def summary(self) -> str:
        lines = [f"seed {self.seed}: {self.counters.ops} ops, {self.counters.acks} acked, {self.counters.kills} kills"]
        for name, items in self.problems().items():
            lines.append(f"  {name}: {len(items)}")
            lines += [f"    e.g. {item}" for item in items[:2]]
        return "\n".join(lines)


def describe(kid: KeyId, history: list[Event], seen: Any, expected: set[Any]) -> str:
    ops = "; ".join(f"{e.what} [{e.sent:.3f}..{e.ended:.3f}]{'' if e.acked else ' (not acked)'}"
                    for e in sorted(history, key=lambda e: e.sent)[-6:])  # fmt: skip
    want = " or ".join("absent" if v is ABSENT else repr(v) for v in expected)
    return f"{kid}: saw {'absent' if seen is ABSENT else repr(seen)}, expected {want}; last ops: {ops}"


def check(run: Run, seen_export: dict[KeyId, Any] | None, seen_server: dict[KeyId, Any]) -> tuple[list, list, list]:
    """Every key as read at the end against the values its operations allow: (lost, wrong,
    resurrected). An export that failed counts as unreadable."""
    lost, wrong, resurrected = [], [], []

    def exported(kid: KeyId) -> Any:
        return UNREADABLE if seen_export is None else seen_export.get(kid, ABSENT)

    for kid in sorted(run.model.keys(), key=repr):
        history = run.model.history(kid)
        expected = possible_values(history)
        if kid[0] == "kv":
            views = [exported(kid)]  # key-value records: the export
        elif kid[2] == "working":
            views = [seen_server.get(kid, ABSENT)]  # not exported: read through the session
        else:
            views = [exported(kid), seen_server.get(kid, ABSENT)]
        for seen in views:
            if seen in expected or (seen == UNREADABLE and expected == {ABSENT}):
                continue
            note = describe(kid, history, seen, expected)
            (lost if seen in (ABSENT, UNREADABLE) else resurrected if expected == {ABSENT} else wrong).append(note)
            break
    return lost, wrong, resurrected


def check_reads(run: Run) -> list[str]:
    """Reads made during the run: each must have seen a value the operations allowed."""
    bad = []
    for read in run.model.reads:
        history = run.model.history(read.key)
        expected = possible_values(history, read.sent, read.ended)
        if read.seen not in expected:
            bad.append(f"{read.what} [{read.sent:.3f}..{read.ended:.3f}]: " + describe(read.key, history, read.seen,
                                                                                       expected))  # fmt: skip
    return bad


def run(
    home: Path,
    seed: int,
    seconds: float,
    writers: tuple[str, ...] = ("cli", "stdio", "stdio", "mcp"),
    checkpoint_bytes: int = 2048,
    maintainers: int = 2,
    only: tuple[str, ...] = (),
    min_acks: int = 0,
    every_command: bool = False,
) -> RunResult:
    """One interleaving: `writers` (kinds from WRITER_KINDS) and `maintainers` maintenance loops
    for `seconds` (`only`: just these maintenance commands, names as in Maintenance.DECK), then
    every process stopped and the store read back and checked. On a slow machine the run goes on
    past `seconds` until `min_acks` operations were acknowledged and, with `every_command`, every
    maintenance command has run at least once (at most 6 x `seconds`)."""
    rng = random.Random(seed)
    state = Run(home, seed, checkpoint_bytes)
    export = seed_archive(state, rng)
    team = [WRITER_KINDS[kind](state, f"{kind}{n}", random.Random(rng.random())) for n, kind in enumerate(writers)]
    upkeep = [Maintenance(state, team, random.Random(rng.random()), export, only) for _ in range(maintainers)]
    threads = [threading.Thread(target=w.loop, name=w.name) for w in team]
    threads += [threading.Thread(target=m.loop, name=f"maintenance{n}") for n, m in enumerate(upkeep)]
    started = now()
    for thread in threads:
        thread.start()
    state.stop.wait(seconds)
    wanted = set(upkeep[0].deck) if every_command and upkeep else set()
    while (state.counters.acks < min_acks or not wanted <= set(state.counters.maintenance)) and (
        now() - started < 6 * seconds
    ):
        time.sleep(0.1)
    state.stop.set()
    for thread in threads:
        thread.join(timeout=120)
        if thread.is_alive():
            state.fail("hung processes", f"{thread.name} still busy 120 s after the end")
            for w in team:
                w.kill()
            thread.join()
    for w in team:
        w.close()
    elapsed = now() - started

    seen_export = read_export(state)
    seen_server = read_through_server(state, state.model.keys())
    lost, wrong, resurrected = check(state, seen_export, seen_server)
    stale = check_reads(state)
    rc, out = doctor(state)
    result = RunResult(
        seed,
        elapsed,
        state.counters,
        dict(state.failures),
        lost,
        wrong,
        resurrected,
        stale,
        rc,
        out,
        sorted(state.timeline, key=lambda line: float(line[1:].split("]")[0].split("..")[0])),
    )
    (state.logs / "report.txt").write_text(result.report())
    return result
