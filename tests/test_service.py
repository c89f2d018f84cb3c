"""A2E semantics through the service: scopes, upserts, validation, limits, TTL, retrieve, forget."""

from __future__ import annotations

import os

import orjson
import pytest

from a2e_mem import clock
from a2e_mem.errors import InvalidInput, MemoryFull, NotFound
from a2e_mem.service import MemoryService

from .conftest import entry, stored_anywhere


def keys_of(result):
    return [e["key"] for e in result["entries"]]


def test_store_then_retrieve_by_key_tag_and_query(service):
    s = service.init("ns", "alice")
    out = service.store(
        s,
        [
            entry({"topic": "prefs"}, {"language": "python"}, tags=["preferences"]),
            entry("cat", "the cat sat on the mat", tier="semantic", tags=["animals"]),
        ],
    )
    assert out == {"stored": [{"topic": "prefs"}, {"k": "cat"}], "errors": []}
    assert keys_of(service.retrieve(s, keys=[{"topic": "prefs"}])) == [{"topic": "prefs"}]
    assert keys_of(service.retrieve(s, tags=["animals"])) == [{"k": "cat"}]
    hit = service.retrieve(s, query="python language")["entries"][0]
    assert hit["key"] == {"topic": "prefs"} and 0 < hit["relevance"] <= 1


def test_string_key_is_accepted_as_key_dict(service):
    s = service.init("ns", "alice")
    assert service.store(s, [{"key": "plain", "content": 1, "tier": "episodic"}])["stored"] == [{"key": "plain"}]
    assert keys_of(service.retrieve(s, keys=["plain"])) == [{"key": "plain"}]


def test_keys_compare_in_canonical_form(service):
    s = service.init("ns", "a")
    service.store(s, [entry({"b": 1, "a": 2}, "x")])
    assert len(service.retrieve(s, keys=[{"a": 2, "b": 1}])["entries"]) == 1


def test_update_keeps_created_at_and_bumps_updated_at(service):
    s = service.init("ns", "a")
    service.store(s, [entry("k", "v1")])
    first = service.retrieve(s, keys=[{"k": "k"}])["entries"][0]
    clock.set_offset(100)
    service.store(s, [entry("k", "v2")])
    after = service.retrieve(s, keys=[{"k": "k"}])
    assert after["total"] == 1
    second = after["entries"][0]
    assert second["content"] == "v2"
    assert second["created_at"] == first["created_at"]
    assert second["updated_at"] >= first["updated_at"] + 99


def test_invalid_entries_are_reported_by_index_and_valid_ones_stored(service):
    s = service.init("ns", "a")
    out = service.store(
        s,
        [
            entry("ok", "fine"),
            {"key": {"k": 1}, "content": "x", "tier": "cosmic"},
            entry("s", "x", score=1.5),
            entry("t", "x", ttl=-1),
            {"key": {"k": 2}, "tier": "episodic"},
            "not an object",
        ],
    )
    assert out["stored"] == [{"k": "ok"}]
    assert [e.split(":")[0] for e in out["errors"]] == [f"entries[{i}]" for i in (1, 2, 3, 4, 5)]
    assert "tier" in out["errors"][0] and "score" in out["errors"][1] and "ttl" in out["errors"][2]
    assert "content" in out["errors"][3]


def test_content_size_limit(home, monkeypatch):
    monkeypatch.setenv("MEM_MAX_ENTRY_BYTES", "100")
    svc = MemoryService(home)
    s = svc.init("ns", "a")
    out = svc.store(s, [entry("big", "x" * 200), entry("small", "y")])
    assert out["stored"] == [{"k": "small"}] and "over the 100-byte limit" in out["errors"][0]


def test_namespace_entry_limit_stores_what_fits_then_gives_memory_full(home, monkeypatch):
    monkeypatch.setenv("MEM_MAX_ENTRIES", "3")
    svc = MemoryService(home)
    s = svc.init("ns", "a")
    svc.store(s, [entry(i, "x") for i in range(2)])
    some = svc.store(s, [entry("a", "x"), entry("b", "x", tier="semantic")])
    assert some["stored"] == [{"k": "a"}] and some["errors"][0].startswith("entries[1]: memory_full:")
    with pytest.raises(MemoryFull) as full:  # no room for any of them: the request is refused
        svc.store(s, [entry("c", "x")])
    assert full.value.detail["errors"][0].startswith("entries[0]: memory_full:")
    assert svc.retrieve(s, limit=100)["total"] == 3
    svc.store(s, [entry(0, "updated")])  # an update does not add an entry
    other = svc.init("other", "a")
    svc.store(other, [entry(i, "x") for i in range(3)])  # the limit is per namespace


def test_tiers_are_scoped(service):
    alice = service.init("ns", "alice")
    bob = service.init("ns", "bob")
    service.store(
        alice,
        [
            entry("w", "alice scratch", tier="working"),
            entry("e", "alice diary"),
            entry("s", "shared fact", tier="semantic"),
        ],
    )
    assert keys_of(service.retrieve(bob, limit=10)) == [{"k": "s"}]
    assert {e["tier"] for e in service.retrieve(alice)["entries"]} == {"working", "episodic", "semantic"}
    later = service.init("ns", "alice")  # a new session: working is gone, episodic survives
    assert sorted(e["tier"] for e in service.retrieve(later)["entries"]) == ["episodic", "semantic"]
    assert service.retrieve(service.init("other-ns", "alice"))["total"] == 0


def test_unknown_memory_id_is_not_found(service):
    with pytest.raises(NotFound):
        service.session("nope")


def test_ttl_expiry_hides_entries_and_gc_purges_them(service, home):
    s = service.init("ns", "a")
    service.store(s, [entry("short", "gone soon", ttl=10), entry("long", "stays")])
    assert service.retrieve(s)["total"] == 2
    clock.set_offset(11)
    assert keys_of(service.retrieve(s)) == [{"k": "long"}]
    assert service.retrieve(s, query="gone soon")["total"] == 1
    assert service.checkpoint(force=True) >= 1
    assert not stored_anywhere(home, "gone soon") and stored_anywhere(home, "stays")


def test_an_expired_entry_no_longer_weighs_in_the_bm25_statistics(service):
    """Found by an outside audit comparing the backends: on PostgreSQL the term statistics kept
    counting expired entries until `mem gc`, so relevance, order and `min_score` differed from
    the files backend (and from a scope that never held them)."""
    live = [entry(1, "alpha beta"), entry(2, "gamma delta"), entry(3, "epsilon zeta")]
    expiring = [entry(4, "alpha delta", ttl=5), entry(5, "alpha alpha delta words", ttl=5)]
    with_expired, never = service.init("ns", "a"), service.init("ns", "b")
    service.store(with_expired, live + expiring)
    service.store(never, live)
    clock.set_offset(10)

    def explained(scope):
        found = service.retrieve(scope, query="alpha delta", explain=True)["entries"]
        return {e["key"]["k"]: (e["relevance"], e["explain"]["lexical"]) for e in found}

    assert explained(with_expired) == explained(never)


def test_a_query_counts_its_first_distinct_words_only_for_bm25(service):
    """A query of thousands of distinct words kept a PostgreSQL search busy for minutes (outside
    audit 34a: each row's terms are matched against every query term). Both backends score the
    first MAX_QUERY_TERMS distinct terms of a query, in its order, and rank alike."""
    from a2e_mem.lexical import MAX_QUERY_TERMS, query_terms

    filler = [f"filler{i}x" for i in range(MAX_QUERY_TERMS + 50)]
    s = service.init("ns", "a")
    service.store(s, [entry("first", "filler0x notes"), entry("late", f"{filler[-1]} notes")])
    query = " ".join(filler + filler[:10])  # repeats count once
    assert query_terms(query) == tuple(filler[:MAX_QUERY_TERMS])
    found = service.retrieve(s, query=query, explain=True)["entries"]
    lexical = {e["key"]["k"]: e["explain"]["lexical"] for e in found}
    assert lexical["first"] > 0 and lexical["late"] == 0


def test_stats_count_an_expired_entry_as_expired_only_not_as_pending_or_indexed(service):
    """Found by an outside audit comparing the backends: PostgreSQL counted a record past its
    expiry (not yet purged) in `pending` too (10 where files said 5)."""
    s = service.init("ns", "a")
    service.store(s, [entry(i, f"note {i}", tier="semantic") for i in range(3)])
    service.store(s, [entry(f"x{i}", f"gone {i}", tier="semantic", ttl=5) for i in range(2)])
    clock.set_offset(10)
    (row,) = [r for r in service.stats("ns") if r["kind"] == "semantic"]
    assert (row["entries"], row["expired"], row["indexed"] + row["pending"]) == (3, 2, 3)


def test_retrieve_ands_filters_and_counts_total_before_limit(service):
    s = service.init("ns", "a")
    service.store(s, [entry(i, f"note {i}", tags=["a", "b"] if i % 2 else ["a"]) for i in range(10)])
    both = service.retrieve(s, tags=["a", "b"], limit=2)
    assert both["total"] == 5 and len(both["entries"]) == 2
    assert service.retrieve(s, tags=["a", "b"], keys=[{"k": 1}, {"k": 2}])["total"] == 1
    assert service.retrieve(s, tier="semantic")["total"] == 0


def test_relevance_without_query_is_score_ordered_then_recent(service):
    s = service.init("ns", "a")
    service.store(s, [entry("low", "x", score=0.2), entry("high", "y", score=0.9)])
    clock.set_offset(5)
    service.store(s, [entry("high2", "z", score=0.9)])
    result = service.retrieve(s)
    assert keys_of(result) == [{"k": "high2"}, {"k": "high"}, {"k": "low"}]
    assert [e["relevance"] for e in result["entries"]] == [1.0, 1.0, 1.0]  # a filter-only match is full
    assert service.retrieve(s, min_score=0.5)["total"] == 3  # the stored score never filters


def test_min_score_filters_on_relevance_not_importance(service):
    s = service.init("ns", "a")
    service.store(
        s, [entry("py", "python programming language", score=0.01), entry("cook", "baking bread recipes", score=1.0)]
    )
    result = service.retrieve(s, query="python programming", min_score=0.5)
    assert keys_of(result) == [{"k": "py"}] and result["total"] == 1


def test_forget_by_key_tag_and_whole_tier(service):
    s = service.init("ns", "a")
    service.store(
        s, [entry(i, "x", tags=["t"] if i < 3 else []) for i in range(6)] + [entry("s", "x", tier="semantic")]
    )
    assert service.forget(s, keys=[{"k": 4}]) == 1
    assert service.forget(s, keys=[{"k": 4}]) == 0
    assert service.forget(s, tags=["t"]) == 3
    with pytest.raises(InvalidInput, match="all"):  # a bare forget deletes nothing (audit 8)
        service.forget(s)
    assert service.forget(s, everything=True) == 2  # the rest of the episodic tier (default): 3 and 5
    assert keys_of(service.retrieve(s)) == [{"k": "s"}]
    assert service.forget(s, tier="semantic", everything=True) == 1


def test_forget_with_keys_and_tags_needs_both(service):
    s = service.init("ns", "a")
    service.store(s, [entry("a", "x", tags=["t"]), entry("b", "x")])
    assert service.forget(s, keys=[{"k": "b"}], tags=["t"]) == 0
    assert service.forget(s, keys=[{"k": "a"}], tags=["t"]) == 1


def test_persisted_session_keeps_working_tier_until_closed(home):
    first = MemoryService(home)
    s = first.init("ns", "a", persist=True)
    first.store(s, [entry("w", "scratch", tier="working")])
    first.close()
    second = MemoryService(home)
    again = second.session(s.memory_id)
    assert keys_of(second.retrieve(again, tier="working")) == [{"k": "w"}]
    second.close_session(s.memory_id)
    with pytest.raises(NotFound):
        MemoryService(home).session(s.memory_id)


def test_another_process_sees_writes(home):
    writer, reader = MemoryService(home), MemoryService(home)
    r = reader.scope("ns", "a")
    assert reader.retrieve(r)["total"] == 0
    writer.store(writer.scope("ns", "a"), [entry("x", "hello")])
    assert reader.retrieve(r)["total"] == 1
    writer.forget(writer.scope("ns", "a"), everything=True)
    assert reader.retrieve(r)["total"] == 0


def test_config_with_an_unknown_setting_is_refused_naming_it(home):
    import subprocess
    import sys
    from pathlib import Path

    from a2e_mem.errors import InvalidInput

    home.mkdir(parents=True, exist_ok=True)
    (home / "config.json").write_text('{"max_entries": 10, "namespaces": {"team": {"semantic_writer": ["lead"]}}}')
    with pytest.raises(InvalidInput, match="'semantic_writer' \\(did you mean 'semantic_writers'\\?\\)"):
        MemoryService(home)
    proc = subprocess.run(
        [sys.executable, "-m", "a2e_mem.cli.main", "stats"], cwd=Path(__file__).resolve().parents[1],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 4 and "semantic_writer" in proc.stderr and "team" in proc.stderr
    (home / "config.json").write_text('{"max_entries": 10, "namespaces": {"team": {"semantic_writers": ["lead"]}}}')
    svc = MemoryService(home)
    try:
        assert svc.config.for_namespace("team").semantic_writers == ("lead",)
    finally:
        svc.close()


def test_the_default_key_is_not_part_of_what_is_embedded(service):
    """`mem store TEXT` keys the entry by a hash of its content; that hash is no word, and an
    entry's vector is its text's alone (the audit found a cosine of 0.39 where 0.61 was due)."""
    scope = service.scope("ns", "a")
    text = "The staging database is rebuilt every Sunday at 02:00 UTC."
    from a2e_mem.ops.a2e import content_key

    service.store(scope, [{"content": text, "tier": "semantic", "key": content_key(text)}])  # as `mem store TEXT`
    service.store(scope, [{"content": text, "tier": "semantic", "key": {"topic": "staging"}}])
    found = service.retrieve(scope, query=text, explain=True, limit=5)["entries"]
    by_key = {orjson.dumps(e["key"]).decode(): e["explain"]["vector"] for e in found}
    hashed = next(v for k, v in by_key.items() if '"hash"' in k)
    assert hashed == pytest.approx(1.0, abs=1e-3)  # the query is exactly its text
    assert by_key['{"topic":"staging"}'] < hashed  # a key the user gave is part of the text


@pytest.mark.files_only
def test_a_long_lived_process_keeps_a_bounded_number_of_files_open(home):
    """Found by an outside audit: `serve-stdio` kept every shard it met open (its journal, and
    its segments' mapped files), and at about 400 namespaces every write failed with `Too many
    open files`. Past OPEN_SHARDS the least recently used ones are let go, and freed at once."""
    import gc
    import weakref

    from a2e_mem.backends.files import engine

    gc.disable()  # freed by reference counting alone: no cycle holds a shard let go
    try:
        svc = MemoryService(home)
        first = weakref.ref(svc.backend.scope("ns0", "semantic"))
        before = len(os.listdir("/proc/self/fd"))
        count = engine.OPEN_SHARDS * 3
        for i in range(count):
            scope = svc.scope(f"ns{i}", "a")
            svc.store(scope, [entry(i, f"note {i}", "semantic")])
            if i % 10 == 0:
                svc.forget(scope, keys=[{"k": i}], tier="semantic")
        assert first() is None
        assert len(os.listdir("/proc/self/fd")) - before <= engine.OPEN_SHARDS + 8
    finally:
        gc.enable()
    for i in range(count):  # every shard, let go or not, still reads and writes what it should
        scope = svc.scope(f"ns{i}", "a")
        assert svc.retrieve(scope, tier="semantic")["total"] == (0 if i % 10 == 0 else 1)
    svc.close()


def test_keys_and_words_past_postgresqls_index_limits(service):
    """Found by an outside audit comparing the backends: on PostgreSQL a key of about 3 KB in
    UTF-8, or one word of thousands of letters, failed the whole request in the middle of its
    write as `cannot reach the server` (exit 7), the valid entries beside it lost too. Each is
    now refused on its own with the reason (PostgreSQL) or kept (files); a long word is cut."""
    on_postgres = bool(os.environ.get("MEM_STORE"))
    s = service.init("ns", "a")
    result = service.store(s, [entry("k" * 3000, "long key", "semantic"), entry("short", "kept", "semantic")])
    if on_postgres:
        assert result["stored"] == [{"k": "short"}]
        assert "too long for the PostgreSQL store" in result["errors"][0] and "2600" in result["errors"][0]
    else:
        assert len(result["stored"]) == 2
    word = "f00d" * 1250
    assert service.store(s, [entry("hex", f"dump {word} end", "semantic")])["stored"]
    assert keys_of(service.retrieve(s, query="dump end", tier="semantic"))[0] == {"k": "hex"}
    long_kv_key = "漢" * 1024  # 1024 characters (the documented limit), 3072 bytes
    if on_postgres:
        with pytest.raises(InvalidInput, match="too long for the PostgreSQL store"):
            service.memory_set(long_kv_key, "v")
        with pytest.raises(InvalidInput, match="namespace too long"):  # at init, not at the first write
            service.init("😀" * 1024, "a")
    else:
        service.memory_set(long_kv_key, "v")
        assert service.memory_get(long_kv_key) is not None


def test_exporting_a_namespace_that_is_not_there_is_not_found(service):
    """`mem export -n typo > backup` made an empty backup with exit 0 (outside audit Q24); a
    namespace whose entries are all gone still exports, empty."""
    from a2e_mem.errors import NotFound

    scope = service.scope("there", "a")
    service.store(scope, [{"key": {"k": 1}, "content": "x", "tier": "semantic"}])
    with pytest.raises(NotFound, match="typo"):
        list(service.export("typo"))
    assert len(list(service.export("there"))) == 1
    service.forget(scope, keys=[{"k": 1}], tier="semantic")
    assert list(service.export("there")) == []


def test_entries_tied_on_relevance_and_time_are_listed_by_key_whatever_order_stored(service):
    """Ties came in the order a backend stored the records, so an export and import (which
    writes them in id order) changed the listing, and the bridge's leader among entries tied at
    the top, with every relevance it lifts (outside audit 30c). Now ties are ordered by record id."""
    keys = ["c", "a", "e", "b", "d"]
    listed: dict[str, list] = {}
    for name, order in (("one", keys), ("two", list(reversed(keys)))):
        session = service.init(name, "alice")
        service.store(session, [entry(k, "the same words in each", tier="semantic") for k in order])
        for query in ("", "same words"):
            found = service.retrieve(session, query=query, limit=5)["entries"]
            listed.setdefault(query, []).append([(e["key"]["k"], e["relevance"]) for e in found])
    for query, (one, two) in listed.items():
        assert one == two  # the same listing, whichever order the records were stored in
        ties = [k for k, relevance in one if relevance == one[0][1]]
        assert len(ties) >= 2 and ties == sorted(ties), query  # a tie group, by key
