"""`mem reindex` on PostgreSQL, online: the requests of every machine go on while it runs.

Re-embedding every record in one transaction that changes the vector column's type held the
records table locked for the whole run: every request waited, reads too (an outside audit, 32c:
17 to 28 s a request at 28k rows). Instead the new vectors go into a column of their own, and
only the last step, which swaps the columns, locks the table, for as long as a few catalog
changes and the records written meanwhile take:

1. `prepare`: what an interrupted reindex left is dropped; a column NEXT of the new dimension is
   added, with a trigger that empties it in any row a writer changes afterwards (a brief lock).
2. `fill`: every searchable scope's records are embedded into NEXT, a batch per statement; a
   batch writes only rows unchanged since it read them (`xmin`), so a vector never stands for an
   older text. Requests go on, with the old embedder and the old vectors.
3. The HNSW index of NEXT is built CONCURRENTLY (reads and writes go on), then the rows written
   meanwhile are embedded, still outside any lock.
4. `switch`, one short transaction holding EMBEDDER_LOCK exclusively (the writers under way end
   first, the next ones wait): the last rows written are embedded, the old column (and its
   indexes) dropped, NEXT renamed to `vec`, the new embedder and index recorded. A request that
   embedded with the old embedder then meets the new one as after any reindex (`backend.py`).

The whole run holds BUILD_LOCK (a session lock), so no index build runs meanwhile, and `mem
doctor` can tell a reindex under way from one that was interrupted. Interrupted before step 4,
the store is whole on its old embedder; the next reindex, or `mem doctor --repair`, drops what
it left (`drop_leftovers`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ...embed import get_embedder
from ...schemas import SCHEMAS
from . import schema as sch
from .scope import KEY, load

NEXT = "vec_next"  # the column the new vectors go into
NEXT_INDEX = "mem_records_next"  # + "_<upto>": its HNSW index, renamed by `switch`
TRIGGER, STALE = "mem_records_next_stale", "mem_next_stale"  # the trigger and its function
BATCH = 1000  # records embedded a statement
INDEXED = [name for name, s in SCHEMAS.items() if s.indexed]
BUILD_POLL = 0.2
SWITCH_RETRIES = 5

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
    with conn.transaction():
        conn.execute(f"DROP TRIGGER IF EXISTS {TRIGGER} ON mem_records")
        conn.execute(f"DROP FUNCTION IF EXISTS {STALE}()")
        conn.execute(f"ALTER TABLE mem_records DROP COLUMN IF EXISTS {NEXT}")


def prepare(conn: Any, dim: int) -> None:
    from psycopg import sql

    with conn.transaction():
        conn.execute(sql.SQL("ALTER TABLE mem_records ADD COLUMN {} vector({})").format(
            sql.Identifier(NEXT), sql.Literal(int(dim))
        ))  # fmt: skip
        conn.execute(STALE_FUNCTION)
        conn.execute(f"CREATE TRIGGER {TRIGGER} BEFORE UPDATE ON mem_records FOR EACH ROW EXECUTE FUNCTION {STALE}()")


def fill(conn: Any, key: dict[str, Any], embedder: Any, only_missing: bool = False) -> int:
    """Embed the scope's records into NEXT (only those without one: `only_missing`), a batch at
    a time. A row changed between a batch's read and its write is left empty (its `xmin`
    differs): the next pass, at the latest `switch`'s, embeds its new text."""
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
            f"UPDATE mem_records SET {NEXT} = u.vec FROM unnest(%(ids)s::text[], %(xmins)s::text[], "
            f"%(vecs)b::vector[]) AS u(id, xmin, vec) WHERE {KEY} AND mem_records.id = u.id "
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
    import psycopg
    from psycopg import sql
    from psycopg.types.json import Jsonb

    for attempt in range(SWITCH_RETRIES):
        try:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", sch.EMBEDDER_LOCK)  # exclusive: no writer runs
                embedded = sum(fill(conn, key, embedder, only_missing=True) for key in indexed_scopes(conn))
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
        except (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected):
            if attempt == SWITCH_RETRIES - 1:
                raise
            time.sleep(0.05 * (attempt + 1))
    return 0
