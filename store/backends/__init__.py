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
    database backend for a connection pool (a long-lived server) rather than one connection."""
    if not url:
        from .files.engine import Engine

        return Engine(home, embedder, checkpoints)
    if url.startswith(POSTGRES_SCHEMES):
        from .postgres import open_postgres

        return open_postgres(url, embedder, pooled)
    scheme = url.split(":", 1)[0] if ":" in url else url
    raise InvalidInput(
        f"unknown store URL scheme {scheme!r}: use postgresql://... (or no URL for files under --home)",
        {"field": "store"},
    )
