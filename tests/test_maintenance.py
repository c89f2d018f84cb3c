"""Export/import, stats, namespaces, reindex, doctor, explain and redaction."""

from __future__ import annotations

import logging
import os

import orjson
import pytest
from typer.testing import CliRunner

from a2e_mem import clock
from a2e_mem.backends import base
from a2e_mem.cli.main import app
from a2e_mem.errors import NotFound, StoreMismatch
from a2e_mem.service import MemoryService
from tests.conftest import entry

runner = CliRunner()


def fill(svc):
    scope = svc.scope("proj", "alice")
    svc.store(scope, [
        {"key": {"k": 1}, "content": {"text": "python packaging notes"}, "tier": "episodic", "tags": ["py"],
         "score": 0.5},
        {"key": {"k": 2}, "content": "shared fact", "tier": "semantic", "ttl": 3600, "source": "turn-2"},
        {"key": {"k": 3}, "content": "expires soon", "tier": "semantic", "ttl": 5},
    ])  # fmt: skip
    svc.memory_set("theme", {"mode": "dark"}, namespace="proj")
    svc.memory_todo_save({"title": "t"}, {"due": "2025-01-01"}, namespace="proj")
    log = svc.episodic_memory_create("log", namespace="proj")["memoryId"]
    svc.episodic_memory_append_event(
        log, {"event_type": "x", "emitting_agent_id": "a", "payload": {"n": 1}}, namespace="proj"
    )
    svc.kg_create_entities([{"name": "Ada", "entityType": "person", "observations": ["math"]}], namespace="proj")
    return scope


def test_export_import_export_is_byte_identical(home, tmp_path):
    fill(MemoryService(home))
    clock.set_offset(10)  # the 5-second entry has expired: it is not exported
    first = b"\n".join(MemoryService(home).export()) + b"\n"
    assert b"expires soon" not in first and b"turn-2" in first
    lines = first.splitlines()
    assert lines == sorted(lines, key=lambda line: (orjson.loads(line)["namespace"], orjson.loads(line)["kind"],
                                                    orjson.loads(line)["scope"], orjson.loads(line)["id"]))  # fmt: skip
    other = MemoryService(tmp_path / "other")
    assert other.import_records(lines, dry_run=True) == {"new": len(lines), "changed": 0, "unchanged": 0}
    assert list(other.export()) == []  # dry run wrote nothing
    assert other.import_records(lines)["new"] == len(lines)
    second = b"\n".join(MemoryService(tmp_path / "other").export()) + b"\n"
    assert second == first
    assert other.import_records(lines, dry_run=True) == {"new": 0, "changed": 0, "unchanged": len(lines)}
    imported = other.retrieve(other.scope("proj", "alice"), query="python packaging")["entries"][0]
    assert imported["key"] == {"k": 1} and imported["score"] == 0.5


def test_export_import_through_the_cli(home, tmp_path):
    fill(MemoryService(home))
    dump = tmp_path / "dump.ndjson"
    assert runner.invoke(app, ["export", "--output", str(dump)]).exit_code == 0
    target = tmp_path / "target"
    result = runner.invoke(app, ["--home", str(target), "import", str(dump), "--format", "json"])
    assert result.exit_code == 0 and orjson.loads(result.stdout)["new"] > 5
    again = runner.invoke(app, ["--home", str(target), "export"])
    assert again.stdout.encode() == dump.read_bytes()
    bad = tmp_path / "bad.ndjson"
    bad.write_text('{"namespace": "x"}\n')
    assert runner.invoke(app, ["import", str(bad)]).exit_code == 4


def test_stats_and_namespaces(home):
    svc = MemoryService(home)
    fill(svc)
    clock.set_offset(10)
    rows = {(r["kind"], r["scope"]): r for r in svc.stats("proj")}
    assert rows[("semantic", "")]["entries"] == 1 and rows[("semantic", "")]["expired"] == 1
    assert rows[("episodic", "alice")]["entries"] == 1 and rows[("kv", "")]["entries"] == 1
    svc.checkpoint(force=True)
    after = {(r["kind"], r["scope"]): r for r in MemoryService(home).stats("proj")}
    assert after[("semantic", "")]["expired"] == 0 and after[("semantic", "")]["indexed"] == 1
    assert [n["namespace"] for n in svc.namespaces()] == ["proj"]
    assert svc.delete_namespace("proj") == {"namespace": "proj", "deleted": True}
    assert MemoryService(home).namespaces() == []
    with pytest.raises(NotFound):
        svc.delete_namespace("proj")


def test_stats_count_a_record_overwritten_in_a_newer_segment_once(home):
    svc = MemoryService(home)
    s = svc.scope("proj", "alice")
    shard = svc.engine.shard("proj", "semantic", schema="entries")
    svc.store(s, [entry(i, f"fact {i}", "semantic") for i in range(3)])
    svc.backend.checkpoint_shard(shard, force=True, wait=True)  # incremental: one segment each
    svc.store(s, [entry(0, "fact 0, again", "semantic")])  # a newer segment shadows the first version
    svc.backend.checkpoint_shard(shard, force=True, wait=True)
    assert [seg.n for seg in MemoryService(home).engine.shard("proj", "semantic", schema="entries").segs] == [3, 1]
    (row,) = [r for r in MemoryService(home).stats("proj") if r["kind"] == "semantic"]
    assert row["entries"] == row["indexed"] == 3 and row["expired"] == 0 and row["pending"] == 0


def test_stats_do_not_count_an_expired_journalled_record_as_pending(home):
    svc = MemoryService(home)
    s = svc.scope("proj", "alice")
    svc.store(s, [entry(1, "brief", "semantic", ttl=5), entry(2, "lasting", "semantic")])
    clock.set_offset(10)
    (row,) = [r for r in svc.stats("proj") if r["kind"] == "semantic"]
    assert (row["entries"], row["expired"], row["indexed"], row["pending"]) == (1, 1, 0, 1)


def test_namespace_delete_asks_for_confirmation(home):
    fill(MemoryService(home))
    refused = runner.invoke(app, ["namespaces", "delete", "proj"])
    assert refused.exit_code == 2 and "--yes" in refused.stderr
    assert runner.invoke(app, ["namespaces", "delete", "proj", "--yes"]).exit_code == 0
    assert runner.invoke(app, ["namespaces", "--format", "json"]).stdout.strip() == "[]"


def test_embedder_mismatch_is_detected_and_reindex_fixes_it(home, monkeypatch):
    svc = MemoryService(home)
    scope = fill(svc)
    monkeypatch.setenv("MEM_EMBEDDER", "hash:32")
    with pytest.raises(StoreMismatch, match="mem reindex"):
        MemoryService(home).retrieve(scope, query="python")
    result = MemoryService(home).reindex("hash:32")
    assert result["dim"] == 32 and result["entries"] >= 3
    found = MemoryService(home).retrieve(scope, query="python packaging")["entries"][0]
    assert found["key"] == {"k": 1}
    assert orjson.loads((home / "store.json").read_bytes())["dim"] == 32


def test_doctor_finds_and_repairs_a_broken_index(home):
    svc = MemoryService(home)
    scope = fill(svc)
    svc.checkpoint(force=True)
    assert MemoryService(home).doctor() == []
    index = next(home.rglob("index.ann"))
    index.write_bytes(b"not an index")
    os.chmod(next(home.rglob("data.json")), 0o644)
    findings = MemoryService(home).doctor()
    problems = " ".join(f["problem"] for f in findings)
    assert "damaged" in problems and "readable by others" in problems
    assert str(index.relative_to(home)) in [f["where"] for f in findings]
    repaired = MemoryService(home).doctor(repair=True)
    assert repaired and all(f["fixed"] and f["lost"] == 0 for f in repaired)
    fixed = MemoryService(home)
    assert [f for f in fixed.doctor() if "readable" not in f["problem"]] == []
    assert fixed.retrieve(scope, query="python packaging")["entries"][0]["key"] == {"k": 1}


def test_explain_says_why(home):
    svc = MemoryService(home)
    scope = fill(svc)
    hit = svc.retrieve(scope, query="python packaging", tags=["py"], explain=True)["entries"][0]
    why = hit["explain"]
    assert why["lexical"] == 1.0 and 0 < why["vector"] <= 1 and why["filters"]["tags"] == ["py"]
    weight, power = base.VECTOR_WEIGHT, base.LEXICAL_POWER
    assert hit["relevance"] == pytest.approx(weight * why["vector"] + (1 - weight) * why["lexical"] ** power, abs=1e-5)
    plain = svc.retrieve(scope, explain=True)["entries"][0]["explain"]
    assert "no query" in plain["fusion"]
    result = runner.invoke(app, ["retrieve", "-n", "proj", "-a", "alice", "-q", "python", "--explain"])
    assert result.exit_code == 0 and '"explain"' in result.stdout


def test_redaction_before_storing_and_embedding(home, monkeypatch):
    monkeypatch.setenv("MEM_REDACT", "1")
    svc = MemoryService(home)
    scope = svc.scope("ns", "a")
    secret = "sk-ant-" + "x" * 30
    svc.store(scope, [{"key": "cfg", "content": {"note": f"deploy key {secret}", "password": "password=hunter22"},
                       "tier": "episodic", "tags": [secret]}])  # fmt: skip
    svc.memory_set("creds", f"token: {secret}", namespace="ns")
    svc.memory_json_save({"aws": "AKIAABCDEFGHIJKLMNOP"}, namespace="ns")
    svc.checkpoint(force=True)
    on_disk = b"".join(p.read_bytes() for p in home.rglob("*") if p.is_file())
    assert secret.encode() not in on_disk and b"hunter22" not in on_disk and b"AKIAABCDEFGHIJKLMNOP" not in on_disk
    stored = svc.retrieve(scope, keys=["cfg"])["entries"][0]
    assert stored["content"]["note"] == "deploy key [REDACTED]"


def test_with_redaction_a_member_named_like_a_secret_is_masked_and_keys_follow_what_is_stored(home, monkeypatch):
    """{"password": "abcd1234"} was kept in clear, and its default key hashed the JSON text
    redacted as a whole, so {"password": "zzzz9999"} got the same key and replaced it: two
    different stored contents, one key (outside audit T24, high)."""
    from a2e_mem import Memory

    monkeypatch.setenv("MEM_REDACT", "1")
    with Memory(home) as m:
        first = m.store({"user": "ana", "password": "abcd1234", "db_token": 42})
        other = m.store({"user": "bob", "password": "zzzz9999"})
        again = m.store({"user": "ana", "password": "other-secret", "db_token": 7})  # stored the same as first
        found = {e["content"]["user"]: e for e in m.retrieve(limit=10)["entries"]}
    assert first != other and first == again
    assert found["ana"]["content"] == {"user": "ana", "password": "[REDACTED]", "db_token": "[REDACTED]"}
    assert found["bob"]["content"]["password"] == "[REDACTED]"
    on_disk = b"".join(p.read_bytes() for p in home.rglob("*") if p.is_file())
    assert b"abcd1234" not in on_disk and b"zzzz9999" not in on_disk


def test_the_cli_keys_a_text_as_the_api_does_when_config_json_redacts(home):
    """`mem store TEXT` read only MEM_REDACT, so with `"redact": true` in config.json its key
    hashed the secret and differed from the API's: one text, two entries (outside audit T24)."""
    from a2e_mem import Memory

    home.mkdir(parents=True, exist_ok=True)
    (home / "config.json").write_text('{"redact": true}')
    assert runner.invoke(app, ["store", "my token: abcd1234"]).exit_code == 0
    with Memory(home) as m:
        m.store("my token: abcd1234")
        assert m.retrieve(limit=10)["total"] == 1


def test_a_redacted_codebolt_write_answers_with_what_was_stored(home, monkeypatch):
    """The reply of a write is the stored record: it never echoes the secret it masked."""
    monkeypatch.setenv("MEM_REDACT", "1")
    svc = MemoryService(home)
    try:
        answers = [
            svc.memory_set("k", "password=hunter22", namespace="ns"),
            svc.memory_json_save({"note": "password=hunter22"}, namespace="ns"),
        ]
        saved = svc.memory_json_save({"note": "plain"}, namespace="ns")
        answers.append(svc.memory_json_update(saved["memoryId"], {"note": "password=hunter22"}, namespace="ns"))
    finally:
        svc.close()
    for answer in answers:
        assert b"hunter22" not in orjson.dumps(answer) and b"[REDACTED]" in orjson.dumps(answer), answer


def test_doctor_finds_a_store_of_key_value_pairs_healthy(home):
    """Found by an outside audit: a store that never embedded anything has checkpoints without
    vectors and no store.json, which doctor reported as missing (exit 1)."""
    from a2e_mem.service import MemoryService

    svc = MemoryService(home)
    svc.memory_set("a", "1")
    svc.memory_set("b", "2")
    svc.memory_delete("a")
    svc.checkpoint(force=True)
    assert list(home.glob("ns/*/*/seg-*")) and not (home / "store.json").exists()
    assert svc.doctor() == []
    svc.close()


@pytest.mark.parametrize(("made_by", "configured"), [("hash", None), ("hash:48", None), ("hash:256", "hash:256")])
def test_store_json_deleted_before_any_checkpoint_is_restored_from_the_journals(home, monkeypatch, made_by, configured):
    """Found by an outside audit: with no checkpoint to read it from, a deleted store.json was
    recorded again as the default embedder, whose 256-dimension queries no longer matched the
    journals' vectors (retrieval silently fell back to words)."""
    monkeypatch.setenv("MEM_EMBEDDER", made_by)
    scope = fill(MemoryService(home))
    assert not list(home.glob("ns/*/*/seg-*"))
    (home / "store.json").unlink()
    if configured is None:
        monkeypatch.delenv("MEM_EMBEDDER")
    else:
        monkeypatch.setenv("MEM_EMBEDDER", configured)
    found = MemoryService(home).retrieve(scope, query="python packaging", explain=True)["entries"][0]
    assert found["key"] == {"k": 1} and found["explain"]["vector"] > 0.5
    assert orjson.loads((home / "store.json").read_bytes())["embedder"] == made_by
    assert MemoryService(home).doctor() == []


def test_doctor_says_when_a_shards_checkpoints_keep_failing_and_repair_runs_one(home, monkeypatch):
    """Found by an outside audit: a store whose checkpoints all failed (a home whose name Annoy
    could not take) was 'healthy' to `mem doctor`, while its journal grew and a forgotten
    record stayed on disk."""
    from a2e_mem.backends.files import checkpoint

    svc = MemoryService(home)
    scope = fill(svc)
    real = checkpoint._write_range

    def failing(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(checkpoint, "_write_range", failing)
    with pytest.raises(OSError):
        svc.checkpoint(force=True)
    assert MemoryService(home).doctor() == []  # one failure is retried by the next checkpoint
    with pytest.raises(OSError):
        svc.checkpoint(force=True)
    (finding,) = MemoryService(home).doctor()
    assert "last 2 checkpoints failed" in finding["problem"] and finding["where"].endswith("checkpoint.state")
    assert not finding["fixed"]
    (still,) = MemoryService(home).doctor(repair=True)
    assert "still failing" in still["repair"] and "No space" in still["repair"] and not still["fixed"]
    monkeypatch.setattr(checkpoint, "_write_range", real)
    (done,) = MemoryService(home).doctor(repair=True)
    assert done["fixed"] and done["repair"] == "checkpointed"
    assert MemoryService(home).doctor() == []
    assert MemoryService(home).retrieve(scope, query="python packaging")["entries"][0]["key"] == {"k": 1}


@pytest.mark.parametrize("interruption", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_an_interrupted_reindex_says_what_it_left(home, monkeypatch, interruption):
    """Found by an outside audit: Ctrl-C, SIGTERM or SIGHUP during `mem reindex` exited in
    silence, store.json naming the new embedder while shards kept vectors of the old one (and
    after a first fix, SIGTERM and SIGHUP still ended the process on the spot)."""
    import signal
    import time

    def interrupted(*args, **kwargs):
        os.kill(os.getpid(), getattr(signal, interruption))
        time.sleep(5)  # the signal's handler raises first

    def not_handled(signum, frame):  # what the signal would do if mem took no care of it: end it
        raise AssertionError(f"{interruption} was not handled by mem reindex")

    fill(MemoryService(home))
    monkeypatch.setattr(MemoryService, "reindex", interrupted)
    # Python turns SIGINT into KeyboardInterrupt itself, unless the suite was started with it
    # ignored (in the background): then Python's handler is what a terminal's process has
    handler = signal.default_int_handler if interruption == "SIGINT" else not_handled
    previous = signal.signal(getattr(signal, interruption), handler)
    try:
        result = runner.invoke(app, ["reindex", "--embedder", "hash:32"])
    finally:
        signal.signal(getattr(signal, interruption), previous)
    assert not isinstance(result.exception, AssertionError), result.exception
    assert result.exit_code != 0
    assert "reindex did not finish" in result.stderr and "mem reindex" in result.stderr


def test_gc_reports_the_same_fields_on_both_backends(service):
    """Found by an outside audit comparing the backends: `mem gc` printed four counts on files and
    one on PostgreSQL."""
    s = service.init("ns", "a")
    service.store(s, [entry(1, "kept", "semantic"), entry(2, "brief", "semantic", ttl=5)])
    clock.set_offset(10)
    report = service.gc()
    assert set(report) == {"shards", "checkpointed_shards", "merges", "waited_for_running"}
    assert report["shards"] >= 1 and report["checkpointed_shards"] >= 1
    assert all(isinstance(v, int) for v in report.values())


def test_a_reindex_killed_half_way_is_healed_by_gc_and_said_meanwhile(home, monkeypatch):
    """A `mem reindex` killed (kill -9) after store.json named the new embedder left shards with
    vectors of the old one: found by words only, without a word, until `doctor --repair` (outside
    audit Z24). A shard meeting them says so, and `mem gc` re-embeds them."""
    from a2e_mem.backends.files import maintenance

    monkeypatch.delenv("MEM_EMBEDDER")
    svc = MemoryService(home, embedder="hash:32")
    for ns in ("one", "two"):
        svc.store(svc.scope(ns, "a"), [entry(i, f"deploy keys rotate {i} {ns}", "semantic") for i in range(5)])
    svc.checkpoint(force=True)
    svc.close()
    real, calls = maintenance._replace_checkpoint, []

    def killed_after_one(*args, **kwargs):
        if calls:
            raise KeyboardInterrupt  # as kill -9 would leave it: the rest not reached
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(maintenance, "_replace_checkpoint", killed_after_one)
    with pytest.raises(KeyboardInterrupt):
        MemoryService(home).reindex("hash:64")
    monkeypatch.setattr(maintenance, "_replace_checkpoint", real)
    said: list[str] = []
    heard = logging.Handler()
    heard.emit = lambda record: said.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("mem").addHandler(heard)  # mem's own logger does not propagate (caplog)
    try:
        fresh = MemoryService(home)  # the store's embedder: hash:64, recorded first
        vectors = [
            fresh.retrieve(fresh.scope(ns, "a"), query="deploy keys", explain=True)["entries"][0]["explain"]["vector"]
            for ns in ("one", "two")
        ]
    finally:
        logging.getLogger("mem").removeHandler(heard)
    assert 0.0 in vectors and any("vectors of another embedder" in line for line in said), said
    assert any("dimension" in f["problem"] for f in fresh.doctor())
    fresh.gc()
    healed = MemoryService(home)
    assert healed.doctor() == []
    for ns in ("one", "two"):
        assert (
            healed.retrieve(healed.scope(ns, "a"), query="deploy keys", explain=True)["entries"][0]["explain"]["vector"]
            > 0
        )


def test_a_namespace_s_own_redact_setting_covers_every_kind_of_record(home):
    """config.json's per-namespace "redact" was honoured by A2E entries only: key-value pairs,
    JSON, markdown, episodic events and LangGraph items went by the store-wide setting, the
    secret kept in clear on disk (outside audit U24, high); the other way round, a namespace
    that turned it off still had them masked."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.json").write_text('{"redact": false, "namespaces": {"team": {"redact": true}}}')
    secret = "sk-ant-" + "x" * 30
    svc = MemoryService(home)
    for ns in ("team", "open"):
        svc.store(svc.scope(ns, "a"), [entry("e", f"api_key={secret}", "semantic")])
        svc.memory_set("k", f"api_key={secret}", namespace=ns)
        svc.memory_json_save({"note": "x", "password": "hunter22"}, namespace=ns)
        svc.memory_markdown_save(f"token: {secret}", namespace=ns)
        log = svc.episodic_memory_create("log", namespace=ns)["memoryId"]
        svc.episodic_memory_append_event(
            log, {"event_type": "t", "emitting_agent_id": "a", "payload": f"api_key={secret}"}, namespace=ns
        )
    svc.checkpoint(force=True)
    svc.close()
    for ns, masked in (("team", True), ("open", False)):
        (folder,) = [p.parent for p in home.glob("ns/*/namespace.json") if f'"{ns}"' in p.read_text()]
        on_disk = b"".join(p.read_bytes() for p in folder.rglob("*") if p.is_file())
        assert (secret.encode() in on_disk) is not masked and (b"hunter22" in on_disk) is not masked, ns


def test_redaction_asked_by_the_environment_holds_in_a_namespace_that_turns_it_off(home, monkeypatch):
    """MEM_REDACT=1 (what --redact sets) was overridden by a namespace's "redact": false in
    config.json: the secret stored in clear though the person running mem asked for masking
    (outside audit V24, low). The environment's redaction is a floor; without it, the namespace
    still decides."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.json").write_text('{"namespaces": {"open": {"redact": false, "max_entries": 10}}}')
    secret = "sk-ant-" + "y" * 30
    for forced in (True, False):
        monkeypatch.setenv("MEM_REDACT", "1" if forced else "0")
        svc = MemoryService(home)
        assert svc.config.for_namespace("open").max_entries == 10  # the rest of the override holds
        svc.store(svc.scope("open", "a"), [entry(f"e{forced}", f"api_key={secret}", "semantic")])
        got = svc.retrieve(svc.scope("open", "a"), keys=[{"k": f"e{forced}"}])["entries"][0]["content"]
        svc.close()
        assert (secret in got) is not forced, (forced, got)


def test_graph_writes_answer_with_what_was_stored_when_the_namespace_redacts(home):
    """create_entities and add_observations echoed the secret the store masked (outside audit
    V24); a masked observation added twice is one observation."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.json").write_text('{"namespaces": {"sec": {"redact": true}}}')
    secret = "sk-proj-" + "A" * 24
    svc = MemoryService(home)
    made = svc.kg_create_entities([{"name": "X", "entityType": "t", "observations": [secret]}], namespace="sec")
    added = svc.kg_add_observations([{"entityName": "X", "contents": [f"o2 {secret}"]}], namespace="sec")
    again = svc.kg_add_observations([{"entityName": "X", "contents": [f"o2 {secret}"]}], namespace="sec")
    stored = svc.kg_open_nodes(["X"], namespace="sec")["entities"][0]
    svc.close()
    assert secret not in orjson.dumps([made, added]).decode()
    assert made[0]["observations"] == stored["observations"][:1] == ["[REDACTED]"]
    assert added[0]["addedObservations"] == ["o2 [REDACTED]"] and again[0]["addedObservations"] == []
    assert stored["observations"] == ["[REDACTED]", "o2 [REDACTED]"]
