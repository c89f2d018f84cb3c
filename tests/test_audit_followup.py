"""What a second outside audit of the issue-10 fixes found: each test drives the interface where
the defect was seen (the service, `mem serve-stdio`, `mem serve-mcp` over raw JSON-RPC)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import orjson
import pytest

from a2e_mem.errors import InvalidInput
from a2e_mem.protocol import auth_token
from a2e_mem.service import MemoryService

from .test_audit_wire import Wire, msg

REPO = Path(__file__).resolve().parents[1]


def mem(home: Path, *args: str, stdin: bytes = b"", **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "a2e_mem.cli.main", *args], input=stdin, capture_output=True, cwd=REPO, timeout=60,
        env={**os.environ, "MEM_HOME": str(home), **env},
    )  # fmt: skip


def test_codebolt_records_respect_the_entry_size_limit(home, monkeypatch):
    monkeypatch.setenv("MEM_MAX_ENTRY_BYTES", "1000")
    svc = MemoryService(home)
    big = "v" * 5000
    for write in (
        lambda: svc.memory_set("k", big),
        lambda: svc.memory_json_save({"a": big}),
        lambda: svc.kg_create_entities([{"name": "E", "entityType": "t", "observations": [big]}]),
    ):
        with pytest.raises(InvalidInput, match="over the 1000-byte limit"):
            write()
    svc.kg_create_entities([{"name": "E", "entityType": "t", "observations": []}])
    for _ in range(3):  # an entity grows by observations, each small: the whole record counts
        try:
            svc.kg_add_observations([{"entityName": "E", "contents": ["o" * 400 + str(_)]}])
        except InvalidInput:
            break
    else:
        pytest.fail("an entity grew past max_entry_bytes one observation at a time")
    assert len(orjson.dumps(svc.kg_open_nodes(["E"]))) < 1200


def test_an_empty_auth_secret_in_the_environment_is_refused(home):
    for command in (["serve-stdio"], ["serve-mcp", "--agent", "A"]):
        out = mem(home, *command, MEM_AUTH_SECRET="")
        assert out.returncode == 2, out.stderr
        assert b"MEM_AUTH_SECRET is set but empty" in out.stderr


def test_serve_mcp_refuses_names_no_tool_could_use(home):
    for option in (["--namespace", ""], ["--agent", "a" * 2000]):
        out = mem(home, "serve-mcp", *option)
        assert out.returncode == 4, out.stderr
        assert out.stderr.count(b"\n") == 1 and option[0].encode() in out.stderr


def test_a_handshake_for_a_name_no_session_can_have_is_refused(home):
    wire = Wire(home, MEM_AUTH_SECRET="s3cret")
    try:
        for agent in ("", "\x00system", "a" * 5000):
            token = auth_token("s3cret", agent)
            reply = wire.ask(msg("handshake/req", "h", agent_id=agent, agent_caps=[], auth_token=token))
            assert reply["type"] == "handshake/resp" and reply["ok"] is False and reply["reason"], reply
        reply = wire.ask(msg("memory/init/req", "i", namespace="n", scope={}))
        assert reply["type"] == "error" and reply["code"] == "unauthorized"
    finally:
        wire.close()
    open_wire = Wire(home)  # without a secret a blank agent_id is fine (unbound), a NUL one is not
    try:
        blank = open_wire.ask(msg("handshake/req", "h", agent_id="", agent_caps=[], auth_token=""))
        assert blank["ok"] is True
        nul = open_wire.ask(msg("handshake/req", "h2", agent_id="a\x00b", agent_caps=[], auth_token=""))
        assert nul["ok"] is False
    finally:
        open_wire.close()


def checkpointed_store(home: Path) -> tuple[MemoryService, Path]:
    """30 entries in a checkpoint and 3 acknowledged after it (the journal after the checkpoint)."""
    svc = MemoryService(home)
    scope = svc.scope("ns", "a")
    svc.store(scope, [{"key": {"i": i}, "content": f"entry {i} zebra", "tier": "semantic"} for i in range(30)])
    svc.checkpoint(force=True)
    svc.store(scope, [{"key": {"j": j}, "content": f"late {j}", "tier": "semantic"} for j in range(3)])
    (seg,) = home.rglob("seg-*")
    return svc, seg


def test_doctor_names_a_lost_journal_after_the_checkpoint(home):
    _, seg = checkpointed_store(home)
    wal = seg.parent / f"wal-{int(seg.name[4:]) + 1:08d}.ndjson"
    wal.unlink()
    findings = MemoryService(home).doctor()
    assert any(f["where"].endswith(wal.name) and "missing" in f["problem"] for f in findings), findings


def test_a_record_changed_after_its_manifest_was_lost_is_not_sealed_again(home):
    _, seg = checkpointed_store(home)
    (seg / "manifest.json").unlink()
    data = seg / "data.json"
    data.write_bytes(data.read_bytes().replace(b"entry 7 zebra", b"entry 7 TAMPER"))
    findings = MemoryService(home).doctor()
    assert any(f["where"].endswith("data.json") and "checksum" in f["problem"] for f in findings), findings
    repaired = MemoryService(home).doctor(repair=True)
    assert any(f["lost"] for f in repaired), repaired
    found = MemoryService(home).retrieve(MemoryService(home).scope("ns", "a"), query="TAMPER", tier="semantic")
    assert all("TAMPER" not in e["content"] for e in found["entries"])


def test_descriptors_that_name_another_namespace_or_shard_are_damage(home):
    _, seg = checkpointed_store(home)
    (seg.parent.parent / "namespace.json").write_text('{"namespace":"hijacked"}')
    (seg.parent / "shard.json").write_text('{"schema":"entries","namespace":"ns","kind":"episodic","scope":["a"]}')
    svc = MemoryService(home)
    assert [n["namespace"] for n in svc.namespaces()] == ["ns"]  # named from the copies
    assert {r["kind"] for r in svc.stats()} == {"semantic"}
    where = {f["where"].rsplit("/", 1)[-1] for f in svc.doctor()}
    assert {"namespace.json", "shard.json"} <= where
    MemoryService(home).doctor(repair=True)
    assert MemoryService(home).doctor() == []


def test_failed_checkpoints_do_not_add_a_journal_each(home, monkeypatch):
    from a2e_mem.backends.files import checkpoint

    svc, seg = checkpointed_store(home)
    monkeypatch.setattr(
        checkpoint, "_write_range", lambda *a, **k: (_ for _ in ()).throw(OSError(27, "File too large"))
    )
    scope = svc.scope("ns", "a")
    for attempt in range(4):
        svc.store(scope, [{"key": {"k": attempt}, "content": f"more {attempt}", "tier": "semantic"}])
        with pytest.raises(OSError):
            svc.checkpoint(force=True)
    assert len(list(seg.parent.glob("wal-*"))) <= 2
    monkeypatch.undo()
    MemoryService(home).checkpoint(force=True)
    assert MemoryService(home).retrieve(scope, tier="semantic", limit=100)["total"] == 37


def test_a_blank_query_returns_nothing_rather_than_the_whole_source(service):
    service.memory_set("theme", "dark", namespace="p")
    made = service.persistent_memory_create(
        "k", {"source_type": "kv", "source_id": "p"}, {"format": "json"}, namespace="default"
    )
    for blank in ({"query": "   "}, {"action": " "}):
        assert service.persistent_memory_retrieve(made["id"], **blank)["items"] == [], blank
    assert [i["key"] for i in service.persistent_memory_retrieve(made["id"])["items"]] == ["theme"]  # browse


def test_a_query_embedded_after_another_process_reindexed_does_not_crash(home, monkeypatch):
    """Found by the interleaving test in CI: the shards were read with the old embedder, then the
    query was embedded with the new one (store.json changed in between): numpy refused the
    product. The shard is ranked by words until it is read again."""
    from a2e_mem.backends.files.search import Filters, search

    monkeypatch.delenv("MEM_EMBEDDER")
    svc = MemoryService(home, embedder="hash")
    scope = svc.scope("ns", "a")
    svc.store(scope, [{"key": "z", "content": "zebra stripes", "tier": "semantic"}])
    shard = svc.a2e._shard(scope, "semantic")
    other_size = np.ones(32, dtype=np.float32) / np.sqrt(32)
    (found,) = [c for c in search(shard, 0.0, Filters(()), other_size, "zebra") if len(c.rows)]
    assert found.doc(int(found.rows[0]))["content"] == "zebra stripes"


def test_a_namespace_json_that_lost_its_checksum_is_reported_and_sealed_again(home):
    checkpointed_store(home)
    (path,) = home.glob("ns/*/namespace.json")
    path.write_bytes(path.read_bytes().replace(b'"crc"', b'"cr9"'))
    findings = MemoryService(home).doctor()
    assert any(f["where"].endswith("namespace.json") and "checksum" in f["problem"] for f in findings), findings
    MemoryService(home).doctor(repair=True)
    assert MemoryService(home).doctor() == []


@pytest.mark.parametrize(
    "args, says",
    [
        (["store", "--bogus"], "No such option: --bogus (see 'mem store --help')"),
        (["retrieve", "--limit", "ten"], "Invalid value for '--limit'"),
        (["get"], "Missing argument 'key'. (see 'mem get --help')"),
        (["kg", "bogus"], "No such command 'bogus'. (see 'mem kg --help')"),
    ],
)
def test_a_usage_error_is_one_stderr_line_and_exit_2(home, args, says):
    out = mem(home, *args)
    assert out.returncode == 2 and out.stdout == b""
    lines = out.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mem: error: ") and says in lines[0], lines


def test_a_missing_key_of_thousands_of_characters_is_named_in_a_short_line(home):
    """`mem get` of a 5,000-character key that is not there repeated the whole key (an outside
    audit): the message keeps its two ends and says how long it was."""
    out = mem(home, "get", "k" * 4000 + "tail")
    said = out.stderr.decode()
    assert out.returncode == 3 and out.stdout == b"" and len(said.splitlines()) == 1, said
    assert len(said) < 300 and "tail'" in said and "(4006 characters)" in said, said
