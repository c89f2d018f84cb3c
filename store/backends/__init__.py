"""Backends: where a store keeps its records (see `base.py` for the seam they implement).

`open_backend` picks one from the store URL: none (the default) keeps the store in files under
`--home` (`files/`); `postgresql://...` keeps it in a PostgreSQL database with pgvector
(`postgres/`), shared by every machine that can reach it.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import InvalidInput
from .base import Backend

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def open_backend(
    url: str | None, home: Path, embedder: str | None = None, checkpoints: str | None = None, pooled: bool = False
) -> Backend:
    """The backend for store URL `url` (None or "": files under `home`). `pooled` asks a
    database backend for a connection pool (a long-lived server) rather than one connection.

    Nothing of a refused `url` is echoed: it may be a libpq keyword string with a `password=`,
    or a URL with a typo in its scheme. Keyword strings are refused rather than taken as
    PostgreSQL: one form of store URL is what the masking of passwords in messages, the
    detached index build and the documentation all read, and any keyword string has a URL
    form."""
    if not url:
        from .files.engine import Engine

        return Engine(home, embedder, checkpoints)
    if url.startswith(POSTGRES_SCHEMES):
        from .postgres import open_postgres

        return open_postgres(url, embedder, pooled)
    raise InvalidInput(
        "the store URL must start with postgresql:// or postgres:// (postgresql://user:password@host:port/dbname; "
        "a libpq keyword string such as `host=... dbname=...` is not accepted), or be empty for files "
        "under --home",
        {"field": "store"},
    )
