"""`mem reindex` on PostgreSQL, online: the requests of every machine go on while it runs.

Re-embedding every record in one transaction that changes the vector column's type held the
records table locked for the whole run: every request waited, reads too (an outside audit, 32c:
17 to 28 s a request at 28k rows). Instead the new vectors go into a column of their own, and
only the last step, which swaps the columns, locks the table, for as long as a few catalog
changes and the records written meanwhile take:

1. `prepare`: what an interrupted reindex left is dropped; a column NEXT of the new dimension is
   added, with a trigger that empties it in any row a writer changes afterwards.
2. `fill`: every searchable scope's records are embedded into NEXT, a small batch per statement;
   a batch skips the rows a writer holds and those changed since it read them, so it never waits
   for a writer and a vector never stands for an older text. Requests go on, with the old
   embedder and the old vectors.
3. The HNSW index of NEXT is built CONCURRENTLY (reads and writes go on), then the rows written
   meanwhile are embedded, still outside any lock.
4. `switch`, one short transaction holding EMBEDDER_LOCK exclusively (the writers under way end
   first, the next ones wait): the last rows written are embedded, the old column (and its
   indexes) dropped, NEXT renamed to `vec`, the new embedder and index recorded. A request that
   embedded with the old embedder then meets the new one as after any reindex (`backend.py`).

Steps 1 and 4 change the catalog, which takes the whole table: each attempt waits at most
SWITCH_WAIT for its locks and gives way if it cannot have them (`briefly`). While a long read
holds the table, the requests queued behind an attempt wait with it (outside audit 33b: about 2 s
an attempt with a wait of 2 s), and the attempts come further apart, up to 5 s.

The whole run holds BUILD_LOCK (a session lock), so no index build runs meanwhile, and `mem
doctor` can tell a reindex under way from one that was interrupted. Interrupted before step 4,
the store is whole on its old embedder; the next reindex, or `mem doctor --repair`, drops what
it left (`drop_leftovers`).
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ...embed import get_embedder
from ...errors import StoreUnavailable
from ...schemas import SCHEMAS
from . import schema as sch
from .scope import KEY, load

NEXT = "vec_next"  # the column the new vectors go into
NEXT_INDEX = "mem_records_next"  # + "_<upto>": its HNSW index, renamed by `switch`
TRIGGER, STALE = "mem_records_next_stale", "mem_next_stale"  # the trigger and its function
BATCH = 100  # records embedded a statement (see `fill`)
INDEXED = [name for name, s in SCHEMAS.items() if s.indexed]
BUILD_POLL = 0.2
SWITCH_WAIT = "500ms"  # lock_timeout of an attempt to change the catalog (see `briefly`)
SWITCH_PATIENCE = 600  # seconds of attempts before the reindex gives up

STALE_FUNCTION = f"""
    CREATE OR REPLACE FUNCTION {STALE}() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF NEW.raw IS DISTINCT FROM OLD.raw THEN NEW.{NEXT} := NULL; END IF;
        RETURN NEW;
    END $$"""


def reindex(backend: Any, name: str, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    embedder = get_embedder(name)
    with backend.db.connection() as conn:
        while not conn.execute("SELECT pg_try_advisory_lock(%s, %s)", sch.BUILD_LOCK).fetchone()[0]:
            time.sleep(BUILD_POLL)  # polled: see `backend._build_index`
        try:
            sch.watch_client(conn)
            drop_leftovers(conn)
            prepare(conn, embedder.dim)
            scopes = indexed_scopes(conn)
            total = 0
            for done, key in enumerate(scopes, 1):
                total += fill(conn, key, embedder)
                if progress:
                    progress(done, len(scopes))
            upto = conn.execute("SELECT coalesce(max(seq), 0) FROM mem_records").fetchone()[0]
            build_next_index(conn, upto)
            for key in indexed_scopes(conn):  # what was written during the fill and the build
                fill(conn, key, embedder, only_missing=True)
            switched = switch(conn, embedder, upto)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s, %s)", sch.BUILD_LOCK)
    backend.refresh(force=True)
    backend._embedder = embedder
    return {"embedder": embedder.name, "dim": embedder.dim, "shards": len(scopes), "entries": total + switched}


def indexed_scopes(conn: Any) -> list[dict[str, Any]]:
    """The key of every scope whose records are searched by vector."""
    rows = conn.execute(
        "SELECT namespace, kind, scope, schema FROM mem_scopes WHERE schema = ANY(%s::text[]) "
        "ORDER BY namespace, kind, scope",
        [INDEXED],
    ).fetchall()
    return [{"ns": ns, "kind": kind, "scope": list(scope), "schema": schema} for ns, kind, scope, schema in rows]


def leftovers(conn: Any) -> bool:
    """Whether a reindex left its column (under way, or interrupted: see BUILD_LOCK)."""
    row = conn.execute(
        "SELECT 1 FROM pg_attribute WHERE attrelid = 'mem_records'::regclass AND attname = %s AND NOT attisdropped",
        [NEXT],
    ).fetchone()
    return row is not None


def drop_leftovers(conn: Any) -> None:
    """What an interrupted reindex left: its trigger and function, its column and the column's
    index (dropped with it). The caller holds BUILD_LOCK, so no reindex is under way."""

    def drop(conn: Any) -> None:
        conn.execute(f"DROP TRIGGER IF EXISTS {TRIGGER} ON mem_records")
        conn.execute(f"DROP FUNCTION IF EXISTS {STALE}()")
        conn.execute(f"ALTER TABLE mem_records DROP COLUMN IF EXISTS {NEXT}")

    briefly(conn, drop)


def prepare(conn: Any, dim: int) -> None:
    from psycopg import sql

    def add(conn: Any) -> None:
        conn.execute(sql.SQL("ALTER TABLE mem_records ADD COLUMN {} vector({})").format(
            sql.Identifier(NEXT), sql.Literal(int(dim))
        ))  # fmt: skip
        conn.execute(STALE_FUNCTION)
        conn.execute(f"CREATE TRIGGER {TRIGGER} BEFORE UPDATE ON mem_records FOR EACH ROW EXECUTE FUNCTION {STALE}()")

    briefly(conn, add)


def fill(conn: Any, key: dict[str, Any], embedder: Any, only_missing: bool = False, skip_locked: bool = True) -> int:
    """Embed the scope's records into NEXT (only those without one: `only_missing`), a batch at
    a time. A batch writes only the rows no writer holds (SKIP LOCKED: the reindex never waits
    for a writer, so it is never part of a deadlock) and that are unchanged since it read them
    (their `xmin`); a row so left out keeps NEXT empty, and the next pass, `switch`'s at the
    latest, embeds its text as it is then. A batch is small because writers of its rows wait for
    it: each row's new version also goes into the old HNSW index (about 2 ms at 100k rows).
    `switch` waits for the rows instead (`skip_locked` False): it must leave none empty."""
    schema = SCHEMAS[key["schema"]]
    missing = f" AND {NEXT} IS NULL" if only_missing else ""
    last, count = -1, 0
    while True:
        rows = conn.execute(
            f"SELECT seq, id, raw, xmin::text FROM mem_records WHERE {KEY} AND seq > %(last)s{missing} "
            f"ORDER BY seq LIMIT {BATCH}",
            {**key, "last": last},
        ).fetchall()
        if not rows:
            return count
        vectors = list(embedder.embed([schema.text(load(raw)) for _, _, raw, _ in rows]).astype(np.float32))
        conn.execute(
            f"WITH free AS (SELECT id FROM mem_records WHERE {KEY} AND id = ANY(%(ids)s::text[]) "
            f"FOR UPDATE{' SKIP LOCKED' if skip_locked else ''}) "
            f"UPDATE mem_records SET {NEXT} = u.vec FROM unnest(%(ids)s::text[], %(xmins)s::text[], "
            f"%(vecs)b::vector[]) AS u(id, xmin, vec) JOIN free USING (id) WHERE {KEY} AND mem_records.id = u.id "
            f"AND mem_records.xmin = u.xmin::xid",
            {**key, "ids": [r[1] for r in rows], "xmins": [r[3] for r in rows], "vecs": vectors},
        )
        count += len(rows)
        last = rows[-1][0]


def build_next_index(conn: Any, upto: int) -> None:
    from psycopg import sql

    conn.execute("SET maintenance_work_mem = '256MB'")
    conn.execute(
        sql.SQL(
            "CREATE INDEX CONCURRENTLY {name} ON mem_records USING hnsw ({column} vector_cosine_ops) "
            "WITH (m = {m}, ef_construction = {ef}) WHERE seq <= {upto}"
        ).format(
            name=sql.Identifier(f"{NEXT_INDEX}_{int(upto)}"),
            column=sql.Identifier(NEXT),
            m=sql.Literal(sch.HNSW_M),
            ef=sql.Literal(sch.HNSW_EF_CONSTRUCTION),
            upto=sql.Literal(int(upto)),
        )
    )
    conn.execute("RESET maintenance_work_mem")


def switch(conn: Any, embedder: Any, upto: int) -> int:
    """Step 4 (see the module's docstring); returns how many records it embedded."""
    return briefly(conn, lambda conn: _swap(conn, embedder, upto))


def briefly(conn: Any, work: Callable[[Any], Any]) -> Any:
    """`work(conn)` in a transaction whose every lock wait lasts at most SWITCH_WAIT, attempted
    again (after a pause) until it gets its locks in time. The catalog changes of a reindex take
    the records table whole, and the swap first takes the embedder lock: while one waits, every
    request queued behind it waits too. A long read may hold the table (an export, an exact
    search), or a client may wait in turn for a request queued behind us, a cycle PostgreSQL cannot
    see (outside audit 33a saw a swap so stuck for 8 minutes, every writer with it). Giving up the
    attempt lets them all go on until the next one."""
    import psycopg
    from psycopg import sql

    deadline = time.monotonic() + SWITCH_PATIENCE
    for attempt in itertools.count():
        try:
            with conn.transaction():
                conn.execute(sql.SQL("SET LOCAL lock_timeout = {}").format(sql.Literal(SWITCH_WAIT)))
                return work(conn)
        except (psycopg.errors.LockNotAvailable, psycopg.errors.DeadlockDetected):
            if time.monotonic() > deadline:
                raise StoreUnavailable(
                    f"mem reindex: for {SWITCH_PATIENCE} s other sessions held the records table (a long read, "
                    "such as an export?): the store is whole on its old embedder; run the reindex again"
                ) from None
            time.sleep(min(0.1 * 2**attempt, 5.0) * random.uniform(0.5, 1.0))
    raise AssertionError("unreachable")


def _swap(conn: Any, embedder: Any, upto: int) -> int:
    from psycopg import sql
    from psycopg.types.json import Jsonb

    conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", sch.EMBEDDER_LOCK)  # exclusive: no writer runs
    embedded = sum(fill(conn, key, embedder, True, skip_locked=False) for key in indexed_scopes(conn))
    conn.execute("LOCK TABLE mem_records IN ACCESS EXCLUSIVE MODE")  # readers wait from here
    conn.execute(f"DROP TRIGGER {TRIGGER} ON mem_records")
    conn.execute(f"DROP FUNCTION {STALE}()")
    conn.execute("ALTER TABLE mem_records DROP COLUMN vec")  # its HNSW indexes go with it
    conn.execute(f"ALTER TABLE mem_records RENAME COLUMN {NEXT} TO vec")
    conn.execute(
        sql.SQL("ALTER INDEX {} RENAME TO {}").format(
            sql.Identifier(f"{NEXT_INDEX}_{int(upto)}"), sql.Identifier(sch.index_name(upto))
        )
    )
    sch.record_vector_index(conn, upto, embedder.dim)
    conn.execute(
        "INSERT INTO mem_meta (key, value) VALUES ('embedder', %s) ON CONFLICT (key) DO UPDATE SET "
        "value = EXCLUDED.value",
        [Jsonb({"embedder": embedder.name, "dim": embedder.dim})],
    )
    return embedded
