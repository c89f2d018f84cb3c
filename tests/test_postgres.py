"""The PostgreSQL backend against a real PostgreSQL with pgvector (see `tests/pg.py`): the seam's
contract at the backend level, connections and their errors, migrations, locks, hostile names,
search, TTL, and upkeep."""

# ruff: noqa: F811 (the fixtures imported from tests/pg.py are named as the tests' arguments)

from __future__ import annotations

import os
import threading
import time

import numpy as np
import orjson
import psycopg
import pytest

from a2e_mem import clock
from a2e_mem.backends import open_backend
from a2e_mem.backends.base import SYSTEM, Filters
from a2e_mem.backends.postgres import open_postgres
from a2e_mem.backends.postgres import schema as sch
from a2e_mem.backends.postgres import search as pg_search
from a2e_mem.embed import encode_vectors, get_embedder
from a2e_mem.errors import InvalidInput, NotFound, StoreUnavailable
from a2e_mem.schemas import SCHEMAS
from tests.pg import pg_server, pg_url, with_user  # noqa: F401

PASSWORD = "s3cret-Pa55word"


@pytest.fixture
def db(pg_url):
    store = open_postgres(pg_url, "hash")
    yield store
    store.close()


def recs(db, schema, docs):
    """Journal-style records for `docs` (embedded when the schema is searchable)."""
    out = [{"id": d["id"], "doc": d, "size": len(orjson.dumps(d))} for d in docs]
    if SCHEMAS[schema].indexed and out:
        for rec, vec in zip(out, encode_vectors(db.embed([SCHEMAS[schema].text(d) for d in docs])), strict=True):
            rec["vec"] = vec
    return out


def put(db, namespace, kind, docs, *scope, schema="entries"):
    target = db.scope(namespace, kind, *scope, schema=schema)
    with db.lock(namespace):
        target.append({"op": "put", "recs": recs(db, schema, docs)})
    db.after_write(target)
    return target


def entry(rid, content, **extra):
    return {"id": rid, "content": content, "key": {"k": rid}, "tags": [], **extra}


def ids(parts):
    return [part.doc(i)["id"] for part in parts for i in range(len(part.rows))]


def admin_sql(url, statement, params=()):
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(statement, params)
        return cur.fetchall() if cur.description else None


# -- opening and errors ------------------------------------------------------------------------


def test_open_backend_selects_postgres_and_masks_the_password(pg_url):
    url = with_user(pg_url, "postgres", PASSWORD)
    store = open_backend(url, home=None)
    try:
        assert type(store).__name__ == "PostgresBackend"
        assert PASSWORD not in store.url and "***" in store.url
    finally:
        store.close()


def test_unreachable_server_is_one_retryable_line_without_the_password():
    store = open_postgres(f"postgresql://someone:{PASSWORD}@127.0.0.1:1/nowhere?connect_timeout=3", "hash")
    with pytest.raises(StoreUnavailable) as caught:
        store.scope("ns", "kv").get("x", clock.now())
    message = caught.value.message
    assert caught.value.exit_code == 7 and caught.value.retryable
    assert "\n" not in message and PASSWORD not in message and "127.0.0.1" in message
    assert "***" in message  # the store is named, its password masked


def test_wrong_password_is_refused_in_one_line(pg_server):
    if not pg_server.require_passwords("mem_pw_role"):
        pytest.skip("an existing server (MEM_TEST_PG_URL): its authentication is not ours to change")
    admin_sql(pg_server.url, "DROP ROLE IF EXISTS mem_pw_role")
    admin_sql(pg_server.url, f"CREATE ROLE mem_pw_role LOGIN PASSWORD '{PASSWORD}'")
    name, url = pg_server.create_database(owner="mem_pw_role", extension=True)
    try:
        store = open_postgres(with_user(url, "mem_pw_role", "wrong-" + PASSWORD), "hash")
        with pytest.raises(StoreUnavailable) as caught:
            store.namespaces()
        message = caught.value.message
        assert "credentials" in message and not caught.value.retryable
        assert "\n" not in message and "wrong-" not in message and PASSWORD not in message
        good = open_postgres(with_user(url, "mem_pw_role", PASSWORD), "hash")  # the right one works
        assert good.namespaces() == []
        assert PASSWORD not in good.url
        good.close()
    finally:
        pg_server.drop_database(name)


def test_missing_extension_names_the_sql_to_run(pg_server):
    admin_sql(pg_server.url, "DROP ROLE IF EXISTS mem_plain_role")
    admin_sql(pg_server.url, "CREATE ROLE mem_plain_role LOGIN NOSUPERUSER")
    name, url = pg_server.create_database()  # owned by the admin, without pgvector
    try:
        admin_sql(url, "GRANT CREATE, USAGE ON SCHEMA public TO mem_plain_role")
        store = open_postgres(with_user(url, "mem_plain_role", None), "hash")
        with pytest.raises(StoreUnavailable) as caught:
            store.namespaces()
        message = caught.value.message
        assert "CREATE EXTENSION vector;" in message and "superuser" in message and "\n" not in message
        assert not admin_sql(url, "SELECT 1 FROM pg_tables WHERE tablename = 'mem_records'")  # nothing half made
    finally:
        pg_server.drop_database(name)


def test_missing_database_is_named(pg_server):
    url = with_user(pg_server.url, "postgres", PASSWORD).replace("/postgres?", "/mem_no_such_db?")
    store = open_postgres(url, "hash")
    with pytest.raises(StoreUnavailable) as caught:
        store.namespaces()
    assert "mem_no_such_db" in caught.value.message and "CREATE DATABASE" in caught.value.message
    assert PASSWORD not in caught.value.message


def test_missing_psycopg_names_the_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(StoreUnavailable) as caught:
        open_postgres("postgresql://localhost/x")
    assert "a2e-mem[postgres]" in caught.value.message


def test_a_lost_connection_is_retryable_then_reconnected(pg_url):
    for pooled in (False, True):
        store = open_postgres(pg_url, "hash", pooled=pooled)
        put(store, "ns", "kv", [{"id": "a", "v": 1}], schema="records")
        admin_sql(  # and wait (up to 5 s) for them to be gone, as after a restart: the pool
            # notices a connection the server ended by its socket, without a round trip
            pg_url,
            "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()",
        )
        try:
            found = store.scope("ns", "kv").get("a", clock.now())
        except StoreUnavailable as exc:  # the single connection learns of it on use: one failure
            assert exc.retryable and "\n" not in exc.message and not pooled
            found = store.scope("ns", "kv").get("a", clock.now())
        assert found == {"id": "a", "v": 1}
        store.close()


# -- schema ------------------------------------------------------------------------------------


def test_migrations_are_idempotent_and_safe_for_eight_processes_at_once(pg_url):
    errors, stores = [], []
    start = threading.Barrier(8)

    def open_one(i):
        try:
            store = open_postgres(pg_url, "hash")
            stores.append(store)
            start.wait()
            put(store, f"ns{i}", "kv", [{"id": "a", "n": i}], schema="records")
        except Exception as exc:  # noqa: BLE001 - collected, asserted below
            errors.append(exc)

    threads = [threading.Thread(target=open_one, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert admin_sql(pg_url, "SELECT version FROM mem_schema") == [(sch.VERSION,)]
    again = open_postgres(pg_url, "hash")
    assert again.namespaces() == [f"ns{i}" for i in range(8)]
    for store in [*stores, again]:
        store.close()


def test_a_version_2_database_gets_the_expiry_index_with_sizes_and_keeps_its_rows(db, pg_url):
    """Migration 3 replaces the expiry index by one that holds each row's size."""
    now = clock.now()
    put(db, "ns", "semantic", [entry("soon", "cat", expires_at=now + 5), entry("kept", "dog")])
    admin_sql(pg_url, "DROP INDEX mem_records_expiring")
    admin_sql(
        pg_url, "CREATE INDEX mem_records_expiry ON mem_records (namespace, expires_at) WHERE expires_at IS NOT NULL"
    )  # noqa: E501
    admin_sql(pg_url, "UPDATE mem_schema SET version = 2")
    again = open_postgres(pg_url, "hash")
    assert sorted(d["id"] for d in again.scope("ns", "semantic", schema="entries").docs(now)) == ["kept", "soon"]
    assert admin_sql(pg_url, "SELECT version FROM mem_schema") == [(sch.VERSION,)]
    names = "('mem_records_expiring', 'mem_records_expiry')"
    (definition,) = admin_sql(pg_url, f"SELECT indexdef FROM pg_indexes WHERE indexname IN {names}")
    assert "mem_records_expiring" in definition[0] and "INCLUDE (size)" in definition[0]
    assert again.usage("ns", now + 10) == again.scope("ns", "semantic", schema="entries").usage(now + 10)
    again.close()


def test_a_write_section_reads_its_entry_with_one_plan_made_once(db):
    """The usage read at each write's entry runs its generic plan (an index-only scan), not a
    plan made again for each write (0.6 ms of the server's 2 ms a write at 100k); the write
    section's own statements plan as the session says (the setting is reset after it)."""
    for i in range(7):
        put(db, "ns", "semantic", [entry(f"e{i}", TEXTS[i % len(TEXTS)])])
    with db.db.connection() as conn:
        plans = conn.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
            "WHERE starts_with(statement, 'SELECT meta.')"
        ).fetchall()
        settings = conn.execute("SELECT current_setting('plan_cache_mode'), current_setting('enable_seqscan')")
        settings = settings.fetchone()
    ((generic, custom),) = plans
    assert custom == 0 and generic >= 6  # (the first write section prepares it)
    assert settings == ("auto", "on")


def test_a_write_section_is_two_round_trips(db, monkeypatch):
    """BEGIN, the locks and the entry read travel together (taken with a flush), then the
    writes, the COMMIT and the flush with the one Sync of the section. psycopg's
    `conn.transaction()` in a pipeline sent a Sync more, after its BEGIN alone: a round trip of
    its own (0.5 ms a write)."""
    from psycopg import _pipeline_base

    put(db, "ns", "semantic", [entry("e0", TEXTS[0])])  # connects, migrates, sizes the vector column
    syncs = []
    enqueue = _pipeline_base.BasePipeline._enqueue_sync
    monkeypatch.setattr(_pipeline_base.BasePipeline, "_enqueue_sync", lambda self: syncs.append(1) or enqueue(self))
    put(db, "ns", "semantic", [entry("e1", TEXTS[1])])
    assert len(syncs) == 1
    assert sorted(d["id"] for d in db.scope("ns", "semantic").docs(clock.now())) == ["e0", "e1"]


@pytest.mark.parametrize("pooled", [False, True])
def test_a_lock_timeout_is_retryable_and_the_next_write_works(pg_url, pooled):
    """Outside audit: after one statement cancelled by a `lock_timeout` (the server skips what a
    pipeline queued behind a failed statement, its ROLLBACK too) the one connection of a
    `Memory` stayed in an aborted transaction and refused everything after (25P02). And the
    error said "cannot reach the server", not retryable: the server had answered."""
    store = open_postgres(pg_url + "&options=-c%20lock_timeout%3D300", "hash", pooled=pooled)
    try:
        put(store, "ns", "semantic", [entry("a", TEXTS[0])])
        with psycopg.connect(pg_url) as holder:  # another writer of the namespace, for a while
            holder.execute("SELECT pg_advisory_xact_lock(hashtextextended('ns', 0))")
            with pytest.raises(StoreUnavailable) as failed:
                put(store, "ns", "semantic", [entry("b", TEXTS[1])])
        assert failed.value.retryable and "cancelled a statement" in failed.value.message
        assert "cannot reach" not in failed.value.message
        for i in range(3):  # the same connection (or pool) goes on
            put(store, "ns", "semantic", [entry(f"c{i}", TEXTS[i])])
        assert sorted(d["id"] for d in store.scope("ns", "semantic").docs(clock.now())) == ["a", "c0", "c1", "c2"]
        with store.db.connection() as conn:
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    finally:
        store.close()


def test_a_write_refused_at_its_commit_leaves_the_connection_usable(db, monkeypatch):
    """A statement that fails in the section's last round trip (the writes, the COMMIT) makes the
    server skip the COMMIT: the transaction is rolled back after the pipeline's Sync."""
    from a2e_mem.backends.postgres import scope as pg_scope

    put(db, "ns", "semantic", [entry("a", TEXTS[0])])
    monkeypatch.setattr(pg_scope, "INSERT", pg_scope.INSERT.replace("u.size", "u.size / 0", 1))
    with pytest.raises(StoreUnavailable):
        put(db, "ns", "semantic", [entry("b", TEXTS[1])])
    monkeypatch.undo()
    put(db, "ns", "semantic", [entry("c", TEXTS[2])])
    assert sorted(d["id"] for d in db.scope("ns", "semantic").docs(clock.now())) == ["a", "c"]
    assert db.doctor() == []


def test_a_failed_flush_after_the_commit_is_done_again_not_reported(db, pg_url, monkeypatch):
    """The write is committed when the flush that makes it durable runs (see `lock`): a cancel of
    that flush (found with an administrator's `pg_cancel_backend` on appenders) reported a write
    failed that was stored, and a client sending it again would store a second event."""
    from a2e_mem.backends.postgres import backend as pg_backend

    put(db, "ns", "semantic", [entry("a", TEXTS[0])])
    assert db.db.early_release
    admin_sql(pg_url, "CREATE SEQUENCE flush_fails")
    monkeypatch.setattr(
        pg_backend,
        "FLUSH",
        "SELECT 1 / (nextval('flush_fails') - 1), " + pg_backend.FLUSH[7:],  # 1 / 0 once
    )
    put(db, "ns", "semantic", [entry("b", TEXTS[1])])  # no error: the flush failed once, then ran
    assert admin_sql(pg_url, "SELECT last_value FROM flush_fails") == [(2,)]
    assert sorted(d["id"] for d in db.scope("ns", "semantic").docs(clock.now())) == ["a", "b"]


def test_a_failed_generic_read_leaves_the_connection_usable(db):
    """As a write section's: a read under its generic plan that fails (a cancel, a timeout) must
    not leave the one connection in an aborted transaction."""
    put(db, "ns", "semantic", [entry("a", TEXTS[0])])
    with pytest.raises(StoreUnavailable):
        db.db.read_generic("SELECT 1 / (%(x)s::int - 1)", {"x": 1})
    assert db.db.read_generic("SELECT %(x)s::int", {"x": 5}) == [(5,)]
    with db.db.connection() as conn:
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert conn.execute("SELECT current_setting('enable_seqscan')").fetchone() == ("on",)


def test_search_statistics_run_their_generic_plan_and_leave_the_session_as_it_was(db):
    """The statistics read of each search (lookups by key) was planned again for every query
    (0.9 of its 1.2 ms on the server): now its one generic plan, never parallel (two workers
    started to count an empty scope took 10 ms), with the settings local to its transaction."""
    target = put(db, "ns", "semantic", [entry(f"e{i}", TEXTS[i % len(TEXTS)]) for i in range(20)])
    empty = db.scope("ns", "episodic")
    for _ in range(7):
        for scope in (target, empty):
            scope.search(clock.now(), Filters(), db.embed(["budget review"])[0], "budget review")
    with db.db.connection() as conn:
        plans = conn.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE '%WITH gone AS%'"
        ).fetchall()
        settings = conn.execute(
            "SELECT current_setting('plan_cache_mode'), current_setting('enable_seqscan'), "
            "current_setting('max_parallel_workers_per_gather')"
        ).fetchone()
    assert plans and all(custom == 0 for _, custom in plans) and sum(g for g, _ in plans) >= 6
    assert settings == ("auto", "on", "2")


def test_the_entry_s_one_plan_reads_the_expiry_index_even_with_the_statistics_of_a_bulk_import(db, pg_url):
    """Found measuring it: after `mem import` (ANALYZE counted the rows but not yet the expiry
    index) the plan made for any time read the whole table for the expired count: 160 ms a
    write at 100k instead of 0.1."""
    from a2e_mem.backends.postgres.backend import ENTRY, ENTRY_SETTINGS

    put(db, "ns", "semantic", [entry(f"e{i}", TEXTS[i % len(TEXTS)]) for i in range(3000)])
    admin_sql(pg_url, "ANALYZE mem_records")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for name, value in ENTRY_SETTINGS.items():
            conn.execute(f"SET {name} = {value}")
        plan = conn.execute(f"EXPLAIN {ENTRY}", {"ns": "ns", "now": clock.now()}, prepare=True).fetchall()
    text = "\n".join(row[0] for row in plan)
    assert "Seq Scan" not in text and "mem_records_expiring" in text


def test_a_write_replacing_one_record_reads_it_with_a_plan_postgresql_keeps(db):
    """The read of the one row a write replaces is by its whole key: PostgreSQL plans it five
    times, then keeps one plan (a list of ids was planned again for every write)."""
    target = put(db, "ns", "semantic", [entry("e", TEXTS[0])])
    for i in range(9):
        with db.lock("ns"):
            assert list(target.get_many(["e"], clock.now())) == ["e"]
            target.append({"op": "put", "recs": recs(db, "entries", [entry("e", TEXTS[i % len(TEXTS)])])})
    with db.db.connection() as conn:
        plans = conn.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
            "WHERE starts_with(statement, 'SELECT id, raw, size, terms, expires_at FROM')"
        ).fetchall()
    ((generic, custom),) = plans
    assert custom <= 5 and generic >= 4
    assert db.doctor() == []


def test_records_past_their_expiry_are_not_counted_at_a_write_s_entry(db):
    """What a write section reads at its entry (generic plan) leaves out the records past their
    expiry that no purge removed yet, and knows when the next one expires."""
    now = clock.now()
    put(db, "ns", "semantic", [entry(f"gone{i}", "cat", expires_at=now + 1) for i in range(3)])
    put(db, "ns", "semantic", [entry("later", "cat", expires_at=now + 50), entry("kept", "dog")])
    clock.set_offset(10)
    with db.lock("ns"):
        live, size = db.usage("ns", clock.now())
    target = db.scope("ns", "semantic", schema="entries")
    assert live == 2 and (live, size) == target.usage(clock.now())
    clock.set_offset(60)
    with db.lock("ns"):
        assert db.usage("ns", clock.now())[0] == 1


def test_a_schema_newer_than_the_code_is_refused_and_reported(db, pg_url):
    db.namespaces()
    admin_sql(pg_url, "UPDATE mem_schema SET version = version + 1")
    newer = open_postgres(pg_url, "hash")
    with pytest.raises(StoreUnavailable, match="newer than this mem"):
        newer.namespaces()
    findings = open_postgres(pg_url, "hash").doctor()
    assert len(findings) == 1 and findings[0]["where"] == "mem_schema"


# -- write sections ----------------------------------------------------------------------------


def test_lock_makes_read_modify_write_atomic_across_connections(pg_url):
    stores = [open_postgres(pg_url, "hash"), open_postgres(pg_url, "hash", pooled=True)]
    put(stores[0], "ns", "kv", [{"id": "counter", "n": 0}], schema="records")

    def bump(store):
        target = store.scope("ns", "kv")
        for _ in range(200):
            with store.lock("ns"):
                doc = target.get("counter", clock.now())
                doc = {"id": "counter", "n": doc["n"] + 1}
                target.append({"op": "put", "recs": [{"id": "counter", "doc": doc, "size": 20}]})

    threads = [threading.Thread(target=bump, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert stores[0].scope("ns", "kv").get("counter", clock.now())["n"] == 400
    for store in stores:
        store.close()


def test_a_block_that_raises_writes_nothing_and_nested_locks_join(db):
    target = db.scope("ns", "kv")
    with pytest.raises(RuntimeError), db.lock("ns"):
        target.append({"op": "put", "recs": [{"id": "a", "doc": {"id": "a"}, "size": 10}]})
        assert target.get("a", clock.now()) == {"id": "a"}  # the block reads its own write
        raise RuntimeError("boom")
    assert target.get("a", clock.now()) is None
    assert db.usage("ns", clock.now()) == (0, 0)
    other = db.scope("other", "kv")
    with db.lock("ns"), db.lock("other"), db.lock("ns"):
        target.append({"op": "put", "recs": [{"id": "a", "doc": {"id": "a"}, "size": 10}]})
        other.append({"op": "put", "recs": [{"id": "b", "doc": {"id": "b"}, "size": 10}]})
    assert target.get("a", clock.now()) and other.get("b", clock.now())


def test_read_only_refuses_the_lock(db):
    from a2e_mem.errors import Unauthorized

    db.read_only = True
    with pytest.raises(Unauthorized), db.lock("ns"):
        pass


def test_hostile_names_are_data(db, pg_url):
    names = ["it's", 'say "hi"', "back\\slash", "'; drop table mem_records; --", "日本語 ✓", "%s %(x)s {}", "a\nb"]
    for name in names:
        docs = [{"id": name, "value": name, "tags": [name]}]
        put(db, name, name, docs, name, name, schema="records")
    for name in names:
        target = db.scope(name, name, name, name)
        assert target.get(name, clock.now()) == {"id": name, "value": name, "tags": [name]}
        assert [s.descriptor["scope"] for s in db.scopes(name)] == [[name, name]]
        assert ids(target.search(clock.now(), Filters(tags=(name,)))) == [name]
    assert sorted(db.namespaces()) == sorted(names)
    assert admin_sql(pg_url, "SELECT count(*) FROM mem_records") == [(len(names),)]
    with pytest.raises(InvalidInput):
        db.lock("nul\x00name").__enter__()
    with pytest.raises(InvalidInput):
        db.scope("", "kv")


def test_records_come_back_exactly_as_written(db, pg_url):
    doc = {"id": "x", "zeta": 1, "alpha": {"b": 2.0, "a": 1e20}, "nul": "a\x00b", "big": 12345678901234567, "neg": -0.5}
    put(db, "ns", "json", [doc], schema="records")
    back = db.scope("ns", "json").get("x", clock.now())
    assert orjson.dumps(back) == orjson.dumps(doc)  # key order, float spelling, NUL characters
    assert list(back) == list(doc) and isinstance(back["alpha"]["a"], float)
    assert admin_sql(pg_url, "SELECT doc ->> 'nul' FROM mem_records") == [("a\ufffdb",)]  # jsonb cannot hold NUL


def test_the_system_namespace_is_kept_apart(db):
    put(db, SYSTEM, "sessions", [{"id": "s1"}], schema="records")
    assert db.scope(SYSTEM, "sessions").get("s1", clock.now()) == {"id": "s1"}
    assert db.namespaces() == []
    assert db.stats() == []


# -- reading -----------------------------------------------------------------------------------


def test_get_many_docs_order_and_usage(db):
    docs = [{"id": f"r{i}", "n": i} for i in range(5)]
    target = put(db, "ns", "todo", docs, schema="records")
    put(db, "ns", "todo", [{"id": "r1", "n": 100}], schema="records")  # an update keeps its place
    now = clock.now()
    assert [d["n"] for d in target.docs(now)] == [0, 100, 2, 3, 4]
    assert target.get_many(["r1", "r4", "nope"], now) == {"r1": {"id": "r1", "n": 100}, "r4": {"id": "r4", "n": 4}}
    size = sum(len(orjson.dumps(d)) for d in [docs[0], {"id": "r1", "n": 100}, *docs[2:]])
    assert target.usage(now) == (5, size) == db.usage("ns", now)
    with db.lock("ns"):
        target.append({"op": "del", "ids": ["r0", "r0", "missing"]})
    assert target.usage(now)[0] == 4 and db.usage("ns", now)[0] == 4


def test_docs_pages_through_a_large_scope(db, monkeypatch):
    from a2e_mem.backends.postgres import scope as pg_scope

    monkeypatch.setattr(pg_scope, "PAGE", 7)
    target = put(db, "ns", "kv", [{"id": f"{i:03d}"} for i in range(30)], schema="records")
    assert [d["id"] for d in target.docs(clock.now())] == [f"{i:03d}" for i in range(30)]


# -- search ------------------------------------------------------------------------------------

TEXTS = [
    "the cat sat on the warm mat",
    "dogs chase cats around the garden",
    "quantum physics lecture notes on entanglement",
    "a cat and a dog share a bowl",
    "recipe for a warm lentil soup",
    "the physics of cats landing on their feet",
]


def test_search_contract_and_parity_with_the_files_backend(db):
    docs = [entry(f"e{i}", text, tags=["even"] if i % 2 == 0 else []) for i, text in enumerate(TEXTS)]
    target = put(db, "ns", "semantic", docs)
    now = clock.now()
    query = "cat physics"
    qvec = db.embed([query])[0]
    parts = target.search(now, Filters(), qvec, query, k=2)
    assert sum(p.total for p in parts) == len(TEXTS)  # counted before any cut
    relevance = {p.doc(i)["id"]: float(p.relevance[i]) for p in parts for i in range(len(p.rows))}
    assert all(0.0 <= r <= 1.0 for r in relevance.values())
    full = target.search(now, Filters(), qvec, query, k=2, exhaustive=True)
    assert sorted(ids(full)) == sorted(d["id"] for d in docs)

    # the files db, given the same records, ranks them with the same relevance
    from a2e_mem.backends.files.search import Filters as FileFilters
    from a2e_mem.backends.files.search import search as files_search

    shard = db.memory_scope("entries")
    shard.append({"op": "put", "recs": recs(db, "entries", docs)})
    expected = {}
    for part in files_search(shard, now, FileFilters(), qvec, query, k=10, exhaustive=True):
        for i in range(len(part.rows)):
            expected[part.doc(i)["id"]] = float(part.relevance[i])
    exhaustive = {p.doc(i)["id"]: float(p.relevance[i]) for p in full for i in range(len(p.rows))}
    assert exhaustive.keys() == expected.keys()
    for rid, value in expected.items():
        assert exhaustive[rid] == pytest.approx(value, abs=2e-3), rid

    tagged = target.search(now, Filters(tags=("even",)), qvec, query, k=1)
    assert sum(p.total for p in tagged) == 3 and set(ids(tagged)) <= {"e0", "e2", "e4"}
    only = target.search(now, Filters(ids=("e3", "nope")), qvec, query, k=5)
    assert ids(only) == ["e3"] and only[0].total == 1


def test_search_without_a_query_ranks_by_score(db):
    docs = [entry(f"e{i}", f"note {i}", score=s) for i, s in enumerate([0.2, 0.9, 0.5])]
    target = put(db, "ns", "semantic", docs)
    (part,) = target.search(clock.now(), Filters())
    assert part.total == 3 and np.all(part.relevance == 1.0)
    assert [part.doc(int(i))["id"] for i in np.argsort(-part.rank)] == ["e1", "e2", "e0"]


def test_index_path_agrees_with_exact_search(db, monkeypatch):
    words = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "lambda", "theta", "zeta"]
    rng = np.random.default_rng(7)
    docs = [entry(f"e{i}", " ".join(rng.choice(words, 4))) for i in range(400)]
    target = put(db, "ns", "semantic", docs[:350])
    put(db, "ns", "episodic", docs[:50], "agent")  # another scope of the same table
    assert db.build_index(force=True)
    put(db, "ns", "semantic", docs[350:])  # written after the index: searched exactly
    (row,) = [r for r in db.stats("ns") if r["kind"] == "semantic"]
    assert (row["indexed"], row["pending"]) == (350, 50)
    monkeypatch.setattr(pg_search, "EXACT_MAX", 100)
    now = clock.now()
    hits = 0
    for query in ["alpha beta", "omega sigma kappa", "theta", "zeta delta gamma"]:
        qvec = db.embed([query])[0]
        (indexed,) = target.search(now, Filters(), qvec, query, k=10)
        (exact,) = target.search(now, Filters(), qvec, query, k=10, exhaustive=True)
        assert indexed.path == "index" and exact.path == "exact" and indexed.total == exact.total == 400
        ids = [indexed.doc(i)["id"] for i in range(len(indexed.rows))]  # a BM25 leader near too: once
        assert len(ids) == len(set(ids))
        top = {exact.doc(int(i))["id"] for i in np.argsort(-exact.relevance, kind="stable")[:10]}
        found = {indexed.doc(int(i))["id"] for i in np.argsort(-indexed.relevance, kind="stable")[:10]}
        hits += len(top & found)
    assert hits >= 0.9 * 40
    # a scope too small a share of the table for the index: searched exactly
    monkeypatch.setattr(pg_search, "EXACT_MAX", 10)
    monkeypatch.setattr(pg_search, "EF_MAX", 100)
    small = db.scope("ns", "episodic", "agent", schema="entries")
    (part,) = small.search(now, Filters(), db.embed(["alpha"])[0], "alpha", k=10)
    assert part.path == "exact" and part.total == 50


def test_a_search_of_several_scopes_gives_each_scope_its_own_parts(db, monkeypatch):
    """`PostgresBackend.search` reads the scopes' statistics together (one round trip), then
    searches each: every part is its own scope's, in the scopes' order, as each scope's own
    search gives it; an empty scope, a scope of no vector and a scope of another backend (a
    session's working tier, in the process) among them take their places."""
    words = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "lambda", "theta", "zeta"]
    rng = np.random.default_rng(3)
    semantic = put(db, "ns", "semantic", [entry(f"s{i}", " ".join(rng.choice(words, 4))) for i in range(300)])
    episodic = put(db, "ns", "episodic", [entry(f"p{i}", " ".join(rng.choice(words, 3))) for i in range(40)], "a")
    assert db.build_index(force=True)
    empty = db.scope("ns", "episodic", "nobody", schema="entries")
    working = db.memory_scope()
    working.append({"op": "put", "recs": recs(db, "entries", [entry("w1", "alpha beta gamma")])})
    monkeypatch.setattr(pg_search, "EXACT_MAX", 100)  # the semantic scope by the index, the episodic exactly
    now, query = clock.now(), "alpha omega"
    qvec = db.embed([query])[0]
    scopes = [episodic, empty, working, semantic]
    together = db.search(scopes, now, Filters(), qvec, query, 20)
    alone = [part for scope in scopes for part in scope.search(now, Filters(), qvec, query, 20)]
    assert [p.path for p in together] == [p.path for p in alone] == ["exact", "exact", "index"]
    assert [p.total for p in together] == [p.total for p in alone] == [40, 1, 300]
    for mine, theirs in zip(together, alone, strict=True):
        assert ids([mine]) == ids([theirs])
        assert mine.relevance.tolist() == pytest.approx(theirs.relevance.tolist(), abs=1e-6)
    assert db.search([empty], now, Filters(), qvec, query, 20) == []


def test_an_index_search_in_a_write_section_asks_the_index_for_enough_rows(db, monkeypatch):
    """In a write section the candidates statement runs in its transaction, with its own
    `hnsw.ef_search` still: at pgvector's default of 40 the index gives fewer rows than a search
    of k=20 asks (60), and the search fell back to scoring every row exactly."""
    rng = np.random.default_rng(5)
    words = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "lambda"]
    target = put(db, "ns", "semantic", [entry(f"e{i}", " ".join(rng.choice(words, 4))) for i in range(300)])
    assert db.build_index(force=True)
    monkeypatch.setattr(pg_search, "EXACT_MAX", 100)
    qvec = db.embed(["alpha omega"])[0]
    with db.lock("ns"):
        with db.db.connection() as conn:  # as on a big table: the planner reads the HNSW index
            conn.execute("SET LOCAL enable_seqscan = off")
            conn.execute("SET LOCAL enable_sort = off")
        (part,) = target.search(clock.now(), Filters(), qvec, "alpha omega", k=20)
    assert part.path == "index" and part.total == 300


def indexed(server):
    """The HNSW index's watermark on record (0: none)."""
    server.refresh(force=True)
    return int((server._index or {}).get("upto", 0))


def test_index_path_finds_the_rows_of_common_terms_that_rank_first(db, monkeypatch):
    """Query terms too common for the rarest-terms budget still bring the rows their words rank
    first, as the files backend's postings do: rows that hold a query word in a short text, whose
    meaning is elsewhere (many other words), are found even when no query term is rare."""
    rng = np.random.default_rng(11)
    filler = [f"w{i}" for i in range(300)]
    docs = []
    for i in range(600):
        words = list(rng.choice(filler, 12))
        if i % 3 == 0:
            words[rng.integers(12)] = "harbor"
        if i % 4 == 0:
            words[rng.integers(12)] = "lantern"
        docs.append(entry(f"e{i}", " ".join(words)))
    target = put(db, "ns", "semantic", docs)
    assert db.build_index(force=True)
    monkeypatch.setattr(pg_search, "EXACT_MAX", 100)
    monkeypatch.setattr(pg_search, "LEXICAL_BUDGET", 20)  # both words are common: no term is rare
    now = clock.now()
    for query in ["harbor lantern", "harbor", "lantern harbor w7"]:
        qvec = db.embed([query])[0]
        (indexed,) = target.search(now, Filters(), qvec, query, k=10)
        (exact,) = target.search(now, Filters(), qvec, query, k=10, exhaustive=True)
        assert indexed.path == "index"
        top = [exact.doc(int(i))["id"] for i in np.argsort(-exact.relevance, kind="stable")[:10]]
        found = [indexed.doc(int(i))["id"] for i in np.argsort(-indexed.relevance, kind="stable")[:10]]
        assert found == top, query


def test_a_row_of_every_query_word_is_found_past_the_raw_bm25_leaders(db, monkeypatch):
    """As on the files backend (tests/test_index.py): lexical relevance is capped at 1, so a row
    of every query word in a short text can be first while more rows have a higher raw BM25 and
    more have a higher cosine; the index path ranks the rarest terms' rows by relevance."""
    docs = [entry(f"near{i}", "harbor harbor") for i in range(200)]
    docs += [entry(f"rep{i}", "harbor " * 6 + "lantern " * 6 + "ballast " * 20) for i in range(200)]
    docs += [entry("target", "harbor lantern quay dock pier")]
    target = put(db, "ns", "semantic", docs)
    assert db.build_index(force=True)
    monkeypatch.setattr(pg_search, "EXACT_MAX", 100)
    monkeypatch.setattr(pg_search, "MIN_FETCH", 8)
    query = "harbor lantern"
    qvec = db.embed([query])[0]
    firsts = []
    for exhaustive in (True, False):
        (part,) = target.search(clock.now(), Filters(), qvec, query, k=2, exhaustive=exhaustive)
        best = int(np.argmax(part.relevance))
        firsts.append((part.path, part.doc(best)["id"], float(part.relevance[best])))
    assert firsts == [("exact", "target", firsts[0][2]), ("index", "target", firsts[0][2])]


def test_term_sets_are_the_smallest_past_the_floor():
    limits = {"a": 3.0, "b": 2.0, "c": 1.0, "d": 1.0}
    assert pg_search.term_sets(limits, 0.0) == [["a"], ["b"], ["c"], ["d"]]
    assert pg_search.term_sets(limits, 2.5) == [["a"], ["b", "c"], ["b", "d"]]
    assert pg_search.term_sets(limits, 6.5) == [["a", "b", "c", "d"]]
    assert pg_search.term_sets(limits, 7.5) == []
    # every set of terms past the floor holds one of them, and none holds another
    import itertools

    for floor in [0.0, 0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5]:
        sets = [set(found) for found in pg_search.term_sets(limits, floor)]
        for n in range(1, 5):
            for chosen in itertools.combinations(limits, n):
                past = sum(limits[t] for t in chosen) > floor
                assert past == any(found <= set(chosen) for found in sets), (floor, chosen)
        assert not any(a < b for a in sets for b in sets)


@pytest.mark.parametrize("indexed", [False, True])
def test_rows_of_relevance_zero_rank_newest_first_as_on_files(db, monkeypatch, indexed):
    """When fewer than `fetch` rows score above 0 (a query whose cosine is 0 or less with most
    rows, and no word in them), the first entries include rows of relevance 0, newest first (the
    files backend's order of ties), not whichever rows the cosine put first."""
    rng = np.random.default_rng(3)
    filler = [f"w{i}" for i in range(40)]
    docs = [entry(f"e{i}", " ".join(rng.choice(filler, 6)), updated_at=1000.0 + (i * 37) % 200) for i in range(200)]
    target = put(db, "ns", "semantic", docs)
    if indexed:
        assert db.build_index(force=True)
        monkeypatch.setattr(pg_search, "EXACT_MAX", 50)
    vectors = db.embed([d["content"] for d in docs])
    away = -np.asarray(vectors, dtype=np.float32).sum(axis=0)
    now = clock.now()
    for qvec in [away / np.linalg.norm(away), np.zeros_like(away)]:
        (part,) = target.search(now, Filters(), qvec, "unheard", k=10)
        (exact,) = target.search(now, Filters(), qvec, "unheard", k=10, exhaustive=True)
        assert part.path == ("index" if indexed and np.any(qvec) else "exact")
        assert np.count_nonzero(exact.relevance) < 32  # fewer than `fetch` above 0: relevance-0 rows rank

        def first(c):
            return [c.doc(int(i))["id"] for i in np.lexsort((-c.updated, -c.relevance))[:10]]

        assert first(part) == first(exact)


def test_query_vector_of_another_dimension_ranks_by_words(db):
    target = put(db, "ns", "semantic", [entry("e0", "lentil soup"), entry("e1", "cat")])
    (part,) = target.search(clock.now(), Filters(), np.ones(8, dtype=np.float32), "lentil", k=5)
    scores = {part.doc(i)["id"]: part.relevance[i] for i in range(len(part.rows))}
    assert scores["e0"] > 0 and scores["e1"] == 0


# -- expiry, gc, stats, doctor -----------------------------------------------------------------


def test_expired_records_are_hidden_then_purged(db, pg_url):
    now = clock.now()
    docs = [entry("old", "cat", expires_at=now + 5), entry("new", "cat")]
    target = put(db, "ns", "semantic", docs)
    clock.set_offset(10)
    later = clock.now()
    assert target.get("old", later) is None and target.get("new", later) is not None
    assert [d["id"] for d in target.docs(later)] == ["new"]
    assert ids(target.search(later, Filters())) == ["new"]
    assert ids(target.search(later, Filters(), db.embed(["cat"])[0], "cat")) == ["new"]
    assert db.usage("ns", later)[0] == 1 and target.usage(later)[0] == 1
    (row,) = db.stats("ns")
    assert (row["entries"], row["expired"]) == (1, 1)
    assert db.checkpoint() == 2  # one scope purged, and the index built
    assert admin_sql(pg_url, "SELECT id FROM mem_records") == [("new",)]
    assert db.usage("ns", later)[0] == 1
    assert db.doctor() == []  # the counters followed the purge


def test_doctor_finds_and_repairs_drifted_statistics(db, pg_url):
    put(db, "ns", "semantic", [entry(f"e{i}", TEXTS[i]) for i in range(4)])
    assert db.doctor() == []
    admin_sql(pg_url, "UPDATE mem_usage SET entries = entries + 3")
    admin_sql(pg_url, "UPDATE mem_scopes SET n_docs = 99")
    admin_sql(pg_url, "DELETE FROM mem_terms WHERE term = 'cat'")
    findings = db.doctor()
    where = sorted(f["where"] for f in findings)
    assert where == ["mem_scopes[ns/semantic]", "mem_terms[ns/semantic]", "mem_usage[ns]"]
    assert all(not f["fixed"] for f in findings)
    assert all(f["fixed"] for f in db.doctor(repair=True))
    assert db.doctor() == []
    assert PASSWORD not in str(findings)


def test_a_write_after_a_deleted_statistics_row_counts_the_table(db, pg_url):
    put(db, "ns", "semantic", [entry(f"e{i}", TEXTS[i]) for i in range(2)])
    admin_sql(pg_url, "DELETE FROM mem_scopes")
    admin_sql(pg_url, "DELETE FROM mem_usage")
    assert db.usage("ns", clock.now())[0] == 2  # counted from the rows, not read as zero
    assert [s.kind for s in db.scopes("ns")] == ["semantic"]
    put(db, "ns", "semantic", [entry("e2", TEXTS[2])])
    assert admin_sql(pg_url, "SELECT n_docs FROM mem_scopes") == [(3,)]
    assert admin_sql(pg_url, "SELECT entries FROM mem_usage") == [(3,)]
    assert db.doctor() == []


def test_a_write_section_that_read_its_rows_keeps_the_statistics_exact(db):
    """A write replacing rows the section read (`get_many`) takes their statistics from that
    read, without reading them again: expired rows, missing ones, rows written twice."""
    now = clock.now()
    target = put(db, "ns", "semantic", [entry("a", TEXTS[0], expires_at=now + 5), entry("b", TEXTS[1])])
    clock.set_offset(10)
    later = clock.now()
    with db.lock("ns"):
        assert sorted(target.get_many(["a", "b", "c"], later)) == ["b"]  # "a" expired, "c" missing
        target.append({"op": "put", "recs": recs(db, "entries", [entry("a", TEXTS[2]), entry("c", TEXTS[3])])})
        target.append({"op": "put", "recs": recs(db, "entries", [entry("c", TEXTS[4]), entry("b", TEXTS[5])])})
        target.append({"op": "del", "ids": ["b"]})
        target.append({"op": "put", "recs": recs(db, "entries", [entry("b", TEXTS[0])])})
    assert db.doctor() == []
    assert db.usage("ns", later) == target.usage(later) and db.usage("ns", later)[0] == 3


def test_the_usage_read_at_a_write_sections_entry_stays_exact(db):
    now = clock.now()
    put(db, "ns", "kv", [{"id": "a", "expires_at": now + 5}, {"id": "b"}], schema="records")
    other = put(db, "ns", "todo", [], schema="records")
    with db.lock("ns"):
        assert db.usage("ns", clock.now())[0] == 2
        clock.set_offset(10)  # "a" expires within the section: the figure read at its entry no longer holds
        assert db.usage("ns", clock.now())[0] == 1
        other.append({"op": "put", "recs": recs(db, "records", [{"id": "t"}])})
        assert db.usage("ns", clock.now())[0] == 2  # the section's own write counts
    assert db.usage("ns", clock.now())[0] == 2


def test_a_role_that_may_not_run_the_flush_commits_synchronously(db, pg_url):
    """The early release of a write section's locks needs pg_logical_emit_message (see
    backend.py); where it is revoked, writes commit synchronously and work all the same."""
    role = f"mem_no_flush_{os.urandom(4).hex()}"
    put(db, "ns", "kv", [{"id": "a"}], schema="records")  # the owner's: tables, embedder
    admin_sql(pg_url, "REVOKE EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, text) FROM PUBLIC")
    admin_sql(pg_url, f'CREATE ROLE "{role}" LOGIN')
    try:
        admin_sql(pg_url, f'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO "{role}"')
        admin_sql(pg_url, f'GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO "{role}"')
        limited = open_postgres(with_user(pg_url, role, None), "hash")
        put(limited, "ns", "kv", [{"id": "b"}], schema="records")
        assert db.db.early_release and not limited.db.early_release
        assert sorted(d["id"] for d in limited.scope("ns", "kv").docs(clock.now())) == ["a", "b"]
        limited.close()
        assert db.doctor() == []
    finally:
        admin_sql(pg_url, f'DROP OWNED BY "{role}"')
        admin_sql(pg_url, f'DROP ROLE "{role}"')


def test_doctor_reports_an_unreachable_store_as_a_finding():
    store = open_postgres(f"postgresql://u:{PASSWORD}@127.0.0.1:1/db?connect_timeout=3", "hash")
    (finding,) = store.doctor()
    assert PASSWORD not in str(finding) and "***" in finding["where"] and finding["unavailable"] is True
    # at the shell: the finding, and exit 7 as every command gives an unreachable store (was 1: audit 32c)
    import subprocess
    import sys

    url = f"postgresql://u:{PASSWORD}@127.0.0.1:1/db?connect_timeout=3"
    done = subprocess.run(
        [sys.executable, "-m", "a2e_mem.cli.main", "--store", url, "doctor"], capture_output=True, text=True
    )
    assert done.returncode == 7 and "make the database reachable" in done.stdout and PASSWORD not in done.stdout


def test_delete_namespace_and_drop_scope(db):
    put(db, "ns", "kv", [{"id": "a"}], schema="records")
    put(db, "ns", "working", [entry("w", "scratch")], "session-1")
    db.drop_scope("ns", "working", "session-1")
    assert [s.kind for s in db.scopes("ns")] == ["kv"]
    assert db.usage("ns", clock.now())[0] == 1
    assert db.delete_namespace("ns") == {"namespace": "ns", "deleted": True}
    assert db.namespaces() == [] and db.scopes("ns") == []
    with pytest.raises(NotFound):
        db.delete_namespace("ns")


def test_reindex_changes_the_dimension_and_other_processes_notice(db, pg_url):
    docs = [entry(f"e{i}", text) for i, text in enumerate(TEXTS)]
    target = put(db, "ns", "semantic", docs)
    other = open_postgres(pg_url, None)
    assert other.recorded_embedder() == {"embedder": "hash", "dim": 64}
    epoch = other.epoch
    result = db.reindex("hash:32")
    assert result == {"embedder": "hash:32", "dim": 32, "shards": 1, "entries": len(TEXTS)}
    assert admin_sql(pg_url, "SELECT DISTINCT vector_dims(vec) FROM mem_records") == [(32,)]
    with other.lock("ns"):  # a writer's lock entry reads the embedder again
        pass
    assert other.epoch == epoch + 1 and other.recorded_embedder()["dim"] == 32
    query = "cat physics"
    parts = target.search(clock.now(), Filters(), get_embedder("hash:32").embed([query])[0], query, k=3)
    assert max(parts[0].vector) > 0.1 and parts[0].total == len(TEXTS)
    assert db.doctor() == []
    other.close()


def test_a_process_reads_its_records_again_after_another_reindexed(db, pg_url):
    """The records of a query's pool are read by a prepared statement: a reindex changes the
    vector column's dimension, and a result of another type would fail its cached plan."""
    put(db, "ns", "semantic", [entry(f"e{i}", text) for i, text in enumerate(TEXTS)])
    other = open_postgres(pg_url, None)
    scope = other.scope("ns", "semantic", schema="entries")
    seqs = [seq for (seq,) in admin_sql(pg_url, "SELECT seq FROM mem_records ORDER BY seq")]
    for _ in range(7):  # past the runs after which PostgreSQL may keep one plan
        assert {vec.dimensions() for _, vec in scope.load_rows(seqs).values()} == {64}
    db.reindex("hash:32")
    assert {vec.dimensions() for _, vec in scope.load_rows(seqs).values()} == {32}
    other.close()


def _vectors_match_texts(url, embedder):
    """Whether every searchable record's vector is `embedder`'s vector of its text as stored."""
    rows = admin_sql(url, "SELECT raw, vec::text FROM mem_records WHERE kind = 'semantic'")
    texts = [SCHEMAS["entries"].text(orjson.loads(raw)) for raw, _ in rows]
    stored = np.array([orjson.loads(vec) for _, vec in rows], dtype=np.float32)
    return bool(rows) and np.allclose(stored, get_embedder(embedder).embed(texts), atol=1e-3)  # as text: 6 digits


def test_a_reindex_lets_other_processes_read_and_write_while_it_runs(db, pg_url):
    """Outside audit 32c (high): the reindex held the records table locked for its whole run,
    and every request of every machine waited for it. Now, while it embeds, another process
    reads and writes (a lock wait would time out: `lock_timeout`), with the old embedder; the
    record it changes and the one it adds end with the new embedder's vectors of their texts."""
    put(db, "ns", "semantic", [entry(f"e{i}", text) for i, text in enumerate(TEXTS)])
    put(db, "ns2", "semantic", [entry(f"f{i}", text) for i, text in enumerate(TEXTS)])
    other = open_postgres(pg_url, "hash")
    with other.db.connection() as conn:
        conn.execute("SET lock_timeout = '2s'")
    during = []

    def meanwhile(done, total):
        if done == 1:  # one scope embedded, one to go
            query = "cat physics"
            parts = other.scope("ns", "semantic", schema="entries").search(
                clock.now(), Filters(), get_embedder("hash").embed([query])[0], query, k=3
            )
            during.append(max(parts[0].vector))
            put(other, "ns", "semantic", [entry("e0", "a violin concert in the park"), entry("new", "lentil soup")])

    db.reindex("hash:32", progress=meanwhile)
    assert during and during[0] > 0.1  # found by the old vectors, as the reindex ran
    assert admin_sql(pg_url, "SELECT DISTINCT vector_dims(vec) FROM mem_records") == [(32,)]
    assert _vectors_match_texts(pg_url, "hash:32")
    assert admin_sql(pg_url, "SELECT count(*) FROM mem_records WHERE id = 'new'") == [(1,)]
    assert db.doctor() == []
    other.close()


def test_an_interrupted_reindex_leaves_the_store_whole_and_doctor_drops_what_it_left(db, pg_url):
    put(db, "ns", "semantic", [entry(f"e{i}", text) for i, text in enumerate(TEXTS)])
    put(db, "ns2", "semantic", [entry(f"f{i}", text) for i, text in enumerate(TEXTS)])

    def killed(done, total):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        db.reindex("hash:32", progress=killed)
    assert db.recorded_embedder() == {"embedder": "hash", "dim": 64}
    assert _vectors_match_texts(pg_url, "hash")
    found = db.doctor()
    assert [f["where"] for f in found] == ["mem_records"] and "interrupted" in found[0]["problem"], found
    assert db.doctor(repair=True)[0]["fixed"] and db.doctor() == []
    db.reindex("hash:32")
    assert _vectors_match_texts(pg_url, "hash:32") and db.doctor() == []


def test_the_reindex_swap_gives_way_to_a_long_read_and_writers_go_on(db, pg_url, monkeypatch):
    """A read that holds the table (a long export; in outside audit 33a, a client whose other
    connection waited behind the swap: a cycle PostgreSQL cannot see) kept the swap waiting with
    the embedder lock held, and every writer with it (8 minutes in the audit). Each attempt now
    waits a bounded time; meanwhile a writer (lock_timeout 3 s) is answered."""
    from a2e_mem.backends.postgres import reindex

    put(db, "ns", "semantic", [entry(f"e{i}", text) for i, text in enumerate(TEXTS)])
    monkeypatch.setattr(reindex, "SWITCH_WAIT", "100ms")
    other = open_postgres(pg_url, "hash")
    with other.db.connection() as conn:
        conn.execute("SET lock_timeout = '3s'")
    reader = psycopg.connect(pg_url)  # not autocommit: its read keeps the table until it ends
    built, written = reindex.build_next_index, []

    def write_then_end_the_read():
        try:
            put(other, "ns", "semantic", [entry("during", "written while the swap waited")])
            written.append(True)
        finally:
            reader.rollback()

    def build_then_read(conn, upto):
        built(conn, upto)
        reader.execute("SELECT count(*) FROM mem_records")
        threading.Timer(1.0, write_then_end_the_read).start()

    monkeypatch.setattr(reindex, "build_next_index", build_then_read)
    db.reindex("hash:32")
    reader.close()
    assert written, "a writer waited out the swap"
    assert _vectors_match_texts(pg_url, "hash:32") and db.doctor() == []
    other.close()


def test_concurrent_bulk_puts_keep_the_statistics_exact(pg_url):
    stores = [open_postgres(pg_url, "hash") for _ in range(3)]

    def write(i, store):
        for batch in range(5):
            docs = [entry(f"e{(i * 7 + batch * 3 + j) % 40}", TEXTS[(i + j) % 6]) for j in range(10)]
            put(store, "ns", "semantic", docs)

    threads = [threading.Thread(target=write, args=(i, s)) for i, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert stores[0].doctor() == []
    for store in stores:
        store.close()


def test_the_vector_column_and_its_index_come_with_the_first_vectors(db, pg_url):
    column = "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'mem_records'::regclass AND attname = 'vec'"
    indexes = "SELECT indexname FROM pg_indexes WHERE indexname LIKE 'mem_records_vec%%' ORDER BY 1"
    put(db, "ns", "kv", [{"id": "a"}], schema="records")
    assert db.recorded_embedder() is None and admin_sql(pg_url, column) == [(-1,)]
    put(db, "ns", "semantic", [entry(f"e{i}", TEXTS[i]) for i in range(3)])
    assert admin_sql(pg_url, column) == [(64,)] and admin_sql(pg_url, indexes) == []  # a write never waits for HNSW
    assert db.checkpoint() == 1  # `mem gc` builds the index of the rows written so far
    (name,) = admin_sql(pg_url, indexes)[0]
    put(db, "ns", "semantic", [entry("e9", "late")])
    assert db.build_index(force=True)  # a newer watermark replaces the index
    assert admin_sql(pg_url, indexes) != [(name,)] and len(admin_sql(pg_url, indexes)) == 1
    (row,) = [r for r in db.stats("ns") if r["kind"] == "semantic"]
    assert (row["indexed"], row["pending"]) == (4, 0)
    assert db.doctor() == []


def test_an_index_finished_after_its_builder_ended_is_adopted_not_built_again(db, pg_url, monkeypatch):
    """A server that exits (or a builder that is killed) while its CREATE INDEX CONCURRENTLY runs
    leaves the statement running in PostgreSQL; it completes with nobody left to record it. The
    next build records that index rather than building the same one again."""
    indexes = "SELECT indexname FROM pg_indexes WHERE indexname LIKE 'mem_records_vec%%' ORDER BY 1"
    put(db, "ns", "semantic", [entry(f"e{i}", TEXTS[i]) for i in range(3)])
    assert db.checkpoint() == 1
    put(db, "ns", "semantic", [entry(f"e{i}", TEXTS[i]) for i in range(3, 6)])
    (upto,) = admin_sql(pg_url, "SELECT max(seq) FROM mem_records")[0]
    orphan = f"mem_records_vec_{upto}"  # what the interrupted build made, as `build_vector_index` makes it
    admin_sql(
        pg_url,
        f"CREATE INDEX {orphan} ON mem_records USING hnsw (vec vector_cosine_ops) "
        f"WITH (m = 16, ef_construction = 64) WHERE seq <= {upto}",
    )
    newer = f"mem_records_vec_{upto + 1}"  # a newer build that failed: invalid, never adopted
    admin_sql(pg_url, f"CREATE INDEX {newer} ON mem_records (id)")
    admin_sql(pg_url, f"UPDATE pg_index SET indisvalid = false WHERE indexrelid = '{newer}'::regclass")
    builds = []
    monkeypatch.setattr(sch, "build_vector_index", lambda *args, **kw: builds.append(args))
    assert db.build_index()  # not due by its row count: it adopts
    assert builds == []
    assert admin_sql(pg_url, indexes) == [(orphan,)]  # the older index and the invalid one dropped
    assert admin_sql(pg_url, "SELECT value FROM mem_meta WHERE key = 'vector_index'") == [({"upto": upto, "dim": 64},)]
    (row,) = [r for r in db.stats("ns") if r["kind"] == "semantic"]
    assert (row["indexed"], row["pending"]) == (6, 0)
    found = db.scope("ns", "semantic", schema="entries").search(
        clock.now(), Filters(), np.asarray(db.embed([TEXTS[4]])[0]), "", k=3
    )
    assert "e4" in ids(found)
    assert not db.build_index()  # nothing left to adopt or to build


def test_bm25_of_all_candidates_at_once_is_the_one_row_formula():
    """`bm25_scores` (every candidate at once) gives what `bm25` gives row by row: rows without a
    query term, repeats, a term the weights do not hold."""
    import random
    from collections import Counter

    rng = random.Random(5)
    weights = {t: rng.uniform(0.1, 9.0) for t in ("cat", "physic", "warm", "tax")}
    rows = []
    for seq in range(200):
        held = [rng.choice([*weights, "other"]) for _ in range(rng.randint(0, 4))] if rng.random() < 0.6 else None
        rows.append((seq, 0.5, 0.0, rng.randint(1, 40), held))
    expected = [
        pg_search.bm25(Counter(t for t in held if t in weights), weights, length, 7.5) if held else 0.0
        for _, _, _, length, held in rows
    ]
    assert pg_search.bm25_scores(rows, weights, 7.5) == pytest.approx(expected, rel=1e-12, abs=0)


def test_sql_leaders_rank_by_relevance_as_the_python_formula(db):
    from a2e_mem.backends.base import fuse
    from a2e_mem.lexical import idf, normaliser

    docs = [entry(f"e{i}", text) for i, text in enumerate(TEXTS * 3)]
    docs = [{**d, "id": f"e{i}", "key": {"k": i}} for i, d in enumerate(docs)]
    target = put(db, "ns", "semantic", docs)
    query = ["cat", "physic", "warm"]
    qvec = db.embed([" ".join(query)])[0]
    where, params = pg_search._where(target, clock.now(), Filters())
    params.update(q=qvec, dim=len(qvec))
    ((n_docs, total_len, dfs, _, _, _, _),) = pg_search._statistics(
        [(target, where, {**params, "qt": query})], Filters()
    )
    weights = {t: idf(n_docs, df) for t, df in zip(query, dfs, strict=True)}
    avgdl = total_len / n_docs
    values = pg_search._lexical_values(weights, avgdl) | {"rare": query, "fetch": 100}
    statement = pg_search._leaders_sql(where, len(weights))
    with db.db.connection() as conn:
        seqs = [r[0] for r in conn.execute(statement, {**params, **values})]
        rows = conn.execute(f"SELECT seq, terms, vec FROM mem_records WHERE {pg_search.KEY}", params).fetchall()
    from collections import Counter

    def relevance(terms, vec):
        bm25 = pg_search.bm25(Counter(t for t in terms if t in weights), weights, len(terms), avgdl)
        lexical = np.float32(min(bm25 / normaliser(weights.values()), 1.0))
        return float(fuse(np.array([np.dot(vec.to_numpy(), qvec)], dtype=np.float32), np.array([lexical]))[0])

    expected = {seq: relevance(terms, vec) for seq, terms, vec in rows if set(terms) & set(query)}
    scores = [expected[s] for s in seqs]
    assert len(seqs) == len(expected)
    assert all(a >= b - 1e-6 for a, b in zip(scores, scores[1:], strict=False)), scores


def test_gc_waits_for_a_build_under_way_elsewhere_and_returns_with_the_index_built(db, pg_url):
    put(db, "ns", "semantic", [entry(f"e{i}", TEXTS[i]) for i in range(6)])
    assert db.stats("ns")[0]["pending"] == 6
    with psycopg.connect(pg_url, autocommit=True) as other:  # another process's build, under way
        other.execute("SELECT pg_advisory_lock(%s, %s)", sch.BUILD_LOCK)
        gc = threading.Thread(target=db.checkpoint)
        gc.start()
        gc.join(0.5)
        assert gc.is_alive()  # waiting for that build, not returning with the rows unindexed
        other.execute("SELECT pg_advisory_unlock(%s, %s)", sch.BUILD_LOCK)  # it ended without building
    gc.join(30)
    assert not gc.is_alive() and db.stats("ns")[0]["pending"] == 0


def test_a_one_shot_command_has_the_index_built_when_it_closes(pg_url, monkeypatch):
    from a2e_mem.backends.postgres import backend as pg_backend

    monkeypatch.setattr(pg_backend, "BUILD_MIN", 5)
    store = open_postgres(pg_url, "hash")
    put(store, "ns", "semantic", [entry(f"e{i}", TEXTS[i]) for i in range(6)])
    assert store.stats("ns")[0]["pending"] == 6
    store.close()  # starts a detached builder, and does not wait for it
    again = open_postgres(pg_url, "hash")
    deadline = time.monotonic() + 60
    while again.stats("ns")[0]["pending"] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert (again.stats("ns")[0]["indexed"], again.stats("ns")[0]["pending"]) == (6, 0)
    again.close()
    server = open_postgres(pg_url, "hash", pooled=True)  # a server builds in a thread of its own
    put(server, "ns", "semantic", [entry(f"f{i}", TEXTS[i]) for i in range(6)])
    server._builder.join(timeout=60)
    assert (server.stats("ns")[0]["indexed"], server.stats("ns")[0]["pending"]) == (12, 0)
    server.close()


def test_writers_during_a_reindex_end_with_vectors_of_the_new_dimension(pg_url, tmp_path, monkeypatch):
    from a2e_mem.service import MemoryService

    monkeypatch.delenv("MEM_EMBEDDER")
    first = MemoryService(tmp_path / "a", embedder="hash", store=pg_url)
    first.store(first.scope("ns", "agent"), [{"key": {"k": "seed"}, "content": "seed", "tier": "semantic"}])
    first.close()
    writer = MemoryService(tmp_path / "b", store=pg_url)  # takes the recorded embedder, whatever it is
    stop = threading.Event()
    failures = []
    written = [0]

    def write():
        i = 0
        while not stop.is_set():
            written[0] = i
            try:
                writer.store(
                    writer.scope("ns", "agent"), [{"key": {"k": i}, "content": f"note {i}", "tier": "semantic"}]
                )
            except Exception as exc:  # noqa: BLE001 - collected, asserted below
                failures.append(exc)
                return
            i += 1

    thread = threading.Thread(target=write)
    thread.start()
    admin = open_postgres(pg_url, None)
    try:
        for name in ("hash:32", "hash:48", "hash"):
            before = written[0]
            while written[0] < before + 3 and thread.is_alive():  # writes before and after each reindex
                stop.wait(0.01)
            admin.reindex(name)
    finally:
        stop.set()
        thread.join()
    assert not failures and written[0] >= 9
    assert admin_sql(pg_url, "SELECT DISTINCT vector_dims(vec) FROM mem_records") == [(64,)]
    assert admin_sql(pg_url, "SELECT count(*) FROM mem_records WHERE vec IS NULL") == [(0,)]
    assert admin.doctor() == []
    writer.close()
    admin.close()


def test_the_time_filter_reads_at_and_falls_back_to_created_at_in_rows_older_than_the_column(db, pg_url):
    """Rows written before migration 2 have no `at`: --since/--until date them by created_at."""
    dated = entry("dated", {"text": "the garden party", "date": "2023-06-10"}, created_at=5e9)
    plain = entry("plain", "the garden party", created_at=1.7e9)
    target = put(db, "ns", "semantic", [dated, plain])
    june = Filters(since=1685577600.0, until=1688169600.0)  # [2023-06-01, 2023-07-01)
    assert ids(target.search(clock.now(), june)) == ["dated"]
    admin_sql(pg_url, "UPDATE mem_records SET at = NULL")
    assert ids(target.search(clock.now(), june)) == []
    assert ids(target.search(clock.now(), Filters(since=4e9))) == ["dated"]
    assert ids(target.search(clock.now(), Filters(until=4e9))) == ["plain"]


def test_an_index_build_ended_by_a_deadlock_is_tried_again(db, monkeypatch):
    """Found running the fleet stress test (MEM_STRESS=1): CREATE INDEX CONCURRENTLY waits for
    every older transaction, an ANALYZE or a reindex waiting in turn on the build makes a
    deadlock, PostgreSQL ends one side, and `mem gc` failed (exit 7) when it was the build."""
    from a2e_mem.backends.postgres.backend import PostgresBackend

    put(db, "ns", "semantic", [entry(f"e{i}", f"note {i}") for i in range(20)])
    real = PostgresBackend._build_index
    attempts = []

    def ended_once(self, force, wait):
        attempts.append(1)
        if len(attempts) == 1:
            raise StoreUnavailable("PostgreSQL store: deadlock detected", {"sqlstate": "40P01"})
        return real(self, force, wait)

    monkeypatch.setattr(PostgresBackend, "_build_index", ended_once)
    assert db.build_index(force=True, wait=True)
    assert len(attempts) == 2
    (row,) = [r for r in db.stats("ns") if r["kind"] == "semantic"]
    assert row["indexed"] == 20


def test_doctor_leaves_an_index_under_construction_alone(db, pg_url):
    """An index is invalid while its build runs: while a build holds its lock, doctor reports no
    interrupted build and `--repair` drops nothing (outside audit 32a: a build under way after an
    import was reported interrupted, exit 1, and a repair said it dropped it); once no build
    runs, the invalid index is what an interrupted build left: reported, then dropped."""
    put(db, "ns", "semantic", [entry(f"e{i}", TEXTS[i]) for i in range(3)])
    assert db.checkpoint() == 1
    building = "mem_records_vec_999999"
    admin_sql(pg_url, f"CREATE INDEX {building} ON mem_records (id)")
    admin_sql(pg_url, f"UPDATE pg_index SET indisvalid = false WHERE indexrelid = '{building}'::regclass")
    present = f"SELECT count(*) FROM pg_indexes WHERE indexname = '{building}'"

    def interrupted(findings):
        return [f for f in findings if building in f.get("problem", "")]

    with psycopg.connect(pg_url, autocommit=True) as builder:
        builder.execute("SELECT pg_advisory_lock(%s, %s)", sch.BUILD_LOCK)  # as `_build_index` holds it
        assert interrupted(db.doctor()) == []
        assert interrupted(db.doctor(repair=True)) == [] and admin_sql(pg_url, present) == [(1,)]
        # released now: a closed session's locks go only when its server process has ended
        builder.execute("SELECT pg_advisory_unlock(%s, %s)", sch.BUILD_LOCK)
    (found,) = interrupted(db.doctor())
    assert "interrupted index build" in found["problem"]
    assert interrupted(db.doctor(repair=True))[0]["repair"] == "dropped"
    assert admin_sql(pg_url, present) == [(0,)]


def test_a_retrieve_whose_ranked_record_is_deleted_before_it_is_read_searches_again(pg_url, tmp_path, monkeypatch):
    """Another process's forget between a search's ranking and its reading of the records: the
    retrieve, a read, is done again and answers (outside audit 32c: it failed, retryable, and the
    Python API said the store was unreachable); a record that keeps vanishing is, past a few
    tries, the retryable error to send the request again."""
    from a2e_mem.backends.base import RecordGone
    from a2e_mem.backends.postgres.scope import PgScope
    from a2e_mem.service import MemoryService

    svc = MemoryService(tmp_path, embedder="hash", store=pg_url)
    try:
        session = svc.scope("ns")
        svc.store(session, [{"key": f"k{i}", "content": f"harbor note {i}", "tier": "semantic"} for i in range(5)])
        real = PgScope.load_rows
        vanished = {"left": 1}

        def load_rows(self, seqs, vectors=True):
            found = real(self, seqs, vectors)
            if vanished["left"] > 0 and found:  # as if a forget had deleted the first row meanwhile
                vanished["left"] -= 1
                found.pop(next(iter(found)))
            return found

        monkeypatch.setattr(PgScope, "load_rows", load_rows)
        found = svc.retrieve(session, query="harbor note", limit=5)
        assert found["total"] == 5 and len(found["entries"]) == 5 and vanished["left"] == 0
        vanished["left"] = 10**6  # gone at every read
        with pytest.raises(RecordGone) as caught:
            svc.retrieve(session, query="harbor note", limit=5)
        assert caught.value.retryable and "send the request again" in caught.value.message
    finally:
        svc.close()


def test_a_deadlock_is_told_as_a_conflict_to_send_again(db):
    """It was 'cannot reach the server: deadlock detected' (outside audit 33a)."""
    failure = db.db.unavailable(psycopg.errors.DeadlockDetected("deadlock detected"))
    assert "cannot reach" not in failure.message and "conflict" in failure.message, failure.message
    assert failure.retryable


def test_a_killed_builder_gives_the_build_lock_back_soon(pg_url):
    """A builder (`mem reindex`, an index build) killed in a long statement: its server process
    notices within `schema.CLIENT_CHECK` and ends, releasing BUILD_LOCK. It ran the statement (an
    index build: minutes) to its end before, and `mem doctor` meanwhile took the reindex's
    leftovers for one under way and said the store was healthy (outside audit 34b)."""
    import subprocess
    import sys

    builder = (
        "import sys, psycopg\n"
        "from a2e_mem.backends.postgres import schema as sch\n"
        "conn = psycopg.connect(sys.argv[1], autocommit=True)\n"
        "conn.execute('SELECT pg_advisory_lock(%s, %s)', sch.BUILD_LOCK)\n"
        "sch.watch_client(conn)\n"
        "print('locked', flush=True)\n"
        "conn.execute('SELECT pg_sleep(300)')\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", builder, pg_url], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"locked"
    time.sleep(0.5)  # into its long statement
    proc.kill()
    proc.wait()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        deadline = time.monotonic() + 30  # the statement alone lasts 300 s
        while not conn.execute("SELECT pg_try_advisory_lock(%s, %s)", sch.BUILD_LOCK).fetchone()[0]:
            assert time.monotonic() < deadline, "the killed builder's server process still holds BUILD_LOCK"
            time.sleep(0.2)
        conn.execute("SELECT pg_advisory_unlock(%s, %s)", sch.BUILD_LOCK)
