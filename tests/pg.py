"""A PostgreSQL with pgvector for the tests, so that one `pytest` does everything on a fresh machine.

`MEM_TEST_PG_URL` points the suite at an existing server (its role must be allowed to create
databases); without it, `pgserver` starts a private PostgreSQL (with pgvector) in a temporary
folder, once per session, listening on a unix socket only, and removes it at the end.

Each test gets a fresh database (`pg_url`), dropped after it, so tests never see each other's
records. A conftest uses them with `from tests.pg import pg_server, pg_url  # noqa: F401`.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest

_numbers = itertools.count(1)


def with_database(url: str, name: str) -> str:
    """`url` naming database `name` instead of its own."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "dbname"]
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, urlencode(query, safe="/"), parts.fragment))


def with_user(url: str, user: str, password: str | None) -> str:
    """`url` logging in as `user` (with `password`, if given)."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    auth = user if password is None else f"{user}:{password}"
    return urlunsplit((parts.scheme, f"{auth}@{host}", parts.path, parts.query, parts.fragment))


class PgServer:
    """The server of the session: its admin URL, and (for a private pgserver) its data folder."""

    def __init__(self, url: str, pgdata: Path | None) -> None:
        self.url = url
        self.pgdata = pgdata

    def admin(self):  # type: ignore[no-untyped-def]
        import psycopg

        return psycopg.connect(self.url, autocommit=True)

    def create_database(self, owner: str | None = None, extension: bool = False) -> tuple[str, str]:
        """A new empty database: (name, URL for the admin role)."""
        from psycopg import sql

        name = f"mem_test_{os.getpid()}_{next(_numbers)}"
        with self.admin() as conn:
            statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
            if owner:
                statement += sql.SQL(" OWNER {}").format(sql.Identifier(owner))
            conn.execute(statement)
        url = with_database(self.url, name)
        if extension:
            import psycopg

            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        return name, url

    def drop_database(self, name: str) -> None:
        from psycopg import sql

        with self.admin() as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))

    def require_passwords(self, role: str) -> bool:
        """Make the server ask `role` for its password (pg_hba.conf of a private server; an
        existing server is taken as it is). False when that cannot be arranged."""
        if self.pgdata is None:
            return False
        hba = self.pgdata / "pg_hba.conf"
        line = f"local all {role} scram-sha-256\nhost all {role} 127.0.0.1/32 scram-sha-256\n"
        text = hba.read_text()
        if line not in text:
            hba.write_text(line + text)  # the first matching line wins
            with self.admin() as conn:
                conn.execute("SELECT pg_reload_conf()")
        return True


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    url = os.environ.get("MEM_TEST_PG_URL", "").strip()
    if url:
        yield PgServer(url, None)
        return
    import pgserver

    folder = Path(tempfile.mkdtemp(prefix="mempg-"))  # short: the socket's path has a length limit
    server = pgserver.get_server(folder / "data", cleanup_mode="delete")
    private = PgServer(server.get_uri(), folder / "data")
    with private.admin() as conn:  # a throwaway server: no need to survive a power cut
        for setting in ("fsync", "synchronous_commit", "full_page_writes"):
            conn.execute(f"ALTER SYSTEM SET {setting} = off")
        conn.execute("SELECT pg_reload_conf()")
    try:
        yield private
    finally:
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """The URL of a fresh database of its own for each test (dropped after it)."""
    name, url = pg_server.create_database()
    yield url
    pg_server.drop_database(name)
