"""The PostgreSQL + pgvector backend: one store shared by every machine that reaches the database.

    schema.py       the tables and their migrations (read it first)
    connection.py   the pool or single connection, the thread's transaction, one-line errors
    backend.py      `PostgresBackend`: write sections (advisory locks), the recorded embedder
    scope.py        `PgScope`: reads, and batched writes keeping the statistics in step
    search.py       hybrid search ranked exactly as the files backend ranks (own BM25 statistics)
    maintenance.py  stats, gc, namespace deletes, doctor
    reindex.py      `mem reindex`, online: new vectors fill a column of their own, then swap in

Nothing here formats a value into SQL: every value is a parameter, and the few identifiers and
integers of the DDL go through `psycopg.sql`.
"""

from __future__ import annotations

from ..base import Backend


def open_postgres(url: str, embedder: str | None = None, pooled: bool = False) -> Backend:
    """The store in the database at `url`; `pooled` for a long-lived server (a small pool that
    survives a server restart), else one connection opened on first use. Nothing is connected
    yet: a one-shot command that fails its validation never reaches the server."""
    from .connection import check_pgvector, import_psycopg

    import_psycopg()  # psycopg or pgvector missing: a one-line error naming the extra, now
    check_pgvector()
    from .backend import PostgresBackend

    return PostgresBackend(url, embedder, pooled)
