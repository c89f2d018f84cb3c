"""A PostgreSQL with pgvector for the tests, started by the tests themselves.

`MEM_TEST_PG_URL` points the suite at an existing server (its role must be allowed to create
databases, and pgvector must be installed there). Without it, the PyPI package `pgserver`
(PostgreSQL and pgvector in a wheel) starts a private server in a temporary folder, once per
test session, on a unix socket; it stops when the session ends. Each test gets a database of its
own (`fresh_database`, or the `pg_url` fixture, which drops it afterwards), so tests never see
each other's records. A conftest takes the fixtures with
`from tests.pg import pg_server, pg_url  # noqa: F401`.
"""

from __future__ import annotations

import atexit
import itertools
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest

_lock = threading.Lock()
_server: dict[str, str] = {}
_numbers = itertools.count(1)


def server_url() -> str:
    """The URL of the server's maintenance database, starting the private server if needed."""
    with _lock:
        if "url" not in _server:
            _server["url"] = os.environ.get("MEM_TEST_PG_URL") or _start_private_server()
        return _server["url"]


def _start_private_server() -> str:
    import pgserver
    import psycopg

    folder = tempfile.mkdtemp(prefix="mem-test-pg-")  # short: a socket's path has a length limit
    server = pgserver.get_server(folder, cleanup_mode="stop")
    atexit.register(shutil.rmtree, folder, True)
    url = server.get_uri()
    with psycopg.connect(url, autocommit=True) as conn:  # a throwaway server: no need to survive a power cut
        for setting in ("fsync", "synchronous_commit", "full_page_writes"):
            conn.execute(f"ALTER SYSTEM SET {setting} = off")  # constant names
        conn.execute("SELECT pg_reload_conf()")
    _server["pgdata"] = folder
    return url


def fresh_database(prefix: str = "mem_test") -> str:
    """A URL to a new, empty database on the test server."""
    import psycopg

    url = server_url()
    name = f"{prefix}_{os.getpid()}_{next(_numbers)}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')  # a name made here, not from input
    return with_database(url, name)


def with_database(url: str, name: str) -> str:
    """`url` pointing at database `name` (the path of a postgresql:// URL names the database)."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "dbname"]
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, urlencode(query, safe="/"), parts.fragment))


def database_of(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


def with_user(url: str, user: str, password: str | None) -> str:
    """`url` logging in as `user` (with `password`, if given)."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    auth = user if password is None else f"{user}:{password}"
    return urlunsplit((parts.scheme, f"{auth}@{host}", parts.path, parts.query, parts.fragment))


class PgServer:
    """The server of the session: its admin URL, and (for the private server) its data folder."""

    def __init__(self, url: str, pgdata: Path | None) -> None:
        self.url = url
        self.pgdata = pgdata

    def admin(self):  # type: ignore[no-untyped-def]
        import psycopg

        return psycopg.connect(self.url, autocommit=True)

    def create_database(self, owner: str | None = None, extension: bool = False) -> tuple[str, str]:
        """A new empty database: (name, URL for the admin role)."""
        from psycopg import sql

        url = fresh_database()
        name = database_of(url)
        if owner:
            with self.admin() as conn:
                conn.execute(
                    sql.SQL("ALTER DATABASE {} OWNER TO {}").format(sql.Identifier(name), sql.Identifier(owner))
                )
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
        """Make the server ask `role` for its password (pg_hba.conf of the private server; an
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
def pg_server() -> PgServer:
    url = server_url()
    return PgServer(url, Path(_server["pgdata"]) if "pgdata" in _server else None)


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """The URL of a fresh database of its own for each test (dropped after it)."""
    url = fresh_database()
    yield url
    pg_server.drop_database(database_of(url))


def records_containing(url: str, text: str) -> int:
    """How many rows of the store at `url` hold `text` anywhere (the PostgreSQL side of a test
    that greps the files backend's files for content that must be gone)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM mem_records WHERE strpos(raw, %s) > 0", [text]).fetchone()
    return int(row[0]) if row else 0
