"""Many processes storing into one namespace and tier at once: nothing acknowledged is lost.

Eight writers store 50 entries each into the semantic tier of one namespace, all at the same
time, with small journals and inline checkpoints so that checkpoints interleave with the writes:

- two "shell" writers run genuine `mem store` commands (single entries and `mem store -` batches),
- three library writers loop over `MemoryService.store`, one entry a call,
- three `mem serve-stdio` servers each acknowledge 50 `memory/store/req`.

A long-lived `serve-stdio` started before all of them keeps retrieving during the run and must
see every write at the end; so must a fresh `MemoryService`. Every checkpoint file must open with
TinyDB and every complete journal line must parse.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson
import pytest
from tinydb import TinyDB

from a2e_mem.service import MemoryService

ROOT = Path(__file__).resolve().parent.parent
NAMESPACE = "shared"
PER_WRITER = 200 if os.environ.get("MEM_STRESS") else 50  # CI: 8 x 50; MEM_STRESS=1: 8 x 200

LIBRARY_WRITER = textwrap.dedent(
    """
    import sys
    from a2e_mem.service import MemoryService
    worker, count = sys.argv[1], int(sys.argv[2])
    svc = MemoryService()
    scope = svc.scope("shared", worker)
    for i in range(count):
        key = {"w": worker, "i": str(i)}
        out = svc.store(scope, [{"key": key, "content": f"library note {worker} {i}", "tier": "semantic"}])
        assert out["stored"] == [key], out
        print(i, flush=True)  # acknowledged
    """
)


def writer_env(home: Path) -> dict[str, str]:
    # small journals and inline checkpoints: checkpoints interleave with the writes
    return {
        **os.environ,
        "MEM_HOME": str(home),
        "MEM_CHECKPOINTS": "inline",
        "MEM_CHECKPOINT_BYTES": "4096",
        "MEM_LOG": "warning",
    }


def mem(*args: str) -> list[str]:
    return [sys.executable, "-m", "a2e_mem.cli.main", *args]


def msg(kind: str, rid: str, **fields) -> bytes:
    return orjson.dumps({"type": kind, "id": rid, "version": "1.0", "ts": time.time(), **fields}) + b"\n"


class Server:
    """A `mem serve-stdio` driven one request at a time."""

    def __init__(self, home: Path, agent: str) -> None:
        self.proc = subprocess.Popen(
            mem("serve-stdio"), stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=writer_env(home), cwd=ROOT
        )
        self.n = 0
        self.ask("handshake/req", agent_id=agent, agent_caps=[], auth_token="")
        self.memory_id = self.ask("memory/init/req", namespace=NAMESPACE, scope={"agent": agent})["memory_id"]

    def ask(self, kind: str, **fields) -> dict:
        self.n += 1
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(msg(kind, f"r{self.n}", **fields))
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line.endswith(b"\n"), f"server died (exit {self.proc.poll()})"
        reply = orjson.loads(line)
        assert reply["req_id"] == f"r{self.n}", reply
        return reply

    def close(self) -> int:
        assert self.proc.stdin
        self.proc.stdin.close()
        return self.proc.wait(timeout=60)


# -- the writers: each returns the keys it got acknowledged ------------------------------------


def library_writer(home: Path, worker: str) -> set[tuple[str, str]]:
    out = subprocess.run(
        [sys.executable, "-c", LIBRARY_WRITER, worker, str(PER_WRITER)],
        capture_output=True,
        env=writer_env(home),
        cwd=ROOT,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr.decode()
    return {(worker, line.decode()) for line in out.stdout.splitlines()}


def stdio_writer(home: Path, worker: str) -> set[tuple[str, str]]:
    server = Server(home, worker)
    acked = set()
    for i in range(PER_WRITER):
        key = {"w": worker, "i": str(i)}
        entry = {"key": key, "content": f"wire note {worker} {i}", "tier": "semantic", "tags": [worker]}
        reply = server.ask("memory/store/req", memory_id=server.memory_id, entries=[entry])
        assert reply["type"] == "memory/store/resp" and reply["stored"] == [key], reply
        acked.add((worker, str(i)))
    assert server.close() == 0
    return acked


def shell_writer(home: Path, worker: str) -> set[tuple[str, str]]:
    """Genuine `mem store` commands: five single entries, then three NDJSON batches of 15."""
    acked = set()
    base = ["--namespace", NAMESPACE, "--agent", worker, "--tier", "semantic"]
    for i in range(5):
        out = subprocess.run(
            mem("store", *base, "--key", f"w={worker}", "--key", f"i={i}", f"shell note {worker} {i}"),
            capture_output=True,
            env=writer_env(home),
            cwd=ROOT,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr.decode()
        assert [orjson.loads(x) for x in out.stdout.splitlines()] == [
            {"key": {"w": worker, "i": str(i)}, "stored": True}
        ]
        acked.add((worker, str(i)))
    for start in range(5, PER_WRITER, 15):
        batch = [
            {"key": {"w": worker, "i": str(i)}, "content": f"batch note {worker} {i}", "tier": "semantic"}
            for i in range(start, start + 15)
        ]
        out = subprocess.run(
            mem("store", "-", "--namespace", NAMESPACE, "--agent", worker),
            input=b"".join(orjson.dumps(e) + b"\n" for e in batch),
            capture_output=True,
            env=writer_env(home),
            cwd=ROOT,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr.decode()
        acked |= {(r["key"]["w"], r["key"]["i"]) for r in map(orjson.loads, out.stdout.splitlines()) if r["stored"]}
    return acked


# -- checks --------------------------------------------------------------------------------------


def keys_of(reply: dict) -> set[tuple[str, str]]:
    return {(e["key"]["w"], e["key"]["i"]) for e in reply["entries"]}


def as_keys(pairs: set[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"w": w, "i": i} for w, i in sorted(pairs)]


def assert_files_parse(home: Path) -> int:
    """Every checkpoint opens with TinyDB; every complete journal line is JSON; no torn tail
    (nobody crashed). Returns the number of checkpoint files."""
    checkpoints = sorted(home.rglob("seg-*/data.json"))
    for path in checkpoints:
        db = TinyDB(path, access_mode="r")
        try:
            records = db.table("records").all()
        finally:
            db.close()
        assert all(isinstance(r, dict) and "id" in r for r in records), path
    for path in home.rglob("wal-*.ndjson"):
        data = path.read_bytes()
        assert not data or data.endswith(b"\n"), f"{path} ends in a torn line"
        for number, line in enumerate(data.splitlines(), 1):
            assert isinstance(orjson.loads(line), dict), f"{path}:{number}"
    return len(checkpoints)


def watch(server: Server, stop: threading.Event, seen: list[int], errors: list[dict]) -> None:
    """Retrieve over and over while the writers run: never an error, never fewer entries."""
    while not stop.is_set():
        reply = server.ask("memory/retrieve/req", memory_id=server.memory_id, tier="semantic", limit=1000)
        if reply["type"] != "memory/retrieve/resp":
            errors.append(reply)
        else:
            seen.append(reply["total"])
        time.sleep(0.05)


def test_eight_mixed_processes_store_at_once_and_nothing_is_lost(home):
    reader = Server(home, "reader")  # started before any writer, kept for the whole run
    first = reader.ask("memory/retrieve/req", memory_id=reader.memory_id, tier="semantic", limit=1000)
    assert first["total"] == 0
    stop, seen, errors = threading.Event(), [], []
    watcher = threading.Thread(target=watch, args=(reader, stop, seen, errors))
    watcher.start()
    writers = [(shell_writer, f"c{n}") for n in range(2)]
    writers += [(library_writer, f"l{n}") for n in range(3)]
    writers += [(stdio_writer, f"s{n}") for n in range(3)]
    try:
        with ThreadPoolExecutor(len(writers)) as pool:
            futures = [pool.submit(fn, home, worker) for fn, worker in writers]
            acked = set().union(*(f.result() for f in futures))
    finally:
        stop.set()
        watcher.join()

    expected = {(worker, str(i)) for _, worker in writers for i in range(PER_WRITER)}
    assert acked == expected, f"{len(expected - acked)} writes were never acknowledged"
    assert seen == sorted(seen), "the long-lived server saw entries disappear"

    # the long-lived server sees everything the others wrote, and nothing else
    final = reader.ask("memory/retrieve/req", memory_id=reader.memory_id, tier="semantic", limit=1)
    assert final["total"] == len(expected)
    final = reader.ask("memory/retrieve/req", memory_id=reader.memory_id, keys=as_keys(expected), limit=1)
    assert final["total"] == len(expected)
    assert reader.close() == 0

    # so does a fresh process
    fresh = MemoryService(home)
    result = fresh.retrieve(fresh.scope(NAMESPACE, "anyone"), tier="semantic", limit=1000)
    assert result["total"] == len(expected) and keys_of(result) <= expected
    assert fresh.retrieve(fresh.scope(NAMESPACE, "anyone"), keys=as_keys(expected), limit=1)["total"] == len(expected)
    stdio_tagged = fresh.retrieve(fresh.scope(NAMESPACE, "anyone"), tags=["s1"], limit=1000)
    assert keys_of(stdio_tagged) == {("s1", str(i)) for i in range(PER_WRITER)}
    fresh.close()

    assert assert_files_parse(home) >= 1, "no checkpoint ran during the writes"
    (folder,) = {p.parent for p in home.rglob("wal-*.ndjson")}
    gens = [int(p.name.split("-")[1].split(".")[0]) for p in folder.iterdir() if p.name.startswith(("wal-", "seg-"))]
    assert max(gens) >= 5, "checkpoints did not interleave with the writes"
    assert not errors, errors[:3]


@pytest.mark.parametrize("damaged", ["checkpoint", "journal"])
def test_the_file_check_catches_damage(home, damaged):
    """The file checks above can fail: a damaged checkpoint or journal line is reported."""
    svc = MemoryService(home)
    svc.store(svc.scope(NAMESPACE, "a"), [{"key": {"i": n}, "content": "x", "tier": "semantic"} for n in range(3)])
    svc.checkpoint(force=True)
    svc.store(svc.scope(NAMESPACE, "a"), [{"key": {"i": 9}, "content": "y", "tier": "semantic"}])
    assert_files_parse(home)
    if damaged == "checkpoint":
        next(home.rglob("seg-*/data.json")).write_bytes(b'{"records": {"1": {"id"')
    else:
        wal = max(home.rglob("wal-*.ndjson"))
        wal.write_bytes(wal.read_bytes() + b"{not json}\n")
    with pytest.raises(Exception):  # noqa: B017 - any parse failure will do
        assert_files_parse(home)


@pytest.mark.parametrize(
    "query", [{"keys": [{"i": 3}]}, {"tags": ["t"]}, {"query": "zebra"}], ids=["keys", "tags", "query"]
)
def test_a_checkpoint_landing_during_a_request_does_not_fail_it(home, query):
    """Readers never lock: a checkpoint made elsewhere may rename its new segment into place and
    delete the one the reader has just switched to, while the reader's request is under way."""
    reader, writer = MemoryService(home), MemoryService(home)
    scope = writer.scope(NAMESPACE, "a")
    notes = [{"key": {"i": i}, "content": f"note {i} zebra", "tier": "semantic", "tags": ["t"]} for i in range(10)]
    writer.store(scope, notes)
    writer.checkpoint(force=True)
    shard = reader.engine.shard(NAMESPACE, "semantic", schema="entries")
    refresh = shard.refresh

    def refresh_then_a_checkpoint_lands():
        refresh()
        writer.store(scope, [{"key": {"i": 99}, "content": "zebra too", "tier": "semantic", "tags": ["t"]}])
        writer.checkpoint(force=True)  # renames seg-N+1 into place and deletes seg-N

    shard.refresh = refresh_then_a_checkpoint_lands
    assert reader.retrieve(scope, tier="semantic", **query)["total"] >= 1


def test_a_checkpoint_landing_while_a_reader_opens_a_segment_does_not_fail_it(home, monkeypatch):
    from a2e_mem import lexical

    reader, writer = MemoryService(home), MemoryService(home)
    scope = writer.scope(NAMESPACE, "a")
    writer.store(scope, [{"key": {"i": i}, "content": f"note {i}", "tier": "semantic"} for i in range(10)])
    writer.checkpoint(force=True)
    assert writer.retrieve(scope)["total"] == 10  # the writer has opened the checkpoint already
    opening = lexical.SegmentLexicon.__init__  # (the Annoy index is opened later, when a search needs it)
    landed = []

    def open_after_a_checkpoint_landed(self, folder):
        if not landed:  # the reader is opening seg-1: a checkpoint elsewhere replaces it first
            landed.append(folder)
            writer.store(scope, [{"key": {"i": 10}, "content": "one more", "tier": "semantic"}])
            writer.checkpoint(force=True)
        opening(self, folder)

    monkeypatch.setattr(lexical.SegmentLexicon, "__init__", open_after_a_checkpoint_landed)
    assert reader.retrieve(scope, tier="semantic")["total"] == 11
    assert landed and not landed[0].exists()
