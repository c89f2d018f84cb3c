"""A PostgreSQL with pgvector for the tests, started by the tests themselves.

`MEM_TEST_PG_URL` points the suite at an existing server (its role must be allowed to create
databases, and pgvector must be installed there). Without it, the PyPI package `pgserver`
(PostgreSQL and pgvector in a wheel) starts a private server in a temporary folder, once per
test session, on a unix socket; it stops when the session ends. Each test gets a database of its
own (`fresh_database`), so tests never see each other's records.
"""

from __future__ import annotations

import atexit
import itertools
import os
import shutil
import tempfile
import threading
from urllib.parse import urlsplit, urlunsplit

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

    folder = tempfile.mkdtemp(prefix="mem-test-pg-")
    server = pgserver.get_server(folder, cleanup_mode="stop")
    atexit.register(shutil.rmtree, folder, True)
    return server.get_uri()


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
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))
